"""A loopback fake of Jira Service Management (customer requests) plus the platform search and issue
endpoints opsctl reads, checking auth and request shape.

Cloud auth is `Basic base64("{email}:{token}")`; Data Center uses `Bearer {token}`. Like JSM, a
request type that does not exist is a 400, one the account may not use is a 403.
"""

from __future__ import annotations

import base64
import itertools
import re
import time
from datetime import datetime, timezone

from tests.fakes.https import FakeHTTPSServer, Request

PRIORITIES = ("Highest", "High", "Medium", "Low", "Lowest")


def jira_time(ts: float) -> dict:
    dt = datetime.fromtimestamp(ts, tz=timezone.utc)
    return {"iso8601": dt.strftime("%Y-%m-%dT%H:%M:%S+0000"), "epochMillis": int(ts * 1000),
            "friendly": dt.strftime("%d/%b/%y %I:%M %p")}


class FakeJira(FakeHTTPSServer):
    service = "jira"

    def __init__(self, ca, *, email: str | None, token: str, service_desk_id: str = "10",
                 request_types=("25", "26", "27"), forbidden_request_types=()):
        super().__init__(ca)
        self.auth = (f"Basic {base64.b64encode(f'{email}:{token}'.encode()).decode()}" if email
                     else f"Bearer {token}")
        self.service_desk_id = service_desk_id
        self.request_types = set(request_types)
        self.forbidden = set(forbidden_request_types)
        self.issues: dict[str, dict] = {}
        self._n = itertools.count(1)

    def respond(self, key: str, *, agent: str, at: float, status: str = "In progress",
                request_type: str | None = None):
        with self.lock:
            issue = self.issues[key]
            issue["assignee"] = agent
            issue["status"] = status
            if request_type is not None:
                issue["requestTypeId"] = request_type
            issue["comments"].append({"id": str(next(self._n)), "body": "We are looking into it.", "public": True,
                                      "author": {"accountId": f"acc-{agent}", "displayName": agent},
                                      "created": jira_time(at)})

    def route(self, req: Request):
        if req.headers.get("authorization") != self.auth:
            return 401, {"errorMessages": ["You are not authenticated. Authentication required to perform this "
                                           "operation."]}, {}
        path = req.path
        if req.method == "POST" and path == "/rest/servicedeskapi/request":
            return self._create(req)
        if req.method == "GET" and path in ("/rest/api/3/search/jql", "/rest/api/2/search"):
            m = re.fullmatch(r'labels = "([^"]+)" ORDER BY created ASC', req.q("jql") or "")
            if not m:
                return 400, {"errorMessages": [f"unsupported JQL {req.q('jql')!r}"]}, {}
            found = [i for i in self.issues.values() if m.group(1) in i["labels"]]
            issues = [{"key": i["key"], "fields": {"created": i["created"]["iso8601"][:-5] + ".000+0000",
                                                    "status": {"name": i["status"]}}} for i in found]
            return 200, {"issues": issues[: int(req.q("maxResults", "50"))]}, {}
        m = re.fullmatch(r"/rest/servicedeskapi/request/([A-Z]+-\d+)(/comment)?", path)
        if req.method == "GET" and m:
            issue = self.issues.get(m.group(1))
            if issue is None:
                return 404, {"errorMessage": "Request does not exist or you do not have permission to see it."}, {}
            if m.group(2):
                return 200, {"size": len(issue["comments"]), "values": issue["comments"], "isLastPage": True}, {}
            return 200, self._request_view(issue), {}
        m = re.fullmatch(r"/rest/api/2/issue/([A-Z]+-\d+)", path)
        if req.method == "GET" and m:
            issue = self.issues.get(m.group(1))
            if issue is None:
                return 404, {"errorMessages": ["Issue does not exist or you do not have permission to see it."]}, {}
            assignee = {"displayName": issue["assignee"]} if issue["assignee"] else None
            return 200, {"key": issue["key"], "fields": {"assignee": assignee}}, {}
        return 404, {"errorMessages": ["not found"]}, {}

    def _create(self, req: Request):
        if req.headers.get("content-type") != "application/json":
            return 415, {"errorMessage": "Unsupported Media Type"}, {}
        body = req.json or {}
        if body.get("serviceDeskId") != self.service_desk_id:
            return 404, {"errorMessage": f"Service desk {body.get('serviceDeskId')} does not exist"}, {}
        rt = body.get("requestTypeId")
        if rt not in self.request_types:
            return 400, {"errorMessage": "The request type you are trying to use does not exist."}, {}
        if rt in self.forbidden:
            return 403, {"errorMessage": "You do not have permission to create a request of this type."}, {}
        fields = body.get("requestFieldValues") or {}
        errors = []
        if not fields.get("summary"):
            errors.append("Summary is required.")
        if not isinstance(fields.get("labels", []), list) or any(" " in label for label in fields.get("labels", [])):
            errors.append("Labels must be a list of words without spaces.")
        priority = (fields.get("priority") or {}).get("name")
        if priority is not None and priority not in PRIORITIES:
            errors.append(f"Specify a valid priority (got {priority}).")
        if errors:
            return 400, {"errorMessage": " ".join(errors)}, {}
        key = f"SUP-{next(self._n)}"
        issue = {"key": key, "issueId": str(10000 + len(self.issues)), "requestTypeId": rt,
                 "serviceDeskId": self.service_desk_id, "summary": fields["summary"],
                 "description": fields.get("description", ""), "labels": fields.get("labels", []),
                 "priority": priority, "fields": fields, "status": "Waiting for support",
                 "created": jira_time(time.time()), "assignee": None, "comments": []}
        self.issues[key] = issue
        return 201, self._request_view(issue), {}

    def _request_view(self, issue: dict) -> dict:
        return {"issueId": issue["issueId"], "issueKey": issue["key"], "requestTypeId": issue["requestTypeId"],
                "serviceDeskId": issue["serviceDeskId"], "createdDate": issue["created"],
                "reporter": {"accountId": "acc-opsctl", "displayName": "opsctl bot"},
                "currentStatus": {"status": issue["status"], "statusDate": issue["created"]},
                "_links": {"web": f"{self.url}/servicedesk/customer/portal/1/{issue['key']}"}}
