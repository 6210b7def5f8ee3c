"""Incremental fetch sessions (KIP-227): the two sides' bookkeeping, and a leader's ReplicaManager
answering a session's requests (real logs on disk, no cluster)."""
from __future__ import annotations

from pathlib import Path

from kafkacommon import errors
from replication.broker_state import PartitionInfo
from node.replicas.replica_manager import ReplicaManager
from proto import kafkasim_pb2 as pb
from replication.fetch_session import (FULL_EPOCH, NO_SESSION, SESSIONLESS_EPOCH, FollowerSession, LeaderSessions,
                                       PartitionFetch)

from test_replica_manager import info, manager


def pf(offset: int, hw: int = 0, epoch: int = 0) -> PartitionFetch:
    return PartitionFetch(offset, 0 if offset else -1, epoch, 1 << 20, hw)


A, B, C = ("t", 0), ("t", 1), ("t", 2)


# ---------------------------------------------------------------------- the leader's sessions

def test_a_full_request_opens_a_session_that_incremental_requests_update():
    s = LeaderSessions(first_id=41)
    code, full = s.open(2, NO_SESSION, FULL_EPOCH, [(A, pf(0)), (B, pf(0))], [])
    assert code == errors.NONE and full.id == 41 and full.epoch == 1
    assert full.partitions == {A: pf(0), B: pf(0)}
    code, inc = s.open(2, 41, 1, [(B, pf(3)), (C, pf(0))], [A])
    assert code == errors.NONE and inc is full and inc.epoch == 2
    assert inc.partitions == {B: pf(3), C: pf(0)}
    # another follower's session is its own, with another id
    code, other = s.open(3, NO_SESSION, FULL_EPOCH, [(A, pf(0))], [])
    assert other.id == 42 and s.get(2) is full


def test_an_unknown_session_or_a_wrong_epoch_is_refused():
    s = LeaderSessions(first_id=7)
    assert s.open(2, 7, 1, [], []) == (errors.FETCH_SESSION_ID_NOT_FOUND, None)
    _, sess = s.open(2, NO_SESSION, FULL_EPOCH, [(A, pf(0))], [])
    assert s.open(2, sess.id + 1, 1, [], []) == (errors.FETCH_SESSION_ID_NOT_FOUND, None)
    assert s.open(3, sess.id, 1, [], []) == (errors.FETCH_SESSION_ID_NOT_FOUND, None)  # not this follower's
    assert s.get(2) is sess
    # a repeated (or lost-then-retried) epoch ends the session: the follower starts over
    assert s.open(2, sess.id, 1, [], [])[0] == errors.NONE
    assert s.open(2, sess.id, 1, [], []) == (errors.INVALID_FETCH_SESSION_EPOCH, None)
    assert s.get(2) is None


def test_a_new_full_request_replaces_the_session_and_a_sessionless_one_drops_it():
    s = LeaderSessions(first_id=1)
    _, first = s.open(2, NO_SESSION, FULL_EPOCH, [(A, pf(0))], [])
    _, second = s.open(2, NO_SESSION, FULL_EPOCH, [(B, pf(0))], [])
    assert second.id != first.id and s.get(2) is second and second.partitions == {B: pf(0)}
    assert s.open(2, first.id, 1, [], [])[0] == errors.FETCH_SESSION_ID_NOT_FOUND
    assert s.open(2, NO_SESSION, SESSIONLESS_EPOCH, [(A, pf(0))], []) == (errors.NONE, None)
    assert s.get(2) is None


def test_ids_wrap_within_int32_and_are_never_0():
    s = LeaderSessions(first_id=0x7FFFFFFF)
    assert [s.open(b, NO_SESSION, FULL_EPOCH, [], [])[1].id for b in (1, 2)] == [0x7FFFFFFF, 1]
    assert LeaderSessions(first_id=0).open(1, NO_SESSION, FULL_EPOCH, [], [])[1].id == 1


# ---------------------------------------------------------------------- the follower's side

def test_the_follower_lists_everything_first_then_only_what_changed():
    f = FollowerSession()
    assert f.request({A: pf(0), B: pf(0)}) == (NO_SESSION, FULL_EPOCH, [A, B], [])
    f.answered(9, {A: pf(0), B: pf(0)}, [])
    assert f.request({A: pf(0), B: pf(0)}) == (9, 1, [], [])            # nothing changed: an empty poll
    assert f.request({A: pf(5), B: pf(0, hw=2), C: pf(0)}) == (9, 1, [A, B, C], [])
    f.answered(9, {A: pf(5)}, [])
    assert f.request({A: pf(5)}) == (9, 2, [], [B])                      # B no longer fetched here
    f.answered(9, {}, [B])
    assert f.sent == {A: pf(5)} and f.epoch == 3
    f.reset()
    assert f.request({A: pf(5)}) == (NO_SESSION, FULL_EPOCH, [A], [])


