"""replication/broker_state.py: broker-side fencing of controller requests (reference §2 "Broker-side fencing").

- broker epoch in the request (not -1) below ours -> STALE_BROKER_EPOCH (77);
- controller epoch below the latest seen -> STALE_CONTROLLER_EPOCH (11); equal accepted; higher adopted;
- LeaderAndIsr per partition: applied only when its leader epoch is higher (Kafka 2.8's
  becomeLeaderOrFollower; the zkVersion plays no part), else 11;
  a broker outside the replicas gets UNKNOWN_TOPIC_OR_PARTITION (3);
- StopReplica: leader epoch <= ours -> FENCED_LEADER_EPOCH (74); -1 and -2 bypass.
"""
from __future__ import annotations

import pytest

from kafkacommon.assignment import assign_replicas
from kafkacommon import errors
from replication.broker_state import BrokerState, Header, PartitionInfo

ME = 2
OUR_BROKER_EPOCH = 500


def info(p: int = 0, leader: int = 1, leader_epoch: int = 3, isr=(1, 2, 3), replicas=(1, 2, 3),
         zk_version: int = 10, controller_epoch: int = 4, topic: str = "t") -> PartitionInfo:
    return PartitionInfo(topic, p, leader, leader_epoch, tuple(isr), tuple(replicas), zk_version, controller_epoch)


def hdr(controller_epoch: int = 4, broker_epoch: int = OUR_BROKER_EPOCH, controller_id: int = 1) -> Header:
    return Header(controller_id, controller_epoch, broker_epoch)


@pytest.fixture
def state() -> BrokerState:
    s = BrokerState(ME)
    s.broker_epoch = OUR_BROKER_EPOCH
    out = s.leader_and_isr(hdr(), [info()])  # controller epoch 4 seen; t-0 at (3, 10) as a follower
    assert out.error == errors.NONE
    return s


def events(out, name):
    return [f for n, f in out.events if n == name]


def send(state: BrokerState, kind: str, h: Header):
    if kind == "LeaderAndIsr":
        return state.leader_and_isr(h, [info(p=1)])
    if kind == "UpdateMetadata":
        return state.update_metadata(h, [info(p=1)], [(1, "h", 1, 7)])
    return state.stop_replica(h, [("t", 0)], -1, False)


KINDS = ["LeaderAndIsr", "UpdateMetadata", "StopReplica"]


def test_error_codes_are_kafkas():
    assert (errors.STALE_BROKER_EPOCH, errors.STALE_CONTROLLER_EPOCH, errors.FENCED_LEADER_EPOCH,
            errors.UNKNOWN_TOPIC_OR_PARTITION, errors.NONE) == (77, 11, 74, 3, 0)
    assert errors.name(77) == "STALE_BROKER_EPOCH" and errors.name(11) == "STALE_CONTROLLER_EPOCH"


# ------------------------------------------------------------------ broker epoch

@pytest.mark.parametrize("kind", KINDS)
def test_a_broker_epoch_below_ours_is_stale(state, kind):
    before = (dict(state.partitions), dict(state.metadata), dict(state.live_brokers))
    out = send(state, kind, hdr(controller_epoch=9, broker_epoch=OUR_BROKER_EPOCH - 1))
    assert out.error == errors.STALE_BROKER_EPOCH
    assert out.partition_errors == {} and out.stopped == []
    assert (dict(state.partitions), dict(state.metadata), dict(state.live_brokers)) == before, "nothing applied"
    assert state.controller_epoch == 4, "a rejected request does not raise the latest controller epoch"
    assert events(out, "request_rejected") == [{
        "request": kind, "error": "STALE_BROKER_EPOCH", "error_code": 77, "controller_id": 1,
        "request_controller_epoch": 9, "latest_controller_epoch": 4,
        "request_broker_epoch": OUR_BROKER_EPOCH - 1, "broker_epoch": OUR_BROKER_EPOCH}]


@pytest.mark.parametrize("kind", KINDS)
def test_broker_epoch_minus_one_skips_the_check(state, kind):
    assert send(state, kind, hdr(broker_epoch=-1)).error == errors.NONE


@pytest.mark.parametrize("kind", KINDS)
def test_a_broker_epoch_equal_or_above_ours_is_accepted(state, kind):
    assert send(state, kind, hdr(broker_epoch=OUR_BROKER_EPOCH)).error == errors.NONE
    assert send(state, kind, hdr(broker_epoch=OUR_BROKER_EPOCH + 1)).error == errors.NONE


