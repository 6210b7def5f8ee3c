"""The broker's periodic log housekeeping: compaction, retention, deleted segments' files and the flusher
(a mixin of ``ReplicaManager``).

Kafka's LogCleaner and LogManager.cleanupLogs, as shells: each pass takes a
partition's lock, asks a pure rule what to do (``node.storage.cleaner`` for
compaction, ``node.storage.retention.retention_decision`` for retention) and
carries it out, then logs an event.  An I/O error takes the partition's log directory offline
(``on_io_error``, Kafka's LogCleaner and cleanupLogs report to the LogDirFailureChannel) and the
pass goes on with the other partitions.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from node.clock import now_ms
from node.replicas.log_settings import flusher_due
from node.storage.cleaner import CleanResult, clean
from node.storage.errors import KafkaStorageError
from node.storage.retention import retention_decision

if TYPE_CHECKING:
    from node.replicas.hosted import Hosted

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CleanerSettings:
    enable: bool = True
    backoff_ms: int = 15000                   # log.cleaner.backoff.ms: the pause between passes
    min_cleanable_ratio: float = 0.5          # log.cleaner.min.cleanable.ratio (each log's min.cleanable.dirty.ratio)


class HousekeepingMixin:
    hosted: dict[tuple[str, int], "Hosted"]
    cleaner: "CleanerSettings | None"
    events: Any
    dirs: Any   # node.replicas.log_dir_manager.LogDirManager: report(dir, what, error)
    log_starts_moved: Any   # ((leader, tp), ...) of followed partitions whose log start retention moved

    def clean_logs(self) -> list[CleanResult]:
        """One pass of the log cleaner over every compacted partition hosted here, never past
        its HW (Kafka's firstUncleanableOffset); the partition's lock is held while it cleans."""
        done = []
        # only the compacted logs are sorted (the same order): a pass over a broker of thousands of deleted-
        # policy logs costs them an attribute check each
        compacted = [(tp, h) for tp, h in self.hosted.copy().items() if h.log_config.compact]
        for (t, p), h in sorted(compacted, key=lambda item: item[0]):
            lc = h.log_config
            with h.cond:
                if h.log.closed:
                    continue
                t0 = time.monotonic_ns()
                try:
                    r = clean(h.log, now_ms=now_ms(), delete_retention_ms=lc.delete_retention_ms,
                              min_cleanable_ratio=lc.min_cleanable_dirty_ratio,
                              upper_bound_offset=h.repl.high_watermark,
                              min_compaction_lag_ms=lc.min_compaction_lag_ms,
                              max_compaction_lag_ms=lc.max_compaction_lag_ms)
                except KafkaStorageError:
                    continue   # its directory is offline now
                except OSError as e:   # the cleaner's own files (its .cleaned segment)
                    self.dirs.report(h.log.parent_dir, "log cleaning", e)
                    continue
            if r.segments_cleaned:
                done.append(r)
                self.events.emit("log_cleaned", topic=t, partition=p, segments=r.segments_cleaned,
                                 records_read=r.records_read, records_kept=r.records_kept,
                                 tombstones_dropped=r.tombstones_dropped, bytes_before=r.bytes_before,
                                 bytes_after=r.bytes_after, first_dirty_offset=r.first_dirty_offset,
                                 duration_ms=round((time.monotonic_ns() - t0) / 1e6, 3))
        return done

    def retain_logs(self) -> int:
        """One retention pass (Kafka's ``Log.deleteOldSegments`` on every log, every
        ``log.retention.check.interval.ms``): ``retention.ms`` and ``retention.bytes`` for
        ``cleanup.policy`` with ``delete``, and for every log the segments wholly below its
        log start offset (a follower's moves with its leader's).  Returns the segments deleted."""
        total = 0
        followed: list[tuple[int, tuple[str, int]]] = []   # (leader, tp): a follower's log start moved here
        for (t, p), h in sorted(list(self.hosted.items())):
            lc = h.log_config
            with h.cond:
                if h.log.closed:
                    continue
                now = now_ms()
                try:
                    d = retention_decision(h.log.segment_infos(), log_start_offset=h.log.log_start_offset,
                                           log_end_offset=h.log.log_end_offset, high_watermark=h.repl.high_watermark,
                                           now_ms=now, retention_ms=lc.retention_ms,
                                           retention_bytes=lc.retention_bytes, delete_policy=lc.delete)
                    if not d.count:
                        continue
                    deleted = h.log.delete_oldest_segments(d.count, now)
                    h.repl.touch()   # the log start may have moved: followers' sessions look at it again
                except KafkaStorageError:
                    continue   # its directory is offline now
                start = h.log.log_start_offset
                if not h.repl.is_leader and h.repl.leader_id >= 0:
                    followed.append((h.repl.leader_id, (t, p)))
            total += len(deleted)
            self.events.emit("log_segments_deleted", topic=t, partition=p, segments=deleted, reasons=list(d.reasons),
                             log_start_offset=start, is_leader=h.repl.is_leader)
        if followed:   # the leaders learn the new log starts at the next fetch (their low watermarks count them)
            self.log_starts_moved(followed)
        return total

    def purge_and_flush(self, started_ms: int, flusher_ran: Any) -> tuple[int, int]:
        """Every second: remove the files of deleted segments whose ``file.delete.delay.ms`` passed, and run
        Kafka's log flusher when it is due (:func:`node.replicas.log_settings.flusher_due`): every log not
        fsynced for its ``flush.ms`` is fsynced.  Returns (segments removed, logs flushed)."""
        removed = flushed = 0
        now = now_ms()
        flush_now = flusher_due(started_ms, now, flusher_ran)
        # only the logs with work, picked without their locks (a deletion or an append racing this is
        # seen a second later, as if it had come just after the pass): an idle broker's pass costs no lock
        # per partition, and no sort of them all; and no (partition, replica) pair of them all either, which
        # the garbage collector would see survive into its oldest generation and then scan every live object for
        busy = [(tp, h) for tp, h in self.hosted.copy().items()
                if h.log.pending_deletes or (flush_now and h.log.unflushed)]
        for (t, p), h in sorted(busy, key=lambda item: item[0]):
            with h.cond:
                if h.log.closed:
                    continue
                try:   # an I/O error: the log reported its directory, which is offline now
                    gone = h.log.purge_deleted(now) if h.log.pending_deletes else []
                except KafkaStorageError:
                    continue
                last = h.log.last_flush_ms if h.log.last_flush_ms is not None else started_ms
                if flush_now and h.log.unflushed and now - last >= h.log_config.flush_ms:
                    try:
                        h.log.flush(now)
                        flushed += 1
                    except KafkaStorageError:
                        pass
            if gone:
                removed += len(gone)
                self.events.emit("log_segment_files_deleted", topic=t, partition=p, segments=gone)
        if flush_now:
            flusher_ran.set()
        return removed, flushed
