"""The records of __transaction_state, in Kafka 2.8's exact binary encoding.

Kafka 2.8's ``TransactionLogKey`` and ``TransactionLogValue`` (both version 0 only), written with
``MessageUtil.toVersionPrefixedBytes``: an int16 version, then the fields in order, big-endian; a string
is an int16 length + UTF-8 bytes; an array an int32 count (-1 = null) + its elements.

==========================  =======  ======================================================================
record                      version  fields
==========================  =======  ======================================================================
key                         0        transactional_id
value                       0        producer_id:int64, producer_epoch:int16, transaction_timeout_ms:int32,
                                     transaction_status:int8, transaction_partitions?[topic,
                                     partition_ids[int32]], transaction_last_update_timestamp_ms:int64,
                                     transaction_start_timestamp_ms:int64
==========================  =======  ======================================================================

``?`` marks a nullable array: Kafka writes null for a transaction in state Empty (and refuses to write an
Empty one with partitions), and ignores the partitions of an Empty value it reads.  Kafka groups the
partitions by topic in a hash map's order; here the topics are sorted, and each topic's partitions too,
so the same metadata always encodes to the same bytes.  A tombstone (the key with a null value) removes
an expired transactional id.

The status byte is the state's (transactions.state: Empty 0 ... PrepareEpochFence 7; Kafka never writes
PrepareEpochFence or Dead).  Malformed bytes raise :class:`RecordFormatError` naming what was wrong.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

__all__ = ["RecordFormatError", "TxnKey", "TxnValue", "encode_key", "decode_key", "encode_value", "decode_value",
           "KEY_VERSION", "VALUE_VERSION"]

KEY_VERSION = 0
VALUE_VERSION = 0

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">hqhib")          # version, producer id, epoch, timeout, status
_TAIL = struct.Struct(">qq")             # last update, start


class RecordFormatError(ValueError):
    """Bytes that are not a valid __transaction_state key or value."""


class TxnKey(NamedTuple):
    transactional_id: str


class TxnValue(NamedTuple):
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int                                        # the state's byte (transactions.state)
    partitions: frozenset[tuple[str, int]]             # empty for an Empty transaction (null on the wire)
    last_update_ms: int
    start_ms: int                                      # -1: no transaction started


def _string(s: str, what: str) -> bytes:
    if not isinstance(s, str):
        raise ValueError(f"{what} must be a str, got {type(s).__name__}")
    data = s.encode("utf-8")
    if len(data) > 0x7FFF:
        raise ValueError(f"{what} is {len(data)} bytes, longer than 32767")
    return _I16.pack(len(data)) + data


def encode_key(key: TxnKey | str) -> bytes:
    txn_id = key if isinstance(key, str) else key.transactional_id
    return _I16.pack(KEY_VERSION) + _string(txn_id, "transactional_id")


def encode_value(value: TxnValue, empty_status: int = 0) -> bytes:
    """The value's bytes; ``empty_status`` is Empty's byte (its partitions are written as null)."""
    if value.status == empty_status and value.partitions:
        raise ValueError(f"a transaction in state Empty has no partitions, got {sorted(value.partitions)}")
    try:
        head = _HEAD.pack(VALUE_VERSION, value.producer_id, value.producer_epoch, value.timeout_ms, value.status)
        tail = _TAIL.pack(value.last_update_ms, value.start_ms)
    except struct.error as e:
        raise ValueError(f"a field of {value} does not fit its type: {e}") from None
    if value.status == empty_status:
        return head + _I32.pack(-1) + tail
    by_topic: dict[str, list[int]] = {}
    for topic, partition in value.partitions:
        by_topic.setdefault(topic, []).append(partition)
    parts = [head, _I32.pack(len(by_topic))]
    for topic in sorted(by_topic):
        ids = sorted(by_topic[topic])
        parts.append(_string(topic, "topic"))
        parts.append(_I32.pack(len(ids)))
        parts.append(struct.pack(f">{len(ids)}i", *ids))
    parts.append(tail)
    return b"".join(parts)


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise RecordFormatError(f"{what}: expected bytes, got {type(data).__name__}")
        self.data, self.pos, self.what = bytes(data), 0, what

    def take(self, st: struct.Struct, field: str) -> tuple:
        if st.size > len(self.data) - self.pos:
            raise RecordFormatError(f"{self.what}: truncated reading {field} at byte {self.pos}")
        got = st.unpack_from(self.data, self.pos)
        self.pos += st.size
        return got

    def string(self, field: str) -> str:
        at = self.pos
        (n,) = self.take(_I16, field + " length")
        if n < 0 or n > len(self.data) - self.pos:
            raise RecordFormatError(f"{self.what}: {field} has invalid length {n} at byte {at}")
        raw = self.data[self.pos:self.pos + n]
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise RecordFormatError(f"{self.what}: {field} at byte {at} is not valid UTF-8 ({e.reason})") from None

    def end(self) -> None:
        if self.pos != len(self.data):
            raise RecordFormatError(f"{self.what}: {len(self.data) - self.pos} unexpected trailing bytes")


def decode_key(data: bytes) -> TxnKey:
    r = _Reader(data, "transaction log key")
    (version,) = r.take(_I16, "version")
    if version != KEY_VERSION:
        raise RecordFormatError(f"transaction log key: unknown version {version}")
    key = TxnKey(r.string("transactional_id"))
    r.end()
    return key


def decode_value(data: bytes | None, empty_status: int = 0) -> TxnValue | None:
    """None for a tombstone; the partitions of an Empty value are ignored, as Kafka's reader does."""
    if data is None:
        return None
    r = _Reader(data, "transaction log value")
    version, pid, epoch, timeout, status = r.take(_HEAD, "the value's head")
    if version != VALUE_VERSION:
        raise RecordFormatError(f"transaction log value: unknown version {version}")
    (count,) = r.take(_I32, "partitions count")
    partitions: set[tuple[str, int]] = set()
    if count < -1:
        raise RecordFormatError(f"transaction log value: invalid partitions count {count}")
    for _ in range(max(count, 0)):
        topic = r.string("topic")
        (n,) = r.take(_I32, "partition ids count")
        if n < 0 or 4 * n > len(r.data) - r.pos:
            raise RecordFormatError(f"transaction log value: invalid partition ids count {n}")
        for p in struct.unpack_from(f">{n}i", r.data, r.pos):
            partitions.add((topic, p))
        r.pos += 4 * n
    last_update, start = r.take(_TAIL, "timestamps")
    r.end()
    return TxnValue(pid, epoch, timeout, status, frozenset() if status == empty_status else frozenset(partitions),
                    last_update, start)
