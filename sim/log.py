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

Batches a producer wrote (an idempotent or transactional producer's, the transaction coordinator's markers,
a group coordinator's transactional offsets) keep their producer fields (:class:`ProducerBatch`) in the
bytes and across replication: a follower appends them as they are.  Every replica keeps the partition's
producers as the real log does (``replication.producer_state.ProducerStates``, fed the appended bytes),
and with them the open transactions, the last stable offset and the aborted transactions (the real
``.txnindex``'s entries); after a truncation or a recovery they are rebuilt from the file, as Kafka
rebuilds them from the log when it has no snapshot.
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, replace

from kafkacommon.record_batch import decode_batch, encode_batch, peek_header
from node.storage.log import LeaderEpochCache
from replication.producer_state import AbortedTxn, ProducerStates
from sim.disk import SimDisk

Records = list[tuple[bytes | None, bytes | None]]


@dataclass(frozen=True)
class ProducerBatch:
    """A batch's producer fields: its id, epoch and first sequence (-1: none), and its flags."""
    producer_id: int
    producer_epoch: int
    base_sequence: int = -1
    transactional: bool = False
    control: bool = False


Chunk = tuple[int, Records, "ProducerBatch | None"]     # (leader epoch, records, producer fields)


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
        self.batch_meta: list[ProducerBatch | None] = []   # each batch's producer fields (None: no producer)
        self.records: list[tuple[int, bytes | None, bytes | None]] = []   # (epoch, key, value) per offset
        self.epoch_cache = LeaderEpochCache()
        self.producers = ProducerStates()
        self.aborted: list[AbortedTxn] = []   # the aborted transactions, in marker order (the .txnindex's)

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

    def append(self, epoch: int, records: Records, now_ms: int, meta: ProducerBatch | None = None) -> int:
        """Append one batch at the LEO in ``epoch`` (with ``meta``'s producer fields); returns its base offset."""
        base = len(self.records)
        self.epoch_cache.assign(epoch, base)
        fields = {} if meta is None else dict(
            producer_id=meta.producer_id, producer_epoch=meta.producer_epoch, base_sequence=meta.base_sequence,
            transactional=meta.transactional, control=meta.control)
        data = encode_batch(base, epoch, [(k, v, now_ms) for k, v in records], **fields)
        position = self.disk.append(self.path, data)
        self.batch_ends.append(position + len(data))
        self.batch_crc.append(peek_header(data).crc)
        self.batch_meta.append(meta)
        for k, v in records:
            self.records.append((epoch, k, v))
        self.batch_last.append(len(self.records))
        if meta is not None:
            self._producers_append(data)
        return base

    def append_as_follower(self, batches: list[Chunk], now_ms: int) -> None:
        for epoch, recs, meta in batches:
            self.append(epoch, recs, now_ms, meta)

    def _producers_append(self, data: bytes) -> None:
        _next, decided = self.producers.append_batches(data)
        self.aborted.extend(aborted for _txn, aborted in decided if aborted is not None)

    def _rebuild_producers(self) -> None:
        """The producers, open transactions and aborted ones again from the file (after it was cut)."""
        self.producers, self.aborted = ProducerStates(), []
        if any(m is not None for m in self.batch_meta):
            self._producers_append(self.disk.read(self.path))

    # ------------------------------------------------------------------ transactions

    def last_stable_offset(self, high_watermark: int, planted_lso_from_hw: bool = False) -> int:
        """Below it a read_committed consumer reads (``planted_lso_from_hw``: sim/bugs.py's "lso-from-hw", the
        high watermark instead)."""
        return high_watermark if planted_lso_from_hw else self.producers.last_stable_offset(high_watermark)

    def aborted_between(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions with records in [start, end), as a fetch
        answer's aborted_transactions (Kafka's collectAbortedTxns)."""
        return [(a.producer_id, a.first_offset) for a in self.aborted
                if a.first_offset < end and a.last_offset >= start]

    def meta_at(self, offset: int) -> ProducerBatch | None:
        """The producer fields of the batch holding ``offset``."""
        return self.batch_meta[bisect_right(self.batch_last, offset)]

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
        self._rebuild_producers()
        return dropped

    def _forget_from(self, batch: int) -> None:
        new_end = self.batch_last[batch - 1] if batch else 0
        del self.batch_ends[batch:]
        del self.batch_last[batch:]
        del self.batch_crc[batch:]
        del self.batch_meta[batch:]
        del self.records[new_end:]

    # ------------------------------------------------------------------ reads

    def read(self, offset: int, max_records: int = 1000) -> list[Chunk]:
        """The batches from the one holding ``offset``, as they were appended, as [(epoch, records, producer
        fields)]: whole batches (at least one) while they come to at most about ``max_records``.  A follower
        copies the leader's batches as they are, as Kafka's does, so a truncation to a leader's epoch boundary
        cuts the follower's log where the leader's batches end (a batch regrouped on the way would be cut whole,
        below it), and a producer's batch keeps its producer fields (read from inside it, its sequences go on
        from there)."""
        out: list[Chunk] = []
        i = bisect_right(self.batch_last, offset)
        n = 0
        while i < len(self.batch_last) and (not out or n + self.batch_last[i] - self._base(i) <= max_records):
            base, end = self._base(i), self.batch_last[i]
            start = max(base, offset)
            meta = self.batch_meta[i]
            if meta is not None and start > base and meta.base_sequence >= 0:
                meta = replace(meta, base_sequence=meta.base_sequence + start - base)
            out.append((self.records[base][0], [r[1:] for r in self.records[start:end]], meta))
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
                self.batch_meta.append(None if batch.producer_id < 0 else ProducerBatch(
                    batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.is_transactional,
                    batch.is_control))
        self.epoch_cache.truncate_from_end(len(self.records))
        self._rebuild_producers()
        return size - scan.valid_bytes, scan.dropped_batches
