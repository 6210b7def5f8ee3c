"""The leader's topic-config rules on a client's batch before it is appended (Kafka 2.8's LogValidator),
as pure functions: ``message.timestamp.difference.max.ms``, ``message.timestamp.type`` and
``compression.type``.

A batch that breaks no rule and needs no change is appended as it arrived (the common case: the defaults
change nothing, and nothing is decoded).  ``LogAppendTime`` stamps the batch's max timestamp with the
broker's clock and sets its timestamp type, in place (Kafka's ``setMaxTimestamp``); a ``compression.type``
other than ``producer`` that differs from the batch's codec rebuilds the batch with that codec, keeping its
records, timestamps, headers and producer fields (Kafka's ``buildRecordsAndAssignOffsets``).  No clock here:
the caller passes ``now_ms``.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from kafkacommon.errors import INVALID_TIMESTAMP
from kafkacommon.record_batch import (ATTRIBUTES_OFFSET, CRC_OFFSET, GZIP, LOG_APPEND_TIME, LZ4, NO_COMPRESSION,
                                      SNAPPY, TIMESTAMP_TYPE_MASK, ZSTD, crc32c, decode_batch, encode_batch,
                                      peek_header)
from kafkacommon.topic_config import LONG_MAX, LogConfig

#: ``compression.type`` -> the codec a stored batch gets (``producer``: the producer's own)
TARGET_CODECS = {"uncompressed": NO_COMPRESSION, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
_MAX_TS_OFFSET = 35   # baseOffset 8, length 4, epoch 4, magic 1, crc 4, attributes 2, lastOffsetDelta 4, firstTs 8


class TimestampOutOfRange(ValueError):
    """A record's timestamp is further from the broker's clock than ``message.timestamp.difference.max.ms``
    allows (INVALID_TIMESTAMP)."""

    code = INVALID_TIMESTAMP


class Prepared(NamedTuple):
    data: bytes | bytearray      # what to append
    max_timestamp: int
    log_append_time: int         # the stamp given (the produce answer's log_append_time_ms), -1: none


def needs_work(lc: LogConfig) -> bool:
    """Whether a batch must be looked at at all under ``lc`` (the defaults: no)."""
    return (lc.compression_type != "producer" or lc.log_append_time
            or lc.message_timestamp_difference_max_ms != LONG_MAX)


def prepare_batch(data: bytes | bytearray, lc: LogConfig, now_ms: int) -> Prepared:
    """A client's checked batch (listener/records.py) made ready for the log under ``lc``; raises
    TimestampOutOfRange."""
    header = peek_header(data)
    if not needs_work(lc):
        return Prepared(data, header.max_timestamp, -1)
    target = TARGET_CODECS.get(lc.compression_type, header.compression)
    decoded = None
    if not lc.log_append_time and lc.message_timestamp_difference_max_ms != LONG_MAX:
        decoded, _ = decode_batch(data)
        bound = lc.message_timestamp_difference_max_ms
        for rec in decoded.records:
            if rec.timestamp_ms >= 0 and abs(rec.timestamp_ms - now_ms) > bound:
                raise TimestampOutOfRange(
                    f"Timestamp {rec.timestamp_ms} of message with offset {rec.offset} is out of range. The "
                    f"timestamp should be within [{now_ms - bound}, {now_ms + bound}]")
    stamp = now_ms if lc.log_append_time else -1
    if target != header.compression:
        decoded = decoded or decode_batch(data)[0]
        base_ts = decoded.base_timestamp
        records = [(r.key, r.value, r.timestamp_ms, r.headers) for r in decoded.records]
        rebuilt = bytearray(encode_batch(
            decoded.base_offset, decoded.leader_epoch, records, offset_deltas=[r.offset - decoded.base_offset
                                                                              for r in decoded.records],
            last_offset_delta=decoded.last_offset_delta, base_timestamp=base_ts,
            producer_id=decoded.producer_id, producer_epoch=decoded.producer_epoch,
            base_sequence=decoded.base_sequence, compression=target))
        data, max_ts = rebuilt, peek_header(rebuilt).max_timestamp
    else:
        data, max_ts = bytearray(data), header.max_timestamp
    if stamp >= 0:
        set_log_append_time(data, stamp)
        max_ts = stamp
    return Prepared(data, max_ts, stamp)


def set_log_append_time(data: bytearray, now_ms: int) -> None:
    """Kafka's ``DefaultRecordBatch.setMaxTimestamp(LOG_APPEND_TIME, now)``: the timestamp type bit and the
    max timestamp, then the CRC again (both lie inside it)."""
    attrs = int.from_bytes(data[ATTRIBUTES_OFFSET:ATTRIBUTES_OFFSET + 2], "big") | TIMESTAMP_TYPE_MASK
    data[ATTRIBUTES_OFFSET:ATTRIBUTES_OFFSET + 2] = attrs.to_bytes(2, "big")
    struct.pack_into(">q", data, _MAX_TS_OFFSET, now_ms)
    struct.pack_into(">I", data, CRC_OFFSET, crc32c(memoryview(data)[ATTRIBUTES_OFFSET:]))


def leader_codec(lc: LogConfig) -> int:
    """The codec of a batch the broker builds itself (the group coordinator's appends): ``producer`` and
    ``uncompressed`` leave it uncompressed."""
    return TARGET_CODECS.get(lc.compression_type, NO_COMPRESSION)


def leader_timestamp_type(lc: LogConfig) -> int:
    return LOG_APPEND_TIME if lc.log_append_time else 0
