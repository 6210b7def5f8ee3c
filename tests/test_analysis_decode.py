"""The pipeline's own segment decoder (analysis/decode.py) against what node.storage and coordinator.records write."""
from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from analysis import decode
from analysis.decode import decode_segment, scan_segment
from coordinator.records import (GroupMetadataKey, GroupValue, MemberRecord, OffsetKey, OffsetValue,
                                 decode_record, encode_key, encode_value)
from kafkacommon.batch_scan import iter_batches
from node.storage.log import PartitionLog

TOPIC = "__consumer_offsets"


def member(i: int, instance: str | None = None, rebalance: int = 30000) -> MemberRecord:
    return MemberRecord(f"m-{i}", instance, f"client-{i}", "/127.0.0.1", rebalance, 10000, b"\x00\x01sub", b"asg")


def batches() -> list[list[tuple[bytes, bytes | None]]]:
    """Batches of (key, value) covering every key and value version, with tombstones of both kinds."""
    ok = OffsetKey("g1", "events", 2)
    ts = 1700000000000
    two = (member(0, "static-0"), member(1))
    return [
        [(encode_key(ok), encode_value(OffsetValue(17, 3, "meta", ts))),                                  # v3
         (encode_key(OffsetKey("g1", "events", 0), 0), encode_value(OffsetValue(5, -1, "", ts + 1), 2))],  # key v0
        [(encode_key(GroupMetadataKey("g1")), encode_value(GroupValue("consumer", 4, "range", "m-0", ts, two)))],
        [(encode_key(OffsetKey("g2", "t", 1)), encode_value(OffsetValue(9, -1, "x", ts + 3, ts + 99999))),  # v1
         (encode_key(OffsetKey("g2", "t", 2)), encode_value(OffsetValue(1, -1, "", ts + 4), 0)),           # v0
         (encode_key(GroupMetadataKey("g2")),
          encode_value(GroupValue("consumer", 1, None, None, -1, (member(2, rebalance=10000),)), 0)),
         (encode_key(GroupMetadataKey("g3")), encode_value(GroupValue("", 0, None, None, -1, ()), 1)),
         (encode_key(GroupMetadataKey("g4")),
          encode_value(GroupValue("consumer", 2, "rr", "m-3", 5, (member(3),)), 2))],
        [(encode_key(ok), None), (encode_key(GroupMetadataKey("g2")), None)],                             # tombstones
    ]


