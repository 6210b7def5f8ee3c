"""The pipeline's own decoder of ``__consumer_offsets`` segment files (docs/analysis-internals.md, "Raw inputs").

Two layers, both pure Python (they run inside Spark tasks, and without Spark):

* record batch v2, as ``kafkacommon/record_batch.py`` writes it (61-byte header,
  CRC-32C over the bytes from ``attributes`` to the end, zigzag varint
  records).  A file is read the way log recovery reads the active segment:
  batch after batch, stopping at the first one that is torn (the data ends
  early), corrupt (magic, length, CRC) or whose offsets go backwards; what
  follows is not looked at.  A whole batch whose CRC matches but whose
  records cannot be read (compressed, malformed) is kept by recovery: its
  records are skipped and the scan goes on.
* the coordinator's keys and values (``coordinator/records.py`` formats,
  Kafka 2.8's): OffsetCommit key v0/v1 and value v0-v3, GroupMetadata key v2
  and value v0-v3.  A record with a null or undecodable key, or a value that
  does not decode, is skipped (the coordinator's load skips it too).

``decode_segment(data)`` gives the records of one file as dicts with the
``segments`` columns (but ``run``, ``broker``, ``partition`` and ``file``);
``read_segments(spark, paths)`` finds and decodes every offsets-topic segment
of some runs into the ``segments`` DataFrame.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import Any, Iterator

try:  # the C implementation when it is installed (it is, with the broker); else a table-driven one
    from crc32c import crc32c as _crc32c_fast
except ImportError:  # pragma: no cover - exercised only where crc32c is missing
    _crc32c_fast = None

OFFSETS_TOPIC = "__consumer_offsets"
SEGMENT_RE = re.compile(r"/cluster/data/broker-(\d+)/__consumer_offsets-(\d+)/(\d{20})\.log$")

SEGMENT_COLUMNS = (
    ("run", "string"), ("broker", "int"), ("partition", "int"), ("offset", "bigint"),
    ("timestamp_ms", "bigint"), ("key_version", "int"), ("value_version", "int"), ("kind", "string"),
    ("group", "string"), ("topic", "string"), ("tpartition", "int"), ("committed_offset", "bigint"),
    ("leader_epoch", "int"), ("metadata", "string"), ("commit_ts", "bigint"), ("expire_ts", "bigint"),
    ("generation", "int"), ("protocol", "string"), ("leader", "string"), ("members", "int"),
    ("tombstone", "boolean"), ("file", "string"),
)
SEGMENT_DDL = ", ".join(f"`{n}` {t}" for n, t in SEGMENT_COLUMNS)
RECORD_FIELDS = tuple(n for n, _ in SEGMENT_COLUMNS if n not in ("run", "broker", "partition", "file"))

# ---------------------------------------------------------------- CRC-32C

_CASTAGNOLI = 0x82F63B78


def _table() -> list[int]:
    out = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _CASTAGNOLI if c & 1 else c >> 1
        out.append(c)
    return out


_TABLE = _table()


def crc32c(data: bytes | memoryview) -> int:
    """CRC-32C (Castagnoli) of ``data``."""
    if _crc32c_fast is not None:
        return _crc32c_fast(data)
    crc = 0xFFFFFFFF
    for b in bytes(data):
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


# ---------------------------------------------------------------- record batch v2

_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = 61
LOG_OVERHEAD = 12


class BadBatch(ValueError):
    """The batch at ``position`` is torn (``torn``) or corrupt; recovery cuts the file there."""

    def __init__(self, reason: str, position: int, torn: bool = False) -> None:
        super().__init__(f"bad batch at byte {position}: {reason}")
        self.reason, self.position, self.torn = reason, position, torn


def _varint(buf: bytes, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    result = shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise ValueError("varint runs past its record")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise ValueError("varint too long")


def _nullable(buf: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    n, pos = _varint(buf, pos, end, 5)
    if n == -1:
        return None, pos
    if n < 0 or pos + n > end:
        raise ValueError(f"bad field length {n}")
    return buf[pos:pos + n], pos + n


@dataclass
class Batch:
    position: int
    base_offset: int
    last_offset: int
    leader_epoch: int
    size: int
    records: list[tuple[int, int, bytes | None, bytes | None]]   # (offset, timestamp_ms, key, value)
    undecodable: str | None = None   # why the records of a whole, CRC-valid batch could not be read


def _batch_at(buf: bytes, pos: int) -> Batch:
    if len(buf) - pos < HEADER_SIZE:
        raise BadBatch("truncated header", pos, torn=True)
    (base, length, epoch, magic, crc, attrs, lod, base_ts, _max_ts, _pid, _pep, _seq,
     count) = _HEADER.unpack_from(buf, pos)
    if magic != 2:
        raise BadBatch(f"magic {magic}", pos)
    if length < HEADER_SIZE - LOG_OVERHEAD:
        raise BadBatch(f"batch length {length}", pos)
    end = pos + LOG_OVERHEAD + length
    if end > len(buf):
        raise BadBatch("batch overruns the file", pos, torn=True)
    if crc32c(memoryview(buf)[pos + 21:end]) != crc:
        raise BadBatch("CRC mismatch", pos)
    if lod < 0 or count < 0:
        raise BadBatch("negative lastOffsetDelta or record count", pos)
    records: list[tuple[int, int, bytes | None, bytes | None]] = []
    if attrs != 0:  # compressed or transactional: whole and valid (recovery keeps it), but not ours to read
        return Batch(pos, base, base + lod, epoch, end - pos, records, f"unsupported attributes {attrs:#x}")
    p = pos + HEADER_SIZE
    try:
        for _ in range(count):
            n, p = _varint(buf, p, end, 5)
            rec_end = p + n
            if n < 0 or rec_end > end:
                raise ValueError("record overruns its batch")
            p += 1  # record attributes
            ts_delta, p = _varint(buf, p, rec_end, 10)
            off_delta, p = _varint(buf, p, rec_end, 5)
            key, p = _nullable(buf, p, rec_end)
            value, p = _nullable(buf, p, rec_end)
            headers, p = _varint(buf, p, rec_end, 5)
            for _h in range(headers):
                klen, p = _varint(buf, p, rec_end, 5)
                if klen < 0 or p + klen > rec_end:
                    raise ValueError("bad header key")
                _v, p = _nullable(buf, p + klen, rec_end)
            if p != rec_end:
                raise ValueError("unread bytes in a record")
            offset = base + off_delta
            if records and offset <= records[-1][0] or offset < base or offset > base + lod:
                raise ValueError("record offsets out of order")
            records.append((offset, base_ts + ts_delta, key, value))
        if p != end:
            raise ValueError("bytes after the last record")
    except ValueError as e:  # the CRC matched, so recovery keeps the batch: skip its records, go on
        return Batch(pos, base, base + lod, epoch, end - pos, [], f"malformed record {len(records)}: {e}")
    return Batch(pos, base, base + lod, epoch, end - pos, records)


@dataclass
class SegmentScan:
    """What reading one segment file found: its whole batches, where valid data ends, and why."""

    batches: list[Batch] = field(default_factory=list)
    valid_bytes: int = 0
    error: BadBatch | None = None


def scan_segment(data: bytes, base_offset: int = 0) -> SegmentScan:
    """Every whole, valid batch from the start of ``data``, up to the first bad one (as log recovery)."""
    buf = bytes(data)
    scan = SegmentScan()
    pos, expected = 0, base_offset
    while pos < len(buf):
        try:
            batch = _batch_at(buf, pos)
            if batch.base_offset < expected:
                raise BadBatch("offsets go backwards", pos)
        except BadBatch as e:
            scan.error = e
            break
        scan.batches.append(batch)
        pos += batch.size
        expected = batch.last_offset + 1
    scan.valid_bytes = pos
    return scan


# ---------------------------------------------------------------- offsets-topic keys and values

class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("truncated")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def i16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def i32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def i64(self) -> int:
        return struct.unpack(">q", self.take(8))[0]

    def string(self, nullable: bool = False) -> str | None:
        n = self.i16()
        if n == -1 and nullable:
            return None
        if n < 0:
            raise ValueError(f"string length {n}")
        return self.take(n).decode("utf-8")

    def skip_bytes(self) -> None:
        n = self.i32()
        if n < 0:
            raise ValueError(f"bytes length {n}")
        self.take(n)

    def done(self) -> None:
        if self.pos != len(self.data):
            raise ValueError("trailing bytes")


def decode_key(data: bytes) -> dict[str, Any]:
    """``{key_version, kind, group[, topic, tpartition]}``; ValueError if it isn't an offsets-topic key."""
    r = _Reader(data)
    v = r.i16()
    if v in (0, 1):
        out = {"key_version": v, "kind": "offset", "group": r.string(), "topic": r.string(), "tpartition": r.i32()}
    elif v == 2:
        out = {"key_version": v, "kind": "group", "group": r.string()}
    else:
        raise ValueError(f"unknown key version {v}")
    r.done()
    return out


