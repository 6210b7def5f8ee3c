"""The transaction coordinator core (transactions/): Kafka 2.8's TransactionCoordinator, request by request."""
from __future__ import annotations

import pytest

from kafkacommon import errors
from kafkacommon.hashing import partition_for
from transactions import records as rec
from transactions import state as st
from transactions.config import TxnConfig
from transactions.messages import InitProducerIdResponse
from transactions.testing import TxnDriver

TP0, TP1 = ("out", 0), ("out", 1)


def init(d: TxnDriver, txn: str = "t", **kw) -> InitProducerIdResponse:
    r = d.response(d.init(txn, **kw))
    assert r is not None
    return r


def begin(d: TxnDriver, txn: str = "t", *parts) -> tuple[int, int]:
    r = init(d, txn)
    assert r.error_code == 0, r
    h = d.add(txn, r.producer_id, r.producer_epoch, *(parts or (TP0, TP1)))
    assert d.response(h).error_code == 0
    return r.producer_id, r.producer_epoch


# ---------------------------------------------------------------- records and the state table

def test_records_round_trip_and_match_kafkas_layout():
    key = rec.encode_key("my-txn")
    assert key == b"\x00\x00\x00\x06my-txn"
    v = rec.TxnValue(1000, 3, 60000, st.BYTE[st.ONGOING], frozenset({("b", 1), ("a", 2), ("a", 0)}), 77, 55)
    data = rec.encode_value(v)
    # version, producer id, epoch, timeout, status, then topics sorted, each with its ids
    assert data[:17] == b"\x00\x00" + (1000).to_bytes(8, "big") + b"\x00\x03" + (60000).to_bytes(4, "big") + b"\x01"
    assert data[17:21] == (2).to_bytes(4, "big")
    assert rec.decode_value(data) == v
    assert rec.decode_key(key) == rec.TxnKey("my-txn")
    empty = rec.TxnValue(1, 0, 100, st.BYTE[st.EMPTY], frozenset(), 5, -1)
    assert rec.encode_value(empty)[17:21] == b"\xff\xff\xff\xff"      # Empty: null partitions
    assert rec.decode_value(rec.encode_value(empty)) == empty
    with pytest.raises(ValueError):
        rec.encode_value(empty._replace(partitions=frozenset({TP0})))
    with pytest.raises(rec.RecordFormatError):
        rec.decode_value(data[:-1])
    with pytest.raises(rec.RecordFormatError):
        rec.decode_key(b"\x00\x01\x00\x01a")


def test_state_table_is_kafkas():
    assert st.is_valid_transition(st.ONGOING, st.PREPARE_COMMIT)
    assert st.is_valid_transition(st.PREPARE_EPOCH_FENCE, st.PREPARE_ABORT)
    assert not st.is_valid_transition(st.EMPTY, st.PREPARE_COMMIT)
    assert not st.is_valid_transition(st.PREPARE_COMMIT, st.ONGOING)
    assert not st.is_valid_transition(st.ONGOING, st.DEAD)
    assert [st.BY_BYTE[i] for i in range(8)] == list(st.STATES)
    meta = st.TxnMetadata("t", 1, 0, 100, st.EMPTY, frozenset(), -1, 0)
    with pytest.raises(st.IllegalTransition):
        st.transition(meta, st.COMPLETE_COMMIT)


def test_placement_is_abs_java_hash_mod_50():
    # values from Java 17: String.hashCode, Utils.abs (MIN_VALUE -> 0), % 50
    assert partition_for("my-txn", 50) == 45                  # hashCode -1061187895
    assert partition_for("eos-app-0_1", 50) == 26              # hashCode 1476397426
    assert partition_for("polygenelubricants", 50) == 0        # hashCode Integer.MIN_VALUE


# ---------------------------------------------------------------- InitProducerId

def test_init_new_id_then_bumps_epoch():
    d = TxnDriver()
    r = init(d)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, 1000, 0)
    assert d.state() == st.EMPTY
    r2 = init(d)
    assert (r2.error_code, r2.producer_id, r2.producer_epoch) == (0, 1000, 1)
    assert len(d.log()) == 2


