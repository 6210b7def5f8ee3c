"""Controller election, failover and fencing on a real ZooKeeper with real broker processes."""
from __future__ import annotations

import signal
import time

from helpers import earliest_expiry_ms, events, offsets_partitions
from util.waiting import wait_for

SESSION_MS = 3000
MARGIN_S = 3.0  # detection is bounded by the session timeout plus a tick; the rest is work and polling


def test_fresh_cluster_has_one_controller_and_every_partition_led(make_cluster):
    cluster = make_cluster(3)
    view = cluster.view()
    assert view.controller_id in (1, 2, 3)
    assert view.controller_epoch == 1
    assert cluster.controller_epoch() == 1
    elected = events(cluster, type_="controller_elected")
    assert [e["broker"] for e in elected] == [view.controller_id]
    assert all(e["controller_id"] == view.controller_id for e in events(cluster, type_="controller_election_lost"))
    parts = offsets_partitions(view)
    assert sorted(parts) == list(range(50))
    for p, s in parts.items():
        assert len(s["replicas"]) == 3 and sorted(s["replicas"]) == [1, 2, 3]
        assert s["leader"] == s["replicas"][0], f"partition {p}: the preferred replica leads a new partition"
        assert sorted(s["isr"]) == [1, 2, 3]
        assert s["leader_epoch"] == 0 and s["controller_epoch"] == 1
    # round-robin placement: leaders spread evenly over the brokers
    counts = {b: sum(s["leader"] == b for s in parts.values()) for b in (1, 2, 3)}
    assert max(counts.values()) - min(counts.values()) <= 1, counts


def _check_failover(before, after, dead: int, led_bump: int = 1) -> None:
    """``led_bump``: the new leader epochs of the partitions the dead broker led (2 when a new controller's
    failover first takes the dead replica offline, leader -1, and then elects, as Kafka 2.8 does)."""
    b_parts, a_parts = offsets_partitions(before), offsets_partitions(after)
    for p, old in b_parts.items():
        new = a_parts[p]
        assert dead not in new["isr"], f"partition {p}: dead broker {dead} still in ISR {new['isr']}"
        assert new["leader"] in new["isr"] and new["leader"] != dead
        if old["leader"] == dead:
            assert new["leader_epoch"] == old["leader_epoch"] + led_bump, p
            assert new["leader"] == next(r for r in old["replicas"] if r != dead and r in old["isr"]), p
        else:  # Kafka 2.8's removeReplicasFromIsr: a dead follower's removal is a new leader epoch
            bump = 1 if dead in old["isr"] else 0
            assert (new["leader"], new["leader_epoch"]) == (old["leader"], old["leader_epoch"] + bump), p


def test_sigkill_of_the_controller_elects_a_new_one_after_the_session_timeout(make_cluster):
    cluster = make_cluster(3)
    before = cluster.view()
    old = before.controller_id
    t0 = time.monotonic()
    cluster.signal_broker(old, signal.SIGKILL)
    after = wait_for(lambda: (v := cluster.view()).controller_epoch == before.controller_epoch + 1
                     and v.controller_id not in (None, old) and v,
                     SESSION_MS / 1000 + MARGIN_S, "a new controller with epoch + 1")
    detected = time.monotonic() - t0
    assert detected * 1000 >= earliest_expiry_ms(SESSION_MS), "a crash cannot be detected before the session expires"
    after = wait_for(lambda: (v := cluster.view()) and all(
        old not in s["isr"] and s["leader"] in s["isr"] for s in offsets_partitions(v).values()) and v, MARGIN_S,
        "dead broker out of ISRs and every leader elected")   # Kafka's order: leader -1 first, then elected
    assert old not in after.brokers
    _check_failover(before, after, old, led_bump=2)
    change = wait_for(lambda: events(cluster, type_="controller_context_loaded", epoch=after.controller_epoch),
                      5.0, "the new controller's context_loaded event")
    assert change[0]["broker"] == after.controller_id and old not in change[0]["live_brokers"]


