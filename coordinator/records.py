"""The records of __consumer_offsets, in Kafka's exact binary encoding.

This is the single definition of the format: the coordinator's write path, its
replay on failover and the analysis pipeline all use it, so it depends on
nothing but the standard library.

Encoding (Kafka's generated ``MessageUtil.toVersionPrefixedBytes``): an int16
version, then the fields of that version in order, big-endian; a string is an
int16 length + UTF-8 bytes (length -1 = null, for nullable fields only); bytes
are an int32 length + the bytes; an array is an int32 count + the elements.

==========================  =======  ==================================================
record                      version  fields
==========================  =======  ==================================================
key: offset commit          0, 1     group, topic, partition:int32  (writers use 1)
key: group metadata         2        group
value: offset commit        0, 2     offset:int64, metadata, commit_timestamp:int64
                            1        offset, metadata, commit_timestamp, expire_timestamp:int64
                            3        offset, leader_epoch:int32, metadata, commit_timestamp
value: group metadata       0        protocol_type, generation:int32, protocol?, leader?,
                                     members[member_id, client_id, client_host,
                                     session_timeout:int32, subscription:bytes, assignment:bytes]
                            1        members gain rebalance_timeout:int32 (before session_timeout)
                            2        current_state_timestamp:int64 (before members)
                            3        members gain group_instance_id? (after member_id)
==========================  =======  ==================================================

``?`` marks a nullable string. A tombstone is the key with a null value.

Python-side conventions (the same as Kafka's ``OffsetAndMetadata``/loader):
``leader_epoch`` -1 means none; ``expire_timestamp`` None means "no per-offset
expiry" (a v1 value holding -1 decodes to None, Kafka's DEFAULT_TIMESTAMP);
``current_state_timestamp`` -1 means unknown (v0/v1 values decode to -1); a v0
member's rebalance timeout is its session timeout.

Writers (``encode_value`` without ``version``) use what Kafka 2.8 with the
default inter-broker protocol writes: offset values v3, or v1 when an expire
timestamp is set (a retention time was requested; v1 has no leader epoch, so
it is dropped, as in Kafka); group values v3.  Passing
``version`` writes an older version, and refuses (ValueError) to drop a field
that holds information, so every version round-trips exactly.

Malformed bytes raise :class:`RecordFormatError` (a ValueError) naming what was
wrong and where; never IndexError or struct.error.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import NamedTuple, Union

__all__ = [
    "RecordFormatError", "OffsetKey", "GroupMetadataKey", "OffsetValue", "MemberRecord", "GroupValue",
    "Key", "Value", "encode_key", "encode_records", "decode_key", "encode_value", "decode_value", "decode_record",
    "OFFSET_KEY_VERSION", "GROUP_KEY_VERSION", "OFFSET_VALUE_VERSION", "GROUP_VALUE_VERSION",
]

OFFSET_KEY_VERSION = 1     # OffsetCommitKey.HIGHEST_SUPPORTED_VERSION
GROUP_KEY_VERSION = 2      # GroupMetadataKey's only version
OFFSET_VALUE_VERSION = 3   # IBP >= 2.1-IV1, no expire timestamp
GROUP_VALUE_VERSION = 3    # IBP >= 2.3-IV0


class RecordFormatError(ValueError):
    """Bytes that are not a valid __consumer_offsets key or value."""


# ---------------------------------------------------------------- data

class OffsetKey(NamedTuple):   # NamedTuples: a commit of 100 partitions makes 200 of these
    group: str
    topic: str
    partition: int


class GroupMetadataKey(NamedTuple):
    group: str


class OffsetValue(NamedTuple):
    offset: int
    leader_epoch: int              # -1 = none
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None = None   # set only by v1 (a requested retention time)


@dataclass(frozen=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupValue:
    protocol_type: str             # "" = none (a simple group)
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int   # -1 = unknown
    members: tuple[MemberRecord, ...] = ()


Key = Union[OffsetKey, GroupMetadataKey]
Value = Union[OffsetValue, GroupValue]

# ---------------------------------------------------------------- writer

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def _int(self, st: struct.Struct, bits: int, v: int, what: str) -> None:
        if not isinstance(v, int) or isinstance(v, bool):
            raise ValueError(f"{what} must be an int, got {type(v).__name__}")
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        if not lo <= v <= hi:
            raise ValueError(f"{what}={v} does not fit in int{bits}")
        self.parts.append(st.pack(v))

    def i16(self, v: int, what: str) -> None:
        self._int(_I16, 16, v, what)

    def i32(self, v: int, what: str) -> None:
        self._int(_I32, 32, v, what)

    def i64(self, v: int, what: str) -> None:
        self._int(_I64, 64, v, what)

    def string(self, v: str | None, what: str, nullable: bool = False) -> None:
        if v is None:
            if not nullable:
                raise ValueError(f"{what} is not nullable")
            self.parts.append(_I16.pack(-1))
            return
        if not isinstance(v, str):
            raise ValueError(f"{what} must be a str, got {type(v).__name__}")
        data = v.encode("utf-8")
        if len(data) > 0x7FFF:
            raise ValueError(f"{what} is {len(data)} bytes, longer than 32767")
        self.parts.append(_I16.pack(len(data)))
        self.parts.append(data)

    def bytes_(self, v: bytes, what: str) -> None:
        if not isinstance(v, (bytes, bytearray, memoryview)):
            raise ValueError(f"{what} must be bytes, got {type(v).__name__}")
        data = bytes(v)
        self.parts.append(_I32.pack(len(data)))
        self.parts.append(data)

    def result(self) -> bytes:
        return b"".join(self.parts)


# ---------------------------------------------------------------- reader

class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise RecordFormatError(f"{what}: expected bytes, got {type(data).__name__}")
        self.data = bytes(data)
        self.pos = 0
        self.what = what

    def _take(self, n: int, field: str) -> bytes:
        if n > len(self.data) - self.pos:
            raise RecordFormatError(
                f"{self.what}: truncated reading {field}: need {n} bytes at byte {self.pos}, "
                f"only {len(self.data) - self.pos} left")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def i16(self, field: str) -> int:
        return _I16.unpack(self._take(2, field))[0]

    def i32(self, field: str) -> int:
        return _I32.unpack(self._take(4, field))[0]

    def i64(self, field: str) -> int:
        return _I64.unpack(self._take(8, field))[0]

    def string(self, field: str, nullable: bool = False) -> str | None:
        at = self.pos
        n = self.i16(field + " length")
        if n < 0:
            if n == -1 and nullable:
                return None
            raise RecordFormatError(f"{self.what}: {field} has invalid length {n} at byte {at}")
        raw = self._take(n, field)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise RecordFormatError(f"{self.what}: {field} at byte {at} is not valid UTF-8 ({e.reason})") from None

    def bytes_(self, field: str) -> bytes:
        at = self.pos
        n = self.i32(field + " length")
        if n < 0:
            raise RecordFormatError(f"{self.what}: {field} has invalid length {n} at byte {at}")
        return self._take(n, field)

    def end(self) -> None:
        if self.pos != len(self.data):
            raise RecordFormatError(
                f"{self.what}: {len(self.data) - self.pos} unexpected trailing bytes at byte {self.pos}")


# ---------------------------------------------------------------- keys

_KEY_HEADS: dict[tuple[str, str], bytes] = {}  # (group, topic) -> the v1 key's bytes before the partition
_INT32_RANGE = range(-(1 << 31), 1 << 31)
_V3_HEAD = struct.Struct(">hqi")


def _fast_offset_key(key: OffsetKey) -> bytes | None:
    """The default (v1) offset key from a cached (version, group, topic) prefix: a commit of
    100 partitions encodes the same prefix 100 times.  None: take the checked path."""
    p = key.partition
    if type(p) is not int or p not in _INT32_RANGE:
        return None
    head = _KEY_HEADS.get((key.group, key.topic))
    if head is None:
        w = _Writer()  # validates the strings once, as the checked path does
        w.i16(OFFSET_KEY_VERSION, "version")
        w.string(key.group, "group")
        w.string(key.topic, "topic")
        head = w.result()
        if len(_KEY_HEADS) < 100_000:
            _KEY_HEADS[(key.group, key.topic)] = head
    return head + _I32.pack(p)


def _fast_offset_value(value: OffsetValue) -> bytes | None:
    """The default (v3) offset value in two struct calls.  None: take the checked path."""
    o, e, m, ts = value.offset, value.leader_epoch, value.metadata, value.commit_timestamp
    if value.expire_timestamp is not None or type(o) is not int or type(e) is not int \
            or type(ts) is not int or type(m) is not str:
        return None
    data = m.encode("utf-8") if m else b""
    if len(data) > 0x7FFF:
        return None
    try:
        return _V3_HEAD.pack(OFFSET_VALUE_VERSION, o, e) + _I16.pack(len(data)) + data + _I64.pack(ts)
    except struct.error:  # out of range: the checked path names the field
        return None


def encode_key(key: Key, version: int | None = None) -> bytes:
    """OffsetKey as v1 (or v0), GroupMetadataKey as v2."""
    if version is None and type(key) is OffsetKey:
        fast = _fast_offset_key(key)
        if fast is not None:
            return fast
    w = _Writer()
    if isinstance(key, OffsetKey):
        v = OFFSET_KEY_VERSION if version is None else version
        if v not in (0, 1):
            raise ValueError(f"offset commit keys have versions 0-1, not {v}")
        w.i16(v, "version")
        w.string(key.group, "group")
        w.string(key.topic, "topic")
        w.i32(key.partition, "partition")
    elif isinstance(key, GroupMetadataKey):
        v = GROUP_KEY_VERSION if version is None else version
        if v != 2:
            raise ValueError(f"group metadata keys have version 2 only, not {v}")
        w.i16(v, "version")
        w.string(key.group, "group")
    else:
        raise ValueError(f"not a __consumer_offsets key: {key!r}")
    return w.result()


def encode_records(records: list[tuple[Key, Value | None]]) -> list[tuple[bytes, bytes | None]]:
    """``(encode_key(k), encode_value(v))`` of each record, in the versions writers use: the same
    bytes, with the default offset records (a commit's) encoded in one loop."""
    out: list[tuple[bytes, bytes | None]] = []
    put = out.append
    fast_key, fast_value = _fast_offset_key, _fast_offset_value
    for k, v in records:
        kb = fast_key(k) if type(k) is OffsetKey else None
        vb = fast_value(v) if type(v) is OffsetValue else None
        put((encode_key(k) if kb is None else kb, encode_value(v) if vb is None else vb))
    return out


def decode_key(data: bytes) -> Key:
    r = _Reader(data, "key")
    version = r.i16("version")
    if version in (0, 1):
        key: Key = OffsetKey(r.string("group"), r.string("topic"), r.i32("partition"))  # type: ignore[arg-type]
    elif version == 2:
        key = GroupMetadataKey(r.string("group"))  # type: ignore[arg-type]
    else:
        raise RecordFormatError(f"key: unknown key version {version}")
    r.end()
    return key


# ---------------------------------------------------------------- values

def _offset_value_version(value: OffsetValue, version: int | None) -> int:
    if version is None:
        return 1 if value.expire_timestamp is not None else OFFSET_VALUE_VERSION
    if version not in (0, 1, 2, 3):
        raise ValueError(f"offset commit values have versions 0-3, not {version}")
    if version != 1 and value.expire_timestamp is not None:
        raise ValueError(f"offset commit value v{version} cannot hold an expire timestamp")
    if version != 3 and value.leader_epoch != -1:
        raise ValueError(f"offset commit value v{version} cannot hold a leader epoch")
    return version


def _group_value_version(value: GroupValue, version: int | None) -> int:
    if version is None:
        return GROUP_VALUE_VERSION
    if version not in (0, 1, 2, 3):
        raise ValueError(f"group metadata values have versions 0-3, not {version}")
    if version < 2 and value.current_state_timestamp != -1:
        raise ValueError(f"group metadata value v{version} cannot hold a current state timestamp")
    for m in value.members:
        if version < 3 and m.group_instance_id is not None:
            raise ValueError(f"group metadata value v{version} cannot hold a group instance id")
        if version == 0 and m.rebalance_timeout_ms != m.session_timeout_ms:
            raise ValueError("group metadata value v0 has no rebalance timeout (it must equal the session timeout)")
    return version


def encode_value(value: Value | None, version: int | None = None) -> bytes | None:
    """The value bytes (None for a tombstone); the version Kafka 2.8 writes unless ``version`` is given."""
    if value is None:
        return None
    if version is None and type(value) is OffsetValue:
        fast = _fast_offset_value(value)
        if fast is not None:
            return fast
    w = _Writer()
    if isinstance(value, OffsetValue):
        v = _offset_value_version(value, version)
        w.i16(v, "version")
        w.i64(value.offset, "offset")
        if v >= 3:
            w.i32(value.leader_epoch, "leader_epoch")
        w.string(value.metadata, "metadata")
        w.i64(value.commit_timestamp, "commit_timestamp")
        if v == 1:
            w.i64(-1 if value.expire_timestamp is None else value.expire_timestamp, "expire_timestamp")
    elif isinstance(value, GroupValue):
        v = _group_value_version(value, version)
        w.i16(v, "version")
        w.string(value.protocol_type, "protocol_type")
        w.i32(value.generation, "generation")
        w.string(value.protocol, "protocol", nullable=True)
        w.string(value.leader, "leader", nullable=True)
        if v >= 2:
            w.i64(value.current_state_timestamp, "current_state_timestamp")
        w.i32(len(value.members), "member count")
        for m in value.members:
            w.string(m.member_id, "member_id")
            if v >= 3:
                w.string(m.group_instance_id, "group_instance_id", nullable=True)
            w.string(m.client_id, "client_id")
            w.string(m.client_host, "client_host")
            if v >= 1:
                w.i32(m.rebalance_timeout_ms, "rebalance_timeout_ms")
            w.i32(m.session_timeout_ms, "session_timeout_ms")
            w.bytes_(m.subscription, "subscription")
            w.bytes_(m.assignment, "assignment")
    else:
        raise ValueError(f"not a __consumer_offsets value: {value!r}")
    return w.result()


def _decode_offset_value(data: bytes) -> OffsetValue:
    r = _Reader(data, "offset commit value")
    v = r.i16("version")
    if v not in (0, 1, 2, 3):
        raise RecordFormatError(f"offset commit value: unknown version {v}")
    offset = r.i64("offset")
    leader_epoch = r.i32("leader_epoch") if v >= 3 else -1
    metadata = r.string("metadata")
    commit_ts = r.i64("commit_timestamp")
    expire: int | None = None
    if v == 1:
        expire = r.i64("expire_timestamp")
        if expire == -1:
            expire = None
    r.end()
    return OffsetValue(offset, leader_epoch, metadata, commit_ts, expire)  # type: ignore[arg-type]


def _decode_group_value(data: bytes) -> GroupValue:
    r = _Reader(data, "group metadata value")
    v = r.i16("version")
    if v not in (0, 1, 2, 3):
        raise RecordFormatError(f"group metadata value: unknown version {v}")
    protocol_type = r.string("protocol_type")
    generation = r.i32("generation")
    protocol = r.string("protocol", nullable=True)
    leader = r.string("leader", nullable=True)
    state_ts = r.i64("current_state_timestamp") if v >= 2 else -1
    at = r.pos
    count = r.i32("member count")
    if count < 0:
        raise RecordFormatError(f"group metadata value: invalid member count {count} at byte {at}")
    members = []
    for i in range(count):
        member_id = r.string(f"members[{i}].member_id")
        instance = r.string(f"members[{i}].group_instance_id", nullable=True) if v >= 3 else None
        client_id = r.string(f"members[{i}].client_id")
        client_host = r.string(f"members[{i}].client_host")
        rebalance = r.i32(f"members[{i}].rebalance_timeout_ms") if v >= 1 else None
        session = r.i32(f"members[{i}].session_timeout_ms")
        subscription = r.bytes_(f"members[{i}].subscription")
        assignment = r.bytes_(f"members[{i}].assignment")
        members.append(MemberRecord(member_id, instance, client_id, client_host,  # type: ignore[arg-type]
                                    session if rebalance is None else rebalance, session,
                                    subscription, assignment))
    r.end()
    return GroupValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))  # type: ignore[arg-type]


def decode_value(key: Key, data: bytes | None) -> Value | None:
    """The value for ``key`` (from :func:`decode_key`); None for a tombstone (``data`` None)."""
    if data is None:
        return None
    if isinstance(key, OffsetKey):
        return _decode_offset_value(data)
    if isinstance(key, GroupMetadataKey):
        return _decode_group_value(data)
    raise RecordFormatError(f"not a __consumer_offsets key: {key!r}")


def decode_record(key: bytes, value: bytes | None) -> tuple[Key, Value | None]:
    """Decode one record: (key, value or None for a tombstone)."""
    k = decode_key(key)
    return k, decode_value(k, value)
