"""What opsctl has paged: dedup key -> summary, provider, last action, in the state dir.

`opsctl page status` without a key lists these; drills and automation find their dedup keys here.
`RecordedPager` wraps any Pager and notes every trigger, acknowledge and resolve it sends.
"""

from __future__ import annotations

from pathlib import Path

from opsctl.clock import format_rfc3339
from opsctl.paging.base import ChangeEvent, PageEvent, PageResult
from opsctl.statefile import read_json, updating

MAX_RECORDS = 500  # oldest are dropped: the file stays small and the list stays readable


class PageRecords:
    def __init__(self, path: Path):
        self.path = Path(path)

    def note(self, result: PageResult) -> None:
        if result.dry_run or not result.dedup_key:
            return
        with updating(self.path, {"pages": {}}) as data:
            pages = data["pages"]
            rec = pages.setdefault(result.dedup_key, {"dedup_key": result.dedup_key, "first_at": result.at})
            rec.update({"provider": result.provider, "last_action": result.action, "last_at": result.at})
            for key in ("summary", "incident_id"):
                if getattr(result, key):
                    rec[key] = getattr(result, key)
            if result.action == "trigger":
                rec["drill"] = result.drill
            if len(pages) > MAX_RECORDS:
                for old in sorted(pages, key=lambda k: pages[k]["last_at"])[: len(pages) - MAX_RECORDS]:
                    del pages[old]

    def list(self) -> list[dict]:
        pages = read_json(self.path, {"pages": {}})["pages"].values()
        return [
            {"dedup_key": p["dedup_key"], "provider": p.get("provider"), "summary": p.get("summary"),
             "drill": p.get("drill", False), "incident_id": p.get("incident_id"), "last_action": p.get("last_action"),
             "first_at": format_rfc3339(p["first_at"]), "last_at": format_rfc3339(p["last_at"])}
            for p in sorted(pages, key=lambda p: p["last_at"], reverse=True)
        ]


class RecordedPager:
    """A Pager that notes what it sends in PageRecords; everything else passes through."""

    def __init__(self, inner, records: PageRecords):
        self.inner = inner
        self.records = records
        self.name = inner.name

    def trigger(self, event: PageEvent) -> PageResult:
        return self._noted(self.inner.trigger(event))

    def acknowledge(self, dedup_key: str, **kw) -> PageResult:
        return self._noted(self.inner.acknowledge(dedup_key, **kw))  # kw: the local pager's by=

    def resolve(self, dedup_key: str, **kw) -> PageResult:
        return self._noted(self.inner.resolve(dedup_key, **kw))

    def change_event(self, change: ChangeEvent) -> PageResult:
        return self.inner.change_event(change)

    def get_incident(self, key: str):
        return self.inner.get_incident(key)

    def oncall(self):
        return self.inner.oncall()

    def create_maintenance_window(self, start: float, end: float, description: str):
        return self.inner.create_maintenance_window(start, end, description)

    def delete_maintenance_window(self, window_id: str) -> PageResult:
        return self.inner.delete_maintenance_window(window_id)

    def __getattr__(self, name):  # provider extras, e.g. LocalPager.escalate for drills
        return getattr(self.inner, name)

    def _noted(self, result: PageResult) -> PageResult:
        self.records.note(result)
        return result
