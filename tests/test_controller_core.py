"""ControllerCore as a pure state machine: facts in, a Plan out, commit() gives the requests.

No ZooKeeper and no processes: brokers are BrokerRegistration values whose
``epoch`` stands for the czxid, zkVersions are whatever the test passes to
commit(), and time is the ``now_ms`` argument.  The rules checked are Kafka
2.8's (reference §2): removing a dead follower from an ISR bumps the leader
epoch, once per removed replica.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from kafkacommon.assignment import assign_replicas
from controller.core import (
    ControllerCore, ControllerSettings, LeaderAndIsrCmd, Plan, UpdateMetadataCmd,
)
from kafkacommon.metadata import LeaderAndIsr
from kafkacommon import errors
from replication.broker_state import BrokerState, Header, PartitionInfo
from kafkacommon.metadata import BrokerRegistration, TopicAssignment

OFFSETS = "__consumer_offsets"
EPOCH = 5  # the controller epoch used by most tests
NO_OFFSETS_TOPIC = {"offsets_replication_factor": 100}  # never enough brokers: no auto-created topic


# ------------------------------------------------------------------ helpers

def reg(broker_id: int, epoch: int | None = None) -> BrokerRegistration:
    return BrokerRegistration(broker_id, "127.0.0.1", 9000 + broker_id, 1_700_000_000_000,
                              epoch=100 + broker_id if epoch is None else epoch)


def brokers(*ids: int, **epochs: int) -> dict[int, BrokerRegistration]:
    """brokers(1, 2, 3, b2=200) -> registrations, broker 2 with epoch 200."""
    return {b: reg(b, epochs.get(f"b{b}")) for b in ids}


def las(leader: int, epoch: int, isr: tuple[int, ...], controller_epoch: int = EPOCH) -> LeaderAndIsr:
    return LeaderAndIsr(leader, epoch, tuple(isr), controller_epoch)


def make_core(**overrides) -> ControllerCore:
    return ControllerCore(ControllerSettings(broker_id=1, **overrides))


def versions_for(plan: Plan) -> dict[tuple[str, int], int]:
    """The zkVersions ZooKeeper would give: 0 for a create, the expected version + 1 for a set."""
    out: dict[tuple[str, int], int] = {}
    for w in plan.writes:
        out[(w.topic, w.partition)] = 0 if w.zk_version is None else w.zk_version + 1
    return out


def apply(core: ControllerCore, plan: Plan):
    return core.commit(plan, versions_for(plan))


def failover(core: ControllerCore, *args, **kwargs) -> Plan:
    """A failover as the handlers carry it out: on_failover's plan (the whole state to every broker), each
    dead broker's replicas taken offline, then the elections.  Every plan but the last is applied; the last
    (the elections) is returned, not applied."""
    plan = core.on_failover(*args, **kwargs)
    while True:
        apply(core, plan)
        plan = core.failover_next()
        if not core.failover_pending:
            return plan


def started(topics: dict[str, dict[int, tuple[int, ...]]], states: dict, live: dict[int, BrokerRegistration],
            epoch: int = EPOCH, configs: dict[str, dict] | None = None, **overrides) -> ControllerCore:
    """A core that has failed over onto this context and committed its plan."""
    settings = {**NO_OFFSETS_TOPIC, **overrides}
    core = make_core(**settings)
    assignments = {t: TopicAssignment(t, parts, config=(configs or {}).get(t, {})) for t, parts in topics.items()}
    apply(core, failover(core, epoch, 10, live, assignments, states, now_ms=0))
    return core


def writes_by_tp(plan: Plan) -> dict[tuple[str, int], object]:
    by_tp = {(w.topic, w.partition): w for w in plan.writes}
    assert len(by_tp) == len(plan.writes), "at most one write per partition in a plan"
    return by_tp


def state_of(core: ControllerCore, tp: tuple[str, int]) -> LeaderAndIsr:
    return core.states[tp][0]


def event(plan: Plan, name: str) -> list[dict]:
    """Events of that name, whether logged at decision time (observed) or once the writes land."""
    return [fields for n, fields in plan.observed + plan.events if n == name]


# ------------------------------------------------------------------ fresh cluster: the offsets topic

def test_fresh_cluster_creates_the_offsets_topic_and_elects_the_first_replica_of_each_partition():
    core = make_core()  # 50 partitions, RF 3
    first = core.on_failover(1, 1, brokers(1, 2, 3), {}, {}, now_ms=0)
    assert first.writes == [] and first.topic_creates == [] and first.full_sync == {1, 2, 3}
    apply(core, first)
    plan = core.failover_next()
    assert core.failover_next() is None

    assert len(plan.topic_creates) == 1
    topic = plan.topic_creates[0]
    assert topic.topic == OFFSETS and sorted(topic.partitions) == list(range(50))
    assert topic.config == {"cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": "104857600"}
    # the rng defaults to 0, so start index and shift are 0
    assert dict(topic.partitions) == assign_replicas(50, 3, [1, 2, 3], start_index=0, shift=0)

    assert len(plan.writes) == 50
    for w in plan.writes:
        replicas = topic.partitions[w.partition]
        assert w.topic == OFFSETS
        assert sorted(replicas) == [1, 2, 3]
        assert w.zk_version is None, "a new partition's state is created, not set"
        assert w.reason == "new_partition" and w.previous is None
        assert w.state == LeaderAndIsr(replicas[0], 0, replicas, 1), \
            "leader = first replica, ISR = every replica in assignment order, epoch 0, controller epoch 1"
    assert event(plan, "topic_created") == [{"topic": OFFSETS, "partitions": 50, "replication_factor": 3}]


def test_the_rng_chooses_the_offsets_topic_start_index_and_shift():
    core = ControllerCore(ControllerSettings(broker_id=1), rng=lambda n: 1 if n == 3 else 0)
    plan = failover(core, 1, 1, brokers(1, 2, 3), {}, {}, now_ms=0)
    assert dict(plan.topic_creates[0].partitions) == assign_replicas(50, 3, [1, 2, 3], start_index=1, shift=1)


def test_no_offsets_topic_with_fewer_live_brokers_than_its_replication_factor():
    core = make_core()
    plan = failover(core, 1, 1, brokers(1, 2), {}, {}, now_ms=0)
    assert plan.topic_creates == [] and plan.writes == []
    assert event(plan, "topic_created") == []


def test_lazy_offsets_topic_is_left_to_the_first_find_coordinator():
    """kafkasim.offsets.topic.eager.create: false: Kafka's controller never creates __consumer_offsets."""
    core = make_core(offsets_eager_create=False)
    plan = failover(core, 1, 1, brokers(1, 2, 3), {}, {}, now_ms=0)
    assert plan.topic_creates == [] and plan.writes == [] and event(plan, "topic_created") == []
    assert core.on_tick(60_000).topic_creates == []  # nor after the grace period


