"""Producers on one partition (sans-IO): Kafka 2.8's ProducerStateManager, transactions included.

Per producer id: its epoch, the sequence ranges and offsets of its last 5 batches (a producer has at most 5
in flight), the epoch of the last transaction coordinator that wrote a marker for it, and the first offset
of its open transaction.  Across producers: the open transactions (by first offset) and the transactions
decided but whose marker the high watermark does not cover yet.  Every replica keeps one, updated by every
batch it appends (:meth:`ProducerStates.append_batch`), so a new leader has it at once.

A client's batch is checked before it is appended (:meth:`check`):

- a producer epoch below the one known -> INVALID_PRODUCER_EPOCH (47);
- a batch equal (first and last sequence) to one of the last 5 -> a duplicate: not appended again, answered
  with the offsets it got first;
- a new epoch must start at sequence 0; the same epoch must continue at the last sequence + 1 (wrapping at
  2^31 - 1), else OUT_OF_ORDER_SEQUENCE_NUMBER (45); a producer unknown here must start at 0 (also 45);
- a non-transactional batch while the producer has a transaction open -> INVALID_TXN_STATE (48).

Kafka 2.8's broker does not check that a transactional batch's partition was added to the transaction
(the coordinator's AddPartitionsToTxn is the client's business).  The group coordinator's transactional
offset commits are checked for the epoch only (:meth:`check_epoch`); a marker (:meth:`check_marker`) for its
epoch and then its coordinator epoch (an older one: TRANSACTION_COORDINATOR_FENCED, 52).

**The last stable offset** (:meth:`last_stable_offset`) is the high watermark, or the first offset of the
earliest transaction that is open or whose marker the HW does not cover yet, if lower: a read_committed
consumer reads below it.  A decided transaction is a :class:`CompletedTxn`; an aborted one becomes an
:class:`AbortedTxn` for the segment's transaction index, with the LSO it left (Kafka's
``lastStableOffset(completedTxn)``).

**Snapshots** (:func:`encode_snapshot`, :func:`decode_snapshot`) are Kafka's ``.snapshot`` format (version
1: an int16 version, a CRC-32C of what follows, then the entries: producer id, epoch, last sequence, last
offset, offset delta, timestamp, coordinator epoch, current transaction's first offset), each producer's
last batch only, as Kafka keeps.
"""
from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from kafkacommon.control import read_marker
from kafkacommon.record_batch import HEADER_SIZE, CorruptBatchError, crc32c, decode_batch, peek_header

INVALID_PRODUCER_EPOCH = 47
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_TXN_STATE = 48
TRANSACTION_COORDINATOR_FENCED = 52
NO_PRODUCER_ID = -1
MAX_IN_FLIGHT = 5
_INT32_MAX = (1 << 31) - 1
_PRODUCER = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence at byte 43 of a batch
_TRANSACTIONAL, _CONTROL = 0x10, 0x20


@dataclass(frozen=True)
class BatchMeta:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=MAX_IN_FLIGHT))
    coordinator_epoch: int = -1
    txn_first_offset: int | None = None       # the first offset of its open transaction
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


