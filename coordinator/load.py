"""Loading an offsets partition into its coordinator (Kafka's doLoadGroupsAndOffsets), sans-IO.

The broker's coordinator shell and the simulator both call :func:`replay_log`:
read the partition from its log start to its LEO in chunks, keep the last
record per key, then replay those records in log order through
``core.replay``.  Transactional offset commits are held per producer until
their marker (a control batch): a COMMIT makes them records like the others
(each where it is the latest of its key), an ABORT drops them; those of
transactions still open are replayed as pending (``core.replay`` with their
producer).  Undecodable records are skipped and counted, never fatal; a
corrupt batch ends the read where it is.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, ContextManager

from coordinator.core import PartitionCoordinator
from coordinator.records import RecordFormatError
from kafkacommon.fastscan import scan_latest
from kafkacommon.record_batch import CorruptBatchError


@dataclass
class LoadStats:
    read: int = 0        # records read from the log
    records: int = 0     # records replayed (the last one of each key)
    skipped: int = 0
    bytes: int = 0
    end_offset: int = 0
    errors: list = None  # (offset or None, message): what the shell should log

    def __post_init__(self) -> None:
        if self.errors is None:
            self.errors = []


def replay_log(core: PartitionCoordinator, read: Callable[[int], tuple[bytes, int, int] | None],
               lock: ContextManager[Any] | None = None, stopping: Callable[[], bool] | None = None,
               end_offset: int | None = None) -> LoadStats:
    """``read(offset) -> (whole batches, log start, LEO)``, None once the replica is gone.  ``lock`` is held
    while replaying (the shell's core lock); ``stopping()`` True ends the read early.  ``end_offset`` stops
    the read there instead of at the LEO (only a planted bug passes one)."""
    stats = LoadStats()
    lock = lock if lock is not None else contextlib.nullcontext()
    latest: dict[bytes, tuple[int, bytes | None]] = {}  # key bytes -> (offset, value): last one wins
    pending: dict[int, dict[bytes, tuple[int, bytes | None]]] = {}   # producer id -> its open transaction's
    offset = 0
    while stopping is None or not stopping():
        if end_offset is not None and offset >= end_offset:
            break
        got = read(offset)
        if got is None:
            break
        data, start, end = got
        offset = max(offset, start)
        if not data:
            break
        stats.bytes += len(data)
        try:
            nxt, count = scan_latest(data, latest, pending)
            stats.read += count
            if nxt is None:  # no whole batch (the log always returns its first batch whole): stop
                stats.errors.append((offset, f"offsets partition {core.partition}: no whole batch at offset {offset}"))
                break
            offset = nxt
        except CorruptBatchError as e:
            stats.errors.append((offset, f"offsets partition {core.partition}: corrupt batch at {offset}: {e}"))
            break
        if offset >= end:
            break
    if end_offset is not None:
        latest = {k: v for k, v in latest.items() if v[0] < end_offset}
    open_txns = [(key, off, value, pid) for pid, records in pending.items() for key, (off, value) in records.items()
                 if end_offset is None or off < end_offset]
    with lock:
        for key, off, value, pid in ([(k, o, v, None) for k, (o, v) in sorted(latest.items(), key=lambda kv: kv[1][0])]
                                     + sorted(open_txns, key=lambda t: t[1])):
            if key is None:  # invalid in a compacted topic: Kafka's load would fail on it
                stats.skipped += 1
                continue
            try:
                core.replay(key, value, off, pid)
                stats.records += 1
            except RecordFormatError as e:
                stats.skipped += 1
                stats.errors.append((off, f"offsets partition {core.partition} offset {off}: {e}"))
    stats.end_offset = offset
    return stats