def test_the_broker_epoch_is_checked_before_the_controller_epoch(state):
    out = state.leader_and_isr(hdr(controller_epoch=1, broker_epoch=1), [info(p=1)])
    assert out.error == errors.STALE_BROKER_EPOCH


# ------------------------------------------------------------------ controller epoch

@pytest.mark.parametrize("kind", KINDS)
def test_a_lower_controller_epoch_is_stale(state, kind):
    before = (dict(state.partitions), dict(state.metadata))
    out = send(state, kind, hdr(controller_epoch=3, controller_id=3))
    assert out.error == errors.STALE_CONTROLLER_EPOCH
    assert (dict(state.partitions), dict(state.metadata)) == before
    assert state.controller_epoch == 4 and state.controller_id == 1
    assert events(out, "request_rejected") == [{
        "request": kind, "error": "STALE_CONTROLLER_EPOCH", "error_code": 11, "controller_id": 3,
        "request_controller_epoch": 3, "latest_controller_epoch": 4,
        "request_broker_epoch": OUR_BROKER_EPOCH, "broker_epoch": OUR_BROKER_EPOCH}]


@pytest.mark.parametrize("kind", KINDS)
def test_an_equal_controller_epoch_is_accepted(state, kind):
    out = send(state, kind, hdr(controller_epoch=4))
    assert out.error == errors.NONE and events(out, "request_rejected") == []


def test_a_higher_controller_epoch_becomes_the_latest(state):
    out = state.update_metadata(hdr(controller_epoch=6, controller_id=3), [], [])
    assert out.error == errors.NONE
    assert (state.controller_epoch, state.controller_id) == (6, 3)
    assert state.leader_and_isr(hdr(controller_epoch=5), [info(p=1)]).error == errors.STALE_CONTROLLER_EPOCH
    assert state.stop_replica(hdr(controller_epoch=5), [("t", 0)], -1, False).error == errors.STALE_CONTROLLER_EPOCH


def test_a_fresh_broker_accepts_any_controller_epoch():
    s = BrokerState(ME)
    assert s.update_metadata(Header(1, 1, -1), [], []).error == errors.NONE
    assert s.controller_epoch == 1


# ------------------------------------------------------------------ LeaderAndIsr per partition

def test_a_partition_this_broker_does_not_replicate_is_unknown(state):
    out = state.leader_and_isr(hdr(), [info(p=5, replicas=(1, 3), isr=(1, 3))])
    assert out.error == errors.NONE
    assert out.partition_errors == {("t", 5): errors.UNKNOWN_TOPIC_OR_PARTITION}
    assert ("t", 5) not in state.partitions and ("t", 5) not in state.metadata
    assert out.became_leader == [] and out.became_follower == []


@pytest.mark.parametrize("leader_epoch, zk_version", [(3, 10), (3, 9), (3, 11), (2, 11), (2, 99), (0, 0)])
def test_a_state_not_newer_than_ours_is_stale_and_leaves_it_unchanged(state, leader_epoch, zk_version):
    before = state.partitions[("t", 0)]
    out = state.leader_and_isr(hdr(), [info(leader=ME, leader_epoch=leader_epoch, zk_version=zk_version)])
    assert out.partition_errors == {("t", 0): errors.STALE_CONTROLLER_EPOCH}
    assert state.partitions[("t", 0)] == before and state.metadata[("t", 0)] == before
    assert out.became_leader == [] and out.became_follower == []
    assert events(out, "became_leader") == []
    assert events(out, "leader_and_isr_unchanged") == [{"partitions": 1, "controller_epoch": 4}]


@pytest.mark.parametrize("leader_epoch, zk_version", [(4, 0), (4, 10), (4, 11)])
def test_a_newer_state_is_applied(state, leader_epoch, zk_version):
    new = info(leader_epoch=leader_epoch, zk_version=zk_version, isr=(1, 2))
    out = state.leader_and_isr(hdr(), [new])
    assert out.partition_errors == {("t", 0): errors.NONE}
    assert state.partitions[("t", 0)] == new and state.metadata[("t", 0)] == new


