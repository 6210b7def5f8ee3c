"""The leader's checks of a client's record batch (sans-IO), before it goes into the log as is.

Kafka's rules for a Produce v3+ partition payload (LogValidator, for clients):
exactly one batch of magic 2, whole, its CRC-32C right, no larger than
``max.message.bytes``, a known compression codec (zstd only from Produce
v7), no control batch (markers are the partition leader's, from
WriteTxnMarkers), at least one record, ``lastOffsetDelta + 1 ==
recordCount``, and records that decode with offset deltas 0, 1, 2, ...
A transactional batch is taken as any other; its producer is checked by the
partition's producer state (replication/producer_state.py).
The batch is then stored byte for byte but for its base offset and
partition leader epoch, which lie outside the CRC (``node.storage.log``).

The records are walked with aiokafka's compiled record batch reader (pinned;
about 30 times as fast as a pure-Python walk, which made this check the
listener's produce bottleneck).  A compressed batch's records are
decompressed here first, bounded: records that would decompress to more than
``DECOMPRESSED_LIMIT`` bytes (socket.request.max.bytes' default, the most a
client could have sent uncompressed) are refused with CORRUPT_MESSAGE.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from aiokafka.record.default_records import DefaultRecordBatch as FastBatch
from kafka.record.default_records import DefaultRecordBatch

from kafkacommon.compression import CompressionError, DecompressedTooLarge, decompress
from kafkacommon.record_batch import ATTRIBUTES_OFFSET, HEADER_SIZE, MAGIC, MAGIC_OFFSET, CorruptBatchError, validate_batch

CORRUPT_MESSAGE = 2
MESSAGE_TOO_LARGE = 10
UNSUPPORTED_COMPRESSION_TYPE = 76
INVALID_RECORD = 87

_CODEC_MASK = 0x07
_TRANSACTIONAL = 0x10
_CONTROL = 0x20
_ZSTD = 4
DECOMPRESSED_LIMIT = 104857600


class BatchRejected(Exception):
    """The batch may not be appended: ``code`` is the Kafka error, the message says why."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class CheckedBatch:
    data: bytes
    record_count: int
    max_timestamp: int
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    transactional: bool = False


def check_client_batch(data: bytes | memoryview | None, max_message_bytes: int, produce_version: int,
                       decompressed_limit: int = DECOMPRESSED_LIMIT) -> CheckedBatch:
    """The one batch of a Produce partition payload, checked; raises :class:`BatchRejected`."""
    if not data:
        raise BatchRejected(INVALID_RECORD, "no record batch")
    data = bytes(data)
    if len(data) <= MAGIC_OFFSET:
        raise BatchRejected(CORRUPT_MESSAGE, f"{len(data)} bytes are too short for a record batch")
    if data[MAGIC_OFFSET] != MAGIC:
        raise BatchRejected(INVALID_RECORD, f"Produce v{produce_version} takes magic 2 batches only, "
                                            f"got magic {data[MAGIC_OFFSET]}")
    if len(data) < HEADER_SIZE:
        raise BatchRejected(CORRUPT_MESSAGE, f"{len(data)} bytes are too short for a batch header")
    size = int.from_bytes(data[8:12], "big", signed=True) + 12
    if size > max_message_bytes:
        raise BatchRejected(MESSAGE_TOO_LARGE, f"batch of {size} bytes exceeds max.message.bytes "
                                               f"({max_message_bytes})")
    try:
        header = validate_batch(data, 0)
    except CorruptBatchError as e:
        raise BatchRejected(CORRUPT_MESSAGE, e.reason) from None
    if header.size_bytes != len(data):
        raise BatchRejected(INVALID_RECORD, f"a partition's records must be exactly one batch "
                                            f"({len(data) - header.size_bytes} bytes follow the first)")
    attrs = int.from_bytes(data[ATTRIBUTES_OFFSET:ATTRIBUTES_OFFSET + 2], "big")
    codec = attrs & _CODEC_MASK
    if codec > _ZSTD or (codec == _ZSTD and produce_version < 7):
        raise BatchRejected(UNSUPPORTED_COMPRESSION_TYPE, f"compression codec {codec} is not supported"
                                                          + (" before Produce v7" if codec == _ZSTD else ""))
    if attrs & _CONTROL:
        raise BatchRejected(INVALID_RECORD, "Clients are not allowed to write control records")
    if header.record_count <= 0:
        raise BatchRejected(INVALID_RECORD, f"invalid record count {header.record_count}")
    if header.last_offset_delta + 1 != header.record_count:
        raise BatchRejected(INVALID_RECORD, f"lastOffsetDelta {header.last_offset_delta} does not match "
                                            f"the record count {header.record_count}")
    walk_records(data, codec, header.record_count, decompressed_limit)
    pid, epoch, seq = struct.unpack_from(">qhi", data, 43)
    if pid >= 0 and seq < 0:
        raise BatchRejected(INVALID_RECORD, f"producer {pid} sent a batch without a sequence")
    return CheckedBatch(data, header.record_count, header.max_timestamp, pid, epoch, seq, bool(attrs & _TRANSACTIONAL))


