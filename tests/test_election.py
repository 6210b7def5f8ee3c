"""controller/election.py: Kafka's leader election rules (Election.scala) as pure functions.

Documented deviation: removing a dead follower from the ISR keeps the leader
epoch (only the zkVersion moves); any leader change bumps it.
"""
from __future__ import annotations

from hypothesis import given, strategies as st

from controller import election
from kafkacommon.metadata import LeaderAndIsr

CE = 9  # the electing controller's epoch


def las(leader: int, epoch: int, isr: tuple[int, ...], controller_epoch: int = 4) -> LeaderAndIsr:
    return LeaderAndIsr(leader, epoch, tuple(isr), controller_epoch)


# ------------------------------------------------------------------ initial

def test_initial_leader_is_the_first_live_replica_and_the_isr_every_live_replica():
    assert election.initial((3, 1, 2), {1, 2, 3}, CE) == LeaderAndIsr(3, 0, (3, 1, 2), CE)
    assert election.initial((3, 1, 2), {1, 2}, CE) == LeaderAndIsr(1, 0, (1, 2), CE)


def test_initial_keeps_assignment_order_in_the_isr():
    assert election.initial((5, 2, 4), {2, 4, 5, 9}, CE).isr == (5, 2, 4)


def test_initial_with_no_live_replica_elects_nobody():
    assert election.initial((1, 2), {3}, CE) is None
    assert election.initial((), {1}, CE) is None


# ------------------------------------------------------------------ offline

def test_offline_leader_is_the_first_replica_in_assignment_order_that_is_live_and_in_the_isr():
    cur = las(1, 7, (1, 2, 3))
    assert election.offline(cur, (1, 3, 2), {2, 3}, CE, unclean=False) == (LeaderAndIsr(3, 8, (2, 3), CE), False)


def test_offline_skips_live_replicas_outside_the_isr():
    cur = las(1, 7, (1, 2))
    assert election.offline(cur, (1, 3, 2), {2, 3}, CE, unclean=False) == (LeaderAndIsr(2, 8, (2,), CE), False)


def test_offline_new_isr_is_the_live_isr_members_in_isr_order():
    cur = las(1, 0, (4, 1, 3, 2))
    new, unclean = election.offline(cur, (1, 2, 3, 4), {2, 3, 4}, CE, unclean=True)
    assert new == LeaderAndIsr(2, 1, (4, 3, 2), CE) and not unclean


def test_offline_with_no_live_isr_member_and_clean_election_elects_nobody():
    assert election.offline(las(1, 7, (1,)), (1, 2, 3), {2, 3}, CE, unclean=False) == (None, False)


def test_offline_unclean_takes_the_first_live_replica_with_an_isr_of_itself():
    assert election.offline(las(1, 7, (1,)), (1, 3, 2), {2, 3}, CE, unclean=True) == \
        (LeaderAndIsr(3, 8, (3,), CE), True)


def test_offline_unclean_with_no_live_replica_elects_nobody():
    assert election.offline(las(1, 7, (1,)), (1, 2), {5}, CE, unclean=True) == (None, False)


def test_offline_from_no_leader_still_bumps_the_epoch():
    assert election.offline(las(-1, 7, (2,)), (1, 2), {2}, CE, unclean=False) == (LeaderAndIsr(2, 8, (2,), CE), False)


# ------------------------------------------------------------------ controlled shutdown

def test_controlled_shutdown_picks_the_first_live_isr_replica_not_shutting_down():
    cur = las(1, 3, (1, 2, 3))
    assert election.controlled_shutdown(cur, (1, 2, 3), {1, 2, 3}, {1}, CE) == LeaderAndIsr(2, 4, (2, 3), CE)
    assert election.controlled_shutdown(cur, (1, 2, 3), {1, 2, 3}, {1, 2}, CE) == LeaderAndIsr(3, 4, (3,), CE)


def test_controlled_shutdown_removes_shutting_down_brokers_from_the_isr():
    cur = las(3, 3, (3, 1, 2))
    assert election.controlled_shutdown(cur, (3, 2, 1), {1, 2, 3}, {2}, CE) == LeaderAndIsr(3, 4, (3, 1), CE)


def test_controlled_shutdown_needs_a_live_isr_replica_left():
    cur = las(1, 3, (1, 2))
    assert election.controlled_shutdown(cur, (1, 2, 3), {1, 3}, {1}, CE) is None  # 2 dead, 3 not in ISR
    assert election.controlled_shutdown(cur, (1, 2), {1, 2}, {1, 2}, CE) is None


# ------------------------------------------------------------------ preferred

def test_preferred_moves_leadership_to_the_assignment_head_keeping_the_isr():
    assert election.preferred(las(2, 5, (2, 1, 3)), (1, 2, 3), {1, 2, 3}, CE) == LeaderAndIsr(1, 6, (2, 1, 3), CE)


def test_preferred_needs_the_head_live():
    assert election.preferred(las(2, 5, (2, 1, 3)), (1, 2, 3), {2, 3}, CE) is None


def test_preferred_needs_the_head_in_the_isr():
    assert election.preferred(las(2, 5, (2, 3)), (1, 2, 3), {1, 2, 3}, CE) is None


def test_preferred_does_nothing_when_the_head_already_leads():
    assert election.preferred(las(1, 5, (1, 2)), (1, 2), {1, 2}, CE) is None


