"""The topic configs a broker enforces on its logs, on real files: segment.jitter.ms, segment.index.bytes,
flush.messages, flush.ms, file.delete.delay.ms, max.compaction.lag.ms, min.cleanable.dirty.ratio, the append rules
(message.timestamp.type, compression.type, message.timestamp.difference.max.ms), and a live change of them."""
from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from kafkacommon.record_batch import GZIP, LOG_APPEND_TIME, decode_batch, encode_batch, peek_header
from kafkacommon.topic_config import LogConfig
from node.storage.cleaner import clean
from node.storage.log import DELETED_SUFFIX, PartitionLog
from node.storage.validator import TimestampOutOfRange, prepare_batch

SETTINGS = dict(segment_bytes=1 << 20, segment_ms=10_000, index_interval_bytes=4096, segment_jitter_ms=0,
                max_index_bytes=10_485_760, flush_messages=(1 << 63) - 1, file_delete_delay_ms=0)


def open_log(tmp_path: Path, **changes) -> PartitionLog:
    log = PartitionLog(tmp_path, "t", 0)
    log.configure(**{**SETTINGS, **changes})
    return log


def test_segment_jitter_takes_a_drawn_amount_off_segment_ms(tmp_path):
    log = open_log(tmp_path, segment_jitter_ms=4000)
    log._rng = random.Random(3)
    log.append_as_leader([(None, b"a", 1000)], 0, now_ms=1000)
    log.append_as_leader([(None, b"b", 1001)], 0, now_ms=1001)
    assert len(log.segments) == 1
    log.delete_oldest_segments(0)
    log._roll(log.log_end_offset, 2000)
    jitter = log.active_segment.roll_jitter_ms
    assert 0 < jitter < 4000        # below min(segment.jitter.ms, segment.ms)
    log.append_as_leader([(None, b"c", 2000)], 0, now_ms=2000)
    log.append_as_leader([(None, b"d", 2000 + 10_000 - jitter)], 0, now_ms=2000)   # waited segment.ms - jitter
    assert len(log.segments) == 2
    log.append_as_leader([(None, b"e", 2000 + 10_000 - jitter + 1)], 0, now_ms=2000)
    assert len(log.segments) == 3
    log.close()


def test_a_full_offset_index_rolls_the_segment(tmp_path):
    log = open_log(tmp_path, index_interval_bytes=0, max_index_bytes=24)   # 3 offset entries, 2 time entries
    for i in range(5):
        log.append_as_leader([(None, b"v", 1000 + i)], 0, now_ms=1000)
    assert [s.base_offset for s in log.segments] == [0, 3]   # entries at the 2nd and 3rd batch: the time index is full
    log.close()


def test_flush_messages_fsyncs_every_n_records(tmp_path):
    log = open_log(tmp_path, flush_messages=3)
    log.append_as_leader([(None, b"a", 1), (None, b"b", 1)], 0, now_ms=5)
    assert log.unflushed == 2 and log.last_flush_ms is None
    log.append_as_leader([(None, b"c", 1)], 0, now_ms=7)
    assert log.unflushed == 0 and log.last_flush_ms == 7
    log.close()


def test_retention_deleted_segments_wait_out_file_delete_delay(tmp_path):
    log = open_log(tmp_path, file_delete_delay_ms=60_000, segment_bytes=100)
    for i in range(3):
        log.append_as_leader([(None, b"x" * 60, 1000 + i)], 0, now_ms=1000)
    assert len(log.segments) == 3
    assert log.delete_oldest_segments(1, now_ms=5000) == [0]
    left = sorted(p.name for p in log.dir.iterdir() if p.name.endswith(DELETED_SUFFIX))
    assert left == ["00000000000000000000.index.deleted", "00000000000000000000.log.deleted",
                    "00000000000000000000.timeindex.deleted"]
    assert log.purge_deleted(64_999) == [] and log.purge_deleted(65_000) == [0]
    assert not any(p.name.endswith(DELETED_SUFFIX) for p in log.dir.iterdir())
    log.delete_oldest_segments(1, now_ms=70_000)
    log.close()           # a stop removes what still waits
    assert not any(p.name.endswith(DELETED_SUFFIX) for p in log.dir.iterdir())


def test_a_leftover_deleted_segment_is_removed_when_the_log_opens(tmp_path):
    log = open_log(tmp_path, file_delete_delay_ms=60_000, segment_bytes=100)
    for i in range(3):
        log.append_as_leader([(None, b"x" * 60, 1000 + i)], 0, now_ms=1000)
    log.delete_oldest_segments(1, now_ms=5000)
    log.flush()           # a crash: the .deleted files stay behind
    again = PartitionLog(tmp_path, "t", 0)
    assert not any(p.name.endswith(DELETED_SUFFIX) for p in again.dir.iterdir())
    assert again.log_start_offset == 1
    again.close()


def test_max_compaction_lag_cleans_a_log_below_its_dirty_ratio(tmp_path):
    log = open_log(tmp_path, segment_bytes=200)
    for i in range(12):
        log.append_as_leader([(b"k%d" % (i % 5), b"v" * 40, 1000 + i)], 0, now_ms=1000)
        if i == 8:
            assert clean(log, now_ms=1000, upper_bound_offset=log.log_end_offset, min_cleanable_ratio=0.0).segments_cleaned
    kw = dict(now_ms=100_000, upper_bound_offset=log.log_end_offset, min_cleanable_ratio=0.99)
    assert clean(log, **kw).segments_cleaned == 0                      # below the ratio
    assert clean(log, **kw, max_compaction_lag_ms=200_000).segments_cleaned == 0   # not overdue yet
    assert clean(log, **kw, max_compaction_lag_ms=50_000).segments_cleaned > 0     # overdue: cleaned
    log.close()


