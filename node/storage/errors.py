"""The base class of node.storage's errors."""
from __future__ import annotations


class StorageError(Exception):
    """Base class of every error raised by node.storage (a record batch's own errors are
    :class:`kafkacommon.record_batch.CorruptBatchError`)."""


class KafkaStorageError(StorageError):
    """An I/O error (OSError: ENOSPC, EIO, EROFS...) in a log directory: Kafka's KafkaStorageException.

    ``dir`` is the log directory (the parent of the partition's folder), which the error takes offline."""

    def __init__(self, log_dir: str, message: str) -> None:
        super().__init__(message)
        self.dir = log_dir
