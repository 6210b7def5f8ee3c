"""A leader's long poll of a fetch with nothing new (Kafka 2.8's DelayedFetch), sans-IO.

Kafka's ReplicaManager.fetchMessages answers a fetch at once when one of its partitions has an
error or a diverging epoch (a follower must truncate before it fetches on), when it names no
partition, or when something is readable (``replica.fetch.min.bytes`` 1: any byte).  Otherwise the
fetch is parked (a DelayedFetch) until a partition becomes readable (records past the fetch offset:
up to the log end for a follower, the HW for a consumer), the broker stops leading one of its
partitions, the leader epoch moves past the one the fetch named, or ``max_wait_ms`` (``replica.fetch.wait.max.ms`` 500 for a follower) passes.  A moved
HW alone does not end a follower's wait: the follower learns it on its next fetch.

The follower's position is recorded once, when the fetch arrives (it may move the HW, complete
acks=all waiters and expand the ISR); the answer is read when the wait ends, each partition's error from :func:`answer_error`.  Both the broker's
fetch handler (node/replicas/leader_fetch.py: one fetch of many partitions, a fetch session's
unlisted partitions included) and the simulator's (sim/replicas.py: one partition per fetch) ask
:func:`waits` when the fetch arrives and again on every append, HW move or role change, and
:func:`deadline_ms` when to give up waiting; a follower's answer then leaves out the partitions
without news (``replication.fetch_session.has_news``).
"""
from __future__ import annotations

from typing import Iterable, NamedTuple

from kafkacommon import errors
from replication.fetch_session import readable


class Position(NamedTuple):
    """One partition of a fetch, as the wait sees it: where the fetcher reads from and in which leader
    epoch, and what the leader has now."""

    fetch_offset: int
    current_leader_epoch: int    # the epoch the fetch named (-1: none, an old fetch version)
    log_end_offset: int
    high_watermark: int
    leader_epoch: int
    is_leader: bool


def answer_error(p: Position) -> int:
    """The error a parked fetch's partition answers when its wait ends: NOT_LEADER_OR_FOLLOWER once this
    broker stopped leading it, FENCED_LEADER_EPOCH once a newer leader epoch began here (Kafka's
    DelayedFetch completes on both), else NONE (its records are read)."""
    if not p.is_leader:
        return errors.NOT_LEADER_OR_FOLLOWER
    if 0 <= p.current_leader_epoch < p.leader_epoch:
        return errors.FENCED_LEADER_EPOCH
    return errors.NONE


def waits(urgent: bool, positions: Iterable[Position], follower: bool) -> bool:
    """Whether the fetch is held (or still held): nothing ``urgent`` (an error or a diverging epoch
    already in the answer), some partition to wait on, none readable yet and none to answer with an
    error (:func:`answer_error`)."""
    if urgent:
        return False
    seen = False
    for p in positions:
        if readable(p.fetch_offset, p.log_end_offset, p.high_watermark, p.is_leader, follower) \
                or answer_error(p) != errors.NONE:
            return False
        seen = True
    return seen


def deadline_ms(now_ms: float, max_wait_ms: float) -> float:
    """When a parked fetch is answered whatever it has (a negative ``max_wait_ms`` waits not at all)."""
    return now_ms + max(max_wait_ms, 0)
