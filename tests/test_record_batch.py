"""kafkacommon/record_batch.py, batch_scan.py, varint.py: Kafka record batch format v2 (magic 2, CRC-32C)."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings, strategies as st

from kafkacommon import record_batch as rb
from kafkacommon.batch_scan import iter_batches, scan_batches, scan_headers
from kafkacommon.record_batch import (HEADER_SIZE, CorruptBatchError, Record, crc32c, decode_batch, encode_batch,
                                      peek_header, validate_batch)
from kafkacommon.varint import decode_varint, decode_varlong, encode_varint, encode_varlong

maybe_bytes = st.one_of(st.none(), st.binary(max_size=64))
timestamps = st.integers(min_value=0, max_value=2**45)
record_lists = st.lists(st.tuples(maybe_bytes, maybe_bytes, timestamps), min_size=1, max_size=20)


def test_crc32c_is_castagnoli():
    # the standard check value of CRC-32C (not zlib's CRC-32, which gives 0xCBF43926)
    assert crc32c(b"123456789") == 0xE3069283


@settings(max_examples=300, deadline=None)
@given(base=st.integers(min_value=0, max_value=2**50), epoch=st.integers(min_value=-1, max_value=2**31 - 1),
       records=record_lists, prefix=st.binary(max_size=8))
def test_round_trip(base, epoch, records, prefix):
    raw = encode_batch(base, epoch, records)
    buf = prefix + raw + b"trailing"
    batch, nxt = decode_batch(buf, len(prefix))
    assert nxt == len(prefix) + len(raw)
    assert batch.base_offset == base and batch.leader_epoch == epoch
    assert batch.size_bytes == len(raw)
    assert batch.last_offset == base + len(records) - 1
    assert batch.max_timestamp == max(ts for _, _, ts in records)
    assert batch.base_timestamp == records[0][2]
    assert batch.records == tuple(Record(base + i, ts, k, v) for i, (k, v, ts) in enumerate(records))
    header = peek_header(buf, len(prefix))
    assert (header.base_offset, header.leader_epoch, header.last_offset, header.max_timestamp,
            header.size_bytes, header.record_count) == (base, epoch, batch.last_offset,
                                                        batch.max_timestamp, len(raw), len(records))


def test_exact_byte_layout_of_a_one_record_batch():
    raw = encode_batch(7, 2, [(b"a", b"b", 5)])
    # record: attributes 0, timestampDelta 0, offsetDelta 0, keyLength 1 (zigzag 2), 'a',
    # valueLength 1 (zigzag 2), 'b', headerCount 0 -> 8 bytes, length prefix zigzag(8) = 0x10
    record = bytes([0x10, 0x00, 0x00, 0x00, 0x02, 0x61, 0x02, 0x62, 0x00])
    after_crc = (
        bytes.fromhex("0000")                  # attributes
        + bytes.fromhex("00000000")            # lastOffsetDelta
        + bytes.fromhex("0000000000000005")    # baseTimestamp
        + bytes.fromhex("0000000000000005")    # maxTimestamp
        + bytes.fromhex("ffffffffffffffff")    # producerId -1
        + bytes.fromhex("ffff")                # producerEpoch -1
        + bytes.fromhex("ffffffff")            # baseSequence -1
        + bytes.fromhex("00000001")            # recordCount
        + record
    )
    assert len(after_crc) == 70 - 21
    expected = (
        bytes.fromhex("0000000000000007")      # baseOffset
        + bytes.fromhex("0000003a")            # batchLength = 70 - 12 = 58
        + bytes.fromhex("00000002")            # partitionLeaderEpoch
        + bytes.fromhex("02")                  # magic
        + struct.pack(">I", crc32c(after_crc))
        + after_crc
    )
    assert raw == expected
    assert raw[16] == 2                                          # magic at byte 16
    assert struct.unpack(">I", raw[17:21])[0] == crc32c(raw[21:])  # crc at 17..21 over 21..end
    assert raw[21:23] == b"\x00\x00"                             # attributes at 21
    assert HEADER_SIZE == 61 and raw[61:] == record


def test_every_flipped_bit_after_the_crc_field_is_detected():
    raw = encode_batch(100, 4, [(b"key", b"value", 1_000), (None, b"x" * 20, 1_010), (b"k", None, 990)])
    for byte in range(17, len(raw)):
        for bit in range(8):
            bad = bytearray(raw)
            bad[byte] ^= 1 << bit
            with pytest.raises(CorruptBatchError) as info:
                decode_batch(bytes(bad), 0)
            assert "CRC" in info.value.reason, (byte, bit)
            assert info.value.position == 0 and not info.value.incomplete


def test_leader_epoch_and_base_offset_are_outside_the_crc():
    raw = bytearray(encode_batch(0, 1, [(None, b"v", 1)]))
    struct.pack_into(">q", raw, 0, 50)
    struct.pack_into(">i", raw, 12, 9)
    batch, _ = decode_batch(bytes(raw), 0)
    assert (batch.base_offset, batch.leader_epoch, batch.records[0].offset) == (50, 9, 50)


def test_bad_magic_and_length_overrun():
    raw = encode_batch(0, 0, [(None, b"v", 1)])
    bad = bytearray(raw)
    bad[16] = 1
    with pytest.raises(CorruptBatchError, match="magic"):
        decode_batch(bytes(bad), 0)
    bad = bytearray(raw)
    struct.pack_into(">i", bad, 8, len(raw))  # claims 12 more bytes than there are
    with pytest.raises(CorruptBatchError) as info:
        decode_batch(bytes(bad), 0)
    assert info.value.incomplete and "overruns" in info.value.reason
    bad = bytearray(raw)
    struct.pack_into(">i", bad, 8, 10)  # shorter than a header
    with pytest.raises(CorruptBatchError, match="smaller than a header"):
        peek_header(bytes(bad), 0)


def _reseal(buf: bytearray) -> bytes:
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


def test_malformed_record_with_a_valid_crc_is_rejected():
    raw = bytearray(encode_batch(0, 0, [(b"a", b"b", 5)]))
    raw[61] = 0x7E  # record length 63, far past the batch end
    with pytest.raises(CorruptBatchError, match="malformed record 0"):
        decode_batch(_reseal(raw), 0)
    raw = bytearray(encode_batch(0, 0, [(b"a", b"b", 5)]))
    struct.pack_into(">i", raw, 57, 2)  # recordCount says 2, only one present
    with pytest.raises(CorruptBatchError, match="malformed record 1"):
        decode_batch(_reseal(raw), 0)
    # a CRC-only validation does not look inside the records
    assert validate_batch(_reseal(raw), 0).record_count == 2


VARINT_CASES = [
    (0, "00"), (-1, "01"), (1, "02"), (63, "7e"), (-64, "7f"), (64, "8001"), (-65, "8101"),
    (2**31 - 1, "feffffff0f"), (-(2**31), "ffffffff0f"),
]


@pytest.mark.parametrize("value, hexed", VARINT_CASES)
def test_varint_zigzag_edges(value, hexed):
    assert encode_varint(value).hex() == hexed
    assert decode_varint(bytes.fromhex(hexed) + b"\xaa") == (value, len(hexed) // 2)
    assert encode_varlong(value).hex() == hexed
    assert decode_varlong(bytes.fromhex(hexed)) == (value, len(hexed) // 2)


def test_varlong_edges_and_range_checks():
    assert encode_varlong(2**63 - 1).hex() == "feffffffffffffffff01"
    assert encode_varlong(-(2**63)).hex() == "ffffffffffffffffff01"
    assert decode_varlong(bytes.fromhex("ffffffffffffffffff01"))[0] == -(2**63)
    for bad in (2**31, -(2**31) - 1):
        with pytest.raises(ValueError):
            encode_varint(bad)
    with pytest.raises(ValueError):
        encode_varlong(2**63)
    with pytest.raises(ValueError):
        decode_varint(bytes.fromhex("ffffffffff01"))  # six bytes: too long for an int32
    with pytest.raises(ValueError):
        decode_varint(bytes.fromhex("ffffffff1f"))    # five bytes but above 32 bits
    with pytest.raises(ValueError):
        decode_varint(bytes.fromhex("80"))            # continuation bit, then nothing


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_varlong_round_trip(value):
    enc = encode_varlong(value)
    assert decode_varlong(enc) == (value, len(enc))
    if -(2**31) <= value < 2**31:
        assert encode_varint(value) == enc


def _three_batches() -> tuple[bytes, list[int]]:
    parts = [encode_batch(0, 1, [(b"a", b"1", 10)]),
             encode_batch(1, 1, [(b"b", b"22", 11), (None, b"333", 12)]),
             encode_batch(3, 2, [(b"c", None, 13)])]
    ends, total = [], 0
    for p in parts:
        total += len(p)
        ends.append(total)
    return b"".join(parts), ends


def test_scan_stops_at_a_torn_tail_for_every_cut_position():
    buf, ends = _three_batches()
    for cut in range(len(buf) + 1):
        whole = [e for e in ends if e <= cut]
        result = scan_batches(buf[:cut])
        assert result.valid_bytes == (whole[-1] if whole else 0), cut
        assert len(result.batches) == len(whole)
        assert [pos for pos, _ in result.batches] == ([0] + whole[:-1] if whole else [])
        if cut in ends or cut == 0:
            assert result.error is None and result.clean
        else:
            assert result.error is not None and result.error.incomplete
            assert result.error.position == result.valid_bytes
        headers = scan_headers(buf[:cut])
        assert headers.valid_bytes == result.valid_bytes and len(headers.headers) == len(whole)


def test_iter_batches_reports_where_valid_data_ends():
    buf, ends = _three_batches()
    bad = bytearray(buf)
    bad[ends[0] + 30] ^= 0xFF  # corrupt the middle batch
    it = iter_batches(bytes(bad))
    seen = [b.base_offset for _, b in it]
    assert seen == [0]
    assert it.valid_bytes == ends[0]
    assert it.error is not None and not it.error.incomplete and "CRC" in it.error.reason
    it = iter_batches(buf, start=ends[0])
    assert [b.base_offset for _, b in it] == [1, 3] and it.valid_bytes == len(buf) and it.error is None


def test_peek_header_does_not_need_the_records():
    raw = encode_batch(42, 6, [(b"k", b"v" * 100, 7), (b"k", b"v", 9)])
    header = peek_header(raw[:HEADER_SIZE] + b"\x00" * 3, 0)  # records missing entirely
    assert (header.base_offset, header.batch_length, header.leader_epoch, header.last_offset_delta,
            header.max_timestamp) == (42, len(raw) - 12, 6, 1, 9)
    with pytest.raises(CorruptBatchError) as info:
        peek_header(raw[:HEADER_SIZE - 1], 0)
    assert info.value.incomplete


def test_empty_batch_is_refused():
    with pytest.raises(ValueError):
        encode_batch(0, 0, [])


# ------------------------------------------------------------------ attributes, headers, producer fields

def test_headers_and_producer_fields_round_trip():
    raw = encode_batch(10, 3, [(b"k", b"v", 100, [("trace", b"\x01"), ("none", None)]), (None, b"w", 101)],
                       producer_id=4242, producer_epoch=7, base_sequence=55)
    batch, _ = decode_batch(raw)
    assert batch.records == (Record(10, 100, b"k", b"v", (("trace", b"\x01"), ("none", None))),
                             Record(11, 101, None, b"w"))
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4242, 7, 55)
    header = peek_header(raw)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4242, 7, 55)
    assert raw[43:57] == struct.pack(">qhi", 4242, 7, 55)
    assert (header.compression, header.timestamp_type, header.is_transactional, header.is_control) == (
        rb.NO_COMPRESSION, rb.CREATE_TIME, False, False)


def test_attribute_bits_are_kafkas():
    attrs = rb.make_attributes(compression=rb.ZSTD, timestamp_type=rb.LOG_APPEND_TIME, transactional=True,
                               control=True)
    assert attrs == 0x04 | 0x08 | 0x10 | 0x20
    raw = encode_batch(0, 0, [(None, b"x", 5)], transactional=True, producer_id=1, producer_epoch=0,
                       base_sequence=0)
    assert struct.unpack(">h", raw[21:23])[0] == 0x10
    assert decode_batch(raw)[0].is_transactional
    with pytest.raises(ValueError, match="compression codec 9"):
        rb.make_attributes(compression=9)


def test_log_append_time_gives_every_record_the_max_timestamp():
    raw = encode_batch(0, 0, [(None, b"a", 5), (None, b"b", 9)], timestamp_type=rb.LOG_APPEND_TIME)
    batch, _ = decode_batch(raw)
    assert batch.timestamp_type == rb.LOG_APPEND_TIME
    assert [r.timestamp_ms for r in batch.records] == [9, 9]


def _with_attributes(raw: bytes, attributes: int) -> bytes:
    buf = bytearray(raw)
    struct.pack_into(">h", buf, 21, attributes)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


CODECS = [(rb.GZIP, "gzip"), (rb.SNAPPY, "snappy"), (rb.LZ4, "lz4"), (rb.ZSTD, "zstd")]


@pytest.mark.parametrize("codec,name", CODECS)
def test_a_compressed_batch_from_a_client_decodes(codec, name):
    """kafka-python's producer builds the batch (its codecs are Kafka's formats)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=7,
                                  producer_epoch=1, base_sequence=3, batch_size=1 << 20)
    for i in range(50):
        b.append(i, timestamp=1000 + i, key=b"k%d" % i, value=b"value %d " % i * 20, headers=[("h", b"%d" % i)])
    raw = bytes(b.build())
    batch, end = decode_batch(raw)
    assert end == len(raw) and batch.compression == codec
    assert batch.records[49] == Record(49, 1049, b"k49", b"value 49 " * 20, (("h", b"49"),))
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, len(batch.records)) == (7, 1, 3, 50)
    again, _ = decode_batch(encode_batch(0, 0, [(r.key, r.value, r.timestamp_ms, r.headers) for r in batch.records],
                                         compression=codec))
    assert again.records == batch.records and again.compression == codec


