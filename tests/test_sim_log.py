"""sim/log.py: a simulated replica log keeps its bytes on a SimDisk and recovers with the real log's rule."""
from __future__ import annotations

from pathlib import Path

from node.storage.segment import LogSegment
from sim.disk import SimDisk
from sim.log import SimLog


def recs(*values: bytes) -> list[tuple[bytes | None, bytes | None]]:
    return [(b"k", v) for v in values]


def test_a_power_loss_keeps_the_fsynced_batches_and_recovery_cuts_a_torn_one_as_the_real_segment_does(
        tmp_path: Path) -> None:
    disk = SimDisk()
    log = SimLog(disk, "t", 0)
    log.append(1, recs(b"a", b"b"), 1000)
    log.append(1, recs(b"c"), 1001)
    log.fsync()
    log.append(2, recs(b"d", b"e"), 1002)
    log.append(2, recs(b"f"), 1003)
    assert disk.read(log.path) and disk.unsynced_bytes(log.path) > 0
    durable, third_end, size = log.batch_ends[1], log.batch_ends[2], log.size_bytes
    disk.crash(lambda _p, n: n - 9)                       # the last batch torn 9 bytes short
    torn = disk.read(log.path)
    assert len(torn) == size - 9
    assert log.recover() == (size - 9 - third_end, 1)
    assert log.log_end_offset == 5 and log.size_bytes == log.batch_ends[-1]
    assert log.read(0) == [(1, recs(b"a", b"b"), None), (1, recs(b"c"), None), (2, recs(b"d", b"e"), None)]
    assert log.end_offset_for_epoch(1) == (1, 3) and log.latest_epoch == 2
    # the real broker's segment recovery cuts the same bytes at the same place
    (tmp_path / "00000000000000000000.log").write_bytes(torn)
    seg = LogSegment.open(tmp_path, 0, recover=True)
    assert seg.recovery == (log.size_bytes, size - 9 - log.size_bytes) and seg.last_dropped_batches == 1
    seg.close()
    # recovered and clean: a power loss now loses nothing, a second recovery cuts nothing
    assert log.size_bytes > durable and disk.unsynced_bytes(log.path) == 0
    disk.crash(0.0)
    assert log.recover() == (0, 0) and log.log_end_offset == 5


def test_a_truncation_lost_by_a_power_loss_brings_back_the_old_batches_read_from_the_file() -> None:
    disk = SimDisk()
    log = SimLog(disk, "t", 0)
    log.append(1, recs(b"a"), 1000)
    log.append(1, recs(b"b", b"c"), 1001)
    log.fsync()
    assert log.truncate_to(1) == 2                        # a follower's truncation ...
    log.append(2, recs(b"X", b"Y", b"Z"), 1002)           # ... and the new leader's batch, neither fsynced
    assert log.read(0) == [(1, recs(b"a"), None), (2, recs(b"X", b"Y", b"Z"), None)]
    disk.crash(1.0)                                       # the file goes back to its durable content
    assert log.recover() == (0, 0)
    assert log.log_end_offset == 3 and log.read(0) == [(1, recs(b"a"), None), (1, recs(b"b", b"c"), None)]
    assert log.latest_epoch == 1 and log.end_offset_for_epoch(1) == (1, 3)
    assert log.read_bytes(1)[0] == disk.read(log.path, log.batch_ends[0])


def test_a_read_gives_whole_batches_as_appended_so_a_follower_copies_the_leaders_boundaries() -> None:
    log = SimLog(SimDisk(), "t", 0)
    log.append(1, recs(b"a", b"b"), 1000)
    log.append(2, recs(b"c"), 1001)
    log.append(2, recs(b"d", b"e", b"f"), 1002)
    assert log.read(2) == [(2, recs(b"c"), None), (2, recs(b"d", b"e", b"f"), None)]
    assert log.read(0, max_records=3) == [(1, recs(b"a", b"b"), None), (2, recs(b"c"), None)]    # whole batches
    assert log.read(3, max_records=1) == [(2, recs(b"d", b"e", b"f"), None)]                    # at least one
    follower = SimLog(SimDisk(), "t", 0)
    follower.append_as_follower(log.read(0), 1003)
    assert follower.batch_last == log.batch_last
    assert follower.truncate_to(3) == 3 and follower.log_end_offset == 3    # at the leader's batch boundary


def test_producer_batches_keep_their_fields_through_replication_and_the_log_knows_its_transactions() -> None:
    from kafkacommon.control import marker_record
    from sim.log import ProducerBatch

    disk = SimDisk()
    leader, follower = SimLog(disk, "t", 0), SimLog(SimDisk(), "t", 0)
    leader.append(1, recs(b"plain"), 1000)
    leader.append(1, recs(b"t1", b"t2"), 1001, ProducerBatch(7, 0, 0, True))        # producer 7's transaction
    leader.append(1, recs(b"u1"), 1002, ProducerBatch(8, 0, 0, True))               # producer 8's
    assert leader.producers.open_transactions() == {7: 1, 8: 3}
    assert leader.last_stable_offset(4) == 1 and leader.last_stable_offset(4, planted_lso_from_hw=True) == 4
    leader.append(1, [marker_record(False, 3)], 1003, ProducerBatch(7, 0, -1, True, True))   # 7 aborts
    assert leader.aborted_between(0, 5) == [(7, 1)] and leader.aborted_between(4, 5) == [(7, 1)]
    assert leader.aborted_between(5, 6) == []
    assert leader.last_stable_offset(5) == 3                                        # 8's is still open
    chunks = leader.read(0)
    assert [c[2] for c in chunks] == [None, ProducerBatch(7, 0, 0, True), ProducerBatch(8, 0, 0, True),
                                      ProducerBatch(7, 0, -1, True, True)]
    assert leader.read(2)[0] == (1, recs(b"t2"), ProducerBatch(7, 0, 1, True))     # read from inside: seq 1
    follower.append_as_follower(chunks, 2000)
    assert follower.producers.open_transactions() == {8: 3} and follower.aborted_between(0, 5) == [(7, 1)]
    assert follower.meta_at(3) == ProducerBatch(8, 0, 0, True)
    # a truncation below the marker reopens 7's transaction; a recovery rebuilds the same from the file
    assert leader.truncate_to(4) == 1
    assert leader.producers.open_transactions() == {7: 1, 8: 3} and leader.aborted == []
    leader.fsync()
    disk.crash(0.0)
    assert leader.recover() == (0, 0)
    assert leader.producers.open_transactions() == {7: 1, 8: 3} and leader.meta_at(1) == ProducerBatch(7, 0, 0, True)