def test_offsets_topic_is_created_once_a_third_broker_registers():
    core = make_core()
    apply(core, failover(core, 1, 1, brokers(1, 2), {}, {}, now_ms=0))

    plan = core.on_broker_change(brokers(1, 2, 3))
    assert event(plan, "broker_change") == [{"new": [3], "dead": [], "bounced": [], "epochs": {"3": 103}}]
    assert [t.topic for t in plan.topic_creates] == [OFFSETS]
    assert len(plan.writes) == 50
    assert all(w.state.isr == plan.topic_creates[0].partitions[w.partition] for w in plan.writes)
    apply(core, plan)
    assert OFFSETS in core.topics and len(core.states) == 50

    again = core.on_broker_change(brokers(1, 2, 3, 4))
    assert again.topic_creates == [] and again.writes == [], "the topic exists: nothing to create or elect"


def test_new_partitions_are_sent_with_is_new_to_brokers_that_are_not_fully_synced():
    core = make_core(offsets_partitions=3)
    apply(core, failover(core, 1, 1, brokers(1, 2), {}, {}, now_ms=0))
    requests = apply(core, core.on_broker_change(brokers(1, 2, 3)))
    lai = [c for c in requests[1] if isinstance(c, LeaderAndIsrCmd)]
    assert len(lai) == 1 and len(lai[0].partitions) == 3
    assert all(v.is_new for v in lai[0].partitions)


def test_a_new_topic_gets_its_first_leaders():
    core = started({"t": {0: (1, 2)}}, {("t", 0): (las(1, 0, (1, 2)), 0)}, brokers(1, 2, 3))
    plan = core.on_topics_change({"t": core.topics["t"], "u": TopicAssignment("u", {0: (3, 1), 1: (2, 3)})})
    assert event(plan, "topics_added") == [{"topics": ["u"]}]
    assert {(w.topic, w.partition): w.state for w in plan.writes} == {
        ("u", 0): las(3, 0, (3, 1)), ("u", 1): las(2, 0, (2, 3))}


def test_an_inactive_core_plans_nothing():
    core = make_core()
    assert core.on_broker_change(brokers(1, 2, 3)).empty
    assert core.on_tick(10**9).empty
    apply(core, failover(core, 1, 1, brokers(1, 2, 3), {}, {}, now_ms=0))
    core.on_resign()
    assert core.on_broker_change(brokers(1, 2)).empty
    assert core.elect_preferred().empty
    assert core.on_topics_change({"x": TopicAssignment("x", {0: (1,)})}).empty


# ------------------------------------------------------------------ broker failure

FAILURE_TOPIC = {
    0: (1, 2, 3),  # led by 1, full ISR: 2 is the first live ISR replica
    1: (1, 3, 2),  # led by 1: assignment order picks 3, not ISR order
    2: (1, 3, 2),  # led by 1, 3 out of sync: 2
    3: (2, 1, 3),  # followed by 1: ISR shrink
    4: (3, 4, 2),  # 1 not a replica: untouched
    5: (4, 1, 2),  # 1 a replica but not in the ISR: untouched
}
FAILURE_STATES = {
    ("t", 0): (las(1, 3, (1, 2, 3)), 7),
    ("t", 1): (las(1, 4, (1, 2, 3)), 8),
    ("t", 2): (las(1, 5, (1, 2)), 9),
    ("t", 3): (las(2, 6, (2, 1, 3)), 10),
    ("t", 4): (las(3, 7, (3, 4, 2)), 11),
    ("t", 5): (las(4, 8, (4, 2)), 12),
}


def failure_core() -> ControllerCore:
    return started({"t": FAILURE_TOPIC}, FAILURE_STATES, brokers(1, 2, 3, 4))


def test_failover_alone_changes_no_state_when_every_leader_is_live():
    core = make_core(**NO_OFFSETS_TOPIC)
    plan = core.on_failover(EPOCH, 10, brokers(1, 2, 3, 4), {"t": TopicAssignment("t", FAILURE_TOPIC)},
                            FAILURE_STATES, now_ms=0)
    assert plan.writes == [] and plan.topic_creates == []
    assert plan.full_sync == {1, 2, 3, 4}


def test_a_failover_takes_a_dead_brokers_replicas_offline_before_it_elects():
    """Kafka 2.8's onControllerFailover: UpdateMetadata and the unchanged states to every live broker first
    (no decision yet); then replicaStateMachine.startup takes the dead broker's replicas offline (out of the
    ISR, leader -1 where it led, a new leader epoch); then partitionStateMachine.startup elects (a second new
    epoch for a partition whose leader died).  Checked against Kafka 2.8.2 by `kafkasim compare controller-kill`."""
    core = make_core(**NO_OFFSETS_TOPIC)
    first = core.on_failover(EPOCH, 10, brokers(2, 3, 4), {"t": TopicAssignment("t", FAILURE_TOPIC)},
                             FAILURE_STATES, now_ms=0)
    assert first.writes == [] and first.full_sync == {2, 3, 4}
    requests = apply(core, first)
    assert all(isinstance(cmds[0], UpdateMetadataCmd) for cmds in requests.values())
    offline = core.failover_next()
    w = writes_by_tp(offline)
    assert {tp: x.state for tp, x in w.items()} == {
        ("t", 0): las(-1, 4, (2, 3)), ("t", 1): las(-1, 5, (2, 3)), ("t", 2): las(-1, 6, (2,)),
        ("t", 3): las(2, 7, (2, 3))}, "the dead broker leaves every ISR it is in; where it led, leader -1"
    assert {x.reason for x in w.values()} == {"offline_replica"}
    apply(core, offline)
    elect = core.failover_next()
    assert {tp: x.state for tp, x in writes_by_tp(elect).items()} == {
        ("t", 0): las(2, 5, (2, 3)), ("t", 1): las(3, 6, (2, 3)), ("t", 2): las(2, 7, (2,))}
    assert {x.reason for x in elect.writes} == {"offline_election"}
    apply(core, elect)
    assert not core.failover_pending and core.failover_next() is None


