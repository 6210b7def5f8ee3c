"""The replica manager's appends as a leader (a mixin of :class:`node.replicas.replica_manager.ReplicaManager`).

Three kinds, one acks=all path (the purgatory):

* a coordinator's records (:meth:`AppendsMixin.append`: the group and transaction coordinators' write paths;
  a transactional offset commit carries its producer, checked for its epoch only, as Kafka's
  AppendOrigin.Coordinator);
* a real client's checked batch (:meth:`AppendsMixin.append_batch`: the Kafka listener; its producer
  checked by the log's :class:`replication.producer_state.ProducerStates`: epoch, sequence, duplicates, a
  non-transactional batch inside an open transaction);
* a transaction marker (:meth:`AppendsMixin.append_marker`: WriteTxnMarkers, checked for the producer's
  epoch and the transaction coordinator's epoch).

The log updates its producers and transaction index with every batch it appends (node/storage/txn_log.py).
An offline replica (its log directory failed) answers KAFKA_STORAGE_ERROR, as does an append whose write
fails: the log's own hook has taken its directory offline (node/replicas/log_dir_manager.py).
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

from kafkacommon import errors
from kafkacommon.control import marker_batch
from node.clock import now_ms
from node.replicas.hosted import AckWaiter, Appended, Hosted
from node.storage.errors import KafkaStorageError
from node.storage.log import RecordTooLargeError
from node.storage.validator import TimestampOutOfRange, leader_codec, prepare_batch
from proto import kafkasim_pb2 as pb
from replication import produce as produce_rules

TP = tuple[str, int]
Records = list[tuple[bytes | None, bytes | None, int | None]]
STORAGE = errors.KAFKA_STORAGE_ERROR


class AppendsMixin:
    hosted: dict[TP, Hosted]
    _purgatory: Any
    events: Any
    _offline: Callable[[TP], bool]
    _wake: Callable[..., None]
    _notify: Callable[[], None]
    _wake_owed: bool
    log_events: Callable[[list], None]

    def append(self, tp: TP, records: Records, acks: int, timeout_ms: int, on_done: Callable[[int], None],
               producer: tuple[int, int] | None = None,
               on_appended: Callable[[int], None] | None = None, inline: bool = False,
               wake_later: bool = False) -> tuple[int, int, int] | None:
        """Append as the leader without blocking (the coordinators' write paths).

        Returns ``(error, base_offset, last_offset)`` when the outcome is known at once (an error, or acks
        0/1); otherwise returns None and calls ``on_done(error)`` from another thread once the HW covers the
        records, the leadership is lost (NOT_LEADER_OR_FOLLOWER) or the timeout passes (REQUEST_TIMED_OUT).
        ``producer`` (id, epoch) makes the batch transactional (a transactional offset commit);
        ``on_appended(base offset)`` is called, with the partition's lock held, once the records are in the log.
        ``inline``: ``on_done`` never blocks (the group coordinator's tries its locks and hands on when they are
        taken), so the follower's Fetch that moves the HW may call it on its own thread (``AckWaiter.inline``).
        ``wake_later``: the followers' parked fetches are not woken for these records now but by the caller's
        :meth:`wake_fetches`, soon (the group coordinator's door calls it once per turn of its event loop, so the
        appends of every request handled in that turn share one replication round: issue 49's group commit).
        """
        code, base, last, _epoch, waiting = self._append(tp, records, acks, timeout_ms, on_done, inline=inline,
                                                         producer=producer, on_appended=on_appended,
                                                         wake_later=wake_later)
        return None if waiting else (code, base, last)

    def _append(self, tp: TP, records: Records, acks: int, timeout_ms: int, on_done: Callable[[int], None],
                inline: bool = False, producer: tuple[int, int] | None = None,
                on_appended: Callable[[int], None] | None = None,
                wake_later: bool = False) -> tuple[int, int, int, int, bool]:
        """The one append path (produce and the coordinators): (error, base offset, last offset, leader epoch,
        waiting).  ``waiting``: an acks=all append now in the purgatory, which calls ``on_done(error)`` once
        the core says it is done or the timeout passes (``inline``: see ``AckWaiter``)."""
        h = self.hosted.get(tp)
        if h is None:
            return STORAGE if self._offline(tp) else errors.NOT_LEADER_OR_FOLLOWER, -1, -1, -1, False
        with h.cond:
            code, base, last, epoch = self._leader_append(h, records, acks, producer, wake_later)
            if code == errors.NONE and on_appended is not None:
                on_appended(base)
            if code != errors.NONE or acks != -1:
                return code, base, last, epoch, False
            self._wait_for_hw(h, tp, last, epoch, timeout_ms, on_done, inline)
        return errors.NONE, base, last, epoch, True

    def _wait_for_hw(self, h: Hosted, tp: TP, last: int, epoch: int, timeout_ms: int,
                     on_done: Callable[[int], None], inline: bool) -> None:
        """With ``h.cond`` held: an acks=all waiter for the HW to pass ``last``."""
        w = AckWaiter(tp, last + 1, epoch, time.monotonic() + max(timeout_ms, 1) / 1000, on_done, inline)
        h.waiters.append(w)
        self._purgatory.watch(h, w)
        self._wake(h)  # the HW may already cover it

    def _leader_append(self, h: Hosted, records: Records, acks: int,
                       producer: tuple[int, int] | None = None, wake_later: bool = False) -> tuple[int, int, int, int]:
        """With ``h.cond`` held: the produce checks, then the append as leader, which wakes followers' long
        polls (and acks=all waiters, for a lone ISR moves the HW at once).  Returns (error, base offset, last
        offset, leader epoch); nothing is appended on error."""
        if not h.repl.is_leader or h.log.closed:
            return STORAGE if h.log.failed else errors.NOT_LEADER_OR_FOLLOWER, -1, -1, -1
        code = h.repl.check_produce(acks)
        if code != errors.NONE:
            return code, -1, -1, -1
        epoch = h.repl.leader_epoch
        try:
            if producer is not None:
                code = h.log.producers().check_batch(producer[0], producer[1], -1, len(records), True,
                                                     from_coordinator=True).error
                if code != errors.NONE:
                    return code, -1, -1, -1
            lc = h.log_config
            base, last = h.log.append_as_leader(records, epoch, now_ms(), lc.max_message_bytes,
                                                compression=leader_codec(lc), log_append_time=lc.log_append_time,
                                                producer=producer)
        except RecordTooLargeError:
            return errors.MESSAGE_TOO_LARGE, -1, -1, -1
        except KafkaStorageError:
            return STORAGE, -1, -1, -1
        self._appended(h, wake_later)
        return errors.NONE, base, last, epoch

    def _appended(self, h: Hosted, wake_later: bool = False) -> None:
        """With ``h.cond`` held, after an append as leader: the core learns the new LEO; waiters wake (the
        followers' parked fetches at the next :meth:`wake_fetches` with ``wake_later``)."""
        self.log_events(h.repl.on_leader_append(h.log, now_ms()))
        self._wake(h)
        if wake_later:
            self._wake_owed = True
        else:
            self._notify()

    def wake_fetches(self) -> None:
        """Wake the long polls for the records appended with ``wake_later`` since the last call (nothing when
        there are none).  A wake-up covers every append made before it: the flag is cleared first."""
        if self._wake_owed:
            self._wake_owed = False
            self._notify()

    def append_batch(self, tp: TP, batch: bytes, record_count: int, max_timestamp: int, acks: int,
                     timeout_ms: int, on_done: Callable[[int], None],
                     producer: tuple[int, int, int] | None = None, transactional: bool = False) -> Appended:
        """A real client's checked record batch (the Kafka listener), appended as the leader as it arrived, but
        for what its topic's configs change (node/storage/validator.py: LogAppendTime, compression.type;
        message.timestamp.difference.max.ms refuses it with INVALID_TIMESTAMP).  Returns :class:`Appended`:
        with ``pending`` (acks=all), ``on_done(error)`` is called from another thread once the HW covers it,
        the leadership is lost or ``timeout_ms`` passes, as :meth:`append` does.  ``producer`` (id, epoch,
        first sequence) of an idempotent or transactional batch is checked first (replication/producer_state.py):
        a duplicate is answered with its first offsets, not appended again."""
        h = self.hosted.get(tp)
        if h is None:
            return Appended(STORAGE if self._offline(tp) else errors.NOT_LEADER_OR_FOLLOWER, -1, -1, False)
        with h.cond:
            if not h.repl.is_leader or h.log.closed:
                return Appended(STORAGE if h.log.failed else errors.NOT_LEADER_OR_FOLLOWER, -1, -1, False)
            try:
                return self._append_batch(tp, h, batch, record_count, acks, timeout_ms, on_done, producer,
                                          transactional)
            except KafkaStorageError:
                return Appended(STORAGE, -1, -1, False)

    def _append_batch(self, tp: TP, h: Hosted, batch: bytes, record_count: int, acks: int, timeout_ms: int,
                      on_done: Callable[[int], None], producer: tuple[int, int, int] | None,
                      transactional: bool) -> Appended:
        """With ``h.cond`` held: :meth:`append_batch`'s checks and append; a KafkaStorageError goes up."""
        code = h.repl.check_produce(acks)
        if code != errors.NONE:
            return Appended(code, -1, -1, False)
        epoch = h.repl.leader_epoch
        verdict = None
        stamp = -1
        if producer is not None and producer[0] >= 0:
            verdict = h.log.producers().check_batch(producer[0], producer[1], producer[2], record_count,
                                                    transactional, from_coordinator=False)
            if verdict.error:
                return Appended(verdict.error, -1, -1, False)
        if verdict is not None and verdict.duplicate is not None:
            base, last = verdict.duplicate.first_offset, verdict.duplicate.last_offset
        else:
            now = now_ms()
            try:
                ready = prepare_batch(batch, h.log_config, now)
                stamp = ready.log_append_time
                base, last = h.log.append_batch_as_leader(ready.data, record_count, ready.max_timestamp, epoch,
                                                          now, h.log_config.max_message_bytes)
            except TimestampOutOfRange as e:
                self.events.emit("produce_refused", topic=tp[0], partition=tp[1], error="INVALID_TIMESTAMP",
                                 reason=str(e))
                return Appended(errors.INVALID_TIMESTAMP, -1, -1, False)
            except RecordTooLargeError:
                return Appended(errors.MESSAGE_TOO_LARGE, -1, -1, False)
            self._appended(h)
        if acks != -1:
            return Appended(errors.NONE, base, last, False, stamp)
        # the listener's callback hands the outcome to its event loop: inline
        self._wait_for_hw(h, tp, last, epoch, timeout_ms, on_done, inline=True)
        return Appended(errors.NONE, base, last, True, stamp)

    def append_marker(self, tp: TP, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                      timeout_ms: int, on_done: Callable[[int], None]) -> tuple[int, int, bool]:
        """A transaction marker from WriteTxnMarkers, appended as the leader with acks=all: (error, its offset,
        pending); with ``pending``, ``on_done(error)`` follows as for :meth:`append`.  The producer's epoch
        and the coordinator's epoch are checked against the log's producers first."""
        h = self.hosted.get(tp)
        if h is None:
            return STORAGE if self._offline(tp) else errors.NOT_LEADER_OR_FOLLOWER, -1, False
        with h.cond:
            if not h.repl.is_leader or h.log.closed:
                return STORAGE if h.log.failed else errors.NOT_LEADER_OR_FOLLOWER, -1, False
            code = h.repl.check_produce(-1)
            epoch = h.repl.leader_epoch
            base = h.log.log_end_offset
            try:
                if code == errors.NONE:
                    code = h.log.producers().check_marker(producer_id, producer_epoch, coordinator_epoch)
                if code != errors.NONE:
                    return code, -1, False
                data = marker_batch(base, epoch, producer_id, producer_epoch, commit, coordinator_epoch, now_ms())
                h.log.append_batch_as_leader(data, 1, now_ms(), epoch, now_ms())
            except KafkaStorageError:
                return STORAGE, -1, False
            self._appended(h)
            self._wait_for_hw(h, tp, base, epoch, timeout_ms, on_done, inline=False)
        return errors.NONE, base, True

    def produce(self, req: pb.ProduceRequest) -> pb.ProduceResponse:
        """A client's Produce: the core's checks, the append, and for acks=all the purgatory's answer (this
        request thread waits for it; the purgatory answers by the request's timeout)."""
        tp = (req.topic, req.partition)
        h = self.hosted.get(tp)
        code = produce_rules.request_error(req.acks, h is not None and h.repl.is_leader)
        if code == errors.NOT_LEADER_OR_FOLLOWER and h is None and self._offline(tp):
            code = STORAGE
        if code != errors.NONE:
            return pb.ProduceResponse(error_code=code, base_offset=-1, last_offset=-1)
        records = [(None if r.key_null else r.key, None if r.value_null else r.value,
                    None if r.timestamp_ms < 0 else r.timestamp_ms) for r in req.records]
        if not records:
            return pb.ProduceResponse(error_code=errors.NONE, base_offset=-1, last_offset=-1)
        done, outcome = threading.Event(), []

        def on_done(result: int) -> None:
            outcome.append(result)
            done.set()

        code, base, last, epoch, waiting = self._append(tp, records, req.acks, req.timeout_ms, on_done, inline=True)
        if code != errors.NONE:
            return pb.ProduceResponse(error_code=code, base_offset=-1, last_offset=-1)
        if waiting:
            done.wait(max(req.timeout_ms, 1) / 1000 + 5)  # a bound in case the broker stops meanwhile
            code = outcome[0] if outcome else errors.REQUEST_TIMED_OUT
        return pb.ProduceResponse(error_code=code, base_offset=base, last_offset=last, leader_epoch=epoch)
