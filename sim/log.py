"""One simulated partition replica's log: record batches in Kafka's format, on a simulated disk.

The bytes are real record batches (``kafkacommon.record_batch``), appended to
an in-memory file with an fsynced prefix.  A crash keeps what the OS had (a
killed process loses nothing it wrote) unless the fault says the machine lost
its page cache (then only the fsynced prefix stays); a torn tail cuts bytes
off the end.  Reopening runs the project's own recovery rule: scan the batches
(``kafkacommon.batch_scan.scan_headers``) and cut at the first torn or corrupt
one; the leader epoch cache (node.storage's ``LeaderEpochCache``, with no
checkpoint file) is then truncated to the new end, as ``PartitionLog`` does.
"""
from __future__ import annotations

from kafkacommon.batch_scan import scan_headers
from kafkacommon.record_batch import encode_batch
from node.storage.log import LeaderEpochCache


class SimLog:
    """Satisfies replication.partition.LogView; offsets are contiguous from 0 (no retention here)."""

    def __init__(self, topic: str, partition: int) -> None:
        self.topic, self.partition = topic, partition
        self.data = bytearray()            # the file
        self.synced = 0                    # bytes known to be on the platter
        self.batch_ends: list[int] = []    # byte end of each batch
        self.batch_last: list[int] = []    # last offset of each batch (its LEO after it)
        self.records: list[tuple[int, bytes | None, bytes | None]] = []   # (epoch, key, value) per offset
        self.epoch_cache = LeaderEpochCache()

    # ------------------------------------------------------------------ LogView

    @property
    def log_start_offset(self) -> int:
        return 0

    @property
    def log_end_offset(self) -> int:
        return len(self.records)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.epoch_cache.end_offset_for(epoch, self.log_end_offset)

    @property
    def latest_epoch(self) -> int:
        return self.epoch_cache.latest_epoch

    # ------------------------------------------------------------------ writes

    def append(self, epoch: int, records: list[tuple[bytes | None, bytes | None]], now_ms: int) -> int:
        """Append one batch at the LEO in ``epoch``; returns its base offset."""
        base = len(self.records)
        self.epoch_cache.assign(epoch, base)
        self.data += encode_batch(base, epoch, [(k, v, now_ms) for k, v in records])
        self.batch_ends.append(len(self.data))
        for k, v in records:
            self.records.append((epoch, k, v))
        self.batch_last.append(len(self.records))
        return base

    def append_as_follower(self, batches: list[tuple[int, list[tuple[bytes | None, bytes | None]]]],
                           now_ms: int) -> None:
        for epoch, recs in batches:
            self.append(epoch, recs, now_ms)

    def fsync(self) -> None:
        self.synced = len(self.data)

    def truncate_to(self, offset: int) -> int:
        """Cut the log to ``offset`` (the base of the batch holding it); returns the records dropped.  As
        PartitionLog.truncate_to, epoch-cache entries starting at or after the new LEO go even when nothing
        else changes."""
        if offset >= len(self.records):
            self.epoch_cache.truncate_from_end(len(self.records))
            return 0
        keep = 0
        while keep < len(self.batch_last) and self.batch_last[keep] <= offset:
            keep += 1
        cut_bytes = self.batch_ends[keep - 1] if keep else 0
        new_end = self.batch_last[keep - 1] if keep else 0
        dropped = len(self.records) - new_end
        del self.data[cut_bytes:]
        del self.batch_ends[keep:]
        del self.batch_last[keep:]
        del self.records[new_end:]
        self.synced = min(self.synced, cut_bytes)
        self.epoch_cache.truncate_from_end(new_end)
        return dropped

    # ------------------------------------------------------------------ reads

    def read(self, offset: int, max_records: int = 1000) -> list[tuple[int, list[tuple[bytes | None, bytes | None]]]]:
        """Whole batches from ``offset`` as [(epoch, records)], at most about ``max_records``."""
        out: list[tuple[int, list]] = []
        i = offset
        end = min(len(self.records), offset + max_records)
        while i < end:
            epoch = self.records[i][0]
            j = i
            batch = []
            while j < end and self.records[j][0] == epoch:
                batch.append(self.records[j][1:])
                j += 1
            out.append((epoch, batch))
            i = j
        return out

    def read_bytes(self, offset: int) -> tuple[bytes, int, int]:
        """The coordinator load's read: every whole batch from the one holding ``offset``."""
        i = 0
        while i < len(self.batch_last) and self.batch_last[i] <= offset:
            i += 1
        start = self.batch_ends[i - 1] if i else 0
        return bytes(self.data[start:]), 0, self.log_end_offset

    # ------------------------------------------------------------------ crashes

    def crash(self, lose_unsynced: bool, torn_bytes: int) -> None:
        """The process (or machine) died: maybe lose the unsynced tail, maybe tear the last bytes."""
        if lose_unsynced:
            del self.data[self.synced:]
        if torn_bytes:
            del self.data[max(0, len(self.data) - torn_bytes):]

    def recover(self) -> tuple[int, int]:
        """Reopen: keep the batches the scan finds whole and valid; (bytes cut, records dropped)."""
        scan = scan_headers(bytes(self.data))
        valid = scan.valid_bytes
        cut = len(self.data) - valid
        keep = 0
        while keep < len(self.batch_ends) and self.batch_ends[keep] <= valid:
            keep += 1
        new_end = self.batch_last[keep - 1] if keep else 0
        dropped = len(self.records) - new_end
        del self.data[valid:]
        del self.batch_ends[keep:]
        del self.batch_last[keep:]
        del self.records[new_end:]
        self.synced = min(self.synced, valid)
        self.epoch_cache.truncate_from_end(new_end)
        return cut, dropped
