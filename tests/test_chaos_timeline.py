"""chaos.timeline on synthetic histories and event logs: exact stage times per fault and group.

The cluster of every test: brokers 1-3, broker 3 the controller (epoch 1),
__consumer_offsets with 4 partitions led by P0:1, P1:2, P2:1, P3:3. The groups
map to partitions as Kafka does: g1 and g5 -> P2 (broker 1), g4 -> P1
(broker 2), g2 -> P3 (broker 3, the controller).
"""
from __future__ import annotations

import pytest

from chaos.timeline import ROW_FIELDS, failover_timeline, format_table, summarize
from kafkacommon.hashing import partition_for

BASE_NS = 5_000_000_000_000
OFFSETS = "__consumer_offsets"


def ns(ms: float) -> int:
    return BASE_NS + round(ms * 1_000_000)


class Run:
    """Builds a history (ops) and merged event logs; times are ms after BASE_NS."""

    def __init__(self) -> None:
        self._ops: list[dict] = []
        self.events: list[dict] = []
        self._next_process = 0

    # -- events
    def ev(self, t_ms: float, broker: int, type_: str, **fields) -> None:
        self.events.append({"ts_ms": 1.7e12 + t_ms, "mono_ns": ns(t_ms), "broker": broker, "type": type_, **fields})

    def states(self, t_ms: float, controller: int, landed_ms: float, *writes: tuple) -> None:
        """One controller plan: (partition, leader, reason, previous_leader) writes, then the batch line."""
        for i, (p, leader, reason, prev) in enumerate(writes):
            self.ev(t_ms + i * 0.01, controller, "partition_state_written", topic=OFFSETS, partition=p,
                    reason=reason, leader=leader, leader_epoch=0 if prev is None else 1, isr=[leader],
                    controller_epoch=1, zk_version=0, previous_leader=prev, previous_isr=None)
        self.ev(t_ms + len(writes) * 0.01, controller, "partition_states_written", epoch=1, count=len(writes),
                write_ms=1.0, mono_ns_written=ns(landed_ms))

    # -- history
    def _op(self, t_ms: float, type_: str, process, f: str, **fields) -> None:
        self._ops.append({"type": type_, "process": process, "time": ns(t_ms), "f": f, "value": None,
                          "error": None, "node": None, "group": None, **fields})

    def client(self, group: str, f: str, invoke_ms: float, done_ms: float, result: str = "ok",
               error: str | None = None, node: int | None = None, **fields) -> None:
        process = self._next_process
        self._next_process += 1
        self._op(invoke_ms, "invoke", process, f, group=group, **fields)
        self._op(done_ms, result, process, f, group=group, error=error, node=node, **fields)

    def fault(self, fault: int, kind: str, target: str, nodes: list, start_ms: float,
              heal_ms: float | None = None) -> None:
        self._op(start_ms, "info", "nemesis", kind,
                 value={"fault": fault, "phase": "start", "kind": kind, "target": target, "nodes": nodes})
        if heal_ms is not None:
            self._op(heal_ms, "info", "nemesis", "heal",
                     value={"fault": fault, "phase": "heal", "kind": kind, "target": target, "nodes": nodes})

    @property
    def ops(self) -> list[dict]:
        ops = sorted(self._ops, key=lambda o: o["time"])
        return [dict(o, index=i) for i, o in enumerate(ops)]

    def timeline(self, **kw) -> list[dict]:
        return failover_timeline(self.ops, self.events, **kw)


def base_run(groups=("g1", "g5", "g4", "g2")) -> Run:
    r = Run()
    r.ev(0, 3, "controller_elected", epoch=1, epoch_zk_version=1, elect_ms=3.0)
    r.states(10, 3, 10.5, (0, 1, "new_partition", None), (1, 2, "new_partition", None),
             (2, 1, "new_partition", None), (3, 3, "new_partition", None))
    r.ev(11.2, 3, "topic_created", controller_epoch=1, topic=OFFSETS, partitions=4, replication_factor=3)
    for i, g in enumerate(groups):  # every group commits once before any fault
        r.client(g, "commit", 900 + i, 905 + i, node=1)
    return r


def test_group_partitions_are_the_ones_the_tests_assume():
    assert {g: partition_for(g, 4) for g in ("g1", "g5", "g4", "g2")} == {"g1": 2, "g5": 2, "g4": 1, "g2": 3}