# ---------------------------------------------------------------------- a leader answering a session

def fetch(rm: ReplicaManager, session_id: int, epoch: int, listed: dict, forgotten=(),
          log_start: int = 0) -> pb.FetchResponse:
    """Follower 2's fetch, without waiting: listed = {tp: (fetch offset, the follower's HW)}, each with the
    follower's log start offset ``log_start``."""
    return rm.fetch(pb.FetchRequest(
        replica_id=2, replica_epoch=7, max_wait_ms=0, session_id=session_id, session_epoch=epoch,
        partitions=[pb.FetchPartition(topic=t, partition=p, fetch_offset=off, last_fetched_epoch=0 if off else -1,
                                      current_leader_epoch=0, max_bytes=1 << 20, follower_high_watermark=hw,
                                      log_start_offset=log_start)
                    for (t, p), (off, hw) in listed.items()],
        forgotten=[pb.TopicPartition(topic=t, partition=p) for t, p in forgotten]))


def answered(r: pb.FetchResponse) -> dict:
    assert r.error_code == errors.NONE
    return {(a.topic, a.partition): a for a in r.partitions}


def test_a_leader_answers_the_partitions_of_a_session_that_were_not_listed(tmp_path: Path):
    rm = manager(tmp_path, lambda t: {})
    try:
        rm.apply_leader_and_isrs([info("t", p, 1) for p in range(3)])
        full = fetch(rm, NO_SESSION, FULL_EPOCH, {A: (0, 0), B: (0, 0), C: (0, 0)})
        assert answered(full) == {} and full.session_id > 0
        sid = full.session_id
        assert answered(fetch(rm, sid, 1, {})) == {}                           # idle: nothing to say
        assert rm.append(B, [(b"k", b"v", None)], 1, 1000, lambda e: None) == (0, 0, 0)
        got = answered(fetch(rm, sid, 2, {}))                                  # B was not listed ...
        assert set(got) == {B} and got[B].records and got[B].high_watermark == 0  # ... its records come
        # the follower has them and lists B at its new offset: the leader's HW moves to 1
        got = answered(fetch(rm, sid, 3, {B: (1, 0)}))
        assert set(got) == {B} and got[B].high_watermark == 1 and not got[B].records
        got = answered(fetch(rm, sid, 4, {}))                                  # B still has HW news: the
        assert set(got) == {B} and got[B].high_watermark == 1                  # session holds HW 0 for it
        assert answered(fetch(rm, sid, 5, {B: (1, 1)})) == {}
        assert answered(fetch(rm, sid, 6, {})) == {}
        # a forgotten partition is no longer fetched, news or not
        rm.append(A, [(b"k", b"v", None)], 1, 1000, lambda e: None)
        assert answered(fetch(rm, sid, 7, {}, forgotten=[A])) == {}
    finally:
        rm.close()


def test_an_idle_session_keeps_the_follower_caught_up(tmp_path: Path):
    """The partitions the follower does not list count as fetched at the log end: its last
    caught-up time moves with every request, as with a full fetch."""
    rm = manager(tmp_path, lambda t: {})
    try:
        rm.apply_leader_and_isrs([info("t", p, 1) for p in range(2)])
        sid = fetch(rm, NO_SESSION, FULL_EPOCH, {A: (0, 0), B: (0, 0)}).session_id
        before = rm.hosted[A].repl.remotes[2].last_caught_up_ms
        n, epoch = 0, 1
        while rm.hosted[A].repl.remotes[2].last_caught_up_ms == before:   # the ms clock ticks between calls
            answered(fetch(rm, sid, epoch, {}))
            epoch, n = epoch + 1, n + 1
            assert n < 100_000
        assert rm.hosted[B].repl.remotes[2].last_caught_up_ms > before
    finally:
        rm.close()


