"""Scanning a buffer of record batches (v2): every whole valid batch, and where valid data ends.

A log segment, a fetch response and a replay all hold batches back to back.
These scans stop (they do not raise) at the first batch that is torn or
corrupt, and report its position and reason, so a caller can cut a torn tail
or refuse a bad response.

Pure: no I/O.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from kafkacommon.record_batch import (
    BatchHeader, CorruptBatchError, RecordBatch, decode_batch, peek_header, validate_batch,
)


class BatchIterator:
    """Iterates ``(position, RecordBatch)`` over a buffer and stops at the first bad batch.

    After (or during) iteration, ``valid_bytes`` is the position where valid data ends
    and ``error`` the CorruptBatchError that stopped the scan (None if the buffer
    ended exactly at a batch boundary).  A torn tail has ``error.incomplete`` set.
    """

    def __init__(self, buf: bytes | memoryview, start: int = 0) -> None:
        self._buf = buf
        self.valid_bytes = start
        self.error: CorruptBatchError | None = None
        self._done = False

    def __iter__(self) -> Iterator[tuple[int, RecordBatch]]:
        return self

    def __next__(self) -> tuple[int, RecordBatch]:
        if self._done or self.valid_bytes >= len(self._buf):
            self._done = True
            raise StopIteration
        pos = self.valid_bytes
        try:
            batch, nxt = decode_batch(self._buf, pos)
        except CorruptBatchError as exc:
            self.error = exc
            self._done = True
            raise StopIteration from None
        self.valid_bytes = nxt
        return pos, batch


def iter_batches(buf: bytes | memoryview, start: int = 0) -> BatchIterator:
    """Iterate the batches of ``buf`` from ``start``; see :class:`BatchIterator`."""
    return BatchIterator(buf, start)


@dataclass(frozen=True)
class ScanResult:
    """Outcome of :func:`scan_batches`: the whole batches and where valid data ends."""

    batches: tuple[tuple[int, RecordBatch], ...]
    valid_bytes: int
    error: CorruptBatchError | None

    @property
    def clean(self) -> bool:
        """True when the buffer ended exactly after a whole valid batch."""
        return self.error is None


def scan_batches(buf: bytes | memoryview, start: int = 0) -> ScanResult:
    """Decode every whole valid batch from ``start``, stopping (not raising) at a bad one."""
    it = iter_batches(buf, start)
    batches = tuple(it)
    return ScanResult(batches, it.valid_bytes, it.error)


@dataclass(frozen=True)
class HeaderScanResult:
    """Outcome of :func:`scan_headers`: CRC-checked headers and where valid data ends."""

    headers: tuple[tuple[int, BatchHeader], ...]
    valid_bytes: int
    error: CorruptBatchError | None


def scan_headers(buf: bytes | memoryview, start: int = 0) -> HeaderScanResult:
    """Like :func:`scan_batches` but only validates headers and CRCs (no record decode)."""
    headers: list[tuple[int, BatchHeader]] = []
    pos, end = start, len(buf)
    error: CorruptBatchError | None = None
    while pos < end:
        try:
            header = validate_batch(buf, pos)
        except CorruptBatchError as exc:
            error = exc
            break
        headers.append((pos, header))
        pos += header.size_bytes
    return HeaderScanResult(tuple(headers), pos, error)



_INT32_MAX = (1 << 31) - 1


@dataclass(frozen=True)
class RecoveryScan:
    """Outcome of :func:`scan_for_recovery`: the batches a recovered segment keeps, where it is cut,
    and how many batches the cut drops (best effort: the bad one, plus whole-looking ones after it,
    a trailing fragment counting 1)."""

    headers: tuple[tuple[int, BatchHeader], ...]
    valid_bytes: int
    dropped_batches: int
    error: CorruptBatchError | None


def scan_for_recovery(buf: bytes | memoryview, base_offset: int) -> RecoveryScan:
    """Kafka's LogSegment.recover rule over a segment's bytes: keep every batch from position 0 that
    is whole, passes its CRC, does not go back in offsets and stays within the segment's int32
    relative-offset range; stop at the first that fails.  The real log (node/storage/segment.py)
    and the simulator's disk (sim/disk.py) both recover with this."""
    headers: list[tuple[int, BatchHeader]] = []
    pos, end, next_offset = 0, len(buf), base_offset
    error: CorruptBatchError | None = None
    while pos < end:
        try:
            header = validate_batch(buf, pos)
            if header.base_offset < next_offset:
                raise CorruptBatchError("offsets go backwards", pos)
            if header.last_offset - base_offset > _INT32_MAX:
                raise CorruptBatchError("offset outside the segment's range", pos)
        except CorruptBatchError as exc:
            error = exc
            break
        headers.append((pos, header))
        next_offset = header.next_offset
        pos += header.size_bytes
    return RecoveryScan(tuple(headers), pos, _count_tail(buf, pos) if error else 0, error)


def _count_tail(buf: bytes | memoryview, position: int) -> int:
    count = 0
    while position < len(buf):
        count += 1
        try:
            position += peek_header(buf, position).size_bytes
        except CorruptBatchError:
            break
    return count