def test_sigkill_of_the_coordinator_of_two_groups():
    r = base_run()
    r.fault(0, "kill", "coordinator:g1", [1], 1000, heal_ms=5000)
    r.client("g1", "heartbeat", 999, 1200, "info", error="UNAVAILABLE")     # the dead coordinator
    r.ev(2500, 3, "broker_change", controller_epoch=1, new=[], dead=[1], bounced=[], epochs={})
    r.ev(2501.8, 2, "became_leader", topic=OFFSETS, partition=2, leader=2, leader_epoch=1, isr=[2],
         zk_version=1, controller_epoch=1)  # logged before the controller's line, as docs/events.md says
    r.states(2502, 3, 2501.5, (0, 2, "offline_election", 1), (2, 2, "offline_election", 1))
    r.ev(2520, 2, "coordinator_loaded", partition=0, leader_epoch=1, records=5, replayed=5, skipped_records=0,
         bytes=100, end_offset=5, groups=0, duration_ms=3.0)  # another partition
    r.ev(2530.25, 2, "coordinator_loaded", partition=2, leader_epoch=1, records=120, replayed=40,
         skipped_records=0, bytes=9000, end_offset=120, groups=2, duration_ms=20.0)
    r.client("g1", "join", 2560, 2580, node=2)
    r.client("g1", "commit", 2600, 2612.344, node=2)
    r.client("g5", "commit", 2690, 2700, node=2)

    rows = r.timeline()
    assert [(row["fault"], row["group"]) for row in rows] == [(0, "g1"), (0, "g5")]
    for row in rows:
        assert list(row) == list(ROW_FIELDS)
    common = {"fault": 0, "kind": "kill", "target": "coordinator:g1", "nodes": [1], "time_ns": ns(1000),
              "heal_ms": 4000.0, "partition": 2, "old_leader": 1, "new_leader": 2, "moved": True,
              "detect_ms": 1500.0, "detect_by": "broker_change", "elect_ms": 1501.5,
              "elect_reason": "offline_election", "load_ms": 1530.25, "load_duration_ms": 20.0,
              "records_replayed": 40, "records": 120,
              "old_controller": None, "new_controller": None, "controller_failover_ms": None}
    assert rows[0] == dict(common, group="g1", first_commit_ms=1612.344, unavailable_ms=1380.0,
                           unavailable_from_ms=200.0, unavailable_to_ms=1580.0)
    assert rows[1] == dict(common, group="g5", first_commit_ms=1700.0, unavailable_ms=0.0,
                           unavailable_from_ms=None, unavailable_to_ms=None)

    s = summarize(rows)
    assert s["rows"] == 2 and s["faults"] == 1 and s["groups"] == 2 and s["moved"] == 2 and s["not_moved"] == 0
    assert s["stages"]["first_commit_ms"] == {"count": 2, "median": 1656.172, "p90": 1700.0, "max": 1700.0}
    assert s["stages"]["unavailable_ms"] == {"count": 2, "median": 690.0, "p90": 1380.0, "max": 1380.0}
    assert s["stages"]["controller_failover_ms"] == {"count": 0, "median": None, "p90": None, "max": None}

    table = format_table(rows)
    lines = table.splitlines()
    assert lines[0].split()[:6] == ["fault", "kind", "target", "group", "P", "leader"]
    assert "1→2" in lines[1] and "1530.2 (40)" in lines[1] and "1380.0 (+200.0..+1580.0)" in lines[1]
    assert len({len(line) for line in lines[:3]}) == 1  # aligned: the last column is right-aligned
    assert any(line.startswith("elect ms") and "median    1501.5" in line for line in lines)


def test_sigterm_is_detected_by_the_controlled_shutdown_request():
    r = base_run()
    r.fault(0, "terminate", "coordinator:g1", [1], 1000, heal_ms=3000)
    r.ev(1000.2, 1, "signal_received", signal="SIGTERM")
    r.ev(1010.5, 3, "controlled_shutdown_requested", controller_epoch=1, broker_id=1, broker_epoch=14,
         moved=2, remaining=0)
    r.states(1015, 3, 1014, (0, 2, "controlled_shutdown", 1), (2, 2, "controlled_shutdown", 1))
    r.ev(1040, 2, "coordinator_loaded", partition=2, leader_epoch=1, records=10, replayed=4,
         skipped_records=0, bytes=500, end_offset=10, groups=2, duration_ms=2.5)
    r.ev(1100, 3, "broker_change", controller_epoch=1, new=[], dead=[1], bounced=[], epochs={})
    r.client("g1", "commit", 1020, 1025, "fail", error="NOT_COORDINATOR", node=1)
    r.client("g1", "commit", 1050, 1060, node=2)

    g1 = r.timeline()[0]
    assert (g1["group"], g1["old_leader"], g1["new_leader"], g1["moved"]) == ("g1", 1, 2, True)
    assert (g1["detect_ms"], g1["detect_by"]) == (10.5, "controlled_shutdown_requested")
    assert (g1["elect_ms"], g1["elect_reason"]) == (14.0, "controlled_shutdown")
    assert (g1["load_ms"], g1["records_replayed"], g1["records"]) == (40.0, 4, 10)
    assert g1["first_commit_ms"] == 60.0
    assert (g1["unavailable_ms"], g1["unavailable_from_ms"], g1["unavailable_to_ms"]) == (35.0, 25.0, 60.0)


