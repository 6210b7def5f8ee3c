"""node/storage: LogSegment, PartitionLog, LeaderEpochCache and checkpoint files, on real files."""
from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from kafkacommon.batch_scan import scan_batches
from kafkacommon.record_batch import CorruptBatchError, encode_batch, peek_header
from node.storage.checkpoint import (LEADER_EPOCH_CHECKPOINT, CheckpointError, LeaderEpochCheckpointFile,
                                     OffsetCheckpointFile, read_checkpoint, write_checkpoint)
from node.storage.log import InvalidAppendError, LeaderEpochCache, OffsetOutOfRangeError, PartitionLog
from node.storage.segment import LogSegment, segment_file_name

NOW = 1_700_000_000_000


def records_of(data: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    scan = scan_batches(data)
    assert scan.clean, scan.error
    return [(r.offset, r.key, r.value) for _, b in scan.batches for r in b.records]


def base_offsets(data: bytes) -> list[int]:
    return [b.base_offset for _, b in scan_batches(data).batches]


def fill(log: PartitionLog, batches: int, rng: random.Random, epoch: int = 0) -> dict[int, tuple]:
    """Append ``batches`` batches of 1-5 random records; return offset -> (key, value)."""
    expected = {}
    for i in range(batches):
        recs = [(None if rng.random() < 0.2 else f"k{i}-{j}".encode(), os.urandom(rng.randint(0, 60)))
                for j in range(rng.randint(1, 5))]
        base, last = log.append_as_leader(recs, epoch, NOW + i)
        assert last - base + 1 == len(recs)
        for j, (k, v) in enumerate(recs):
            expected[base + j] = (k, v)
    return expected


def open_log(path: Path, **kw) -> PartitionLog:
    kw.setdefault("segment_bytes", 2_000)
    kw.setdefault("index_interval_bytes", 256)
    return PartitionLog(path, "orders", 3, **kw)


# ---------------------------------------------------------------- segments, rolls, indexes

def test_append_and_read_back_across_segment_rolls(tmp_path):
    rng = random.Random(1)
    log = open_log(tmp_path)
    expected = fill(log, 200, rng)
    assert log.log_end_offset == len(expected)
    assert len(log.segments) > 5
    files = sorted(os.listdir(log.dir))
    for seg in log.segments:
        assert segment_file_name(seg.base_offset, ".log") in files
        assert seg.size <= 2_000
        first = peek_header(seg.read(seg.base_offset, 100), 0)
        assert first.base_offset == seg.base_offset  # a rolled segment starts with the batch that rolled it
    for prev, seg in zip(log.segments, log.segments[1:]):
        assert prev.next_offset == seg.base_offset
    assert records_of(log.read(0, 10**9)) == [(o, *kv) for o, kv in sorted(expected.items())]
    for start in rng.sample(range(log.log_end_offset), 40):
        got = records_of(log.read(start, 10**9))
        assert got[0][0] <= start < got[0][0] + 5 and got[-1][0] == log.log_end_offset - 1
    assert log.read(log.log_end_offset, 100) == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(log.log_end_offset + 1, 100)
    log.close()


def test_read_respects_max_bytes_but_returns_one_whole_batch(tmp_path):
    log = open_log(tmp_path, segment_bytes=10**6)
    for i in range(10):
        log.append_as_leader([(b"k", b"v" * 100)], 0, NOW)
    one = len(encode_batch(0, 0, [(b"k", b"v" * 100, NOW)]))
    assert base_offsets(log.read(0, 1)) == [0]
    assert base_offsets(log.read(2, 3 * one)) == [2, 3, 4]
    assert base_offsets(log.read(2, 3 * one - 1)) == [2, 3]


def test_read_with_max_offset_excludes_batches_at_or_after_it(tmp_path):
    log = open_log(tmp_path)
    for b in range(3):
        log.append_as_leader([(None, bytes([b, i])) for i in range(5)], 0, NOW)  # 0-4, 5-9, 10-14
    assert base_offsets(log.read(0, 10**6, max_offset=10)) == [0, 5]
    assert base_offsets(log.read(0, 10**6, max_offset=12)) == [0, 5]
    assert base_offsets(log.read(0, 10**6, max_offset=14)) == [0, 5]
    assert base_offsets(log.read(0, 10**6, max_offset=15)) == [0, 5, 10]
    assert log.read(0, 10**6, max_offset=4) == b""
    assert base_offsets(log.read(7, 10**6, max_offset=15)) == [5, 10]


def test_offset_index_is_sparse_and_lookups_land_on_the_right_batch(tmp_path):
    interval = 1024
    log = open_log(tmp_path, segment_bytes=10**7, index_interval_bytes=interval)
    rng = random.Random(2)
    fill(log, 600, rng)
    seg = log.active_segment
    entries = seg.offset_index_entries()
    batch_sizes = [b.size_bytes for _, b in scan_batches(seg.read(0, 10**9)).batches]
    biggest = max(batch_sizes)
    assert seg.size // (interval + biggest) <= len(entries) <= seg.size // interval + 1
    assert os.path.getsize(seg.index_path) == 8 * len(entries)
    raw = seg.read(0, 10**9)
    for offset, position in entries:
        assert peek_header(raw, position).last_offset == offset  # keyed by the batch's last offset
    for offset in range(log.log_end_offset):
        idx_offset, idx_pos = seg.index_lookup(offset)
        position, header = seg.find_batch(offset)
        assert header.base_offset <= offset <= header.last_offset
        assert idx_offset <= offset and idx_pos <= position < idx_pos + interval + biggest
        assert peek_header(raw, position) == header
    times = seg.time_index_entries()
    assert times and all(a[0] < b[0] and a[1] <= b[1] for a, b in zip(times, times[1:]))
    assert os.path.getsize(seg.time_index_path) == 12 * len(times)


def test_offset_index_entries_follow_kafkas_rule(tmp_path):
    """Kafka 2.8 LogSegment.append/recover: an entry (the batch's LAST offset, the batch's position)
    once strictly more than index.interval.bytes were appended since the previous entry."""
    size = len(encode_batch(0, 0, [(b"k", b"v" * 20, NOW)] * 3))
    seg = LogSegment.create(tmp_path, 0, index_interval_bytes=2 * size)
    for b in range(8):  # 3 records per batch, all the same size
        seg.append(encode_batch(3 * b, 0, [(b"k", b"v" * 20, NOW)] * 3), 3 * b, 3 * b + 2, NOW)
    # bytes before batch 2 are exactly 2 * size (not more): no entry there; batches 3 and 6 get one
    assert seg.offset_index_entries() == [(11, 3 * size), (20, 6 * size)]
    for offset in range(24):  # the lookup still lands on the batch holding the offset
        position, header = seg.find_batch(offset)
        assert header.base_offset <= offset <= header.last_offset and position == (offset // 3) * size
    seg.recover()
    assert seg.offset_index_entries() == [(11, 3 * size), (20, 6 * size)]
    seg.close()
    seg = LogSegment.open(tmp_path, 0, index_interval_bytes=2 * size)
    assert seg.offset_index_entries() == [(11, 3 * size), (20, 6 * size)]
    assert [seg.find_batch(o)[1].base_offset for o in (9, 10, 11, 12, 23)] == [9, 9, 9, 12, 21]
    seg.close()


def test_reopen_gives_the_same_log(tmp_path):
    rng = random.Random(3)
    log = open_log(tmp_path)
    fill(log, 60, rng, epoch=1)
    fill(log, 60, rng, epoch=4)
    before = (log.log_end_offset, log.read(0, 10**9), [s.offset_index_entries() for s in log.segments],
              log.epoch_cache.entries, len(log.segments))
    log.close()
    log = open_log(tmp_path)
    after = (log.log_end_offset, log.read(0, 10**9), [s.offset_index_entries() for s in log.segments],
             log.epoch_cache.entries, len(log.segments))
    assert after == before
    assert log.recovery.truncated_bytes == 0 and log.recovery.dropped_batches == 0
    assert log.recovery.log_end_offset == before[0]
    assert all(s.recovery is None for s in log.segments[:-1])  # only the active segment is recovered
    assert log.segments[-1].recovery is not None
    assert log.append_as_leader([(b"k", b"v")], 4, NOW) == (before[0], before[0])


# ---------------------------------------------------------------- recovery of a torn / corrupt tail

def _batch_positions(seg: LogSegment) -> list[tuple[int, int, int]]:
    return [(pos, b.base_offset, b.size_bytes) for pos, b in scan_batches(seg.read(0, 10**9)).batches]


@pytest.mark.parametrize("seed", range(6))
def test_tail_cut_mid_batch_is_recovered_at_open(tmp_path, seed):
    rng = random.Random(seed)
    log = open_log(tmp_path, segment_bytes=4_000, index_interval_bytes=200)
    fill(log, 80, rng)
    active = log.active_segment
    last_pos, last_base, last_size = _batch_positions(active)[-1]
    old_entries = active.offset_index_entries()
    sealed = [(s.base_offset, s.size) for s in log.segments[:-1]]
    log.close()
    cut = last_pos + rng.randint(1, last_size - 1)
    os.truncate(active.log_path, cut)
    active.index_path.write_bytes(b"\x7f" * 13)  # the index is rebuilt, not trusted

    log = open_log(tmp_path, segment_bytes=4_000, index_interval_bytes=200)
    assert log.log_end_offset == last_base
    assert log.recovery.log_end_offset == last_base
    assert log.recovery.truncated_bytes == cut - last_pos
    assert log.recovery.dropped_batches == 1
    assert os.path.getsize(log.active_segment.log_path) == last_pos
    assert [(s.base_offset, s.size) for s in log.segments[:-1]] == sealed
    assert log.active_segment.offset_index_entries() == [e for e in old_entries if e[1] < last_pos]
    assert os.path.getsize(log.active_segment.index_path) == 8 * len(log.active_segment.offset_index_entries())
    data = log.read(0, 10**9)
    assert [r[0] for r in records_of(data)] == list(range(last_base))
    for offset in range(log.active_segment.base_offset, last_base):
        assert records_of(log.read(offset, 1))[0][0] <= offset
    assert log.append_as_leader([(b"again", b"x")], 0, NOW) == (last_base, last_base)
    assert records_of(log.read(last_base, 100)) == [(last_base, b"again", b"x")]
    log.close()
    assert open_log(tmp_path).log_end_offset == last_base + 1


def test_corrupt_byte_in_the_last_batch_is_recovered_at_open(tmp_path):
    log = open_log(tmp_path, segment_bytes=10**6)
    fill(log, 30, random.Random(9))
    seg = log.active_segment
    last_pos, last_base, last_size = _batch_positions(seg)[-1]
    log.close()
    with open(seg.log_path, "r+b") as f:
        f.seek(last_pos + last_size - 3)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x10]))
    log = open_log(tmp_path, segment_bytes=10**6)
    assert (log.log_end_offset, log.recovery.truncated_bytes, log.recovery.dropped_batches) == \
        (last_base, last_size, 1)
    assert log.append_as_leader([(None, b"next")], 0, NOW)[0] == last_base


