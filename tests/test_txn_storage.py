"""Producers and transactions in a partition's log: the LSO, the aborted-transaction index (.txnindex) and
producer snapshots (.snapshot), across appends, restarts, crashes, truncation and retention."""
from __future__ import annotations

from kafkacommon.control import marker_batch
from kafkacommon.record_batch import encode_batch
from node.storage.log import PartitionLog
from replication.producer_state import (INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, TRANSACTION_COORDINATOR_FENCED,
                                        ProducerStates, decode_snapshot, encode_snapshot)


def txn_batch(log: PartitionLog, pid: int, seq: int, n: int = 2, epoch: int = 0, transactional: bool = True) -> int:
    base = log.log_end_offset
    data = encode_batch(base, 0, [(b"k", b"v%d" % i, 1000) for i in range(n)], producer_id=pid,
                        producer_epoch=epoch, base_sequence=seq, transactional=transactional)
    log.append_batch_as_leader(data, n, 1000, 0, 1000)
    return base


def marker(log: PartitionLog, pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> int:
    base = log.log_end_offset
    log.append_batch_as_leader(marker_batch(base, 0, pid, epoch, commit, coordinator_epoch, 1000), 1, 1000, 0, 1000)
    return base


def test_lso_follows_open_transactions_and_the_hw(tmp_path):
    log = PartitionLog(tmp_path, "t", 0)
    a = txn_batch(log, 1, 0)                  # 0-1, producer 1 opens a transaction
    txn_batch(log, 2, 0, transactional=False)  # 2-3, idempotent
    b = txn_batch(log, 3, 0)                  # 4-5, producer 3 opens one
    assert log.last_stable_offset(6) == a == 0
    m1 = marker(log, 1, commit=True)          # 6
    assert log.last_stable_offset(6) == 0     # decided, but the HW does not cover the marker yet
    assert log.last_stable_offset(7) == b
    m3 = marker(log, 3, commit=False)         # 8
    assert log.last_stable_offset(9) == 9
    aborted = log.aborted_transactions(0, 9)
    assert [(e.producer_id, e.first_offset, e.last_offset) for e in aborted] == [(3, 4, m3)]
    assert log.aborted_transactions(m3 + 1, 20) == []
    assert m1 == 6
    log.close()


def test_client_checks_epochs_and_coordinator_epochs(tmp_path):
    log = PartitionLog(tmp_path, "t", 0)
    txn_batch(log, 1, 0, epoch=2)
    s = log.producers()
    assert s.check(1, 2, 2, 1, transactional=False).error == INVALID_TXN_STATE
    assert s.check(1, 1, 0, 1, transactional=True).error == INVALID_PRODUCER_EPOCH
    assert s.check(1, 2, 2, 1, transactional=True).error == 0
    marker(log, 1, commit=True, epoch=2, coordinator_epoch=5)
    assert s.check_marker(1, 2, 4) == TRANSACTION_COORDINATOR_FENCED
    assert s.check_marker(1, 1, 9) == INVALID_PRODUCER_EPOCH
    assert s.check_marker(1, 3, 5) == 0
    assert s.check(1, 2, 2, 1, transactional=False).error == 0         # the transaction is closed
    log.close()


def test_a_clean_restart_keeps_open_transactions_from_the_snapshot(tmp_path):
    log = PartitionLog(tmp_path, "t", 0)
    log.producers()
    txn_batch(log, 1, 0)
    txn_batch(log, 2, 0)
    marker(log, 2, commit=False)
    assert log.last_stable_offset(5) == 0
    log.close()
    assert (tmp_path / "t-0" / f"{5:020d}.snapshot").exists()
    assert (tmp_path / "t-0" / f"{0:020d}.txnindex").stat().st_size == 34
    again = PartitionLog(tmp_path, "t", 0)
    assert again.producers().open_transactions() == {1: 0}
    assert again.last_stable_offset(5) == 0
    assert [e.producer_id for e in again.aborted_transactions(0, 5)] == [2]
    marker(again, 1, commit=True)
    assert again.last_stable_offset(6) == 6
    again.close()


def test_a_crash_rebuilds_from_the_log_and_writes_a_missing_index_entry(tmp_path):
    log = PartitionLog(tmp_path, "t", 0)
    log.producers()                          # built: appends keep the index
    txn_batch(log, 1, 0)
    marker(log, 1, commit=False)
    txn_batch(log, 4, 0)
    log.flush()
    assert (tmp_path / "t-0" / f"{0:020d}.txnindex").exists()
    # a crash: no close, no snapshot; and the index entry never reached the disk
    (tmp_path / "t-0" / f"{0:020d}.txnindex").unlink()
    again = PartitionLog(tmp_path, "t", 0)
    assert again.producers().open_transactions() == {4: 3}
    assert [(e.producer_id, e.last_offset) for e in again.aborted_transactions(0, 10)] == [(1, 2)]
    assert (tmp_path / "t-0" / f"{0:020d}.txnindex").stat().st_size == 34
    again.close()
    log.close()


def test_truncation_drops_entries_and_reopens_the_transaction(tmp_path):
    log = PartitionLog(tmp_path, "t", 0)
    txn_batch(log, 1, 0)                    # 0-1
    m = marker(log, 1, commit=False)        # 2
    assert log.last_stable_offset(3) == 3
    log.truncate_to(m)
    assert log.aborted_transactions(0, 10) == []
    assert log.producers().open_transactions() == {1: 0}
    assert log.last_stable_offset(2) == 0
    log.close()


def test_rolled_segments_snapshot_and_retention_deletes_their_indexes(tmp_path):
    log = PartitionLog(tmp_path, "t", 0, segment_bytes=300)
    log.producers()
    txn_batch(log, 1, 0)
    marker(log, 1, commit=False)
    for i in range(6):
        txn_batch(log, 2, 2 * i, transactional=False)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 2 and log.txn.snapshots()
    assert (tmp_path / "t-0" / f"{0:020d}.txnindex").exists()
    log.delete_oldest_segments(1)
    assert not (tmp_path / "t-0" / f"{0:020d}.txnindex").exists()
    log.close()


def test_snapshot_format_round_trips():
    s = ProducerStates()
    s.record(7, 3, 10, 5, 100, transactional=True, timestamp=55)
    s.record_marker(8, 1, 4, 200, commit=True, timestamp=66)
    data = encode_snapshot(s.producers)
    assert data[:2] == b"\x00\x01"
    back = decode_snapshot(data)
    assert back[7].epoch == 3 and back[7].txn_first_offset == 100 and back[7].batches[-1].last_seq == 14
    assert back[7].batches[-1].first_offset == 100
    assert back[8].coordinator_epoch == 4 and not back[8].batches
    restored = ProducerStates.from_snapshot(data)
    assert restored.open_transactions() == {7: 100}