def test_a_pause_shorter_than_the_session_moves_nothing_and_does_not_inherit_a_later_kill():
    r = base_run()
    r.fault(0, "pause", "coordinator:g1", [1], 1000, heal_ms=1800)
    r.client("g1", "commit", 1850, 1870, node=1)  # answered by the same coordinator
    # fault 1, much later, on the same broker: its detection and election belong to it alone
    r.fault(1, "kill", "broker:1", [1], 10_000)
    r.client("g1", "heartbeat", 10_100, 10_500, "info", error="UNAVAILABLE")
    r.ev(11_500, 3, "broker_change", controller_epoch=1, new=[], dead=[1], bounced=[], epochs={})
    r.states(11_502, 3, 11_501, (2, 2, "offline_election", 1))
    r.client("g1", "heartbeat", 11_600, 11_610, node=2)

    pause, pause5, kill, kill5 = r.timeline()
    assert (pause["group"], pause5["group"], kill["group"], kill5["group"]) == ("g1", "g5", "g1", "g5")
    for row in (pause, pause5):
        assert row["moved"] is False and row["old_leader"] == 1 and row["new_leader"] is None
        assert [row[k] for k in ("detect_ms", "detect_by", "elect_ms", "load_ms", "records_replayed")] == [None] * 5
        assert row["heal_ms"] == 800.0
        assert row["unavailable_ms"] == 0.0  # the kill's failure isn't the pause's
    assert pause["first_commit_ms"] == 870.0
    assert pause5["first_commit_ms"] is None
    assert (kill["moved"], kill["detect_ms"], kill["elect_ms"], kill["load_ms"]) == (True, 1500.0, 1501.0, None)
    assert (kill["unavailable_ms"], kill["unavailable_from_ms"], kill["unavailable_to_ms"]) == (1110.0, 500.0, 1610.0)
    assert summarize(r.timeline())["not_moved"] == 2
    assert "1→-" in format_table([pause])


def test_the_controller_that_was_also_the_coordinator_is_detected_by_the_new_controllers_election():
    r = base_run()
    r.fault(0, "kill", "controller", [3], 1000)
    r.ev(2600, 2, "controller_elected", epoch=2, epoch_zk_version=2, elect_ms=4.0)
    r.ev(2601, 1, "controller_election_lost", controller_id=2, epoch=2)
    r.states(2610, 2, 2608, (3, 1, "offline_election", 3))
    r.ev(2612, 2, "controller_failover_done", epoch=2, load_ms=3.0, decide_ms=0.5, write_ms=2.0,
         zk_round_trips=5, partitions=4, states_from_cache=False, states_written=1, total_ms=12.0)
    r.ev(2650, 1, "coordinator_loaded", partition=3, leader_epoch=1, records=9, replayed=7,
         skipped_records=0, bytes=400, end_offset=9, groups=1, duration_ms=1.5)
    r.client("g2", "commit", 2700, 2710.5, node=1)

    ctrl, g2 = r.timeline()
    assert ctrl["group"] is None and ctrl["partition"] is None and ctrl["old_leader"] is None
    assert (ctrl["old_controller"], ctrl["new_controller"], ctrl["controller_failover_ms"], ctrl["moved"]) \
        == (3, 2, 1600.0, True)
    assert [ctrl[k] for k in ("detect_ms", "elect_ms", "load_ms", "first_commit_ms", "unavailable_ms")] == [None] * 5
    assert (g2["group"], g2["partition"], g2["old_leader"], g2["new_leader"]) == ("g2", 3, 3, 1)
    assert (g2["detect_ms"], g2["detect_by"]) == (1600.0, "controller_elected")
    assert (g2["elect_ms"], g2["load_ms"], g2["records_replayed"], g2["first_commit_ms"]) == (1608.0, 1650.0, 7, 1710.5)
    assert g2["controller_failover_ms"] is None  # the controller stage is on the controller row only

    s = summarize([ctrl, g2])
    assert (s["controller_rows"], s["group_rows"]) == (1, 1)
    assert s["stages"]["controller_failover_ms"]["max"] == 1600.0
    assert "(controller)" in format_table([ctrl, g2]) and "c3→c2" in format_table([ctrl, g2])