def decode_offset_value(data: bytes) -> dict[str, Any]:
    r = _Reader(data)
    v = r.i16()
    if v not in (0, 1, 2, 3):
        raise ValueError(f"unknown offset value version {v}")
    out: dict[str, Any] = {"value_version": v, "committed_offset": r.i64()}
    out["leader_epoch"] = r.i32() if v >= 3 else -1
    out["metadata"] = r.string()
    out["commit_ts"] = r.i64()
    expire = r.i64() if v == 1 else -1
    out["expire_ts"] = None if expire == -1 else expire
    r.done()
    return out


def decode_group_value(data: bytes) -> dict[str, Any]:
    r = _Reader(data)
    v = r.i16()
    if v not in (0, 1, 2, 3):
        raise ValueError(f"unknown group value version {v}")
    r.string()  # protocol_type
    out: dict[str, Any] = {"value_version": v, "generation": r.i32(), "protocol": r.string(nullable=True),
                           "leader": r.string(nullable=True)}
    if v >= 2:
        r.i64()  # current_state_timestamp
    count = r.i32()
    if count < 0:
        raise ValueError(f"member count {count}")
    for _ in range(count):
        r.string()                     # member_id
        if v >= 3:
            r.string(nullable=True)    # group_instance_id
        r.string()                     # client_id
        r.string()                     # client_host
        if v >= 1:
            r.i32()                    # rebalance_timeout_ms
        r.i32()                        # session_timeout_ms
        r.skip_bytes()                 # subscription
        r.skip_bytes()                 # assignment
    out["members"] = count
    r.done()
    return out


