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


def test_while_a_partition_backs_off_the_long_poll_ends_when_it_may_be_fetched_again() -> None:
    """A partition left out after an error is not in the leader's session, so nothing it gets there ends the
    poll: the request's max wait is cut to the end of its backoff, and it is listed again then (issue 49)."""
    core = FetcherState()
    pos = {("t", 0): PartitionFetch(0, -1, 3, 100, 0), ("t", 1): PartitionFetch(4, 2, 3, 100, 4)}
    parts = {("t", 0): ("h0", 3), ("t", 1): ("h1", 3)}
    assert core.poll_wait_ms(500, 1000) == 500                 # nothing backs off: replica.fetch.wait.max.ms
    r1 = core.request(parts, lambda tp, h, e: pos[tp], 1000)
    assert core.answered(r1, errors.NONE, 77)
    core.backoff(("t", 1), "h1", 3, 1000)
    r2 = core.request(parts, lambda tp, h, e: pos[tp], 1010)
    assert ("t", 1) in r2.forgotten
    assert core.poll_wait_ms(500, 1010) == BACKOFF_MS - 10     # the poll ends as (t, 1)'s backoff does
    assert core.poll_wait_ms(20, 1010) == 20                   # never longer than asked
    assert core.answered(r2, errors.NONE, 77)
    r3 = core.request(parts, lambda tp, h, e: pos[tp], 1000 + BACKOFF_MS)
    assert [tp for tp, _ in r3.listed] == [("t", 1)]           # listed again once its backoff is over
    assert core.poll_wait_ms(500, 1000 + BACKOFF_MS) == 500


# ---------------------------------------------------------------------- a session's idle partitions (issue 49)

from replication.fetch_session import LeaderSessions  # noqa: E402


def _same(handle):
    return handle     # the test's handle on a replica is its (repl, log)


class _Idle:
    """Leader replicas of ``n`` partitions, all caught up by follower 2 (ISR 1, 2), and a session of follower 2
    that lists them once; ``fetch`` then takes a request through LeaderFetch as the shells do."""

    def __init__(self, n: int = 4, leo: int = 5) -> None:
        self.state = {}
        for p in range(n):
            repl, log = PartitionReplication("t", p, 1), _Log(leo)
            repl.become_leader(3, [1, 2], [1, 2], 0, log, 0)
            self.state[("t", p)] = (repl, log)
        self.sessions = LeaderSessions(first_id=7)
        self.pf = {tp: PartitionFetch(leo, 3, 3, 100, 0) for tp in self.state}
        f, _ = self.fetch(0, 0, list(self.pf.items()), 10)           # positions recorded: HW 5
        self.pf = {tp: PartitionFetch(leo, 3, 3, 100, leo) for tp in self.state}
        self.fetch(f.session_id, 1, list(self.pf.items()), 20)         # the follower has the HW now
        self.sid, self.epoch = f.session_id, 2

    def fetch(self, sid, epoch, listed, now, forgotten=()):
        code, session = self.sessions.open(2, sid, epoch, listed, forgotten)
        assert code == errors.NONE
        f = LeaderFetch(True, now + 500.0, session.id)
        parts = [Part(tp, self.state[tp], pf) for tp, pf in listed]
        looked = []
        for tp in f.open_session(session, [tp for tp, _ in listed], forgotten):
            self.state[tp][0].release_follower(2)
        for tp, pf in f.stamp(now):
            looked.append(tp)
            part = Part(tp, self.state[tp], pf)
            if not f.unlisted(part, 2, *self.state[tp], now):
                parts.append(part)
        for part in parts:
            f.record(part, 2, *self.state[part.tp], now)
        return f, looked

    def idle(self, now, listed=()):
        f, looked = self.fetch(self.sid, self.epoch, list(listed), now)
        self.epoch += 1
        return f, looked


def test_an_idle_sessions_partitions_are_bound_to_its_clock_and_read_the_times_a_write_per_fetch_would():
    s = _Idle()
    twin = _Idle()                        # the same fetches, each idle one recorded partition by partition
    assert all(repl.remotes[2].bound for repl, _log in s.state.values())   # bound at the fetch that listed them
    f, looked = s.idle(1000)
    assert looked == []                   # not looked at again: nothing new for the follower
    for t in (1000, 1500, 2000):
        for tp, (repl, log) in twin.state.items():
            assert repl.on_idle_follower_fetch(2, 5, 3, log.log_end_offset, t)
    for now in (1500, 2000):
        f, looked = s.idle(now)
        assert looked == [] and f.waits(_same, arriving=True) and f.waits(_same)
        assert f.parts() == [] and f.idle == []
    for tp, (repl, _log) in s.state.items():
        assert repl.remotes[2] == twin.state[tp][0].remotes[2]
        assert repl.remotes[2].last_caught_up_ms == 2000 == repl.remotes[2].last_fetch_ms
        assert repl.snapshot() == twin.state[tp][0].snapshot()


