"""node.storage: one partition replica's log on disk, in Kafka's formats.

* :mod:`.segment` — :class:`LogSegment`: ``.log`` + sparse ``.index`` / ``.timeindex``.
* :mod:`.checkpoint` — atomic text checkpoints (``leader-epoch-checkpoint``,
  ``replication-offset-checkpoint``).
* :mod:`.log` — :class:`PartitionLog` (segments, rolling, truncation, retention, flushes) and
  :class:`LeaderEpochCache` (:mod:`.epoch_cache`); :mod:`.log_loader` opens a log's directory (recovery).
* :mod:`.cleaner` — log compaction (:func:`clean`, :func:`dirty_ratio`) for
  ``cleanup.policy=compact`` topics, with its ``cleaner-offset-checkpoint``.

No threads, no sockets and no clock: callers pass ``now_ms``.  The record batch
format itself (encode, decode, scan) is :mod:`kafkacommon.record_batch` and
:mod:`kafkacommon.batch_scan`; this package holds what is about files.
"""
from __future__ import annotations

from .checkpoint import (CLEANER_OFFSET_CHECKPOINT, LEADER_EPOCH_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
                         CheckpointError, CleanerCheckpointFile, CleanerState, LeaderEpochCheckpointFile,
                         OffsetCheckpointFile, read_checkpoint, write_checkpoint)
from .cleaner import CleanResult, clean, dirty_ratio, first_dirty_offset, first_uncleanable_offset
from .errors import StorageError
from .log import (InvalidAppendError, LeaderEpochCache, OffsetOutOfRangeError, PartitionLog,
                  RecoveryReport)
from .segment import LogSegment, segment_file_name

__all__ = [
    "StorageError",
    "CLEANER_OFFSET_CHECKPOINT", "LEADER_EPOCH_CHECKPOINT", "REPLICATION_OFFSET_CHECKPOINT", "CheckpointError",
    "CleanerCheckpointFile", "CleanerState", "LeaderEpochCheckpointFile", "OffsetCheckpointFile",
    "read_checkpoint", "write_checkpoint",
    "CleanResult", "clean", "dirty_ratio", "first_dirty_offset", "first_uncleanable_offset",
    "InvalidAppendError", "LeaderEpochCache", "OffsetOutOfRangeError", "PartitionLog", "RecoveryReport",
    "LogSegment", "segment_file_name",
]
