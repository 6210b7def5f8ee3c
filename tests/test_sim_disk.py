"""sim/disk.py: the simulated disk (fsync, crash, torn tails, latency) and the shared recovery rule."""
from __future__ import annotations

import pytest

from kafkacommon.batch_scan import scan_for_recovery
from kafkacommon.record_batch import encode_batch
from sim.disk import DiskError, DiskTiming, SimDisk

LOG = "t-0/00000000000000000000.log"


def batch(base: int, n: int = 2) -> bytes:
    return encode_batch(base, 0, [(b"k", b"v%d" % i, 1000 + i) for i in range(n)])


def test_reads_see_unsynced_bytes_and_fsync_makes_them_durable():
    d = SimDisk()
    assert d.append(LOG, b"abc") == 0 and d.append(LOG, b"de") == 3
    assert d.read(LOG) == b"abcde" and d.read(LOG, 1, 2) == b"bc" and d.read(LOG, 4, 10) == b"e"
    assert d.unsynced_bytes(LOG) == 5
    assert d.fsync(LOG) == 5 and d.unsynced_bytes(LOG) == 0
    d.append(LOG, b"fg")
    assert d.crash(0.0) == {LOG: (7, 5)}
    assert d.read(LOG) == b"abcde"


def test_a_crash_keeps_the_chosen_prefix_of_the_unsynced_tail():
    d = SimDisk()
    d.append("a", b"0123")
    d.fsync("a")
    d.append("a", b"456789")
    d.append("b", b"xyz")                                  # never fsynced
    d.append("c", b"synced")
    d.fsync("c")
    seen: list[tuple[str, int]] = []

    def keep(path: str, unsynced: int) -> int:
        seen.append((path, unsynced))
        return {"a": 2, "b": 3}[path]

    assert d.crash(keep) == {"a": (10, 6)}
    assert seen == [("a", 6), ("b", 3)]                    # sorted order; a file with nothing unsynced is not asked
    assert (d.read("a"), d.read("b"), d.read("c")) == (b"012345", b"xyz", b"synced")
    d.append("a", b"abcdef")
    d.crash(0.5)                                           # a fraction of each tail
    assert d.read("a") == b"012345abc"
    d.append("a", b"zz")
    with pytest.raises(DiskError):
        d.crash(lambda _p, n: n + 1)                       # more than there is: refused, nothing changed
    assert d.read("a") == b"012345abczz"


def test_truncation_and_overwrites_are_lost_by_a_crash_before_fsync():
    d = SimDisk()
    d.append("f", b"0123456789")
    d.fsync("f")
    d.truncate("f", 4)
    assert d.read("f") == b"0123"
    d.crash(1.0)
    assert d.read("f") == b"0123456789"                    # the cut never reached the disk
    d.truncate("f", 4)
    d.fsync("f")
    d.crash(1.0)
    assert d.read("f") == b"0123"
    d.write("f", b"0123+more")                             # extends: an append
    assert d.unsynced_bytes("f") == 5
    d.write("f", b"new")                                   # an overwrite
    d.crash(1.0)
    assert d.read("f") == b"0123"
    with pytest.raises(DiskError):
        d.truncate("f", 10)                                # truncate does not extend
    with pytest.raises(DiskError):
        d.read("missing")


def test_rename_and_delete_are_durable_at_once():
    d = SimDisk()
    d.write("cp.tmp", b"epoch 3")
    d.fsync("cp.tmp")
    d.rename("cp.tmp", "cp")
    d.create("x")
    d.delete("x")
    d.crash(0.0)
    assert d.listdir() == ["cp"] and d.read("cp") == b"epoch 3"


def test_recovery_after_a_torn_tail_uses_the_logs_own_rule():
    d = SimDisk()
    first, second, third = batch(0), batch(2), batch(4, 3)
    d.append(LOG, first + second)
    d.fsync(LOG)
    d.append(LOG, third)
    d.crash(lambda _p, n: n - 7)                           # the last batch torn 7 bytes short
    assert d.size(LOG) == len(first + second + third) - 7
    scan = d.recover_log(LOG, base_offset=0)
    assert scan.valid_bytes == len(first + second) and scan.dropped_batches == 1 and scan.error.incomplete
    assert [h.base_offset for _, h in scan.headers] == [0, 2]
    assert d.read(LOG) == first + second and d.unsynced_bytes(LOG) == 0
    # a clean file is left as it is
    assert d.recover_log(LOG, base_offset=0).error is None and d.size(LOG) == len(first + second)


def test_the_recovery_rule_stops_at_corruption_and_at_offsets_going_back():
    good = batch(0) + batch(2)
    corrupt = bytearray(batch(4))
    corrupt[-1] ^= 0xFF
    scan = scan_for_recovery(good + bytes(corrupt) + batch(5), 0)
    assert scan.valid_bytes == len(good) and scan.dropped_batches == 2 and not scan.error.incomplete
    scan = scan_for_recovery(good + batch(1), 0)
    assert scan.valid_bytes == len(good) and "backwards" in scan.error.reason
    assert scan_for_recovery(b"", 0).valid_bytes == 0


def test_latency_hook_and_a_slow_disk():
    d = SimDisk(DiskTiming(write_ms=0.1, fsync_ms=2.0, read_ms=0.0, per_mib_ms=4.0))
    assert d.latency_ms("fsync") == 2.0
    assert d.latency_ms("append", 1 << 19) == pytest.approx(2.1)
    d.slow(factor=10, extra_ms=5)
    assert d.is_slow and d.latency_ms("fsync") == 25.0
    d.heal()
    assert not d.is_slow and d.latency_ms("truncate") == 0.0
    with pytest.raises(DiskError):
        d.latency_ms("format")
    with pytest.raises(DiskError):
        d.slow(factor=0.5)


def test_a_full_disk_refuses_growth_and_a_failing_one_any_change_until_repaired():
    import errno
    d = SimDisk()
    d.append("a", b"12345")
    d.fill()
    for call in (lambda: d.append("a", b"x"), lambda: d.create("b"), lambda: d.write("a", b"123456")):
        with pytest.raises(OSError) as e:
            call()
        assert e.value.errno == errno.ENOSPC
    d.truncate("a", 2)           # a full filesystem still lets you cut, sync and delete
    assert d.fsync("a") >= 0 and d.read("a") == b"12"
    d.repair()
    d.fail_writes()
    for call in (lambda: d.append("a", b"x"), lambda: d.truncate("a", 1), lambda: d.fsync("a"),
                 lambda: d.delete("a"), lambda: d.rename("a", "c")):
        with pytest.raises(OSError) as e:
            call()
        assert e.value.errno == errno.EROFS
    assert d.read("a") == b"12"  # reads go on
    d.repair()
    d.append("a", b"3")
    assert d.read("a") == b"123"