@dataclass(frozen=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int          # the marker's offset
    aborted: bool


class AbortedTxn(NamedTuple):
    """An entry of a segment's transaction index (Kafka's AbortedTxn)."""
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def last_sequence(first_seq: int, record_count: int) -> int:
    """The batch's last sequence: sequences wrap from 2^31 - 1 to 0."""
    return (first_seq + record_count - 1) % (_INT32_MAX + 1)


@dataclass(frozen=True)
class Verdict:
    """What to do with a batch: append it (``error`` 0, ``duplicate`` None), refuse it, or answer a
    duplicate with its first append's offsets."""

    error: int = 0
    duplicate: BatchMeta | None = None
    reason: str = ""


class ProducerStates:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}                       # first offset -> producer id
        self.unreplicated: dict[int, tuple[int, int]] = {}      # first offset -> (producer id, marker offset)

    # ------------------------------------------------------------------ checks (a leader, before appending)

    def check(self, pid: int, epoch: int, first_seq: int, record_count: int, transactional: bool = False) -> Verdict:
        """A client's data batch (origin Client)."""
        if pid == NO_PRODUCER_ID:
            return Verdict()
        last = last_sequence(first_seq, record_count)
        e = self.producers.get(pid)
        if e is None:
            if first_seq != 0:
                return Verdict(OUT_OF_ORDER_SEQUENCE_NUMBER, reason=f"producer {pid} unknown here: its first "
                                                                    f"sequence must be 0, got {first_seq}")
            return Verdict()
        if epoch < e.epoch:
            return Verdict(INVALID_PRODUCER_EPOCH, reason=f"producer {pid} epoch {epoch} is older than {e.epoch}")
        if epoch == e.epoch:
            for b in e.batches:
                if b.first_seq == first_seq and b.last_seq == last:
                    return Verdict(duplicate=b)
        if epoch > e.epoch:
            if first_seq != 0 and e.epoch >= 0:
                return Verdict(OUT_OF_ORDER_SEQUENCE_NUMBER, reason=f"new epoch {epoch} of producer {pid} "
                                                                    f"must start at sequence 0, got {first_seq}")
        else:
            expected = (e.last_seq + 1) % (_INT32_MAX + 1)
            if first_seq != expected:
                return Verdict(OUT_OF_ORDER_SEQUENCE_NUMBER, reason=f"producer {pid} epoch {epoch}: sequence "
                                                                    f"{first_seq} out of order, expected {expected}")
        if e.txn_first_offset is not None and not transactional:
            return Verdict(INVALID_TXN_STATE, reason=f"producer {pid} wrote a non-transactional batch while its "
                                                     f"transaction from offset {e.txn_first_offset} is open")
        return Verdict()

    def check_batch(self, pid: int, epoch: int, first_seq: int, record_count: int, transactional: bool = False,
                    *, from_coordinator: bool = False) -> Verdict:
        """Any data batch before a leader appends it, by its origin (Kafka's AppendOrigin): a client's
        (:meth:`check`: epoch, sequence, duplicates), or a coordinator's (a transactional offset commit, which
        has no sequence: :meth:`check_epoch` only)."""
        if from_coordinator:
            return Verdict(self.check_epoch(pid, epoch))
        return self.check(pid, epoch, first_seq, record_count, transactional)

    def check_epoch(self, pid: int, epoch: int) -> int:
        """A coordinator's data batch (a transactional offset commit): the epoch only."""
        e = self.producers.get(pid)
        return INVALID_PRODUCER_EPOCH if e is not None and epoch < e.epoch else 0

    def check_marker(self, pid: int, epoch: int, coordinator_epoch: int) -> int:
        """A marker from WriteTxnMarkers: its producer epoch, then its coordinator epoch."""
        e = self.producers.get(pid)
        if e is None:
            return 0
        if epoch < e.epoch:
            return INVALID_PRODUCER_EPOCH
        if coordinator_epoch < e.coordinator_epoch:
            return TRANSACTION_COORDINATOR_FENCED
        return 0

    # ------------------------------------------------------------------ appends (every replica)

    def record(self, pid: int, epoch: int, first_seq: int, record_count: int, first_offset: int,
               transactional: bool = False, timestamp: int = -1) -> None:
        """A data batch appended (or read back from the log): it becomes the producer's latest; a transactional
        one opens the producer's transaction if none is open."""
        if pid == NO_PRODUCER_ID:
            return
        e = self.producers.get(pid)
        if e is None:
            e = self.producers[pid] = ProducerEntry(epoch)
        elif epoch != e.epoch:
            e.epoch = epoch
            e.batches.clear()
        if first_seq >= 0:
            e.batches.append(BatchMeta(first_seq, last_sequence(first_seq, record_count), first_offset,
                                       first_offset + record_count - 1))
        e.last_timestamp = timestamp
        if transactional and e.txn_first_offset is None:
            e.txn_first_offset = first_offset
            self.ongoing[first_offset] = pid

    def record_marker(self, pid: int, epoch: int, coordinator_epoch: int, offset: int, commit: bool,
                      timestamp: int = -1) -> tuple[CompletedTxn, AbortedTxn | None] | None:
        """A marker appended: the producer's open transaction (if any) is decided.  Returns the completed
        transaction and, for an abort, its transaction index entry; None for a marker that closed nothing."""
        e = self.producers.get(pid)
        if e is None:
            e = self.producers[pid] = ProducerEntry(epoch)
        done = None
        if e.txn_first_offset is not None:
            txn = CompletedTxn(pid, e.txn_first_offset, offset, not commit)
            nxt = min((first for first, p in self.ongoing.items() if p != pid), default=None)
            aborted = AbortedTxn(pid, txn.first_offset, offset, offset + 1 if nxt is None else nxt) \
                if txn.aborted else None
            self.ongoing.pop(txn.first_offset, None)
            self.unreplicated[txn.first_offset] = (pid, offset)
            done = (txn, aborted)
        if epoch != e.epoch:
            e.epoch = epoch
            e.batches.clear()
        e.txn_first_offset = None
        e.coordinator_epoch = coordinator_epoch
        e.last_timestamp = timestamp
        return done

    def append_batches(self, data: bytes | memoryview) -> tuple[int | None, list[tuple[CompletedTxn, AbortedTxn | None]]]:
        """Every whole batch in ``data`` (appended, or read back from the log: checked already, so only their
        headers are read here), in order; returns the offset after the last one (None: none) and the
        transactions its markers decided."""
        nxt, decided, pos, n = None, [], 0, len(data)
        while pos + HEADER_SIZE <= n:
            try:
                h = peek_header(data, pos)
            except CorruptBatchError:
                break
            if pos + h.size_bytes > n:
                break
            attrs = h.attributes
            if attrs & _CONTROL:
                if h.producer_id != NO_PRODUCER_ID:
                    batch, _ = decode_batch(data, pos)
                    marker = read_marker(batch)
                    if marker is not None:
                        got = self.record_marker(h.producer_id, h.producer_epoch, marker.coordinator_epoch,
                                                 h.base_offset, marker.commit, h.max_timestamp)
                        if got is not None:
                            decided.append(got)
            else:
                self.record(h.producer_id, h.producer_epoch, h.base_sequence, h.record_count, h.base_offset,
                            bool(attrs & _TRANSACTIONAL), h.max_timestamp)
            nxt = h.next_offset
            pos += h.size_bytes
        return nxt, decided

    # ------------------------------------------------------------------ the last stable offset

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of the earliest open transaction, or decided one whose marker is at or above the
        HW (Kafka's firstUnstableOffset, with onHighWatermarkUpdated done here)."""
        if self.unreplicated:
            for first in [f for f, (_, last) in self.unreplicated.items() if last < high_watermark]:
                del self.unreplicated[first]
        firsts = list(self.ongoing) + list(self.unreplicated)
        return min(firsts) if firsts else None

    def last_stable_offset(self, high_watermark: int) -> int:
        first = self.first_unstable_offset(high_watermark)
        return high_watermark if first is None or first >= high_watermark else first

    def open_transactions(self) -> dict[int, int]:
        """{producer id: its open transaction's first offset}."""
        return {pid: first for first, pid in self.ongoing.items()}

    # ------------------------------------------------------------------ snapshots

    def encode_snapshot(self) -> bytes:
        return encode_snapshot(self.producers)

    @classmethod
    def from_snapshot(cls, data: bytes) -> "ProducerStates":
        s = cls()
        s.producers = decode_snapshot(data)
        for pid, e in s.producers.items():
            if e.txn_first_offset is not None:
                s.ongoing[e.txn_first_offset] = pid
        return s


_SNAP_HEAD = struct.Struct(">hI")
_SNAP_ENTRY = struct.Struct(">qhiqiqiq")   # pid, epoch, last seq, last offset, offset delta, timestamp, coord epoch,
SNAPSHOT_VERSION = 1                       # current txn first offset


class SnapshotError(ValueError):
    """A producer snapshot file that is not valid (Kafka's CorruptSnapshotException)."""


def encode_snapshot(producers: dict[int, ProducerEntry]) -> bytes:
    body = [struct.pack(">i", len(producers))]
    for pid in sorted(producers):
        e = producers[pid]
        last = e.batches[-1] if e.batches else None
        body.append(_SNAP_ENTRY.pack(
            pid, e.epoch, last.last_seq if last else -1, last.last_offset if last else -1,
            (last.last_offset - last.first_offset) if last else 0, e.last_timestamp, e.coordinator_epoch,
            -1 if e.txn_first_offset is None else e.txn_first_offset))
    entries = b"".join(body)
    return _SNAP_HEAD.pack(SNAPSHOT_VERSION, crc32c(entries)) + entries


def decode_snapshot(data: bytes) -> dict[int, ProducerEntry]:
    if len(data) < _SNAP_HEAD.size + 4:
        raise SnapshotError(f"a snapshot of {len(data)} bytes is too short")
    version, crc = _SNAP_HEAD.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise SnapshotError(f"unknown snapshot version {version}")
    entries = data[_SNAP_HEAD.size:]
    if crc32c(entries) != crc:
        raise SnapshotError("the snapshot's CRC does not match its entries")
    (count,) = struct.unpack_from(">i", entries, 0)
    if count < 0 or 4 + count * _SNAP_ENTRY.size != len(entries):
        raise SnapshotError(f"a snapshot of {count} entries is {len(entries)} bytes long")
    out: dict[int, ProducerEntry] = {}
    for i in range(count):
        pid, epoch, seq, offset, delta, ts, coord, first = _SNAP_ENTRY.unpack_from(entries, 4 + i * _SNAP_ENTRY.size)
        e = ProducerEntry(epoch, coordinator_epoch=coord, txn_first_offset=None if first < 0 else first,
                          last_timestamp=ts)
        if offset >= 0:
            e.batches.append(BatchMeta((seq - delta) % (_INT32_MAX + 1) if seq >= 0 else -1, seq, offset - delta,
                                       offset))
        out[pid] = e
    return out
