"""PartitionLog: one partition replica's log under ``<log_dir>/<topic>-<partition>/``.

The log is a list of :class:`LogSegment` s ordered by base offset; the last one is
the active segment that takes appends.  Opening a log loads every segment and runs
recovery on the active one only (older segments were fsynced when they were rolled).
The leader epoch cache lives next to the segments in ``leader-epoch-checkpoint``.

Compaction (:mod:`.cleaner`) rewrites non-active segments without renumbering, so a
cleaned log has offset gaps: inside batches, between batches and between segments.
Reads skip them (a read at a removed offset returns the next batch that remains).
The cleaner swaps segments in through :meth:`PartitionLog.replace_segments` (:mod:`.log_segments`, with
retention's segment operations); opening
a log (:mod:`.log_loader`) deletes ``.cleaned`` leftovers and completes an interrupted ``.swap``.

Time never comes from a clock here: callers pass ``now_ms``.

An I/O error (any ``OSError``) in a method that touches the files is Kafka's
``maybeHandleIOException``: the log reports its directory to ``on_io_error`` (the broker's
log directory failure channel) and raises :class:`KafkaStorageError`.  The log is unusable
from then on: its directory is offline until the broker restarts.
"""
from __future__ import annotations

import random
from bisect import bisect_right
from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

from kafkacommon.batch_scan import scan_headers
from kafkacommon.record_batch import encode_batch

from .errors import KafkaStorageError, StorageError, guard_io
from .file_records import FileRecords
from .checkpoint import (CLEANER_OFFSET_CHECKPOINT, LEADER_EPOCH_CHECKPOINT,
                         CleanerCheckpointFile, CleanerState, LeaderEpochCheckpointFile, PreparedCheckpoint,
                         read_checkpoint, write_checkpoint)
from .epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpochCache
from .log_loader import RecoveryReport, complete_swaps, load_segments
from .log_segments import SegmentsMixin
from .retention import should_roll
from .txn_log import TxnLog
from .segment import DEFAULT_INDEX_INTERVAL_BYTES, DELETED_SUFFIX, LogSegment

__all__ = ["DELETED_SUFFIX", "InvalidAppendError", "LeaderEpochCache", "OffsetOutOfRangeError", "PartitionLog",
           "RecordTooLargeError", "RecoveryReport", "UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET"]

DEFAULT_SEGMENT_BYTES = 1 << 30
DEFAULT_SEGMENT_MS = 7 * 24 * 3600 * 1000
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
_INT32_MAX = (1 << 31) - 1

RecordInput = tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, int | None]
#: ``on_io_error(log dir, what was being done, the error)``: the broker's log directory failure channel
IoErrorHook = Callable[[str, str, OSError], None]


class OffsetOutOfRangeError(StorageError):
    """A read asked for an offset outside [log start offset, log end offset]."""


class InvalidAppendError(StorageError):
    """An append was refused: offsets not contiguous with the LEO, or a stale leader epoch."""


class RecordTooLargeError(StorageError):
    """A batch larger than max.message.bytes (Kafka's RecordTooLargeException, MESSAGE_TOO_LARGE)."""


