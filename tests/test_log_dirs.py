"""Log directories (KIP-112): the placement and failure rules, and a replica manager whose directory fills up.

The filesystem tests mount a small tmpfs (root: the CI and this machine run as root) and always unmount it.
"""
from __future__ import annotations

import errno
import threading
from pathlib import Path

import pytest

from chaos.disks import Tmpfs, can_mount, fill, free
from kafkacommon import errors
from node.events import EventLog, read_events
from node.replicas.replica_manager import ReplicaManager
from node.storage import PartitionLog
from node.storage.errors import KafkaStorageError
from node.storage.segment import LogSegment
from replication.broker_state import PartitionInfo
from replication.log_dirs import LogDirs
from replication.partition_types import ReplicaSettings
from util.waiting import wait_for

STORAGE = errors.KAFKA_STORAGE_ERROR


# ---------------------------------------------------------------------- the rules


def test_a_new_log_goes_to_the_directory_with_the_fewest_ties_in_order():
    d = LogDirs(["/a", "/b", "/c"])
    d.found(("t", 0), "/a")
    d.found(("t", 1), "/a")
    d.found(("t", 2), "/c")
    assert d.placement(("u", 0), is_new=True).dirs == ("/b", "/c", "/a")
    d.created(("u", 0), "/b")
    assert d.placement(("u", 1)).dirs == ("/b", "/c", "/a")   # b and c hold one each: b first (log.dirs order)
    assert d.placement(("t", 1)).dirs == ("/a",) and d.placement(("t", 1)).existing


def test_a_failed_directory_takes_its_replicas_offline_and_the_last_one_halts():
    d = LogDirs(["/a", "/b"])
    for p, where in ((0, "/a"), (1, "/b"), (2, "/a")):
        d.found(("t", p), where)
    f = d.fail("/a", "OSError: [Errno 28] No space left on device", "append")
    assert f.first and f.notify and not f.halt and f.partitions == (("t", 0), ("t", 2))
    (event,) = f.events
    assert event.name == "log_dir_failed" and event.fields["online_dirs"] == ["/b"]
    assert event.fields["replicas"] == ["t-0", "t-2"]
    assert not d.fail("/a", "again", "flush").first   # once per directory
    assert d.is_offline(("t", 0)) and not d.is_offline(("t", 1))
    assert d.leader_and_isr_errors([("t", 0), ("t", 1)]) == {("t", 0): STORAGE}
    # an existing log on the failed directory cannot move; a replica found nowhere may have been there
    assert d.placement(("t", 0)).error == STORAGE
    assert d.placement(("x", 0), is_new=False).error == STORAGE
    assert d.placement(("x", 0), is_new=True).dirs == ("/b",)
    assert d.describe() == [("/a", STORAGE, []), ("/b", errors.NONE, [("t", 1)])]
    last = d.fail("/b", "OSError: [Errno 5] Input/output error", "flush")
    assert last.halt and not last.notify and last.partitions == (("t", 1),)


# ---------------------------------------------------------------------- on a full disk

@pytest.fixture
def small_disk(tmp_path):
    assert can_mount() is None, can_mount()
    fs = Tmpfs(tmp_path / "small", 512 * 1024).mount()
    try:
        yield fs.target
    finally:
        fs.unmount()


def test_a_log_on_a_full_disk_reports_its_directory_once(small_disk):
    reported = []
    log = PartitionLog(small_disk, "t", 0, on_io_error=lambda d, what, e: reported.append((d, what, e.errno)))
    log.append_as_leader([(b"k", b"v")], 0, 1)
    fill(small_disk)
    with pytest.raises(KafkaStorageError) as e:
        for i in range(100):
            log.append_as_leader([(b"k", b"x" * 4096)], 0, 2)
            log.flush()
    assert e.value.dir == str(small_disk)
    with pytest.raises(KafkaStorageError):
        log.read(0, 1000)   # nothing more is read or written: the directory is offline
    assert reported == [(str(small_disk), reported[0][1], 28)]
    log.close()   # closes the files only


def manager(tmp_path: Path, dirs: list[Path], failures: list, **kw) -> ReplicaManager:
    return ReplicaManager(1, dirs, ReplicaSettings(min_insync_replicas=1), EventLog(tmp_path / "events.jsonl", 1),
                          broker_epoch=lambda: 5, endpoint_of=lambda b: None, controller_endpoint=lambda: None,
                          fetch_wait_ms=100, segment_bytes=1 << 20, checkpoint_interval_ms=60_000,
                          on_dir_failure=failures.append, **kw)