def test_corruption_in_the_middle_drops_everything_after_it(tmp_path):
    log = open_log(tmp_path, segment_bytes=10**6)
    fill(log, 20, random.Random(5))
    seg = log.active_segment
    batches = _batch_positions(seg)
    pos, base, size = batches[12]
    log.close()
    with open(seg.log_path, "r+b") as f:
        f.seek(pos + 30)
        f.write(b"\xff\xfe")
    log = open_log(tmp_path, segment_bytes=10**6)
    assert log.log_end_offset == base
    assert log.recovery.dropped_batches == len(batches) - 12
    assert log.recovery.truncated_bytes == sum(b[2] for b in batches[12:])


# ---------------------------------------------------------------- truncation

def test_truncate_to_inside_a_segment_drops_whole_batches(tmp_path):
    log = open_log(tmp_path, segment_bytes=10**6, index_interval_bytes=100)
    for b in range(20):
        log.append_as_leader([(None, bytes([b, i]) * 20) for i in range(3)], 0, NOW + b)  # 3 per batch
    index_before = log.active_segment.offset_index_entries()
    assert log.truncate_to(31) == 60 - 30  # 31 is inside batch 30-32: the whole batch goes
    assert log.log_end_offset == 30
    assert log.active_segment.offset_index_entries() == [e for e in index_before if e[0] < 30]
    assert records_of(log.read(0, 10**9))[-1][0] == 29
    assert log.truncate_to(30) == 0 and log.truncate_to(99) == 0
    assert log.append_as_leader([(b"n", b"n")], 0, NOW) == (30, 30)
    log.close()
    log = open_log(tmp_path, segment_bytes=10**6, index_interval_bytes=100)
    assert log.log_end_offset == 31 and log.recovery.truncated_bytes == 0