def test_a_failover_takes_each_dead_broker_offline_in_turn_and_a_last_isr_member_stays():
    core = make_core(**NO_OFFSETS_TOPIC)
    topics = {"t": TopicAssignment("t", {0: (1, 2, 3), 1: (1, 2, 3)})}
    states = {("t", 0): (las(1, 3, (1, 2, 3)), 7), ("t", 1): (las(1, 3, (1,)), 7)}
    apply(core, core.on_failover(EPOCH, 10, brokers(3), topics, states, now_ms=0))
    one = core.failover_next()
    assert {tp: x.state for tp, x in writes_by_tp(one).items()} == {
        ("t", 0): las(-1, 4, (2, 3)), ("t", 1): las(-1, 4, (1,))}, "broker 1 first; the ISR is never emptied"
    apply(core, one)
    two = core.failover_next()
    assert {tp: x.state for tp, x in writes_by_tp(two).items()} == {("t", 0): las(-1, 5, (3,))}
    apply(core, two)
    elect = core.failover_next()
    assert {tp: x.state for tp, x in writes_by_tp(elect).items()} == {("t", 0): las(3, 6, (3,))}, \
        "t-1 stays offline, as it was written: nobody in its ISR is alive"
    assert event(elect, "partition_offline") == [
        {"topic": "t", "partition": 1, "reason": "no live replica in the ISR", "isr": [1]}]


def test_dead_leader_partitions_elect_the_first_live_isr_replica_in_assignment_order():
    core = failure_core()
    plan = core.on_broker_change(brokers(2, 3, 4))
    w = writes_by_tp(plan)
    assert w[("t", 0)].state == las(2, 4, (2, 3))
    assert w[("t", 1)].state == las(3, 5, (2, 3)), "assignment order, not ISR order; ISR keeps its order"
    assert w[("t", 2)].state == las(2, 6, (2,)), "an out-of-sync replica is never a clean leader"
    for tp in [("t", 0), ("t", 1), ("t", 2)]:
        assert w[tp].reason == "offline_election"
        assert w[tp].zk_version == FAILURE_STATES[tp][1], "a conditional set at the known zkVersion"
        assert w[tp].previous == FAILURE_STATES[tp][0]


def test_dead_follower_leaves_the_isr_with_the_next_leader_epoch():
    core = failure_core()
    plan = core.on_broker_change(brokers(2, 3, 4))
    w = writes_by_tp(plan)[("t", 3)]
    assert w.state == las(2, 7, (2, 3)), "Kafka 2.8's removeReplicasFromIsr: leader epoch + 1"
    assert w.reason == "isr_shrink_dead_replica" and w.zk_version == 10


def test_partitions_the_dead_broker_does_not_lead_or_sync_get_no_write():
    core = failure_core()
    plan = core.on_broker_change(brokers(2, 3, 4))
    assert set(writes_by_tp(plan)) == {("t", 0), ("t", 1), ("t", 2), ("t", 3)}
    assert event(plan, "broker_change") == [{"new": [], "dead": [1], "bounced": [], "epochs": {}}]
    assert plan.full_sync == set() and plan.metadata_to_all
    assert event(plan, "partition_offline") == []


def test_after_a_failure_no_isr_holds_the_dead_broker():
    core = failure_core()
    apply(core, core.on_broker_change(brokers(2, 3, 4)))
    for tp, (state, _) in core.states.items():
        assert 1 not in state.isr, tp
        assert state.leader in state.isr and state.leader != 1, tp


def test_a_failure_plan_is_idempotent_once_committed():
    core = failure_core()
    apply(core, core.on_broker_change(brokers(2, 3, 4)))
    assert core.on_broker_change(brokers(2, 3, 4)).empty
    assert core.reload_states({}).writes == []


def test_sequential_deaths_shrink_then_move_then_offline():
    core = started({"t": {0: (1, 2, 3)}}, {("t", 0): (las(1, 0, (1, 2, 3)), 0)}, brokers(1, 2, 3))
    apply(core, core.on_broker_change(brokers(1, 2)))
    assert state_of(core, ("t", 0)) == las(1, 1, (1, 2))
    apply(core, core.on_broker_change(brokers(2)))
    assert state_of(core, ("t", 0)) == las(2, 2, (2,))
    plan = core.on_broker_change({})
    apply(core, plan)
    assert state_of(core, ("t", 0)) == las(-1, 3, (2,))


# ------------------------------------------------------------------ the ISR is never emptied

def test_when_every_isr_member_dies_the_partition_goes_offline_keeping_one_member():
    core = started({"t": {0: (1, 2, 3)}}, {("t", 0): (las(1, 4, (1, 2)), 3)}, brokers(1, 2, 3))
    plan = core.on_broker_change(brokers(3))
    w = writes_by_tp(plan)[("t", 0)]
    # leader -1, the ISR keeps its last member (id order); Kafka writes once per removed replica: epoch + 2
    assert w.state == las(-1, 6, (2,))
    assert w.reason == "offline_no_isr_alive" and w.zk_version == 3
    assert event(plan, "partition_offline") == [
        {"topic": "t", "partition": 0, "reason": "no live replica in the ISR", "isr": [2]}]


def test_an_offline_partition_is_not_rewritten_while_no_isr_member_is_back():
    core = started({"t": {0: (1, 2, 3)}}, {("t", 0): (las(1, 4, (1, 2)), 3)}, brokers(1, 2, 3))
    apply(core, core.on_broker_change(brokers(3)))
    plan = core.on_broker_change(brokers(3, 4))  # an unrelated broker arrives
    assert plan.writes == []
    assert event(plan, "partition_offline") == [], "already offline: no new event"