def test_init_validates_id_and_timeout():
    d = TxnDriver(TxnConfig(max_timeout_ms=1000))
    assert init(d, "", timeout_ms=100).error_code == errors.INVALID_REQUEST
    assert init(d, "t", timeout_ms=1001).error_code == errors.INVALID_TRANSACTION_TIMEOUT
    assert init(d, "t", timeout_ms=0).error_code == errors.INVALID_TRANSACTION_TIMEOUT


def test_loading_and_not_coordinator():
    d = TxnDriver(load=False)
    assert init(d).error_code == errors.NOT_COORDINATOR
    d.apply(d.core.begin_load(3, 0))
    assert init(d).error_code == errors.COORDINATOR_LOAD_IN_PROGRESS
    assert d.response(d.end("t", 1, 0)).error_code == errors.COORDINATOR_LOAD_IN_PROGRESS


def test_init_on_ongoing_fences_aborts_and_answers_concurrent_transactions():
    d = TxnDriver(auto_markers=False)
    pid, epoch = begin(d)
    r = init(d)
    assert r.error_code == errors.CONCURRENT_TRANSACTIONS
    assert d.state() == st.PREPARE_ABORT
    assert d.core.txns["t"].meta.producer_epoch == epoch + 1
    assert d.events_named("txn_fenced")[0]["new_epoch"] == epoch + 1
    # the old producer is fenced now
    assert d.response(d.end("t", pid, epoch, True)).error_code == errors.PRODUCER_FENCED
    # while the abort markers are out: CONCURRENT_TRANSACTIONS
    assert init(d).error_code == errors.CONCURRENT_TRANSACTIONS
    assert [m.commit for m in d.markers] == [False]
    assert d.markers[0].producer_epoch == epoch + 1
    d.write_markers()
    assert d.state() == st.COMPLETE_ABORT
    r = init(d)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 2)


def test_init_with_expected_epoch_kip360():
    d = TxnDriver()
    r = init(d)
    # the producer recovers with its current id and epoch: bumped, last epoch kept for a retry
    r2 = init(d, producer_id=r.producer_id, producer_epoch=r.producer_epoch)
    assert (r2.error_code, r2.producer_epoch) == (0, r.producer_epoch + 1)
    # its retry (the answer was lost) with the old epoch gets the same epoch, no second bump
    r3 = init(d, producer_id=r.producer_id, producer_epoch=r.producer_epoch)
    assert (r3.error_code, r3.producer_epoch) == (0, r2.producer_epoch)
    # a stale epoch that is neither: fenced
    assert init(d, producer_id=r.producer_id, producer_epoch=7).error_code == errors.PRODUCER_FENCED
    assert init(d, producer_id=99, producer_epoch=0).error_code == errors.PRODUCER_FENCED


def test_exhausted_epoch_rotates_producer_id():
    d = TxnDriver()
    r = init(d)
    entry = d.core.txns["t"]
    entry.meta = st.transition(entry.meta, st.EMPTY, producer_epoch=st.MAX_EPOCH - 1)
    r2 = init(d)
    assert r2.error_code == 0 and r2.producer_id != r.producer_id and r2.producer_epoch == 0


# ---------------------------------------------------------------- AddPartitions / AddOffsets

def test_add_partitions_errors():
    d = TxnDriver()
    assert d.response(d.add("t", 1, 0, TP0)).error_code == errors.INVALID_PRODUCER_ID_MAPPING
    r = init(d)
    assert d.response(d.add("t", r.producer_id + 1, 0, TP0)).error_code == errors.INVALID_PRODUCER_ID_MAPPING
    assert d.response(d.add("t", r.producer_id, 5, TP0)).error_code == errors.PRODUCER_FENCED
    h = d.add("t", r.producer_id, 0, TP0, TP1)
    assert d.response(h).results == ((TP0, 0), (TP1, 0))
    meta = d.core.txns["t"].meta
    assert meta.state == st.ONGOING and meta.partitions == {TP0, TP1} and meta.start_ms == 0
    n = len(d.log())
    assert d.response(d.add("t", r.producer_id, 0, TP0)).error_code == 0
    assert len(d.log()) == n          # already in the transaction: answered at once, nothing written