def test_truncate_to_across_segment_boundaries(tmp_path):
    log = open_log(tmp_path, segment_bytes=1_500)
    fill(log, 40, random.Random(4), epoch=1)
    mid_leo = log.log_end_offset
    fill(log, 40, random.Random(5), epoch=2)
    assert log.epoch_cache.entries == [(1, 0), (2, mid_leo)]
    segs = log.segments
    assert len(segs) >= 6
    target_seg = segs[2]
    target = target_seg.base_offset + 1
    doomed = [s.log_path for s in segs[3:]]
    old_leo = log.log_end_offset
    dropped = log.truncate_to(target)
    new_leo = log.log_end_offset
    assert new_leo <= target and dropped == old_leo - new_leo
    assert len(log.segments) == 3 and log.active_segment is target_seg
    assert not any(p.exists() for p in doomed)
    assert log.epoch_cache.entries == [(1, 0)]
    assert [r[0] for r in records_of(log.read(0, 10**9))] == list(range(new_leo))
    # appends continue; the old segment becomes active again and can roll again
    fill(log, 30, random.Random(6), epoch=3)
    assert log.epoch_cache.entries == [(1, 0), (3, new_leo)]
    leo = log.log_end_offset
    log.close()
    log = open_log(tmp_path, segment_bytes=1_500)
    assert log.log_end_offset == leo and log.epoch_cache.entries == [(1, 0), (3, new_leo)]
    assert log.truncate_to(0) == leo and log.log_end_offset == 0 and len(log.segments) == 1
    assert log.epoch_cache.entries == []