def test_snappy_reads_both_raw_and_xerial_framing():
    """librdkafka writes raw snappy in v2 batches, Java clients xerial's framed stream."""
    from kafka import codec as kc
    plain = encode_batch(0, 0, [(b"k", b"v" * 300, 1), (None, b"w", 2)])
    body = plain[HEADER_SIZE:]
    for packed in (kc.snappy_encode(body, xerial_compatible=False), kc.snappy_encode(body, xerial_compatible=True)):
        raw = plain[:8] + struct.pack(">i", HEADER_SIZE - 12 + len(packed)) + plain[12:HEADER_SIZE] + packed
        raw = _with_attributes(raw, rb.SNAPPY)
        assert decode_batch(raw)[0].records == decode_batch(plain)[0].records


@pytest.mark.parametrize("codec,name", CODECS)
def test_records_that_do_not_decompress_are_corrupt(codec, name):
    plain = encode_batch(0, 0, [(b"k", b"v", 1)])
    raw = _with_attributes(plain, codec)      # the header says compressed, the records are not
    validate_batch(raw)
    with pytest.raises(CorruptBatchError, match=name):
        decode_batch(raw)


def test_an_unknown_codec_is_named():
    raw = _with_attributes(encode_batch(0, 0, [(b"k", b"v", 1)]), 5)
    with pytest.raises(rb.UnsupportedCompressionError, match="unknown codec 5") as info:
        decode_batch(raw)
    assert info.value.codec == 5 and isinstance(info.value, CorruptBatchError)


