"""The web view's reducer (ui/state.py): events in, state out, no I/O."""
from __future__ import annotations

from kafkacommon.hashing import partition_for
from ui.state import ClusterState

N = 50


def ev(t: int, broker: int, type_: str, **fields) -> dict:
    return {"ts_ms": 1000.0 + t, "mono_ns": t * 1_000_000, "broker": broker, "type": type_, **fields}


def written(t: int, p: int, leader: int, isr: list[int], epoch: int = 0, topic="__consumer_offsets",
            reason="new_partition") -> dict:
    return ev(t, 1, "partition_state_written", topic=topic, partition=p, reason=reason, leader=leader,
              leader_epoch=epoch, isr=isr, controller_epoch=1, zk_version=epoch)


def start(s: ClusterState) -> None:
    for b in (1, 2, 3):
        s.apply(ev(1, b, "broker_starting", host="127.0.0.1", port=1, pid=100 + b))
        s.apply(ev(2, b, "broker_registered", broker_epoch=10 + b, session_id=f"0x{b}", replaced_predecessor=None))
    s.apply(ev(3, 1, "controller_elected", epoch=1, epoch_zk_version=1, elect_ms=1.0))
    for p in range(N):
        s.apply(written(4, p, 1 + p % 3, [1 + p % 3, 1 + (p + 1) % 3, 1 + (p + 2) % 3]))


def test_brokers_controller_and_partitions_from_events():
    s = ClusterState(N)
    start(s)
    snap = s.snapshot()
    assert [(b["id"], b["status"], b["broker_epoch"], b["controller"]) for b in snap["brokers"]] == [
        (1, "up", 11, True), (2, "up", 12, False), (3, "up", 13, False)]
    assert snap["controller"] == {"id": 1, "epoch": 1}
    assert len(snap["partitions"]) == N and all(len(p["isr"]) == 3 for p in snap["partitions"])
    assert not any(p["under_replicated"] or p["offline"] for p in snap["partitions"])
    assert len(s.take_patch()["partitions"]) == N   # the pending patch is left for the pages already open
    assert s.take_patch() is None


def test_a_kill_from_the_page_opens_a_failover_with_its_stages_in_order():
    s = ClusterState(N)
    start(s)
    g = "g"
    p = partition_for(g, N)
    old = 1 + p % 3
    s.apply(ev(5, old, "group_created", partition=p, group=g, reason="join"))
    s.apply(ev(6, old, "group_state_changed", partition=p, group=g, **{"from": "Empty", "to": "PreparingRebalance"},
               generation=0, reason="join"))
    s.take_patch()
    s.apply(ev(100, -1, "ui_action", action="kill", target=old, params={}, ok=True, error=None, detail="", remote="x"))
    patch = s.take_patch()
    assert [b["status"] for b in patch["brokers"] if b["id"] == old] == ["dead"]
    assert [r["group"] for r in patch["failovers"] if r["group"]] == [g]
    other = [b for b in (1, 2, 3) if b != old]
    s.apply(ev(3100, 1 if old != 1 else other[0], "broker_change", controller_epoch=1, new=[], dead=[old],
               bounced=[], epochs={}))
    s.apply(written(3110, p, other[0], other, epoch=1, reason="offline_election"))
    s.apply(ev(3150, other[0], "coordinator_loaded", partition=p, leader_epoch=1, records=5, replayed=3,
               skipped_records=0, bytes=100, end_offset=5, groups=1, duration_ms=12.5))
    s.apply(ev(3300, -1, "ui_group", group=g, coordinator=other[0], state="Stable", generation=2, protocol="range",
               members=[{"member_id": "m1", "assignment": ["t-0"]}], offsets={"t-0": 7}))
    row = next(r for r in s.snapshot()["failovers"] if r["group"] == g)
    assert (row["old_leader"], row["new_leader"]) == (old, other[0])
    assert (row["detect_ms"], row["elect_ms"], row["load_ms"], row["first_commit_ms"]) == (3000.0, 3010.0, 3050.0, 3200.0)
    assert s.groups[g]["coordinator"] == other[0] and s.groups[g]["members"]["m1"]["assignment"] == ["t-0"]
    assert s.coordinators[p]["state"] == "loaded" and s.coordinators[p]["load_ms"] == 12.5
    s.apply(ev(3400, other[0], "hw_changed", topic="t", partition=0, old=0, new=10, reason="leader", decreased=False))
    s.apply(written(3401, 0, other[0], other, topic="t"))
    s.apply(ev(3500, -1, "ui_group", group=g, coordinator=other[0], state="Stable", generation=2, protocol="range",
               members=[{"member_id": "m1", "assignment": ["t-0"]}], offsets={"t-0": 7}))
    assert s.groups[g]["lag"] == {"t-0": 3}   # the leader's HW 10, committed 7