def test_the_kept_isr_member_becomes_leader_when_it_comes_back():
    core = started({"t": {0: (1, 2, 3)}}, {("t", 0): (las(1, 4, (1, 2)), 3)}, brokers(1, 2, 3))
    apply(core, core.on_broker_change(brokers(3)))
    plan = core.on_broker_change(brokers(2, 3, b2=500))
    w = writes_by_tp(plan)[("t", 0)]
    assert w.state == las(2, 7, (2,)) and w.reason == "offline_election"
    assert plan.full_sync == {2}


def test_a_returning_replica_outside_the_isr_does_not_lead_without_unclean_election():
    core = started({"t": {0: (1, 2, 3)}}, {("t", 0): (las(1, 4, (1, 2)), 3)}, brokers(1, 2, 3))
    apply(core, core.on_broker_change({}))
    plan = core.on_broker_change(brokers(3, b3=900))
    assert plan.writes == []
    assert state_of(core, ("t", 0)).leader == -1


# ------------------------------------------------------------------ unclean election

@pytest.mark.parametrize("topic_config, setting, unclean", [
    ({"unclean.leader.election.enable": True}, False, True),
    ({}, True, True),
    ({"unclean.leader.election.enable": False}, True, False),  # the topic overrides the broker default
    ({}, False, False),
])
def test_unclean_election_follows_topic_config_then_the_setting(topic_config, setting, unclean):
    core = started({"t": {0: (1, 2, 3)}}, {("t", 0): (las(1, 4, (1,)), 6)}, brokers(1, 2, 3),
                   configs={"t": topic_config}, unclean_leader_election=setting)
    plan = core.on_broker_change(brokers(2, 3))
    w = writes_by_tp(plan)[("t", 0)]
    if unclean:
        assert w.state == las(2, 5, (2,)), "first live replica in assignment order, ISR = [it]"
        assert w.reason == "unclean_election"
        assert event(plan, "unclean_leader_election") == [
            {"topic": "t", "partition": 0, "leader": 2, "previous_isr": [1], "leader_epoch": 5}]
        assert event(plan, "partition_offline") == []
    else:
        assert w.state == las(-1, 5, (1,)), "stays offline"
        assert event(plan, "unclean_leader_election") == []
        assert len(event(plan, "partition_offline")) == 1


def test_unclean_election_also_revives_an_already_offline_partition():
    core = started({"t": {0: (1, 2, 3)}}, {("t", 0): (las(1, 4, (1,)), 6)}, brokers(1),
                   configs={"t": {"unclean.leader.election.enable": True}})
    apply(core, core.on_broker_change({}))
    assert state_of(core, ("t", 0)) == las(-1, 5, (1,)), "no live replica at all: offline even if unclean"
    plan = core.on_broker_change(brokers(3))
    assert writes_by_tp(plan)[("t", 0)].state == las(3, 6, (3,))


# ------------------------------------------------------------------ bounced brokers

BOUNCE_TOPIC = {
    0: (2, 1, 3),  # led by 2 -> 1 leads
    1: (1, 2, 3),  # followed by 2 -> ISR shrink
    2: (3, 1, 2),  # 2 not in ISR -> untouched
}
BOUNCE_STATES = {
    ("t", 0): (las(2, 3, (2, 1, 3)), 4),
    ("t", 1): (las(1, 3, (1, 2, 3)), 4),
    ("t", 2): (las(3, 3, (3, 1)), 4),
}


def test_a_bounced_broker_loses_its_leaderships_and_isr_memberships():
    core = started({"t": BOUNCE_TOPIC}, BOUNCE_STATES, brokers(1, 2, 3))
    plan = core.on_broker_change(brokers(1, 2, 3, b2=200))
    w = writes_by_tp(plan)
    assert set(w) == {("t", 0), ("t", 1)}
    assert w[("t", 0)].state == las(1, 4, (1, 3))
    assert w[("t", 1)].state == las(1, 4, (1, 3))
    assert event(plan, "broker_change") == [{"new": [], "dead": [], "bounced": [2], "epochs": {"2": 200}}]
    assert plan.full_sync == {2}
    apply(core, plan)
    assert core.live[2].epoch == 200


def test_new_dead_and_bounced_brokers_are_told_apart():
    core = started({"t": BOUNCE_TOPIC}, BOUNCE_STATES, brokers(1, 2, 3))
    plan = core.on_broker_change(brokers(1, 2, 4, b2=201, b4=300))
    assert event(plan, "broker_change") == [
        {"new": [4], "dead": [3], "bounced": [2], "epochs": {"4": 300, "2": 201}}]
    assert plan.full_sync == {2, 4}


def test_an_unchanged_broker_set_is_not_a_change():
    core = started({"t": BOUNCE_TOPIC}, BOUNCE_STATES, brokers(1, 2, 3))
    assert core.on_broker_change(brokers(1, 2, 3)).empty


def test_a_bounced_broker_gets_every_partition_it_hosts():
    core = started({"t": BOUNCE_TOPIC}, BOUNCE_STATES, brokers(1, 2, 3))
    requests = apply(core, core.on_broker_change(brokers(1, 2, 3, b2=200)))
    um, lai = requests[2]   # Kafka's order: the metadata cache first (live brokers, controller), then the replicas
    assert isinstance(lai, LeaderAndIsrCmd) and isinstance(um, UpdateMetadataCmd)
    assert {(v.topic, v.partition) for v in lai.partitions} == {("t", 0), ("t", 1), ("t", 2)}
    assert {(v.topic, v.partition) for v in um.partitions} == {("t", 0), ("t", 1), ("t", 2)}
    assert {b.broker_id: b.epoch for b in um.live_brokers} == {1: 101, 2: 200, 3: 103}


