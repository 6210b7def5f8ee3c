"""The replay fast path reads exactly what the reference decoder reads, and fails the same way."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkacommon.batch_scan import iter_batches
from kafkacommon.fastscan import iter_batch_records, scan_latest
from kafkacommon.record_batch import CorruptBatchError, decode_batch, encode_batch

blob = st.one_of(st.none(), st.binary(max_size=300))
record = st.tuples(blob, blob, st.integers(0, 10**13))


def reference(buf: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for _, b in iter_batches(buf) for r in b.records]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(record, min_size=1, max_size=150), min_size=1, max_size=4), st.integers(0, 10**6))
def test_fast_scan_equals_the_reference_decoder(batches, base):
    buf, offset = b"", base
    for recs in batches:
        # gaps between offsets, as compaction leaves them (offset deltas past one byte, too)
        deltas = [i * 3 for i in range(len(recs))]
        buf += encode_batch(offset, 5, recs, offset_deltas=deltas, last_offset_delta=deltas[-1] + 2)
        offset += deltas[-1] + 3
    got = [rec for _, recs in iter_batch_records(buf) for rec in recs]
    assert got == reference(buf)
    latest: dict = {}
    nxt, count = scan_latest(buf, latest)
    assert (nxt, count) == (offset, len(got))
    want: dict = {}
    for off, k, v in got:
        want[k] = (off, v)
    assert latest == want


def test_a_partial_batch_at_the_end_is_not_read():
    buf = encode_batch(0, 1, [(b"k", b"v", 1)]) + encode_batch(1, 1, [(b"k", b"w", 2)])
    latest: dict = {}
    assert scan_latest(buf[:-5], latest) == (1, 1) and latest == {b"k": (0, b"v")}


def test_a_corrupt_batch_raises_like_the_reference_decoder():
    buf = bytearray(encode_batch(0, 1, [(b"key", b"value", 1)] * 3))
    buf[70] ^= 0xFF  # inside the records: the CRC no longer matches
    with pytest.raises(CorruptBatchError):
        decode_batch(bytes(buf))
    with pytest.raises(CorruptBatchError):
        scan_latest(bytes(buf), {})


def test_a_batch_with_a_valid_crc_but_bytes_left_over_fails_as_the_reference_does():
    """The compiled reader refuses it, the reference decoder names why, and the earlier batch alone is read."""
    from kafkacommon.record_batch import ATTRIBUTES_OFFSET, crc32c
    good = encode_batch(0, 1, [(b"k", b"v", 1)])
    bad = bytearray(encode_batch(1, 1, [(b"key", b"value", 1)] * 3))
    bad[57:61] = (2).to_bytes(4, "big")          # the header says 2 records; 3 follow
    bad[17:21] = crc32c(bytes(bad[ATTRIBUTES_OFFSET:])).to_bytes(4, "big")
    with pytest.raises(CorruptBatchError):
        decode_batch(bytes(bad))
    latest: dict = {}
    with pytest.raises(CorruptBatchError):
        scan_latest(good + bytes(bad), latest)
    assert latest == {b"k": (0, b"v")}
