"""Embedded drills: the fault is a simulator incident in the drill's own world (its store only)."""

from __future__ import annotations

from opsctl.drills.faults.base import FaultInjector


class SimulatedFault(FaultInjector):
    name = "simulated"

    def __init__(self, world=None):
        self.world = world  # None in a cleanup: the world ended with the process, nothing ahead is written

    def prepare(self, fault, backend: str, at: float) -> dict:
        return {"injector": self.name, "kind": fault.kind, "backend": backend, "params": dict(fault.params),
                "start": at, "end": at + fault.duration, "waves": list(fault.waves)}

    def apply(self, record: dict) -> str:
        from opsctl.drills.chain.faults import incident as make

        incident = make(record["kind"], record["backend"], record["params"], record["start"], record["end"],
                        waves=tuple(record.get("waves") or (0, 0)))
        self.world.add_incident(record["id"], incident)
        return f"simulator incident {incident.spec()}"

    def remove(self, record: dict, at: float) -> str:
        if self.world is not None:
            self.world.end_incident(record["id"], at)
        return f"simulator incident {record['kind']} on {record['backend']} ended"
