"""The idempotency record: every ticket opsctl files, by idempotency key, in the state dir.

Before a ticket is sent its key is claimed (state `pending`, with our pid); after the channel
answers it is `filed` with the ticket id. A retried command finds `filed` and returns that ticket.
A `pending` record whose process is gone means a run was interrupted between sending and writing
down the answer: the desk asks the channel whether the ticket exists before sending again.
Also the list behind `opsctl ticket list`.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from opsctl.clock import format_rfc3339
from opsctl.errors import ConflictError
from opsctl.statefile import read_json, updating
from opsctl.tickets.base import FiledTicket, TicketRequest, TicketStatus

@dataclass(frozen=True)
class Claim:
    state: str  # new | filed | interrupted
    record: dict | None
    wire_key: str  # the idempotency key the channel sees


class TicketRecords:
    def __init__(self, path: Path):
        self.path = Path(path)

    def claim(self, request: TicketRequest, provider: str, *, now: float, window: float | None,
              stale_after: float) -> Claim:
        """Claim `request.key` for sending, or say why not to send: already filed, or interrupted.

        `window` (derived keys only): a filed record older than this is history, and the new ticket
        goes out under a fresh wire key (the channel would otherwise return the old ticket).
        """
        key = request.key
        with updating(self.path, _empty()) as data:
            records = data["records"]
            rec = records.get(key)
            wire_key = key
            if rec and rec["state"] == "filed":
                if window is None or now - rec["filed_at"] <= window:
                    return Claim("filed", dict(rec), rec.get("wire_key", key))
                # Same content long after: a new ticket. Keep the old record under another name.
                records[f"{key}@{int(rec['filed_at'])}"] = rec
                wire_key = f"{key}.{int(now)}"
                rec = None
            if rec and rec["state"] == "pending":
                age = time.time() - rec["started_at"]
                if _alive(rec) and age < stale_after:
                    raise ConflictError(
                        f"another opsctl (pid {rec['pid']}) is filing this ticket right now (key {key})",
                        hint="wait for it to finish, then `opsctl ticket list` shows the ticket",
                    )
                rec.update(pid=os.getpid(), host=socket.gethostname(), resumed_at=time.time())
                return Claim("interrupted", dict(rec), rec.get("wire_key", key))
            records[key] = {
                "key": key, "wire_key": wire_key, "state": "pending", "vendor": request.vendor, "provider": provider,
                "category": request.category, "severity": request.severity, "subject": request.title,
                "drill": request.drill, "started_at": time.time(), "pid": os.getpid(), "host": socket.gethostname(),
            }
            return Claim("new", None, wire_key)

    def complete(self, key: str, filed: FiledTicket) -> None:
        with updating(self.path, _empty()) as data:
            rec = data["records"].setdefault(key, {"key": key})
            rec.update(state="filed", ticket_id=filed.id, url=filed.url, filed_at=filed.filed_at,
                       outcome=filed.outcome, last_status=filed.status, provider=filed.provider, vendor=filed.vendor,
                       category=filed.category, severity=filed.severity, drill=filed.drill,
                       subject=filed.subject)
            rec.pop("pid", None)

    def abandon(self, key: str) -> None:
        """Nothing was filed: forget the claim so the next run sends afresh."""
        with updating(self.path, _empty()) as data:
            rec = data["records"].get(key)
            if rec and rec["state"] == "pending":
                del data["records"][key]

    def release(self, key: str) -> None:
        """The ticket may have been filed: keep the claim, marked interrupted, for the next run to check."""
        with updating(self.path, _empty()) as data:
            rec = data["records"].get(key)
            if rec and rec["state"] == "pending":
                rec["pid"] = None

    def note_status(self, key: str, status: TicketStatus) -> None:
        with updating(self.path, _empty()) as data:
            rec = data["records"].get(key)
            if rec and rec["state"] == "filed" and status.readable:
                rec.update(last_status=status.status, last_checked=time.time())

    def get(self, id_or_key: str) -> dict | None:
        records = read_json(self.path, _empty())["records"]
        if id_or_key in records:
            return records[id_or_key]
        matches = [r for r in records.values() if id_or_key in (r.get("ticket_id"), r.get("wire_key"))]
        return max(matches, key=lambda r: r.get("filed_at", 0)) if matches else None

    def list(self, vendor: str | None = None) -> list[dict]:
        rows: list[tuple[float, dict]] = []
        for rec in read_json(self.path, _empty())["records"].values():
            if vendor and rec.get("vendor") != vendor:
                continue
            rows.append((rec.get("filed_at") or rec.get("started_at") or 0, {
                "id": rec.get("ticket_id"), "state": rec["state"], "vendor": rec.get("vendor"),
                "provider": rec.get("provider"), "category": rec.get("category"), "severity": rec.get("severity"),
                "subject": rec.get("subject"), "drill": rec.get("drill", False), "status": rec.get("last_status"),
                "url": rec.get("url"), "idempotency_key": rec.get("wire_key", rec["key"]),
                "filed_at": format_rfc3339(rec["filed_at"]) if rec.get("filed_at") is not None else None,
            }))
        return [row for _, row in sorted(rows, key=lambda r: r[0], reverse=True)]


def _empty() -> dict:
    return {"version": 1, "records": {}}


def _alive(rec: dict) -> bool:
    """Is the process that claimed this record still running (on this host)?"""
    pid = rec.get("pid")
    if not pid or rec.get("host") != socket.gethostname():
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
