"""Chain drills: the production path rehearsed on one machine with the real binaries.

    exporter (simulated proxy metrics over HTTP, faults switched by the drill)
      -> Prometheus (the rules `opsctl slo rules` generates, history backfilled by promtool)
      -> Alertmanager (the routing of deploy/alertmanager.yml)
           -> PagerDuty receiver: a loopback Events API v2 endpoint (pdsink.py)
           -> webhook receiver: `opsctl serve` -> policy -> traffic controller -> actuator
                                                        -> pager, vendor ticket channel
Each hop is measured from the component's own evidence (hops.py); a hop that never happens fails
the drill, naming the hop and its last evidence. runner.py drives it; components.py starts and
stops the processes; routing.py points the routing at the drill's receivers.
"""
