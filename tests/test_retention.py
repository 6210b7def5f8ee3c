"""Retention, age-based rolls and max.message.bytes: the pure rules (Kafka 2.8's Log/LogSegment) and the log on disk."""
from __future__ import annotations

import pytest

from node.storage.log import OffsetOutOfRangeError, PartitionLog, RecordTooLargeError
from node.storage.retention import SegmentInfo, retention_decision, should_roll

NOW = 1_700_000_000_000
HOUR = 3_600_000


def segs(*rows: tuple[int, int, int]) -> list[SegmentInfo]:
    return [SegmentInfo(*r) for r in rows]


def decide(segments, **kw):
    args = dict(log_start_offset=segments[0].base_offset, log_end_offset=40, high_watermark=40, now_ms=NOW,
                retention_ms=-1, retention_bytes=-1, delete_policy=True)
    args.update(kw)
    return retention_decision(segments, **args)


# ---------------------------------------------------------------- the pure rules

def test_retention_ms_deletes_the_oldest_segments_past_it_and_stops_at_the_first_kept():
    s = segs((0, 100, NOW - 5 * HOUR), (10, 100, NOW - 3 * HOUR), (20, 100, NOW - 5 * HOUR), (30, 100, NOW))
    d = decide(s, retention_ms=4 * HOUR)
    assert (d.count, d.reasons, d.log_start_offset) == (1, ("retention_ms",), 10)
    assert decide(s, retention_ms=5 * HOUR).count == 0  # Kafka: strictly older than retention.ms
    assert decide(s, retention_ms=-1).count == 0


def test_retention_never_passes_the_high_watermark():
    s = segs((0, 100, NOW - 9 * HOUR), (10, 100, NOW - 9 * HOUR), (20, 100, NOW - 9 * HOUR))
    assert decide(s, retention_ms=HOUR, high_watermark=19, log_end_offset=30).count == 1
    assert decide(s, retention_ms=HOUR, high_watermark=20, log_end_offset=30).count == 2
    assert decide(s, retention_ms=HOUR, high_watermark=9, log_end_offset=30).count == 0
    # every segment, the active one too, once the HW is at the LEO (Kafka rolls an empty one first)
    d = decide(s, retention_ms=HOUR, high_watermark=30, log_end_offset=30)
    assert (d.count, d.log_start_offset) == (3, 30)
    empty_last = segs((0, 100, NOW - 9 * HOUR), (10, 0, NOW - 9 * HOUR))
    assert decide(empty_last, retention_ms=HOUR, high_watermark=10, log_end_offset=10).count == 1


def test_retention_bytes_deletes_oldest_while_the_rest_stays_at_least_the_limit():
    s = segs((0, 100, NOW), (10, 100, NOW), (20, 100, NOW), (30, 50, NOW))
    assert decide(s, retention_bytes=200).count == 1  # 350 bytes: deleting 100 leaves 250, 100 more only 150
    assert decide(s, retention_bytes=150).count == 2
    assert decide(s, retention_bytes=350).count == 0
    assert decide(s, retention_bytes=400).count == 0  # size below the limit


def test_only_the_log_start_offset_rule_without_the_delete_policy():
    s = segs((0, 100, NOW - 9 * HOUR), (10, 100, NOW - 9 * HOUR), (20, 100, NOW))
    assert decide(s, retention_ms=HOUR, delete_policy=False).count == 0
    d = decide(s, retention_ms=-1, delete_policy=False, log_start_offset=15)
    assert (d.count, d.reasons, d.log_start_offset) == (1, ("log_start_offset",), 15)  # 10's segment holds 15
    assert decide(s, delete_policy=False, log_start_offset=20).count == 2


def test_should_roll_on_size_and_on_age_of_the_first_batch():
    base = dict(size=500, batch_bytes=100, segment_bytes=1000, first_batch_timestamp=NOW, created_ms=None,
                now_ms=None, segment_ms=HOUR)
    assert not should_roll(batch_max_timestamp=NOW + HOUR, **base)  # not MORE than segment.ms
    assert should_roll(batch_max_timestamp=NOW + HOUR + 1, **base)
    assert should_roll(**{**base, "size": 901, "batch_max_timestamp": NOW})
    assert not should_roll(**{**base, "size": 0, "batch_max_timestamp": NOW + 9 * HOUR})  # empty: never on age
    no_ts = {**base, "first_batch_timestamp": -1, "batch_max_timestamp": -1}
    assert should_roll(**{**no_ts, "created_ms": NOW, "now_ms": NOW + HOUR + 1})
    assert not should_roll(**{**no_ts, "created_ms": NOW, "now_ms": NOW + HOUR})


