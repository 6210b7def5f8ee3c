"""PartitionLog's segment-level operations beside appends and reads: retention's (each segment's size and
age, moving the log start offset, deleting the oldest segments, removing a deleted segment's files once
``file.delete.delay.ms`` has passed) and compaction's crash-safe swap of cleaned segments (Kafka's
``replaceSegments``).  A mixin of :class:`node.storage.log.PartitionLog`, on its segment list and checkpoints;
an I/O error takes the log's directory offline there too (:func:`node.storage.errors.guard_io`)."""
from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING, Sequence

from .checkpoint import CleanerState
from .errors import guard_io
from .retention import SegmentInfo
from .segment import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX, LogSegment

if TYPE_CHECKING:
    from .txn_log import TxnLog


class SegmentsMixin:
    """Retention's and compaction's operations on a PartitionLog's segments (see the module's docstring)."""

    _segments: list[LogSegment]
    _log_start: int
    _cleaner_state: CleanerState | None
    file_delete_delay_ms: int
    pending_deletes: list[tuple[int, LogSegment]]
    txn: "TxnLog"

    # ------------------------------------------------------------ retention support

    @guard_io("retention scan")
    def segment_infos(self) -> list[SegmentInfo]:
        """Each segment's base offset, size and largest timestamp (the file's mtime when it has no
        timestamp, as Kafka's ``largestTimestamp``), oldest first: the input of retention's rule."""
        return [SegmentInfo(s.base_offset, s.size, s.max_timestamp if s.max_timestamp >= 0
                            else int(os.stat(s.log_path).st_mtime * 1000)) for s in self._segments]

    @guard_io("log start offset checkpoint write")
    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """Move the log start offset up to ``offset`` (never past the LEO); True if it moved."""
        self._check_open()
        offset = min(offset, self.log_end_offset)
        if offset <= self.log_start_offset:
            return False
        self._set_log_start(offset)
        return True

    @guard_io("segment deletion")
    def delete_oldest_segments(self, count: int, now_ms: int | None = None) -> list[int]:
        """Delete the ``count`` oldest segments (rolling an empty one at the LEO first when that is
        all of them) and move the log start offset to the first remaining; return their base offsets."""
        self._check_open()
        if count <= 0:
            return []
        if count >= len(self._segments):
            count = len(self._segments)
            self._roll(self.log_end_offset, now_ms)
        doomed, self._segments = self._segments[:count], self._segments[count:]
        for seg in doomed:
            if self.file_delete_delay_ms > 0 and now_ms is not None:
                # Kafka's deleteSegmentFiles: renamed .deleted now, removed file.delete.delay.ms later
                seg.change_file_suffix(DELETED_SUFFIX)
                self.pending_deletes.append((now_ms + self.file_delete_delay_ms, seg))
            else:
                seg.delete()
        if self._segments[0].base_offset > self._log_start:
            self._set_log_start(self._segments[0].base_offset)
        self.txn.on_segments_deleted([seg.base_offset for seg in doomed], self.log_start_offset)
        return [seg.base_offset for seg in doomed]

    # ------------------------------------------------------------ compaction support

    @guard_io("cleaner segment swap")
    def replace_segments(self, old: Sequence[LogSegment], new: LogSegment) -> None:
        """Swap ``new`` in for ``old``, a run of consecutive non-active segments (Kafka's replaceSegments).

        ``new`` must be a whole, sealed segment written under ``.cleaned`` names, with
        ``old[0]``'s base offset and no offset at or beyond the base offset of the
        segment after ``old``.  Steps, each crash-safe (see :meth:`_complete_swaps`):
        record the pending swap in the cleaner checkpoint; rename ``new`` to ``.swap``
        (index files first, ``.log`` last: the commit point); delete the old segments;
        rename ``new`` to its final names; clear the pending swap.
        """
        self._check_open()
        if not old:
            raise ValueError("no segments to replace")
        try:
            i = next(n for n, seg in enumerate(self._segments) if seg is old[0])
        except StopIteration:
            raise ValueError(f"{old[0]} is not a segment of {self}") from None
        j = i + len(old)
        if j >= len(self._segments) or any(a is not b for a, b in zip(self._segments[i:j], old)):
            raise ValueError("old segments must be consecutive and not include the active segment")
        end = self._segments[j].base_offset
        if new.base_offset != old[0].base_offset or new.next_offset > end or new.file_suffix != CLEANED_SUFFIX:
            raise ValueError(f"{new} cannot replace segments {old[0].base_offset}..{end - 1}")
        new.flush()
        state = self._cleaner_state or CleanerState(self.log_start_offset)
        self.set_cleaner_state(replace(state, pending_swap=(new.base_offset, end)))
        new.change_file_suffix(SWAP_SUFFIX)
        for seg in old:
            seg.delete()
        new.change_file_suffix("")
        self._segments[i:j] = [new]
        self.txn.on_segments_replaced([seg.base_offset for seg in old], new.base_offset)
        self.set_cleaner_state(replace(state, pending_swap=None))

    @guard_io("delayed segment deletion")
    def purge_deleted(self, now_ms: int) -> list[int]:
        """Remove the files of retention-deleted segments whose ``file.delete.delay.ms`` has passed
        (-> their base offsets)."""
        self._check_open()
        due = [seg for t, seg in self.pending_deletes if t <= now_ms]
        self.pending_deletes = [(t, seg) for t, seg in self.pending_deletes if t > now_ms]
        for seg in due:
            seg.delete()
        return [seg.base_offset for seg in due]
