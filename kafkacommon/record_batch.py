"""Kafka's record batch format v2 (magic 2): encode, decode and validate one batch.

Layout of one batch (big-endian, offsets in bytes from the batch start)::

     0 baseOffset            int64
     8 batchLength           int32   bytes after this field (batch size - 12)
    12 partitionLeaderEpoch  int32
    16 magic                 int8    = 2
    17 crc                   uint32  CRC-32C of bytes [21, end)
    21 attributes            int16   bits 0-2 compression codec, 3 timestamp type,
                                     4 transactional, 5 control
    23 lastOffsetDelta       int32
    27 baseTimestamp         int64
    35 maxTimestamp          int64
    43 producerId            int64   -1: none
    51 producerEpoch         int16   -1: none
    53 baseSequence          int32   -1: none
    57 recordCount           int32
    61 records...

Each record: length varint, attributes int8 (unused), timestampDelta varlong,
offsetDelta varint, keyLength varint (-1 = null), key, valueLength varint
(-1 = null), value, headerCount varint, then per header: keyLength varint, key
(UTF-8, never null), valueLength varint (-1 = null), value.  Varints are in
:mod:`kafkacommon.varint`.  The CRC does not cover baseOffset, batchLength or
partitionLeaderEpoch.

Compression: the codec bits (:attr:`BatchHeader.compression`) say how the records
section is compressed (gzip, snappy, lz4, zstd: :mod:`kafkacommon.compression`);
:func:`decode_batch` decompresses it, :func:`encode_batch` compresses on request,
and :func:`retain_records` recompresses the survivors with the batch's codec, as
Kafka's cleaner does.  A codec id above zstd raises
:class:`UnsupportedCompressionError`, naming it.  With
``LOG_APPEND_TIME`` every record's timestamp is the batch's maxTimestamp, as in
Kafka's DefaultRecordBatch.

Pure: no I/O.  Scanning a buffer of many batches is :mod:`kafkacommon.batch_scan`.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Sequence

import crc32c as _crc32c

from kafkacommon.compression import CompressionError, compress, decompress
from kafkacommon.varint import decode_varint, decode_varlong, put_unsigned, zigzag_encode

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

# attributes (DefaultRecordBatch)
COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20

# compression codecs (CompressionType ids)
NO_COMPRESSION = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4
CODEC_NAMES = {NO_COMPRESSION: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

# timestamp types (TimestampType ids, as the attributes bit holds them)
CREATE_TIME = 0
LOG_APPEND_TIME = 1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_INT32_MAX = (1 << 31) - 1
_INT16_MIN, _INT16_MAX = -(1 << 15), (1 << 15) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC-32C (Castagnoli) of ``data``, as an unsigned 32-bit integer."""
    return _crc32c.crc32c(data)


class CorruptBatchError(Exception):
    """A batch failed validation or cannot be decoded.

    ``reason`` says why, ``position`` is the byte position of the batch start in the
    scanned buffer, ``incomplete`` is True when the data simply ends too early (a
    torn write) rather than being wrong.
    """

    def __init__(self, reason: str, position: int, *, incomplete: bool = False) -> None:
        super().__init__(f"corrupt record batch at position {position}: {reason}")
        self.reason = reason
        self.position = position
        self.incomplete = incomplete


class UnsupportedCompressionError(CorruptBatchError):
    """A valid batch whose records are compressed with a codec this decoder does not read."""

    def __init__(self, codec: int, position: int) -> None:
        super().__init__(f"records compressed with {CODEC_NAMES.get(codec, f'unknown codec {codec}')}, "
                         "which this decoder does not read", position)
        self.codec = codec


def make_attributes(*, compression: int = NO_COMPRESSION, timestamp_type: int = CREATE_TIME,
                    transactional: bool = False, control: bool = False) -> int:
    """The batch attributes field for these settings."""
    if compression not in CODEC_NAMES:
        raise ValueError(f"unknown compression codec {compression}")
    if timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
        raise ValueError(f"unknown timestamp type {timestamp_type}")
    return (compression | (TIMESTAMP_TYPE_MASK if timestamp_type == LOG_APPEND_TIME else 0)
            | (TRANSACTIONAL_FLAG_MASK if transactional else 0) | (CONTROL_FLAG_MASK if control else 0))