def test_becoming_leader_emits_became_leader_with_the_state(state):
    new = info(leader=ME, leader_epoch=4, isr=(2, 3), zk_version=11)
    out = state.leader_and_isr(hdr(), [new])
    assert out.became_leader == [new] and out.became_follower == []
    assert events(out, "became_leader") == [{"topic": "t", "partition": 0, "leader": ME, "leader_epoch": 4,
                                             "isr": [2, 3], "zk_version": 11, "controller_epoch": 4,
                                                 "request_controller_epoch": 4}]


def test_an_isr_change_for_the_leader_comes_with_a_new_epoch_and_makes_it_leader_again(state):
    # the controller bumps the leader epoch when it removes a replica from the ISR (Kafka 2.8), and a
    # LeaderAndIsr at the same epoch is stale whatever its zkVersion
    state.leader_and_isr(hdr(), [info(leader=ME, leader_epoch=4, zk_version=11)])
    same = state.leader_and_isr(hdr(), [info(leader=ME, leader_epoch=4, isr=(2, 3), zk_version=12)])
    assert same.partition_errors == {("t", 0): errors.STALE_CONTROLLER_EPOCH} and same.became_leader == []
    out = state.leader_and_isr(hdr(), [info(leader=ME, leader_epoch=5, isr=(2, 3), zk_version=12)])
    assert out.partition_errors == {("t", 0): errors.NONE} and len(out.became_leader) == 1
    assert [f["isr"] for f in events(out, "became_leader")] == [[2, 3]]
    assert state.partitions[("t", 0)].isr == (2, 3)


def test_a_new_leader_makes_this_broker_a_follower(state):
    new = info(leader=3, leader_epoch=4, zk_version=11)
    out = state.leader_and_isr(hdr(), [new])
    assert out.became_follower == [new] and out.became_leader == []
    assert [(f["leader"], f["leader_epoch"]) for f in events(out, "became_follower")] == [(3, 4)]


def test_an_isr_only_change_at_the_same_epoch_is_stale_for_a_follower(state):
    out = state.leader_and_isr(hdr(), [info(isr=(1, 2), zk_version=11)])
    assert out.partition_errors == {("t", 0): errors.STALE_CONTROLLER_EPOCH}
    assert events(out, "became_follower") == []


def test_losing_leadership_is_became_follower(state):
    state.leader_and_isr(hdr(), [info(leader=ME, leader_epoch=4, zk_version=11)])
    out = state.leader_and_isr(hdr(), [info(leader=-1, leader_epoch=5, isr=(2,), zk_version=12)])
    assert events(out, "became_follower") and not events(out, "became_leader")


def test_each_partition_of_a_request_is_judged_on_its_own(state):
    out = state.leader_and_isr(hdr(), [
        info(p=0, leader_epoch=3, zk_version=10),             # stale
        info(p=1, leader=ME, leader_epoch=0, zk_version=0),   # new: leader
        info(p=2, replicas=(1, 3), isr=(1, 3)),               # not ours
        info(p=3, leader=1, leader_epoch=0, zk_version=0),    # new: follower
    ])
    assert out.error == errors.NONE
    assert out.partition_errors == {("t", 0): 11, ("t", 1): 0, ("t", 2): 3, ("t", 3): 0}
    assert [p.partition for p in out.became_leader] == [1]
    assert [p.partition for p in out.became_follower] == [3]
    assert events(out, "leader_and_isr_unchanged") == [{"partitions": 1, "controller_epoch": 4}]


# ------------------------------------------------------------------ StopReplica

@pytest.mark.parametrize("leader_epoch", [0, 2, 3])
def test_stop_replica_at_or_below_our_leader_epoch_is_fenced(state, leader_epoch):
    out = state.stop_replica(hdr(), [("t", 0)], leader_epoch, delete=False)
    assert out.error == errors.NONE
    assert out.partition_errors == {("t", 0): errors.FENCED_LEADER_EPOCH}
    assert out.stopped == [] and ("t", 0) in state.partitions


def test_stop_replica_with_a_higher_leader_epoch_stops_the_replica(state):
    out = state.stop_replica(hdr(), [("t", 0)], 4, delete=True)
    assert out.partition_errors == {("t", 0): errors.NONE}
    assert out.stopped == [("t", 0)] and ("t", 0) not in state.partitions
    assert events(out, "replica_stopped") == [{"topic": "t", "partition": 0, "delete": True}]