def test_a_bounced_sole_isr_leader_is_re_elected_by_the_startup_half():
    """Kafka: onBrokerFailure writes (-1, ISR [2]); onBrokerStartup then elects the offline
    partition, and 2, live and in the ISR, leads again (KafkaController.processBrokerChange)."""
    core = started({"t": {0: (2, 1, 3)}}, {("t", 0): (las(2, 3, (2,)), 4)}, brokers(1, 2, 3))
    apply(core, core.on_broker_change(brokers(1, 2, 3, b2=200)))
    after = state_of(core, ("t", 0))
    assert after.leader == 2, f"the partition stayed offline although its only ISR member is live: {after}"
    assert after.isr == (2,) and after.leader_epoch > 3


# ------------------------------------------------------------------ controller epoch fencing

def test_states_written_by_a_newer_controller_are_not_touched():
    states = {("t", 0): (las(1, 3, (1, 2), controller_epoch=EPOCH + 2), 4),
              ("t", 1): (las(2, 3, (2, 1), controller_epoch=EPOCH + 2), 4),
              ("t", 2): (las(1, 3, (1, 2)), 4)}
    core = make_core(**NO_OFFSETS_TOPIC)
    topics = {"t": TopicAssignment("t", {0: (1, 2), 1: (2, 1), 2: (1, 2)})}
    plan = failover(core, EPOCH, 10, brokers(2, 3), topics, states, now_ms=0)
    assert set(writes_by_tp(plan)) == {("t", 2)}, "only the state our epoch may change"
    assert event(plan, "election_aborted") == [
        {"topic": "t", "partition": 0, "state_controller_epoch": EPOCH + 2},
        {"topic": "t", "partition": 1, "state_controller_epoch": EPOCH + 2}]


def test_preferred_election_is_aborted_for_a_state_of_a_newer_controller():
    """Kafka's PartitionStateMachine aborts every election strategy, preferred included,
    when the state's controller_epoch is above the controller's own."""
    core = started({"t": {0: (1, 2)}}, {("t", 0): (las(2, 3, (1, 2), controller_epoch=EPOCH + 1), 4)},
                   brokers(1, 2))
    plan = core.elect_preferred()
    assert plan.writes == [], f"a newer controller's state was rewritten: {plan.writes}"


# ------------------------------------------------------------------ preferred election

PREFERRED_TOPIC = {0: (1, 2, 3), 1: (1, 2, 3), 2: (2, 3, 1), 3: (3, 1, 2)}
PREFERRED_STATES = {
    ("t", 0): (las(2, 5, (2, 1, 3)), 6),  # head 1 live and in ISR -> moves back
    ("t", 1): (las(2, 5, (2, 3)), 6),     # head 1 not in ISR -> stays
    ("t", 2): (las(2, 5, (2, 3, 1)), 6),  # already led by the head
    ("t", 3): (las(1, 5, (1, 2)), 6),     # head 3 not in ISR -> stays
}


def test_a_preferred_election_answers_each_partition_asked_as_kafka_does():
    """Kafka 2.8's ElectLeaders (preferred): NONE where the leader moved, ELECTION_NOT_NEEDED where the preferred
    replica leads already, PREFERRED_LEADER_NOT_AVAILABLE where it cannot (checked against Kafka 2.8.2 by
    `kafkasim compare preferred-api`)."""
    core = started({"t": PREFERRED_TOPIC}, PREFERRED_STATES, brokers(1, 2, 3))
    plan = core.elect_preferred(None, reason="preferred_admin")
    moved = {(w.topic, w.partition) for w in plan.writes}
    apply(core, plan)
    assert core.preferred_results(None, moved) == {
        ("t", 0): errors.NONE, ("t", 1): errors.PREFERRED_LEADER_NOT_AVAILABLE, ("t", 2): errors.ELECTION_NOT_NEEDED,
        ("t", 3): errors.PREFERRED_LEADER_NOT_AVAILABLE}
    assert core.preferred_results([("t", 0), ("nope", 0)], set()) == {
        ("t", 0): errors.ELECTION_NOT_NEEDED, ("nope", 0): errors.UNKNOWN_TOPIC_OR_PARTITION}


def test_preferred_election_moves_leadership_to_a_live_in_sync_assignment_head():
    core = started({"t": PREFERRED_TOPIC}, PREFERRED_STATES, brokers(1, 2, 3))
    plan = core.elect_preferred()
    w = writes_by_tp(plan)
    assert set(w) == {("t", 0)}
    assert w[("t", 0)].state == las(1, 6, (2, 1, 3)), "epoch + 1, ISR unchanged"
    assert w[("t", 0)].reason == "preferred" and w[("t", 0)].zk_version == 6


def test_preferred_election_only_for_the_requested_partitions():
    core = started({"t": PREFERRED_TOPIC}, PREFERRED_STATES, brokers(1, 2, 3))
    assert core.elect_preferred([("t", 1), ("t", 2), ("nope", 0)]).writes == []
    assert [w.partition for w in core.elect_preferred([("t", 0)], reason="admin").writes] == [0]


def test_preferred_election_skips_a_dead_head():
    core = started({"t": {0: (1, 2)}}, {("t", 0): (las(2, 5, (2,)), 6)}, brokers(2))
    assert core.elect_preferred().writes == []


# ------------------------------------------------------------------ timers: auto rebalance and metadata resend

def imbalance_core(not_led_by_1: int, live=(1, 2, 3), **overrides) -> ControllerCore:
    """10 partitions preferring broker 1 (``not_led_by_1`` of them led by 2), 10 preferring 2, led by 2."""
    parts, states = {}, {}
    for p in range(10):
        parts[p] = (1, 2, 3)
        states[("t", p)] = (las(2 if p < not_led_by_1 else 1, 1, (1, 2, 3)), 1)
    for p in range(10, 20):
        parts[p] = (2, 3, 1)
        states[("t", p)] = (las(2, 1, (2, 3, 1)), 1)
    return started({"t": parts}, states, brokers(*live), **overrides)


def test_one_partition_in_ten_is_not_above_the_ten_percent_imbalance():
    assert imbalance_core(1).imbalanced_partitions() == []


def test_two_partitions_in_ten_are_imbalanced():
    assert imbalance_core(2).imbalanced_partitions() == [("t", 0), ("t", 1)]


def test_imbalance_percentage_is_the_threshold():
    assert imbalance_core(2, imbalance_percentage=20).imbalanced_partitions() == []
    assert imbalance_core(3, imbalance_percentage=20).imbalanced_partitions() == [("t", 0), ("t", 1), ("t", 2)]


