"""Log compaction for ``cleanup.policy=compact`` partitions (Kafka's LogCleaner, one pass per call).

A compacted log keeps, for every key, at least its latest record, so replaying it
(``__consumer_offsets`` on a coordinator failover) costs in proportion to the live
keys, not to the history.  :func:`clean` runs one pass over one :class:`PartitionLog`;
deciding *when* is the caller's business (:func:`dirty_ratio` is Kafka's
``min.cleanable.dirty.ratio`` test).  There is no thread and no clock: the caller
holds the partition's lock around the call and passes ``now_ms``.

Rules of a pass (after Kafka 2.8's ``Cleaner.doClean``):

1. **Sections.** [log start, first dirty) was cleaned before; the *dirty section*
   is [first dirty, first uncleanable).  The first uncleanable offset is the base
   offset of the first segment that is the active one, holds any offset at or above
   ``upper_bound_offset`` (the high watermark), or (with ``min_compaction_lag_ms``)
   has a record newer than ``now_ms - min_compaction_lag_ms``.  Only whole
   non-active segments below it are ever rewritten.
2. **Offset map.** key → latest offset over the dirty section.  With
   ``max_map_keys`` the map may stop early, at a batch boundary ``end``; otherwise
   ``end`` is the first uncleanable offset.  ``end`` becomes the next first dirty offset.
3. **Retention.** Every segment from the log start up to ``end`` is rewritten; a
   record is kept unless its offset is below ``end`` and either its key maps to a
   later offset (superseded) or it is a tombstone (null value) past retention.
   Records with a null key are invalid in a compacted topic (Kafka refuses them at
   append and its cleaner drops them); here they are kept and counted.
4. **Tombstones.** A tombstone is dropped only if it was already below the first
   dirty offset when the pass began (it has been cleaned once, so every older
   record of its key is gone) and ``first cleaned at + delete_retention_ms < now_ms``.
   Kafka uses the segment's last-modified time; files have no trustworthy clock
   here, so the checkpoint keeps "first cleaned at" stamps per offset range, which
   merging segments does not disturb.
5. **Offsets are never renumbered.** A batch that loses records is re-encoded with
   its base offset, last offset delta, leader epoch and base timestamp (the
   survivors' bytes are copied as they were); a batch that loses all its records
   disappears.  The log start and end offsets do not move.
6. **Grouping and swap.** Consecutive segments are merged while their total size
   stays within ``segment_bytes`` and their offsets fit 32-bit relative offsets
   (Kafka's ``groupSegmentsBySize``).  Each group is written as ``<base>.log.cleaned``
   (+ indexes), flushed, and swapped in by :meth:`PartitionLog.replace_segments`
   (``.swap`` rename, delete the old segments, final rename); opening the log
   finishes or discards an interrupted swap.
7. **Checkpoint.** The new first dirty offset and stamps go to
   ``cleaner-offset-checkpoint`` after every group is swapped in; a crash before that
   only makes the next pass redo work (tombstones then live longer, never shorter).
8. **Transactions.** Transactional batches and markers (control batches) are kept whole and never
   enter the offset map, so an aborted (or undecided) transactional record never makes an older record
   of its key go.  Kafka's cleaner removes aborted transactional data and, later, markers; this one keeps
   them (docs/deviations.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

from kafkacommon.record_batch import RecordBatch, decode_batch, peek_header, retain_records

from .errors import StorageError
from .checkpoint import CleanerState
from .log import PartitionLog
from .segment import CLEANED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment

DEFAULT_DELETE_RETENTION_MS = 86_400_000
DEFAULT_MIN_CLEANABLE_RATIO = 0.5
MAX_CLEANED_AT_ENTRIES = 64
READ_CHUNK_BYTES = 1 << 20
_INT32_MAX = (1 << 31) - 1


@dataclass(frozen=True)
class CleanResult:
    """What one :func:`clean` call did.  ``segments_cleaned == 0`` means it skipped.

    ``records_read``/``bytes_before`` cover the rewritten segments;
    ``tombstones_dropped`` counts tombstones removed for age (superseded ones are
    simply not kept); ``null_key_records`` counts keyless records seen (all kept);
    ``dirty_ratio`` is the ratio measured before the pass.
    """

    segments_cleaned: int
    segments_written: int
    records_read: int
    records_kept: int
    tombstones_dropped: int
    null_key_records: int
    bytes_before: int
    bytes_after: int
    first_dirty_offset: int
    dirty_ratio: float

    @property
    def records_removed(self) -> int:
        return self.records_read - self.records_kept


# ---------------------------------------------------------------- sections

def first_dirty_offset(log: PartitionLog) -> int:
    """Where the dirty section starts: the checkpointed offset, or the log start.

    Like Kafka, a checkpoint outside [log start, log end] is ignored (the whole log
    counts as dirty again).
    """
    state = log.cleaner_state
    if state is None or not log.log_start_offset <= state.first_dirty_offset <= log.log_end_offset:
        return log.log_start_offset
    return state.first_dirty_offset


def first_uncleanable_offset(log: PartitionLog, upper_bound_offset: int | None = None, *,
                             now_ms: int | None = None, min_compaction_lag_ms: int = 0) -> int:
    """Base offset of the first segment the cleaner must not touch (rule 1)."""
    if min_compaction_lag_ms > 0 and now_ms is None:
        raise ValueError("min_compaction_lag_ms needs now_ms")
    for seg in log.segments[:-1]:
        if upper_bound_offset is not None and seg.next_offset > upper_bound_offset:
            return seg.base_offset
        if min_compaction_lag_ms > 0 and now_ms is not None and seg.max_timestamp > now_ms - min_compaction_lag_ms:
            return seg.base_offset
    return log.active_segment.base_offset


def _ratio(log: PartitionLog, dirty_start: int, bound: int) -> float:
    clean_bytes = dirty_bytes = 0
    for seg in log.segments:
        if seg.base_offset >= bound:
            break
        if seg.next_offset <= dirty_start:
            clean_bytes += seg.size
        else:
            dirty_bytes += seg.size
    total = clean_bytes + dirty_bytes
    return dirty_bytes / total if total else 0.0


def dirty_ratio(log: PartitionLog, upper_bound_offset: int | None = None, *,
                now_ms: int | None = None, min_compaction_lag_ms: int = 0) -> float:
    """Dirty bytes / cleanable bytes (Kafka's cleanable ratio), 0.0 for nothing cleanable.

    Cleanable bytes are those of the segments below the first uncleanable offset;
    the dirty ones are those holding offsets at or above the first dirty offset.
    """
    bound = first_uncleanable_offset(log, upper_bound_offset, now_ms=now_ms,
                                     min_compaction_lag_ms=min_compaction_lag_ms)
    return _ratio(log, first_dirty_offset(log), bound)


# ---------------------------------------------------------------- reading

def _segment_batches(seg: LogSegment, start_offset: int | None = None) -> Iterator[tuple[bytes, RecordBatch]]:
    """(raw bytes, decoded batch) of every batch from the one holding ``start_offset``, in chunks."""
    offset = seg.base_offset if start_offset is None else start_offset
    while offset < seg.next_offset:
        data, offset = seg.read_slice(offset, READ_CHUNK_BYTES)
        if not data:
            return
        pos = 0
        while pos < len(data):
            batch, end = decode_batch(data, pos)  # a corrupt batch stops the pass (CorruptBatchError)
            yield data[pos:end], batch
            pos = end


def _build_offset_map(segments: Sequence[LogSegment], start: int, bound: int,
                      max_map_keys: int | None) -> tuple[dict[bytes, int], int]:
    """key → latest offset over [start, bound), and where the map stopped (rule 2)."""
    offset_map: dict[bytes, int] = {}
    for seg in segments:
        if seg.base_offset >= bound:
            break
        if seg.next_offset <= start:
            continue
        for _raw, batch in _segment_batches(seg, max(start, seg.base_offset)):
            if batch.is_transactional or batch.is_control:
                continue                  # rule 8: a transaction's records never supersede others
            records = [r for r in batch.records if r.offset >= start and r.key is not None]
            if max_map_keys is not None and offset_map:
                new_keys = {r.key for r in records if r.key not in offset_map}
                if len(offset_map) + len(new_keys) > max_map_keys:
                    return offset_map, max(start, batch.base_offset)
            for rec in records:
                offset_map[rec.key] = rec.offset  # type: ignore[index]
    return offset_map, bound


def _group_by_size(log: PartitionLog, segments: Sequence[LogSegment]) -> list[list[LogSegment]]:
    """Runs of consecutive segments whose sizes sum to at most segment_bytes (rule 6)."""
    all_segments = log.segments
    following = {id(seg): all_segments[i + 1].base_offset for i, seg in enumerate(all_segments[:-1])}
    groups: list[list[LogSegment]] = []
    size = 0
    for seg in segments:
        last_offset = following[id(seg)] - 1  # worst case: the segment runs up to the next one
        if (groups and size + seg.size <= log.segment_bytes
                and last_offset - groups[-1][0].base_offset <= _INT32_MAX):
            groups[-1].append(seg)
            size += seg.size
        else:
            groups.append([seg])
            size = seg.size
    return groups


# ---------------------------------------------------------------- cleaning

@dataclass
class _Counts:
    read: int = 0
    kept: int = 0
    tombstones: int = 0
    null_keys: int = 0


class _Pass:
    """The retention decision of one pass (rules 3 and 4)."""

    def __init__(self, offset_map: dict[bytes, int], end: int, prior: CleanerState,
                 now_ms: int, delete_retention_ms: int) -> None:
        self.offset_map, self.end, self.prior = offset_map, end, prior
        self.now_ms, self.delete_retention_ms = now_ms, delete_retention_ms
        self.counts = _Counts()

    def keep_mask(self, batch: RecordBatch) -> list[bool]:
        counts = self.counts
        if batch.is_transactional or batch.is_control:     # rule 8: kept as they are
            counts.read += len(batch.records)
            counts.kept += len(batch.records)
            return [True] * len(batch.records)
        mask = []
        for rec in batch.records:
            counts.read += 1
            keep = True
            if rec.key is None:
                counts.null_keys += 1
            elif rec.offset < self.end:
                if self.offset_map.get(rec.key, -1) > rec.offset:
                    keep = False
                elif rec.value is None:
                    cleaned_at = self.prior.cleaned_at_ms(rec.offset)
                    if cleaned_at is not None and cleaned_at + self.delete_retention_ms < self.now_ms:
                        keep = False
                        counts.tombstones += 1
            counts.kept += keep
            mask.append(keep)
        return mask


def _clean_group(log: PartitionLog, group: Sequence[LogSegment], decide: _Pass) -> LogSegment:
    """Write ``group`` through ``decide`` into a ``.cleaned`` segment and swap it in; return it."""
    base = group[0].base_offset
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):  # debris of an earlier failed attempt
        (log.dir / f"{base:020d}{suffix}{CLEANED_SUFFIX}").unlink(missing_ok=True)
    cleaned = LogSegment.create(log.dir, base, log.index_interval_bytes, file_suffix=CLEANED_SUFFIX)
    try:
        for seg in group:
            for raw, batch in _segment_batches(seg):
                out = retain_records(raw, batch, decide.keep_mask(batch))
                if out is not None:
                    cleaned.append(out, batch.base_offset, batch.last_offset, peek_header(out).max_timestamp)
        cleaned.seal()
        log.replace_segments(group, cleaned)
    except BaseException:
        if cleaned.file_suffix == CLEANED_SUFFIX:  # not committed yet: the old segments stay
            cleaned.delete()
        raise
    return cleaned


def _cleaned_at_entries(entries: list[tuple[int, int]], now_ms: int,
                        delete_retention_ms: int) -> tuple[tuple[int, int], ...]:
    """Bound the stamp list; merging adjacent ranges keeps the later stamp (tombstones live longer)."""
    out: list[tuple[int, int]] = []
    for start, ms in entries:
        expired = ms + delete_retention_ms < now_ms
        if out and expired and out[-1][1] + delete_retention_ms < now_ms:
            out[-1] = (out[-1][0], max(out[-1][1], ms))
        else:
            out.append((start, ms))
    while len(out) > MAX_CLEANED_AT_ENTRIES:
        i = min(range(1, len(out)), key=lambda k: abs(out[k][1] - out[k - 1][1]))
        out[i - 1:i + 1] = [(out[i - 1][0], max(out[i - 1][1], out[i][1]))]
    return tuple(out)


def compaction_delay_ms(log: PartitionLog, first_dirty: int, now_ms: int, max_compaction_lag_ms: int) -> int:
    """Kafka's ``LogCleanerManager.maxCompactionLagDelay``: how far past ``max.compaction.lag.ms`` the oldest
    first-batch timestamp of the dirty non-active segments is (0: not overdue)."""
    stamps = [s.first_batch_timestamp for s in log.segments[:-1]
              if s.next_offset > first_dirty and s.first_batch_timestamp > 0]
    if not stamps:
        return 0
    until = now_ms - max(max_compaction_lag_ms, 0)
    return until - min(stamps) if min(stamps) < until else 0


def clean(log: PartitionLog, *, now_ms: int, delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS,
          min_cleanable_ratio: float = DEFAULT_MIN_CLEANABLE_RATIO, upper_bound_offset: int | None = None,
          min_compaction_lag_ms: int = 0, max_map_keys: int | None = None,
          max_compaction_lag_ms: int | None = None) -> CleanResult:
    """Run one compaction pass over ``log`` (see the module docstring for the rules).

    Skips (``segments_cleaned == 0``, nothing written) when no segment is cleanable
    or the dirty ratio is below ``min_cleanable_ratio``; pass 0.0 to clean anyway,
    e.g. to let old tombstones go.  With ``max_compaction_lag_ms`` (KIP-354), a log whose oldest dirty
    non-active segment's first batch is older than that is cleaned whatever its ratio (Kafka's
    ``needCompactionNow``).  ``upper_bound_offset`` should be the high
    watermark.  Raises CorruptBatchError if a segment holds a corrupt batch (the
    log is unchanged up to the group being written).
    """
    if log.closed:
        raise StorageError(f"log {log.dir} is closed")
    if delete_retention_ms < 0 or min_compaction_lag_ms < 0:
        raise ValueError("retention and lag must be >= 0")
    if not 0.0 <= min_cleanable_ratio <= 1.0:
        raise ValueError(f"min_cleanable_ratio {min_cleanable_ratio} outside [0, 1]")
    if max_map_keys is not None and max_map_keys <= 0:
        raise ValueError("max_map_keys must be positive")
    start = first_dirty_offset(log)
    bound = first_uncleanable_offset(log, upper_bound_offset, now_ms=now_ms,
                                     min_compaction_lag_ms=min_compaction_lag_ms)
    ratio = _ratio(log, start, bound)
    cleanable = [s for s in log.segments[:-1] if s.base_offset < bound]
    overdue = max_compaction_lag_ms is not None and compaction_delay_ms(log, start, now_ms, max_compaction_lag_ms) > 0
    if not cleanable or (ratio < min_cleanable_ratio and not overdue):
        return CleanResult(0, 0, 0, 0, 0, 0, 0, 0, start, ratio)

    offset_map, end = ({}, start) if start >= bound else _build_offset_map(cleanable, start, bound, max_map_keys)
    state = log.cleaner_state
    prior = CleanerState(start, tuple(e for e in (state.cleaned_at if state else ()) if e[0] < start))
    decide = _Pass(offset_map, end, prior, now_ms, delete_retention_ms)
    rewrite = [s for s in cleanable if s.base_offset < end]
    bytes_before = sum(s.size for s in rewrite)
    written = [_clean_group(log, group, decide) for group in _group_by_size(log, rewrite)]

    entries = list(prior.cleaned_at)
    if end > start:
        entries.append((start, now_ms))
    new_start = max(start, end)
    log.set_cleaner_state(CleanerState(new_start, _cleaned_at_entries(entries, now_ms, delete_retention_ms)))
    c = decide.counts
    return CleanResult(segments_cleaned=len(rewrite), segments_written=len(written), records_read=c.read,
                       records_kept=c.kept, tombstones_dropped=c.tombstones, null_key_records=c.null_keys,
                       bytes_before=bytes_before, bytes_after=sum(s.size for s in written),
                       first_dirty_offset=new_start, dirty_ratio=ratio)
