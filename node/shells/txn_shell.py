"""The transaction coordinator's I/O shell: one sans-IO core per __transaction_state partition led here.

* **The door.** One method per API (``init_producer_id(request) -> Future[InitProducerIdResponse]``,
  ``add_partitions``, ``add_offsets``, ``end_txn``, ``describe``), taking and answering
  :mod:`transactions.messages` types; the Kafka listener calls them.  A transactional id belongs to partition
  ``partition_for(id, n)``; the request goes to that partition's :class:`transactions.core.TxnCoordinator`
  if this broker has one, else its future is answered NOT_COORDINATOR at once.
* **Write path.** A core's appends go to its partition as its leader (acks=all), in the order it emitted
  them, with the core's lock held; when the HW covers them (or the append fails) ``on_append_done`` replays
  them and answers.  The markers a core asks for go out on the marker channel (node/shells/marker_channel.py)
  and their outcomes come back to it.
* **Load and unload.** Leadership changes of transaction state partitions come from the replica manager;
  one loader thread processes them in order (``transactions.leadership``'s steps, fenced by leader epoch,
  the leader epoch being the coordinator epoch).  A load reads the partition from its log start to its LEO
  and replays every record through the same ``replay`` (``transactions.load``); requests meanwhile get
  COORDINATOR_LOAD_IN_PROGRESS.
* **Time.** One timer thread runs ``on_tick`` on every core whose ``next_deadline_ms`` has come.

Events: ``txn_coordinator_load_started``, ``txn_coordinator_loaded``, ``txn_coordinator_unloaded``
(docs/events.md), and the cores'.
"""
from __future__ import annotations

import logging
import queue
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable

from kafkacommon import errors
from kafkacommon.hashing import partition_for
from node.clock import now_ms
from node.events import EventLog
from node.shells.marker_channel import MarkerChannel
from transactions import load
from transactions.config import TRANSACTION_STATE_TOPIC, TxnConfig
from transactions.core import Output, TxnCoordinator
from transactions.leadership import TxnCoordinatorship, TxnSlot, start_appends
from transactions.messages import (
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, DescribeTransactionsRequest,
    DescribeTransactionsResponse, EndTxnRequest, InitProducerIdRequest, InitProducerIdResponse, MarkerCmd,
    TxnErrorResponse,
)

log = logging.getLogger(__name__)

Handler = Callable[[TxnCoordinator, Any, Any, int], Output]


