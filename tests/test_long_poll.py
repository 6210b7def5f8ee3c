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


# ---------------------------------------------------------------------- LeaderFetch and FetcherState: the steps

from replication.fetch_session import PartitionFetch  # noqa: E402
from replication.fetcher import BACKOFF_MS, FetcherState, retry_at_once  # noqa: E402
from replication.long_poll import LeaderFetch, Part  # noqa: E402
from replication.partition import PartitionReplication  # noqa: E402


class _Log:
    def __init__(self, leo: int) -> None:
        self.leo = leo

    log_start_offset = 0

    @property
    def log_end_offset(self) -> int:
        return self.leo

    def end_offset_for_epoch(self, epoch: int):
        return epoch, self.leo


def _leader(leo: int = 5):
    repl, log = PartitionReplication("t", 0, 1), _Log(leo)
    repl.become_leader(3, [1, 2], [1, 2], 0, log, 0)
    return repl, log


def test_a_leader_fetch_records_positions_parks_with_nothing_new_and_answers_what_changed() -> None:
    repl, log = _leader()
    f = LeaderFetch(True, 500.0)
    part = Part(("t", 0), "h", PartitionFetch(5, 3, 3, 100, 0))
    out = f.record(part, 2, repl, log, 10)
    assert out.error == errors.NONE and f.pending == [part] and f.hw_moved   # the follower at the end moved the HW
    state = {"h": (repl, log)}
    assert f.waits(state.get)                       # nothing past offset 5: parked
    assert f.still_waits("other", None, None)       # another replica's change does not end it
    log.leo = 6                                     # an append
    assert not f.still_waits("h", repl, log)
    assert f.answer(part, repl, log) == errors.NONE
    assert f.answer(part, None, None) == errors.NOT_LEADER_OR_FOLLOWER     # stopped meanwhile


def test_a_leader_fetch_answers_at_once_an_unknown_or_stale_partition_and_leaves_out_an_idle_one() -> None:
    repl, log = _leader()
    f = LeaderFetch(True, 500.0)
    f.not_leader(Part(("t", 9), None, PartitionFetch(0, -1, 1, 100, 0)))
    stale = Part(("t", 0), "h", PartitionFetch(5, 3, 2, 100, 0))            # an older leader epoch
    assert f.record(stale, 2, repl, log, 10).error == errors.FENCED_LEADER_EPOCH
    assert f.urgent and not f.waits({"h": (repl, log)}.get)
    idle_repl, idle_log = _leader()
    f2 = LeaderFetch(True, 500.0)
    at_end = Part(("t", 0), "h", PartitionFetch(5, 3, 3, 100, 5))
    f2.record(at_end, 2, idle_repl, idle_log, 10)            # the follower's position known: HW 5 = LEO
    assert f2.unlisted(at_end, 2, idle_repl, idle_log, 20)  # listed nothing new: only the fetch time recorded
    assert f2.answer(at_end, idle_repl, idle_log) is None   # nothing new for it: left out of the answer


def test_a_fetch_ahead_of_this_brokers_epoch_waits_for_its_leadership_then_records_the_position() -> None:
    # broker 1 follows at epoch 3; the controller made it leader at 4, and the follower (2) heard first
    repl, log = PartitionReplication("t", 0, 1), _Log(5)
    repl.become_follower(3, 3, [1, 2, 3], [1, 2, 3], 0)
    f = LeaderFetch(True, 500.0)
    part = Part(("t", 0), "h", PartitionFetch(5, 3, 4, 100, 0))
    assert f.waits_for_epoch(part, repl) and f.ahead == [part] and not f.urgent
    state = {"h": (repl, log)}
    assert f.waits(state.get, arriving=True) and f.waits(state.get)
    assert f.still_waits("h", repl, log)              # a change of it that is not the new epoch: still waits
    repl.become_leader(4, [1, 2], [1, 2, 3], 1, log, 20)
    assert not f.still_waits("h", repl, log) and not f.waits(state.get)
    out = f.record_late(part, 2, repl, log, 30)       # recorded once it leads: no error, nothing new to read
    assert out.error == errors.NONE and out.read_offset == 5 and repl.remotes[2].log_end_offset == 5


