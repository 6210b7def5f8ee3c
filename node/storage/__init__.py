"""node.storage: one partition replica's log on disk, in Kafka's formats.

* :mod:`.batch` — record batch format v2 (magic 2, CRC-32C): encode, decode, scan.
* :mod:`.segment` — :class:`LogSegment`: ``.log`` + sparse ``.index`` / ``.timeindex``.
* :mod:`.checkpoint` — atomic text checkpoints (``leader-epoch-checkpoint``,
  ``replication-offset-checkpoint``).
* :mod:`.log` — :class:`PartitionLog` (segments, rolling, recovery, truncation) and
  :class:`LeaderEpochCache`.
* :mod:`.cleaner` — log compaction (:func:`clean`, :func:`dirty_ratio`) for
  ``cleanup.policy=compact`` topics, with its ``cleaner-offset-checkpoint``.

No threads, no sockets and no clock: callers pass ``now_ms``.
"""
from __future__ import annotations

from .batch import (BatchHeader, BatchIterator, CorruptBatchError, HeaderScanResult, Record, RecordBatch,
                    ScanResult, StorageError, decode_batch, decode_varint, decode_varlong, encode_batch,
                    encode_varint, encode_varlong, iter_batches, peek_header, scan_batches, scan_headers,
                    retain_records, validate_batch)
from .checkpoint import (CLEANER_OFFSET_CHECKPOINT, LEADER_EPOCH_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
                         CheckpointError, CleanerCheckpointFile, CleanerState, LeaderEpochCheckpointFile,
                         OffsetCheckpointFile, read_checkpoint, write_checkpoint)
from .cleaner import CleanResult, clean, dirty_ratio, first_dirty_offset, first_uncleanable_offset
from .log import (InvalidAppendError, LeaderEpochCache, OffsetOutOfRangeError, PartitionLog,
                  RecoveryReport)
from .segment import LogSegment, segment_file_name

__all__ = [
    "BatchHeader", "BatchIterator", "CorruptBatchError", "HeaderScanResult", "Record", "RecordBatch",
    "ScanResult", "StorageError", "decode_batch", "decode_varint", "decode_varlong", "encode_batch",
    "encode_varint", "encode_varlong", "iter_batches", "peek_header", "scan_batches", "scan_headers",
    "retain_records", "validate_batch",
    "CLEANER_OFFSET_CHECKPOINT", "LEADER_EPOCH_CHECKPOINT", "REPLICATION_OFFSET_CHECKPOINT", "CheckpointError",
    "CleanerCheckpointFile", "CleanerState", "LeaderEpochCheckpointFile", "OffsetCheckpointFile",
    "read_checkpoint", "write_checkpoint",
    "CleanResult", "clean", "dirty_ratio", "first_dirty_offset", "first_uncleanable_offset",
    "InvalidAppendError", "LeaderEpochCache", "OffsetOutOfRangeError", "PartitionLog", "RecoveryReport",
    "LogSegment", "segment_file_name",
]