def decode_record(offset: int, timestamp_ms: int, key: bytes | None, value: bytes | None) -> dict[str, Any] | None:
    """One offsets-topic record as a ``segments`` row (without run/broker/partition/file); None if undecodable."""
    if key is None:
        return None
    try:
        row = dict.fromkeys(RECORD_FIELDS)
        row.update(decode_key(key))
        row.update(offset=offset, timestamp_ms=timestamp_ms, tombstone=value is None)
        if value is not None:
            row.update(decode_offset_value(value) if row["kind"] == "offset" else decode_group_value(value))
        return row
    except (ValueError, struct.error, UnicodeDecodeError):
        return None


def decode_segment(data: bytes, base_offset: int = 0) -> list[dict[str, Any]]:
    """Every decodable offsets-topic record of a segment file's valid prefix, in offset order."""
    out = []
    for batch in scan_segment(data, base_offset).batches:
        for offset, ts, key, value in batch.records:
            row = decode_record(offset, ts, key, value)
            if row is not None:
                out.append(row)
    return out


# ---------------------------------------------------------------- Spark

def _decode_file(run: str | None, path: str, run_dir: str | None, content: bytes) -> Iterator[tuple]:
    m = SEGMENT_RE.search(path)
    if m is None or not run:
        return
    broker, partition, base = int(m.group(1)), int(m.group(2)), int(m.group(3))
    rel = path[len(run_dir.rstrip("/")) + 1:] if run_dir and path.startswith(run_dir.rstrip("/") + "/") else path
    for row in decode_segment(content, base):
        row.update(run=run, broker=broker, partition=partition, file=rel)
        yield tuple(row[n] for n, _ in SEGMENT_COLUMNS)


def read_segments(spark, files):
    """The ``segments`` DataFrame: every record of every run's offsets-topic segment files (``files``: an
    ``analysis.files.RunFiles``, or run id -> directory), read in one scan and decoded in tasks."""
    from pyspark.sql import functions as F

    from analysis.files import SEGMENT_REL, RunFiles, local_path, partitions_for, read_many, scan_runs
    from analysis.local_rows import local_rows

    files = files if isinstance(files, RunFiles) else scan_runs(files)
    raw = read_many(spark, files.segments, lambda fs: spark.read.format("binaryFile").load(fs), SEGMENT_REL)
    if raw is None:
        return local_rows(spark, [], SEGMENT_DDL)
    # many runs' segments are thousands of small files (1,000 runs: 9,000), which Spark packs about 32 to a
    # partition (each file counts as 4 MiB): hundreds of Python tasks of a few files each.  A few tasks of
    # many files instead, as the event logs (``analysis.files.read_event_files``)
    raw = raw.coalesce(partitions_for(spark, files.segment_bytes))
    path = local_path("path")   # binaryFile's path is the plain path (input_file_name()'s is encoded)
    with_run = raw.select("run", path.alias("path"), F.regexp_extract(path, "^(.*)/cluster/data/[^/]+/[^/]+/[^/]+$", 1)
                          .alias("run_dir"), "content")
    rows = with_run.rdd.flatMap(lambda r: _decode_file(r["run"], r["path"], r["run_dir"], bytes(r["content"])))
    return spark.createDataFrame(rows, SEGMENT_DDL)