# ---------------------------------------------------------------- data types

Header = tuple[str, "bytes | None"]


@dataclass(frozen=True)
class Record:
    """One record with its absolute offset and timestamp; ``headers`` as (key, value) pairs."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


class _BatchFields:
    """What a header and a decoded batch share: offsets, attributes and producer fields."""

    base_offset: int
    last_offset_delta: int
    attributes: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> int:
        """The compression codec id (``NO_COMPRESSION``, ``GZIP``, ...)."""
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        """``CREATE_TIME`` or ``LOG_APPEND_TIME``."""
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)


@dataclass(frozen=True)
class BatchHeader(_BatchFields):
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
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    base_sequence: int = NO_SEQUENCE

    @property
    def size_bytes(self) -> int:
        """Bytes the whole batch occupies on disk."""
        return self.batch_length + LOG_OVERHEAD


@dataclass(frozen=True)
class RecordBatch(_BatchFields):
    """A decoded batch. ``size_bytes`` is its encoded size."""

    base_offset: int
    leader_epoch: int
    records: tuple[Record, ...]
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    size_bytes: int
    crc: int
    attributes: int = 0
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    base_sequence: int = NO_SEQUENCE


# ---------------------------------------------------------------- encoding

def _uvarint(u: int) -> bytes:
    """Unsigned base-128 varint; small values (every length, delta and flag a batch of ordinary
    records holds) come from a table: an append encodes several per record."""
    if u < _SMALL:
        return _UVARINT[u]
    out = bytearray()
    put_unsigned(out, u)
    return bytes(out)


_SMALL = 1 << 14
_UVARINT: list[bytes] = []
for _u in range(_SMALL):
    _b = bytearray()
    put_unsigned(_b, _u)
    _UVARINT.append(bytes(_b))
del _u, _b


def _field(data: bytes | None) -> bytes:
    """A nullable key or value: zigzag length (-1 for null), then the bytes."""
    return b"\x01" if data is None else _uvarint(len(data) << 1) + data


def _headers(headers: Sequence[Header]) -> bytes:
    """headerCount, then each header's key (UTF-8, not null) and nullable value."""
    if not headers:
        return b"\x00"
    parts = [_uvarint(len(headers) << 1)]
    for key, value in headers:
        if not isinstance(key, str):
            raise ValueError(f"a header key must be a str, got {key!r}")
        parts.append(_field(key.encode("utf-8")))
        parts.append(_field(value))
    return b"".join(parts)


