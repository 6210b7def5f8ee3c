"""The controller core's reassignment steps and its ElectLeaders answers (controller/reassignment.py,
controller/elect_request.py), driven with plain values as the handlers drive them: Kafka 2.8's phases U, A
and B, cancellation, the checks of a target replica list, and preferred and unclean elections on request."""
from __future__ import annotations

from controller import handlers as h
from controller.core import ControllerCore, ControllerSettings, LeaderAndIsrCmd, StopReplicaCmd
from controller.elect_request import PREFERRED, UNCLEAN
from kafkacommon import errors
from kafkacommon.metadata import BrokerRegistration, LeaderAndIsr, TopicAssignment
from zk import codecs

TP = ("t", 0)


def regs(*ids: int) -> dict[int, BrokerRegistration]:
    return {b: BrokerRegistration(b, "127.0.0.1", 9000 + b, 0, epoch=100 + b) for b in ids}


def core(live=(1, 2, 3, 4), replicas=(1, 2, 3), leader=1, isr=(1, 2, 3), **topic) -> ControllerCore:
    c = ControllerCore(ControllerSettings(broker_id=1, offsets_replication_factor=100, auto_leader_rebalance=False))
    a = TopicAssignment("t", {0: replicas, 1: replicas}, **topic)
    states = {(t, p): (LeaderAndIsr(leader, 5, isr, 1), 3) for t, p in [TP, ("t", 1)]}
    commit(c, c.on_failover(2, 7, regs(*live), {"t": a}, states, 0))
    while (step := c.failover_next()) is not None:   # the failover's decisions, one plan after the other
        commit(c, step)
    return c


def commit(c: ControllerCore, plan) -> dict:
    """The plan's writes land (each state one zkVersion up): -> the requests per broker."""
    versions = {(w.topic, w.partition): (w.zk_version or 0) + 1 for w in plan.writes}
    return c.commit(plan, versions)


def test_a_reassignment_goes_through_phases_u_a_and_b_as_kafka_2_8() -> None:
    c = core()
    refused, started = c.on_alter_reassignments({TP: [2, 3, 4]})
    assert refused == {} and started == {TP: ((2, 3, 4, 1), (4,), (1,))}   # RS = TRS ++ ORS, AR, RR
    # U: the topic znode takes RS, AR and RR; the context follows once written
    u = c.reassignment_update(TP, started[TP])
    (written,) = u.assignment_writes
    assert (written.partitions[0], written.adding, written.removing) == ((2, 3, 4, 1), {0: (4,)}, {0: (1,)})
    assert written.partitions[1] == (1, 2, 3) and not u.writes
    assert b'"adding_replicas":{"0":[4]}' in codecs.encode_topic(written)
    commit(c, u)
    assert c.reassigning() == [TP] and c.list_reassignments() == {TP: ((2, 3, 4, 1), (4,), (1,))}
    # A: TRS is not within the ISR: the leader epoch goes up, and every replica of RS is told (4 starts)
    a, done = c.reassignment_progress(TP)
    assert not done and [(w.state.leader, w.state.leader_epoch, w.state.isr) for w in a.writes] == [(1, 6, (1, 2, 3))]
    reqs = commit(c, a)
    assert sorted(b for b, cmds in reqs.items() if any(isinstance(x, LeaderAndIsrCmd) for x in cmds)) == [1, 2, 3, 4]
    lair = next(x for x in reqs[4] if isinstance(x, LeaderAndIsrCmd)).partitions[0]
    assert lair.replicas == (2, 3, 4, 1) and lair.state.leader_epoch == 6
    # the leader takes 4 into the ISR (AlterIsr): TRS is within the ISR now
    code, plan, results = c.on_alter_isr(1, 101, [(TP, 6, (1, 2, 3, 4), 4)])
    assert code == errors.NONE and results == {TP: errors.NONE}
    commit(c, plan)
    # B: RS = TRS; the leader (1, leaving) moves to the first live target replica in the ISR (B3, one write),
    # then 1 leaves the ISR (B4, a write of its own: a leader epoch each, as Kafka 2.8.2 writes them, seen by
    # kafkasim compare reassignment); 1 is stopped, then deleted
    b, done = c.reassignment_progress(TP)
    assert done and [(w.state.leader, w.state.leader_epoch, w.state.isr) for w in b.writes] == [(2, 7, (1, 2, 3, 4))]
    assert b.stop_replicas == {} and b.delete_replicas == {}
    reqs = commit(c, b)
    for broker in (2, 3, 4):
        lair = next(x for x in reqs[broker] if isinstance(x, LeaderAndIsrCmd)).partitions[0]
        assert lair.replicas == (2, 3, 4) and lair.state.leader == 2
    r = c.reassignment_remove(TP, 1)
    assert [(w.state.leader, w.state.leader_epoch, w.state.isr, w.reason) for w in r.writes] == [
        (2, 8, (2, 3, 4), "reassignment_removed_replica")]
    assert r.stop_replicas == {1: [TP]} and r.delete_replicas == {1: [TP]}
    reqs = commit(c, r)
    assert [type(x).__name__ for x in reqs[1]] == ["UpdateMetadataCmd", "StopReplicaCmd", "StopReplicaCmd"]
    assert [x.delete for x in reqs[1] if isinstance(x, StopReplicaCmd)] == [False, True]
    # B6: the topic znode takes RS = TRS, no adding or removing replicas
    f = c.reassignment_finish(TP)
    (final,) = f.assignment_writes
    assert (final.partitions[0], final.adding, final.removing) == ((2, 3, 4), {}, {})
    assert [e.name for e in f.events] == ["reassignment_completed"]
    commit(c, f)
    assert c.reassigning() == [] and c.list_reassignments() == {}