def test_preferred_with_no_replicas_does_nothing():
    assert election.preferred(las(1, 5, (1,)), (), {1}, CE) is None


def test_preferred_can_revive_an_offline_partition_whose_head_is_in_the_isr():
    assert election.preferred(las(-1, 5, (1,)), (1, 2), {1, 2}, CE) == LeaderAndIsr(1, 6, (1,), CE)


# ------------------------------------------------------------------ remove_from_isr

def test_removing_a_dead_follower_bumps_the_leader_epoch():
    # Kafka 2.8's removeReplicasFromIsr writes the new ISR with leaderEpoch + 1 (LeaderAndIsr.newLeaderAndIsr)
    assert election.remove_from_isr(las(1, 5, (1, 2, 3)), {2}, CE) == LeaderAndIsr(1, 6, (1, 3), CE)


def test_removing_the_leader_sets_no_leader_and_bumps_the_epoch():
    assert election.remove_from_isr(las(1, 5, (1, 2, 3)), {1}, CE) == LeaderAndIsr(-1, 6, (2, 3), CE)


def test_removal_goes_in_id_order_and_never_empties_the_isr():
    # 1 then 2 leave; 3, the last one in id order, cannot: the ISR keeps it.  Kafka writes once per
    # removed replica (each leaderEpoch + 1), the last member's write included (it loses the leadership)
    assert election.remove_from_isr(las(3, 5, (3, 1, 2)), {1, 2, 3}, CE) == LeaderAndIsr(-1, 8, (3,), CE)
    assert election.remove_from_isr(las(2, 5, (2, 3)), {2, 3}, CE) == LeaderAndIsr(-1, 7, (3,), CE)
    assert election.remove_from_isr(las(3, 5, (3, 2)), {2, 3}, CE) == LeaderAndIsr(-1, 7, (3,), CE)


def test_removal_keeps_the_order_of_the_remaining_isr():
    assert election.remove_from_isr(las(4, 1, (4, 3, 1, 2)), {1, 3}, CE) == LeaderAndIsr(4, 3, (4, 2), CE)


def test_a_lone_isr_leader_that_dies_stays_in_the_isr_without_leading():
    assert election.remove_from_isr(las(1, 5, (1,)), {1}, CE) == LeaderAndIsr(-1, 6, (1,), CE)


def test_nothing_to_remove_gives_none():
    assert election.remove_from_isr(las(1, 5, (1, 2)), {3}, CE) is None
    assert election.remove_from_isr(las(1, 5, (1, 2)), set(), CE) is None


def test_an_offline_partition_with_its_last_member_gone_is_unchanged():
    assert election.remove_from_isr(las(-1, 6, (2,)), {1, 2, 3}, CE) is None


def test_a_dead_leader_outside_the_isr_still_loses_leadership():
    assert election.remove_from_isr(las(1, 5, (2, 3)), {1}, CE) == LeaderAndIsr(-1, 6, (2, 3), CE)


# ------------------------------------------------------------------ properties

BROKERS = st.integers(1, 6)


@st.composite
def partitions(draw):
    replicas = tuple(draw(st.lists(BROKERS, min_size=1, max_size=5, unique=True)))
    isr = tuple(draw(st.lists(st.sampled_from(replicas), min_size=1, max_size=len(replicas), unique=True)))
    leader = draw(st.sampled_from(isr + (-1,)))
    return replicas, LeaderAndIsr(leader, draw(st.integers(0, 1000)), isr, draw(st.integers(1, CE)))


@given(partitions(), st.frozensets(BROKERS), st.booleans())
def test_offline_elects_a_live_leader_inside_its_new_isr(part, live, unclean):
    replicas, cur = part
    new, was_unclean = election.offline(cur, replicas, live, CE, unclean)
    if new is None:
        assert not was_unclean
        assert not (set(cur.isr) & live & set(replicas)) and (not unclean or not (live & set(replicas)))
        return
    assert new.leader in live and new.leader in new.isr and new.leader in replicas
    assert new.leader_epoch == cur.leader_epoch + 1 and new.controller_epoch == CE
    if was_unclean:
        assert new.isr == (new.leader,) and not (set(cur.isr) & live)
    else:
        assert new.isr == tuple(b for b in cur.isr if b in live)
        assert new.leader == next(r for r in replicas if r in live and r in cur.isr)


@given(partitions(), st.frozensets(BROKERS))
def test_remove_from_isr_never_empties_the_isr_and_bumps_the_epoch_once_per_removed_replica(part, gone):
    _replicas, cur = part
    new = election.remove_from_isr(cur, gone, CE)
    if new is None:
        assert (cur.leader not in gone) and (not set(cur.isr) & gone or len(cur.isr) == 1)
        return
    assert new.isr, "the ISR is never emptied"
    assert set(new.isr) <= set(cur.isr)
    assert list(new.isr) == [b for b in cur.isr if b in new.isr], "ISR order is kept"
    assert not set(new.isr) & gone or len(new.isr) == 1
    writes = len(gone & set(cur.isr)) + (cur.leader in gone and cur.leader not in cur.isr)
    assert new.leader_epoch == cur.leader_epoch + writes
    if cur.leader in gone:
        assert new.leader == -1
    else:
        assert new.leader == cur.leader
    assert new.controller_epoch == CE
