"""Invariants at every step (judge/invariants.py, sim/invariants.py): each rule on its own, and in a simulated run a
planted bug whose violation heals before the end, which only the per-step check catches, named by its step."""
from __future__ import annotations

from dataclasses import replace

from judge.invariants import Invariants
from sim.run import SimOptions, SimRun


class View:
    """A cluster's state as the invariants read it, set by hand."""

    def __init__(self) -> None:
        self.leading: dict = {}      # tp -> [(broker, hw, isr)]
        self.logs: dict = {}         # (broker, tp) -> [values]

    def leaders(self, tp):
        return self.leading.get(tp, [])

    def log_end(self, broker, tp):
        log = self.logs.get((broker, tp))
        return None if log is None else len(log)

    def record(self, broker, tp, offset):
        log = self.logs.get((broker, tp), [])
        return log[offset] if offset < len(log) else None


TP = ("t", 0)


def test_one_controller_and_one_coordinator_per_epoch() -> None:
    inv = Invariants(View())
    assert inv.event({"type": "controller_elected", "broker": 1, "epoch": 4}) is None
    assert inv.event({"type": "controller_elected", "broker": 1, "epoch": 4}) is None   # the same broker again
    v = inv.event({"type": "controller_elected", "broker": 2, "epoch": 4})
    assert v.kind == "multiple-controllers" and v.details["brokers"] == [1, 2]
    assert inv.event({"type": "coordinator_loaded", "broker": 3, "partition": 7, "leader_epoch": 2}) is None
    assert inv.event({"type": "coordinator_loaded", "broker": 1, "partition": 7, "leader_epoch": 3}) is None
    v = inv.event({"type": "coordinator_loaded", "broker": 2, "partition": 7, "leader_epoch": 3})
    assert v.kind == "multiple-coordinators" and v.details["brokers"] == [1, 2]


def test_a_leader_is_in_its_isr_and_elected_from_the_previous_one() -> None:
    inv = Invariants(View())
    state = {"type": "partition_state_written", "topic": "t", "partition": 0, "leader_epoch": 3}
    assert inv.event({**state, "leader": 2, "isr": [2, 3], "previous_leader": 1, "previous_isr": [1, 2, 3]}) is None
    assert inv.event({**state, "leader": -1, "isr": [3]}) is None                  # offline
    assert inv.event({**state, "leader": 2, "isr": [3]}).kind == "leader-not-in-isr"
    outside = {**state, "leader": 3, "isr": [3], "previous_leader": 1, "previous_isr": [1]}
    assert inv.event(outside).kind == "unclean-election"
    assert Invariants(View(), unclean_election=True).event(outside) is None
    became = {"type": "became_leader", "broker": 2, "topic": "t", "partition": 0, "leader_epoch": 3}
    assert inv.event({**became, "isr": [1, 3]}).kind == "leader-not-in-isr"


def test_a_high_watermark_above_an_isr_members_log_end_unless_a_crash_cut_its_log() -> None:
    view = View()
    inv = Invariants(view)
    view.leading[TP] = [(1, 5, (1, 2, 3))]
    view.logs.update({(1, TP): list("abcdef"), (2, TP): list("abcde"), (3, TP): list("abcde")})
    assert inv.hw(TP) is None
    view.logs[(3, TP)] = list("abcd")                   # member 3 behind the HW
    v = inv.event({"type": "hw_changed", "broker": 1, "topic": "t", "partition": 0})
    assert v.kind == "hw-above-isr-leo" and (v.details["member"], v.details["log_end_offset"]) == (3, 4)
    # a torn tail cut member 3's log: Kafka's acknowledged records live in the ISR's memory, not its disks
    assert inv.event({"type": "log_recovered", "broker": 3, "topic": "t", "partition": 0,
                      "truncated_bytes": 80}) is None
    view.logs[(3, TP)] = list("abcde")                  # caught up: excused no more
    assert inv.hw(TP) is None
    view.logs[(3, TP)] = list("abc")
    assert inv.hw(TP).kind == "hw-above-isr-leo"