# ---------------------------------------------------------------- follower appends

def _snapshot(log: PartitionLog) -> tuple:
    return (log.log_end_offset, log.size_bytes, log.epoch_cache.entries,
            {n: (log.dir / n).read_bytes() for n in sorted(os.listdir(log.dir))})


def test_follower_append_copies_the_leader(tmp_path):
    leader = PartitionLog(tmp_path / "a", "t", 0, segment_bytes=3_000)
    follower = PartitionLog(tmp_path / "b", "t", 0, segment_bytes=3_000)
    fill(leader, 30, random.Random(7), epoch=2)
    fill(leader, 30, random.Random(8), epoch=5)
    while follower.log_end_offset < leader.log_end_offset:
        chunk = leader.read(follower.log_end_offset, 700)
        first, last = follower.append_as_follower(chunk)
        assert first == base_offsets(chunk)[0]
    assert follower.read(0, 10**9) == leader.read(0, 10**9)
    assert follower.epoch_cache.entries == leader.epoch_cache.entries == [(2, 0), (5, leader.epoch_cache.entries[1][1])]
    assert follower.append_as_follower(b"") is None


def test_follower_append_rejects_gaps_bad_crc_and_torn_batches(tmp_path):
    leader = PartitionLog(tmp_path / "a", "t", 0)
    follower = PartitionLog(tmp_path / "b", "t", 0)
    for i in range(6):
        leader.append_as_leader([(b"k", b"v%d" % i), (None, b"w")], 3, NOW)
    follower.append_as_follower(leader.read(0, 1))  # offsets 0-1
    before = _snapshot(follower)

    with pytest.raises(InvalidAppendError, match="starts at offset 4, expected 2"):
        follower.append_as_follower(leader.read(4, 10**6))  # skips 2-3
    two = leader.read(2, 1)
    with pytest.raises(InvalidAppendError, match="not contiguous"):
        follower.append_as_follower(two + two)  # second copy is not contiguous with the first
    bad = bytearray(leader.read(2, 10**6))
    bad[len(two) + 40] ^= 0x01  # second batch of the chunk is corrupt: nothing at all is written
    with pytest.raises(CorruptBatchError, match="CRC") as info:
        follower.append_as_follower(bytes(bad))
    assert info.value.position == len(two)
    with pytest.raises(CorruptBatchError) as info:
        follower.append_as_follower(leader.read(2, 10**6)[:-5])
    assert info.value.incomplete
    assert _snapshot(follower) == before
    assert follower.append_as_follower(two) == (2, 3)


