"""A traffic ChangeHook that sends a pager change event for every applied traffic change, so
responders see the split move next to the incident that moved it."""

from __future__ import annotations

from opsctl.paging.base import ChangeEvent


class PagerChangeHook:
    name = "pager change event"

    def __init__(self, cfg, *, clock=None, drill: bool = False, pager=None):
        self.cfg = cfg
        self.clock = clock
        self.drill = drill
        self._pager = pager

    @property
    def pager(self):
        if self._pager is None:  # opened on the first change only: status and dry runs never pay for it
            from opsctl.paging.registry import open_pager

            self._pager = open_pager(self.cfg, clock=self.clock)
        return self._pager

    def on_change(self, notice) -> None:
        import time

        order = list(self.cfg.backends)
        now = self.clock.now() if self.clock else time.time()
        details = {
            "action": notice.action,
            "before": notice.before.to_dict(order) if notice.before else None,
            "after": notice.after.to_dict(order),
            "actor": notice.actor,
            "reason": notice.reason,
            "incident": notice.incident,
            "emergency": notice.emergency,
            "overrides": list(notice.overrides),
        }
        self.pager.change_event(ChangeEvent(
            summary=f"traffic {notice.message(order)}"[:1024],
            source="opsctl",
            timestamp=now,
            custom_details=details,
            drill=self.drill,
        ))
