"""The broker's log directories: where each replica's log lives, and what happens when one fails.

The I/O shell around :class:`replication.log_dirs.LogDirs` (the rules: placement, what a failure takes
offline, when the broker halts).  It plays three parts of Kafka 2.8:

* **LogManager's directories**: at start-up each directory of ``log.dirs`` is created if missing and
  listed for the ``<topic>-<partition>`` folders it holds; a directory that cannot be is offline from
  the start.  A new replica's log is created where the core places it (the first directory that takes
  it); the high-watermark checkpoints are one ``replication-offset-checkpoint`` per directory.
* **LogDirFailureChannel**: :meth:`report` is every log's ``on_io_error`` hook; any thread may call it,
  holding any lock.  The first error in a directory marks it offline in the core at once (so the
  directory's replicas answer KAFKA_STORAGE_ERROR from then on) and queues its handling.
* **The LogDirFailureHandler thread** (``log-dir-failure-handler``): it hands each newly offline
  directory's :class:`DirFailure` to ``on_failure`` (the replica manager takes the replicas offline, then
  the broker writes the ZooKeeper notification, or halts).  The thread never dies of an exception.
"""
from __future__ import annotations

import logging
import queue
import threading
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from kafkacommon import errors

from node.storage import OffsetCheckpointFile
from node.storage.errors import KafkaStorageError
from replication.log_dirs import DirFailure, LogDirs, Placement

log = logging.getLogger(__name__)

TP = tuple[str, int]
HW_CHECKPOINT = "replication-offset-checkpoint"


def parse_partition_dir(name: str) -> TP | None:
    """``orders-3`` -> ("orders", 3); None for anything else (files, ``.tmp`` and deleted folders)."""
    topic, dash, p = name.rpartition("-")
    if not dash or not topic or not p.isdigit() or "." in p:
        return None
    return topic, int(p)


