"""A partition log's leader epoch cache (Kafka's LeaderEpochFileCache): (epoch, start offset) pairs,
kept in ``leader-epoch-checkpoint`` next to the segments."""
from __future__ import annotations

from bisect import bisect_right

from .checkpoint import CheckpointError, LeaderEpochCheckpointFile, PreparedCheckpoint

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    """(leader epoch, start offset) pairs, epochs and start offsets both increasing.

    Every change is written to the checkpoint file (when one is given).
    """

    def __init__(self, checkpoint: LeaderEpochCheckpointFile | None = None) -> None:
        self._checkpoint = checkpoint
        self._entries: list[tuple[int, int]] = checkpoint.read() if checkpoint else []
        for i, (prev, cur) in enumerate(zip(self._entries, self._entries[1:])):
            if cur[0] <= prev[0] or cur[1] < prev[1]:
                assert checkpoint is not None
                raise CheckpointError(checkpoint.path, i + 4, "epochs or start offsets not increasing")

    @property
    def entries(self) -> list[tuple[int, int]]:
        """A copy of the (epoch, start offset) pairs, oldest first."""
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        """The newest epoch, or -1 when the cache is empty."""
        return self._entries[-1][0] if self._entries else UNDEFINED_EPOCH

    def _flush(self) -> None:
        if self._checkpoint is not None:
            self._checkpoint.write(self._entries)

    def assign(self, epoch: int, start_offset: int, prepared: PreparedCheckpoint | None = None) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True if the cache changed.

        Kafka 2.8's ``LeaderEpochFileCache.assign``: a negative epoch or offset raises ValueError;
        the latest epoch again at or above its start offset is a no-op; anything else first removes,
        from the newest entry down and while they match, the entries whose epoch is >= ``epoch`` or
        whose start offset is >= ``start_offset`` (entries that would break the order: a newer epoch
        starting at the same offset never got a record; an older epoch fetched after a newer one
        means the newer one's entries were wrong), then adds ``(epoch, start_offset)``.

        ``prepared`` (:meth:`prepare`'s): when it holds exactly the new entries, it is renamed over the
        checkpoint instead of writing and fsyncing them now; otherwise it is discarded.
        """
        entries = self.planned(epoch, start_offset)
        if entries is None:
            if prepared is not None:
                prepared.discard()
            return False
        self._entries = entries
        if self._checkpoint is None:
            return True
        if prepared is not None and prepared.entries == tuple(entries):
            self._checkpoint.install(prepared)
        else:
            if prepared is not None:
                prepared.discard()
            self._flush()
        return True

    def planned(self, epoch: int, start_offset: int) -> list[tuple[int, int]] | None:
        """The entries :meth:`assign` would leave (None: it would change nothing), the cache unchanged."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid epoch entry ({epoch}, {start_offset})")
        entries = list(self._entries)
        if entries and entries[-1][0] == epoch and start_offset >= entries[-1][1]:
            return None
        while entries and (entries[-1][0] >= epoch or entries[-1][1] >= start_offset):
            entries.pop()
        entries.append((epoch, start_offset))
        return entries

    def prepare(self, epoch: int, start_offset: int) -> PreparedCheckpoint | None:
        """The checkpoint :meth:`assign` of (``epoch``, ``start_offset``) would write, written and fsynced now
        (``LeaderEpochCheckpointFile.prepare``) for that assign to rename into place: a new leader writes it
        before it takes its partition's lock, and holds the lock only for the rename.  None when there is no
        file or the assign would change nothing; an OSError goes up (nothing is left behind)."""
        if self._checkpoint is None or epoch < 0 or start_offset < 0:
            return None
        entries = self.planned(epoch, start_offset)
        return None if entries is None else self._checkpoint.prepare(entries)

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetsForLeaderEpoch / divergence checks.

        * epoch undefined (negative), cache empty or epoch above the latest → (-1, -1);
        * epoch == latest → (epoch, log_end_offset);
        * otherwise the end offset is the start offset of the first epoch above it,
          paired with the largest known epoch <= ``epoch``, or with ``epoch`` itself
          when it is below every known epoch.
        """
        if epoch < 0 or not self._entries or epoch > self._entries[-1][0]:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epoch == self._entries[-1][0]:
            return epoch, log_end_offset
        epochs = [e for e, _ in self._entries]
        i = bisect_right(epochs, epoch)  # first entry with a larger epoch
        next_start = self._entries[i][1]
        return (epochs[i - 1] if i > 0 else epoch), next_start

    def truncate_from_end(self, offset: int) -> None:
        """Remove every entry whose start offset is >= ``offset``."""
        keep = [e for e in self._entries if e[1] < offset]
        if len(keep) != len(self._entries):
            self._entries = keep
            self._flush()

    def truncate_from_start(self, offset: int) -> None:
        """The log start offset moved to ``offset`` (DeleteRecords, retention, a load): Kafka 2.8's
        ``truncateFromStart``.  Every entry starting at or below ``offset`` goes; the newest of them comes
        back starting at ``offset`` (its epoch still covers the log's first records).  An entry starting
        exactly at ``offset`` is kept as it is."""
        gone = [e for e in self._entries if e[1] <= offset]
        if not gone or gone == [(gone[-1][0], offset)]:
            return
        self._entries = [(gone[-1][0], offset)] + self._entries[len(gone):]
        self._flush()

    def clear(self) -> None:
        """Remove every entry."""
        if self._entries:
            self._entries = []
            self._flush()
