"""Kafka 2.8's transaction coordinator for one __transaction_state partition, as a sans-IO core.

The shell owns the network, the log and the clock.  It hands the core requests (with an opaque
``handle``), append completions, marker outcomes and ticks, each with ``now_ms``, and gets back an
:class:`Output`: responses to send (possibly for earlier handles: an answer waits for its record), records
to append to the partition, transaction markers to write (:class:`~transactions.messages.MarkerCmd`) and
events to log.  Each API has its own method (``init_producer_id``, ``add_partitions``, ``add_offsets``,
``end_txn``), as Kafka's TransactionCoordinator has.

**Durable state** is what the records define: each transactional id's last stored
:class:`~transactions.state.TxnMetadata`.  It changes only in :meth:`replay`, which the write path calls
once an append is done and the failover load calls for every record of the log.  **Transient state** is
Kafka's too: a transition being written (``pending``, Kafka's pendingState: another request meanwhile gets
CONCURRENT_TRANSACTIONS), the last producer id and epoch (the version-0 value does not store them, so a
reloaded coordinator has none, as Kafka's), a fence's bumped epoch (Kafka bumps it in memory before the
write and keeps it when the write fails: ``hasFailedEpochFence``), the partitions whose markers are not yet
written, and a transactional id just created by InitProducerId whose first record is not written yet.

**EndTxn** (and a fence, and a timeout) writes PrepareCommit or PrepareAbort; once that record is done the
client is answered, the markers go to every partition of the transaction, and once all are written the
CompleteCommit or CompleteAbort record follows.  A load resumes what a failed-over coordinator left in a
Prepare state: it sends the markers again and writes the completion.  Markers carry the coordinator epoch,
the partition's leader epoch this core was loaded for.

**Timers** (keyed, :mod:`kafkacommon.timers`): ``("timeout", id)`` aborts an Ongoing transaction older than
its timeout, bumping the epoch so the producer is fenced; ``("expire", id)`` writes a tombstone for an id
idle for ``transactional.id.expiration.ms``.  Kafka looks for both on periodic tasks (every 10 s and every
hour); here each id's timer fires at the first tick of such a period (counted from the load) at or after
its deadline, so the moment matches Kafka's to within its own period.  ``("markers", id)`` and
``("complete", id)`` retry after a retriable failure.

Events (each an ``Event``: its name, and ``partition`` plus these fields)::

    txn_partition_loading    (none)
    txn_partition_loaded     transactions, resumed (Prepare states whose markers are sent again)
    txn_partition_unloaded   transactions, orphaned_appends
    txn_state_changed        transactional_id, from, to, producer_id, producer_epoch, partitions, reason
    txn_markers_sent         transactional_id, producer_id, producer_epoch, coordinator_epoch, commit, partitions
    txn_markers_failed       transactional_id, partition, error, action ("retry" | "abandon" | "skip")
    txn_timed_out            transactional_id, producer_id, producer_epoch (the fenced epoch), age_ms
    txn_fenced               transactional_id, producer_id, old_epoch, new_epoch (InitProducerId on an Ongoing one)
    txn_expired              transactional_id, producer_id
    txn_append_failed        transactional_id, state, error
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kafkacommon import errors
from kafkacommon.event import Event
from kafkacommon.timers import Timers
from transactions import records as rec
from transactions import state as st
from transactions.config import TxnConfig
from transactions.entries import OFFSETS_TOPIC, AppendCmd, Output, TxnEntry, map_append_error
from transactions.markers import MarkersAndTimers
from transactions.messages import (
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, DescribedTxn,
    DescribeTransactionsRequest, DescribeTransactionsResponse, EndTxnRequest, InitProducerIdRequest,
    InitProducerIdResponse, MarkerCmd, TxnErrorResponse,
)

__all__ = ["AppendCmd", "Output", "TxnCoordinator", "TxnEntry"]

@dataclass(eq=False)
class _Write:
    entry: TxnEntry
    metadata: st.TxnMetadata | None          # None: a tombstone
    on_done: Callable[[Output, int], None]
    orphan_handle: object = None
    orphan_response: object = None
    reason: str = "written"


class TxnCoordinator(MarkersAndTimers):
    """The transaction coordinator of one __transaction_state partition (see the module docstring)."""

    def __init__(self, partition: int, config: TxnConfig, new_producer_id: Callable[[], int]) -> None:
        self.partition = partition
        self.config = config
        self.new_producer_id = new_producer_id
        self.status = "unloaded"
        self.coordinator_epoch = -1
        self.txns: dict[str, TxnEntry] = {}
        self.timers = Timers()
        self._phase_ms = 0
        self._now = 0                     # the time of the call being handled
        self._next_append_id = 1
        self._writes: dict[int, _Write] = {}
        self._orphans: dict[int, _Write] = {}

    # ------------------------------------------------------------------ helpers

    def _event(self, out: Output, name: str, **fields: object) -> None:
        out.events.append(Event(name, {"partition": self.partition, **fields}))

    def _status_error(self) -> int | None:
        if self.status == "loading":
            return errors.COORDINATOR_LOAD_IN_PROGRESS
        if self.status != "active":
            return errors.NOT_COORDINATOR
        return None

    def _write(self, out: Output, entry: TxnEntry, metadata: st.TxnMetadata | None, timeout_ms: int,
               on_done: Callable[[Output, int], None], orphan: tuple[object, object] = (None, None),
               reason: str = "written") -> None:
        """Emit ``metadata`` (None: a tombstone) for ``entry`` as one acks=-1 append; ``on_done(out, code)`` once
        it is replayed (code 0) or failed.  ``orphan``: (handle, response) answered if the partition is
        unloaded first."""
        append_id = self._next_append_id
        self._next_append_id += 1
        value = None if metadata is None else rec.encode_value(metadata.to_value(), st.BYTE[st.EMPTY])
        out.appends.append(AppendCmd(append_id, [(rec.encode_key(entry.transactional_id), value)], -1,
                                     max(timeout_ms, 1)))
        self._writes[append_id] = _Write(entry, metadata, on_done, *orphan, reason=reason)

    # ------------------------------------------------------------------ InitProducerId

    def init_producer_id(self, handle: object, req: InitProducerIdRequest, now_ms: int) -> Output:
        out = Output()
        self._now = now_ms
        txn_id = req.transactional_id
        if not txn_id:
            out.respond(handle, req.error_response(errors.INVALID_REQUEST))
            return out
        if not 0 < req.transaction_timeout_ms <= self.config.max_timeout_ms:
            out.respond(handle, req.error_response(errors.INVALID_TRANSACTION_TIMEOUT))
            return out
        code = self._status_error()
        if code is not None:
            out.respond(handle, req.error_response(code))
            return out
        entry = self.txns.get(txn_id)
        if entry is None:
            entry = self.txns[txn_id] = TxnEntry(txn_id, None, created_producer_id=self.new_producer_id())
        cur = entry.current(now_ms)
        expected = None if req.producer_id < 0 else (req.producer_id, req.producer_epoch)
        if entry.pending is not None:
            out.respond(handle, req.error_response(errors.CONCURRENT_TRANSACTIONS))
            return out
        if expected is not None and not (cur.producer_epoch == st.NO_PRODUCER_EPOCH or expected[0] == cur.producer_id
                                         or (expected[0] == entry.last_producer_id
                                             and st.is_epoch_exhausted(expected[1]))):
            out.respond(handle, req.error_response(errors.PRODUCER_FENCED))
            return out
        if cur.state in (st.PREPARE_COMMIT, st.PREPARE_ABORT):
            out.respond(handle, req.error_response(errors.CONCURRENT_TRANSACTIONS))
            return out
        if cur.state == st.ONGOING:
            # fence the producer: abort with a bumped epoch (never returned), answer CONCURRENT_TRANSACTIONS so the
            # client retries and gets an epoch bumped once more
            self._fence_and_abort(out, entry, now_ms, handle, req, reason="init_producer_id")
            return out
        if cur.state not in (st.EMPTY, st.COMPLETE_COMMIT, st.COMPLETE_ABORT):
            raise st.IllegalTransition(f"transactional id {txn_id!r} found in state {cur.state}")
        epoch = entry.epoch()
        if st.is_epoch_exhausted(epoch) and (expected is None or expected[1] == epoch):
            pid, new_epoch, last_epoch = self.new_producer_id(), 0, epoch if expected is not None else -1
        elif expected is None:
            pid, new_epoch, last_epoch = cur.producer_id, epoch + 1, st.NO_PRODUCER_EPOCH
        elif epoch == st.NO_PRODUCER_EPOCH or expected[1] == epoch:
            pid, new_epoch, last_epoch = cur.producer_id, epoch + 1, epoch
        elif expected[1] == entry.last_producer_epoch:
            pid, new_epoch, last_epoch = cur.producer_id, epoch, entry.last_producer_epoch   # a retry: no bump
        else:
            out.respond(handle, req.error_response(errors.PRODUCER_FENCED))
            return out
        new = st.transition(cur, st.EMPTY, producer_id=pid, producer_epoch=new_epoch,
                            timeout_ms=req.transaction_timeout_ms, partitions=frozenset(), start_ms=-1,
                            last_update_ms=now_ms)
        entry.pending = st.EMPTY
        last_pid = cur.producer_id

        def done(o: Output, code: int) -> None:
            if code == errors.NONE:
                entry.last_producer_id, entry.last_producer_epoch = last_pid, last_epoch
                o.respond(handle, InitProducerIdResponse(errors.NONE, pid, new_epoch))
            else:
                o.respond(handle, req.error_response(code))

        self._write(out, entry, new, new.timeout_ms, done, (handle, req.error_response(errors.NOT_COORDINATOR)),
                    reason="init_producer_id")
        return out

    # ------------------------------------------------------------------ AddPartitionsToTxn / AddOffsetsToTxn

    def add_partitions(self, handle: object, req: AddPartitionsToTxnRequest, now_ms: int) -> Output:
        out = Output()
        self._now = now_ms
        self._add(out, handle, req.transactional_id, req.producer_id, req.producer_epoch, frozenset(req.partitions),
                  now_ms, lambda code: AddPartitionsToTxnResponse(tuple((tp, code) for tp in req.partitions)))
        return out

    def add_offsets(self, handle: object, req: AddOffsetsToTxnRequest, now_ms: int) -> Output:
        out = Output()
        self._now = now_ms
        self._add(out, handle, req.transactional_id, req.producer_id, req.producer_epoch,
                  frozenset({(OFFSETS_TOPIC, req.offsets_partition)}), now_ms, TxnErrorResponse)
        return out

    def _add(self, out: Output, handle: object, txn_id: str, pid: int, epoch: int, partitions: frozenset,
             now_ms: int, answer: Callable[[int], object]) -> None:
        """handleAddPartitionsToTransaction."""
        if not txn_id:
            out.respond(handle, answer(errors.INVALID_REQUEST))
            return
        code = self._status_error()
        entry = self.txns.get(txn_id)
        if code is None:
            if entry is None or entry.meta is None or entry.meta.producer_id != pid:
                code = errors.INVALID_PRODUCER_ID_MAPPING
            elif entry.epoch() != epoch:
                code = errors.PRODUCER_FENCED
            elif entry.pending is not None or entry.meta.state in (st.PREPARE_COMMIT, st.PREPARE_ABORT):
                code = errors.CONCURRENT_TRANSACTIONS
            elif entry.meta.state == st.ONGOING and partitions <= entry.meta.partitions:
                code = errors.NONE
        if code is not None:
            out.respond(handle, answer(code))
            return
        cur = entry.meta
        start = now_ms if cur.state in (st.EMPTY, st.COMPLETE_ABORT, st.COMPLETE_COMMIT) else cur.start_ms
        new = st.transition(cur, st.ONGOING, partitions=cur.partitions | partitions, start_ms=start,
                            last_update_ms=now_ms)
        entry.pending = st.ONGOING
        self._write(out, entry, new, new.timeout_ms, lambda o, c: o.respond(handle, answer(c)),
                    (handle, answer(errors.NOT_COORDINATOR)), reason="add_partitions")

    # ------------------------------------------------------------------ EndTxn

    def end_txn(self, handle: object, req: EndTxnRequest, now_ms: int) -> Output:
        out = Output()
        self._now = now_ms
        self._end(out, handle, req.transactional_id, req.producer_id, req.producer_epoch, req.committed, now_ms,
                  from_client=True, answer=TxnErrorResponse)
        return out

    def _end(self, out: Output, handle: object, txn_id: str, pid: int, epoch: int, commit: bool, now_ms: int,
             from_client: bool, answer: Callable[[int], object], fence_epoch: int | None = None,
             reason: str = "end_txn") -> None:
        """endTransaction: the Prepare record, then (once it is done) the answer and the markers."""
        if not txn_id:
            out.respond(handle, answer(errors.INVALID_REQUEST))
            return
        code = self._status_error()
        entry = self.txns.get(txn_id)
        cur = entry.meta if entry is not None else None
        if code is None:
            current_epoch = entry.epoch() if entry is not None else -1
            if cur is None or cur.producer_id != pid:
                code = errors.INVALID_PRODUCER_ID_MAPPING
            elif (from_client and epoch != current_epoch) or epoch < current_epoch:
                code = errors.PRODUCER_FENCED
            elif entry.pending is not None:
                code = errors.CONCURRENT_TRANSACTIONS
            elif cur.state == st.ONGOING:
                code = None
            elif cur.state == st.COMPLETE_COMMIT:
                code = errors.NONE if commit else errors.INVALID_TXN_STATE
            elif cur.state == st.COMPLETE_ABORT:
                code = errors.INVALID_TXN_STATE if commit else errors.NONE
            elif cur.state == st.PREPARE_COMMIT:
                code = errors.CONCURRENT_TRANSACTIONS if commit else errors.INVALID_TXN_STATE
            elif cur.state == st.PREPARE_ABORT:
                code = errors.INVALID_TXN_STATE if commit else errors.CONCURRENT_TRANSACTIONS
            elif cur.state == st.EMPTY:
                code = errors.INVALID_TXN_STATE
            else:
                raise st.IllegalTransition(f"transactional id {txn_id!r} found in state {cur.state}")
        if code is not None:
            out.respond(handle, answer(code))
            return
        target = st.PREPARE_COMMIT if commit else st.PREPARE_ABORT
        new_epoch = cur.producer_epoch if fence_epoch is None else fence_epoch
        new = st.transition(cur, target, producer_epoch=new_epoch, last_update_ms=now_ms)
        entry.pending = target
        if fence_epoch is not None:
            entry.fence_epoch = fence_epoch
            entry.last_producer_epoch = st.NO_PRODUCER_EPOCH

        def done(o: Output, code: int) -> None:
            if code != errors.NONE:
                o.respond(handle, answer(code))     # a failed fence keeps its bumped epoch (hasFailedEpochFence)
                return
            entry.fence_epoch = None
            o.respond(handle, answer(errors.NONE))
            self._send_markers(o, entry, self._now)

        self._write(out, entry, new, new.timeout_ms, done, (handle, answer(errors.NOT_COORDINATOR)), reason=reason)
        if self.config.planted_marker_before_prepare and new.partitions:
            # the planted bug: the markers also go out as the prepare record is appended, before it is replicated
            # (their outcomes are not waited for: the ones sent once it is done complete the transaction)
            out.markers.append(MarkerCmd(txn_id, new.producer_id, new.producer_epoch, self.coordinator_epoch,
                                         commit, tuple(sorted(new.partitions))))

    def _fence_and_abort(self, out: Output, entry: TxnEntry, now_ms: int, handle: object,
                         req: InitProducerIdRequest | None, reason: str) -> None:
        """prepareFenceProducerEpoch + endTransaction(ABORT): the Ongoing transaction is aborted with the epoch
        bumped (once: after a failed fence, the same bumped epoch)."""
        cur = entry.meta
        bumped = entry.fence_epoch if entry.fence_epoch is not None else cur.producer_epoch + 1
        if bumped > st.MAX_EPOCH:
            raise st.IllegalTransition(f"transactional id {entry.transactional_id!r}: cannot fence epoch "
                                       f"{cur.producer_epoch}")
        if req is not None:
            self._event(out, "txn_fenced", transactional_id=entry.transactional_id, producer_id=cur.producer_id,
                        old_epoch=cur.producer_epoch, new_epoch=bumped)

            def answer(code: int) -> object:
                return req.error_response(code or errors.CONCURRENT_TRANSACTIONS)
        else:
            def answer(code: int) -> object:
                return TxnErrorResponse(code)
        self._end(out, handle, entry.transactional_id, cur.producer_id, bumped, False, now_ms, from_client=False,
                  answer=answer, fence_epoch=bumped, reason=reason)

    # ------------------------------------------------------------------ appends and replay

    def on_append_done(self, append_id: int, error_code: int, now_ms: int) -> Output:
        """The replication layer's answer for an append (0 = the HW covers its records)."""
        out = Output()
        self._now = now_ms
        orphan = self._orphans.pop(append_id, None)
        if orphan is not None:
            if orphan.orphan_handle is not None:
                out.respond(orphan.orphan_handle, orphan.orphan_response)
            return out
        w = self._writes.pop(append_id, None)
        if w is None:
            return out
        entry = w.entry
        if self.txns.get(entry.transactional_id) is not entry:
            return out
        entry.pending = None
        if error_code == errors.NONE:
            self._apply(out, entry.transactional_id, w.metadata, live=True, reason=w.reason)
            w.on_done(out, errors.NONE)
        else:
            self._event(out, "txn_append_failed", transactional_id=entry.transactional_id,
                        state=w.metadata.state if w.metadata is not None else st.DEAD, error=error_code)
            if entry.meta is not None:
                self._arm(entry)        # the periodic tasks look at it again on their next tick
            w.on_done(out, map_append_error(error_code))
        return out

    def replay(self, key: bytes, value: bytes | None, offset: int | None = None) -> None:
        """Apply one __transaction_state record to the durable state (the last record per key wins).  Used for
        every record of the log during a load.  Raises RecordFormatError for bytes that are not a record."""
        k = rec.decode_key(key)
        v = rec.decode_value(value, st.BYTE[st.EMPTY])
        meta = None if v is None else st.TxnMetadata.from_value(k.transactional_id, v)
        self._apply(None, k.transactional_id, meta, live=False)

    def _apply(self, out: Output | None, txn_id: str, meta: st.TxnMetadata | None, live: bool,
               reason: str = "written") -> None:
        entry = self.txns.get(txn_id)
        if meta is None:
            if entry is not None:
                del self.txns[txn_id]
                for kind in ("timeout", "expire", "markers", "complete"):
                    self.timers.cancel((kind, txn_id))
                if out is not None:
                    self._event(out, "txn_expired", transactional_id=txn_id,
                                producer_id=entry.meta.producer_id if entry.meta else -1)
            return
        if entry is None:
            entry = self.txns[txn_id] = TxnEntry(txn_id, None)
        old = entry.meta.state if entry.meta is not None else None
        entry.meta = meta
        if live and out is not None:
            if old != meta.state:
                self._event(out, "txn_state_changed", transactional_id=txn_id, **{"from": old, "to": meta.state},
                            producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
                            partitions=sorted(map(list, meta.partitions)), reason=reason)
            self._arm(entry)

    def next_deadline_ms(self) -> int | None:
        return self.timers.next_deadline_ms() if self.status == "active" else None

    def on_tick(self, now_ms: int) -> Output:
        out = Output()
        if self.status != "active":
            return out
        self._now = now_ms
        for timer in self.timers.due(now_ms):
            self.timers.fire(timer, out)
        return out

    # ------------------------------------------------------------------ load / unload

    def begin_load(self, coordinator_epoch: int, now_ms: int) -> Output:
        out = Output()
        if self.status != "unloaded":
            self._unload(out)
        self._reset()
        self.status = "loading"
        self.coordinator_epoch = coordinator_epoch
        self._event(out, "txn_partition_loading", coordinator_epoch=coordinator_epoch)
        return out

    def finish_load(self, now_ms: int) -> Output:
        """Every record replayed: own the partition, arm the timers, and finish what a Prepare state left."""
        out = Output()
        self.status = "active"
        self._phase_ms = self._now = now_ms
        resumed = 0
        for entry in list(self.txns.values()):
            m = entry.meta
            self._event(out, "txn_loaded", transactional_id=entry.transactional_id, state=m.state,
                        producer_id=m.producer_id, producer_epoch=m.producer_epoch,
                        partitions=sorted(map(list, m.partitions)))
            self._arm(entry)
            if m.state in (st.PREPARE_COMMIT, st.PREPARE_ABORT):
                resumed += 1
                self._send_markers(out, entry, now_ms)
        self._event(out, "txn_partition_loaded", transactions=len(self.txns), resumed=resumed,
                    coordinator_epoch=self.coordinator_epoch)
        return out

    def unload(self, now_ms: int) -> Output:
        out = Output()
        if self.status != "unloaded":
            self._unload(out)
        return out

    def _unload(self, out: Output) -> None:
        count = len(self.txns)
        for append_id, w in self._writes.items():
            self._orphans[append_id] = w
        orphaned = len(self._writes)
        self._reset()
        self.status = "unloaded"
        self._event(out, "txn_partition_unloaded", transactions=count, orphaned_appends=orphaned)

    def _reset(self) -> None:
        self.txns = {}
        self.timers.clear()
        self._writes = {}

    # ------------------------------------------------------------------ views

    def describe(self, handle: object, req: DescribeTransactionsRequest, now_ms: int) -> Output:
        out = Output()
        code = self._status_error()
        found = []
        for txn_id in req.transactional_ids:
            entry = self.txns.get(txn_id)
            if code is not None:
                found.append(DescribedTxn(txn_id, code))
            elif entry is None or entry.meta is None:
                found.append(DescribedTxn(txn_id, errors.NONE))      # state "": not known here
            else:
                m = entry.meta
                found.append(DescribedTxn(txn_id, errors.NONE, m.state, m.producer_id, m.producer_epoch,
                                          m.timeout_ms, m.start_ms, tuple(sorted(m.partitions))))
        out.respond(handle, DescribeTransactionsResponse(tuple(found)))
        return out

    def durable_view(self) -> dict[str, st.TxnMetadata]:
        """Every transactional id's stored metadata, by id: what the records define."""
        return {t: e.meta for t, e in sorted(self.txns.items()) if e.meta is not None}
