"""Kafka's record batch format v2 (magic 2): encode, decode, validate and scan.

Layout of one batch (big-endian, offsets in bytes from the batch start)::

     0 baseOffset            int64
     8 batchLength           int32   bytes after this field (batch size - 12)
    12 partitionLeaderEpoch  int32
    16 magic                 int8    = 2
    17 crc                   uint32  CRC-32C of bytes [21, end)
    21 attributes            int16   0: no compression, not transactional, no control
    23 lastOffsetDelta       int32
    27 baseTimestamp         int64
    35 maxTimestamp          int64
    43 producerId            int64   -1
    51 producerEpoch         int16   -1
    53 baseSequence          int32   -1
    57 recordCount           int32
    61 records...

Each record: length varint, attributes int8, timestampDelta varlong, offsetDelta
varint, keyLength varint (-1 = null), key, valueLength varint (-1 = null), value,
headerCount varint.  Varints are zigzag-encoded base-128, least significant group
first.  The CRC does not cover baseOffset, batchLength or partitionLeaderEpoch.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterator, Sequence

import crc32c as _crc32c

MAGIC = 2
HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part not counted by batchLength
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_INT32_MAX = (1 << 31) - 1


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC-32C (Castagnoli) of ``data``, as an unsigned 32-bit integer."""
    return _crc32c.crc32c(data)


class StorageError(Exception):
    """Base class of every error raised by node.storage."""


class CorruptBatchError(StorageError):
    """A batch failed validation.

    ``reason`` says why, ``position`` is the byte position of the batch start in the
    scanned buffer, ``incomplete`` is True when the data simply ends too early (a
    torn write) rather than being wrong.
    """

    def __init__(self, reason: str, position: int, *, incomplete: bool = False) -> None:
        super().__init__(f"corrupt record batch at position {position}: {reason}")
        self.reason = reason
        self.position = position
        self.incomplete = incomplete


# ---------------------------------------------------------------- varints

def zigzag_encode(value: int, bits: int = 64) -> int:
    """Map a signed integer to unsigned: 0→0, -1→1, 1→2, -2→3, ..."""
    return ((value << 1) ^ (value >> (bits - 1))) & ((1 << bits) - 1)


def zigzag_decode(value: int) -> int:
    """Inverse of :func:`zigzag_encode`."""
    return (value >> 1) ^ -(value & 1)


def _put_unsigned(out: bytearray, u: int) -> None:
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)


def _encode_signed(value: int, bits: int) -> bytes:
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise ValueError(f"{value} does not fit int{bits}")
    out = bytearray()
    _put_unsigned(out, zigzag_encode(value, bits))
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Zigzag varint of a signed 32-bit integer (1 to 5 bytes)."""
    return _encode_signed(value, 32)


def encode_varlong(value: int) -> bytes:
    """Zigzag varint of a signed 64-bit integer (1 to 10 bytes)."""
    return _encode_signed(value, 64)


def _read_unsigned(buf: bytes | memoryview, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    result = shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise ValueError("varint runs past the end of its record")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
    raise ValueError(f"varint longer than {max_bytes} bytes")


def decode_varint(buf: bytes | memoryview, pos: int = 0, end: int | None = None) -> tuple[int, int]:
    """Read a zigzag varint (int32) at ``pos``; return (value, next position)."""
    u, pos = _read_unsigned(buf, pos, len(buf) if end is None else end, 5)
    if u >> 32:
        raise ValueError("varint exceeds 32 bits")
    return zigzag_decode(u), pos


def decode_varlong(buf: bytes | memoryview, pos: int = 0, end: int | None = None) -> tuple[int, int]:
    """Read a zigzag varlong (int64) at ``pos``; return (value, next position)."""
    u, pos = _read_unsigned(buf, pos, len(buf) if end is None else end, 10)
    if u >> 64:
        raise ValueError("varlong exceeds 64 bits")
    return zigzag_decode(u), pos


# ---------------------------------------------------------------- data types

@dataclass(frozen=True)
class Record:
    """One record with its absolute offset and timestamp."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None


class _OffsetSpan:
    """The offsets a batch covers, from its base offset and last offset delta."""

    base_offset: int
    last_offset_delta: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


@dataclass(frozen=True)
class BatchHeader(_OffsetSpan):
    """The fixed 61-byte batch header, read without touching the records."""

    base_offset: int
    batch_length: int
    leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    record_count: int

    @property
    def size_bytes(self) -> int:
        """Bytes the whole batch occupies on disk."""
        return self.batch_length + LOG_OVERHEAD


@dataclass(frozen=True)
class RecordBatch(_OffsetSpan):
    """A decoded batch. ``size_bytes`` is its encoded size."""

    base_offset: int
    leader_epoch: int
    records: tuple[Record, ...]
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    size_bytes: int
    crc: int