def test_log_append_time_recompression_and_the_timestamp_bound():
    batch = encode_batch(0, 0, [(b"k", b"v" * 200, 1000), (None, b"w", 1005, [("h", b"1")])], producer_id=9,
                         producer_epoch=2, base_sequence=4)
    lc = LogConfig()
    assert prepare_batch(batch, lc, 50).data is batch               # the defaults change nothing
    stamped = prepare_batch(batch, dataclasses.replace(lc, message_timestamp_type="LogAppendTime"), 7777)
    b, _ = decode_batch(bytes(stamped.data))
    assert (b.timestamp_type, b.max_timestamp, stamped.log_append_time, b.compression) == (LOG_APPEND_TIME, 7777, 7777,
                                                                                             0)
    gz = prepare_batch(batch, dataclasses.replace(lc, compression_type="gzip"), 50)
    b, _ = decode_batch(bytes(gz.data))
    assert b.compression == GZIP and [(r.key, r.value, r.timestamp_ms, r.headers) for r in b.records] == [
        (b"k", b"v" * 200, 1000, ()), (None, b"w", 1005, (("h", b"1"),))]
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (9, 2, 4) and gz.log_append_time == -1
    assert peek_header(gz.data).size_bytes < len(batch)
    bounded = dataclasses.replace(lc, message_timestamp_difference_max_ms=10)
    prepare_batch(batch, bounded, 1000)
    with pytest.raises(TimestampOutOfRange, match="Timestamp 1005 of message with offset 1 is out of range"):
        prepare_batch(batch, bounded, 994)


def test_a_topic_config_change_reaches_the_hosted_log_and_the_replication_core(tmp_path):
    from tests.test_replica_manager import info, manager
    rm = manager(tmp_path, lambda t: {})
    try:
        rm.apply_leader_and_isrs([info("t", 0, 1), info("u", 0, 1)])
        h = rm.hosted[("t", 0)]
        assert (h.log.segment_bytes, h.repl.settings.min_insync_replicas) == (1 << 20, 1)
        assert rm.reconfigure_topic("t", {"segment.bytes": "5000", "min.insync.replicas": "2",
                                          "cleanup.policy": "compact", "max.compaction.lag.ms": "700"}) == [0]
        assert (h.log.segment_bytes, h.log.segment_ms, h.repl.settings.min_insync_replicas) == (5000, 700, 2)
        assert rm.topic_setting(("t", 0), "max.message.bytes", 0) == 1_048_588
        assert rm.hosted[("u", 0)].log.segment_bytes == 1 << 20
        assert rm.reconfigure_topic("t", {}) == [0] and h.log.segment_bytes == 1 << 20
    finally:
        rm.close()


def test_the_flusher_runs_once_30_s_after_the_start_and_deleted_files_go_after_their_delay(tmp_path):
    """Kafka's flushDirtyLogs at its defaults (once, 30 s in: flush.ms), and the delayed deletion of retention's
    segments (file.delete.delay.ms), as the broker's one-second housekeeping task does them."""
    import threading
    from node.clock import now_ms
    from tests.test_replica_manager import _produce, manager
    from replication.broker_state import PartitionInfo
    configs = {"t": {"flush.ms": "0", "segment.bytes": "200", "retention.ms": "1", "file.delete.delay.ms": "0"},
               "u": {"segment.bytes": "200", "retention.ms": "1", "file.delete.delay.ms": "3600000"}}
    rm = manager(tmp_path, lambda t: dict(configs[t]))
    try:
        rm.apply_leader_and_isrs([PartitionInfo(t, 0, 1, 0, (1,), (1,), 0, 1) for t in ("t", "u")])
        for t in ("t", "u"):
            for _ in range(4):
                assert _produce(rm, (t, 0), [b"v" * 100], ts=1000).error_code == 0
        ran = threading.Event()
        assert rm.purge_and_flush(now_ms(), ran) == (0, 0) and not ran.is_set()     # not 30 s yet
        assert rm.hosted[("t", 0)].log.unflushed == 4
        assert rm.purge_and_flush(now_ms() - 30_000, ran) == (0, 1) and ran.is_set()   # "t" (flush.ms 0) only
        assert rm.hosted[("t", 0)].log.unflushed == 0 and rm.hosted[("u", 0)].log.unflushed == 4
        assert rm.purge_and_flush(now_ms() - 60_000, ran) == (0, 0)               # once only
        rm.retain_logs()
        u = rm.hosted[("u", 0)].log
        assert u.pending_deletes and any(p.name.endswith(DELETED_SUFFIX) for p in u.dir.iterdir())
        assert not any(p.name.endswith(DELETED_SUFFIX) for p in rm.hosted[("t", 0)].log.dir.iterdir())
        rm.reconfigure_topic("u", {**configs["u"], "file.delete.delay.ms": "0"})   # the delay already drawn stays
        assert rm.purge_and_flush(now_ms(), ran) == (0, 0)
    finally:
        rm.close()


def test_a_refused_list_value_names_the_item_kafka_refuses() -> None:
    """Kafka 2.8.2's ValidList names the first refused item, not the list (kafkasim conformance
    CreateTopics.*.invalid_config)."""
    import pytest as _pytest
    from kafkacommon.topic_config import TOPIC_KEYS, ConfigValueError
    with _pytest.raises(ConfigValueError) as e:
        TOPIC_KEYS["cleanup.policy"].parse("compact,bogus")
    assert str(e.value) == ("Invalid value bogus for configuration cleanup.policy: "
                            "String must be one of: compact, delete")