def walk_records(data: bytes, codec: int, record_count: int, decompressed_limit: int) -> None:
    """Every record of a header-checked batch decodes, exactly ``record_count`` of them with offset
    deltas 0, 1, 2, ... and no bytes left over; raises :class:`BatchRejected`."""
    if codec:
        try:
            records = decompress(codec, memoryview(data)[HEADER_SIZE:], decompressed_limit)
        except DecompressedTooLarge as e:
            raise BatchRejected(CORRUPT_MESSAGE, f"records {e}") from None
        except CompressionError as e:
            raise BatchRejected(CORRUPT_MESSAGE, f"records {e}") from None
        attrs = int.from_bytes(data[ATTRIBUTES_OFFSET:ATTRIBUTES_OFFSET + 2], "big") & ~_CODEC_MASK
        data = data[:ATTRIBUTES_OFFSET] + attrs.to_bytes(2, "big") + data[ATTRIBUTES_OFFSET + 2:HEADER_SIZE] + records
    base = int.from_bytes(data[0:8], "big", signed=True)
    n = 0
    try:
        for rec in FastBatch(data):
            if rec.offset - base != n:
                break
            n += 1
    except Exception as e:  # a record that does not decode, or bytes left over
        raise BatchRejected(CORRUPT_MESSAGE, f"records do not decode: {e}") from None
    if n < record_count:
        # a wrong offset delta: the reference walk names it (the compiled one reads offsets as base + delta)
        for i, rec in enumerate(DefaultRecordBatch(data)):
            if rec.offset - base != i:
                raise BatchRejected(INVALID_RECORD, f"record {i} has offset delta {rec.offset - base}")
    if n != record_count:
        raise BatchRejected(INVALID_RECORD, f"{n} records decoded, header says {record_count}")


def find_timestamp(data: bytes, timestamp: int, below: int) -> tuple[int, int] | None:
    """ListOffsets by time in one read of whole batches: the first record (offset < ``below``, the
    HW) whose timestamp is >= ``timestamp``, as (offset, its timestamp); None when there is none."""
    pos = 0
    while pos + HEADER_SIZE <= len(data):
        size = int.from_bytes(data[pos + 8:pos + 12], "big", signed=True) + 12
        if size < HEADER_SIZE or pos + size > len(data):
            return None
        max_ts = int.from_bytes(data[pos + 35:pos + 43], "big", signed=True)
        if max_ts >= timestamp:
            for rec in DefaultRecordBatch(data[pos:pos + size]):
                if rec.offset >= below:
                    return None
                if rec.timestamp >= timestamp:
                    return rec.offset, rec.timestamp
        pos += size
    return None


def next_offset(data: bytes) -> int:
    """The offset after the last whole batch in ``data`` (-1: none)."""
    pos, nxt = 0, -1
    while pos + HEADER_SIZE <= len(data):
        size = int.from_bytes(data[pos + 8:pos + 12], "big", signed=True) + 12
        if size < HEADER_SIZE or pos + size > len(data):
            break
        nxt = int.from_bytes(data[pos:pos + 8], "big", signed=True) + int.from_bytes(data[pos + 23:pos + 27], "big",
                                                                                         signed=True) + 1
        pos += size
    return nxt