def test_a_reassignment_is_cancelled_back_to_its_original_replicas() -> None:
    c = core()
    _, started = c.on_alter_reassignments({TP: [4, 2, 3]})
    commit(c, c.reassignment_update(TP, started[TP]))
    commit(c, c.reassignment_progress(TP)[0])
    assert c.list_reassignments() == {TP: ((4, 2, 3, 1), (4,), (1,))}
    refused, started = c.on_alter_reassignments({TP: None})   # cancel: back to ORS, in RS's order (as Kafka
    assert refused == {} and started == {TP: ((2, 3, 1), (), ())}   # says, the original order is not kept)
    u = c.reassignment_update(TP, started[TP])
    # 4 is no longer wanted: stopped and deleted (U3); 4 was never in the ISR, so no state write
    assert u.assignment_writes[0].partitions[0] == (2, 3, 1) and u.stop_replicas == {4: [TP]} and not u.writes
    commit(c, u)
    plan, done = c.reassignment_progress(TP)   # not reassigned any more: B at once (an epoch bump)
    assert done and [(w.state.leader, w.state.leader_epoch) for w in plan.writes] == [(1, 7)]
    # nothing to cancel now
    refused, started = c.on_alter_reassignments({TP: None})
    assert refused == {TP: (errors.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")} and started == {}


def test_target_replicas_are_checked_as_kafka_2_8_checks_them() -> None:
    c = core(live=(1, 2, 3))
    refused, started = c.on_alter_reassignments({
        TP: [], ("t", 1): [2, 2], ("t", 5): [1, 2], ("u", 0): [1], ("t", 9): [-1, 2]})
    assert started == {}
    assert refused[TP] == (errors.INVALID_REPLICA_ASSIGNMENT, "Empty replica list specified in partition reassignment.")
    assert refused[("t", 1)][0] == errors.INVALID_REPLICA_ASSIGNMENT and "Duplicate replica ids" in refused[("t", 1)][1]
    assert refused[("t", 9)][0] == errors.INVALID_REPLICA_ASSIGNMENT and "Invalid broker id" in refused[("t", 9)][1]
    assert refused[("t", 5)] == (errors.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
    assert refused[("u", 0)] == (errors.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
    refused, _ = c.on_alter_reassignments({TP: [1, 2, 4]})   # 4 is not alive
    assert refused[TP] == (errors.INVALID_REPLICA_ASSIGNMENT, "Replica assignment has brokers that are not alive. "
                                                               "Replica list: ArrayBuffer(4), live broker list: Set(1, 2, 3)")


def test_a_reassigned_topic_znode_round_trips_and_a_new_controller_resumes_it() -> None:
    a = TopicAssignment("t", {0: (2, 3, 4, 1), 1: (1, 2, 3)}, "id", adding={0: (4,)}, removing={0: (1,)})
    back = codecs.decode_topic("t", codecs.encode_topic(a))
    assert (back.partitions, back.adding, back.removing) == (a.partitions, a.adding, a.removing)
    assert back.target(0) == (2, 3, 4) and back.origin(0) == (2, 3, 1) and back.target(1) == (1, 2, 3)
    # the znode is the only place ORS is kept: a new controller finds the reassignment there
    c = core(replicas=(2, 3, 4, 1), adding={0: (4,)}, removing={0: (1,)})
    assert c.reassigning() == [TP]
    # ... and the handlers resume it after a failover (phase A again: the ISR lacks 4)
    world = []
    ctl = h.ControllerHandlers(c, 1)

    def do(cmd):
        world.append(cmd)
        if isinstance(cmd, h.WriteStates):
            return {(w.topic, w.partition): (w.zk_version or 0) + 1 for w in cmd.writes}
        return 0 if isinstance(cmd, (h.Clock, h.MonoNs)) else None
    h.run(ctl.reassign(TP), do)
    (write,) = [x for x in world if isinstance(x, h.WriteStates)]
    assert [(w.reason, w.state.leader_epoch) for w in write.writes] == [("reassignment", 6)]


def test_elect_leaders_preferred_and_unclean_as_kafka_2_8_answers() -> None:
    c = core(live=(1, 2, 3), leader=2, isr=(2, 3))
    plan, answers = c.elect_leaders_on_request([TP, ("t", 7)], PREFERRED)
    assert answers[TP] == (errors.PREFERRED_LEADER_NOT_AVAILABLE, "Failed to elect leader for partition t-0 under "
                                                                 "strategy PreferredReplicaPartitionLeaderElectionStrategy", -1)
    assert answers[("t", 7)] == (errors.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.", -1)
    # unclean with a live leader: not needed
    plan, answers = c.elect_leaders_on_request([TP], UNCLEAN)
    assert answers == {TP: (errors.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.", -1)} and not plan.writes
    # the preferred replica back in the ISR: elected, ISR kept
    c2 = core(live=(1, 2, 3), leader=2, isr=(2, 3, 1))
    plan, answers = c2.elect_leaders_on_request([TP, ("t", 1)], PREFERRED)
    assert answers[TP] == (errors.NONE, None, 1)
    assert [(w.state.leader, w.state.isr, w.reason) for w in plan.writes][0] == (1, (2, 3, 1), "preferred_admin")
    # the ISR's only replica (3) is dead and the leader with it: unclean elects the first live replica, ISR [it],
    # although the topic does not allow unclean elections
    c3 = core(live=(1, 2), leader=3, isr=(3,))
    assert c3.states[TP][0].leader == -1   # the failover left it offline (unclean elections are off)
    plan, answers = c3.elect_leaders_on_request([TP], UNCLEAN)
    assert answers == {TP: (errors.NONE, None, 1)}
    assert [(w.state.leader, w.state.isr, w.reason) for w in plan.writes] == [(1, (1,), "unclean_election_admin")]
    assert [e.name for e in plan.events] == ["unclean_leader_election"]
    # nobody live at all: ELIGIBLE_LEADERS_NOT_AVAILABLE
    c4 = core(live=(4,), leader=3, isr=(3,))
    _, answers = c4.elect_leaders_on_request([TP], UNCLEAN)
    assert answers[TP][0] == errors.ELIGIBLE_LEADERS_NOT_AVAILABLE


def test_zookeeper_reassignments_and_the_api_taking_precedence() -> None:
    c = core()
    started, failed = c.on_zk_reassignment({TP: (2, 3, 4), ("t", 8): (1, 2)})
    assert started == {TP: ((2, 3, 4, 1), (4,), (1,))} and failed == [("t", 8)]
    assert c.zk_reassigning == {TP: (2, 3, 4)}
    plan = c.forget_zk_reassignments([TP])   # an API reassignment of the same partition
    assert plan.zk_reassignment == {} and c.zk_reassigning == {}


def test_replicas_on_offline_log_directories_are_not_online_for_these_elections() -> None:
    """Kafka's isReplicaOnline: a replica a broker answered KAFKA_STORAGE_ERROR for (controller/log_dirs.py) is
    passed over by ElectLeaders and by the reassignment's leader move; a reassignment's new replicas are sent
    with isNew (updateLeaderEpochAndSendRequest), so their broker may create them in an online directory."""
    c = core(live=(1, 2, 3), leader=2, isr=(2, 3, 1))
    c.offline_replicas = {1: {TP}}   # the preferred replica's log directory is offline
    plan, answers = c.elect_leaders_on_request([TP], PREFERRED)
    assert answers[TP][0] == errors.PREFERRED_LEADER_NOT_AVAILABLE and not plan.writes
    c2 = core(live=(1, 2), leader=3, isr=(3,))
    c2.offline_replicas = {1: {TP}}
    plan, answers = c2.elect_leaders_on_request([TP], UNCLEAN)
    assert answers == {TP: (errors.NONE, None, 2)}
    assert [(w.state.leader, w.state.isr) for w in plan.writes] == [(2, (2,))]
    # a reassignment: 4 is added (isNew to 4 only), then 1 leaves; 2, the first target replica, is offline
    c3 = core()
    _, started = c3.on_alter_reassignments({TP: [2, 3, 4]})
    commit(c3, c3.reassignment_update(TP, started[TP]))
    a, _ = c3.reassignment_progress(TP)
    reqs = commit(c3, a)
    told = {b: next(x for x in reqs[b] if isinstance(x, LeaderAndIsrCmd)).partitions[0].is_new for b in (1, 2, 3, 4)}
    assert told == {1: False, 2: False, 3: False, 4: True}
    commit(c3, c3.on_alter_isr(1, 101, [(TP, 6, (1, 2, 3, 4), 4)])[1])
    c3.offline_replicas = {2: {TP}}
    b, done = c3.reassignment_progress(TP)
    assert done and b.writes[-1].state.leader == 3
