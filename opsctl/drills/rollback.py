"""Rollbacks: remove the drill's faults, put the split back, resolve the drill's pages. Then verify.

They run at the end of every drill, after an abort, a Ctrl-C or a crash, and from `opsctl drill
cleanup` for a drill whose process died: everything they need is in the run's persisted state and
the audit log, never in the engine's memory. Each undoes only what the drill did: a split someone
else changed since the drill's last change is left alone and reported.
"""

from __future__ import annotations

from typing import Callable

from opsctl.errors import NoDataError, OpsctlError


def audit_drill(cfg, state, event: str, at: float, **fields) -> None:
    """One audit entry for something a drill did outside the traffic controller (faults, start, end)."""
    from opsctl.audit import AuditLog, current_actor

    AuditLog(cfg.audit_path).append({"kind": "drill", "event": event, "drill": True, "drill_run": state.run_id,
                                     "incident": state.incident, "actor": current_actor(), **fields}, now=at)


class Rollbacks:
    def __init__(self, env, state, say: Callable[[str, str], None]):
        self.env = env
        self.state = state
        self.say = say  # (kind, message) -> timeline + terminal

    def run(self, actions) -> list[dict]:
        results = []
        for action in actions:
            entry = {"action": action, "status": "done", "message": ""}
            try:
                entry["message"] = getattr(self, "_" + action.replace("-", "_"))()
            except Exception as exc:  # a rollback that fails must not stop the others
                entry["status"] = "failed"
                entry["message"] = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
            if entry["message"].startswith("skipped:"):
                entry["status"] = "skipped"
            self.say("rollback", f"{action}: {entry['status']}: {entry['message']}")
            results.append(entry)
            self.state.data["rollbacks"].append(entry)
            self.state.save()
        return results

    # -- the three rollbacks ------------------------------------------------------------------------

    def _remove_faults(self) -> str:
        active = self.state.active_faults()
        if not active:
            return "no fault active"
        done = []
        for record in active:
            injector = self.env.injector(record["injector"])
            message = injector.remove(record, self.env.clock.now())
            record["removed_at"] = self.env.clock.now()
            record["removal"] = message
            self.state.save()
            audit_drill(self.env.cfg, self.state, "fault-removed", self.env.clock.now(), fault=record["kind"],
                        backend=record["backend"], target=message)
            done.append(message)
        return "; ".join(done)

    def drill_changes(self) -> list[dict]:
        """The drill's applied traffic changes, oldest first, from the audit log."""
        from opsctl.audit import AuditLog

        run = self.state.run_id
        entries = AuditLog(self.env.cfg.audit_path).find(
            lambda e: e.get("kind") == "traffic" and e.get("drill_run") == run and e.get("outcome") == "applied"
            and not e.get("dry_run"))
        return list(reversed(entries))

    def _restore_traffic(self) -> str:
        from opsctl.traffic.change import ChangeRequest
        from opsctl.traffic.guards import drill_rollback_operation
        from opsctl.traffic.split import Split

        order = list(self.env.cfg.backends)
        original = self.state.data["split"]["original"]
        changes = self.drill_changes()
        if not changes:
            return "the drill did not change the split"
        if original is None:
            return "skipped: the split before the drill is unknown; check `opsctl traffic status`"
        target = Split.from_dict(original, order, "the drill's saved split")
        last = Split.from_dict(changes[-1]["after"], order, "the drill's last change")
        ctl = self.env.controller()
        current = ctl.read().split
        if current == target:
            return f"already back at {target.describe(order)}"
        if current != last:
            return (f"skipped: the split is {current.describe(order) if current else 'unknown'}, not the"
                    f" {last.describe(order)} the drill left; someone else changed it, so it is left alone")
        # The drill's own restore: it puts back the split the drill found, so no guard refuses it
        # (a capacity guard refusing it once left a drill's split at 0/100); what each guard would
        # have said is recorded as the drill's override in the audit entry (decisions/0330).
        result = ctl.apply(ChangeRequest(
            "restore", lambda before: target, reason=f"drill {self.state.run_id} rollback",
            incident=self.state.incident, emergency=True, operation_id=drill_rollback_operation(self.state.run_id),
        ))
        self.env.split_changed(result.after)
        return f"{result.outcome}: {last.describe(order)} -> {target.describe(order)}"

    def _resolve_pages(self) -> str:
        keys = self.state.open_pages()
        if not keys:
            return "no drill page open"
        pager = self.env.pager()
        done = []
        for key in keys:
            never_created = False
            try:
                pager.resolve(key)
                done.append(f"resolved {key}")
            except NoDataError:
                try:
                    pager.get_incident(key)
                    done.append(f"{key} was already resolved")
                except NoDataError:
                    # The state records a page before the pager is asked for it (so a crash after the
                    # trigger is cleaned up); a drill stopped between the two leaves an intent only.
                    never_created = True
                    done.append(f"{key} was recorded but never created (the drill stopped before the pager"
                                f" had it): nothing to resolve")
            for page in self.state.data["pages"]:
                if page["dedup_key"] == key:
                    page["resolved"] = True
                    if never_created:
                        page["never_created"] = True
            self.state.save()
        return "; ".join(done)

    # -- what is left behind --------------------------------------------------------------------

    def leftovers(self) -> list[str]:
        """What the drill left changed after its rollbacks (empty: nothing)."""
        problems = []
        for record in self.state.active_faults():
            problems.append(f"fault {record['kind']} on {record['backend']} is still injected")
        for record in self.state.data["faults"]:
            removal = record.get("removal") or ""
            if "left as is" in removal:
                problems.append(removal)
        original = self.state.data["split"]["original"]
        if original is not None and self.drill_changes():
            from opsctl.traffic.split import Split

            order = list(self.env.cfg.backends)
            try:
                current = self.env.controller().read().split
            except OpsctlError as exc:
                problems.append(f"cannot read the split back: {exc.message}")
            else:
                target = Split.from_dict(original, order, "the drill's saved split")
                if current != target:
                    problems.append(f"the split is {current.describe(order) if current else 'unknown'},"
                                    f" not the {target.describe(order)} it was before the drill")
        pager = None
        for page in self.state.data["pages"]:
            if page.get("never_created"):
                continue  # the pager never had it: nothing is left open there
            try:
                pager = pager or self.env.pager()
                incident = pager.get_incident(page["dedup_key"])
            except OpsctlError as exc:
                problems.append(f"cannot read drill page {page['dedup_key']} back: {exc.message}")
                continue
            if incident.status != "resolved":
                problems.append(f"drill incident {incident.id} is still {incident.status}")
        return problems