class TxnShell:
    def __init__(self, broker_id: int, replicas: Any, state: Any, events: EventLog, config: TxnConfig,
                 num_partitions: Callable[[], int], new_producer_id: Callable[[], int],
                 endpoint_of: Callable[[int], str | None], load_buffer_bytes: int = 5 << 20,
                 clock: Callable[[], int] = now_ms) -> None:
        self.broker_id = broker_id
        self.replicas = replicas
        self.events = events
        self.config = config
        self.num_partitions = num_partitions
        self.load_buffer_bytes = load_buffer_bytes
        self.clock = clock
        self.coordinatorship = TxnCoordinatorship(config, new_producer_id)
        self._slots = self.coordinatorship.slots
        self.channel = MarkerChannel(state, endpoint_of, self._markers_written, config.request_timeout_ms)
        self._jobs: queue.Queue = queue.Queue()
        self._timer = threading.Condition()
        self._stopping = threading.Event()
        self._threads = [threading.Thread(target=self._loader, name="txn-loader", daemon=True),
                         threading.Thread(target=self._ticker, name="txn-timer", daemon=True)]
        for t in self._threads:
            t.start()

    # ------------------------------------------------------------------ leadership

    def on_leadership(self, topic: str, partition: int, is_leader: bool, leader_epoch: int) -> None:
        if topic == TRANSACTION_STATE_TOPIC:
            self._jobs.put(("load" if is_leader else "unload", partition, leader_epoch))

    def _loader(self) -> None:
        while not self._stopping.is_set():
            try:
                kind, p, epoch = self._jobs.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                self._load(p, epoch) if kind == "load" else self._unload(p, epoch)
            except Exception:
                log.exception("%s of transaction state partition %d failed", kind, p)
            finally:
                self._jobs.task_done()

    def released(self, partitions: set[int]) -> bool:
        """None of ``partitions`` is coordinated here any more, and no load or unload is queued or under way."""
        return self._jobs.unfinished_tasks == 0 and not partitions & set(self._slots)

    def _load(self, p: int, epoch: int) -> None:
        lock = threading.Lock()
        t0 = time.monotonic_ns()
        with lock:
            started = self.coordinatorship.begin_load(p, epoch, self.clock(), io=lock)
        if started is None:
            return
        slot, out = started
        self._dispatch(slot, out)
        self.events.emit("txn_coordinator_load_started", partition=p, coordinator_epoch=epoch)
        tp = (TRANSACTION_STATE_TOPIC, p)
        stats = load.LoadStats()
        try:
            stats = load.replay_log(slot.core, lambda offset: self.replicas.read_log(tp, offset, self.load_buffer_bytes),
                                    lock=lock, stopping=self._stopping.is_set)
            for _offset, message in stats.errors:
                log.warning("%s", message)
        finally:
            with lock:
                out = self.coordinatorship.finish_load(slot, self.clock())
            self._dispatch(slot, out)
        self.events.emit("txn_coordinator_loaded", partition=p, coordinator_epoch=epoch, records=stats.read,
                         replayed=stats.records, skipped_records=stats.skipped, bytes=stats.bytes,
                         end_offset=stats.end_offset, transactions=len(slot.core.txns),
                         duration_ms=round((time.monotonic_ns() - t0) / 1e6, 3))
        self._poke()

    def _unload(self, p: int, epoch: int) -> None:
        slot = self.coordinatorship.release(p, epoch)
        if slot is None:
            return
        with slot.io:
            count, out = self.coordinatorship.unload(slot, self.clock())
        self._dispatch(slot, out)
        self.events.emit("txn_coordinator_unloaded", partition=p, coordinator_epoch=epoch, transactions=count)

    # ------------------------------------------------------------------ the door

    def init_producer_id(self, req: InitProducerIdRequest, block: bool = True) -> Future[InitProducerIdResponse] | None:
        return self._request(req.transactional_id, TxnCoordinator.init_producer_id, req, block)

    def add_partitions(self, req: AddPartitionsToTxnRequest,
                       block: bool = True) -> Future[AddPartitionsToTxnResponse] | None:
        return self._request(req.transactional_id, TxnCoordinator.add_partitions, req, block)

    def add_offsets(self, req: AddOffsetsToTxnRequest, block: bool = True) -> Future[TxnErrorResponse] | None:
        return self._request(req.transactional_id, TxnCoordinator.add_offsets, req, block)

    def end_txn(self, req: EndTxnRequest, block: bool = True) -> Future[TxnErrorResponse] | None:
        return self._request(req.transactional_id, TxnCoordinator.end_txn, req, block)

    def describe(self, req: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
        """Each id at its own core (for the web view and tests); NOT_COORDINATOR where this broker has none."""
        found = []
        for txn_id in req.transactional_ids:
            fut = self._request(txn_id, TxnCoordinator.describe, DescribeTransactionsRequest((txn_id,)), True)
            found.extend(fut.result(timeout=10).transactions)
        return DescribeTransactionsResponse(tuple(found))

    def partition_of(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions())

    def _request(self, txn_id: str, handler: Handler, req: Any, block: bool) -> Future | None:
        fut: Future = Future()
        slot = self._slots.get(self.partition_of(txn_id)) if txn_id else None
        if slot is None:
            fut.set_result(req.error_response(errors.NOT_COORDINATOR if txn_id else errors.INVALID_REQUEST))
            return fut
        if block:
            slot.io.acquire()
        elif not slot.io.acquire(blocking=False):
            return None
        try:
            if self._slots.get(slot.core.partition) is not slot:
                out = None
            else:
                out = handler(slot.core, fut, req, self.clock())
                self._start_appends(slot, out)
        finally:
            slot.io.release()
        if out is None:
            fut.set_result(req.error_response(errors.NOT_COORDINATOR))
        else:
            self._finish(slot, out)
        return fut

    def loading_partitions(self) -> list[int]:
        return [p for p, s in list(self._slots.items()) if s.core.status == "loading"]

    # ------------------------------------------------------------------ outputs

    def _dispatch(self, slot: TxnSlot, out: Output) -> None:
        if out.appends:
            with slot.io:
                self._start_appends(slot, out)
        self._finish(slot, out)

    def _start_appends(self, slot: TxnSlot, out: Output) -> None:
        """With the slot's lock held: the core's appends to this broker's log, in order."""
        def append(cmd) -> int | None:
            records = [(k, v, None) for k, v in cmd.records]
            done = self.replicas.append((TRANSACTION_STATE_TOPIC, slot.core.partition), records, cmd.acks,
                                        cmd.timeout_ms,
                                        on_done=lambda code, s=slot, a=cmd.append_id: self._append_done(s, a, code),
                                        on_appended=lambda base, c=cmd: setattr(c, "base_offset", base))
            return None if done is None else done[0]
        start_appends(slot.core, out, append, self.clock)

    def _append_done(self, slot: TxnSlot, append_id: int, code: int) -> None:
        with slot.io:
            out = slot.core.on_append_done(append_id, code, self.clock())
            self._start_appends(slot, out)
        self._finish(slot, out)

    def _finish(self, slot: TxnSlot, out: Output) -> None:
        self.events.log(*out.events)
        for handle, response in out.responses:
            if isinstance(handle, Future) and not handle.done():
                handle.set_result(response)
        markers, out.markers = out.markers, []
        for cmd in markers:
            self.channel.send(slot, cmd)
        if markers:
            self._poke()

    def _markers_written(self, slot: TxnSlot, cmd: MarkerCmd, results: list) -> None:
        """A marker command's outcome, back to its core (if it is still the one loaded)."""
        if not self.coordinatorship.is_current(slot):
            return
        with slot.io:
            out = slot.core.on_markers_written(cmd.transactional_id, cmd.coordinator_epoch, results, self.clock())
            self._start_appends(slot, out)
        self._finish(slot, out)
        self._poke()

    # ------------------------------------------------------------------ timers

    def _poke(self) -> None:
        with self._timer:
            self._timer.notify()

    def _ticker(self) -> None:
        while not self._stopping.is_set():
            now = self.clock()
            earliest = None
            for slot in list(self._slots.values()):
                out = None
                with slot.io:
                    d = slot.core.next_deadline_ms()
                    if d is not None and d <= now:
                        out = slot.core.on_tick(now)
                        self._start_appends(slot, out)
                        d = slot.core.next_deadline_ms()
                if out is not None:
                    self._finish(slot, out)
                if d is not None:
                    earliest = d if earliest is None else min(earliest, d)
            wait_s = 0.1 if earliest is None else min(0.1, max(0.0, (earliest - self.clock()) / 1000))
            with self._timer:
                if wait_s > 0:
                    self._timer.wait(wait_s)

    def close(self) -> None:
        self._stopping.set()
        self.channel.close()
        self._poke()
        for p in list(self._slots):
            slot = self._slots.pop(p)
            with slot.io:
                out = slot.core.unload(self.clock())
            self.events.log(*out.events)
            for handle, response in out.responses:
                if isinstance(handle, Future) and not handle.done():
                    handle.set_result(response)