@pytest.mark.parametrize("sentinel", [-1, -2])
def test_stop_replica_epochs_minus_one_and_minus_two_bypass_the_check(state, sentinel):
    out = state.stop_replica(hdr(), [("t", 0)], sentinel, delete=False)
    assert out.partition_errors == {("t", 0): errors.NONE}
    assert out.stopped == [("t", 0)] and ("t", 0) not in state.partitions


def test_stop_replica_of_an_unknown_partition_succeeds(state):
    out = state.stop_replica(hdr(), [("u", 9)], 0, delete=False)
    assert out.partition_errors == {("u", 9): errors.NONE} and out.stopped == [("u", 9)]


def test_a_stopped_replica_accepts_any_later_state(state):
    state.stop_replica(hdr(), [("t", 0)], -1, delete=False)
    out = state.leader_and_isr(hdr(), [info(leader_epoch=0, zk_version=0)])
    assert out.partition_errors == {("t", 0): errors.NONE}


# ------------------------------------------------------------------ UpdateMetadata

def test_update_metadata_replaces_live_brokers_and_merges_partitions(state):
    other = info(p=7, replicas=(1, 3), isr=(1, 3), topic="u")
    out = state.update_metadata(hdr(), [other], [(1, "a", 1, 10), (3, "c", 3, 30)])
    assert out.error == errors.NONE
    assert state.live_brokers == {1: ("a", 1, 10), 3: ("c", 3, 30)}
    assert state.metadata[("u", 7)] == other and ("t", 0) in state.metadata
    assert ("u", 7) not in state.partitions, "metadata is not hosting"


def test_the_cache_counts_each_topics_partitions_as_they_come_and_go(state):
    """FindCoordinator hashes a group over the offsets topic's partition count, on every group
    request: it is kept with the cache instead of counted over every partition each time."""
    assert state.topic_partitions == {"t": 1}
    state.update_metadata(hdr(), [info(p=p, topic="u") for p in range(5)] + [info(p=0)], [])
    state.update_metadata(hdr(), [info(p=p, topic="u") for p in range(3)], [])   # again: no new partition
    assert state.topic_partitions == {"t": 1, "u": 5}
    state.update_metadata(hdr(), [info(p=p, topic="u", leader=-2) for p in (0, 1, 1)], [])  # being deleted
    assert state.topic_partitions == {"t": 1, "u": 3}
    state.update_metadata(hdr(), [info(p=p, topic="u", leader=-2) for p in (2, 3, 4)], [])
    assert state.topic_partitions == {"t": 1}
    assert state.topic_partitions == {t: sum(1 for x, _ in state.metadata if x == t) for t, _ in state.metadata}


def test_the_planted_zombie_bug_applies_a_stale_controllers_request():
    """The chaos checkers' planted bug (never set in a real broker): no controller-epoch check."""
    s = BrokerState(ME, check_controller_epoch=False)
    s.broker_epoch = OUR_BROKER_EPOCH
    s.leader_and_isr(hdr(controller_epoch=5), [info(leader_epoch=3, zk_version=10)])
    out = s.leader_and_isr(hdr(controller_epoch=4), [info(leader=ME, leader_epoch=4, zk_version=11)])
    assert out.error == errors.NONE
    assert events(out, "became_leader")[0]["request_controller_epoch"] == 4
    assert s.controller_epoch == 5


def test_a_missing_offsets_topic_is_created_over_the_live_brokers_as_kafka_does():
    s = BrokerState(1)
    s.live_brokers = {1: ("h", 1, 10), 2: ("h", 2, 11)}
    a, why = s.internal_topic_to_create("__consumer_offsets", 4, 3, lambda n: 0)
    assert a is None and why == "2 live brokers, fewer than offsets.topic.replication.factor 3"
    s.live_brokers[3] = ("h", 3, 12)
    a, why = s.internal_topic_to_create("__consumer_offsets", 4, 3, lambda n: 1 if n == 3 else 0)
    assert why == "" and a.topic == "__consumer_offsets" and a.config == {"cleanup.policy": "compact"}
    assert dict(a.partitions) == assign_replicas(4, 3, [1, 2, 3], start_index=1, shift=1) and a.topic_id
    s.topic_partitions["__consumer_offsets"] = 4
    assert s.internal_topic_to_create("__consumer_offsets", 4, 3, lambda n: 0) == (None, "exists")