# ---------------------------------------------------------------- encoding

def _uvarint(u: int) -> bytes:
    """Unsigned base-128 varint; small values (every length, delta and flag a batch of ordinary
    records holds) come from a table: an append encodes several per record."""
    if u < _SMALL:
        return _UVARINT[u]
    out = bytearray()
    _put_unsigned(out, u)
    return bytes(out)


_SMALL = 1 << 14
_UVARINT: list[bytes] = []
for _u in range(_SMALL):
    _b = bytearray()
    _put_unsigned(_b, _u)
    _UVARINT.append(bytes(_b))
del _u, _b


def _field(data: bytes | None) -> bytes:
    """A nullable key or value: zigzag length (-1 for null), then the bytes."""
    return b"\x01" if data is None else _uvarint(len(data) << 1) + data


def encode_batch(base_offset: int, leader_epoch: int,
                 records: Sequence[tuple[bytes | None, bytes | None, int]], *,
                 offset_deltas: Sequence[int] | None = None, last_offset_delta: int | None = None,
                 base_timestamp: int | None = None) -> bytes:
    """Encode ``(key, value, timestamp_ms)`` tuples as one batch at ``base_offset``.

    By default offsets are consecutive from ``base_offset`` and the base timestamp is
    the first record's.  A compacted batch keeps its original offsets, so
    ``offset_deltas`` (strictly increasing, >= 0) may leave gaps, and
    ``last_offset_delta`` may exceed the last record's delta (Kafka keeps a cleaned
    batch's original last offset).  The max timestamp is always the largest record
    timestamp.
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    if len(records) - 1 > _INT32_MAX:
        raise ValueError("too many records for one batch")
    deltas = range(len(records)) if offset_deltas is None else list(offset_deltas)
    if len(deltas) != len(records):
        raise ValueError("offset_deltas and records differ in length")
    if deltas[0] < 0 or any(b <= a for a, b in zip(deltas, deltas[1:])):
        raise ValueError("offset deltas must be >= 0 and strictly increasing")
    lod = deltas[-1] if last_offset_delta is None else last_offset_delta
    if not deltas[-1] <= lod <= _INT32_MAX:
        raise ValueError(f"last offset delta {lod} is below the last record's {deltas[-1]} or too large")
    base_ts = records[0][2] if base_timestamp is None else base_timestamp
    max_ts = max(r[2] for r in records)
    parts: list[bytes] = []
    put = parts.append
    uv, field = _uvarint, _field
    for delta, (key, value, ts) in zip(deltas, records):
        # attributes 0, timestampDelta, offsetDelta (>= 0), key, value, headerCount 0
        rec = b"".join((b"\x00", uv(zigzag_encode(ts - base_ts, 64)), uv(delta << 1), field(key), field(value),
                        b"\x00"))
        put(uv(len(rec) << 1))
        put(rec)
    return _seal(base_offset, leader_epoch, lod, base_ts, max_ts, len(records), b"".join(parts))


def _seal(base_offset: int, leader_epoch: int, last_offset_delta: int, base_ts: int, max_ts: int,
          count: int, body: bytes | bytearray) -> bytes:
    """Header + ``body`` (encoded records), with length and CRC filled in."""
    batch_length = HEADER_SIZE - LOG_OVERHEAD + len(body)
    if batch_length > _INT32_MAX:
        raise ValueError("record batch too large")
    out = bytearray(_HEADER.pack(base_offset, batch_length, leader_epoch, MAGIC, 0, 0, last_offset_delta,
                                 base_ts, max_ts, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE,
                                 count)) + body
    struct.pack_into(">I", out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def retain_records(raw: bytes | memoryview, batch: RecordBatch, keep: Sequence[bool]) -> bytes | None:
    """Re-encode the batch ``raw`` (decoded as ``batch``) with only the records where ``keep`` is True.

    This is what the log cleaner writes: the surviving records' bytes are copied
    unchanged (offset and timestamp deltas, headers), and the batch keeps its base
    offset, last offset delta, leader epoch and base timestamp; only the record
    count, max timestamp (largest surviving record timestamp, as Kafka's filter
    recomputes it), length and CRC change.  Returns ``raw`` itself when every
    record is kept and None when none is (an empty batch disappears).
    """
    if len(keep) != len(batch.records):
        raise ValueError("keep mask and records differ in length")
    if all(keep):
        return bytes(raw)
    if not any(keep):
        return None
    body = bytearray()
    pos, end = HEADER_SIZE, len(raw)
    max_ts = -1
    for rec, kept in zip(batch.records, keep):
        length, start = decode_varint(raw, pos, end)
        nxt = start + length
        if kept:
            body += raw[pos:nxt]
            max_ts = max(max_ts, rec.timestamp_ms)
        pos = nxt
    return _seal(batch.base_offset, batch.leader_epoch, batch.last_offset_delta, batch.base_timestamp,
                 max_ts, sum(1 for k in keep if k), body)


# ---------------------------------------------------------------- decoding

def peek_header(buf: bytes | memoryview, pos: int = 0) -> BatchHeader:
    """Read the batch header at ``pos`` without decoding records or checking the CRC.

    Raises CorruptBatchError if fewer than 61 bytes remain (``incomplete``), the magic
    is not 2 or the length field is too small to be a batch.  Whether the whole
    batch is present is *not* checked.
    """
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptBatchError("truncated batch header", pos, incomplete=True)
    (base_offset, length, epoch, magic, crc, attrs, lod, base_ts, max_ts,
     _pid, _pepoch, _seq, count) = _HEADER.unpack_from(buf, pos)
    if magic != MAGIC:
        raise CorruptBatchError(f"unsupported magic {magic}", pos)
    if length < MIN_BATCH_LENGTH:
        raise CorruptBatchError(f"batch length {length} smaller than a header", pos)
    return BatchHeader(base_offset, length, epoch, magic, crc, attrs, lod, base_ts, max_ts, count)


def validate_batch(buf: bytes | memoryview, pos: int = 0) -> BatchHeader:
    """Check header, length and CRC of the batch at ``pos``; return its header."""
    header = peek_header(buf, pos)
    end = pos + header.size_bytes
    if end > len(buf):
        raise CorruptBatchError(
            f"batch length {header.batch_length} overruns the buffer ({len(buf) - pos} bytes left)",
            pos, incomplete=True)
    actual = crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET:end])
    if actual != header.crc:
        raise CorruptBatchError(f"CRC mismatch: stored {header.crc:#010x}, computed {actual:#010x}", pos)
    if header.last_offset_delta < 0:
        raise CorruptBatchError(f"negative lastOffsetDelta {header.last_offset_delta}", pos)
    return header


def _read_nullable(buf: bytes | memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    length, pos = decode_varint(buf, pos, end)
    if length == -1:
        return None, pos
    if length < 0 or pos + length > end:
        raise ValueError(f"bad field length {length}")
    return bytes(buf[pos:pos + length]), pos + length


def decode_batch(buf: bytes | memoryview, pos: int = 0) -> tuple[RecordBatch, int]:
    """Decode and fully validate the batch at ``pos``; return (batch, next position)."""
    header = validate_batch(buf, pos)
    end = pos + header.size_bytes
    attributes, count = header.attributes, header.record_count
    if attributes != 0:
        raise CorruptBatchError(f"unsupported attributes {attributes:#x}", pos)
    if count < 0:
        raise CorruptBatchError(f"negative record count {count}", pos)
    records: list[Record] = []
    p = pos + HEADER_SIZE
    try:
        for _ in range(count):
            length, p = decode_varint(buf, p, end)
            rec_end = p + length
            if length < 0 or rec_end > end:
                raise ValueError(f"record length {length} overruns the batch")
            p += 1  # record attributes
            ts_delta, p = decode_varlong(buf, p, rec_end)
            off_delta, p = decode_varint(buf, p, rec_end)
            key, p = _read_nullable(buf, p, rec_end)
            value, p = _read_nullable(buf, p, rec_end)
            headers, p = decode_varint(buf, p, rec_end)
            for _h in range(headers):  # headers are parsed and dropped
                klen, p = decode_varint(buf, p, rec_end)
                if klen < 0 or p + klen > rec_end:
                    raise ValueError(f"bad header key length {klen}")
                _v, p = _read_nullable(buf, p + klen, rec_end)
            if p != rec_end:
                raise ValueError(f"record has {rec_end - p} unread bytes")
            records.append(Record(header.base_offset + off_delta, header.base_timestamp + ts_delta, key, value))
    except ValueError as exc:
        raise CorruptBatchError(f"malformed record {len(records)}: {exc}", pos) from None
    if p != end:
        raise CorruptBatchError(f"{end - p} bytes after the last record", pos)
    # compaction leaves gaps: offsets only have to increase and stay within lastOffsetDelta
    for i, rec in enumerate(records):
        if rec.offset < (header.base_offset if i == 0 else records[i - 1].offset + 1):
            raise CorruptBatchError(f"record {i} offset {rec.offset} is not increasing", pos)
    if records and records[-1].offset > header.last_offset:
        raise CorruptBatchError("last record offset is beyond lastOffsetDelta", pos)
    batch = RecordBatch(header.base_offset, header.leader_epoch, tuple(records), header.last_offset_delta,
                        header.base_timestamp, header.max_timestamp, header.size_bytes, header.crc)
    return batch, end


# ---------------------------------------------------------------- scanning

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

