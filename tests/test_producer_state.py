"""Idempotent producers' per-partition state (replication/producer_state.py), sans-IO."""
from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatchBuilder

from replication.producer_state import (INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER, ProducerStates,
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


def test_a_batch_is_checked_by_its_origin() -> None:
    """check_batch, the one entry both the broker and the simulator use: a client's batch for its sequence, a
    coordinator's (a transactional offset commit, no sequence) for its epoch only."""
    s = ProducerStates()
    s.record(4, 3, 0, 2, 0)
    assert s.check_batch(4, 3, 9, 1).error == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert s.check_batch(4, 3, -1, 1, True, from_coordinator=True).error == 0
    assert s.check_batch(4, 2, -1, 1, True, from_coordinator=True).error == INVALID_PRODUCER_EPOCH
    assert s.check_batch(4, 3, 0, 2).duplicate.first_offset == 0
    assert s.check_batch(5, 0, -1, 1, from_coordinator=False).error == OUT_OF_ORDER_SEQUENCE_NUMBER


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
    assert s.append_batches(log) == (6, [])
    assert s.check(9, 0, 2, 3).duplicate.first_offset == 3
    assert s.check(9, 0, 5, 1).error == 0


def test_the_replica_manager_answers_duplicates_and_keeps_client_bytes(tmp_path) -> None:
    from replication.broker_state import PartitionInfo
    from node.events import EventLog
    from node.replicas.replica_manager import ReplicaManager
    from replication.partition_types import ReplicaSettings
    from listener.records import check_client_batch
    rm = ReplicaManager(1, tmp_path / "logs", ReplicaSettings(), EventLog(tmp_path / "events.jsonl", 1),
                        broker_epoch=lambda: 5, endpoint_of=lambda b: None, controller_endpoint=lambda: None,
                        fetch_wait_ms=100, segment_bytes=1 << 20, checkpoint_interval_ms=60_000)
    try:
        rm.become_leader(PartitionInfo("t", 0, 1, 3, (1,), (1,), 0, 1))

        def raw(seq: int, n: int) -> bytes:
            b = DefaultRecordBatchBuilder(2, 1, False, 42, 0, seq, 1 << 20)   # gzip
            for i in range(n):
                b.append(i, 1000 + i, b"k%d" % i, b"v", [("h", b"x")])
            return bytes(b.build())

        def append(data: bytes):
            c = check_client_batch(data, 1 << 20, 9)
            return rm.append_batch(("t", 0), c.data, c.record_count, c.max_timestamp, 1, 1000, lambda code: None,
                                   (c.producer_id, c.producer_epoch, c.base_sequence))[:3]
        first, second = raw(0, 2), raw(2, 3)
        assert append(first) == (0, 0, 1)
        assert append(second) == (0, 2, 4)
        assert append(first) == (0, 0, 1)               # a retried batch: its first offsets, not appended
        assert append(raw(9, 1))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert rm.hosted[("t", 0)].log.log_end_offset == 5
        stored = rm.hosted[("t", 0)].log.read(2, 1 << 20)
        assert stored[16:] == second[16:] and stored[8:12] == second[8:12]
        rm.become_leader(PartitionInfo("t", 0, 1, 4, (1,), (1,), 1, 1))   # a new term: rebuilt from the log
        assert append(second) == (0, 2, 4)
        assert append(raw(5, 1)) == (0, 5, 5)
    finally:
        rm.close()
