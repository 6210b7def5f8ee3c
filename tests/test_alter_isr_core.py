"""AlterIsr at the controller (Kafka's processAlterIsr), in the core: checks in order, then a write."""
from __future__ import annotations

from controller.core import (FENCED_LEADER_EPOCH, INELIGIBLE_REPLICA, INVALID_REQUEST, INVALID_UPDATE_VERSION, NONE,
                             NOT_CONTROLLER, NOT_LEADER_OR_FOLLOWER, STALE_BROKER_EPOCH,
                             UNKNOWN_TOPIC_OR_PARTITION, LeaderAndIsrCmd, UpdateMetadataCmd)
from test_controller_core import EPOCH, apply, brokers, las, started, state_of

T = "t"
TP = (T, 0)


def core():
    return started({T: {0: (1, 2, 3)}}, {TP: (las(1, 4, (1, 2, 3)), 7)}, brokers(1, 2, 3))


def test_a_shrink_is_written_with_the_same_leader_epoch_and_announced_by_update_metadata_only():
    c = core()
    code, plan, results = c.on_alter_isr(1, 101, [(TP, 4, (1, 2), 7)])
    assert (code, results) == (NONE, {TP: NONE})
    [w] = plan.writes
    assert (w.state, w.zk_version, w.reason) == (las(1, 4, (1, 2)), 7, "isr_shrink")
    requests = c.commit(plan, {TP: 8})
    assert state_of(c, TP) == las(1, 4, (1, 2))
    assert all(not isinstance(cmd, LeaderAndIsrCmd) for cmds in requests.values() for cmd in cmds)
    assert all(any(isinstance(cmd, UpdateMetadataCmd) for cmd in requests[b]) for b in (1, 2, 3))


def test_an_expand_back_to_the_full_isr():
    c = started({T: {0: (1, 2, 3)}}, {TP: (las(1, 4, (1, 2)), 8)}, brokers(1, 2, 3))
    code, plan, results = c.on_alter_isr(1, 101, [(TP, 4, (1, 2, 3), 8)])
    assert results == {TP: NONE} and plan.writes[0].reason == "isr_expand"


def test_checks_in_kafkas_order():
    c = core()
    assert c.on_alter_isr(1, 100, [(TP, 4, (1, 2), 7)])[0] == STALE_BROKER_EPOCH  # epoch != cached (101)
    assert c.on_alter_isr(9, 1, [(TP, 4, (1, 2), 7)])[0] == STALE_BROKER_EPOCH    # not a live broker
    cases = [
        ([(("nope", 0), 4, (1,), 0)], UNKNOWN_TOPIC_OR_PARTITION),
        ([(TP, 3, (1, 2), 7)], FENCED_LEADER_EPOCH),            # an older leader epoch
        ([(TP, 4, (1, 2, 3), 7)], NONE),                        # the same state: success, no write
        ([(TP, 4, (1, 2), 6)], INVALID_UPDATE_VERSION),         # a stale zkVersion
        ([(TP, 4, (2, 3), 7)], INVALID_REQUEST),                # an ISR without the leader
        ([(TP, 4, (1, 4), 7)], INVALID_REQUEST),                # a broker outside the replicas
    ]
    for items, expected in cases:
        code, plan, results = c.on_alter_isr(1, 101, items)
        assert code == NONE and list(results.values()) == [expected], items
        assert plan.writes == [] , items
    # only the leader may ask
    assert c.on_alter_isr(2, 102, [(TP, 4, (1, 2), 7)])[2] == {TP: NOT_LEADER_OR_FOLLOWER}
    c.on_resign()
    assert c.on_alter_isr(1, 101, [(TP, 4, (1, 2), 7)])[0] == NOT_CONTROLLER


def test_an_accepted_change_moves_the_version_the_next_request_must_carry():
    c = core()
    _, plan, _ = c.on_alter_isr(1, 101, [(TP, 4, (1, 2), 7)])
    apply(c, plan)  # zkVersion 8 now
    assert c.on_alter_isr(1, 101, [(TP, 4, (1,), 7)])[2] == {TP: INVALID_UPDATE_VERSION}
    assert c.on_alter_isr(1, 101, [(TP, 4, (1,), 8)])[2] == {TP: NONE}
    assert EPOCH == c.epoch


def test_by_default_alter_isr_has_no_eligibility_check_as_in_kafka_2_8():
    """Kafka 2.8's processAlterIsr takes a shutting-down or unregistered broker into the ISR."""
    c = started({T: {0: (1, 2, 3)}}, {TP: (las(1, 4, (1, 2)), 8)}, brokers(1, 2, 3))
    c.on_controlled_shutdown(3, 103)
    code, plan, results = c.on_alter_isr(1, 101, [(TP, 4, (1, 2, 3), 8)])
    assert (code, results) == (NONE, {TP: NONE}) and plan.writes[0].state.isr == (1, 2, 3)
    c = started({T: {0: (1, 2, 3)}}, {TP: (las(1, 4, (1, 2)), 8)}, brokers(1, 2))
    code, plan, results = c.on_alter_isr(1, 101, [(TP, 4, (1, 2, 3), 8)])
    assert (code, results) == (NONE, {TP: NONE}) and plan.writes[0].state.isr == (1, 2, 3)


