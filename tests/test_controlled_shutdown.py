"""SIGTERM runs a controlled shutdown: leaderships move and ISRs drop the broker before it exits."""
from __future__ import annotations

import signal

import pytest

from helpers import events, offsets_partitions
from node.waiting import wait_for


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
    writes = events(cluster, type_="partition_state_written", reason="auto_rebalance")
    assert sorted({e["partition"] for e in writes if e["leader"] == victim}) == preferred
    for p, s in offsets_partitions(after).items():
        assert s["leader"] == s["replicas"][0], (p, s)
