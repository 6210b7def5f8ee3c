"""The base class of node.storage's errors."""
from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])


class StorageError(Exception):
    """Base class of every error raised by node.storage (a record batch's own errors are
    :class:`kafkacommon.record_batch.CorruptBatchError`)."""


class KafkaStorageError(StorageError):
    """An I/O error (OSError: ENOSPC, EIO, EROFS...) in a log directory: Kafka's KafkaStorageException.

    ``dir`` is the log directory (the parent of the partition's folder), which the error takes offline."""

    def __init__(self, log_dir: str, message: str) -> None:
        super().__init__(message)
        self.dir = log_dir


def guard_io(what: str) -> Callable[[_F], _F]:
    """A log method whose OSError takes the log's directory offline (Kafka's maybeHandleIOException): the
    instance's ``_io_failed(what, error)`` reports the directory and gives the KafkaStorageError raised."""
    def wrap(method: _F) -> _F:
        @functools.wraps(method)
        def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return method(self, *args, **kwargs)
            except OSError as e:
                raise self._io_failed(what, e) from e
        return guarded  # type: ignore[return-value]
    return wrap