# ---------------------------------------------------------------- the log on disk

def open_log(path, **kw) -> PartitionLog:
    kw.setdefault("segment_bytes", 10**6)
    return PartitionLog(path, "t", 0, **kw)


def test_a_segment_rolls_on_age(tmp_path):
    log = open_log(tmp_path, segment_ms=HOUR)
    log.append_as_leader([(b"k", b"v", NOW)], 0, NOW)
    log.append_as_leader([(b"k", b"v", NOW + HOUR)], 0, NOW + HOUR)
    assert len(log.segments) == 1
    log.append_as_leader([(b"k", b"v", NOW + HOUR + 1)], 0, NOW + HOUR + 1)
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()
    log = open_log(tmp_path, segment_ms=HOUR)  # the first timestamp is read back after a restart
    log.append_as_leader([(b"k", b"v", NOW + 2 * HOUR + 2)], 0, NOW)
    assert [s.base_offset for s in log.segments] == [0, 2, 3]
    log.close()


def test_a_batch_over_max_message_bytes_is_refused_and_nothing_changes(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader([(b"k", b"v")], 0, NOW, max_batch_bytes=200)
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader([(b"k", b"v" * 300)], 1, NOW, max_batch_bytes=200)
    assert log.log_end_offset == 1 and log.epoch_cache.entries == [(0, 0)]
    log.close()


def fill(log: PartitionLog, n: int, ts: int) -> None:
    for i in range(n):
        log.append_as_leader([(b"k", b"v" * 100, ts)], 0, ts)


def test_deleting_segments_moves_the_log_start_offset_which_survives_a_restart(tmp_path):
    log = open_log(tmp_path, segment_bytes=400)
    fill(log, 12, NOW)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 4
    d = retention_decision(log.segment_infos(), log_start_offset=log.log_start_offset,
                           log_end_offset=log.log_end_offset, high_watermark=bases[2], now_ms=NOW + 2 * HOUR,
                           retention_ms=HOUR, retention_bytes=-1, delete_policy=True)
    assert d.count == 2 and d.log_start_offset == bases[2]
    assert log.delete_oldest_segments(d.count) == bases[:2]
    assert log.log_start_offset == bases[2]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(bases[2] - 1, 10**6)
    assert log.maybe_increment_log_start_offset(bases[2] + 1) and not log.maybe_increment_log_start_offset(3)
    log.close()
    log = open_log(tmp_path, segment_bytes=400)
    assert log.log_start_offset == bases[2] + 1
    with pytest.raises(OffsetOutOfRangeError):
        log.read(bases[2], 10**6)
    assert log.read(bases[2] + 1, 10**6)
    log.close()


def test_deleting_every_segment_rolls_an_empty_one_at_the_log_end(tmp_path):
    log = open_log(tmp_path, segment_bytes=400)
    fill(log, 6, NOW)
    n, leo = len(log.segments), log.log_end_offset
    log.delete_oldest_segments(n, NOW)
    assert [s.base_offset for s in log.segments] == [leo] and log.log_start_offset == leo == log.log_end_offset
    assert log.append_as_leader([(b"k", b"v")], 0, NOW) == (leo, leo)
    log.close()


def test_a_follower_behind_the_leaders_start_truncates_fully_and_starts_there(tmp_path):
    log = open_log(tmp_path, segment_bytes=400)
    fill(log, 3, NOW)
    assert log.truncate_fully_and_start_at(50) == 3
    assert (log.log_start_offset, log.log_end_offset, log.epoch_cache.entries) == (50, 50, [])
    log.close()
    log = open_log(tmp_path, segment_bytes=400)
    assert (log.log_start_offset, log.log_end_offset) == (50, 50)
    log.close()
