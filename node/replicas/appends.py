"""The replica manager's appends (a mixin of ``ReplicaManager``): the group coordinator's, a real client's
record batch (the Kafka listener) and kafkasim's gRPC Produce, all through one acks=all path (the purgatory).

An offline replica (its log directory failed) answers KAFKA_STORAGE_ERROR, as does an append whose write
fails: the log's own hook has taken its directory offline (node/replicas/log_dir_manager.py).
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

from kafkacommon import errors
from node.clock import now_ms
from node.replicas.hosted import AckWaiter, Appended, Hosted
from node.replicas.producer_state import ProducerStates
from node.storage.errors import KafkaStorageError
from node.storage.log import RecordTooLargeError
from node.storage.validator import TimestampOutOfRange, leader_codec, prepare_batch
from proto import kafkasim_pb2 as pb
from replication import produce as produce_rules

TP = tuple[str, int]
STORAGE = errors.KAFKA_STORAGE_ERROR


class AppendsMixin:
    hosted: dict[TP, Hosted]
    _producers: dict[TP, tuple[int, ProducerStates]]
    _purgatory: Any
    events: Any
    _offline: Callable[[TP], bool]
    _wake: Callable[..., None]
    _notify: Callable[[], None]
    log_events: Callable[[list], None]

    def append(self, tp: TP, records: list[tuple[bytes | None, bytes | None, int | None]], acks: int,
               timeout_ms: int, on_done: Callable[[int], None]) -> tuple[int, int, int] | None:
        """Append as the leader without blocking (the group coordinator's write path).

        Returns ``(error, base_offset, last_offset)`` when the outcome is known
        at once (an error, or acks 0/1); otherwise returns None and calls
        ``on_done(error)`` from another thread once the HW covers the records,
        the leadership is lost (NOT_LEADER_OR_FOLLOWER) or the timeout passes
        (REQUEST_TIMED_OUT).
        """
        code, base, last, _epoch, waiting = self._append(tp, records, acks, timeout_ms, on_done)
        return None if waiting else (code, base, last)

    def _append(self, tp: TP, records: list[tuple[bytes | None, bytes | None, int | None]], acks: int,
                timeout_ms: int, on_done: Callable[[int], None],
                inline: bool = False) -> tuple[int, int, int, int, bool]:
        """The one append path (produce and the group coordinator): (error, base offset, last offset,
        leader epoch, waiting).  ``waiting``: an acks=all append now in the purgatory, which calls
        ``on_done(error)`` once the core says it is done or the timeout passes (``inline``: see
        ``AckWaiter``)."""
        h = self.hosted.get(tp)
        if h is None:
            return STORAGE if self._offline(tp) else errors.NOT_LEADER_OR_FOLLOWER, -1, -1, -1, False
        with h.cond:
            code, base, last, epoch = self._leader_append(h, records, acks)
            if code != errors.NONE or acks != -1:
                return code, base, last, epoch, False
            w = AckWaiter(tp, last + 1, epoch, time.monotonic() + max(timeout_ms, 1) / 1000, on_done, inline)
            h.waiters.append(w)
            self._purgatory.watch(h, w)
            self._wake(h)  # the HW may already cover it
        return errors.NONE, base, last, epoch, True

    def _leader_append(self, h: Hosted, records: list[tuple[bytes | None, bytes | None, int | None]],
                       acks: int) -> tuple[int, int, int, int]:
        """With ``h.cond`` held: the produce checks, then the append as leader, which wakes
        followers' long polls (and acks=all waiters, for a lone ISR moves the HW at once).
        Returns (error, base offset, last offset, leader epoch); nothing is appended on error."""
        if not h.repl.is_leader or h.log.closed:
            return errors.NOT_LEADER_OR_FOLLOWER, -1, -1, -1
        code = h.repl.check_produce(acks)
        if code != errors.NONE:
            return code, -1, -1, -1
        epoch = h.repl.leader_epoch
        try:
            lc = h.log_config
            base, last = h.log.append_as_leader(records, epoch, now_ms(), lc.max_message_bytes,
                                                compression=leader_codec(lc), log_append_time=lc.log_append_time)
        except RecordTooLargeError:
            return errors.MESSAGE_TOO_LARGE, -1, -1, -1
        except KafkaStorageError:
            return STORAGE, -1, -1, -1
        self.log_events(h.repl.on_leader_append(h.log, now_ms()))
        self._wake(h)
        self._notify()
        return errors.NONE, base, last, epoch

    def append_batch(self, tp: TP, batch: bytes, record_count: int, max_timestamp: int, acks: int,
                     timeout_ms: int, on_done: Callable[[int], None],
                     producer: tuple[int, int, int] | None = None) -> Appended:
        """A real client's checked record batch (the Kafka listener), appended as the leader as it
        arrived, but for what its topic's configs change (node/storage/validator.py: LogAppendTime,
        compression.type; message.timestamp.difference.max.ms refuses it with INVALID_TIMESTAMP).
        Returns :class:`Appended`: with ``pending`` (acks=all),
        ``on_done(error)`` is called from another thread once the HW covers it, the leadership is
        lost or ``timeout_ms`` passes, as :meth:`append` does.  ``producer`` (id, epoch, first
        sequence) of an idempotent batch is checked first (node/replicas/producer_state.py): a duplicate is
        answered with its first offsets, not appended again."""
        h = self.hosted.get(tp)
        if h is None:
            return Appended(STORAGE if self._offline(tp) else errors.NOT_LEADER_OR_FOLLOWER, -1, -1, False)
        with h.cond:
            if not h.repl.is_leader or h.log.closed:
                return Appended(STORAGE if h.log.failed else errors.NOT_LEADER_OR_FOLLOWER, -1, -1, False)
            try:
                return self._append_batch(tp, h, batch, record_count, acks, timeout_ms, on_done, producer)
            except KafkaStorageError:
                return Appended(STORAGE, -1, -1, False)

    def _append_batch(self, tp: TP, h: Hosted, batch: bytes, record_count: int, acks: int, timeout_ms: int,
                      on_done: Callable[[int], None], producer: tuple[int, int, int] | None) -> Appended:
        """With ``h.cond`` held: :meth:`append_batch`'s checks and append; a KafkaStorageError goes up."""
        code = h.repl.check_produce(acks)
        if code != errors.NONE:
            return Appended(code, -1, -1, False)
        epoch = h.repl.leader_epoch
        verdict = states = None
        stamp = -1
        if producer is not None and producer[0] >= 0:
            states = self._producer_states(tp, h)
            verdict = states.check(producer[0], producer[1], producer[2], record_count)
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
            if states is not None:
                states.record(producer[0], producer[1], producer[2], record_count, base)
            self.log_events(h.repl.on_leader_append(h.log, now_ms()))
            self._wake(h)
            self._notify()
        if acks != -1:
            return Appended(errors.NONE, base, last, False, stamp)
        w = AckWaiter(tp, last + 1, epoch, time.monotonic() + max(timeout_ms, 1) / 1000, on_done,
                      inline=True)   # the listener's callback hands the outcome to its event loop
        h.waiters.append(w)
        self._purgatory.watch(h, w)
        self._wake(h)  # the HW may already cover it
        return Appended(errors.NONE, base, last, True, stamp)

    def _producer_states(self, tp: TP, h: Hosted) -> ProducerStates:
        """With ``h.cond`` held: this leadership's producer table, rebuilt from the log's batch headers
        the first time an idempotent producer writes in this leader epoch."""
        got = self._producers.get(tp)
        if got is not None and got[0] == h.repl.leader_epoch:
            return got[1]
        states, offset = ProducerStates(), h.log.log_start_offset
        while offset < h.log.log_end_offset:
            data = h.log.read(offset, 1 << 20)
            if not data:
                break
            offset = states.replay_batches(data) or h.log.log_end_offset
        self._producers[tp] = (h.repl.leader_epoch, states)
        return states

    def produce(self, req: pb.ProduceRequest) -> pb.ProduceResponse:
        """A client's Produce: the core's checks, the append, and for acks=all the purgatory's answer
        (this request thread waits for it; the purgatory answers by the request's timeout)."""
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