def test_a_dead_preferred_broker_is_not_imbalanced():
    core = imbalance_core(5)
    apply(core, core.on_broker_change(brokers(2, 3)))
    assert core.imbalanced_partitions() == []


def test_auto_rebalance_runs_on_the_check_interval():
    core = imbalance_core(2, imbalance_check_interval_ms=30_000)
    core.on_failover(EPOCH, 10, dict(core.live), dict(core.topics), dict(core.states), now_ms=1_000)
    first = core.on_tick(31_000)  # past the first check, whatever its delay
    w = writes_by_tp(first)
    assert set(w) == {("t", 0), ("t", 1)}
    assert all(x.reason == "auto_rebalance" and x.state.leader == 1 and x.state.leader_epoch == 2
               for x in w.values())
    # not committed, so still imbalanced: the next check is one interval later
    assert core.on_tick(60_999).writes == []
    assert len(core.on_tick(61_000).writes) == 2


def test_the_first_auto_rebalance_check_runs_five_seconds_after_failover():
    """Kafka's onControllerFailover schedules the first check with a 5 s delay, then every interval."""
    core = imbalance_core(2, imbalance_check_interval_ms=30_000)
    core.on_failover(EPOCH, 10, dict(core.live), dict(core.topics), dict(core.states), now_ms=0)
    assert core.on_tick(4_999).writes == []
    assert len(core.on_tick(5_000).writes) == 2, "no automatic preferred election 5 s after failover"


def test_the_first_auto_rebalance_check_is_not_earlier_than_five_seconds():
    core = imbalance_core(2, imbalance_check_interval_ms=1_000)
    core.on_failover(EPOCH, 10, dict(core.live), dict(core.topics), dict(core.states), now_ms=0)
    assert core.on_tick(4_999).writes == []
    assert len(core.on_tick(5_000).writes) == 2
    assert core.on_tick(5_999).writes == []
    assert len(core.on_tick(6_000).writes) == 2


def test_no_auto_rebalance_when_disabled():
    core = imbalance_core(5, auto_leader_rebalance=False)
    assert core.on_tick(10**9).writes == []


def test_metadata_resend_only_once_the_interval_has_passed():
    core = make_core(**NO_OFFSETS_TOPIC, metadata_resend_interval_ms=2_000, auto_leader_rebalance=False)
    apply(core, failover(core, 1, 1, brokers(1, 2), {}, {}, now_ms=10_000))
    assert not core.on_tick(11_999).resend_metadata
    assert core.on_tick(12_000).resend_metadata
    assert not core.on_tick(12_001).resend_metadata
    assert not core.on_tick(13_999).resend_metadata
    assert core.on_tick(14_000).resend_metadata


def test_no_metadata_resend_when_the_interval_is_zero():
    core = make_core(**NO_OFFSETS_TOPIC, metadata_resend_interval_ms=0)
    apply(core, failover(core, 1, 1, brokers(1, 2), {}, {}, now_ms=0))
    assert not any(core.on_tick(t).resend_metadata for t in (0, 1, 2_000, 10**9))


def test_a_resend_plan_sends_full_metadata_to_every_live_broker():
    core = started({"t": {0: (1, 2), 1: (2, 3)}},
                   {("t", 0): (las(1, 0, (1, 2)), 0), ("t", 1): (las(2, 0, (2, 3)), 0)}, brokers(1, 2, 3),
                   metadata_resend_interval_ms=100)
    plan = core.on_tick(100)
    assert plan.resend_metadata and plan.writes == []
    requests = apply(core, plan)
    assert sorted(requests) == [1, 2, 3]
    for cmds in requests.values():
        assert len(cmds) == 1 and isinstance(cmds[0], UpdateMetadataCmd)
        assert {(v.topic, v.partition) for v in cmds[0].partitions} == {("t", 0), ("t", 1)}


# ------------------------------------------------------------------ commit: the requests

def test_commit_sends_changed_partitions_to_their_live_replicas_and_metadata_to_everyone():
    core = failure_core()
    plan = core.on_broker_change(brokers(2, 3, 4))
    versions = {tp: 40 + tp[1] for tp in writes_by_tp(plan)}
    requests = core.commit(plan, versions)

    assert 1 not in requests, "the dead broker gets nothing"
    changed = set(versions)
    for b in (2, 3, 4):
        cmds = requests[b]
        lai = [c for c in cmds if isinstance(c, LeaderAndIsrCmd)]
        um = [c for c in cmds if isinstance(c, UpdateMetadataCmd)]
        hosted = {tp for tp in changed if b in FAILURE_TOPIC[tp[1]]}
        if hosted:
            assert len(lai) == 1 and cmds[0] is lai[0], "LeaderAndIsr goes before UpdateMetadata"
            assert {(v.topic, v.partition) for v in lai[0].partitions} == hosted
            assert {x.broker_id for x in lai[0].live_leaders} == {2, 3}
        else:
            assert lai == []
        assert len(um) == 1
        assert {(v.topic, v.partition) for v in um[0].partitions} == changed
        assert [x.broker_id for x in um[0].live_brokers] == [2, 3, 4]
    for cmds in requests.values():
        for c in cmds:
            for v in c.partitions:
                tp = (v.topic, v.partition)
                assert v.zk_version == versions[tp], "views carry the zkVersion the write landed with"
                assert v.state == writes_by_tp(plan)[tp].state
                assert v.replicas == FAILURE_TOPIC[v.partition]
    assert core.states[("t", 3)] == (las(2, 7, (2, 3)), 43)


def test_every_live_replica_of_a_changed_partition_gets_it():
    core = failure_core()
    plan = core.on_broker_change(brokers(2, 3, 4))
    requests = apply(core, plan)
    for tp, w in writes_by_tp(plan).items():
        for b in FAILURE_TOPIC[tp[1]]:
            if b in core.live:
                lai = [c for c in requests[b] if isinstance(c, LeaderAndIsrCmd)]
                assert any((v.topic, v.partition) == tp for v in lai[0].partitions), (tp, b)


