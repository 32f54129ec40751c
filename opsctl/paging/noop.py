"""The no-op for `--dry-run`: nothing leaves the machine.

PagerDuty requests are built inside the `pagerduty` client, so the only faithful way to show the
exact request is to let the real client build it and stop it at the transport. `DryRunTransport`
keeps every request (rendered with secrets redacted) and answers the way PagerDuty would, with a
byte-stream body (the REST client reads `response.elapsed`, which needs a streamed response).
"""

from __future__ import annotations

import json

from opsctl.remote import Redactor, render_request

DRY_RUN_ID = "(dry-run)"


def make_dry_run_transport(redactor: Redactor, secret_notes: dict[str, str]):
    import httpx2

    class DryRunTransport(httpx2.BaseTransport):
        def __init__(self):
            self.requests: list[dict] = []

        def handle_request(self, request: "httpx2.Request") -> "httpx2.Response":
            body = request.read()
            self.requests.append(
                render_request(request.method, str(request.url), dict(request.headers), body,
                               redactor=redactor, secret_notes=secret_notes)
            )
            status, answer = _answer(request.method, request.url.path, body)
            content = b"" if answer is None else json.dumps(answer).encode()
            headers = {"content-type": "application/json"} if answer is not None else {}
            return httpx2.Response(status, headers=headers, stream=httpx2.ByteStream(content), request=request)

    return DryRunTransport()


def _answer(method: str, path: str, body: bytes) -> tuple[int, dict | None]:
    data = json.loads(body) if body else {}
    if method == "POST" and path.endswith("/v2/enqueue"):
        return 202, {"status": "success", "message": "Event processed (dry run: not sent)",
                     "dedup_key": data.get("dedup_key") or DRY_RUN_ID}
    if method == "POST" and path.endswith("/v2/change/enqueue"):
        return 202, {"status": "success", "message": "Change event processed (dry run: not sent)"}
    if method == "POST" and path.endswith("/maintenance_windows"):
        window = dict(data.get("maintenance_window", {}))
        window["id"] = DRY_RUN_ID
        return 201, {"maintenance_window": window}
    if method == "DELETE":
        return 204, None
    return 400, {"error": {"message": "dry run: only changes are simulated", "code": 0}}
