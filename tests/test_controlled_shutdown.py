"""SIGTERM runs a controlled shutdown: leaderships move and ISRs drop the broker before it exits."""
from __future__ import annotations

import signal

import pytest

from helpers import events, offsets_partitions
from util.waiting import wait_for


@pytest.mark.parametrize("who", ["follower-broker", "controller"])
def test_controlled_shutdown_moves_every_leadership_before_the_broker_exits(make_cluster, who):
    cluster = make_cluster(3)
    before = cluster.view()
    ctl = before.controller_id
    victim = ctl if who == "controller" else next(b for b in (1, 2, 3) if b != ctl)
    led = [p for p, s in offsets_partitions(before).items() if s["leader"] == victim]
    assert led
    cluster.signal_broker(victim, signal.SIGTERM)
    cluster.wait_exit(victim, timeout=20)

    done = events(cluster, broker=victim, type_="controlled_shutdown_done")
    assert done and done[0]["succeeded"] and done[0]["remaining"] == [] and done[0]["attempts"] == 1
    closing = events(cluster, broker=victim, type_="zk_session_closing")[0]["mono_ns"]
    # the moves were written, by the controller of the time, before the broker let its session go
    moved = [e for e in events(cluster, type_="partition_state_written", reason="controlled_shutdown")]
    assert sorted(e["partition"] for e in moved) == sorted(led)
    writes = events(cluster, type_="partition_states_written", epoch=before.controller_epoch)
    assert any(w["mono_ns_written"] < closing for w in writes)
    assert all(e["broker"] == ctl for e in moved)
    # (StopReplica for its follower replicas is sent asynchronously, as in Kafka: not waited for)
    # Kafka 2.8's KafkaServer.shutdown order: the server, the coordinators, the replicas and the logs stop first;
    # the controller (if this broker is it) resigns after them, just before the session closes
    # (the handover wait only when it still led partitions with followers as it asked: a broker whose
    # LeaderAndIsr of the cluster's start it had not applied yet leads none)
    steps = [e["step"] for e in events(cluster, broker=victim, type_="shutdown_step")]
    assert [s for s in steps if s != "controlled_shutdown_handover"] == [
        "controlled_shutdown", "server_stop", "groups_close", "replicas_close", "controller_shutdown",
        "zk_session_close"]
    if "controlled_shutdown_handover" in steps:
        assert steps.index("controlled_shutdown_handover") == 1, steps
    resigned = events(cluster, broker=victim, type_="controller_resigned")
    if who == "controller":
        step_ns = {e["step"]: e["mono_ns"] for e in events(cluster, broker=victim, type_="shutdown_step")}
        assert [r["reason"] for r in resigned] == ["shutdown"]
        assert step_ns["controller_shutdown"] < resigned[0]["mono_ns"] < closing
    else:
        assert resigned == []

    after = wait_for(lambda: (v := cluster.view()) and victim not in v.brokers and v.controller_id
                     not in (None, victim) and v, 10, "the broker gone and a controller in place")
    for p, s in offsets_partitions(after).items():
        assert s["leader"] != victim and victim not in s["isr"] and s["leader"] >= 0
        old = offsets_partitions(before)[p]
        # led: a new leader; followed: out of the ISR: each a new leader epoch (Kafka 2.8's OfflineReplica
        # transition writes the shrunk ISR with leaderEpoch + 1)
        assert s["leader_epoch"] == old["leader_epoch"] + (1 if victim in old["isr"] else 0)


def test_the_automatic_imbalance_check_gives_leadership_back_to_preferred_replicas(make_cluster):
    """auto.leader.rebalance.enable: after a broker restarts, the controller's periodic check moves
    the leaderships it prefers back to it, with no admin command."""
    cluster = make_cluster(3, **{"auto.leader.rebalance.enable": True,
                                 "leader.imbalance.check.interval.seconds": 1})
    before = cluster.view()
    victim = next(b for b in (1, 2, 3) if b != before.controller_id)
    preferred = sorted(p for p, s in offsets_partitions(before).items() if s["replicas"][0] == victim)
    assert preferred
    cluster.stop_broker(victim)  # controlled shutdown: its leaderships move to the next replica
    moved = offsets_partitions(cluster.view())
    assert all(moved[p]["leader"] != victim for p in preferred)
    cluster.start_broker(victim)
    after = wait_for(lambda: (v := cluster.view()) and all(
        offsets_partitions(v)[p]["leader"] == victim for p in preferred) and v, 30,
        "the imbalance check to give the restarted broker its preferred leaderships back")
    # the controller logs its writes' lines after they land in ZooKeeper (and after sending the requests): under
    # load the view can show the moves before the lines are written, so the lines are waited for, not read once
    def rebalanced() -> list[int]:
        writes = events(cluster, type_="partition_state_written", reason="auto_rebalance")
        return sorted({e["partition"] for e in writes if e["leader"] == victim})
    wait_for(lambda: rebalanced() == preferred, 10, "the auto_rebalance writes' lines for every preferred partition")
    for p, s in offsets_partitions(after).items():
        assert s["leader"] == s["replicas"][0], (p, s)


