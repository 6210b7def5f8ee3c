"""The base class of node.storage's errors."""
from __future__ import annotations


class StorageError(Exception):
    """Base class of every error raised by node.storage (a record batch's own errors are
    :class:`kafkacommon.record_batch.CorruptBatchError`)."""