def test_concurrent_transactions_while_a_record_is_written():
    d = TxnDriver(auto_complete=False)
    h = d.init()
    d.complete()
    r = d.response(h)
    h1 = d.add("t", r.producer_id, 0, TP0)
    assert d.response(h1) is None
    assert d.response(d.add("t", r.producer_id, 0, TP1)).error_code == errors.CONCURRENT_TRANSACTIONS
    d.complete()
    assert d.response(h1).error_code == 0


def test_add_offsets_adds_the_groups_offsets_partition():
    d = TxnDriver()
    r = init(d)
    h = d.add_offsets("t", r.producer_id, 0, "group", offsets_partition=7)
    assert d.response(h).error_code == 0
    assert d.core.txns["t"].meta.partitions == {("__consumer_offsets", 7)}


# ---------------------------------------------------------------- EndTxn

def test_commit_prepare_then_markers_then_complete():
    d = TxnDriver(auto_markers=False)
    pid, epoch = begin(d)
    h = d.end("t", pid, epoch, True)
    assert d.response(h).error_code == 0
    assert d.state() == st.PREPARE_COMMIT
    assert len(d.markers) == 1 and d.markers[0].commit and set(d.markers[0].partitions) == {TP0, TP1}
    assert d.markers[0].coordinator_epoch == d.epoch
    # a retry of the commit while markers are out
    assert d.response(d.end("t", pid, epoch, True)).error_code == errors.CONCURRENT_TRANSACTIONS
    d.write_markers()
    assert d.state() == st.COMPLETE_COMMIT
    assert d.core.txns["t"].meta.partitions == frozenset()
    # a retry after completion: NONE; the other result: INVALID_TXN_STATE
    assert d.response(d.end("t", pid, epoch, True)).error_code == 0
    assert d.response(d.end("t", pid, epoch, False)).error_code == errors.INVALID_TXN_STATE


def test_end_errors():
    d = TxnDriver()
    r = init(d)
    assert d.response(d.end("t", r.producer_id, 0, True)).error_code == errors.INVALID_TXN_STATE   # Empty
    assert d.response(d.end("t", r.producer_id + 1, 0, True)).error_code == errors.INVALID_PRODUCER_ID_MAPPING
    assert d.response(d.end("u", 1, 0, True)).error_code == errors.INVALID_PRODUCER_ID_MAPPING
    assert d.response(d.end("", 1, 0, True)).error_code == errors.INVALID_REQUEST
    h = d.add("t", r.producer_id, 0, TP0)
    assert d.response(h).error_code == 0
    assert d.response(d.end("t", r.producer_id, 1, True)).error_code == errors.PRODUCER_FENCED


def test_retriable_marker_errors_retry_after_backoff_fatal_ones_abandon():
    d = TxnDriver(TxnConfig(retry_backoff_ms=100))
    d.marker_errors[TP1] = [errors.NOT_LEADER_OR_FOLLOWER]
    pid, epoch = begin(d)
    assert d.response(d.end("t", pid, epoch, True)).error_code == 0
    assert d.state() == st.PREPARE_COMMIT
    assert d.events_named("txn_markers_failed")[0]["action"] == "retry"
    d.advance(100)
    assert d.state() == st.COMPLETE_COMMIT
    assert [tp for _, tp in d.written] == [TP0, TP1]
    d2 = TxnDriver()
    d2.marker_errors[TP0] = [errors.INVALID_PRODUCER_EPOCH]
    pid, epoch = begin(d2)
    d2.response(d2.end("t", pid, epoch, True))
    assert d2.state() == st.PREPARE_COMMIT               # abandoned, as Kafka leaves it
    assert d2.events_named("txn_markers_failed")[0]["action"] == "abandon"


def test_failed_prepare_keeps_ongoing():
    d = TxnDriver()
    pid, epoch = begin(d)
    d.fail_next = [errors.NOT_ENOUGH_REPLICAS]
    assert d.response(d.end("t", pid, epoch, True)).error_code == errors.COORDINATOR_NOT_AVAILABLE
    assert d.state() == st.ONGOING
    assert d.response(d.end("t", pid, epoch, True)).error_code == 0