def test_a_dead_replica_leaving_the_isr_marks_the_partition_under_replicated_and_no_isr_offline():
    s = ClusterState(N)
    start(s)
    s.apply(written(10, 0, 1, [1, 2], reason="isr_shrink_dead_replica"))
    s.apply(written(11, 1, -1, [2], epoch=1, reason="offline_no_isr_alive"))
    parts = {p["key"]: p for p in s.snapshot()["partitions"]}
    assert parts["__consumer_offsets-0"]["under_replicated"] and not parts["__consumer_offsets-0"]["offline"]
    assert parts["__consumer_offsets-1"]["offline"]


def test_a_new_controller_is_recorded_in_the_history_and_detects_a_controller_kill():
    s = ClusterState(N)
    start(s)
    s.apply(ev(100, -1, "ui_action", action="kill", target=1, params={}, ok=True, error=None, detail="", remote="x"))
    s.apply(ev(3200, 2, "controller_elected", epoch=2, epoch_zk_version=2, elect_ms=1.0))
    snap = s.snapshot()
    assert [(c["broker"], c["epoch"]) for c in snap["controllers"]] == [(1, 1), (2, 2)]
    ctrl = [r for r in snap["failovers"] if r["group"] is None]
    assert ctrl and ctrl[0]["new_controller"] == 2 and ctrl[0]["controller_failover_ms"] == 3100.0


def test_a_chaos_history_is_replayed_through_the_same_reducer():
    s = ClusterState(N)
    start(s)
    s.apply({"index": 0, "type": "info", "process": "nemesis", "time": 50_000_000, "f": "pause",
             "value": {"fault": 0, "phase": "start", "kind": "pause", "target": "b2", "nodes": [2]}})
    assert s.brokers[2]["status"] == "paused" and s.faults[-1]["source"] == "history"
    s.apply({"index": 1, "type": "info", "process": "nemesis", "time": 60_000_000, "f": "heal",
             "value": {"fault": 0, "phase": "heal", "kind": "pause", "target": "b2", "nodes": [2]}})
    assert s.brokers[2]["status"] == "up"
    s.apply({"index": 2, "type": "ok", "process": 3, "time": 70_000_000, "f": "commit", "group": "g1",
             "value": {"member": "m", "generation": 1, "offsets": {"events/0": 4}}})
    assert s.groups["g1"]["offsets"] == {"events-0": 4}


def test_an_observation_that_finds_nothing_new_sends_the_page_nothing():
    s = ClusterState(N)
    start(s)
    procs = ev(5, -1, "ui_procs", brokers={str(b): {"state": "running", "pid": 100 + b} for b in (1, 2, 3)})
    desc = ev(6, -1, "ui_group", group="g", coordinator=1, state="Stable", generation=1, protocol="range",
              members=[{"member_id": "m1", "client_id": "c1", "assignment": ["t-0"]}], offsets={"t-0": 5})
    s.apply(procs)
    s.apply(desc)
    patch = s.take_patch()
    assert [g["group"] for g in patch["groups"]] == ["g"] and patch["groups"][0]["offsets"] == {"t-0": 5}
    s.apply(dict(procs, mono_ns=7_000_000))
    s.apply(dict(desc, mono_ns=8_000_000))
    assert s.take_patch() is None                      # the same processes and the same describe again
    s.apply(dict(desc, mono_ns=9_000_000, offsets={"t-0": 6}))
    s.apply(dict(procs, mono_ns=10_000_000, brokers={"1": {"state": "paused", "pid": 101}}))
    patch = s.take_patch()
    assert patch["groups"][0]["offsets"] == {"t-0": 6}
    assert [b["status"] for b in patch["brokers"]] == ["paused", "up", "up"]


