"""A follower's fetch loop towards one leader broker, sans-IO (Kafka 2.8's ReplicaFetcherThread, one per
source broker): what each request lists (the fetch session, ``replication.fetch_session``), what an answer
does to the session, and when the loop backs off.

Both the broker's fetcher thread (node/replicas/fetcher.py) and the simulator's fetcher (sim/fetching.py)
go round the same loop, doing only their own I/O (the call, the locks, the log's writes) between the steps:

1. :meth:`FetcherState.request` with the partitions assigned to this leader and ``now_ms``: each one's
   position is read (``position``) when it is new to the loop or given again, else kept from the last answer;
   a partition backing off after an error is left out; -> the request (None: nothing to fetch now;
   :meth:`FetcherState.ready_in_ms` says when a partition backing off may be fetched again);
2. the call; when it fails (no answer, a cut poll) :meth:`FetcherState.failed`: the next request is full;
3. :meth:`FetcherState.answered` with the answer's error and session id: False -> no partition is applied,
   and :func:`retry_at_once` says whether to fetch again at once or back off;
4. for each partition answered, :meth:`FetcherState.still_fetching` (the role may have changed while the
   request was out: then the answer is stale and the partition forgotten), ``replication.roles``'
   ``follower_fetch_answer`` and ``follower_moved`` around the shell's truncation or append, then
   :meth:`FetcherState.moved` with the new position; a partition whose answer is an error (its leader has not
   taken it up yet: NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH) goes to :meth:`FetcherState.backoff`;
5. fetch again at once: a partition backing off is left out of the requests for ``BACKOFF_MS`` while the
   others go on, as Kafka's AbstractFetcherThread delays only its partitions with errors (a new leader taking
   up a LeaderAndIsr of many partitions one by one would otherwise hold back the partitions it leads already,
   their HW and so their acks=all appends, by a backoff per partition it has not reached).  Only a failed call
   or a failed answer as a whole backs the loop off.  While a partition backs off, a request long-polls at most
   until its backoff ends (:meth:`FetcherState.poll_wait_ms`), so it is fetched again then.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from kafkacommon import errors
from replication.fetch_session import FollowerSession, PartitionFetch

TP = tuple[str, int]
BACKOFF_MS = 50    # after an error: the whole loop's, or one partition's (the broker's and the simulator's)


@dataclass(frozen=True)
class FetchRequest:
    """One request: the session's id and epoch, the partitions it lists (and what it says of each), those it
    forgets, and every partition it fetches (listed or not: the session's)."""
    session_id: int
    session_epoch: int
    listed: tuple[tuple[TP, PartitionFetch], ...]
    forgotten: tuple[TP, ...]
    current: Mapping[TP, PartitionFetch]
    parts: Mapping[TP, tuple[Any, int]]     # (the shell's handle, the leader epoch) of each, as assigned
    parts_given: Mapping[TP, tuple[Any, int]] | None = None   # the mapping the request was made for (not a copy)


def retry_at_once(error: int) -> bool:
    """After a failed answer: a session the leader no longer has (it restarted, or a request was lost) is
    started over with a full request at once; any other error backs off first."""
    return error in (errors.FETCH_SESSION_ID_NOT_FOUND, errors.INVALID_FETCH_SESSION_EPOCH)


class FetcherState:
    """One fetch loop's memory: the follower's session with the leader and each partition's last position.

    A request costs only what moved since the last one (issue 49) when nothing else changed: ``parts`` is
    the same object as the last request's (the caller never changes a mapping it passed: a new assignment is
    a new mapping), that request fetched every partition of it and its answer was taken (:meth:`answered`),
    no partition backs off and none was forgotten since.  Then only the partitions :meth:`moved` since may
    differ from what the leader's session holds; the request is the one a walk over every partition gives."""

    def __init__(self) -> None:
        self.session = FollowerSession()
        self._state: dict[TP, tuple[Any, int, PartitionFetch]] = {}   # tp -> (handle, leader epoch, position)
        # partitions whose last answer was an error: tp -> (fetch again from ms, the handle and epoch that failed)
        self._delayed: dict[TP, tuple[float, Any, int]] = {}
        self._last: FetchRequest | None = None     # the last request, when it fetched every partition of its parts
        self._synced = False       # its answer was taken: the leader's session holds its partitions as it said
        self._moved: list[TP] = []                 # partitions moved since it
        self._place: dict[TP, int] | None = None   # each partition's place in its ``current`` (made when needed)

    def request(self, parts: Mapping[TP, tuple[Any, int]],
                position: Callable[[TP, Any, int], PartitionFetch | None], now_ms: float) -> FetchRequest | None:
        """The next request for ``parts`` ({tp: (handle, leader epoch)} assigned to this leader).
        ``position(tp, handle, epoch)`` reads a partition's position, or None when it is no longer fetched
        from this leader in that epoch (left out).  A partition backing off (:meth:`backoff`) is left out
        until its backoff ends, unless it was given again (another handle or epoch) meanwhile."""
        last = self._last
        if last is not None and self._synced and parts is last.parts_given and not self._delayed:
            req = self._request_moved(last)
            if req is not None:
                return req
        self._last, self._synced, self._moved, self._place = None, False, [], None
        state, delayed = self._state, self._delayed
        for tp in [tp for tp in state if tp not in parts]:
            del state[tp]
        for tp in [tp for tp in delayed if tp not in parts]:
            del delayed[tp]
        current: dict[TP, PartitionFetch] = {}
        get_delay, get_known = delayed.get, state.get
        for tp, (h, epoch) in parts.items():
            if delayed:
                delay = get_delay(tp)
                if delay is not None:
                    if delay[0] > now_ms and delay[1] is h and delay[2] == epoch:
                        continue     # its last answer was an error: not before its backoff
                    del delayed[tp]
            known = get_known(tp)
            if known is None or known[0] is not h or known[1] != epoch:
                pf = position(tp, h, epoch)
                if pf is None:
                    continue
                known = state[tp] = (h, epoch, pf)
            current[tp] = known[2]
        if not current:
            return None
        session_id, session_epoch, listed, forgotten = self.session.request(current)
        req = FetchRequest(session_id, session_epoch, tuple((tp, current[tp]) for tp in listed), tuple(forgotten),
                           current, dict(parts), parts)
        if len(current) == len(parts):
            self._last = req
        return req

    def _request_moved(self, last: FetchRequest) -> FetchRequest | None:
        """:meth:`request` when only the partitions moved since ``last`` may have changed (the class's doc); None
        if one moved otherwise than ``last`` fetched it (the caller walks every partition)."""
        moved = self._moved
        current = dict(last.current)
        state, parts = self._state, last.parts
        for tp in moved:
            known, given = state.get(tp), parts.get(tp)
            if known is None or given is None or known[0] is not given[0] or known[1] != given[1]:
                return None
            current[tp] = known[2]
        self._moved, self._synced = [], False
        if len(moved) > 1:
            place = self._place
            if place is None:
                place = self._place = {tp: i for i, tp in enumerate(current)}
            moved = sorted(set(moved), key=place.__getitem__)
        session_id, session_epoch, listed = self.session.request_moved(current, moved)
        req = self._last = FetchRequest(session_id, session_epoch, tuple((tp, current[tp]) for tp in listed), (),
                                        current, last.parts, last.parts_given)
        return req

    def failed(self) -> None:
        """The call failed or was cut short: the leader may or may not have taken it, so start over."""
        self.session.reset()
        self._synced = False

    def answered(self, req: FetchRequest, error: int, session_id: int) -> bool:
        """The answer's top-level outcome: True -> apply its partitions; False -> the session starts over."""
        if error != errors.NONE:
            self.session.reset()
            self._synced = False
            return False
        self.session.answered(session_id, dict(req.listed), list(req.forgotten))
        self._synced = req is self._last
        return True

    def still_fetching(self, req: FetchRequest, tp: TP, fetching_from: tuple[int, int] | None, leader: int,
                       replica_open: bool = True) -> bool:
        """Whether an answered partition is still fetched as the request fetched it (else its answer is
        stale and the partition is read afresh next time)."""
        if tp in req.current and replica_open and fetching_from == (leader, req.parts[tp][1]):
            return True
        self._state.pop(tp, None)
        self._last = None
        return False

    def forget(self, tp: TP) -> None:
        """A partition whose answer could not be applied (its log directory went offline), or whose position moved
        otherwise than by an answer (the follower's retention moved its log start): read afresh when next given."""
        self._state.pop(tp, None)
        self._last = None

    def backoff(self, tp: TP, handle: Any, epoch: int, now_ms: float) -> None:
        """The partition's answer was an error (``replication.roles``' FAILED step): leave it out of the
        requests for ``BACKOFF_MS``; the others go on at once."""
        self._delayed[tp] = (now_ms + BACKOFF_MS, handle, epoch)

    def ready_in_ms(self, now_ms: float) -> float | None:
        """When :meth:`request` found nothing to fetch: how long until a partition backing off may be
        fetched again (None: none is backing off)."""
        if not self._delayed:
            return None
        return max(0.0, min(d[0] for d in self._delayed.values()) - now_ms)

    def poll_wait_ms(self, max_wait_ms: float, now_ms: float) -> float:
        """The longest the next request may long-poll at the leader: ``max_wait_ms``
        (``replica.fetch.wait.max.ms``), or less while a partition is backing off, so the poll ends when the first
        of them may be fetched again (a partition left out is not in the leader's session: nothing it gets would
        end the poll, and the new leader's HW, its acks=all writes, would wait out the rest of ``max_wait_ms``;
        docs/deviations.md, "A fetch with an error or a diverging epoch is answered at once")."""
        wait = self.ready_in_ms(now_ms)
        return max_wait_ms if wait is None else min(max_wait_ms, wait)

    def moved(self, tp: TP, handle: Any, epoch: int, pf: PartitionFetch) -> None:
        """The partition's position after its answer was applied."""
        self._state[tp] = (handle, epoch, pf)
        self._moved.append(tp)