@pytest.mark.parametrize("codec,name", CODECS)
def test_retain_records_recompresses_with_the_batch_codec(codec, name):
    raw = encode_batch(10, 2, [(b"a", b"1" * 100, 5), (b"b", b"2" * 100, 6), (b"c", b"3", 7)], compression=codec,
                       producer_id=4, producer_epoch=0, base_sequence=8)
    batch, _ = decode_batch(raw)
    kept, _ = decode_batch(rb.retain_records(raw, batch, [False, True, False]))
    assert kept.compression == codec and kept.records == (Record(11, 6, b"b", b"2" * 100),)
    assert (kept.base_offset, kept.last_offset_delta, kept.leader_epoch, kept.max_timestamp) == (10, 2, 2, 6)
    assert (kept.producer_id, kept.base_sequence) == (4, 8)


def test_retain_records_keeps_attributes_and_producer_fields():
    raw = encode_batch(0, 1, [(b"a", b"1", 5), (b"b", b"2", 6)], producer_id=9, producer_epoch=2,
                       base_sequence=40, transactional=True)
    batch, _ = decode_batch(raw)
    kept, _ = decode_batch(rb.retain_records(raw, batch, [False, True]))
    assert (kept.attributes, kept.producer_id, kept.producer_epoch, kept.base_sequence) == (0x10, 9, 2, 40)
    assert kept.records == (Record(1, 6, b"b", b"2"),)