def encode_batch(base_offset: int, leader_epoch: int,
                 records: Sequence[tuple], *,
                 offset_deltas: Sequence[int] | None = None, last_offset_delta: int | None = None,
                 base_timestamp: int | None = None, timestamp_type: int = CREATE_TIME,
                 producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                 base_sequence: int = NO_SEQUENCE, transactional: bool = False, control: bool = False,
                 compression: int = NO_COMPRESSION) -> bytes:
    """Encode ``(key, value, timestamp_ms)`` or ``(key, value, timestamp_ms, headers)`` tuples
    as one batch at ``base_offset``, its records compressed with ``compression``;
    ``headers`` is a sequence of ``(str key, bytes-or-None value)``.

    By default offsets are consecutive from ``base_offset`` and the base timestamp is
    the first record's.  A compacted batch keeps its original offsets, so
    ``offset_deltas`` (strictly increasing, >= 0) may leave gaps, and
    ``last_offset_delta`` may exceed the last record's delta (Kafka keeps a cleaned
    batch's original last offset).  The max timestamp is always the largest record
    timestamp.  The producer id, epoch and base sequence are written as given
    (-1: none), as are the timestamp type and the transactional and control flags.
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
    attributes = make_attributes(compression=compression, timestamp_type=timestamp_type,
                                 transactional=transactional, control=control)
    base_ts = records[0][2] if base_timestamp is None else base_timestamp
    max_ts = max(r[2] for r in records)
    parts: list[bytes] = []
    put = parts.append
    uv, field = _uvarint, _field
    for delta, record in zip(deltas, records):
        key, value, ts = record[0], record[1], record[2]
        headers = _headers(record[3]) if len(record) > 3 else b"\x00"
        # attributes 0, timestampDelta, offsetDelta (>= 0), key, value, headers
        rec = b"".join((b"\x00", uv(zigzag_encode(ts - base_ts, 64)), uv(delta << 1), field(key), field(value),
                        headers))
        put(uv(len(rec) << 1))
        put(rec)
    body = b"".join(parts)
    if compression != NO_COMPRESSION:
        body = compress(compression, body)
    return _seal(base_offset, leader_epoch, lod, base_ts, max_ts, len(records), body,
                 attributes=attributes, producer_id=producer_id, producer_epoch=producer_epoch,
                 base_sequence=base_sequence)


def _seal(base_offset: int, leader_epoch: int, last_offset_delta: int, base_ts: int, max_ts: int,
          count: int, body: bytes | bytearray, *, attributes: int = 0, producer_id: int = NO_PRODUCER_ID,
          producer_epoch: int = NO_PRODUCER_EPOCH, base_sequence: int = NO_SEQUENCE) -> bytes:
    """Header + ``body`` (encoded records), with length and CRC filled in."""
    batch_length = HEADER_SIZE - LOG_OVERHEAD + len(body)
    if batch_length > _INT32_MAX:
        raise ValueError("record batch too large")
    if not _INT64_MIN <= producer_id <= _INT64_MAX or not _INT16_MIN <= producer_epoch <= _INT16_MAX \
            or not -(1 << 31) <= base_sequence <= _INT32_MAX:
        raise ValueError(f"producer id {producer_id}, epoch {producer_epoch} or base sequence {base_sequence} "
                         "out of range")
    out = bytearray(_HEADER.pack(base_offset, batch_length, leader_epoch, MAGIC, 0, attributes, last_offset_delta,
                                 base_ts, max_ts, producer_id, producer_epoch, base_sequence, count)) + body
    struct.pack_into(">I", out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def retain_records(raw: bytes | memoryview, batch: RecordBatch, keep: Sequence[bool]) -> bytes | None:
    """Re-encode the batch ``raw`` (decoded as ``batch``) with only the records where ``keep`` is True.

    This is what the log cleaner writes: the surviving records' bytes are copied
    unchanged (offset and timestamp deltas, headers), and the batch keeps its base
    offset, last offset delta, leader epoch, base timestamp, attributes and
    producer fields; only the record count, max timestamp (largest surviving
    record timestamp, as Kafka's filter recomputes it), length and CRC change.
    The records of a compressed batch are decompressed and the survivors
    compressed again with the batch's codec.
    Returns ``raw`` itself when every record is kept and None when none is (an
    empty batch disappears).
    """
    if len(keep) != len(batch.records):
        raise ValueError("keep mask and records differ in length")
    if all(keep):
        return bytes(raw)
    if not any(keep):
        return None
    body = bytearray()
    records, pos = (raw, HEADER_SIZE) if batch.compression == NO_COMPRESSION else \
        (decompress(batch.compression, memoryview(raw)[HEADER_SIZE:]), 0)
    end = len(records)
    max_ts = -1
    for rec, kept in zip(batch.records, keep):
        length, start = decode_varint(records, pos, end)
        nxt = start + length
        if kept:
            body += records[pos:nxt]
            max_ts = max(max_ts, rec.timestamp_ms)
        pos = nxt
    if batch.compression != NO_COMPRESSION:
        body = bytearray(compress(batch.compression, bytes(body)))
    return _seal(batch.base_offset, batch.leader_epoch, batch.last_offset_delta, batch.base_timestamp,
                 max_ts, sum(1 for k in keep if k), body, attributes=batch.attributes,
                 producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                 base_sequence=batch.base_sequence)


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
     pid, pepoch, seq, count) = _HEADER.unpack_from(buf, pos)
    if magic != MAGIC:
        raise CorruptBatchError(f"unsupported magic {magic}", pos)
    if length < MIN_BATCH_LENGTH:
        raise CorruptBatchError(f"batch length {length} smaller than a header", pos)
    return BatchHeader(base_offset, length, epoch, magic, crc, attrs, lod, base_ts, max_ts, count, pid, pepoch, seq)


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


def _read_headers(buf: bytes | memoryview, pos: int, end: int) -> tuple[tuple[Header, ...], int]:
    count, pos = decode_varint(buf, pos, end)
    if count == 0:
        return (), pos
    if count < 0:
        raise ValueError(f"negative header count {count}")
    headers: list[Header] = []
    for _ in range(count):
        key, pos = _read_nullable(buf, pos, end)
        if key is None:
            raise ValueError("null header key")
        try:
            name = key.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("header key is not UTF-8") from None
        value, pos = _read_nullable(buf, pos, end)
        headers.append((name, value))
    return tuple(headers), pos


def decode_batch(buf: bytes | memoryview, pos: int = 0) -> tuple[RecordBatch, int]:
    """Decode and fully validate the batch at ``pos``; return (batch, next position).

    A compressed batch's records are decompressed first.  Raises
    :class:`UnsupportedCompressionError` (a CorruptBatchError) for a codec id
    above zstd and CorruptBatchError for anything malformed (records that do not
    decompress included).
    """
    header = validate_batch(buf, pos)
    end = pos + header.size_bytes
    count = header.record_count
    if header.attributes & ~(COMPRESSION_CODEC_MASK | TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG_MASK
                             | CONTROL_FLAG_MASK):
        raise CorruptBatchError(f"unsupported attributes {header.attributes:#x}", pos)
    if header.compression not in CODEC_NAMES:
        raise UnsupportedCompressionError(header.compression, pos)
    if count < 0:
        raise CorruptBatchError(f"negative record count {count}", pos)
    log_append_time = header.timestamp_type == LOG_APPEND_TIME
    records: list[Record] = []
    batch_end, p = end, pos + HEADER_SIZE
    if header.compression != NO_COMPRESSION:
        try:
            buf = decompress(header.compression, memoryview(buf)[p:end])
        except CompressionError as e:
            raise CorruptBatchError(f"{CODEC_NAMES[header.compression]} records {e}", pos) from None
        p, end = 0, len(buf)
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
            headers, p = _read_headers(buf, p, rec_end)
            if p != rec_end:
                raise ValueError(f"record has {rec_end - p} unread bytes")
            ts = header.max_timestamp if log_append_time else header.base_timestamp + ts_delta
            records.append(Record(header.base_offset + off_delta, ts, key, value, headers))
    except ValueError as exc:
        raise CorruptBatchError(f"malformed record {len(records)}: {exc}", pos) from None
    if p != end:
        raise CorruptBatchError(f"{end - p} bytes after the last record", pos)
    end = batch_end
    # compaction leaves gaps: offsets only have to increase and stay within lastOffsetDelta
    for i, rec in enumerate(records):
        if rec.offset < (header.base_offset if i == 0 else records[i - 1].offset + 1):
            raise CorruptBatchError(f"record {i} offset {rec.offset} is not increasing", pos)
    if records and records[-1].offset > header.last_offset:
        raise CorruptBatchError("last record offset is beyond lastOffsetDelta", pos)
    batch = RecordBatch(header.base_offset, header.leader_epoch, tuple(records), header.last_offset_delta,
                        header.base_timestamp, header.max_timestamp, header.size_bytes, header.crc,
                        header.attributes, header.producer_id, header.producer_epoch, header.base_sequence)
    return batch, end
