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
    assert log.read(0) == [(1, recs(b"a", b"b")), (1, recs(b"c")), (2, recs(b"d", b"e"))]   # batch by batch
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
    assert log.read(0) == [(1, recs(b"a")), (2, recs(b"X", b"Y", b"Z"))]
    disk.crash(1.0)                                       # the file goes back to its durable content
    assert log.recover() == (0, 0)
    assert log.log_end_offset == 3 and log.read(0) == [(1, recs(b"a")), (1, recs(b"b", b"c"))]
    assert log.latest_epoch == 1 and log.end_offset_for_epoch(1) == (1, 3)
    assert log.read_bytes(1)[0] == disk.read(log.path, log.batch_ends[0])


def test_a_read_gives_whole_batches_as_appended_so_a_follower_copies_the_leaders_boundaries() -> None:
    log = SimLog(SimDisk(), "t", 0)
    log.append(1, recs(b"a", b"b"), 1000)
    log.append(2, recs(b"c"), 1001)
    log.append(2, recs(b"d", b"e", b"f"), 1002)
    assert log.read(2) == [(2, recs(b"c")), (2, recs(b"d", b"e", b"f"))]
    assert log.read(0, max_records=3) == [(1, recs(b"a", b"b")), (2, recs(b"c"))]    # whole batches only
    assert log.read(3, max_records=1) == [(2, recs(b"d", b"e", b"f"))]                # but at least one
    follower = SimLog(SimDisk(), "t", 0)
    follower.append_as_follower(log.read(0), 1003)
    assert follower.batch_last == log.batch_last
    assert follower.truncate_to(3) == 3 and follower.log_end_offset == 3    # at the leader's batch boundary