def info(p: int, is_new: bool = True) -> PartitionInfo:
    return PartitionInfo("t", p, 1, 0, (1,), (1,), 0, 1, is_new)


def test_a_full_directory_goes_offline_and_the_other_keeps_serving(tmp_path, small_disk):
    failures: list = []
    big = tmp_path / "big"
    rm = manager(tmp_path, [small_disk, big], failures)
    try:
        assert rm.apply_leader_and_isrs([info(p) for p in range(4)]) == {}
        placed = {p: rm.hosted[("t", p)].log.parent_dir for p in range(4)}
        assert placed == {0: str(small_disk), 1: str(big), 2: str(small_disk), 3: str(big)}   # fewest, in order
        for p in range(4):
            assert rm.append(("t", p), [(b"k", b"v", None)], 1, 1000, lambda c: None)[0] == errors.NONE
        rm.checkpoint_hws()
        assert (small_disk / "replication-offset-checkpoint").exists() and (big / "replication-offset-checkpoint").exists()
        fill(small_disk)
        codes = {rm.append(("t", 0), [(b"k", b"x" * 8192, None)], 1, 1000, lambda c: None)[0] for _ in range(50)}
        assert STORAGE in codes
        wait_for(lambda: failures, 10, "the failure handler to run")
        (f,) = failures
        assert f.dir == str(small_disk) and f.partitions == (("t", 0), ("t", 2)) and f.notify and not f.halt
        assert set(rm.hosted) == {("t", 1), ("t", 3)}   # the offline replicas are served no more
        for p in (0, 2):
            assert rm.append(("t", p), [(b"k", b"v", None)], 1, 1000, lambda c: None)[0] == STORAGE
            assert rm.consumer_read(("t", p), 0, 1000).error == STORAGE
        assert rm.append(("t", 1), [(b"k", b"v", None)], 1, 1000, lambda c: None)[0] == errors.NONE
        assert rm.delete_records(("t", 0), 0)[0] == STORAGE and rm.delete_records(("t", 1), 1)[:2] == (errors.NONE, 1)
        assert rm.dirs.leader_and_isr_errors([("t", 0), ("t", 1)]) == {("t", 0): STORAGE}
        # a replica found nowhere and not new cannot be created while a directory is offline (its log may be there)
        assert rm.apply_leader_and_isrs([info(7, is_new=False), info(8, is_new=True)]) == {("t", 7): STORAGE}
        assert rm.hosted[("t", 8)].log.parent_dir == str(big)
        rm.checkpoint_hws()   # the offline directory is skipped: no error, every 5 s or ever
        free(small_disk)      # in 2.8 an offline directory stays offline until the broker restarts
        assert rm.append(("t", 0), [(b"k", b"v", None)], 1, 1000, lambda c: None)[0] == STORAGE
        threads = {t.name for t in threading.enumerate()}
        assert {"log-dir-failure-handler", "hw-checkpoint", "isr-shrink"} <= threads
    finally:
        rm.close()
    (failed,) = [e for e in read_events(tmp_path / "events.jsonl") if e["type"] == "log_dir_failed"]
    assert failed["dir"] == str(small_disk) and failed["replicas"] == ["t-0", "t-2"] and not failed["halting"]
    assert "No space left on device" in failed["error"]


def test_the_last_directory_failing_is_a_halt(tmp_path, small_disk):
    failures: list = []
    rm = manager(tmp_path, [small_disk], failures)
    try:
        rm.apply_leader_and_isrs([info(0)])
        fill(small_disk)
        for _ in range(50):
            if rm.append(("t", 0), [(b"k", b"x" * 8192, None)], 1, 1000, lambda c: None)[0] == STORAGE:
                break
        wait_for(lambda: failures, 10, "the failure handler to run")
        assert failures[0].halt and not failures[0].notify
    finally:
        rm.close()


def test_delete_records_whose_log_start_checkpoint_fails_takes_the_directory_offline(tmp_path, monkeypatch):
    """DeleteRecords moves the log start offset and writes its checkpoint; an I/O error there is Kafka's
    KafkaStorageException: the answer is KAFKA_STORAGE_ERROR and the directory goes offline."""
    import node.storage.log as log_module
    failures: list = []
    rm = manager(tmp_path, [tmp_path / "d"], failures)
    try:
        rm.apply_leader_and_isrs([info(0)])
        for _ in range(3):
            rm.append(("t", 0), [(b"k", b"v", None)], 1, 1000, lambda c: None)

        def failing(path, entries):
            raise OSError(errno.EIO, "Input/output error")
        monkeypatch.setattr(log_module, "write_checkpoint", failing)
        assert rm.delete_records(("t", 0), 2)[0] == STORAGE
        wait_for(lambda: failures, 10, "the failure handler to run")
        assert failures[0].partitions == (("t", 0),) and failures[0].halt   # its only directory
        assert rm.delete_records(("t", 0), 2)[0] == STORAGE   # offline now: no longer hosted
    finally:
        rm.close()