def test_failed_fence_keeps_its_bumped_epoch():
    d = TxnDriver()
    pid, epoch = begin(d)
    d.fail_next = [errors.REQUEST_TIMED_OUT]
    assert init(d).error_code == errors.COORDINATOR_NOT_AVAILABLE
    assert d.state() == st.ONGOING
    # the old producer is fenced all the same (hasFailedEpochFence), and the next fence uses the same epoch
    assert d.response(d.end("t", pid, epoch, True)).error_code == errors.PRODUCER_FENCED
    assert init(d).error_code == errors.CONCURRENT_TRANSACTIONS
    assert d.core.txns["t"].meta.producer_epoch == epoch + 1


# ---------------------------------------------------------------- timers

def test_timeout_aborts_with_a_bumped_epoch_at_the_next_check():
    d = TxnDriver(TxnConfig(abort_timed_out_interval_ms=10_000))
    r = init(d, timeout_ms=15_000)
    d.advance(3_000)
    assert d.response(d.add("t", r.producer_id, 0, TP0)).error_code == 0    # started at 3 s: times out past 18 s
    d.advance(15_000)                                                       # t=18 s: not yet (the check at 20 s)
    assert d.state() == st.ONGOING
    d.advance(2_000)
    assert d.state() == st.COMPLETE_ABORT
    assert d.core.txns["t"].meta.producer_epoch == 1
    assert d.events_named("txn_timed_out")[0]["producer_epoch"] == 1
    assert d.response(d.end("t", r.producer_id, 0, True)).error_code == errors.PRODUCER_FENCED


def test_idle_id_expires_with_a_tombstone():
    d = TxnDriver(TxnConfig(transactional_id_expiration_ms=60_000, remove_expired_interval_ms=3600_000))
    init(d)
    d.advance(3600_000)
    assert "t" not in d.core.txns
    assert d.log()[-1] == (rec.encode_key("t"), None)
    assert d.events_named("txn_expired")[0]["transactional_id"] == "t"
    # an expired id starts over: a new producer id
    assert init(d).producer_id != 1000


# ---------------------------------------------------------------- failover

def test_reload_resumes_prepare_commit_with_new_coordinator_epoch():
    d = TxnDriver(auto_markers=False)
    pid, epoch = begin(d)
    assert d.response(d.end("t", pid, epoch, True)).error_code == 0
    assert d.markers                       # the old coordinator dies before writing them
    d2 = d.reloaded(epoch=5)
    assert d2.core.durable_view()["t"].state == st.PREPARE_COMMIT
    assert d2.markers and d2.markers[0].coordinator_epoch == 5 and d2.markers[0].commit
    assert d2.events_named("txn_partition_loaded")[0]["resumed"] == 1
    d2.write_markers()
    assert d2.state() == st.COMPLETE_COMMIT
    assert d2.response(d2.end("t", pid, epoch, True)).error_code == 0


def test_marker_answers_for_an_older_coordinator_epoch_are_ignored():
    d = TxnDriver(auto_markers=False)
    pid, epoch = begin(d)
    d.response(d.end("t", pid, epoch, True))
    m = d.markers.pop()
    d.apply(d.core.on_markers_written("t", m.coordinator_epoch - 1, [(tp, 0) for tp in m.partitions], d.now))
    assert d.state() == st.PREPARE_COMMIT


def test_unload_answers_parked_requests_not_coordinator():
    d = TxnDriver(auto_complete=False)
    h = d.init()
    d.apply(d.core.unload(d.now))
    d.complete()
    assert d.response(h).error_code == errors.NOT_COORDINATOR


def test_planted_marker_before_prepare_sends_markers_before_the_record_is_done():
    d = TxnDriver(TxnConfig(planted_marker_before_prepare=True), auto_complete=False, auto_markers=False)
    h = d.init()
    d.complete()
    r = d.response(h)
    h = d.add("t", r.producer_id, 0, TP0)
    d.complete()
    d.end("t", r.producer_id, 0, True)
    assert d.pending and d.markers and d.markers[0].commit     # the prepare record is not done, the marker is out
    d.write_markers()                  # written early: the outcome is not waited for
    d.complete()                       # the prepare record done: the markers again, then the completion
    d.write_markers()
    d.complete_all()
    assert d.core.txns["t"].meta.state == "CompleteCommit"
