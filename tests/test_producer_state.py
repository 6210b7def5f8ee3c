"""Idempotent producers' per-partition state (node/producer_state.py), sans-IO."""
from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatchBuilder

from node.producer_state import (INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER, ProducerStates,
                                 last_sequence)


def test_in_order_batches_are_appended_and_duplicates_get_their_first_offsets() -> None:
    s = ProducerStates()
    offset = 0
    for seq in range(0, 30, 3):
        assert s.check(7, 0, seq, 3).error == 0 and s.check(7, 0, seq, 3).duplicate is None
        s.record(7, 0, seq, 3, offset)
        offset += 3
    dup = s.check(7, 0, 27, 3).duplicate                # the last batch again
    assert (dup.first_offset, dup.last_offset) == (27, 29)
    dup = s.check(7, 0, 15, 3).duplicate                # 5th from last: still remembered
    assert dup.first_offset == 15
    assert s.check(7, 0, 12, 3).error == OUT_OF_ORDER_SEQUENCE_NUMBER   # 6th from last: forgotten
    assert s.check(7, 0, 31, 1).error == OUT_OF_ORDER_SEQUENCE_NUMBER   # a gap
    assert s.check(7, 0, 30, 1).error == 0


def test_epochs_and_unknown_producers() -> None:
    s = ProducerStates()
    assert s.check(1, 0, 5, 1).error == OUT_OF_ORDER_SEQUENCE_NUMBER     # unknown: must start at 0
    s.record(1, 2, 0, 4, 0)
    assert s.check(1, 1, 4, 1).error == INVALID_PRODUCER_EPOCH
    assert s.check(1, 3, 4, 1).error == OUT_OF_ORDER_SEQUENCE_NUMBER     # a new epoch starts at 0
    assert s.check(1, 3, 0, 1).error == 0
    assert s.check(-1, -1, -1, 9).error == 0                             # not idempotent: no check


def test_sequences_wrap() -> None:
    s = ProducerStates()
    top = 2**31 - 1
    assert last_sequence(top - 1, 3) == 0      # top - 1, top, 0
    s.record(3, 0, 0, 1, 0)
    s.producers[3].batches[-1] = s.producers[3].batches[-1].__class__(top - 2, top - 1, 0, 1)
    assert s.check(3, 0, top, 2).error == 0
    s.record(3, 0, top, 2, 2)
    assert s.check(3, 0, 1, 1).error == 0


def test_a_new_leader_rebuilds_the_table_from_batches() -> None:
    def batch(pid: int, epoch: int, seq: int, n: int, base: int) -> bytes:
        b = DefaultRecordBatchBuilder(2, 0, False, pid, epoch, seq, 1 << 20)
        for i in range(n):
            b.append(i, 1000, b"k", b"v", [])
        raw = bytearray(b.build())
        raw[0:8] = base.to_bytes(8, "big")
        return bytes(raw)
    log = batch(9, 0, 0, 2, 0) + batch(-1, -1, -1, 1, 2) + batch(9, 0, 2, 3, 3)
    s = ProducerStates()
    assert s.replay_batches(log) == 6
    assert s.check(9, 0, 2, 3).duplicate.first_offset == 3
    assert s.check(9, 0, 5, 1).error == 0
