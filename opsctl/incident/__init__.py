"""The incident: the automation's unit of response and its only durable record (docs/decisions/0046-the-incident-shape.md,
docs/decisions/0200-incident-record.md).

`record.py` the typed record, `grouping.py` which incident an alert joins and the keys derived from
it (id, PagerDuty dedup key, ticket idempotency key), `store.py` the `IncidentStore` protocol and
its one implementation on a state store, `file.py` and `kubernetes.py` the two stores it runs on.
"""