def test_a_new_leader_has_every_acknowledged_record() -> None:
    view = View()
    inv = Invariants(view)
    inv.history({"f": "send", "type": "ok", "value": {"topic": "t", "partition": 0, "offset": 1, "value": "b"}})
    inv.history({"f": "send", "type": "fail", "value": {"topic": "t", "partition": 0, "offset": 2, "value": "c"}})
    became = {"type": "became_leader", "broker": 2, "topic": "t", "partition": 0, "leader_epoch": 4,
              "isr": [2, 3]}
    view.logs[(2, TP)] = ["a", "b"]
    assert inv.event(became) is None
    view.logs[(2, TP)] = ["a"]
    v = inv.event(became)
    assert v.kind == "lost-write" and v.details["offset"] == 1 and "its log ends at 1" in v.message
    view.logs[(2, TP)] = ["a", "x"]
    assert "has 'x' there" in inv.event(became).message


def test_a_leader_at_a_superseded_leader_epoch_is_not_judged_but_one_at_the_current_epoch_is() -> None:
    """A broker that takes up a stale LeaderAndIsr after a pause (docs/chaos.md, "Zombie leaders")."""
    view = View()
    inv = Invariants(view)
    inv.history({"f": "send", "type": "ok", "value": {"topic": "t", "partition": 0, "offset": 0, "value": "a"}})
    view.logs[(1, TP)] = []
    written = {"type": "partition_state_written", "topic": "t", "partition": 0, "leader": 2, "leader_epoch": 3,
               "isr": [2]}
    assert inv.event(written) is None
    zombie = {"type": "became_leader", "broker": 1, "topic": "t", "partition": 0, "leader_epoch": 2, "isr": [2, 1]}
    assert inv.event(zombie) is None and inv.fenced_leaders == 1
    current = dict(zombie, leader_epoch=3, isr=[1])
    assert inv.event(current).kind == "lost-write"
    # a topic created again starts its epochs over: epoch 0 is current then
    assert inv.event(dict(written, leader_epoch=0, reason="new_partition", leader=1, isr=[1])) is None
    assert inv.event(dict(zombie, leader_epoch=0, isr=[1])).kind == "lost-write"


# a run whose planted bug breaks an invariant for a while and heals before the end: the high watermark counts
# only the followers caught up within the lag, so it passes a lagging ISR member's log end until it catches up
TRANSIENT = SimOptions(seed=1, bugs=("hw-ignores-lagging-isr",), duration_s=12.0, offsets_partitions=3)


def test_a_violation_that_heals_before_the_end_is_caught_only_at_every_step_and_named_by_its_step() -> None:
    at_end = SimRun(replace(TRANSIENT, invariants=False)).run()
    assert at_end.verdict == "valid", at_end.results["checks"]["anomalies"]   # nothing left to see at the end
    r = SimRun(TRANSIENT).run()
    assert r.verdict == "invalid" and r.kinds == ["hw-above-isr-leo"]
    a = r.results["checks"]["anomalies"][0]
    stop = a["details"]["stopped_at"]
    # the step: a follower's fetch arriving at the leader, whose core then moved the HW past a lagging member
    assert stop["step"].endswith(": SimBroker.handle_fetch") and " -> b" in stop["step"]
    assert any(e["type"] == "hw_changed" and e["broker"] == a["details"]["leader"] for e in stop["events"])
    assert r.results["simulated_ms"] < at_end.results["simulated_ms"]          # it stopped there
    assert r.results["invariants"]["stopped_at"] == stop and r.results["invariants"]["every"] == 1
    # checking every partition at every step finds the same first violation at the same step: the
    # event-driven check misses nothing
    full = SimRun(replace(TRANSIENT, invariants_full=True)).run()
    assert full.results["checks"]["anomalies"][0]["details"]["stopped_at"]["step_index"] == stop["step_index"]