def test_acks_all_writes_do_not_wait_out_the_lag_time_after_a_clean_failover_or_a_kill(make_cluster):
    """Kafka 2.8's rules (KIP-841 off, the default): the controller takes a stopping broker out of every
    ISR it is in (a new leader epoch: the leader counts it no more), and a killed one when its ZooKeeper
    session expires.  So an acks=all write waits at most for that, never for replica.lag.time.max.ms
    (60 s here: a write that waited for it would time out after 5 s)."""
    import grpc
    from test_replication_cluster import TOPIC, leader_of, produce
    from kafkacommon.metadata import TopicAssignment
    from kafkacommon import errors
    # no automatic preferred-leader rebalance: it could hand the leadership to the broker about to be killed
    cluster = make_cluster(3, **{"zookeeper.session.timeout.ms": 3000, "replica.lag.time.max.ms": 60000,
                                 "replica.fetch.wait.max.ms": 200, "auto.leader.rebalance.enable": False})
    assert not cluster.cfg.get("kafkasim.isr.kip841.enable")
    ctl = cluster.view().controller_id
    a, b = [x for x in (1, 2, 3) if x != ctl]
    cluster.zk().create_topic_znode(TopicAssignment(TOPIC, {0: (a, b)}, "%032x" % 841, {}))

    def state() -> dict:
        return cluster.view().topics.get(TOPIC, {}).get("partitions", {}).get(0) or {"leader": -1, "isr": []}

    def write(stopping: int) -> int:
        """One acks=all write to the leader the view names; its error code.  The view is read before the write
        is sent: a stopping leader may move its leadership and exit in between, and a write that then finds
        its port closed meets the move as a client does (it looks the leader up again), as NOT_LEADER."""
        leader, _ = leader_of(cluster, TOPIC)
        try:
            return produce(cluster, [b"w"], leader=leader).error_code
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNAVAILABLE and leader == stopping, (leader, stopping, e.code())
            return errors.NOT_LEADER_OR_FOLLOWER

    def writes_until(done, what: str, stopping: int) -> None:
        """acks=all writes, one after another, until ``done()``: each succeeds, or meets a leader move."""
        codes = []
        while not done():
            codes.append(write(stopping))
            assert codes[-1] in (errors.NONE, errors.NOT_LEADER_OR_FOLLOWER), (what, errors.name(codes[-1]))
        for _ in range(3):
            r = wait_for(lambda: (x := produce(cluster, [b"after"])).error_code != errors.NOT_LEADER_OR_FOLLOWER
                         and x, 10, f"a leader after {what}")
            assert r.error_code == errors.NONE, (what, errors.name(r.error_code))

    wait_for(lambda: produce(cluster, [b"first"]).error_code == errors.NONE and sorted(state()["isr"]) == [a, b],
             20, "a working leader and a full ISR")
    leader = state()["leader"]
    # the leader stops cleanly: its leadership moves, then it follows without fetching (Kafka's makeFollowers
    # while shutting down: a caught-up fetch would make the new leader count it for the HW), then exits
    cluster.signal_broker(leader, signal.SIGTERM)
    writes_until(lambda: leader not in cluster.view().brokers, "the leader's controlled shutdown", leader)
    cluster.wait_exit(leader, timeout=20)
    assert events(cluster, leader, "follower_fetch_skipped", topic=TOPIC, partition=0, reason="shutting_down")
    signalled = events(cluster, leader, "signal_received")[-1]["mono_ns"]
    assert not [e for e in events(cluster, type_="isr_change_proposed", topic=TOPIC, kind="expand")
                if e["mono_ns"] > signalled and leader in e["changed"]]
    cluster.start_broker(leader)
    wait_for(lambda: sorted(state()["isr"]) == [a, b], 30, "the restarted broker back in the ISR")
    follower = next(x for x in (a, b) if x != state()["leader"])
    # a follower stops cleanly: out of the ISR at once
    cluster.signal_broker(follower, signal.SIGTERM)
    writes_until(lambda: follower not in cluster.view().brokers and follower not in state()["isr"],
                 "a follower's controlled shutdown", follower)
    cluster.wait_exit(follower, timeout=20)
    cluster.start_broker(follower)
    wait_for(lambda: sorted(state()["isr"]) == [a, b], 30, "the restarted follower back in the ISR")
    # a follower killed: out of the ISR when its session expires (3 s)
    victim = next(x for x in (a, b) if x != state()["leader"])
    cluster.signal_broker(victim, signal.SIGKILL)
    writes_until(lambda: victim not in state()["isr"], "a follower's death", victim)