def test_a_follower_appends_an_older_epoch_and_the_cache_drops_what_it_contradicts(tmp_path):
    """Kafka 2.8's Log.append for a follower does not compare a batch's epoch with the cache's latest: the
    cache's assign removes the entries the older epoch contradicts (a broker that led epoch 5 for a moment
    and wrote nothing, then follows a leader whose log has epoch-4 batches there)."""
    follower = PartitionLog(tmp_path / "b", "t", 0)
    follower.append_as_follower(encode_batch(0, 3, [(None, b"a", NOW), (None, b"b", NOW)]))
    follower.epoch_cache.assign(5, 2)          # became leader of epoch 5 at its log end, wrote nothing
    assert follower.append_as_follower(encode_batch(2, 4, [(None, b"c", NOW)])) == (2, 2)
    assert follower.epoch_cache.entries == [(3, 0), (4, 2)] and follower.log_end_offset == 3
    # and on disk: the checkpoint file holds what the cache holds
    assert (follower.dir / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n2\n3 0\n4 2\n"


def test_leader_append_with_a_stale_epoch_is_refused(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader([(None, b"a")], 7, NOW)
    with pytest.raises(InvalidAppendError):
        log.append_as_leader([(None, b"b")], 6, NOW)
    assert log.log_end_offset == 1
    log.append_as_leader([(None, b"b", 123)], 8, NOW)
    assert scan_batches(log.read(1, 100)).batches[0][1].records[0].timestamp_ms == 123


# ---------------------------------------------------------------- leader epoch cache

def test_end_offset_for_follows_the_reference_rules(tmp_path):
    cache = LeaderEpochCache()
    assert cache.end_offset_for(0, 10) == (-1, -1)  # empty cache
    for epoch, start in [(2, 5), (4, 20), (7, 31)]:
        cache.assign(epoch, start)
    leo = 40
    assert cache.end_offset_for(7, leo) == (7, 40)    # latest -> LEO
    assert cache.end_offset_for(6, leo) == (4, 31)    # largest epoch <= 6 is 4, next epoch starts at 31
    assert cache.end_offset_for(5, leo) == (4, 31)
    assert cache.end_offset_for(4, leo) == (4, 31)
    assert cache.end_offset_for(3, leo) == (2, 20)
    assert cache.end_offset_for(2, leo) == (2, 20)
    assert cache.end_offset_for(1, leo) == (1, 5)     # below all known -> (e, first start offset)
    assert cache.end_offset_for(0, leo) == (0, 5)
    assert cache.end_offset_for(-1, leo) == (-1, -1)  # undefined epoch
    assert cache.end_offset_for(8, leo) == (-1, -1)   # above all


def test_assign_follows_kafkas_rule_and_truncate_from_end():
    """LeaderEpochFileCache.assign (Kafka 2.8.2): the latest epoch at or above its start is a no-op; else
    the newest entries with an epoch >= the new one or a start offset >= the new one go, then it is added."""
    cache = LeaderEpochCache()
    assert cache.assign(1, 0) and not cache.assign(1, 10)
    with pytest.raises(ValueError):
        cache.assign(-1, 10)
    with pytest.raises(ValueError):
        cache.assign(1, -1)
    assert cache.assign(3, 10) and cache.assign(4, 10)  # epoch 3 never got a record: replaced
    assert cache.entries == [(1, 0), (4, 10)] and cache.latest_epoch == 4
    assert cache.assign(5, 20) and cache.assign(7, 30)
    assert cache.assign(6, 25)                           # older than 7: 7 goes, 5 stays
    assert cache.entries == [(1, 0), (4, 10), (5, 20), (6, 25)]
    assert cache.assign(7, 15)                           # starts below 20 and 25: both go
    assert cache.entries == [(1, 0), (4, 10), (7, 15)]
    assert cache.assign(7, 12)                           # the latest epoch, starting lower: moved
    assert cache.entries == [(1, 0), (4, 10), (7, 12)]
    assert cache.assign(2, 40)                           # epochs 4 and 7 are >= 2; epoch 1 stays
    assert cache.entries == [(1, 0), (2, 40)]
    assert cache.assign(0, 40)                           # older than every entry: all go
    assert cache.entries == [(0, 40)]
    cache = LeaderEpochCache()
    for epoch, start in [(1, 0), (4, 10)]:
        cache.assign(epoch, start)
    cache.assign(6, 25)
    cache.truncate_from_end(26)
    assert cache.entries == [(1, 0), (4, 10), (6, 25)]
    cache.truncate_from_end(25)
    assert cache.entries == [(1, 0), (4, 10)]
    cache.truncate_from_end(0)
    assert cache.entries == [] and cache.latest_epoch == -1


def test_epoch_cache_is_persisted_and_reloaded(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader([(None, b"a")] * 3, 1, NOW)
    log.append_as_leader([(None, b"b")] * 2, 4, NOW)
    path = log.dir / LEADER_EPOCH_CHECKPOINT
    assert path.read_text() == "0\n2\n1 0\n4 3\n"
    assert log.end_offset_for_epoch(2) == (1, 3)
    log.close()
    assert LeaderEpochCache(LeaderEpochCheckpointFile(path)).entries == [(1, 0), (4, 3)]
    log = open_log(tmp_path)
    assert log.epoch_cache.entries == [(1, 0), (4, 3)] and log.end_offset_for_epoch(4) == (4, 5)
    log.truncate_to(3)
    assert path.read_text() == "0\n1\n1 0\n"


def test_epoch_entries_beyond_a_recovered_leo_are_dropped_at_open(tmp_path):
    log = open_log(tmp_path, segment_bytes=10**6)
    log.append_as_leader([(None, b"a")] * 3, 1, NOW)
    log.append_as_leader([(None, b"b")] * 3, 2, NOW)
    seg = log.active_segment
    log.close()
    os.truncate(seg.log_path, seg.size - 1)  # the epoch-2 batch is torn
    log = open_log(tmp_path, segment_bytes=10**6)
    assert log.log_end_offset == 3 and log.epoch_cache.entries == [(1, 0)]



def test_epoch_cache_truncate_from_start_keeps_the_epoch_of_the_new_first_record():
    """Kafka 2.8's truncateFromStart: entries at or below the new start go; the newest of them starts there."""
    cache = LeaderEpochCache()
    for e, o in [(1, 0), (3, 5), (4, 9)]:
        cache.assign(e, o)
    cache.truncate_from_start(7)
    assert cache.entries == [(3, 7), (4, 9)]
    cache.truncate_from_start(9)                 # exactly an entry's start: only older ones go
    assert cache.entries == [(4, 9)]
    cache.truncate_from_start(2)                 # below the first entry: nothing to do
    assert cache.entries == [(4, 9)]
    assert cache.end_offset_for(3, 20) == (3, 9)   # an epoch older than the log: Kafka answers the same


def test_moving_the_log_start_trims_the_epoch_cache_on_disk_and_at_load(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader([(None, b"a")] * 3, 1, NOW)
    log.append_as_leader([(None, b"b")] * 3, 2, NOW)
    log.append_as_leader([(None, b"c")] * 3, 5, NOW)
    assert log.maybe_increment_log_start_offset(4)          # DeleteRecords' before-offset 4
    assert log.epoch_cache.entries == [(2, 4), (5, 6)]
    assert (log.dir / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n2\n2 4\n5 6\n"
    assert log.end_offset_for_epoch(1) == (1, 4)              # below every epoch left: the first entry's start
    log.close()
    # a crash before the cache's flush: the load trims it against the log start checkpoint itself
    (log.dir / LEADER_EPOCH_CHECKPOINT).write_text("0\n3\n1 0\n2 3\n5 6\n")
    log = open_log(tmp_path)
    assert log.log_start_offset == 4 and log.epoch_cache.entries == [(2, 4), (5, 6)]


# ---------------------------------------------------------------- checkpoint files

def test_replication_offset_checkpoint_round_trip_and_format(tmp_path):
    f = OffsetCheckpointFile(tmp_path / "replication-offset-checkpoint")
    assert f.read() == {}
    offsets = {("__consumer_offsets", 12): 40, ("orders", 0): 7, ("orders", 1): 0}
    f.write(offsets)
    assert f.read() == offsets
    assert f.path.read_text() == "0\n3\n__consumer_offsets 12 40\norders 0 7\norders 1 0\n"
    f.write({("orders", 0): 8})
    assert f.read() == {("orders", 0): 8}
    assert os.listdir(tmp_path) == ["replication-offset-checkpoint"]  # no temp file left behind


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch):
    f = LeaderEpochCheckpointFile(tmp_path / "leader-epoch-checkpoint")
    f.write([(0, 0), (2, 10)])

    def crash(*_args):
        raise OSError("crash before rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        f.write([(5, 99)])
    monkeypatch.undo()
    assert f.read() == [(0, 0), (2, 10)]  # the old content survives; the half-done write was a temp file
    log_dir = tmp_path / "logs"
    (log_dir / "t-0").mkdir(parents=True)
    (log_dir / "t-0" / "leader-epoch-checkpoint.tmp").write_text("garbage")
    PartitionLog(log_dir, "t", 0).close()
    assert not (log_dir / "t-0" / "leader-epoch-checkpoint.tmp").exists()


@pytest.mark.parametrize("text, line", [
    ("", 1),
    ("1\n0\n", 1),                  # unknown version
    ("0\nx\n", 2),                  # count not an integer
    ("0\n2\n1 0\n", 4),             # one entry missing
    ("0\n1\n1 0\n2 5\n", 4),        # one entry too many
    ("0\n2\n1 0\n2 five\n", 4),     # bad field
    ("0\n2\n1 0\n2\n", 4),          # too few fields
    ("0\n2\n3 0\n2 5\n", 4),        # epochs going backwards
])
def test_malformed_leader_epoch_checkpoint_names_the_line(tmp_path, text, line):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(text)
    with pytest.raises(CheckpointError) as info:
        LeaderEpochCache(LeaderEpochCheckpointFile(path))
    assert info.value.line == line and info.value.path == path
    assert f"line {line}" in str(info.value) and str(path) in str(info.value)


def test_malformed_offset_checkpoint_names_the_line(tmp_path):
    path = tmp_path / "replication-offset-checkpoint"
    path.write_text("0\n2\nt 0 5\nt 0 6\n")
    with pytest.raises(CheckpointError, match="line 4.*duplicate"):
        OffsetCheckpointFile(path).read()
    path.write_text("0\n1\nt -1 5\n")
    with pytest.raises(CheckpointError, match="line 3"):
        OffsetCheckpointFile(path).read()
    write_checkpoint(path, ["a b c"])
    assert read_checkpoint(path, lambda fields: fields) == [["a", "b", "c"]]


def test_a_segment_fsyncs_only_what_was_written_since_its_last_fsync(tmp_path, monkeypatch):
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    seg = LogSegment.create(tmp_path, 0, index_interval_bytes=0, sync_dir=False)
    seg.flush()
    assert synced == []                      # new and empty: nothing to make durable
    seg.append(encode_batch(0, 0, [(None, b"v", NOW)]), 0, 0, NOW)
    seg.flush()
    assert len(synced) == 1                  # the log: no index entry yet (none before the first batch)
    seg.append(encode_batch(1, 0, [(None, b"w", NOW + 1)]), 1, 1, NOW + 1)
    seg.flush()
    assert len(synced) == 4                  # the log and both indexes (an entry in each)
    seg.close()
    assert len(synced) == 4                  # nothing written since
    reopened = LogSegment.open(tmp_path, 0)
    reopened.close()
    assert len(synced) == 7                  # opened: not known to be synced, so its close fsyncs all three


def _open_fds() -> set[str]:
    return {os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
            if os.path.exists(f"/proc/self/fd/{fd}")}


def test_a_segment_opens_its_index_files_only_to_write_them(tmp_path):
    seg = LogSegment.create(tmp_path, 0, index_interval_bytes=0, sync_dir=False)
    names = {p: str(p) for p in (seg.log_path, seg.index_path, seg.time_index_path)}
    assert all(p.exists() for p in names)    # the three files are there (empty), as Kafka's
    held = _open_fds()
    assert names[seg.log_path] in held and names[seg.index_path] not in held \
        and names[seg.time_index_path] not in held
    seg.append(encode_batch(0, 0, [(None, b"v", NOW)]), 0, 0, NOW)
    assert names[seg.index_path] not in _open_fds()          # no entry for the first batch
    seg.append(encode_batch(1, 0, [(None, b"w", NOW + 1)]), 1, 1, NOW + 1)
    held = _open_fds()
    assert names[seg.index_path] in held and names[seg.time_index_path] in held
    assert seg.offset_index_entries() == [(1, seg.find_batch(1)[0])]
    seg.close()
    assert not {names[p] for p in names} & _open_fds()
    with pytest.raises(OSError):
        seg._index_fd()                      # a closed segment opens nothing again
    reopened = LogSegment.open(tmp_path, 0)
    assert names[seg.index_path] not in _open_fds()           # read, and closed again
    assert reopened.offset_index_entries() == seg.offset_index_entries()
    assert reopened.time_index_entries() == [(NOW + 1, 1)]
    reopened.truncate_to(1)                  # cuts the entry: the index is opened to be cut
    assert reopened.offset_index_entries() == [] and os.path.getsize(seg.index_path) == 0
    reopened.close()
    assert os.path.getsize(seg.time_index_path) == 0 and not {names[p] for p in names} & _open_fds()


def test_a_new_segment_cuts_index_files_left_behind_and_fsyncs_them(tmp_path, monkeypatch):
    (tmp_path / segment_file_name(0, ".index")).write_bytes(b"\0" * 8)
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    seg = LogSegment.create(tmp_path, 0, sync_dir=False)
    assert os.path.getsize(seg.index_path) == 0
    seg.close()
    assert len(synced) == 2                  # the log and the index cut here (the time index was empty)


def test_a_new_leader_epoch_fsyncs_its_checkpoint_file_and_not_the_directory(tmp_path, monkeypatch):
    """Kafka 2.8.2's CheckpointFile.write: the new file fsynced and renamed over the old one, no directory fsync
    (one fsync per new leader epoch on a failover's path, not two)."""
    import node.storage.checkpoint as checkpoint
    synced, dirs = [], []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    monkeypatch.setattr(checkpoint, "fsync_directory", lambda d: dirs.append(d))
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    cache = LeaderEpochCache(LeaderEpochCheckpointFile(path))
    assert cache.assign(3, 10) and path.read_text() == "0\n1\n3 10\n"
    assert len(synced) == 1 and dirs == []
    assert cache.assign(4, 20) and path.read_text() == "0\n2\n3 10\n4 20\n"
    assert len(synced) == 2 and dirs == []
    assert not list(tmp_path.glob("*.tmp"))


def test_a_prepared_epoch_checkpoint_is_only_renamed_by_the_assign_it_was_written_for(tmp_path, monkeypatch):
    """A new leader writes and fsyncs its epoch's checkpoint before it takes the partition's lock
    (LeaderEpochCache.prepare); the assign under the lock renames it into place with no fsync of its own when the
    cache would hold exactly those entries, and otherwise discards it and writes its own."""
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    cache = LeaderEpochCache(LeaderEpochCheckpointFile(path))
    assert cache.assign(3, 10) and len(synced) == 1
    prepared = cache.prepare(4, 20)
    assert len(synced) == 2 and path.read_text() == "0\n1\n3 10\n"   # written and fsynced, not in place yet
    assert cache.entries == [(3, 10)]
    assert cache.assign(4, 20, prepared) and path.read_text() == "0\n2\n3 10\n4 20\n"
    assert len(synced) == 2 and cache.entries == [(3, 10), (4, 20)]  # renamed: no fsync under the lock
    assert LeaderEpochCache(LeaderEpochCheckpointFile(path)).entries == [(3, 10), (4, 20)]
    # the log end moved between the prepare and the assign: another file, written and fsynced under the lock
    prepared = cache.prepare(5, 30)
    assert cache.assign(5, 31, prepared) and path.read_text() == "0\n3\n3 10\n4 20\n5 31\n"
    assert len(synced) == 4 and not list(tmp_path.glob("*.tmp"))
    # an assign that changes nothing discards it; an epoch the cache has needs no file
    prepared = cache.prepare(6, 40)
    assert not cache.assign(5, 40, prepared) and not list(tmp_path.glob("*.tmp"))
    assert cache.prepare(5, 40) is None and cache.entries == [(3, 10), (4, 20), (5, 31)]


def test_a_log_prepares_a_new_epochs_checkpoint_at_its_end_only(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader([(None, b"a")] * 3, 1, NOW)
    assert log.prepare_epoch(1) is None            # not a new epoch: nothing to write
    prepared = log.prepare_epoch(2)
    assert prepared is not None and prepared.entries == ((1, 0), (2, 3))
    assert log.assign_epoch(2, 3, prepared=prepared) and log.epoch_cache.entries == [(1, 0), (2, 3)]
    assert (log.dir / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n2\n1 0\n2 3\n"
    assert not list(log.dir.glob("*.tmp"))
    log.close()
    assert log.prepare_epoch(3) is None            # a closed log writes nothing