def test_a_fetch_ahead_answers_as_kafka_does_when_the_epoch_never_comes_or_another_leader_is_named() -> None:
    repl, log = PartitionReplication("t", 0, 1), _Log(5)
    repl.become_follower(3, 3, [1, 2, 3], [1, 2, 3], 0)
    f = LeaderFetch(True, 500.0)
    part = Part(("t", 0), "h", PartitionFetch(5, 3, 4, 100, 0))
    assert f.waits_for_epoch(part, repl)
    assert f.record_late(part, 2, repl, log, 500).error == errors.UNKNOWN_LEADER_EPOCH   # the deadline came first
    repl.become_follower(3, 5, [2, 3], [1, 2, 3], 1)   # epoch 5 names broker 3: the wait ends, fenced
    assert not f.waits({"h": (repl, log)}.get)
    assert f.record_late(part, 2, repl, log, 510).error == errors.FENCED_LEADER_EPOCH
    same = Part(("t", 0), "h", PartitionFetch(5, 3, 5, 100, 0))
    assert not LeaderFetch(True, 500.0).waits_for_epoch(same, repl)       # not ahead: answered as before
    assert not LeaderFetch(False, 500.0).waits_for_epoch(part, repl)      # a consumer's fetch never waits so
    no_epoch = Part(("t", 0), "h", PartitionFetch(5, 3, -1, 100, 0))
    assert not LeaderFetch(True, 500.0).waits_for_epoch(no_epoch, repl)


def test_a_fetchers_requests_list_what_changed_and_start_over_after_a_failure() -> None:
    core = FetcherState()
    pos = {("t", 0): PartitionFetch(0, -1, 3, 100, 0), ("t", 1): PartitionFetch(4, 2, 3, 100, 4)}
    parts = {("t", 0): ("h0", 3), ("t", 1): ("h1", 3)}
    r1 = core.request(parts, lambda tp, h, e: pos[tp], 0)
    assert (r1.session_id, r1.session_epoch, len(r1.listed)) == (0, 0, 2)      # a full request
    assert core.answered(r1, errors.NONE, 77)
    assert core.still_fetching(r1, ("t", 0), ("L", 3), "L")
    core.moved(("t", 0), "h0", 3, PartitionFetch(2, 3, 3, 100, 2))
    r2 = core.request(parts, lambda tp, h, e: pos[tp], 0)
    assert (r2.session_id, r2.session_epoch, [tp for tp, _ in r2.listed]) == (77, 1, [("t", 0)])
    assert not core.still_fetching(r2, ("t", 1), ("M", 4), "L")   # the role moved: forgotten, read again
    core.failed()
    r3 = core.request(parts, lambda tp, h, e: pos[tp], 0)
    assert (r3.session_id, len(r3.listed)) == (0, 2)
    assert not core.answered(r3, errors.FETCH_SESSION_ID_NOT_FOUND, 0)
    assert retry_at_once(errors.FETCH_SESSION_ID_NOT_FOUND) and not retry_at_once(errors.NOT_LEADER_OR_FOLLOWER)


def test_a_partition_whose_answer_is_an_error_backs_off_alone() -> None:
    """Kafka's AbstractFetcherThread delays only its partitions with errors: the others go on at once."""
    core = FetcherState()
    pos = {("t", 0): PartitionFetch(0, -1, 3, 100, 0), ("t", 1): PartitionFetch(4, 2, 3, 100, 4)}
    parts = {("t", 0): ("h0", 3), ("t", 1): ("h1", 3)}
    r1 = core.request(parts, lambda tp, h, e: pos[tp], 1000)
    assert core.answered(r1, errors.NONE, 77)
    core.backoff(("t", 1), "h1", 3, 1000)              # (t, 1)'s leader has not taken it up yet
    assert core.ready_in_ms(1000) == BACKOFF_MS
    r2 = core.request(parts, lambda tp, h, e: pos[tp], 1010)
    assert set(r2.current) == {("t", 0)} and ("t", 1) in r2.forgotten   # left out, the other fetched at once
    assert core.request({("t", 1): ("h1", 3)}, lambda tp, h, e: pos[tp], 1020) is None   # nothing else to fetch
    assert core.ready_in_ms(1020) == BACKOFF_MS - 20
    assert ("t", 1) in core.request(parts, lambda tp, h, e: pos[tp], 1000 + BACKOFF_MS).current   # backoff over
    core.backoff(("t", 1), "h1", 3, 2000)
    assert ("t", 1) in core.request({("t", 1): ("h1", 4)}, lambda tp, h, e: pos[tp], 2001).current  # given again
    assert core.ready_in_ms(2001) is None
