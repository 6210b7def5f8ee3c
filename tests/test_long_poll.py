"""replication/long_poll.py: when a leader holds a fetch with nothing new and when it answers it (the rule
the broker's fetch handler and the simulator's both follow)."""
from __future__ import annotations

from kafkacommon import errors
from replication.long_poll import Position, answer_error, deadline_ms, waits


def pos(fetch_offset=10, current_epoch=3, leo=10, hw=8, epoch=3, leader=True) -> Position:
    return Position(fetch_offset, current_epoch, leo, hw, epoch, leader)


def test_a_follower_at_the_log_end_waits_and_a_moved_hw_alone_does_not_wake_it():
    assert waits(False, [pos()], follower=True)
    assert waits(False, [pos(hw=10)], follower=True)        # the HW caught up: the follower learns it next fetch
    assert not waits(False, [pos(leo=11)], follower=True)   # an append: records to send


def test_a_consumer_waits_for_the_hw_not_the_log_end():
    assert waits(False, [pos(fetch_offset=8, leo=12, hw=8)], follower=False)
    assert not waits(False, [pos(fetch_offset=8, leo=12, hw=9)], follower=False)


def test_an_urgent_answer_an_empty_fetch_or_one_readable_partition_answers_at_once():
    assert not waits(True, [pos()], follower=True)
    assert not waits(False, [], follower=True)
    assert not waits(False, [pos(), pos(fetch_offset=4)], follower=True)


def test_a_lost_leadership_or_a_newer_epoch_ends_the_wait_with_an_error():
    assert answer_error(pos()) == errors.NONE
    assert not waits(False, [pos(leader=False)], follower=True)
    assert answer_error(pos(leader=False)) == errors.NOT_LEADER_OR_FOLLOWER
    assert not waits(False, [pos(epoch=4)], follower=True)
    assert answer_error(pos(epoch=4)) == errors.FENCED_LEADER_EPOCH
    assert answer_error(pos(current_epoch=-1, epoch=4)) == errors.NONE   # a fetch that names no epoch


def test_the_deadline_is_max_wait_later_and_never_in_the_past():
    assert deadline_ms(1000, 500) == 1500
    assert deadline_ms(1000, -1) == 1000