# ---------------------------------------------------------------------- the topic configs' own I/O (flush, delayed deletes)


def failing_in(where: Path, monkeypatch, method: str) -> None:
    """LogSegment.<method> fails with EIO for the segments under ``where`` (a failing disk), works elsewhere."""
    real = getattr(LogSegment, method)

    def flaky(self, *a, **k):
        if where in self.directory.parents:
            raise OSError(errno.EIO, "Input/output error")
        return real(self, *a, **k)
    monkeypatch.setattr(LogSegment, method, flaky)


@pytest.mark.parametrize("path", ["flush", "flush.messages", "delayed deletion", "close"])
def test_a_flush_or_a_delayed_deletion_that_fails_takes_the_directory_offline(tmp_path, monkeypatch, path):
    reported = []
    log = PartitionLog(tmp_path, "t", 0, on_io_error=lambda d, what, e: reported.append((d, what, e.errno)))
    log.configure(segment_bytes=1 << 20, segment_ms=1 << 40, index_interval_bytes=4096, segment_jitter_ms=0,
                  max_index_bytes=1 << 20, flush_messages=1 << 40, file_delete_delay_ms=1000)
    log.append_as_leader([(b"k", b"v")], 0, 1)
    assert log.delete_oldest_segments(1, 10) == [0] and log.pending_deletes   # renamed .deleted, due at 1010
    failing_in(tmp_path, monkeypatch, "delete" if path in ("delayed deletion", "close") else "flush")
    with pytest.raises(KafkaStorageError):
        if path == "flush":
            log.flush(20)
        elif path == "flush.messages":
            log.configure(segment_bytes=1 << 20, segment_ms=1 << 40, index_interval_bytes=4096, segment_jitter_ms=0,
                          max_index_bytes=1 << 20, flush_messages=1, file_delete_delay_ms=1000)
            log.append_as_leader([(b"k", b"v")], 0, 20)   # flush.messages=1: this append fsyncs
        elif path == "delayed deletion":
            log.purge_deleted(2000)
        else:
            log.close()   # the deleted segments waiting out their delay go at close
    what = {"flush": "flush", "flush.messages": "flush", "delayed deletion": "delayed segment deletion",
            "close": "close"}[path]
    assert reported == [(str(tmp_path), what, errno.EIO)] and log.failed
    with pytest.raises(KafkaStorageError):
        log.read(0, 1000)   # the directory is offline: nothing more is read or written
    log.close()   # the files closed only, the pending ones too: nothing more touches the directory
    assert log.closed and not log.pending_deletes


def test_the_flusher_reports_a_failing_directory_and_flushes_the_others(tmp_path, monkeypatch):
    failures: list = []
    a, b = tmp_path / "a", tmp_path / "b"
    rm = manager(tmp_path, [a, b], failures, topic_config=lambda t: {"flush.ms": "0"})
    try:
        assert rm.apply_leader_and_isrs([info(0), info(1)]) == {}
        assert {p: rm.hosted[("t", p)].log.parent_dir for p in (0, 1)} == {0: str(a), 1: str(b)}
        for p in (0, 1):
            assert rm.append(("t", p), [(b"k", b"v", None)], 1, 1000, lambda c: None)[0] == errors.NONE
        failing_in(a, monkeypatch, "flush")
        ran = threading.Event()
        removed, flushed = rm.purge_and_flush(0, ran)   # started at 0: Kafka's flusher is due (30 s after)
        assert (removed, flushed) == (0, 1) and ran.is_set()
        assert rm.hosted[("t", 1)].log.unflushed == 0
        wait_for(lambda: failures, 10, "the failure handler to run")
        (f,) = failures
        assert f.dir == str(a) and f.partitions == (("t", 0),) and f.notify and not f.halt
        assert set(rm.hosted) == {("t", 1)}
    finally:
        rm.close()
    (failed,) = [e for e in read_events(tmp_path / "events.jsonl") if e["type"] == "log_dir_failed"]
    assert "Input/output error" in failed["error"]