def test_sigterm_of_the_controller_hands_over_without_the_session_timeout(make_cluster):
    # A long session timeout: only a clean session close can make this quick.
    cluster = make_cluster(3, **{"zookeeper.session.timeout.ms": 20000})
    before = cluster.view()
    old = before.controller_id
    cluster.signal_broker(old, signal.SIGTERM)
    after = wait_for(lambda: (v := cluster.view()).controller_id not in (None, old)
                     and v.controller_epoch == before.controller_epoch + 1 and v,
                     5.0, "a new controller well before the 20 s session timeout")
    cluster.wait_exit(old, timeout=10)
    after = wait_for(lambda: (v := cluster.view()) and all(
        old not in s["isr"] and s["leader"] in s["isr"] for s in offsets_partitions(v).values()) and v, 5.0,
        "dead broker out of ISRs and every leader elected")
    _check_failover(before, after, old)
    resigned = events(cluster, broker=old, type_="controller_resigned")
    assert resigned and resigned[0]["epoch"] == before.controller_epoch


def test_paused_controller_is_fenced_after_its_session_expires(make_cluster):
    cluster = make_cluster(3, **{"kafkasim.controller.metadata.resend.interval.ms": 300})
    before = cluster.view()
    zombie, old_epoch = before.controller_id, before.controller_epoch
    wait_for(lambda: events(cluster, broker=zombie, type_="controller_failover_done", epoch=old_epoch),
             10.0, "the controller to finish its own failover before we pause it")
    paused_ns = time.monotonic_ns()
    cluster.signal_broker(zombie, signal.SIGSTOP)
    mid = wait_for(lambda: (v := cluster.view()).controller_id not in (None, zombie)
                   and v.controller_epoch == old_epoch + 1 and v and all(
                       zombie not in s["isr"] for s in offsets_partitions(v).values()) and v,
                   SESSION_MS / 1000 + MARGIN_S, "a new controller while the old one is paused")
    new_epoch = mid.controller_epoch
    # let the new controller's requests reach the live brokers, so they know the new epoch
    for b in mid.brokers:
        wait_for(lambda b=b: events(cluster, broker=b, type_="leader_and_isr_unchanged", controller_epoch=new_epoch)
                 or events(cluster, broker=b, type_="became_leader", controller_epoch=new_epoch),
                 5.0, f"broker {b} to hear from controller epoch {new_epoch}")
    resumed_ns = time.monotonic_ns()
    cluster.signal_broker(zombie, signal.SIGCONT)

    resigned = wait_for(lambda: [e for e in events(cluster, broker=zombie, type_="controller_resigned")
                                 if e["epoch"] == old_epoch], 10.0, "the old controller to resign")
    assert resigned[0]["mono_ns"] > resumed_ns
    # The zombie acted on its stale epoch after resuming; every broker that knew better refused it.
    rejected = wait_for(lambda: events(cluster, type_="request_rejected", controller_id=zombie,
                                       request_controller_epoch=old_epoch), 10.0,
                        "brokers to reject the old controller's requests")
    for e in rejected:
        assert e["broker"] != zombie and e["mono_ns"] > resumed_ns
        if e["error"] == "STALE_BROKER_EPOCH":
            # Kafka checks the broker epoch first: a broker that re-registered meanwhile (its own session
            # lost under load) refuses the zombie's request for carrying its old epoch
            assert e["request_broker_epoch"] < e["broker_epoch"], e
            assert e["broker_epoch"] > before.brokers[e["broker"]]["epoch"], e
        else:
            assert e["error"] == "STALE_CONTROLLER_EPOCH" and e["latest_controller_epoch"] == new_epoch, e
    # ZooKeeper's state: the new controller's epoch stands, and no write of the zombie's landed.
    after = wait_for(lambda: (v := cluster.view()) and zombie in v.brokers and v, 10.0, "the zombie to re-register")
    assert after.controller_id == mid.controller_id and after.controller_epoch == new_epoch
    assert cluster.controller_epoch() == new_epoch
    for p, s in offsets_partitions(after).items():
        m = offsets_partitions(mid)[p]
        assert s["controller_epoch"] <= new_epoch
        if s["zk_version"] != m["zk_version"]:
            assert s["controller_epoch"] == new_epoch, f"partition {p} was written by the old controller"
    # writes the zombie began after it was paused: a write it had sent before (its ZooKeeper reply read only after
    # it resumed) ZooKeeper applied under the old epoch, before the new controller's (the states above agree)
    zombie_writes = [e for e in events(cluster, broker=zombie, type_="partition_states_written")
                     if e["mono_ns_written"] - round(e["write_ms"] * 1e6) > paused_ns]
    assert zombie_writes == []
    assert after.brokers[zombie]["epoch"] > before.brokers[zombie]["epoch"]


