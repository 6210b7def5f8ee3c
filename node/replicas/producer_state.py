"""Idempotent producers on one partition (sans-IO): Kafka's ProducerStateManager, without transactions.

The leader keeps, per producer id, its epoch and the sequence ranges and
offsets of its last 5 batches (a producer has at most 5 in flight).  A batch
is checked before it is appended:

- a producer epoch below the one known -> INVALID_PRODUCER_EPOCH (47);
- a batch equal (first and last sequence) to one of the last 5 -> a
  duplicate: not appended again, answered with the offsets it got first;
- a new epoch must start at sequence 0; the same epoch must continue at the
  last sequence + 1 (wrapping at 2^31 - 1), else OUT_OF_ORDER_SEQUENCE_NUMBER
  (45); a producer unknown here must start at 0 (else also 45: kafkasim keeps
  no producer snapshots, and the state is rebuilt from the log's batches).

A new leader rebuilds the table from its log's batch headers (:meth:`replay`).
"""
from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass, field

from kafkacommon.batch_scan import scan_headers

INVALID_PRODUCER_EPOCH = 47
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
NO_PRODUCER_ID = -1
MAX_IN_FLIGHT = 5
_INT32_MAX = (1 << 31) - 1
_PRODUCER = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence at byte 43 of a batch


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

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


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

    def check(self, pid: int, epoch: int, first_seq: int, record_count: int) -> Verdict:
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
        if epoch > e.epoch:
            if first_seq != 0:
                return Verdict(OUT_OF_ORDER_SEQUENCE_NUMBER, reason=f"new epoch {epoch} of producer {pid} "
                                                                    f"must start at sequence 0, got {first_seq}")
            return Verdict()
        for b in e.batches:
            if b.first_seq == first_seq and b.last_seq == last:
                return Verdict(duplicate=b)
        expected = (e.last_seq + 1) % (_INT32_MAX + 1)
        if first_seq != expected:
            return Verdict(OUT_OF_ORDER_SEQUENCE_NUMBER, reason=f"producer {pid} epoch {epoch}: sequence "
                                                                f"{first_seq} out of order, expected {expected}")
        return Verdict()

    def record(self, pid: int, epoch: int, first_seq: int, record_count: int, first_offset: int) -> None:
        """After an append (or while replaying the log): the batch becomes the producer's latest."""
        if pid == NO_PRODUCER_ID:
            return
        e = self.producers.get(pid)
        if e is None or epoch != e.epoch:
            e = self.producers[pid] = ProducerEntry(epoch)
        e.batches.append(BatchMeta(first_seq, last_sequence(first_seq, record_count), first_offset,
                                   first_offset + record_count - 1))

    def replay(self, pid: int, epoch: int, first_seq: int, record_count: int, first_offset: int) -> None:
        """A batch read back from the log, oldest first (a new leader rebuilding its table)."""
        e = self.producers.get(pid)
        if pid == NO_PRODUCER_ID or (e is not None and epoch < e.epoch):
            return
        self.record(pid, epoch, first_seq, record_count, first_offset)

    def replay_batches(self, data: bytes | memoryview) -> int | None:
        """Replay every whole batch in ``data`` (a read from the log); returns the offset after the
        last one, or None when there was none."""
        nxt = None
        for pos, h in scan_headers(data).headers:
            pid, epoch, seq = _PRODUCER.unpack_from(data, pos + 43)
            self.replay(pid, epoch, seq, h.record_count, h.base_offset)
            nxt = h.next_offset
        return nxt