def test_a_leader_refuses_an_unknown_session_and_a_wrong_epoch(tmp_path: Path):
    rm = manager(tmp_path, lambda t: {})
    try:
        rm.apply_leader_and_isrs([info("t", 0, 1)])
        assert fetch(rm, 12345, 1, {}).error_code == errors.FETCH_SESSION_ID_NOT_FOUND
        sid = fetch(rm, NO_SESSION, FULL_EPOCH, {A: (0, 0)}).session_id
        assert fetch(rm, sid, 2, {}).error_code == errors.INVALID_FETCH_SESSION_EPOCH
        assert fetch(rm, sid, 1, {}).error_code == errors.FETCH_SESSION_ID_NOT_FOUND  # it ended
    finally:
        rm.close()


def test_a_session_partition_whose_leadership_moved_gets_an_error(tmp_path: Path):
    rm = manager(tmp_path, lambda t: {})
    try:
        rm.apply_leader_and_isrs([info("t", p, 1) for p in range(2)])
        sid = fetch(rm, NO_SESSION, FULL_EPOCH, {A: (0, 0), B: (0, 0)}).session_id
        rm.apply_leader_and_isrs([PartitionInfo("t", 1, 2, 1, (1, 2), (1, 2), 1, 1)])   # broker 2 now leads B
        got = answered(fetch(rm, sid, 1, {}))
        assert set(got) == {B} and got[B].error_code == errors.NOT_LEADER_OR_FOLLOWER
    finally:
        rm.close()


def test_a_parked_fetch_is_readable_past_its_offset_or_when_the_leadership_is_gone():
    from replication.fetch_session import readable
    assert readable(10, 11, 10, True, follower=True) and not readable(10, 11, 10, True, follower=False)
    assert readable(10, 11, 11, True, follower=False)
    assert not readable(10, 10, 10, True, follower=True)
    assert readable(10, 10, 10, False, follower=True)


def test_a_session_partition_has_news_for_records_a_new_hw_or_a_lost_leadership():
    from replication.fetch_session import has_news
    pf = PartitionFetch(10, 3, 4, 1 << 20, 8)
    assert not has_news(pf, 10, 8, True), "at the log end with the leader's HW: left out"
    assert has_news(pf, 11, 8, True) and has_news(pf, 10, 9, True) and has_news(pf, 10, 8, False)
    # the leader's log start offset past the follower's (DeleteRecords moved it): news; behind it or unknown: none
    moved = PartitionFetch(10, 3, 4, 1 << 20, 8, log_start_offset=2)
    assert has_news(moved, 10, 8, True, log_start_offset=5) and not has_news(moved, 10, 8, True, log_start_offset=2)
    assert not has_news(moved, 10, 8, True, log_start_offset=1) and not has_news(pf, 10, 8, True, log_start_offset=5)


def test_delete_records_on_the_leader_and_the_low_watermark_through_the_session(tmp_path: Path):
    """DeleteRecords on a leader's ReplicaManager (real logs): the checks in Kafka 2.8's order, the log start
    offset moved, and the low watermark reached once the follower's fetch (in its session) reports its own."""
    configs = {"t": {}, "c": {"cleanup.policy": "compact"}}
    rm = manager(tmp_path, lambda t: configs[t])
    try:
        rm.apply_leader_and_isrs([info("t", 0, 1), info("t", 1, 2), info("c", 0, 1)])
        for _ in range(4):
            rm.append(A, [(b"k", b"v", None)], 1, 1000, lambda e: None)
        sid = fetch(rm, NO_SESSION, FULL_EPOCH, {A: (4, 0)}).session_id   # the follower has all 4: HW 4
        assert rm.hosted[A].repl.high_watermark == 4
        assert rm.delete_records(("t", 1), 0)[0] == errors.NOT_LEADER_OR_FOLLOWER
        assert rm.delete_records(("c", 0), 0)[0] == errors.POLICY_VIOLATION
        assert rm.delete_records(("__consumer_offsets", 0), 0)[0] == errors.INVALID_TOPIC_EXCEPTION
        assert rm.delete_records(A, 5)[0] == errors.OFFSET_OUT_OF_RANGE and rm.delete_records(A, -2)[0] == 1
        code, start, low = rm.delete_records(A, 3)
        assert (code, start, rm.log_start_offset(A)) == (errors.NONE, 3, 3) and low == 0   # follower: 0 still
        # the session answers the moved log start (nothing else changed), the follower takes it and says so
        got = answered(fetch(rm, sid, 1, {}))
        assert set(got) == {A} and got[A].log_start_offset == 3
        fetch(rm, sid, 2, {A: (4, 4)}, log_start=3)
        assert rm.low_watermark(A) == (errors.NONE, 3)
        assert rm.delete_records(A, -1)[:2] == (errors.NONE, 4)   # -1: up to the high watermark
    finally:
        rm.close()
