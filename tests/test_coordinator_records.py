"""__consumer_offsets partitioning and record encoding (kafkacommon.hashing, coordinator.records)."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings, strategies as st

from coordinator.records import (
    GroupMetadataKey, GroupValue, MemberRecord, OffsetKey, OffsetValue, RecordFormatError,
    decode_key, decode_record, decode_value, encode_key, encode_value,
)
from kafkacommon.hashing import java_string_hash, partition_for


# ------------------------------------------------------------------ hashing

@pytest.mark.parametrize("group,expected", [
    ("my-group", 12), ("a", 47), ("😀", 49), ("polygenelubricants", 0), ("", 0), ("group1", 40),
])
def test_partition_for_matches_the_jdk(group, expected):
    assert partition_for(group, 50) == expected


def test_java_string_hash_values():
    assert java_string_hash("my-group") == -1906497762
    assert java_string_hash("polygenelubricants") == -2**31
    assert java_string_hash("a") == 97
    assert java_string_hash("😀") == 0xD83D * 31 + 0xDE00   # two UTF-16 code units


def test_partition_for_rejects_no_partitions():
    with pytest.raises(ValueError):
        partition_for("g", 0)


@given(st.text(), st.integers(1, 200))
def test_partition_for_is_in_range(group, n):
    assert 0 <= partition_for(group, n) < n


# ------------------------------------------------------------------ exact bytes

def s16(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def test_offset_key_v1_bytes():
    assert encode_key(OffsetKey("g", "t", 3)) == struct.pack(">h", 1) + s16("g") + s16("t") + struct.pack(">i", 3)
    assert encode_key(OffsetKey("g", "t", 3), version=0)[:2] == b"\x00\x00"


def test_group_key_v2_bytes():
    assert encode_key(GroupMetadataKey("grp")) == b"\x00\x02" + s16("grp")


def test_offset_value_v3_and_v1_bytes():
    v3 = encode_value(OffsetValue(10, 4, "md", 1234))
    assert v3 == b"\x00\x03" + struct.pack(">qi", 10, 4) + s16("md") + struct.pack(">q", 1234)
    v1 = encode_value(OffsetValue(10, -1, "", 1234, expire_timestamp=9999))
    assert v1 == b"\x00\x01" + struct.pack(">q", 10) + s16("") + struct.pack(">qq", 1234, 9999)


def test_group_value_v3_bytes():
    value = GroupValue("consumer", 7, None, "m1", 55,
                       (MemberRecord("m1", "i1", "c", "h", 300, 10, b"S", b"AA"),))
    expected = (b"\x00\x03" + s16("consumer") + struct.pack(">i", 7) + struct.pack(">h", -1) + s16("m1")
                + struct.pack(">q", 55) + struct.pack(">i", 1)
                + s16("m1") + s16("i1") + s16("c") + s16("h") + struct.pack(">ii", 300, 10)
                + struct.pack(">i", 1) + b"S" + struct.pack(">i", 2) + b"AA")
    assert encode_value(value) == expected


# ------------------------------------------------------------------ round trips

texts = st.text(max_size=20)
i32 = st.integers(-2**31, 2**31 - 1)
i64 = st.integers(-2**63, 2**63 - 1)


@given(texts, texts, i32, st.sampled_from([0, 1]))
def test_offset_key_round_trip(group, topic, partition, version):
    key = OffsetKey(group, topic, partition)
    assert decode_key(encode_key(key, version)) == key


@given(texts)
def test_group_key_round_trip(group):
    assert decode_key(encode_key(GroupMetadataKey(group))) == GroupMetadataKey(group)


@given(i64, i32, texts, i64, st.one_of(st.none(), i64.filter(lambda x: x != -1)), st.sampled_from([None, 0, 1, 2, 3]))
def test_offset_value_round_trip_every_version(offset, epoch, metadata, commit_ts, expire, version):
    key = OffsetKey("g", "t", 0)
    if version in (0, 2):
        epoch, expire = -1, None
    elif version == 1:
        epoch = -1
    elif version == 3:
        expire = None
    elif expire is not None:   # written as v1, which has no leader epoch
        epoch = -1
    value = OffsetValue(offset, epoch, metadata, commit_ts, expire)
    data = encode_value(value, version)
    written = struct.unpack(">h", data[:2])[0]
    if version is None:
        assert written == (1 if expire is not None else 3)
    assert decode_value(key, data) == value


members = st.builds(MemberRecord, texts, st.one_of(st.none(), texts), texts, texts, i32, i32,
                    st.binary(max_size=16), st.binary(max_size=16))


@given(texts, i32, st.one_of(st.none(), texts), st.one_of(st.none(), texts), i64,
       st.lists(members, max_size=4), st.sampled_from([None, 0, 1, 2, 3]))
def test_group_value_round_trip_every_version(ptype, gen, protocol, leader, ts, member_list, version):
    if version is not None and version < 3:
        member_list = [MemberRecord(m.member_id, None, m.client_id, m.client_host, m.rebalance_timeout_ms,
                                    m.session_timeout_ms, m.subscription, m.assignment) for m in member_list]
    if version == 0:
        member_list = [MemberRecord(m.member_id, None, m.client_id, m.client_host, m.session_timeout_ms,
                                    m.session_timeout_ms, m.subscription, m.assignment) for m in member_list]
    if version is not None and version < 2:
        ts = -1
    value = GroupValue(ptype, gen, protocol, leader, ts, tuple(member_list))
    data = encode_value(value, version)
    assert struct.unpack(">h", data[:2])[0] == (3 if version is None else version)
    assert decode_value(GroupMetadataKey("g"), data) == value


def test_old_versions_decode_with_defaults():
    v0 = b"\x00\x00" + struct.pack(">q", 5) + s16("m") + struct.pack(">q", 77)
    assert decode_value(OffsetKey("g", "t", 0), v0) == OffsetValue(5, -1, "m", 77, None)
    v1_default = b"\x00\x01" + struct.pack(">q", 5) + s16("") + struct.pack(">qq", 77, -1)
    assert decode_value(OffsetKey("g", "t", 0), v1_default).expire_timestamp is None
    g0 = (b"\x00\x00" + s16("consumer") + struct.pack(">i", 2) + s16("range") + s16("m1")
          + struct.pack(">i", 1) + s16("m1") + s16("c") + s16("h") + struct.pack(">i", 10000)
          + struct.pack(">i", 0) + struct.pack(">i", 0))
    value = decode_value(GroupMetadataKey("g"), g0)
    assert value == GroupValue("consumer", 2, "range", "m1", -1,
                               (MemberRecord("m1", None, "c", "h", 10000, 10000, b"", b""),))


def test_default_v1_drops_the_leader_epoch_like_kafka():
    data = encode_value(OffsetValue(1, 7, "", 0, expire_timestamp=100))
    assert decode_value(OffsetKey("g", "t", 0), data) == OffsetValue(1, -1, "", 0, 100)


def test_lossy_explicit_versions_are_refused():
    with pytest.raises(ValueError):
        encode_value(OffsetValue(1, 5, "", 0), version=1)
    with pytest.raises(ValueError):
        encode_value(OffsetValue(1, -1, "", 0, 10), version=3)
    with pytest.raises(ValueError):
        encode_value(GroupValue("c", 1, "p", "m", 5, ()), version=1)
    with pytest.raises(ValueError):
        encode_key(OffsetKey("g", "t", 0), version=2)


def test_tombstones():
    assert encode_value(None) is None
    assert decode_value(OffsetKey("g", "t", 0), None) is None
    assert decode_value(GroupMetadataKey("g"), None) is None
    key = encode_key(GroupMetadataKey("g"))
    assert decode_record(key, None) == (GroupMetadataKey("g"), None)


# ------------------------------------------------------------------ malformed input

GOOD_OFFSET_KEY = encode_key(OffsetKey("group", "topic", 1))
GOOD_GROUP_VALUE = encode_value(GroupValue("consumer", 1, "range", "m", 5,
                                           (MemberRecord("m", None, "c", "h", 1, 1, b"sub", b"as"),)))


@pytest.mark.parametrize("data", [
    b"", b"\x00", b"\x00\x05" + s16("g"), b"\xff\xff", GOOD_OFFSET_KEY[:-1], GOOD_OFFSET_KEY + b"\x00",
    b"\x00\x01" + struct.pack(">h", -1) + s16("t") + b"\x00\x00\x00\x00",   # null non-nullable group
    b"\x00\x02" + struct.pack(">h", 4) + b"\xff\xfe\xfd\xfc",                # invalid UTF-8
    b"\x00\x02" + struct.pack(">h", -7),
])
def test_malformed_keys(data):
    with pytest.raises(RecordFormatError):
        decode_key(data)


@pytest.mark.parametrize("cut", range(len(GOOD_GROUP_VALUE)))
def test_every_truncated_group_value_is_a_format_error(cut):
    with pytest.raises(RecordFormatError):
        decode_value(GroupMetadataKey("g"), GOOD_GROUP_VALUE[:cut])


def test_malformed_values():
    gk, ok = GroupMetadataKey("g"), OffsetKey("g", "t", 0)
    bad = [
        (ok, b"\x00\x04" + b"\x00" * 30),                                   # unknown version
        (ok, encode_value(OffsetValue(1, -1, "", 0)) + b"x"),                # trailing bytes
        (gk, b"\x00\x03" + s16("c") + struct.pack(">i", 1) + s16("p") + s16("l") + struct.pack(">q", 0)
         + struct.pack(">i", -2)),                                          # negative member count
        (gk, GOOD_GROUP_VALUE[:-7] + struct.pack(">i", -1) + b"\x00\x00\x00"),   # negative bytes length
        (gk, "not bytes"),
    ]
    for key, data in bad:
        with pytest.raises(RecordFormatError) as info:
            decode_value(key, data)  # type: ignore[arg-type]
        assert str(info.value)


@settings(max_examples=300)
@given(st.binary(max_size=64))
def test_random_bytes_never_raise_anything_but_format_errors(data):
    for decode in (decode_key, lambda d: decode_value(OffsetKey("g", "t", 0), d),
                   lambda d: decode_value(GroupMetadataKey("g"), d)):
        try:
            decode(data)
        except RecordFormatError:
            pass


@settings(max_examples=300, deadline=None)
@given(group=st.text(max_size=40), topic=st.text(max_size=40),
       partition=st.integers(-(1 << 31), (1 << 31) - 1), offset=st.integers(-(1 << 63), (1 << 63) - 1),
       epoch=st.integers(-(1 << 31), (1 << 31) - 1), metadata=st.text(max_size=60),
       ts=st.integers(-(1 << 63), (1 << 63) - 1))
def test_the_fast_offset_encoding_is_the_checked_one(group, topic, partition, offset, epoch, metadata, ts):
    """The write path encodes default-version offset records without the field-by-field writer;
    the bytes must be the checked writer's (asked for explicitly by giving the version)."""
    k = OffsetKey(group, topic, partition)
    v = OffsetValue(offset, epoch, metadata, ts)
    assert encode_key(k) == encode_key(k, version=1)
    assert encode_value(v) == encode_value(v, version=3)
    assert decode_record(encode_key(k), encode_value(v)) == (k, v)


@pytest.mark.parametrize("key, value, message", [
    (OffsetKey("g", "t", 1 << 31), None, "partition"),
    (OffsetKey("g", "t", True), None, "partition"),
    (OffsetKey("g" * 40000, "t", 0), None, "group"),
    (None, OffsetValue(1 << 63, -1, "", 0), "offset"),
    (None, OffsetValue(0, 1 << 31, "", 0), "leader_epoch"),
    (None, OffsetValue(0, -1, "m" * 40000, 0), "metadata"),
    (None, OffsetValue(0, -1, None, 0), "metadata"),
])
def test_bad_fields_still_get_the_checked_error(key, value, message):
    with pytest.raises(ValueError, match=message):
        encode_key(key) if key is not None else encode_value(value)
