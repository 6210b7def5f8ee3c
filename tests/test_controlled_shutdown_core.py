"""Controlled shutdown in the controller core (Kafka's doControlledShutdown), no I/O."""
from __future__ import annotations

from controller.core import (BROKER_NOT_AVAILABLE, NONE, NOT_CONTROLLER, STALE_BROKER_EPOCH, LeaderAndIsrCmd,
                             StopReplicaCmd)
from test_controller_core import EPOCH, apply, brokers, las, started, state_of

T = "t"


def cluster():
    topics = {T: {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2), 3: (1,)}}
    states = {(T, 0): (las(1, 4, (1, 2, 3)), 7), (T, 1): (las(2, 4, (2, 3, 1)), 7),
              (T, 2): (las(3, 4, (3, 1, 2)), 7), (T, 3): (las(1, 0, (1,)), 0)}
    return started(topics, states, brokers(1, 2, 3))


def test_led_partitions_move_and_followed_ones_drop_the_broker():
    core = cluster()
    code, plan, remaining = core.on_controlled_shutdown(1, 101)
    assert code == NONE
    w = {(c.topic, c.partition): c for c in plan.writes}
    # led with RF > 1: first replica live, in the ISR and not shutting down; ISR without it; epoch + 1
    assert w[(T, 0)].state == las(2, 5, (2, 3)) and w[(T, 0)].reason == "controlled_shutdown"
    # followed: out of the ISR, same leader, leader epoch + 1 (Kafka's OfflineReplica transition), and
    # StopReplica to the broker
    assert w[(T, 1)].state == las(2, 5, (2, 3)) and w[(T, 2)].state == las(3, 5, (3, 2))
    assert plan.stop_replicas == {1: [(T, 1), (T, 2)]}
    # RF 1: nobody else can lead; Kafka's doControlledShutdown acts on and reports only partitions with more
    # than one replica, so it stays and is not reported (the broker does not retry for it)
    assert (T, 3) not in w and remaining == []
    requests = apply(core, plan)
    assert StopReplicaCmd(((T, 1), (T, 2))) in requests[1]
    assert state_of(core, (T, 0)).leader == 2


def test_the_stopping_follower_gets_stop_replica_not_the_shrunk_state():
    """Kafka's OfflineReplica transition sends the shrunk ISR to the other replicas only: the stopping
    broker would otherwise follow again in the new epoch until StopReplica arrives.  The partitions it
    led go to it too (it must stop leading them)."""
    core = cluster()
    _, plan, _ = core.on_controlled_shutdown(1, 101)
    requests = apply(core, plan)
    to_1 = [(v.topic, v.partition) for c in requests[1] if isinstance(c, LeaderAndIsrCmd) for v in c.partitions]
    assert to_1 == [(T, 0)]
    to_3 = [(v.topic, v.partition) for c in requests[3] if isinstance(c, LeaderAndIsrCmd) for v in c.partitions]
    assert sorted(to_3) == [(T, 0), (T, 1), (T, 2)]


def test_a_shutting_down_broker_keeps_what_it_could_not_hand_over_until_it_is_gone():
    core = cluster()
    _, plan, _ = core.on_controlled_shutdown(1, 101)
    apply(core, plan)
    # another broker's change must not take the still-running broker's partition offline
    plan = core.on_broker_change(brokers(1, 2, 3, 4))
    assert (T, 3) not in {(c.topic, c.partition) for c in plan.writes}
    # nor may it be elected anywhere: partition 0's preferred leader is broker 1
    assert core.elect_preferred([(T, 0)]).writes == []
    # once it dies, its RF-1 partition goes offline (no other replica), and nothing else changes
    plan = core.on_broker_change(brokers(2, 3, 4))
    assert [(c.topic, c.partition, c.state.leader) for c in plan.writes] == [(T, 3, -1)]


def test_a_replicated_partition_nobody_else_can_lead_is_reported_back():
    core = started({T: {0: (1, 2)}}, {(T, 0): (las(1, 4, (1,)), 7)}, brokers(1, 2))    # ISR: broker 1 only
    code, plan, remaining = core.on_controlled_shutdown(1, 101)
    assert code == NONE and plan.writes == [] and remaining == [(T, 0)]


def test_errors_follow_kafka():
    core = cluster()
    assert core.on_controlled_shutdown(1, 100)[0] == STALE_BROKER_EPOCH  # older than registered (101)
    assert core.on_controlled_shutdown(9, 1)[0] == BROKER_NOT_AVAILABLE
    core.on_resign()
    assert core.on_controlled_shutdown(1, 101)[0] == NOT_CONTROLLER


def test_a_newer_controllers_state_is_left_alone():
    core = started({T: {0: (1, 2)}}, {(T, 0): (las(1, 3, (1, 2), controller_epoch=EPOCH + 1), 2)}, brokers(1, 2))
    code, plan, remaining = core.on_controlled_shutdown(1, 101)
    assert code == NONE and plan.writes == [] and remaining == []


def test_the_moved_leaders_are_a_batch_of_their_own_before_the_shrunk_isrs():
    """Kafka's doControlledShutdown: the led partitions' new leaders are written and sent (handleStateChanges to
    OnlinePartition), then StopReplica and the followed partitions' shrunk ISRs (OfflineReplica)."""
    core = cluster()
    _, plan, _ = core.on_controlled_shutdown(1, 101)
    led, followed = plan.controlled_shutdown_batches()
    assert [(w.topic, w.partition) for w in led.writes] == [(T, 0)] and not led.stop_replicas
    assert [(w.topic, w.partition) for w in followed.writes] == [(T, 1), (T, 2)]
    assert followed.stop_replicas == {1: [(T, 1), (T, 2)]} and followed.observed == []
    assert [e.name for e in led.observed] == ["controlled_shutdown_requested"]
    first = apply(core, led)
    assert [(v.topic, v.partition) for c in first[1] if isinstance(c, LeaderAndIsrCmd) for v in c.partitions] == [(T, 0)]
    assert not any(isinstance(c, StopReplicaCmd) for c in first[1])
    second = apply(core, followed)
    assert StopReplicaCmd(((T, 1), (T, 2))) in second[1]
    assert not any(isinstance(c, LeaderAndIsrCmd) for c in second[1])
    assert sorted((v.topic, v.partition) for c in second[3] if isinstance(c, LeaderAndIsrCmd)
                  for v in c.partitions) == [(T, 1), (T, 2)]


def test_a_state_read_again_and_found_stale_is_sent_to_its_replicas_as_read():
    """A new controller that decided from a stale cache (its broker missed the old controller's last requests,
    e.g. a controlled shutdown's shrunk ISR) learns the state from ZooKeeper when it verifies the cache, and its
    replicas learn it from it: the leader would otherwise keep the ISR of its older epoch and never propose
    taking the stopped broker back in."""
    core = cluster()   # (T, 1): leader 2, epoch 4, ISR (2, 3, 1) at zkVersion 7, as the cache had it
    shrunk = las(2, 5, (2, 3), controller_epoch=EPOCH - 1)
    plan = core.reload_states({(T, 1): (shrunk, 8)})
    assert plan.writes == [] and plan.resync == [(T, 1)]
    requests = apply(core, plan)
    for b in (2, 3):
        sent = [v for c in requests[b] if isinstance(c, LeaderAndIsrCmd) for v in c.partitions]
        assert [((v.topic, v.partition), v.state, v.zk_version) for v in sent] == [((T, 1), shrunk, 8)]
    # nothing re-read differs: nothing is sent again
    assert core.reload_states({(T, 1): (shrunk, 8)}).resync == []