def test_a_touched_idle_partition_ends_the_wait_it_must_and_the_next_fetch_looks_at_it():
    s = _Idle()
    s.idle(1000)
    f, _ = s.idle(1500)                   # parked, every partition bound
    repl, log = s.state[("t", 1)]
    log.leo = 6                           # an append ...
    repl.on_leader_append(log, 1600)      # ... touches it: the fetch now has records to send
    assert not f.waits(_same)
    assert [p.tp for p in f.parts()] == [("t", 1)] and f.answer(f.parts()[0], repl, log) == errors.NONE
    h1, h2 = s.state[("t", 1)], s.state[("t", 2)]
    assert not f.still_waits(h1, repl, log) and f.touches(h1) and not f.touches(h2) and f.still_waits(h2, *h2)
    assert repl.remotes[2].last_fetch_ms == 1500 and not repl.remotes[2].bound   # written back, unbound
    f2, looked = s.idle(2000)
    assert looked == [("t", 1)] and [p.tp for p in f2.pending] == [("t", 1)]    # behind the log end now
    assert repl.remotes[2].last_caught_up_ms == 1500    # caught up as of the fetch before the append


def test_a_newer_leader_epoch_ends_the_wait_with_an_error_and_an_isr_update_alone_does_not():
    s = _Idle()
    s.idle(1000)
    f, _ = s.idle(1500)
    repl, log = s.state[("t", 2)]
    repl.become_leader(4, [1, 2], [1, 2], 1, log, 1600)      # a newer leader epoch here
    assert not f.waits(_same) and f.answer(f.parts()[0], repl, log) == errors.FENCED_LEADER_EPOCH
    f, _ = s.idle(1700, [(("t", 2), PartitionFetch(5, 3, 4, 100, 5))])
    repl0, log0 = s.state[("t", 0)]
    f, _ = s.idle(1800)
    repl0.apply_isr_update([1, 2], 5, 3)      # an ISR update alone: looked at, still waiting, nothing new
    assert f.waits(_same) and [f.answer(p, *s.state[p.tp]) for p in f.parts()] == [None]


def test_a_clock_stepping_back_binds_nothing_and_forgotten_partitions_keep_their_last_fetch():
    s = _Idle()
    s.idle(5000)
    f, looked = s.idle(4000)              # the wall clock stepped back: bound ones read the peak, as max() does
    assert looked == []
    repl, _ = s.state[("t", 0)]
    assert repl.remotes[2].last_caught_up_ms == 5000 and repl.remotes[2].last_fetch_ms == 4000
    s.state[("t", 3)][1].leo = 6
    s.state[("t", 3)][0].touch()
    f, looked = s.idle(4500)              # still below the peak: looked at, recorded, not bound again
    assert looked == [("t", 3)] and not s.state[("t", 3)][0].remotes[2].bound
    f, looked = s.fetch(s.sid, s.epoch, [], 6000, forgotten=[("t", 0)])
    s.epoch += 1
    assert repl.remotes[2].last_fetch_ms == 4500 and not repl.remotes[2].bound   # not fetched at 6000
    assert s.state[("t", 1)][0].remotes[2].last_fetch_ms == 6000


def test_the_shrink_check_sees_an_idle_followers_times_from_the_clock():
    s = _Idle()
    s.idle(1000)
    repl, log = s.state[("t", 0)]
    lag = repl.settings.replica_lag_time_max_ms
    assert repl.maybe_shrink_isr(log, 1000 + lag) is None
    s.idle(1000 + lag)                    # fetched idle again: still caught up
    log.leo = 6
    repl.on_leader_append(log, 1000 + lag)
    assert repl.maybe_shrink_isr(log, 1000 + 2 * lag) is None        # caught up at 1000 + lag: not past the lag
    assert repl.maybe_shrink_isr(log, 1001 + 2 * lag).changed == (2,)