def test_transactional_ids_follow_their_coordinators_and_states():
    s = ClusterState(N)
    start(s)
    s.apply(written(5, 7, 2, [2, 3, 1], topic="__transaction_state"))
    s.apply(ev(6, 2, "txn_coordinator_load_started", partition=7, coordinator_epoch=0))
    s.apply(ev(7, 2, "txn_coordinator_loaded", partition=7, coordinator_epoch=0, records=0, replayed=0,
               skipped_records=0, bytes=0, end_offset=0, transactions=0, duration_ms=1.5))
    s.take_patch()
    s.apply(ev(8, 2, "txn_state_changed", partition=7, transactional_id="eos-0", **{"from": None, "to": "Empty"},
               producer_id=1000, producer_epoch=0, partitions=[], reason="init_producer_id"))
    s.apply(ev(9, 2, "txn_state_changed", partition=7, transactional_id="eos-0", **{"from": "Empty", "to": "Ongoing"},
               producer_id=1000, producer_epoch=0, partitions=[["out", 0]], reason="add_partitions"))
    [row] = s.take_patch()["transactions"]
    assert row == dict(row, transactional_id="eos-0", partition=7, coordinator=2, coordinator_state="loaded",
                       state="Ongoing", producer_id=1000, producer_epoch=0, partitions=["out-0"], commits=0)
    for t, to in ((10, "PrepareCommit"), (11, "CompleteCommit")):
        s.apply(ev(t, 2, "txn_state_changed", partition=7, transactional_id="eos-0", **{"from": None, "to": to},
                   producer_id=1000, producer_epoch=0, partitions=[], reason="end_txn"))
    assert s.snapshot()["transactions"][0]["commits"] == 1
    # the coordinator dies: the partition moves, the new leader loads it and finds the id as it was
    s.apply(written(20, 7, 3, [3, 1], epoch=1, topic="__transaction_state", reason="offline_election"))
    row = s.take_patch()["transactions"][0]
    assert (row["coordinator"], row["coordinator_state"]) == (3, None)
    s.apply(ev(21, 3, "txn_coordinator_load_started", partition=7, coordinator_epoch=1))
    s.apply(ev(22, 3, "txn_loaded", partition=7, transactional_id="eos-0", state="CompleteCommit",
               producer_id=1000, producer_epoch=0, partitions=[]))
    s.apply(ev(23, 3, "txn_coordinator_loaded", partition=7, coordinator_epoch=1, records=3, replayed=1,
               skipped_records=0, bytes=90, end_offset=3, transactions=1, duration_ms=2.0))
    row = s.snapshot()["transactions"][0]
    assert (row["coordinator"], row["coordinator_state"], row["state"], row["reason"]) == (3, "loaded",
                                                                                          "CompleteCommit", "loaded")


def test_an_offline_log_directory_shows_on_its_broker_until_it_restarts_and_detects_the_failover():
    s = ClusterState(N)
    start(s)
    g = "g"
    p = partition_for(g, N)
    old = 1 + p % 3
    s.apply(ev(5, old, "group_created", partition=p, group=g, reason="join"))
    s.apply({"index": 0, "type": "info", "process": "nemesis", "time": 10_000_000, "f": "disk-full",
             "value": {"fault": 0, "phase": "start", "kind": "disk-full", "target": f"coordinator:{g}",
                       "nodes": [old]}})
    assert s.brokers[old]["disk_fault"] == "disk-full" and s.brokers[old]["status"] == "up"
    s.take_patch()
    s.apply(ev(20, old, "log_dir_failed", dir="/d/0", error="OSError: [Errno 28] No space left on device",
               during="append", replicas=[f"__consumer_offsets-{p}"], online_dirs=["/d/1"], offline_dirs=["/d/0"],
               halting=False))
    patch = s.take_patch()
    assert [b["offline_dirs"] for b in patch["brokers"] if b["id"] == old] == [["/d/0"]]
    s.apply(ev(25, 1, "replicas_offline", controller_epoch=1, broker_id=old, replicas=["x-0"], led=[]))
    assert s.failovers[-1]["detect_ms"] is None   # not the group's partition
    s.apply(ev(30, 1, "replicas_offline", controller_epoch=1, broker_id=old, replicas=[f"__consumer_offsets-{p}"],
               led=[f"__consumer_offsets-{p}"]))
    row = s.failovers[-1]
    assert (row["group"], row["detect_ms"], row["detect_by"]) == (g, 20.0, "replicas_offline")
    s.apply(ev(40, old, "broker_starting", host="127.0.0.1", port=1, pid=999))
    assert s.brokers[old]["offline_dirs"] == []
    s.apply(ev(50, old, "log_dir_failed", dir="/d/0", error="e", during="append", replicas=[], online_dirs=[],
               offline_dirs=["/d/0"], halting=True))
    s.apply(ev(51, old, "broker_halted", reason="every log directory is offline", exit_code=1))
    assert s.brokers[old]["status"] == "dead"