def test_failover_full_sync_sends_each_broker_every_partition_it_hosts():
    core = make_core(**NO_OFFSETS_TOPIC)
    plan = core.on_failover(EPOCH, 10, brokers(1, 2, 3, 4), {"t": TopicAssignment("t", FAILURE_TOPIC)},
                            FAILURE_STATES, now_ms=0)
    requests = core.commit(plan, versions_for(plan))
    assert sorted(requests) == [1, 2, 3, 4]
    for b, cmds in requests.items():
        um, lai = cmds   # as Kafka's onControllerFailover: UpdateMetadata to every live broker first
        assert isinstance(lai, LeaderAndIsrCmd) and isinstance(um, UpdateMetadataCmd)
        assert {v.partition for v in lai.partitions} == {p for p, r in FAILURE_TOPIC.items() if b in r}
        assert all(v.state == FAILURE_STATES[("t", v.partition)][0] and
                   v.zk_version == FAILURE_STATES[("t", v.partition)][1] for v in lai.partitions), \
            "failover alone resends states unchanged"
        assert {v.partition for v in um.partitions} == set(FAILURE_TOPIC)


def test_a_plan_with_no_change_sends_nothing():
    core = failure_core()
    assert core.commit(Plan(), {}) == {}


# ------------------------------------------------------------------ reload after BADVERSION

def test_reload_states_decides_again_from_the_re_read_states():
    core = failure_core()
    stale_plan = core.on_broker_change(brokers(2, 3, 4))
    assert writes_by_tp(stale_plan)[("t", 3)].zk_version == 10
    # meanwhile the leader of t-3 shrank its ISR itself (AlterIsr): version 11, without 1 and 3
    plan = core.reload_states({("t", 3): (las(2, 6, (2, 1)), 11)})
    w = writes_by_tp(plan)
    assert w[("t", 3)].state == las(2, 7, (2,)) and w[("t", 3)].zk_version == 11
    assert w[("t", 0)].state == las(2, 4, (2, 3)), "the other decisions are made again"


# ------------------------------------------------------------------ property: random deaths and restarts

ALL_BROKERS = (1, 2, 3, 4, 5)
PROP_TOPICS = {
    "a": assign_replicas(8, 3, ALL_BROKERS, start_index=2, shift=1),
    "b": assign_replicas(5, 2, ALL_BROKERS, start_index=0, shift=3),
    "c": assign_replicas(4, 3, ALL_BROKERS, start_index=4, shift=0),
}
PROP_CONFIGS = {"c": {"unclean.leader.election.enable": True}}


@st.composite
def broker_histories(draw):
    """A list of steps; each step = (live broker ids, ids restarted while staying live, run preferred?)."""
    steps = []
    for _ in range(draw(st.integers(1, 12))):
        live = draw(st.frozensets(st.sampled_from(ALL_BROKERS)))
        restarted = draw(st.frozensets(st.sampled_from(sorted(live)))) if live else frozenset()
        steps.append((live, restarted, draw(st.booleans())))
    return steps


class SimCluster:
    """The core plus one BrokerState per live broker process, wired by commit()'s requests."""

    def __init__(self) -> None:
        self.core = make_core(offsets_partitions=6, offsets_replication_factor=3)
        self.regs = brokers(*ALL_BROKERS)
        self.next_epoch = 1_000
        self.nodes = {b: self._node(b) for b in ALL_BROKERS}
        topics = {t: TopicAssignment(t, parts, config=PROP_CONFIGS.get(t, {})) for t, parts in PROP_TOPICS.items()}
        self.run(self.core.on_failover(1, 1, dict(self.regs), topics, {}, now_ms=0))
        while (plan := self.core.failover_next()) is not None:
            self.run(plan)

    def _node(self, b: int) -> BrokerState:
        s = BrokerState(b)
        s.broker_epoch = self.regs[b].epoch
        return s

    def restart(self, b: int) -> None:
        self.next_epoch += 1
        self.regs[b] = reg(b, self.next_epoch)
        self.nodes[b] = self._node(b)  # a new process: its replica state is gone

    def run(self, plan: Plan) -> None:
        requests = apply(self.core, plan)
        changed = {(w.topic, w.partition) for w in plan.writes}
        for b, cmds in requests.items():
            node = self.nodes[b]
            h = Header(1, self.core.epoch, self.core.live[b].epoch)
            for cmd in cmds:
                infos = [PartitionInfo(v.topic, v.partition, v.state.leader, v.state.leader_epoch, v.state.isr,
                                       v.replicas, v.zk_version, v.state.controller_epoch) for v in cmd.partitions]
                if isinstance(cmd, LeaderAndIsrCmd):
                    out = node.leader_and_isr(h, infos)
                    assert out.error == errors.NONE
                    for info in infos:
                        tp = (info.topic, info.partition)
                        if tp in changed:
                            assert out.partition_errors[tp] == errors.NONE, \
                                f"broker {b} rejected the new state of {tp}: {info}"
                else:
                    assert node.update_metadata(h, infos, []).error == errors.NONE


def check_invariants(core: ControllerCore, before: dict, bounced: set[int]) -> None:
    live = set(core.live)
    for tp, (s, _ver) in core.states.items():
        replicas = core.topics[tp[0]].partitions[tp[1]]
        assert s.isr, f"{tp}: empty ISR"
        assert set(s.isr) <= set(replicas), f"{tp}: ISR {s.isr} outside replicas {replicas}"
        assert len(set(s.isr)) == len(s.isr), f"{tp}: duplicate in ISR {s.isr}"
        if s.leader != -1:
            assert s.leader in s.isr, f"{tp}: leader {s.leader} not in ISR {s.isr}"
            assert s.leader in live, f"{tp}: leader {s.leader} is dead (live {sorted(live)})"
        old = before.get(tp)
        if old is not None:
            assert s.leader_epoch >= old.leader_epoch, f"{tp}: leader epoch went down {old} -> {s}"
            if old.leader != -1 and old.leader == s.leader and old.leader not in bounced:
                # one write, each leader epoch + 1, per replica taken out of the ISR (Kafka 2.8)
                assert s.leader_epoch == old.leader_epoch + len(set(old.isr) - set(s.isr)), \
                    f"{tp}: same live leader, epoch not bumped once per removed replica {old} -> {s}"