def test_broker_restarted_at_once_is_seen_as_bounced(make_cluster):
    # a session long enough for a loaded machine to start a broker again inside it (the old node outlives it):
    # under three test workers' load a restart once took longer than 16 s
    cluster = make_cluster(3, **{"zookeeper.session.timeout.ms": 30000})
    before = cluster.view()
    victim = next(b for b in (1, 2, 3) if b != before.controller_id)
    old_epoch = before.brokers[victim]["epoch"]
    # the proof a restart needs is written once the registration is done (its session file, then this line):
    # the cluster can be up before that on a loaded machine (a CI run killed a victim whose znode was made but
    # whose file was not yet written, and its restart waited for the old session's timeout, as it should)
    wait_for(lambda: events(cluster, broker=victim, type_="broker_registered"), 30.0, "the victim's registration")
    killed_ns = time.monotonic_ns()
    cluster.signal_broker(victim, signal.SIGKILL)
    cluster.wait_exit(victim)
    cluster.start_broker(victim)
    # well inside the 30 s session timeout, the restarted broker proves the old node was its own
    try:
        after = wait_for(lambda: (v := cluster.view()) and victim in v.brokers
                         and v.brokers[victim]["epoch"] > old_epoch and v, 25.0, "the broker to register again")
    except TimeoutError as e:   # say where the restarted broker got to
        since = [(round((x["mono_ns"] - killed_ns) / 1e6), x["type"]) for x in events(cluster, broker=victim)
                 if x["mono_ns"] > killed_ns]
        raise AssertionError(f"broker {victim} not registered again 25 s after the restart; its events since the "
                             f"kill (ms, type): {since}; the end of its log: "
                             f"{(cluster.run_dir / 'logs' / f'broker-{victim}.log').read_text()[-2000:]}") from e
    change = wait_for(lambda: [e for e in events(cluster, type_="broker_change", broker=before.controller_id)
                               if e["mono_ns"] > killed_ns], 5.0, "the controller to see the change")
    assert [(c["new"], c["dead"], c["bounced"]) for c in change] == [([], [], [victim])]
    new_epoch = after.brokers[victim]["epoch"]
    assert change[0]["epochs"] == {str(victim): new_epoch}
    # handled as a failure then a start-up: it leaves leaderships and ISRs
    after = wait_for(lambda: (v := cluster.view()) and all(
        s["leader"] != victim and victim not in s["isr"] for s in offsets_partitions(v).values()) and v,
        5.0, "the bounced broker's leaderships to move")
    assert after.controller_epoch == before.controller_epoch
    # the broker logs its registration once it has recorded its session, which may come after the controller
    # has already acted on the new node: wait for that line
    reg = wait_for(lambda: [e for e in events(cluster, broker=victim, type_="broker_registered")
                            if e["broker_epoch"] == new_epoch], 5.0, "the restarted broker's broker_registered")
    assert reg[-1]["replaced_predecessor"] is not None
