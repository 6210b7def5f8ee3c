"""Loading a __transaction_state partition into its coordinator (Kafka's loadTransactionMetadata), sans-IO.

The broker's transaction coordinator shell and the simulator both call :func:`replay_log`: read the
partition from its log start to its LEO in chunks, keep the last record per key (each record holds a
transactional id's whole metadata), then replay those in log order through ``core.replay``.  Undecodable
records are skipped and counted; a corrupt batch ends the read where it is.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager

from kafkacommon.fastscan import scan_latest
from kafkacommon.record_batch import CorruptBatchError
from transactions.core import TxnCoordinator
from transactions.records import RecordFormatError


@dataclass
class LoadStats:
    read: int = 0
    records: int = 0
    skipped: int = 0
    bytes: int = 0
    end_offset: int = 0
    errors: list = field(default_factory=list)


def replay_log(core: TxnCoordinator, read: Callable[[int], tuple[bytes, int, int] | None],
               lock: ContextManager[Any] | None = None, stopping: Callable[[], bool] | None = None) -> LoadStats:
    """``read(offset) -> (whole batches, log start, LEO)``, None once the replica is gone; ``lock`` is held
    while replaying; ``stopping()`` True ends the read early."""
    stats = LoadStats()
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    offset = 0
    while stopping is None or not stopping():
        got = read(offset)
        if got is None:
            break
        data, start, end = got
        offset = max(offset, start)
        if not data:
            break
        stats.bytes += len(data)
        try:
            nxt, count = scan_latest(data, latest)
        except CorruptBatchError as e:
            stats.errors.append((offset, f"transaction state partition {core.partition}: corrupt batch at {offset}: {e}"))
            break
        stats.read += count
        if nxt is None:
            stats.errors.append((offset, f"transaction state partition {core.partition}: no whole batch at {offset}"))
            break
        offset = nxt
        if offset >= end:
            break
    with lock if lock is not None else contextlib.nullcontext():
        for key, (off, value) in sorted(latest.items(), key=lambda kv: kv[1][0]):
            if key is None:
                stats.skipped += 1
                continue
            try:
                core.replay(key, value, off)
                stats.records += 1
            except (RecordFormatError, ValueError) as e:
                stats.skipped += 1
                stats.errors.append((off, f"transaction state partition {core.partition} offset {off}: {e}"))
    stats.end_offset = offset
    return stats
