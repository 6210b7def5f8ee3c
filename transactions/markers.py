"""The transaction coordinator's markers, completion records and timers (a part of
:class:`transactions.core.TxnCoordinator`, kept apart for size), sans-IO.

After a Prepare record is done the markers go to every partition of the transaction; each partition's
outcome comes back through :meth:`MarkersAndTimers.on_markers_written` (Kafka's
TransactionMarkerRequestCompletionHandler): written, retried after ``retry_backoff_ms``, skipped (a deleted
partition, an old message format) or abandoned (a newer producer epoch or coordinator wrote there: Kafka
leaves the transaction pending).  Once every partition has its marker the Complete record follows, retried
while the partition answers COORDINATOR_NOT_AVAILABLE.  The timers that follow each id's stored state (its
transaction's timeout, its idle expiry) are armed here too.

The mixin expects the core's attributes: ``txns``, ``timers``, ``config``, ``coordinator_epoch``, ``_now``,
``_phase_ms``, and its ``_write``, ``_event`` and ``_fence_and_abort``.
"""
from __future__ import annotations

from kafkacommon import errors
from transactions import state as st
from transactions.entries import (
    ABANDON_MARKER_ERRORS, PARTITION_GONE, RETRIABLE_MARKER_ERRORS, SKIP_MARKER_ERRORS, Output, TxnEntry,
)
from transactions.messages import MarkerCmd


