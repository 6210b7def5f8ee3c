"""judge.timeline on synthetic histories and event logs: exact stage times per fault and group.

The cluster of every test: brokers 1-3, broker 3 the controller (epoch 1),
__consumer_offsets with 4 partitions led by P0:1, P1:2, P2:1, P3:3. The groups
map to partitions as Kafka does: g1 and g5 -> P2 (broker 1), g4 -> P1
(broker 2), g2 -> P3 (broker 3, the controller).
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from judge.timeline import ROW_FIELDS, failover_timeline
from judge.timeline_summary import format_table, summarize
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

    def end_phase(self, phase: str, t_ms: float) -> None:
        """The runner's end-phase marks: ``end`` (the workload stops), ``stop`` (the brokers stop)."""
        self._op(t_ms, "info", "nemesis", phase, value={"phase": phase})

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
    common = {"fault": 0, "cause": "fault", "kind": "kill", "target": "coordinator:g1", "nodes": [1],
              "time_ns": ns(1000), "heal_ms": 4000.0, "partition": 2, "old_leader": 1, "new_leader": 2, "moved": True,
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


def test_a_full_disk_is_detected_by_the_replicas_it_takes_offline():
    """The coordinator's log directory fails: the controller learns it from the broker's LeaderAndIsr answer
    (``replicas_offline`` for its replica of P), not from a broker change: the broker stays registered."""
    r = base_run()
    r.fault(0, "disk-full", "coordinator:g1", [1], 1000, heal_ms=6000)
    r.ev(1040, 1, "log_dir_failed", dir="/d/0", error="OSError: [Errno 28] No space left on device",
         during="append", replicas=[f"{OFFSETS}-2"], online_dirs=["/d/1"], offline_dirs=["/d/0"], halting=False)
    r.ev(1050, 3, "replicas_offline", controller_epoch=1, broker_id=1, replicas=[f"{OFFSETS}-0"], led=[])
    r.ev(1060, 3, "replicas_offline", controller_epoch=1, broker_id=1, replicas=[f"{OFFSETS}-2"],
         led=[f"{OFFSETS}-2"])
    r.states(1061, 3, 1062, (2, 2, "offline_election", 1))
    r.ev(1070, 2, "coordinator_loaded", partition=2, leader_epoch=1, records=3, replayed=3, skipped_records=0,
         bytes=10, end_offset=3, groups=2, duration_ms=1.0)
    r.client("g1", "commit", 1020, 1030, "fail", error="NOT_COORDINATOR", node=1)
    r.client("g1", "commit", 1080, 1090, node=2)
    g1 = next(row for row in r.timeline() if row["group"] == "g1")
    assert (g1["cause"], g1["kind"], g1["moved"], g1["new_leader"]) == ("fault", "disk-full", True, 2)
    assert (g1["detect_ms"], g1["detect_by"], g1["elect_ms"], g1["load_ms"]) == (60.0, "replicas_offline", 62.0, 70.0)
    assert (g1["first_commit_ms"], g1["unavailable_ms"]) == (90.0, 60.0)


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


# ---------------------------------------------------------------- attribution: which fault moved a coordinator

def issue30_run(marks: bool = True) -> Run:
    """The shape of `chaos run mixed --seed 2026 --duration 180`: several faults; fault 25 moves g1's
    coordinator (P2) to broker 3 (the controller); fault 27 pauses it for 1.25 s, less than the session, and
    g1 commits on it after the pause; the end phase's controlled shutdown of broker 3 then moves P2 to 1."""
    r = base_run(groups=("g1", "g4"))
    r.fault(25, "kill", "coordinator:g1", [1], 1000, heal_ms=4000)
    r.ev(2500, 3, "broker_change", controller_epoch=1, new=[], dead=[1], bounced=[], epochs={})
    r.states(2502, 3, 2501.5, (0, 2, "offline_election", 1), (2, 3, "offline_election", 1))
    r.ev(2530, 3, "coordinator_loaded", partition=2, leader_epoch=1, records=10, replayed=4,
         skipped_records=0, bytes=500, end_offset=10, groups=1, duration_ms=2.0)
    r.client("g1", "commit", 2600, 2612, node=3)
    r.ev(4600, 3, "broker_change", controller_epoch=1, new=[1], dead=[], bounced=[], epochs={"1": 40})
    r.fault(26, "latency", "broker:2", [2], 6000, heal_ms=8000)          # g4's coordinator: slowed, not moved
    r.client("g4", "commit", 8100, 8110, node=2)
    r.fault(27, "pause", "coordinator:g1", [3], 10_000, heal_ms=11_250)  # broker 3: g1's coordinator, controller
    r.client("g1", "heartbeat", 10_100, 11_255, "ok", node=3)
    r.client("g1", "commit", 11_252, 11_261, node=3)                     # after the pause, on broker 3
    if marks:
        r.end_phase("end", 13_500)      # the runner stops the workload: every fault healed
        r.end_phase("stop", 180_900)    # ... and, after final reads and the drain, stops the brokers
    # the end phase's SIGTERM of broker 3 (the controller): a controlled shutdown moves P2 to broker 1
    r.ev(181_410, 3, "signal_received", signal="SIGTERM")
    r.ev(181_410.5, 3, "broker_stopping")
    r.ev(181_412.9, 3, "controlled_shutdown_requested", controller_epoch=1, broker_id=3, broker_epoch=12,
         moved=1, remaining=0)
    r.states(181_421, 3, 181_422.0, (2, 1, "controlled_shutdown", 3))
    r.ev(181_433.3, 1, "coordinator_loaded", partition=2, leader_epoch=2, records=30, replayed=6,
         skipped_records=0, bytes=900, end_offset=30, groups=1, duration_ms=4.0)
    r.ev(181_500, 3, "controller_resigned", epoch=1, reason="shutdown")
    r.ev(181_600, 2, "controller_elected", epoch=2, epoch_zk_version=2, elect_ms=3.0)
    r.ev(181_700, 2, "broker_change", controller_epoch=2, new=[], dead=[3], bounced=[], epochs={})
    return r


def stages_in_order(row: dict) -> bool:
    present = [row[k] for k in ("detect_ms", "elect_ms", "load_ms", "first_commit_ms") if row[k] is not None]
    return present == sorted(present)


@pytest.mark.parametrize("marks", [True, False], ids=["end-phase-marked", "unmarked"])
def test_a_short_pause_does_not_take_the_end_phase_shutdowns_move(marks):
    rows = issue30_run(marks).timeline()
    assert [(r["fault"], r["cause"], r["group"]) for r in rows] == [
        (25, "fault", "g1"), (26, "fault", "g4"), (27, "fault", None), (27, "fault", "g1"),
        (None, "end phase" if marks else "none in schedule", "g1")]
    kill, latency, ctrl, pause, shutdown = rows
    assert (kill["moved"], kill["new_leader"], kill["detect_ms"], kill["elect_ms"], kill["load_ms"],
            kill["first_commit_ms"]) == (True, 3, 1500.0, 1501.5, 1530.0, 1612.0)
    assert (latency["moved"], latency["detect_ms"], latency["first_commit_ms"]) == (False, None, 2110.0)
    # fault 27: nothing moved, nothing detected; the commit after the pause is its first commit
    assert (pause["old_leader"], pause["moved"], pause["new_leader"]) == (3, False, None)
    assert [pause[k] for k in ("detect_ms", "detect_by", "elect_ms", "elect_reason", "load_ms")] == [None] * 5
    assert pause["first_commit_ms"] == 1261.0 and pause["heal_ms"] == 1250.0
    assert (ctrl["old_controller"], ctrl["moved"], ctrl["new_controller"]) == (3, False, None)
    # the shutdown's move: its own row, timed from the controller's detection
    assert shutdown["time_ns"] == ns(181_412.9)
    assert [shutdown[k] for k in ("kind", "target", "nodes", "heal_ms")] == [None, None, [], None]
    assert (shutdown["partition"], shutdown["old_leader"], shutdown["new_leader"], shutdown["moved"]) == (2, 3, 1, True)
    assert (shutdown["detect_ms"], shutdown["detect_by"]) == (0.0, "controlled_shutdown_requested")
    assert (shutdown["elect_ms"], shutdown["elect_reason"]) == (9.1, "controlled_shutdown")
    assert (shutdown["load_ms"], shutdown["records_replayed"], shutdown["first_commit_ms"]) == (20.4, 6, None)
    assert all(stages_in_order(r) for r in rows)

    s = summarize(rows)   # the end phase's move is counted apart, not as a failover
    assert (s["faults"], s["group_rows"], s["moved"], s["not_moved"]) == (3, 3, 1, 2)
    assert (s["end_phase"], s["no_cause"]) == ((1, 0) if marks else (0, 1))
    assert s["stages"]["elect_ms"]["count"] == 1 and s["stages"]["elect_ms"]["max"] == 1501.5
    table = format_table(rows)
    label = "(end phase)" if marks else "(none in schedule)"
    line, = [ln for ln in table.splitlines() if label in ln]
    assert " ".join(line.split()) == f"- {label} - g1 2 3→1 0.0 9.1 20.4 (6) - 0.0 -"
    assert ("1 in the end phase" if marks else "1 with no cause in the schedule") in table


def test_a_pause_that_outlasts_the_session_takes_the_move():
    r = base_run(groups=("g1",))
    r.fault(0, "pause", "coordinator:g1", [1], 1000, heal_ms=6000)
    r.client("g1", "commit", 900, 1100, "ok", node=1)                  # in flight at the pause: before the move
    r.ev(4000, 3, "broker_change", controller_epoch=1, new=[], dead=[1], bounced=[], epochs={})
    r.states(4002, 3, 4001, (2, 2, "offline_election", 1))
    r.ev(4020, 2, "coordinator_loaded", partition=2, leader_epoch=1, records=3, replayed=3,
         skipped_records=0, bytes=100, end_offset=3, groups=1, duration_ms=1.0)
    r.client("g1", "commit", 4010, 4015, "ok", node=2)                 # completes before the load
    r.client("g1", "commit", 4100, 4110, "ok", node=2)
    row, = r.timeline()
    assert (row["cause"], row["moved"], row["detect_by"], row["new_leader"]) == ("fault", True, "broker_change", 2)
    assert (row["detect_ms"], row["elect_ms"], row["load_ms"], row["first_commit_ms"]) == (3000.0, 3001.0, 3020.0,
                                                                                          3110.0)


def test_a_controlled_shutdown_is_a_terminates_detection_only():
    """A kill's window holds a controlled shutdown of its broker (an operator's SIGTERM, say): the kill did
    not cause it, so the move is not the kill's."""
    r = base_run(groups=("g1",))
    r.fault(0, "kill", "coordinator:g1", [1], 1000, heal_ms=1500)      # restarted before its session expired
    r.ev(3000, 3, "controlled_shutdown_requested", controller_epoch=1, broker_id=1, broker_epoch=20,
         moved=1, remaining=0)
    r.states(3002, 3, 3001, (2, 2, "controlled_shutdown", 1))
    kill, moved = r.timeline()
    assert (kill["fault"], kill["moved"], kill["detect_ms"], kill["elect_ms"]) == (0, False, None, None)
    assert (moved["fault"], moved["cause"], moved["detect_by"], moved["elect_ms"]) == \
        (None, "none in schedule", "controlled_shutdown_requested", 1.0)


# ---------------------------------------------------------------- property: stages are always in order

_KINDS = ("kill", "terminate", "pause", "partition", "expire-session")


@st.composite
def random_runs(draw):
    """Random faults on brokers 1-3, each maybe followed by a detection of its broker, a move of P2 (g1's
    offsets partition) and a load; random other controller events, states, loads and g1's commits; with or
    without end-phase marks. Times in ms."""
    r = base_run(groups=("g1",))
    t = lambda: draw(st.integers(1000, 20_000))  # noqa: E731
    state_times: set[int] = set()

    def detection(at: int, b: int) -> None:
        kind = draw(st.sampled_from(("bc", "csr", "elected", "stopping", "ro")))
        if kind == "ro":   # a log directory failed: the controller lists the replicas it lost
            r.ev(at, 3, "replicas_offline", controller_epoch=1, broker_id=b, led=[],
                 replicas=[f"{OFFSETS}-{draw(st.sampled_from((2, 3)))}"])
        elif kind == "bc":
            r.ev(at, 3, "broker_change", controller_epoch=1, new=[], dead=[b], bounced=[], epochs={})
        elif kind == "csr":
            r.ev(at, 3, "controlled_shutdown_requested", controller_epoch=1, broker_id=b, broker_epoch=1,
                 moved=1, remaining=0)
        elif kind == "elected":
            r.ev(at, draw(st.integers(1, 3)), "controller_elected", epoch=2, epoch_zk_version=2, elect_ms=1.0)
        else:
            r.ev(at, b, "broker_stopping")

    def state(at: int, leader: int) -> None:
        if at not in state_times:
            state_times.add(at)
            r.states(at, 3, at, (2, leader, draw(st.sampled_from(("offline_election", "controlled_shutdown",
                                                                   "preferred_admin"))), None))

    def load(at: int, b: int) -> None:
        r.ev(at, b, "coordinator_loaded", partition=2, leader_epoch=draw(st.sampled_from((None, 0, 1))),
             records=1, replayed=1, skipped_records=0, bytes=1, end_offset=1, groups=1, duration_ms=1.0)

    for i, start in enumerate(sorted(draw(st.lists(st.integers(1000, 18_000), max_size=4, unique=True)))):
        b = draw(st.sampled_from((1, 1, 2, 3)))   # broker 1 leads P2 first
        r.fault(i, draw(st.sampled_from(_KINDS)), "broker", [b], start, heal_ms=start + draw(st.integers(100, 3000)))
        if draw(st.integers(0, 3)):
            detected = start + draw(st.integers(-50, 3000))
            detection(detected, b)
            if draw(st.integers(0, 3)):
                moved = detected + draw(st.integers(-20, 50))
                new = draw(st.integers(-1, 3))
                state(moved, new)
                if draw(st.booleans()):
                    load(moved + draw(st.integers(-5, 100)), new)
    for _ in range(draw(st.integers(0, 3))):
        detection(t(), draw(st.integers(1, 3)))
    for _ in range(draw(st.integers(0, 3))):
        state(t(), draw(st.integers(-1, 3)))
    for _ in range(draw(st.integers(0, 3))):
        load(t(), draw(st.integers(1, 3)))
    for _ in range(draw(st.integers(0, 6))):
        done = t()
        r.client("g1", "commit", done - 5, done, draw(st.sampled_from(("ok", "fail"))), node=draw(st.integers(1, 3)))
    if draw(st.booleans()):
        end = t()
        r.end_phase("end", end)
        r.end_phase("stop", end + draw(st.integers(0, 2000)))
    return r


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_runs())
def test_no_row_ever_has_its_stages_out_of_order(r):
    ops = r.ops
    stop = next((op["time"] for op in ops if (op.get("value") or {}).get("phase") == "stop"), None)
    kinds = {op["value"]["fault"]: op["value"]["kind"] for op in ops if (op.get("value") or {}).get("phase") == "start"}
    rows = failover_timeline(ops, r.events)
    for row in rows:
        assert stages_in_order(row), row
        if row["cause"] == "fault" and row["group"] is not None:
            if row["detect_by"] == "controlled_shutdown_requested":
                assert kinds[row["fault"]] == "terminate", row
            if row["moved"]:
                assert row["detect_ms"] is not None, row
                assert stop is None or row["time_ns"] + row["elect_ms"] * 1e6 < stop, row
        else:
            assert row["cause"] in ("end phase", "none in schedule", "fault")
    # every move of P2 to another leader (not an admin one) is in exactly one row of g1
    landed = {e["mono_ns"]: e["mono_ns_written"] for e in r.events if e["type"] == "partition_states_written"}
    states = sorted((landed[min(t for t in landed if t > e["mono_ns"])], e["leader"], e["reason"])
                    for e in r.events if e["type"] == "partition_state_written" and e["partition"] == 2)
    leader, moves = None, 0
    for _, new, reason in states:
        if leader is not None and new >= 0 and new != leader and reason != "preferred_admin":
            moves += 1
        if new >= 0:
            leader = new
    assert sum(1 for row in rows if row["group"] == "g1" and row["moved"]) == moves