def _listing(s: _Idle, listed, stamp_ms: int, record_ms: int) -> LeaderFetch:
    """A fetch of ``s``'s session listing ``listed`` (tp -> PartitionFetch), stamped at ``stamp_ms`` and its
    listed positions recorded at ``record_ms`` (the broker's shell reads its clock for each)."""
    code, session = s.sessions.open(2, s.sid, s.epoch, list(listed.items()), [])
    assert code == errors.NONE
    s.epoch += 1
    f = LeaderFetch(True, stamp_ms + 500.0, session.id)
    for tp in f.open_session(session, list(listed), []):
        s.state[tp][0].release_follower(2)
    for tp, pf in f.stamp(stamp_ms):      # the session's others looked at, as _Idle.fetch does
        assert f.unlisted(Part(tp, s.state[tp], pf), 2, *s.state[tp], stamp_ms)
    for tp, pf in listed.items():
        assert f.record(Part(tp, s.state[tp], pf), 2, *s.state[tp], record_ms).error == errors.NONE
    return f


def test_a_listed_partition_left_idle_is_bound_at_the_fetch_that_lists_it_with_the_times_it_recorded():
    s, twin = _Idle(), _Idle()
    tp = ("t", 1)
    f = _listing(s, {tp: PartitionFetch(5, 3, 3, 200, 5)}, 3000, 3004)   # listed again: nothing new for it
    repl, log = s.state[tp]
    assert f.pending == [] and f.parts() == [] and repl.remotes[2].bound
    assert [p.tp for p in f.waits_on()] == [tp]       # a shell parking per partition parks it there, as pending
    assert f.waits(_same, arriving=True) and f.waits(_same)                 # parked: it waits as a pending one
    trepl, tlog = twin.state[tp]                                            # the twin records it, unbound
    trepl.on_follower_fetch(2, 5, 3, 3, tlog, 3004)
    assert repl.remotes[2] == trepl.remotes[2] and repl.remotes[2].last_fetch_ms == 3004   # its own, not 3000
    f2, looked = s.idle(3500)
    assert looked == [] and repl.remotes[2].bound
    assert trepl.on_idle_follower_fetch(2, 5, 3, 5, 3500)
    assert repl.remotes[2] == trepl.remotes[2] and repl.remotes[2].last_caught_up_ms == 3500


def test_a_listed_partition_is_not_bound_when_the_follower_lacks_the_hw_or_the_clock_stepped_back():
    s = _Idle()
    f = _listing(s, {("t", 0): PartitionFetch(5, 3, 3, 200, 4)}, 3000, 3000)  # the follower's HW is behind
    assert [p.tp for p in f.pending] == [("t", 0)] and not s.state[("t", 0)][0].remotes[2].bound
    f = _listing(s, {("t", 1): PartitionFetch(5, 3, 3, 300, 5)}, 3100, 2900)  # recorded before the stamp's time
    assert [p.tp for p in f.pending] == [("t", 1)] and not s.state[("t", 1)][0].remotes[2].bound
    assert not s.state[("t", 0)][0].remotes[2].bound     # that fetch looked at (t, 0): still without the HW
    f, looked = s.idle(3200)
    assert looked == [("t", 0), ("t", 1)]                                    # looked at by the next fetch


def test_a_listed_partition_bound_at_record_and_touched_in_the_wait_is_answered_in_its_listed_place():
    s = _Idle()
    f = _listing(s, {("t", 3): PartitionFetch(5, 3, 3, 200, 5), ("t", 0): PartitionFetch(5, 3, 3, 200, 4)},
                 3000, 3000)
    assert [p.tp for p in f.pending] == [("t", 0)] and f.waits(_same, arriving=True)   # (t, 3) bound
    repl, log = s.state[("t", 3)]
    log.leo = 6
    repl.on_leader_append(log, 3100)                 # an append to (t, 3) touches it: records to send
    assert not f.waits(_same) and not f.still_waits(s.state[("t", 3)], repl, log)
    assert [p.tp for p in f.parts()] == [("t", 3), ("t", 0)]       # the order the request listed them in
    assert [p.tp for p in f.waits_on()] == [("t", 3), ("t", 0)]    # parked on both, as on two pending ones
    assert not f.touches(s.state[("t", 3)])          # a listed one: the fetch is parked on it, not on the clock
    assert [f.answer(p, *s.state[p.tp]) for p in f.parts()] == [errors.NONE, errors.NONE]
    f2, looked = s.idle(3200)
    assert looked == [("t", 0), ("t", 3)]            # the next fetch looks at both again