class MarkersAndTimers:
    # ------------------------------------------------------------------ markers and completion

    def _send_markers(self, out: Output, entry: TxnEntry, now_ms: int) -> None:
        """prepareComplete, then the markers to every partition of the transaction (none: complete at once)."""
        meta = entry.meta
        commit = meta.state == st.PREPARE_COMMIT
        entry.pending = st.COMPLETE_COMMIT if commit else st.COMPLETE_ABORT
        entry.complete = st.transition(meta, entry.pending, partitions=frozenset(), last_update_ms=now_ms)
        entry.markers_left = set(meta.partitions)
        if entry.markers_left:
            self._emit_markers(out, entry, tuple(sorted(entry.markers_left)))
        else:
            self._write_completion(out, entry)

    def _emit_markers(self, out: Output, entry: TxnEntry, partitions: tuple) -> None:
        meta = entry.meta
        commit = entry.pending == st.COMPLETE_COMMIT
        out.markers.append(MarkerCmd(entry.transactional_id, meta.producer_id, meta.producer_epoch,
                                     self.coordinator_epoch, commit, partitions))
        self._event(out, "txn_markers_sent", transactional_id=entry.transactional_id, producer_id=meta.producer_id,
                    producer_epoch=meta.producer_epoch, coordinator_epoch=self.coordinator_epoch, commit=commit,
                    partitions=[list(tp) for tp in partitions])

    def on_markers_written(self, transactional_id: str, coordinator_epoch: int, results: list[tuple[tuple, int]],
                           now_ms: int) -> Output:
        """The outcome of a MarkerCmd's partitions (TransactionMarkerRequestCompletionHandler)."""
        out = Output()
        self._now = now_ms
        entry = self.txns.get(transactional_id)
        if (self.status != "active" or coordinator_epoch != self.coordinator_epoch or entry is None
                or entry.pending not in (st.COMPLETE_COMMIT, st.COMPLETE_ABORT)):
            return out
        retry: list[tuple] = []
        for tp, code in results:
            tp = tuple(tp)
            if code == errors.NONE:
                entry.markers_left.discard(tp)
                continue
            if code in RETRIABLE_MARKER_ERRORS:
                action = "retry"
                retry.append(tp)
            elif code in SKIP_MARKER_ERRORS or code == PARTITION_GONE:
                action = "skip"
                entry.markers_left.discard(tp)
            elif code in ABANDON_MARKER_ERRORS:   # a newer producer epoch or coordinator wrote there: Kafka stops
                action = "abandon"
            else:                                 # Kafka's IllegalStateException: stop as well
                action = "unexpected"
            self._event(out, "txn_markers_failed", transactional_id=transactional_id, partition=list(tp), error=code,
                        action=action)
            if action in ("abandon", "unexpected"):
                entry.markers_left = set()
                entry.complete = None
                return out
        if retry:
            self.timers.schedule(("markers", transactional_id), now_ms + self.config.retry_backoff_ms,
                                 lambda o, e=entry: self._retry_markers(o, e))
        elif not entry.markers_left and entry.complete is not None:
            self._write_completion(out, entry)
        return out

    def _retry_markers(self, out: Output, entry: TxnEntry) -> None:
        if self.txns.get(entry.transactional_id) is entry and entry.markers_left and entry.complete is not None:
            self._emit_markers(out, entry, tuple(sorted(entry.markers_left)))

    def _write_completion(self, out: Output, entry: TxnEntry) -> None:
        new = entry.complete
        entry.complete = None

        def done(o: Output, code: int) -> None:
            if code == errors.COORDINATOR_NOT_AVAILABLE and self.txns.get(entry.transactional_id) is entry:
                entry.pending, entry.complete = new.state, new      # retried (Kafka's txnLogAppendRetryQueue)
                self.timers.schedule(("complete", entry.transactional_id), self._now + self.config.retry_backoff_ms,
                                     lambda oo: self._write_completion(oo, entry) if entry.complete is new else None)

        self._write(out, entry, new, new.timeout_ms, done, reason="markers_written")

    def _tick_after(self, deadline_ms: int, interval_ms: int) -> int:
        """The first tick of a task run every ``interval_ms`` since the load at or after ``deadline_ms``, and
        after now (a task that found nothing to do runs again on its next tick)."""
        at = max(deadline_ms, self._now + 1)
        periods = max(0, -(-(at - self._phase_ms) // interval_ms))
        return self._phase_ms + periods * interval_ms

    def _arm(self, entry: TxnEntry) -> None:
        """The timers that follow an id's stored state: its transaction's timeout, its idle expiry."""
        txn_id, meta = entry.transactional_id, entry.meta
        if meta is not None and meta.state == st.ONGOING:
            deadline = self._tick_after(meta.start_ms + meta.timeout_ms + 1, self.config.abort_timed_out_interval_ms)
            self.timers.schedule(("timeout", txn_id), deadline, lambda o, e=entry: self._on_timeout(o, e))
        else:
            self.timers.cancel(("timeout", txn_id))
        if meta is not None and meta.state in st.EXPIRATION_ALLOWED:
            deadline = self._tick_after(meta.last_update_ms + self.config.transactional_id_expiration_ms,
                                        self.config.remove_expired_interval_ms)
            self.timers.schedule(("expire", txn_id), deadline, lambda o, e=entry: self._on_expire(o, e))
        else:
            self.timers.cancel(("expire", txn_id))

    # ------------------------------------------------------------------ timers

    def _on_timeout(self, out: Output, entry: TxnEntry) -> None:
        """abortTimedOutTransactions for one id: fence its producer and abort."""
        meta = entry.meta
        if self.txns.get(entry.transactional_id) is not entry or meta is None or meta.state != st.ONGOING:
            return
        if entry.pending is not None:
            self._arm(entry)      # Kafka skips it this round and looks again next time
            return
        bumped = entry.fence_epoch if entry.fence_epoch is not None else meta.producer_epoch + 1
        self._event(out, "txn_timed_out", transactional_id=entry.transactional_id, producer_id=meta.producer_id,
                    producer_epoch=bumped, age_ms=self._now - meta.start_ms)
        self._fence_and_abort(out, entry, self._now, None, None, reason="timeout")

    def _on_expire(self, out: Output, entry: TxnEntry) -> None:
        meta = entry.meta
        if self.txns.get(entry.transactional_id) is not entry or meta is None or meta.state not in st.EXPIRATION_ALLOWED:
            return
        if entry.pending is not None or meta.last_update_ms > self._now - self.config.transactional_id_expiration_ms:
            self._arm(entry)
            return
        st.transition(meta, st.DEAD)        # checked against the table; never stored
        entry.pending = st.DEAD
        self._write(out, entry, None, self.config.request_timeout_ms, lambda o, c: None, reason="expired")

