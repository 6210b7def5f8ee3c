"""One simulated partition replica's log: record batches in Kafka's format, in a file on a ``SimDisk``.

The bytes are real record batches (``kafkacommon.record_batch``), appended to
one segment file on the broker's simulated disk (``sim/disk.py``), which keeps
what was fsynced apart from what only the page cache has and decides what a
crash leaves.  Reopening runs the real log's recovery rule through
``SimDisk.recover_log`` (``kafkacommon.batch_scan.scan_for_recovery``, as
``LogSegment.recover``): keep every whole, valid, in-order batch from the
start and cut the file at the first that is not.  The in-memory index (where
each batch ends, its last offset, its CRC) and the decoded records are then
rebuilt from the batches the scan kept; the leader epoch cache (node.storage's
``LeaderEpochCache``, with no checkpoint file) is truncated to the new end, as
``PartitionLog`` does.
"""
from __future__ import annotations

import bisect

from kafkacommon.record_batch import decode_batch, encode_batch, peek_header
from node.storage.log import LeaderEpochCache
from sim.disk import SimDisk

Records = list[tuple[bytes | None, bytes | None]]


class SimLog:
    """Satisfies replication.partition.LogView; offsets are contiguous from 0 (one segment, no retention)."""

    def __init__(self, disk: SimDisk, topic: str, partition: int) -> None:
        self.topic, self.partition = topic, partition
        self.disk = disk
        self.path = f"{topic}-{partition}/{0:020d}.log"
        disk.create(self.path)
        self.batch_ends: list[int] = []    # byte end of each batch
        self.batch_last: list[int] = []    # last offset + 1 of each batch (the LEO after it)
        self.batch_crc: list[int] = []     # each batch's CRC (to tell, after a crash, which batches are ours)
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

    @property
    def size_bytes(self) -> int:
        return self.disk.size(self.path)

    # ------------------------------------------------------------------ writes

    def append(self, epoch: int, records: Records, now_ms: int) -> int:
        """Append one batch at the LEO in ``epoch``; returns its base offset."""
        base = len(self.records)
        self.epoch_cache.assign(epoch, base)
        data = encode_batch(base, epoch, [(k, v, now_ms) for k, v in records])
        position = self.disk.append(self.path, data)
        self.batch_ends.append(position + len(data))
        self.batch_crc.append(peek_header(data).crc)
        for k, v in records:
            self.records.append((epoch, k, v))
        self.batch_last.append(len(self.records))
        return base

    def append_as_follower(self, batches: list[tuple[int, Records]], now_ms: int) -> None:
        for epoch, recs in batches:
            self.append(epoch, recs, now_ms)

    def fsync(self) -> None:
        self.disk.fsync(self.path)

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
        new_end = self.batch_last[keep - 1] if keep else 0
        dropped = len(self.records) - new_end
        self.disk.truncate(self.path, self.batch_ends[keep - 1] if keep else 0)
        self._forget_from(keep)
        self.epoch_cache.truncate_from_end(new_end)
        return dropped

    def _forget_from(self, batch: int) -> None:
        new_end = self.batch_last[batch - 1] if batch else 0
        del self.batch_ends[batch:]
        del self.batch_last[batch:]
        del self.batch_crc[batch:]
        del self.records[new_end:]

    # ------------------------------------------------------------------ reads

    def read(self, offset: int, max_records: int = 1000) -> list[tuple[int, Records]]:
        """The batches from the one holding ``offset``, as they were appended, as [(epoch, records)]: whole
        batches (at least one) while they come to at most about ``max_records``.  A follower copies the leader's
        batches as they are, as Kafka's does, so a truncation to a leader's epoch boundary cuts the follower's
        log where the leader's batches end (a batch regrouped on the way would be cut whole, below it)."""
        out: list[tuple[int, Records]] = []
        i = bisect.bisect_right(self.batch_last, offset)
        n = 0
        while i < len(self.batch_last) and (not out or n + self.batch_last[i] - self._base(i) <= max_records):
            base, end = self._base(i), self.batch_last[i]
            out.append((self.records[base][0], [r[1:] for r in self.records[max(base, offset):end]]))
            n += end - base
            i += 1
        return out

    def _base(self, batch: int) -> int:
        return self.batch_last[batch - 1] if batch else 0

    def read_bytes(self, offset: int) -> tuple[bytes, int, int]:
        """The coordinator load's read: every whole batch from the one holding ``offset``."""
        i = 0
        while i < len(self.batch_last) and self.batch_last[i] <= offset:
            i += 1
        start = self.batch_ends[i - 1] if i else 0
        return self.disk.read(self.path, start), 0, self.log_end_offset

    # ------------------------------------------------------------------ recovery

    def recover(self) -> tuple[int, int]:
        """Reopen after a crash: the real log's recovery rule cuts the file; the index and records are rebuilt
        from the batches it kept.  Returns (bytes cut, batches dropped) as the ``log_recovered`` event has them.

        A batch at the same place with the same CRC and end offset as one this log wrote keeps its decoded
        records; from the first that differs (a power loss can bring back bytes a truncation had cut) the
        batches are decoded from the file, and their epochs enter the leader epoch cache as Kafka's
        ``LogSegment.recover`` puts them."""
        size = self.disk.size(self.path)
        scan = self.disk.recover_log(self.path, 0)
        same, start = 0, 0
        for pos, header in scan.headers:
            if not (same < len(self.batch_ends) and pos == start and header.crc == self.batch_crc[same]
                    and header.next_offset == self.batch_last[same]):
                break
            start = self.batch_ends[same]
            same += 1
        self._forget_from(same)
        if same < len(scan.headers):
            data = self.disk.read(self.path)
            self.epoch_cache.truncate_from_end(len(self.records))
            for pos, header in scan.headers[same:]:
                batch, end = decode_batch(data, pos)
                self.epoch_cache.assign(batch.leader_epoch, len(self.records))   # as Kafka's segment recovery
                self.records.extend((batch.leader_epoch, r.key, r.value) for r in batch.records)
                self.batch_ends.append(end)
                self.batch_last.append(len(self.records))
                self.batch_crc.append(header.crc)
        self.epoch_cache.truncate_from_end(len(self.records))
        return size - scan.valid_bytes, scan.dropped_batches