def write_log(tmp_path: Path, data: list[list[tuple[bytes, bytes | None]]], *, segment_bytes: int = 1 << 30) -> Path:
    log = PartitionLog(tmp_path, TOPIC, 7, segment_bytes=segment_bytes)
    for i, batch in enumerate(data):
        log.append_as_leader([(k, v, 1700000000000 + i) for k, v in batch], leader_epoch=i // 2, now_ms=0)
    log.close()
    return log.dir


def expected_rows(raw: bytes) -> list[dict]:
    """The segments row of every record, from node.storage's batch decoder and coordinator.records."""
    out = []
    for _pos, batch in iter_batches(raw):
        for rec in batch.records:
            key, value = decode_record(rec.key, rec.value)
            row = dict.fromkeys(decode.RECORD_FIELDS)
            row.update(offset=rec.offset, timestamp_ms=rec.timestamp_ms, tombstone=value is None,
                       key_version=int.from_bytes(rec.key[:2], "big"), group=key.group)
            if isinstance(key, OffsetKey):
                row.update(kind="offset", topic=key.topic, tpartition=key.partition)
                if value is not None:
                    row.update(value_version=int.from_bytes(rec.value[:2], "big"), committed_offset=value.offset,
                               leader_epoch=value.leader_epoch, metadata=value.metadata,
                               commit_ts=value.commit_timestamp, expire_ts=value.expire_timestamp)
            else:
                row.update(kind="group")
                if value is not None:
                    row.update(value_version=int.from_bytes(rec.value[:2], "big"), generation=value.generation,
                               protocol=value.protocol, leader=value.leader, members=len(value.members))
            out.append(row)
    return out


def segment_bytes(d: Path) -> bytes:
    (log,) = sorted(d.glob("*.log"))
    return log.read_bytes()


def test_every_key_and_value_version_decodes_as_coordinator_records_does(tmp_path):
    raw = segment_bytes(write_log(tmp_path, batches()))
    rows = decode_segment(raw)
    assert rows == expected_rows(raw)
    assert [r["offset"] for r in rows] == list(range(10))
    by_group = {(r["kind"], r["group"], r["tpartition"], r["tombstone"]): r for r in rows}
    v1 = by_group[("offset", "g2", 1, False)]
    assert (v1["value_version"], v1["committed_offset"], v1["expire_ts"], v1["leader_epoch"]) == \
        (1, 9, 1700000099999, -1)
    assert by_group[("offset", "g1", 2, False)]["leader_epoch"] == 3
    g1 = by_group[("group", "g1", None, False)]
    assert (g1["value_version"], g1["generation"], g1["protocol"], g1["leader"], g1["members"]) == \
        (3, 4, "range", "m-0", 2)
    assert by_group[("group", "g3", None, False)]["members"] == 0


def test_tombstones_have_no_value_fields(tmp_path):
    rows = decode_segment(segment_bytes(write_log(tmp_path, batches())))
    tombs = [r for r in rows if r["tombstone"]]
    assert [(r["kind"], r["group"]) for r in tombs] == [("offset", "g1"), ("group", "g2")]
    for r in tombs:
        assert r["value_version"] is None and r["committed_offset"] is None and r["generation"] is None
    assert tombs[0]["topic"] == "events" and tombs[0]["tpartition"] == 2


@pytest.mark.parametrize("seed", range(4))
def test_a_torn_tail_is_cut_where_recovery_cuts_it(tmp_path, seed):
    d = write_log(tmp_path, batches())
    path = next(d.glob("*.log"))
    raw = path.read_bytes()
    ends = [p + b.size_bytes for p, b in iter_batches(raw)]
    cut = random.Random(seed).randrange(ends[0] + 1, len(raw))
    with open(path, "r+b") as f:
        f.truncate(cut)
    scan = scan_segment(path.read_bytes())
    assert scan.error is not None and scan.error.torn
    assert scan.valid_bytes == max(e for e in ends if e <= cut)
    rows = decode_segment(path.read_bytes())
    reopened = PartitionLog(tmp_path, TOPIC, 7)  # node.storage's own recovery
    try:
        assert rows == expected_rows(raw)[:reopened.log_end_offset]
        assert reopened.recovery.truncated_bytes == cut - scan.valid_bytes
    finally:
        reopened.close()


def test_a_corrupt_batch_stops_the_file_there(tmp_path):
    d = write_log(tmp_path, batches())
    path = next(d.glob("*.log"))
    raw = bytearray(path.read_bytes())
    positions = [p for p, _ in iter_batches(bytes(raw))]
    raw[positions[2] + 70] ^= 0xFF  # inside the third batch's records: its CRC no longer matches
    path.write_bytes(bytes(raw))
    scan = scan_segment(bytes(raw))
    assert not scan.error.torn and "CRC" in scan.error.reason and scan.valid_bytes == positions[2]
    rows = decode_segment(bytes(raw))
    assert [r["offset"] for r in rows] == [0, 1, 2]  # the fourth batch, whole and valid, is not read either
    reopened = PartitionLog(tmp_path, TOPIC, 7)
    try:
        assert reopened.log_end_offset == 3
    finally:
        reopened.close()


def test_offsets_going_backwards_stop_the_scan_and_bad_records_are_skipped(tmp_path):
    log = PartitionLog(tmp_path, TOPIC, 1)
    log.append_as_leader([(b"\x00\x09junk", b"v", 1), (encode_key(OffsetKey("g", "t", 0)),
                                                      encode_value(OffsetValue(3, -1, "", 2)), 2)], 0, now_ms=0)
    log.append_as_leader([(None, b"no key", 3), (encode_key(GroupMetadataKey("g")), b"\x00\x07bad", 4)], 0, now_ms=0)
    log.close()
    raw = next(log.dir.glob("*.log")).read_bytes()
    rows = decode_segment(raw)
    assert [(r["offset"], r["kind"]) for r in rows] == [(1, "offset")]  # an unknown key version, a null key,
    first = raw[:next(iter(iter_batches(raw)))[1].size_bytes]              # an unknown value version: skipped
    scan = scan_segment(raw + first)  # the first batch again: its offsets go backwards
    assert scan.error.reason == "offsets go backwards" and len(scan.batches) == 2
    assert decode_segment(raw, base_offset=100) == []  # a file named for offset 100 cannot start at 0


def test_a_whole_batch_with_unreadable_records_is_skipped_and_the_scan_goes_on(tmp_path):
    from kafkacommon.record_batch import _seal, encode_batch

    good = encode_batch(0, 0, [(encode_key(GroupMetadataKey("g")), None, 1)])
    junk = _seal(1, 0, 1, 2, 2, 2, b"\x02\x00")  # CRC-valid, but its 2 records are not there
    last = encode_batch(3, 0, [(encode_key(OffsetKey("g", "t", 0)), encode_value(OffsetValue(7, -1, "", 3)), 3)])
    scan = scan_segment(good + junk + last)
    assert scan.error is None and [b.undecodable is not None for b in scan.batches] == [False, True, False]
    assert [(r["offset"], r["kind"]) for r in decode_segment(good + junk + last)] == [(0, "group"), (3, "offset")]


def test_the_pure_python_crc_matches_the_c_one(monkeypatch):
    data = os.urandom(1000)
    fast = decode.crc32c(data)
    monkeypatch.setattr(decode, "_crc32c_fast", None)
    assert decode.crc32c(data) == fast and decode.crc32c(b"123456789") == 0xE3069283


def test_read_segments_on_a_real_run_finds_the_final_commits(spark, short_chaos_runs):
    run = short_chaos_runs["clean"]
    from analysis.decode import read_segments
    from pyspark.sql import functions as F

    seg = read_segments(spark, {"clean": str(run)}).persist()
    try:
        total = sum(len(b.records) for p in run.glob("cluster/data/broker-*/__consumer_offsets-*/*.log")
                    for _, b in iter_batches(p.read_bytes()))
        assert seg.count() == total > 0
        assert seg.where(F.col("run") != "clean").count() == 0
        files = {r["file"] for r in seg.select("file").distinct().collect()}
        assert all(f.startswith("cluster/data/broker-") and f.endswith(".log") for f in files)
        commits = {(r["broker"], r["group"], r["topic"], r["tpartition"], r["committed_offset"])
                   for r in seg.where((F.col("kind") == "offset") & ~F.col("tombstone")).collect()}
        finals = [op for op in map(json.loads, (run / "history.jsonl").read_text().splitlines()) if op.get("final")]
        checked = 0
        for op in finals:
            if op["f"] == "fetch-committed" and op["type"] == "ok":
                for tp, offset in op["value"]["offsets"].items():
                    topic, _, p = tp.rpartition("/")
                    holders = {c[0] for c in commits if c[1:] == (op["group"], topic, int(p), offset)}
                    assert holders, f"{op['group']} {tp}={offset} is on no broker's disk"
                    checked += 1
        assert checked > 0
    finally:
        seg.unpersist()
