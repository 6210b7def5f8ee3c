"""A fake shell for driving a TxnCoordinator in tests: an integer clock, an in-memory log, markers.

``TxnDriver`` hands requests to the core with fresh handles and keeps every response by handle and every
event.  An append completes at once with error 0 (or the next code queued in ``fail_next``) unless
``auto_complete`` is False (then it waits in ``pending`` for :meth:`complete`).  Markers are written at once
(error 0 per partition, or ``marker_errors[tp]`` once) unless ``auto_markers`` is False (then they wait in
``markers`` for :meth:`write_markers`).  ``log()`` is the partition's log: the records of every successful
append, in order.
"""
from __future__ import annotations

import itertools

from kafkacommon.event import Event
from transactions.config import TxnConfig
from transactions.core import AppendCmd, Output, TxnCoordinator
from transactions.messages import (
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest, MarkerCmd,
)


class TxnDriver:
    def __init__(self, config: TxnConfig | None = None, partition: int = 0, epoch: int = 0, now_ms: int = 0,
                 load: bool = True, auto_complete: bool = True, auto_markers: bool = True,
                 first_producer_id: int = 1000) -> None:
        self._pids = itertools.count(first_producer_id)
        self.core = TxnCoordinator(partition, config or TxnConfig(), lambda: next(self._pids))
        self.now = now_ms
        self.epoch = epoch
        self.auto_complete = auto_complete
        self.auto_markers = auto_markers
        self.fail_next: list[int] = []
        self.marker_errors: dict[tuple[str, int], list[int]] = {}
        self.emitted: list[AppendCmd] = []
        self.outcome: dict[int, int] = {}
        self.pending: dict[int, AppendCmd] = {}
        self.markers: list[MarkerCmd] = []
        self.written: list[tuple[MarkerCmd, tuple[str, int]]] = []   # (marker, partition) written, in order
        self.base_log: list[tuple[bytes, bytes | None]] = []
        self.responses: dict[int, list[object]] = {}
        self.events: list[Event] = []
        self._handles = itertools.count(1)
        if load:
            self.apply(self.core.begin_load(epoch, self.now))
            self.apply(self.core.finish_load(self.now))

    def apply(self, out: Output) -> Output:
        for handle, response in out.responses:
            self.responses.setdefault(handle, []).append(response)
        self.events.extend(out.events)
        for cmd in out.appends:
            self.emitted.append(cmd)
            if self.auto_complete:
                code = self.fail_next.pop(0) if self.fail_next else 0
                self.outcome[cmd.append_id] = code
                self.apply(self.core.on_append_done(cmd.append_id, code, self.now))
            else:
                self.pending[cmd.append_id] = cmd
        for m in out.markers:
            if self.auto_markers:
                self._write(m)
            else:
                self.markers.append(m)
        return out

    def _write(self, m: MarkerCmd) -> None:
        results = []
        for tp in m.partitions:
            queued = self.marker_errors.get(tp)
            code = queued.pop(0) if queued else 0
            results.append((tp, code))
            if code == 0:
                self.written.append((m, tp))
        self.apply(self.core.on_markers_written(m.transactional_id, m.coordinator_epoch, results, self.now))

    def write_markers(self) -> None:
        """Write every marker waiting (each partition's outcome from ``marker_errors``, else 0)."""
        while self.markers:
            self._write(self.markers.pop(0))

    def complete(self, append_id: int | None = None, code: int = 0) -> None:
        if append_id is None:
            append_id = min(self.pending)
        del self.pending[append_id]
        self.outcome[append_id] = code
        self.apply(self.core.on_append_done(append_id, code, self.now))

    def complete_all(self, code: int = 0) -> None:
        while self.pending:
            self.complete(None, code)

    def log(self) -> list[tuple[bytes, bytes | None]]:
        return self.base_log + [r for cmd in self.emitted if self.outcome.get(cmd.append_id) == 0 for r in cmd.records]

    def advance(self, ms: int) -> None:
        target = self.now + ms
        while True:
            deadline = self.core.next_deadline_ms()
            if deadline is None or deadline > target:
                break
            self.now = max(self.now, deadline)
            self.apply(self.core.on_tick(self.now))
        self.now = target
        self.apply(self.core.on_tick(self.now))

    def call(self, method, request) -> int:
        handle = next(self._handles)
        self.apply(method(self.core, handle, request, self.now))
        return handle

    def response(self, handle: int) -> object | None:
        got = self.responses.get(handle, [])
        assert len(got) <= 1, f"handle {handle} answered {len(got)} times: {got}"
        return got[0] if got else None

    def events_named(self, name: str) -> list[dict]:
        return [e.fields for e in self.events if e.name == name]

    # ------------------------------------------------------------------ requests

    def init(self, txn_id: str = "t", timeout_ms: int = 60000, producer_id: int = -1, producer_epoch: int = -1) -> int:
        return self.call(TxnCoordinator.init_producer_id,
                         InitProducerIdRequest(txn_id, timeout_ms, producer_id, producer_epoch))

    def add(self, txn_id: str, pid: int, epoch: int, *partitions: tuple[str, int]) -> int:
        return self.call(TxnCoordinator.add_partitions, AddPartitionsToTxnRequest(txn_id, pid, epoch, tuple(partitions)))

    def add_offsets(self, txn_id: str, pid: int, epoch: int, group: str, offsets_partition: int = 0) -> int:
        return self.call(TxnCoordinator.add_offsets,
                         AddOffsetsToTxnRequest(txn_id, pid, epoch, group, offsets_partition))

    def end(self, txn_id: str, pid: int, epoch: int, commit: bool = True) -> int:
        return self.call(TxnCoordinator.end_txn, EndTxnRequest(txn_id, pid, epoch, commit))

    def state(self, txn_id: str = "t") -> str | None:
        e = self.core.txns.get(txn_id)
        return None if e is None or e.meta is None else e.meta.state

    def reloaded(self, epoch: int | None = None, now_ms: int | None = None) -> "TxnDriver":
        """A new coordinator (driver) loading this one's log, as after a failover."""
        other = TxnDriver(self.core.config, self.core.partition, self.epoch + 1 if epoch is None else epoch,
                          self.now if now_ms is None else now_ms, load=False, auto_complete=self.auto_complete,
                          auto_markers=self.auto_markers, first_producer_id=next(self._pids) + 1000)
        other.apply(other.core.begin_load(other.epoch, other.now))
        other.base_log = self.log()
        for offset, (key, value) in enumerate(other.base_log):
            other.core.replay(key, value, offset)
        other.apply(other.core.finish_load(other.now))
        return other