def test_a_broker_in_controlled_shutdown_is_not_taken_back_into_an_isr():
    """KIP-841 (kafkasim.isr.kip841.enable): it keeps fetching until it stops; re-adding it would
    undo the shutdown's ISR removal."""
    c = started({T: {0: (1, 2, 3)}}, {TP: (las(1, 4, (1, 2)), 8)}, brokers(1, 2, 3), kip841_enable=True)
    c.on_controlled_shutdown(3, 103)
    code, plan, results = c.on_alter_isr(1, 101, [(TP, 4, (1, 2, 3), 8)])
    assert (code, results, plan.writes) == (NONE, {TP: INELIGIBLE_REPLICA}, [])
    # shrinks are still allowed
    code, plan, results = c.on_alter_isr(1, 101, [(TP, 4, (1,), 8)])
    assert results == {TP: NONE} and plan.writes[0].reason == "isr_shrink"


def test_a_broker_that_is_not_registered_is_not_taken_into_an_isr():
    """KIP-841: the leader may still see fetches from a broker the controller already knows is gone."""
    c = started({T: {0: (1, 2, 3)}}, {TP: (las(1, 4, (1, 2)), 8)}, brokers(1, 2), kip841_enable=True)
    code, plan, results = c.on_alter_isr(1, 101, [(TP, 4, (1, 2, 3), 8)])
    assert (code, results, plan.writes) == (NONE, {TP: INELIGIBLE_REPLICA}, [])


def test_a_version_conflict_refuses_the_written_changes_and_decides_again_from_the_re_read_states():
    """The cached state was stale (the write met BADVERSION): each change of the request that was to be
    written answers INVALID_UPDATE_VERSION, the others keep their answers, and the re-read states are
    decided again; each answer carries the state as the controller now knows it."""
    c = started({T: {0: (1, 2, 3), 1: (1, 2, 3)}}, {TP: (las(1, 4, (1, 2, 3)), 7),
                                                     (T, 1): (las(1, 4, (1, 2, 3)), 7)}, brokers(1, 2, 3))
    code, plan, results = c.on_alter_isr(1, 101, [(TP, 4, (1, 2), 7), ((T, 1), 3, (1,), 7)])
    assert results == {TP: NONE, (T, 1): FENCED_LEADER_EPOCH}
    # meanwhile ZooKeeper moved on: TP has a new leader epoch at version 8 (broker 3 is gone, say)
    results, retry = c.on_alter_isr_conflict(plan, results, {TP: (las(1, 5, (1, 2)), 8)})
    assert results == {TP: INVALID_UPDATE_VERSION, (T, 1): FENCED_LEADER_EPOCH}
    assert state_of(c, TP) == las(1, 5, (1, 2))
    assert retry.metadata_to_all
    assert c.alter_isr_answer(results) == {TP: (INVALID_UPDATE_VERSION, las(1, 5, (1, 2)), 8),
                                           (T, 1): (FENCED_LEADER_EPOCH, las(1, 4, (1, 2, 3)), 7)}
    assert c.alter_isr_answer({("gone", 0): UNKNOWN_TOPIC_OR_PARTITION}) == {
        ("gone", 0): (UNKNOWN_TOPIC_OR_PARTITION, None, -1)}


def test_a_change_whose_multi_applied_answers_none_after_another_multi_was_refused():
    """The states of one write go out in several multis, each applied on its own: after a refusal the re-read
    states show which changes landed, and those answer NONE with their new state, as Kafka answers each
    partition's write on its own; the refused one answers INVALID_UPDATE_VERSION."""
    c = started({T: {0: (1, 2, 3), 1: (1, 2, 3)}}, {TP: (las(1, 4, (1, 2, 3)), 7),
                                                     (T, 1): (las(1, 4, (1, 2, 3)), 7)}, brokers(1, 2, 3))
    code, plan, results = c.on_alter_isr(1, 101, [(TP, 4, (1, 2), 7), ((T, 1), 4, (1, 3), 7)])
    assert results == {TP: NONE, (T, 1): NONE} and len(plan.writes) == 2
    applied = next(w.state for w in plan.writes if (w.topic, w.partition) == (T, 1))
    results, _retry = c.on_alter_isr_conflict(plan, results, {TP: (las(1, 5, (1, 2)), 8), (T, 1): (applied, 8)})
    assert results == {TP: INVALID_UPDATE_VERSION, (T, 1): NONE}
    assert c.alter_isr_answer(results)[(T, 1)] == (NONE, applied, 8)
