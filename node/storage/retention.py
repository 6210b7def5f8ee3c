"""Kafka 2.8's segment rules as pure functions: when to roll a segment, which segments retention deletes.

No I/O and no clock: the caller passes segment metadata and ``now_ms``, so a
simulator can run the same rules.  The shell (``PartitionLog`` for rolls,
``node/replicas/housekeeping.py`` for retention) carries out the answer.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

__all__ = ["SegmentInfo", "RetentionDecision", "should_roll", "retention_decision"]


def should_roll(*, size: int, batch_bytes: int, segment_bytes: int, first_batch_timestamp: int,
                batch_max_timestamp: int, created_ms: int | None, now_ms: int | None, segment_ms: int,
                jitter_ms: int = 0) -> bool:
    """Kafka's ``LogSegment.shouldRoll`` (without its index-full and offset-overflow checks, which the
    caller makes): the batch would take the segment past ``segment_bytes``, or the segment is not
    empty and has waited more than ``segment_ms - jitter_ms`` to roll.

    The wait is the new batch's max timestamp minus the segment's first batch's max timestamp when
    that is >= 0, else ``now_ms - created_ms`` (unknown, None: no roll on age)."""
    if size > segment_bytes - batch_bytes:
        return True
    if size == 0:
        return False
    if first_batch_timestamp >= 0:
        waited = batch_max_timestamp - first_batch_timestamp
    elif created_ms is not None and now_ms is not None:
        waited = now_ms - created_ms
    else:
        return False
    return waited > segment_ms - jitter_ms


@dataclass(frozen=True)
class SegmentInfo:
    """What retention needs of one segment: its base offset, size in bytes and largest timestamp
    (Kafka's ``largestTimestamp``: the max record timestamp, or the file's mtime when it has none)."""

    base_offset: int
    size: int
    largest_timestamp: int


@dataclass(frozen=True)
class RetentionDecision:
    """Delete the ``count`` oldest segments (``reasons``: why, one per rule that deleted some);
    ``log_start_offset`` is the log start offset after that (the LEO when every segment goes:
    the caller then rolls an empty segment there first, as Kafka does)."""

    count: int
    reasons: tuple[str, ...]
    log_start_offset: int


def retention_decision(segments: Sequence[SegmentInfo], *, log_start_offset: int, log_end_offset: int,
                       high_watermark: int, now_ms: int, retention_ms: int, retention_bytes: int,
                       delete_policy: bool) -> RetentionDecision:
    """Kafka 2.8's ``Log.deleteOldSegments``, as one decision over the segments oldest first.

    With the ``delete`` policy: ``retention.ms`` (``now - largestTimestamp > retention.ms``), then
    ``retention.bytes`` (oldest first while the log stays at least ``retention.bytes`` after the
    deletion), then the log start offset (a segment whose successor starts at or below it); without
    it only the last rule.  Each rule deletes a prefix and stops at the first segment it keeps, and
    only at a segment whose upper bound (the next segment's base offset, or the LEO for the last one)
    is at or below the high watermark; a last segment that is empty is never deleted.
    """
    segs = list(segments)
    done = 0
    reasons: list[str] = []

    def prefix(rule) -> int:
        n = 0
        for i in range(done, len(segs)):
            last = i == len(segs) - 1
            upper = log_end_offset if last else segs[i + 1].base_offset
            if last and segs[i].size == 0:
                break
            if high_watermark < upper or not rule(segs[i], None if last else segs[i + 1]):
                break
            n += 1
        return n

    def apply(rule, reason: str) -> None:
        nonlocal done
        n = prefix(rule)
        if n:
            done += n
            reasons.append(reason)

    if delete_policy:
        if retention_ms >= 0:
            apply(lambda s, _n: now_ms - s.largest_timestamp > retention_ms, "retention_ms")
        if retention_bytes >= 0:
            diff = sum(s.size for s in segs[done:]) - retention_bytes
            if diff >= 0:  # Kafka: nothing when size < retention.bytes

                def by_size(s: SegmentInfo, _n) -> bool:
                    nonlocal diff
                    if diff - s.size >= 0:
                        diff -= s.size
                        return True
                    return False
                apply(by_size, "retention_bytes")
    apply(lambda _s, nxt: nxt is not None and nxt.base_offset <= log_start_offset, "log_start_offset")
    if done == 0:
        return RetentionDecision(0, (), log_start_offset)
    first = segs[done].base_offset if done < len(segs) else log_end_offset
    return RetentionDecision(done, tuple(reasons), max(log_start_offset, first))