class PartitionLog(SegmentsMixin):
    """The on-disk log of one partition replica; opens (recovering) or creates it."""

    def __init__(self, log_dir: Path | str, topic: str, partition: int, *,
                 segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
                 segment_ms: int = DEFAULT_SEGMENT_MS, on_io_error: IoErrorHook | None = None) -> None:
        if not topic or "/" in topic or partition < 0:
            raise ValueError(f"bad partition name {topic!r}-{partition}")
        if segment_bytes <= 0:
            raise ValueError("segment_bytes must be positive")
        self.topic, self.partition = topic, partition
        self.parent_dir = str(Path(log_dir))    # the log directory this log lives in (Kafka's parentDir)
        self._on_io_error = on_io_error
        self._failed: KafkaStorageError | None = None
        try:
            self._open(log_dir, segment_bytes, index_interval_bytes, segment_ms)
        except OSError as e:
            raise self._io_failed("open", e) from e

    def _io_failed(self, what: str, e: OSError) -> KafkaStorageError:
        """An I/O error: report the directory (once per log) and return the error to raise."""
        err = KafkaStorageError(self.parent_dir, f"{what} of {self.topic}-{self.partition} in {self.parent_dir} "
                                                 f"failed: {type(e).__name__}: {e}")
        if self._failed is None:
            self._failed = err
            if self._on_io_error is not None:
                self._on_io_error(self.parent_dir, what, e)
        return err

    @property
    def failed(self) -> bool:
        """Whether an I/O error hit this log (its directory is offline)."""
        return self._failed is not None

    def _open(self, log_dir: Path | str, segment_bytes: int, index_interval_bytes: int, segment_ms: int) -> None:
        self.segment_bytes = segment_bytes
        self.segment_ms = segment_ms
        self.index_interval_bytes = index_interval_bytes
        # the other topic configs the log itself enforces (:meth:`configure`), at Kafka's defaults
        self.segment_jitter_ms = 0
        self.max_index_bytes = 10_485_760          # segment.index.bytes
        self.flush_messages = (1 << 63) - 1        # flush.messages
        self.file_delete_delay_ms = 0              # file.delete.delay.ms (0 here until configured)
        self._unflushed = 0
        self.last_flush_ms: int | None = None      # when the log was last fsynced (flush.ms), if known
        self.pending_deletes: list[tuple[int, LogSegment]] = []   # (due ms, segment renamed .deleted)
        self._rng = random.Random()
        self.dir = Path(log_dir) / f"{self.topic}-{self.partition}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self._closed = False
        self._cleaner_file = CleanerCheckpointFile(self.dir / CLEANER_OFFSET_CHECKPOINT)
        self._cleaner_state = self._cleaner_file.read()
        pending = self._cleaner_state.pending_swap if self._cleaner_state else None
        swapped = complete_swaps(self.dir, self.index_interval_bytes, pending)
        if pending is not None and self._cleaner_state is not None:
            self.set_cleaner_state(replace(self._cleaner_state, pending_swap=None))
        self._segments, self.recovery = load_segments(self.dir, swapped, self.index_interval_bytes)
        self.epoch_cache = LeaderEpochCache(LeaderEpochCheckpointFile(self.dir / LEADER_EPOCH_CHECKPOINT))
        self.epoch_cache.truncate_from_end(self.log_end_offset)
        if self._cleaner_state is not None and self._cleaner_state.first_dirty_offset > self.log_end_offset:
            self.set_cleaner_state(self._cleaner_state.truncated(self.log_end_offset))
        # the log start offset (Kafka's log-start-offset-checkpoint, here one file per partition): at
        # least the first segment's base offset, at most the LEO
        self._lso_path = self.dir / LOG_START_OFFSET_CHECKPOINT
        stored = read_checkpoint(self._lso_path, lambda f: int(f[0]))
        self._log_start = min(max([self._segments[0].base_offset] + stored), self.log_end_offset)
        # the earliest epoch entry may not have been flushed before a crash: Kafka's Log trims it at load
        self.epoch_cache.truncate_from_start(self.log_start_offset)
        # the producers and the aborted transactions (.snapshot, .txnindex): built when first needed
        self.txn = TxnLog(self.dir, [seg.base_offset for seg in self._segments], self.log_end_offset)

    # ------------------------------------------------------------ state

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def log_start_offset(self) -> int:
        """The first offset readable: the first segment's base offset, or above it after retention moved it."""
        return max(self._log_start, self._segments[0].base_offset)

    @guard_io("log start offset checkpoint write")
    def _set_log_start(self, offset: int) -> None:
        self._log_start = offset
        write_checkpoint(self._lso_path, [str(offset)])
        # Kafka 2.8's maybeIncrementLogStartOffset: the epoch cache forgets what lies before the log start
        # (OffsetForLeaderEpoch then answers as Kafka does for an epoch older than the log)
        self.epoch_cache.truncate_from_start(self.log_start_offset)

    @property
    def log_end_offset(self) -> int:
        """LEO: the offset the next appended record gets."""
        return self._segments[-1].next_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def cleaner_state(self) -> CleanerState | None:
        """The log cleaner's persisted state (``cleaner-offset-checkpoint``), None if never cleaned."""
        return self._cleaner_state

    @guard_io("cleaner checkpoint write")
    def set_cleaner_state(self, state: CleanerState) -> None:
        """Persist the log cleaner's state (atomically, next to the segments)."""
        self._cleaner_file.write(state)
        self._cleaner_state = state

    @guard_io("leader epoch checkpoint write")
    def assign_epoch(self, epoch: int, start_offset: int, prepared: PreparedCheckpoint | None = None) -> bool:
        """:meth:`LeaderEpochCache.assign` (its checkpoint written, or ``prepared``'s renamed into place when
        it holds the same entries: :meth:`prepare_epoch`), an I/O error taking the directory offline."""
        return self.epoch_cache.assign(epoch, start_offset, prepared)

    def prepare_epoch(self, epoch: int) -> PreparedCheckpoint | None:
        """For a new leader, outside the partition's lock: the checkpoint :meth:`assign_epoch` of ``epoch`` at the
        log end would write (a new epoch starts there: replication.roles.become_leader), written and fsynced
        ahead (:meth:`LeaderEpochCache.prepare`).  None when the epoch is not new, the log is closed, or the
        write failed: :meth:`assign_epoch` then writes it itself under the lock, an I/O error handled there."""
        if self.closed or epoch <= self.epoch_cache.latest_epoch:
            return None
        try:
            return self.epoch_cache.prepare(epoch, self.log_end_offset)
        except OSError:
            return None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """:meth:`LeaderEpochCache.end_offset_for` against the current LEO."""
        return self.epoch_cache.end_offset_for(epoch, self.log_end_offset)

    # ------------------------------------------------------------ producers and transactions

    @guard_io("producer state load")
    def producers(self):
        """The producers of this log (replication/producer_state.py's ProducerStates), built from the newest
        snapshot and the log after it the first time they are needed (node/storage/txn_log.py)."""
        self._check_open()
        return self.txn.ensure(self.read, self.log_start_offset, self.log_end_offset, self._segment_base_of)

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO: the HW, or the first offset of the earliest undecided (or not yet replicated) transaction."""
        return self.producers().last_stable_offset(high_watermark)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list:
        """The aborted transactions (AbortedTxn) a read of [fetch_offset, upper_bound) overlaps."""
        self.producers()     # an index entry a crash left unwritten is written by the rebuild
        return self.txn.aborted_between(fetch_offset, upper_bound)

    def _segment_base_of(self, offset: int) -> int:
        bases = [s.base_offset for s in self._segments]
        return bases[max(bisect_right(bases, offset) - 1, 0)]

    # ------------------------------------------------------------ appends

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._failed is not None:   # its directory is offline: nothing more is read or written
            raise KafkaStorageError(self.parent_dir, str(self._failed))
        if self._closed:
            raise StorageError(f"log {self.dir} is closed")

    @guard_io("configure")
    def configure(self, *, segment_bytes: int, segment_ms: int, index_interval_bytes: int, segment_jitter_ms: int,
                  max_index_bytes: int, flush_messages: int, file_delete_delay_ms: int) -> None:
        """Take a topic's (new) configs: the next append rolls, indexes and flushes by them (Kafka's
        ``Log.updateConfig``); a segment keeps the jitter drawn when it was made."""
        if segment_bytes <= 0:
            raise ValueError("segment_bytes must be positive")
        self.segment_bytes, self.segment_ms = segment_bytes, segment_ms
        self.index_interval_bytes, self.segment_jitter_ms = index_interval_bytes, segment_jitter_ms
        self.max_index_bytes, self.flush_messages = max_index_bytes, flush_messages
        self.file_delete_delay_ms = file_delete_delay_ms
        self._segments[-1].index_interval_bytes = index_interval_bytes

    def _jitter(self) -> int:
        """Kafka's ``randomSegmentJitter``: below min(segment.jitter.ms, segment.ms), 0 without jitter."""
        bound = min(self.segment_jitter_ms, self.segment_ms)
        return self._rng.randrange(bound) if bound > 0 else 0

    def _append(self, data: bytes | bytearray | memoryview, base_offset: int, last_offset: int, max_ts: int,
                now_ms: int | None = None) -> None:
        active = self._segments[-1]
        if active.size and (last_offset - active.base_offset > _INT32_MAX or active.index_full(self.max_index_bytes)
                            or should_roll(
                size=active.size, batch_bytes=len(data), segment_bytes=self.segment_bytes,
                first_batch_timestamp=active.first_batch_timestamp, batch_max_timestamp=max_ts,
                created_ms=active.created_ms, now_ms=now_ms, segment_ms=self.segment_ms,
                jitter_ms=active.roll_jitter_ms)):
            self._roll(base_offset, now_ms)
            active = self._segments[-1]
        active.append(data, base_offset, last_offset, max_ts)
        self.txn.on_append(data, active.base_offset)
        self._unflushed += last_offset - base_offset + 1
        if self._unflushed >= self.flush_messages:   # Kafka: unflushedMessages >= flush.messages
            self.flush(now_ms)

    def _roll(self, base_offset: int, now_ms: int | None) -> None:
        self.txn.on_roll(base_offset)
        self._segments[-1].seal()
        seg = LogSegment.create(self.dir, base_offset, self.index_interval_bytes)
        seg.created_ms = now_ms
        seg.roll_jitter_ms = self._jitter()
        self._segments.append(seg)

    @guard_io("append")
    def append_as_leader(self, records: Sequence[RecordInput], leader_epoch: int,
                         now_ms: int, max_batch_bytes: int | None = None, *, compression: int = 0,
                         log_append_time: bool = False, producer: tuple[int, int] | None = None) -> tuple[int, int]:
        """Append ``(key, value)`` or ``(key, value, timestamp_ms)`` records as one batch.

        Offsets are assigned from the LEO; a missing or None timestamp becomes ``now_ms``
        (every timestamp does with ``log_append_time``, and the batch says LogAppendTime); the
        records are compressed with ``compression`` (the topic's compression.type).
        A batch larger than ``max_batch_bytes`` (max.message.bytes) raises RecordTooLargeError
        and changes nothing.  ``producer`` (id, epoch) writes a transactional batch (base sequence 0,
        as Kafka's group coordinator writes a transactional offset commit).  Returns (base offset,
        last offset).
        """
        self._check_open()
        if not records:
            raise ValueError("nothing to append")
        if leader_epoch < 0:
            raise ValueError(f"invalid leader epoch {leader_epoch}")
        if leader_epoch < self.epoch_cache.latest_epoch:
            raise InvalidAppendError(f"leader epoch {leader_epoch} is older than the log's latest "
                                     f"epoch {self.epoch_cache.latest_epoch}")
        rows: list[tuple[bytes | None, bytes | None, int]] = []
        for rec in records:
            ts = rec[2] if len(rec) > 2 else None  # type: ignore[misc]
            rows.append((rec[0], rec[1], now_ms if ts is None or log_append_time else ts))
        base = self.log_end_offset
        if producer is None:
            data = encode_batch(base, leader_epoch, rows, compression=compression, timestamp_type=int(log_append_time))
        else:
            data = encode_batch(base, leader_epoch, rows, compression=compression, timestamp_type=int(log_append_time),
                                producer_id=producer[0], producer_epoch=producer[1], base_sequence=0,
                                transactional=True)
        if max_batch_bytes is not None and len(data) > max_batch_bytes:
            raise RecordTooLargeError(f"a batch of {len(data)} bytes is larger than max.message.bytes "
                                      f"({max_batch_bytes})")
        last = base + len(rows) - 1
        self.epoch_cache.assign(leader_epoch, base)
        self._append(data, base, last, max(r[2] for r in rows), now_ms)
        return base, last

    @guard_io("append")
    def append_batch_as_leader(self, batch: bytes, record_count: int, max_timestamp: int,
                               leader_epoch: int, now_ms: int, max_batch_bytes: int | None = None) -> tuple[int, int]:
        """Append a client's record batch, already checked (listener/records.py), as it arrived:
        only its base offset (from the LEO) and partition leader epoch are rewritten, both outside
        the CRC, so headers, compression, timestamps and producer fields are kept byte for byte.
        A batch larger than ``max_batch_bytes`` (max.message.bytes) raises RecordTooLargeError.
        Returns (base offset, last offset)."""
        self._check_open()
        if max_batch_bytes is not None and len(batch) > max_batch_bytes:
            raise RecordTooLargeError(f"a batch of {len(batch)} bytes is larger than max.message.bytes "
                                      f"{max_batch_bytes}")
        if leader_epoch < 0:
            raise ValueError(f"invalid leader epoch {leader_epoch}")
        if leader_epoch < self.epoch_cache.latest_epoch:
            raise InvalidAppendError(f"leader epoch {leader_epoch} is older than the log's latest "
                                     f"epoch {self.epoch_cache.latest_epoch}")
        base = self.log_end_offset
        data = bytearray(batch)
        data[0:8] = base.to_bytes(8, "big", signed=True)
        data[12:16] = leader_epoch.to_bytes(4, "big", signed=True)
        last = base + record_count - 1
        self.epoch_cache.assign(leader_epoch, base)
        self._append(data, base, last, max_timestamp, now_ms)   # written as is: no second copy
        return base, last

    @guard_io("follower append")
    def append_as_follower(self, batch_bytes: bytes | memoryview, *, allow_gaps: bool = False,
                           now_ms: int | None = None) -> tuple[int, int] | None:
        """Append whole batches fetched from the leader; return (first, last) offset or None if empty.

        Every batch is checked first (CRC, whole, first base offset == LEO, then each
        contiguous with the previous); on any failure nothing is written: CorruptBatchError
        or InvalidAppendError.  Each batch's leader epoch then enters the epoch cache at its
        base offset (Kafka 2.8's ``Log.append`` for a follower: no check against the cache's
        latest epoch; :meth:`LeaderEpochCache.assign` drops entries an older epoch contradicts).

        With ``allow_gaps`` a batch may start above the expected offset (never below),
        as Kafka's followers accept: data fetched from a compacted leader has gaps
        where whole batches were cleaned away.
        """
        self._check_open()
        view = memoryview(batch_bytes)
        scan = scan_headers(view)
        if scan.error is not None:
            raise scan.error
        if not scan.headers:
            return None
        expected = self.log_end_offset
        for pos, h in scan.headers:
            if h.base_offset < expected or (h.base_offset > expected and not allow_gaps):
                raise InvalidAppendError(f"batch at byte {pos} starts at offset {h.base_offset}, "
                                         f"expected {expected} (not contiguous with the log end)")
            expected = h.next_offset
        for pos, h in scan.headers:
            if h.leader_epoch >= 0:
                self.epoch_cache.assign(h.leader_epoch, h.base_offset)
            self._append(view[pos:pos + h.size_bytes], h.base_offset, h.last_offset, h.max_timestamp, now_ms)
        return scan.headers[0][1].base_offset, expected - 1

    # ------------------------------------------------------------ reads

    @guard_io("read")
    def read(self, start_offset: int, max_bytes: int, max_offset: int | None = None) -> bytes:
        """Whole batches from the batch containing ``start_offset``, across segments.

        The first batch is returned even if larger than ``max_bytes``; later ones only
        while the total stays within it.  With ``max_offset`` (e.g. the high watermark)
        a batch is included only if its last offset is < ``max_offset``.  Reading at the
        LEO gives b""; below the log start or above the LEO raises OffsetOutOfRangeError.
        """
        return b"".join(self._pieces(start_offset, max_bytes, max_offset, lambda seg: seg.read_slice))

    @guard_io("read")
    def read_file_records(self, start_offset: int, max_bytes: int, max_offset: int | None = None) -> FileRecords:
        """What :meth:`read` returns, left in the segment files (``node.storage.file_records``): a
        consumer fetch's bytes, which the listener sends with sendfile."""
        out = FileRecords([])
        for part in self._pieces(start_offset, max_bytes, max_offset, lambda seg: seg.file_slice):
            out.extend(part)
        return out

    def _pieces(self, start_offset: int, max_bytes: int, max_offset: int | None, how) -> list:
        self._check_open()
        leo = self.log_end_offset
        if not self.log_start_offset <= start_offset <= leo:
            raise OffsetOutOfRangeError(f"offset {start_offset} outside [{self.log_start_offset}, {leo}] "
                                        f"of {self.dir.name}")
        bases = [s.base_offset for s in self._segments]
        chunks: list = []
        remaining, offset = max_bytes, start_offset
        for seg in self._segments[bisect_right(bases, start_offset) - 1:]:
            if not seg.size or offset >= seg.next_offset:
                continue  # nothing left here: an empty or compacted-away tail, go to the next segment
            data, offset = how(seg)(offset, remaining, max_offset, min_one=not chunks)
            if not data:
                break
            chunks.append(data)
            remaining -= len(data)
            if offset < seg.next_offset:
                break
        return chunks

    # ------------------------------------------------------------ truncation, flush, close

    @guard_io("truncate")
    def truncate_to(self, offset: int) -> int:
        """Remove everything from the batch containing ``offset`` on; return records removed.

        Whole later segments are deleted.  Epoch-cache entries starting at or after the
        resulting LEO are removed as well (even when nothing else changes).  The LEO
        becomes the base offset of that batch, or ``offset`` itself when it falls in a
        gap left by compaction (like Kafka, which sets the LEO to the target): if the
        remaining data ends below it, an empty segment is rolled at that offset.
        """
        self._check_open()
        if offset < 0:
            raise ValueError(f"negative offset {offset}")
        if offset < self.log_start_offset:
            return self.truncate_fully_and_start_at(offset)
        dropped = 0
        if offset < self.log_end_offset:
            target = self._batch_start_or_gap(offset)
            while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
                seg = self._segments.pop()
                dropped += sum(h.record_count for _, h in seg.iter_headers(seg.base_offset))
                seg.delete()
            active = self._segments[-1]
            dropped += sum(h.record_count for _, h in active.iter_headers(offset))
            active.truncate_to(offset)
            active.flush()
            if active.next_offset < target:  # the data before ``offset`` was compacted away
                active.seal()
                self._segments.append(LogSegment.create(self.dir, target, self.index_interval_bytes))
        self.epoch_cache.truncate_from_end(min(offset, self.log_end_offset))
        self.txn.truncate(self.log_end_offset)
        if self._log_start > self.log_end_offset:  # Kafka: logStartOffset = min(target, logStartOffset)
            self._set_log_start(self.log_end_offset)
        if self._cleaner_state is not None and self._cleaner_state.first_dirty_offset > self.log_end_offset:
            self.set_cleaner_state(self._cleaner_state.truncated(self.log_end_offset))
        return dropped

    @guard_io("truncate")
    def truncate_fully_and_start_at(self, offset: int) -> int:
        """Delete every segment and start empty at ``offset`` (a follower behind its leader's log
        start offset, as Kafka's ``truncateFullyAndStartAt``); return the records removed."""
        self._check_open()
        dropped = 0
        for seg in self._segments:
            dropped += sum(h.record_count for _, h in seg.iter_headers(seg.base_offset))
            seg.delete()
        self._segments = [LogSegment.create(self.dir, offset, self.index_interval_bytes)]
        self.txn.reset(offset)
        self.epoch_cache.clear()
        self._set_log_start(offset)
        if self._cleaner_state is not None:
            self.set_cleaner_state(CleanerState(offset))
        return dropped

    def _batch_start_or_gap(self, offset: int) -> int:
        """Base offset of the batch holding ``offset``, or ``offset`` if no batch holds it."""
        bases = [s.base_offset for s in self._segments]
        i = bisect_right(bases, offset) - 1
        found = self._segments[i].find_batch(offset) if i >= 0 else None
        return found[1].base_offset if found is not None and found[1].base_offset <= offset else offset

    @guard_io("flush")
    def flush(self, now_ms: int | None = None) -> None:
        """fsync the active segment (older ones were fsynced when rolled)."""
        self._check_open()
        self._segments[-1].flush()
        self._unflushed = 0
        if now_ms is not None:
            self.last_flush_ms = now_ms

    @property
    def unflushed(self) -> int:
        """Records appended since the last fsync."""
        return self._unflushed

    def close(self) -> None:
        """Flush and close every segment (idempotent); deleted segments waiting out their delay go now.  A log
        an I/O error hit only closes its files (Kafka's closeHandlers): nothing more is written to an offline
        directory (its ``.deleted`` files go when the log is next opened)."""
        if self._closed:
            return
        if self._failed is not None:
            self.close_handles()
            return
        try:
            self.txn.close(self.log_end_offset)   # the producers' snapshot at the LEO (Kafka's close)
            for seg in self._segments:
                seg.close()
            while self.pending_deletes:
                self.pending_deletes[0][1].delete()
                del self.pending_deletes[0]
        except OSError as e:
            self.close_handles()
            raise self._io_failed("close", e) from e
        self._closed = True

    def close_handles(self) -> None:
        """Close every file without flushing (an offline directory's logs)."""
        for seg in self._segments + [seg for _t, seg in self.pending_deletes]:
            try:
                seg.close_handles()
            except OSError:
                pass
        self.pending_deletes = []
        self._closed = True

    def __enter__(self) -> "PartitionLog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"PartitionLog({self.dir.name}, start={self.log_start_offset}, "
                f"end={self.log_end_offset}, segments={len(self._segments)})")