class LogDirManager:
    def __init__(self, dirs: Sequence[Path], emit: Callable[..., object],
                 on_failure: Callable[[DirFailure], None]) -> None:
        self.paths = [Path(d) for d in dirs]
        self.core = LogDirs([str(d) for d in self.paths])
        self._emit = emit
        self._on_failure = on_failure
        self._lock = threading.Lock()          # guards the core
        self._failures: "queue.Queue[DirFailure | None]" = queue.Queue()
        self._checkpoints = {str(d): OffsetCheckpointFile(d / HW_CHECKPOINT) for d in self.paths}
        self.hw_at_start: dict[TP, int] = {}
        for d in self.paths:
            try:
                d.mkdir(parents=True, exist_ok=True)
                names = sorted(p.name for p in d.iterdir() if p.is_dir())
                hws = self._checkpoints[str(d)].read()
            except OSError as e:   # Kafka's createAndValidateLogDirs / loadLogs: offline from the start
                self.report(str(d), "start-up scan", e)
                continue
            for name in names:
                tp = parse_partition_dir(name)
                if tp is not None:
                    self.core.found(tp, str(d))
            for tp, hw in hws.items():
                if self.core.placed.get(tp) == str(d):
                    self.hw_at_start[tp] = hw
        self._thread = threading.Thread(target=self._run, name="log-dir-failure-handler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._failures.put(None)

    # ------------------------------------------------------------------ the failure channel

    def report(self, d: str, what: str, e: OSError) -> None:
        """An I/O error in log directory ``d`` while doing ``what`` (any thread, any lock held)."""
        with self._lock:
            failure = self.core.fail(d, f"{type(e).__name__}: {e}", what)
        if failure.first:
            self._failures.put(failure)

    def _run(self) -> None:
        while True:
            failure = self._failures.get()
            if failure is None:
                return
            try:
                self._on_failure(failure)
            except Exception as e:  # never die: the next directory's failure must still be handled
                log.exception("handling the failure of log directory %s failed", failure.dir)
                self._emit("log_dir_failure_handling_failed", dir=failure.dir, error=f"{type(e).__name__}: {e}")

    # ------------------------------------------------------------------ state (any thread)

    def is_offline(self, tp: TP) -> bool:
        with self._lock:
            return self.core.is_offline(tp)

    def offline_dir(self, d: str) -> bool:
        with self._lock:
            return d in self.core.offline

    def leader_and_isr_errors(self, tps: list[TP]) -> dict[TP, int]:
        with self._lock:
            return self.core.leader_and_isr_errors(tps)

    def describe(self) -> list[tuple[str, int, list[TP]]]:
        with self._lock:
            return self.core.describe()

    def describe_logs(self, hosted: Mapping[TP, Any], partitions: set[TP] | None
                      ) -> list[tuple[str, int, list[tuple[str, list[tuple[int, int, int]]]]]]:
        """Kafka 2.8's ReplicaManager.describeLogDirs: each directory (``log.dirs`` order) with its error
        (KAFKA_STORAGE_ERROR when offline, and nothing else) and, per topic with a log there, the partitions
        asked for (``partitions``; None: all) as (partition, size in bytes, offset lag: max(HW - LEO, 0) of a
        hosted replica, -1 of a log this broker does not serve)."""
        out = []
        for d, code, tps in self.describe():
            if code != errors.NONE:
                out.append((d, code, []))
                continue
            by_topic: dict[str, list[tuple[int, int, int]]] = {}
            for tp in tps:
                parts = by_topic.setdefault(tp[0], [])
                if partitions is not None and tp not in partitions:
                    continue
                h = hosted.get(tp)
                if h is not None and not h.log.closed:
                    with h.cond:
                        size, lag = h.log.size_bytes, max(h.repl.high_watermark - h.log.log_end_offset, 0)
                else:
                    size, lag = _size_on_disk(Path(d) / f"{tp[0]}-{tp[1]}"), -1
                parts.append((tp[1], size, lag))
            out.append((d, errors.NONE, sorted(by_topic.items())))
        return out

    def offline_dirs(self) -> dict[str, str]:
        with self._lock:
            return dict(self.core.offline)

    # ------------------------------------------------------------------ logs

    def placement(self, tp: TP, is_new: bool) -> Placement:
        with self._lock:
            return self.core.placement(tp, is_new)

    def open_in(self, tp: TP, is_new: bool, make: Callable[[str], object]) -> tuple[object | None, str | None]:
        """Open ``tp``'s log where the core places it: ``make(dir)`` in each directory the placement gives
        until one takes it.  (log, None), or (None, why not) when the replica is offline, or no directory
        could take it (each one that failed is offline now, through the log's hook): the replica is
        offline then (Kafka's ``markPartitionOffline``)."""
        placement = self.placement(tp, is_new)
        if placement.error:
            with self._lock:
                offline = self.core.is_offline(tp)
                if not offline:
                    self.core.lost(tp)
            return None, ("its log directory is offline" if offline else
                          "a log directory is offline and the replica is not new (its log may be there)")
        why = "no log directory took it"
        for d in placement.dirs:
            try:
                plog = make(d)
            except KafkaStorageError as e:
                why = str(e)
                continue
            with self._lock:
                if d in self.core.offline:   # the directory failed meanwhile: the log goes with it
                    self.core.placed[tp] = d
                    plog.close_handles()  # type: ignore[attr-defined]
                    return None, f"{d} went offline"
                self.core.created(tp, d)
            return plog, None
        with self._lock:
            if not self.core.is_offline(tp):
                self.core.lost(tp, placement.dirs[-1] if placement.dirs[-1] in self.core.offline else None)
        return None, why

    def where(self, tp: TP) -> str | None:
        """The directory ``tp``'s log is in (None: none here)."""
        with self._lock:
            return self.core.placed.get(tp)

    def removed(self, tp: TP) -> None:
        with self._lock:
            self.core.removed(tp)

    # ------------------------------------------------------------------ high-watermark checkpoints

    def checkpointed_hw(self, tp: TP) -> int:
        with self._lock:
            d = self.core.placed.get(tp)
        if d is None:
            return 0
        try:
            return self._checkpoints[d].read().get(tp, 0)
        except OSError:
            return 0

    def checkpoint_hws(self, hws: Mapping[TP, int]) -> None:
        """One ``replication-offset-checkpoint`` per online directory, with the HWs of its replicas;
        a write that fails takes its directory offline (Kafka's checkpointHighWatermarks)."""
        with self._lock:
            by_dir: dict[str, dict[TP, int]] = {d: {} for d in self.core.online()}
            for tp, hw in hws.items():
                d = self.core.placed.get(tp)
                if d in by_dir:
                    by_dir[d][tp] = hw
        for d, entries in by_dir.items():
            if not entries:
                continue
            try:
                self._checkpoints[d].write(entries)
            except OSError as e:
                self.report(d, "high watermark checkpoint write", e)


def _size_on_disk(folder: Path) -> int:
    """The segments' bytes of a log this broker has not opened."""
    try:
        return sum(p.stat().st_size for p in folder.glob("*.log"))
    except OSError:
        return 0
