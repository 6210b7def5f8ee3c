"""sim/scale.py's scenario, small: a bulk topic with no traffic beside the workload, many one-member groups, the
controller and then ``g1``'s coordinator killed; every partition led again, both failovers in the timeline,
no invariant broken (bench/sim_scale.py runs it from 3 to 100 brokers)."""
from __future__ import annotations

from sim.run import SimRun
from sim.scale import BULK, Scale, options


def test_a_small_scale_run_goes_through_a_controller_and_a_coordinator_failover() -> None:
    s = Scale(brokers=4, partitions_per_broker=25, groups_per_broker=3, duration_s=40.0)
    run = SimRun(options(s))
    r = run.run()
    assert r.verdict != "invalid", r.results["checks"]["anomalies"][:3]
    assert r.results["invariants"]["checks"] > 0 and r.results["invariants"]["stopped_at"] is None
    states = run.cluster.topic_states(BULK)
    assert len(states) == s.partitions == 100 and all(st["leader"] >= 0 for st in states.values())
    kills = [h for h in r.history if h.get("process") == "nemesis" and h["f"] == "kill"
             and h["value"]["phase"] == "start"]
    assert [h["value"]["target"] for h in kills] == ["controller", "coordinator:g1"]
    done = [e for e in r.events if e["type"] == "controller_failover_done" and e["mono_ns"] > kills[0]["time"]]
    assert done and done[0]["partitions"] >= s.partitions      # the new controller loaded the bulk topic too
    rows = r.results["timeline"]
    assert any(row["fault"] == 1 and row["group"] == "g1" and row["moved"] and row["first_commit_ms"] is not None
               for row in rows)
