"""RemoteReplica.record_fetch: the same fetch state as writing each field through its setters (Kafka 2.8's
Replica.updateFetchState), bound to a session's clock or not."""
import itertools

from replication.remote_replica import FetchClock, RemoteReplica


def _by_setters(rep: RemoteReplica, fetch_offset: int, leader_leo: int, now_ms: int) -> None:
    if fetch_offset >= leader_leo:
        rep.last_caught_up_ms = max(rep.last_caught_up_ms, now_ms)
    elif fetch_offset >= rep.last_fetch_leader_leo:
        rep.last_caught_up_ms = max(rep.last_caught_up_ms, rep.last_fetch_ms)
    rep.last_fetch_leader_leo, rep.last_fetch_ms = leader_leo, now_ms
    rep.log_end_offset = fetch_offset


def _replica(bound: bool, caught_up: int, clock_ms: int) -> tuple[RemoteReplica, FetchClock]:
    rep = RemoteReplica(log_end_offset=5, last_caught_up_ms=caught_up, last_fetch_leader_leo=5, last_fetch_ms=90)
    clock = FetchClock()
    if bound:
        clock.stamp(clock_ms)
        rep.bind(clock, ("t", 0))
    return rep, clock


def test_record_fetch_matches_the_setters() -> None:
    for bound, caught_up, clock_ms, fetch_offset, leader_leo, now in itertools.product(
            (False, True), (50, 120), (80, 150), (3, 5, 7), (5, 7), (100, 200)):
        a, ca = _replica(bound, caught_up, clock_ms)
        b, cb = _replica(bound, caught_up, clock_ms)
        a.record_fetch(fetch_offset, leader_leo, now)
        _by_setters(b, fetch_offset, leader_leo, now)
        assert a == b and not a.bound and not b.bound
        assert ca.inbox == cb.inbox == ([("t", 0)] if bound else [])
