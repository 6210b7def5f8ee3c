"""Kafka's incremental fetch sessions (KIP-227), between a follower's fetcher and a leader broker.

A follower's first request is *full*: every partition it fetches from that
leader, with ``session_id`` 0 and ``session_epoch`` 0.  The leader keeps them
as a session (one per follower broker: each has one fetcher per leader) and
answers with the session's id.  Every later request is *incremental*: the
same id, the next epoch (1, 2, ...), and only the partitions whose fetch
state changed since the follower last sent them (its LEO, last fetched
epoch, leader epoch or HW), plus the ones it stopped fetching
(``forgotten``).  The leader treats every partition of the session as
fetched again: a partition the follower did not list is fetched at the
offset it last listed.  An unknown id answers FETCH_SESSION_ID_NOT_FOUND
(70) and a wrong epoch INVALID_FETCH_SESSION_EPOCH (71); the follower then
starts over with a full request, as it does after any failed call (it cannot
know whether the leader saw it).  ``session_epoch`` -1 with id 0 is a fetch
without a session (a consumer's).

An idle follower of 1,000 partitions therefore sends a request of a few
entries, and the leader does for each partition it did not list only the
bookkeeping a fetch at the log end needs
(``replication.partition.PartitionReplication.on_idle_follower_fetch``), and
for one with nothing new not even that: it is bound to the session's fetch
clock until something touches it (``replication.remote_replica``,
``replication.long_poll.LeaderFetch``).

Both sides here are plain objects, and so are the rules of which partitions
a parked fetch waits for (:func:`readable`) and which go into an answer
(:func:`has_news`); the replica manager and the fetcher own the locks and the
calls, and ``node/net/wire.py`` the wire messages.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, NamedTuple

from kafkacommon import errors
from replication.remote_replica import FetchClock

TP = tuple[str, int]
NO_SESSION = 0
FULL_EPOCH = 0        # session_id 0 + epoch 0: a full request that opens a session
SESSIONLESS_EPOCH = -1  # session_id 0 + epoch -1: a full request, no session kept


class PartitionFetch(NamedTuple):
    """What a follower last said about one partition: where it fetches from and what it has."""

    fetch_offset: int
    last_fetched_epoch: int
    current_leader_epoch: int
    max_bytes: int
    follower_high_watermark: int
    log_start_offset: int = -1     # the follower's own (-1: not known): the leader's low watermark counts it


def readable(fetch_offset: int, log_end_offset: int, high_watermark: int, is_leader: bool, follower: bool) -> bool:
    """Whether a parked fetch of one partition can be answered now: there is something to read past
    ``fetch_offset`` (a follower reads up to the LEO, a consumer up to the HW), or this broker no
    longer leads the partition."""
    return (log_end_offset if follower else high_watermark) > fetch_offset or not is_leader


def has_news(pf: PartitionFetch, log_end_offset: int, high_watermark: int, is_leader: bool,
             log_start_offset: int = -1) -> bool:
    """Whether a partition of a follower's session goes into the answer (KIP-227): the log end is not
    where the follower fetches from (records to send), the HW is not the one it has, this broker
    no longer leads the partition, or its log start offset (``log_start_offset``) is past the follower's
    (DeleteRecords moved it: Kafka's session answers a partition whose log start moved).  Otherwise it is
    left out, for the follower has it all."""
    return (log_end_offset != pf.fetch_offset or high_watermark != pf.follower_high_watermark or not is_leader
            or 0 <= pf.log_start_offset < log_start_offset)


@dataclass
class LeaderSession:
    """One follower's session at the leader.  Besides the partitions and where it fetches them, what makes
    an idle fetch cost only its partitions that changed (``replication.long_poll.LeaderFetch``): the
    session's :class:`~replication.remote_replica.FetchClock`, the partitions bound to it (``bound``:
    tp -> (its place in ``partitions``, the fetch's part); written only by the session's fetches, each
    a new dict), the others to look at on the next fetch (``dirty``), and each partition's place in
    ``partitions`` (``order``: answers keep the session's order)."""
    id: int
    replica_id: int
    epoch: int                               # the epoch the next incremental request must carry
    partitions: dict[TP, PartitionFetch]
    clock: FetchClock = field(default_factory=FetchClock)
    bound: dict[TP, tuple[int, Any]] = field(default_factory=dict)
    dirty: set[TP] = field(default_factory=set)
    order: dict[TP, int] = field(default_factory=dict)
    _next_order: int = 0

    def __post_init__(self) -> None:
        self.dirty = set(self.partitions)
        self._place(self.partitions)

    def _place(self, tps: Iterable[TP]) -> None:
        order, n = self.order, self._next_order
        for tp in tps:
            if tp not in order:
                order[tp] = n
                n += 1
        self._next_order = n

    def update(self, listed: Iterable[tuple[TP, PartitionFetch]], forgotten: Iterable[TP]) -> None:
        """An incremental request's partitions: the forgotten ones go, the listed ones are set (a new one
        at the end, as a dict keeps them)."""
        parts, order, dirty = self.partitions, self.order, self.dirty
        for tp in forgotten:
            if parts.pop(tp, None) is not None:
                order.pop(tp, None)
            dirty.discard(tp)
        listed = list(listed)
        parts.update(listed)
        self._place(tp for tp, _pf in listed)


class LeaderSessions:
    """The leader's sessions, one per follower broker.  ``first_id`` seeds the ids (an id from a
    previous incarnation of this broker must not match a new session): the shell passes its clock."""

    def __init__(self, first_id: int) -> None:
        self._next_id = max(1, first_id & 0x7FFFFFFF)
        self._by_replica: dict[int, LeaderSession] = {}

    def _new_id(self) -> int:
        sid = self._next_id
        self._next_id = sid + 1 if sid < 0x7FFFFFFF else 1
        return sid

    def open(self, replica_id: int, session_id: int, session_epoch: int,
             listed: Iterable[tuple[TP, PartitionFetch]], forgotten: Iterable[TP]) -> tuple[int, LeaderSession | None]:
        """Take one follower request's session fields: (error, session).  A full request replaces the
        follower's session; an incremental one must name it and carry its next epoch, and updates it.
        (NONE, None) for a sessionless request."""
        if session_id == NO_SESSION:
            if session_epoch != FULL_EPOCH:
                self._by_replica.pop(replica_id, None)
                return errors.NONE, None
            s = self._by_replica[replica_id] = LeaderSession(self._new_id(), replica_id, 1, dict(listed))
            return errors.NONE, s
        s = self._by_replica.get(replica_id)
        if s is None or s.id != session_id:
            return errors.FETCH_SESSION_ID_NOT_FOUND, None
        if session_epoch != s.epoch:
            del self._by_replica[replica_id]  # the follower starts over with a full request
            return errors.INVALID_FETCH_SESSION_EPOCH, None
        s.epoch += 1
        s.update(listed, forgotten)
        return errors.NONE, s

    def get(self, replica_id: int) -> LeaderSession | None:
        return self._by_replica.get(replica_id)

    def close(self, replica_id: int) -> None:
        self._by_replica.pop(replica_id, None)


class FollowerSession:
    """The fetcher's side: what the leader's session holds, and so what the next request must list."""

    def __init__(self) -> None:
        self.id = NO_SESSION
        self.epoch = FULL_EPOCH
        self.sent: dict[TP, PartitionFetch] = {}   # as the leader's session has it

    def reset(self) -> None:
        """Start over with a full request (after an error, a cut poll, or a session error)."""
        self.id, self.epoch, self.sent = NO_SESSION, FULL_EPOCH, {}

    def request(self, current: dict[TP, PartitionFetch]) -> tuple[int, int, list[TP], list[TP]]:
        """(session id, epoch, partitions to list, partitions forgotten) for a request about ``current``."""
        if self.id == NO_SESSION:
            return NO_SESSION, FULL_EPOCH, list(current), []
        get = self.sent.get
        listed = [tp for tp, pf in current.items() if (was := get(tp)) is not pf and was != pf]
        sent = self.sent
        forgotten = [tp for tp in sent if tp not in current]
        return self.id, self.epoch, listed, forgotten

    def request_moved(self, current: dict[TP, PartitionFetch], moved: list[TP]) -> tuple[int, int, list[TP]]:
        """:meth:`request` when the session holds every partition of ``current`` and only those in ``moved`` (in
        ``current``'s order) may differ from it: (session id, epoch, partitions to list); none is forgotten."""
        if self.id == NO_SESSION:
            return NO_SESSION, FULL_EPOCH, list(current)
        get = self.sent.get
        return self.id, self.epoch, [tp for tp in moved if (was := get(tp)) is not (pf := current[tp]) and was != pf]

    def answered(self, session_id: int, listed: dict[TP, PartitionFetch], forgotten: list[TP]) -> None:
        """The leader took the request (its answer carried ``session_id``)."""
        if self.id == NO_SESSION:
            self.id, self.epoch, self.sent = session_id, 1, dict(listed)
            return
        self.epoch += 1
        for tp in forgotten:
            self.sent.pop(tp, None)
        self.sent.update(listed)