def test_the_controller_leading_no_group_gets_a_controller_row_only():
    r = base_run(groups=("g1", "g4"))
    r.fault(0, "pause", "controller", [3], 1000, heal_ms=1500)   # short: nobody else is elected
    rows = r.timeline()
    assert len(rows) == 1 and rows[0]["group"] is None
    assert (rows[0]["old_controller"], rows[0]["new_controller"], rows[0]["controller_failover_ms"]) == (3, None, None)


def test_faults_that_hit_no_coordinator_produce_no_rows():
    r = base_run(groups=("g1", "g5", "g2"))         # nobody's partition is led by broker 2
    r.fault(0, "kill", "broker:2", [2], 1000, heal_ms=2000)
    r.ev(2500, 3, "broker_change", controller_epoch=1, new=[], dead=[2], bounced=[], epochs={})
    r.states(2502, 3, 2501, (1, 3, "offline_election", 2))
    r.fault(1, "kill", "zk:zk1", ["zk1"], 3000, heal_ms=4000)  # ZooKeeper only
    r.fault(2, "partition", "zk-majority", ["zk1", "zk2"], 5000, heal_ms=6000)
    assert r.timeline() == []
    assert format_table([]).splitlines()[1].startswith("(no fault")


def test_unavailability_runs_from_the_first_failure_to_the_first_success_of_a_coordinator_op():
    r = base_run()
    r.client("g1", "heartbeat", 980, 990, "fail", error="NOT_COORDINATOR")      # before T: not counted
    r.fault(0, "kill", "coordinator:g1", [1], 1000)
    r.client("g1", "commit", 995, 1005, "info", error="DEADLINE_EXCEEDED")       # invoked before T, fails after
    r.client("g1", "join", 1400, 1500, "fail", error="NOT_COORDINATOR")
    r.client("g1", "poll", 1550, 1600, "ok", value={"member": "m1", "generation": 1})  # proves nothing
    r.client("g1", "fetch-committed", 1650, 1700, "fail", error="COORDINATOR_LOAD_IN_PROGRESS")
    r.client("g5", "sync", 1800, 1810, "ok")                                     # another group
    r.client("g1", "sync", 2600, 2650, "ok")
    r.client("g1", "heartbeat", 2690, 2700, "ok")
    r.client("g5", "heartbeat", 2800, 2900, "info", error="UNAVAILABLE")         # g5: fails, never recovers
    r.client(None, "poll", 3000, 3010, "fail", final=True)                       # the final reads: ignored

    g1, g5 = r.timeline()
    assert (g1["unavailable_ms"], g1["unavailable_from_ms"], g1["unavailable_to_ms"]) == (1645.0, 5.0, 1650.0)
    assert g1["first_commit_ms"] is None
    assert (g5["unavailable_ms"], g5["unavailable_from_ms"], g5["unavailable_to_ms"]) == (None, 1900.0, None)
    s = summarize([g1, g5])
    assert (s["unavailable"], s["never_recovered"]) == (2, 1)
    assert s["stages"]["unavailable_ms"] == {"count": 1, "median": 1645.0, "p90": 1645.0, "max": 1645.0}
    assert "- (+1900.0..)" in format_table([g1, g5])


def test_the_leader_at_the_fault_is_the_latest_write_that_had_landed():
    r = base_run()
    # P1 moves 2 -> 1: landed at 999 ms, logged after the fault started at 1000 ms
    r.states(1000.5, 3, 999, (1, 1, "auto_rebalance", 2))
    r.fault(0, "kill", "broker:1", [1], 1000)
    assert [row["group"] for row in r.timeline()] == ["g1", "g4", "g5"]
    assert next(row for row in r.timeline() if row["group"] == "g4")["old_leader"] == 1


def test_the_number_of_offsets_partitions_comes_from_topic_created_or_the_caller():
    r = base_run()
    r.fault(0, "kill", "broker:1", [1], 1000)
    r.events = [e for e in r.events if e["type"] != "topic_created"]
    with pytest.raises(ValueError, match="offsets_partitions"):
        r.timeline()
    assert [row["group"] for row in r.timeline(offsets_partitions=4)] == ["g1", "g5"]


def test_summary_statistics():
    rows = [{"group": "g", "fault": 0, "detect_ms": float(v)} for v in range(1, 11)] + [{"group": "g", "fault": 1}]
    st = summarize(rows)["stages"]["detect_ms"]
    assert st == {"count": 10, "median": 5.5, "p90": 9.0, "max": 10.0}