@hsettings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(broker_histories())
def test_random_deaths_and_restarts_keep_the_partition_invariants(history):
    c = SimCluster()
    check_invariants(c.core, {}, set())
    for live, restarted, preferred in history:
        for b in restarted:
            c.restart(b)
        # a broker that was dead and comes back is a new process too
        for b in live - set(c.core.live):
            c.restart(b)
        before = {tp: s for tp, (s, _) in c.core.states.items()}
        bounced = set(restarted) & set(c.core.live)
        c.run(c.core.on_broker_change({b: c.regs[b] for b in live}))
        check_invariants(c.core, before, bounced)
        if preferred:
            before = {tp: s for tp, (s, _) in c.core.states.items()}
            c.run(c.core.elect_preferred())
            check_invariants(c.core, before, set())


@hsettings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(broker_histories())
def test_after_every_broker_change_no_partition_stays_offline_with_a_live_isr_member(history):
    """Kafka elects every offline partition on broker startup (bounced brokers included), so a
    partition is left without a leader only while no ISR member is live."""
    c = SimCluster()
    for live, restarted, _preferred in history:
        for b in restarted | (live - set(c.core.live)):
            c.restart(b)
        c.run(c.core.on_broker_change({b: c.regs[b] for b in live}))
        for tp, (s, _) in c.core.states.items():
            if s.leader == -1:
                assert not set(s.isr) & set(c.core.live), f"{tp} offline with live ISR member(s): {s}"


# ------------------------------------------------------------------ waiting for the listed brokers

def test_offsets_topic_waits_for_every_listed_broker_then_spans_them_all():
    core = make_core(offsets_partitions=8, expected_brokers=4, offsets_create_grace_ms=3000)
    plan = core.on_failover(EPOCH, 1, brokers(1, 2, 3), {}, {}, now_ms=0)
    assert plan.topic_creates == []
    assert core.on_tick(1000).topic_creates == []
    plan = core.on_broker_change(brokers(1, 2, 3, 4))
    assert [a.topic for a in plan.topic_creates] == [OFFSETS]
    used = {r for replicas in plan.topic_creates[0].partitions.values() for r in replicas}
    assert used == {1, 2, 3, 4}


def test_offsets_topic_is_created_with_the_live_brokers_after_the_grace_period():
    core = make_core(offsets_partitions=8, expected_brokers=4, offsets_create_grace_ms=3000)
    core.on_failover(EPOCH, 1, brokers(1, 2, 3), {}, {}, now_ms=0)
    assert core.on_tick(2999).topic_creates == []
    plan = core.on_tick(3000)
    assert [a.topic for a in plan.topic_creates] == [OFFSETS]
    assert {r for rs in plan.topic_creates[0].partitions.values() for r in rs} == {1, 2, 3}
    assert len([w for w in plan.writes if w.topic == OFFSETS]) == 8


# ------------------------------------------------------------------ deciding once per shape

def decided_one_by_one(states: dict, topic_parts: dict[int, tuple[int, ...]], live: set[int], epoch: int,
                       unclean: bool) -> tuple[list, list]:
    """The election rules applied to each partition on its own (the reference for _reconcile's
    per-shape decisions): (writes as (partition, state, reason), events as (name, partition))."""
    from controller import election
    writes, events = [], []
    for p, replicas in sorted(topic_parts.items()):
        state = states[(OFFSETS, p)][0]
        if state.leader in live and live.issuperset(state.isr):
            continue
        gone = {b for b in state.isr if b not in live}
        if state.leader not in live:
            if state.leader != -1:
                gone.add(state.leader)
            new, was_unclean = election.offline(state, replicas, live, epoch, unclean)
            if new is not None:
                writes.append((p, new, "unclean_election" if was_unclean else "offline_election"))
                if was_unclean:
                    events.append(("unclean_leader_election", p))
                continue
            new = election.remove_from_isr(state, gone, epoch)
            if new is not None:
                writes.append((p, new, "offline_no_isr_alive"))
            if state.leader != -1:
                events.append(("partition_offline", p))
            continue
        new = election.remove_from_isr(state, gone, epoch)
        if new is not None:
            writes.append((p, new, "isr_shrink_dead_replica"))
    return writes, events


@st.composite
def partition_shapes(draw):
    n = draw(st.integers(1, 40))
    parts, states = {}, {}
    for p in range(n):
        replicas = tuple(draw(st.permutations([1, 2, 3, 4]))[:draw(st.integers(1, 3))])
        isr = tuple(draw(st.lists(st.sampled_from(replicas), min_size=1, max_size=len(replicas), unique=True)))
        leader = draw(st.sampled_from(list(isr) + [-1]))
        parts[p] = replicas
        states[(OFFSETS, p)] = (las(leader, draw(st.integers(0, 50)), isr, EPOCH - 1), draw(st.integers(0, 9)))
    live = set(draw(st.lists(st.integers(1, 4), unique=True, max_size=4)))
    return parts, states, live, draw(st.booleans())


@hsettings(max_examples=200, deadline=None)
@given(partition_shapes())
def test_decisions_made_once_per_shape_equal_the_rules_applied_to_each_partition(case):
    parts, states, live, unclean = case
    core = make_core(**NO_OFFSETS_TOPIC)
    topics = {OFFSETS: TopicAssignment(OFFSETS, parts, config={"unclean.leader.election.enable": unclean})}
    core.on_failover(EPOCH, 10, brokers(*sorted(live)), topics, states, now_ms=0)   # the context only
    plan = core.reload_states(states)   # the rules over it (what a failover's elections and a broker change run)
    want_writes, want_events = decided_one_by_one(states, parts, live, EPOCH, unclean)
    assert [(w.partition, w.state, w.reason) for w in plan.writes] == want_writes
    assert all(w.zk_version == states[(OFFSETS, w.partition)][1] for w in plan.writes)
    assert all(w.previous == states[(OFFSETS, w.partition)][0] for w in plan.writes)
    got_events = [(name, f["partition"]) for name, f in plan.events
                  if name in ("unclean_leader_election", "partition_offline")]
    assert got_events == want_events
