"""Opening a partition's log directory (Kafka's log loading, ``LogLoader`` in later versions): the files a crash
or an unfinished operation left are settled, then the segments are opened and the active one recovered.

* :func:`complete_swaps` — ``.deleted`` segments (retention's, waiting out ``file.delete.delay.ms``) and
  ``.cleaned`` files (an unfinished clean) are removed, and an interrupted ``.swap`` is finished.
* :func:`load_segments` — every segment opened in base-offset order, leftovers (``.tmp`` checkpoints, indexes
  without their ``.log``) removed, the active segment recovered (a torn or corrupt tail cut), and the
  :class:`RecoveryReport`.

Used by :class:`node.storage.log.PartitionLog` when it opens; an ``OSError`` here is the log's I/O error
(its directory goes offline), raised to it as is.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import StorageError
from .segment import (CLEANED_SUFFIX, DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX, TIME_INDEX_SUFFIX,
                      LogSegment, fsync_dir, parse_segment_base)


@dataclass(frozen=True)
class RecoveryReport:
    """What opening the log found: bytes and batches cut from torn/corrupt tails, and the LEO."""

    truncated_bytes: int
    dropped_batches: int
    log_end_offset: int


def complete_swaps(directory: Path, index_interval_bytes: int, pending_swap: tuple[int, int] | None) -> set[int]:
    """Undo an unfinished clean (``.cleaned`` files) and finish an interrupted swap.

    A ``<base>.log.swap`` file is a whole cleaned segment (it is renamed from
    ``.cleaned`` only after being flushed): it replaces every segment whose base
    offset lies in [base, end), ``end`` coming from the pending-swap entry the
    cleaner wrote before the rename (``pending_swap``, or, failing that, the swap
    segment's own next offset, Kafka's rule).  Returns the base offsets swapped in;
    the caller then clears the cleaner's pending swap.
    """
    names = os.listdir(directory)
    for name in names:   # segments retention had deleted, still waiting out file.delete.delay.ms
        if name.endswith(DELETED_SUFFIX):
            (directory / name).unlink()
    names = [n for n in names if not n.endswith(DELETED_SUFFIX)]
    swaps = sorted(b for n in names if n.endswith(LOG_SUFFIX + SWAP_SUFFIX)
                   and (b := parse_segment_base(n[:-len(SWAP_SUFFIX)])) is not None)
    for name in names:
        stem = name.split(".")[0]
        if name.endswith(CLEANED_SUFFIX) or (name.endswith(SWAP_SUFFIX) and stem.isdigit()
                                              and int(stem) not in swaps):
            (directory / name).unlink()
    for base in swaps:
        if pending_swap is not None and pending_swap[0] == base:
            end = pending_swap[1]
        else:
            seg = LogSegment.open(directory, base, index_interval_bytes, recover=True, file_suffix=SWAP_SUFFIX)
            end = max(seg.next_offset, base + 1)
            seg.close()
        for name in os.listdir(directory):
            old = parse_segment_base(name)
            if old is not None and base <= old < end:
                for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                    (directory / f"{name[:20]}{suffix}").unlink(missing_ok=True)
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX):
            src = directory / f"{base:020d}{suffix}{SWAP_SUFFIX}"
            if src.exists():
                os.replace(src, directory / f"{base:020d}{suffix}")
        fsync_dir(directory)
    return set(swaps)


def load_segments(directory: Path, swapped: set[int],
                  index_interval_bytes: int) -> tuple[list[LogSegment], RecoveryReport]:
    """Open every segment (those in ``swapped`` and the active one recovered; a new empty one at offset 0 in
    an empty directory) and report what recovery cut."""
    bases: list[int] = []
    for name in os.listdir(directory):
        base = parse_segment_base(name)
        if base is not None:
            bases.append(base)
        elif name.endswith(".tmp"):
            (directory / name).unlink()  # an interrupted checkpoint write
    bases.sort()
    for name in os.listdir(directory):  # indexes left behind by a deleted segment
        stem = name.split(".")[0]
        if name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX)) and stem.isdigit() and int(stem) not in bases:
            (directory / name).unlink()
    if not bases:   # a new log: its first, empty segment (no directory fsync: nothing in it to lose, as Kafka 2.8)
        return [LogSegment.create(directory, 0, index_interval_bytes, sync_dir=False)], RecoveryReport(0, 0, 0)
    segments = [LogSegment.open(directory, b, index_interval_bytes, recover=b in swapped) for b in bases[:-1]]
    segments.append(LogSegment.open(directory, bases[-1], index_interval_bytes, recover=True))
    for prev, seg in zip(segments, segments[1:]):
        if prev.next_offset > seg.base_offset:
            raise StorageError(f"{prev} overlaps {seg} in {directory}")
    recovered = [s for s in segments if s.recovery is not None]
    return segments, RecoveryReport(
        truncated_bytes=sum(s.recovery[1] for s in recovered if s.recovery),
        dropped_batches=sum(s.last_dropped_batches for s in recovered),
        log_end_offset=segments[-1].next_offset)
