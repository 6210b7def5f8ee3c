"""A simulated broker's transaction coordinators: one ``TxnCoordinator`` per __transaction_state partition it leads.

As node/shells/txn_shell.py, with the broker's own code: one method per API (``init_producer_id(request,
reply)``, ``add_partitions``, ``add_offsets``, ``end_txn``) hands the request to the same API of the
transactional id's core, or answers NOT_COORDINATOR when this broker has none; a leadership gain queues a
load, a loss an unload (``transactions.leadership``'s steps, fenced by leader epoch, which is the
coordinator epoch); a load reads the partition from its start to its LEO and replays it
(``transactions.load.replay_log``), taking simulated time per record as the group coordinators' do; the
core's appends go to the partition as its leader (acks=all, in the order it emitted them:
``start_appends``); ``on_tick`` runs when the earliest timer is due.  Producer ids come from ZooKeeper a
block at a time (``zk.producer_ids.ProducerIds`` over the broker's ZooKeeper door); a request that needs one
while ZooKeeper cannot be reached is answered COORDINATOR_NOT_AVAILABLE (the client retries).

Markers (the core's ``MarkerCmd``) go to each partition's leader as this broker's metadata has it
(``WriteTxnMarkers`` over the simulated network, :meth:`SimTxnCoordinators.send_markers`), as
node/shells/marker_channel.py routes them: a partition the metadata does not have is ``PARTITION_GONE``, one
without a live leader NOT_LEADER_OR_FOLLOWER, a request with no answer by its deadline NETWORK_EXCEPTION;
the outcomes go back to the core.  Simplification: each command's partitions for one leader are one
request of their own (the real channel batches what is queued for a broker behind the request in flight).
"""
from __future__ import annotations

from typing import Any, Callable

from kafkacommon import errors
from sim import rpc
from transactions import load
from transactions.config import TRANSACTION_STATE_TOPIC, TxnConfig
from transactions.core import Output, TxnCoordinator
from transactions.entries import PARTITION_GONE
from transactions.leadership import TxnCoordinatorship, TxnSlot, start_appends
from transactions.messages import MarkerCmd
from zk.errors import CONNECTION_ERRORS
from zk.producer_ids import ProducerIds

LOAD_BASE_MS = 1.0
LOAD_MS_PER_RECORD = 0.002
MARKER_EXTRA_MS = 5000.0      # a WriteTxnMarkers request waits request.timeout.ms and this much more

TP = tuple[str, int]


class SimTxnCoordinators:
    def __init__(self, broker, config: TxnConfig) -> None:
        self.b = broker
        self.world = broker.world
        self.config = config
        self.producer_ids = ProducerIds(broker.zk, broker.id)
        self.coordinatorship = TxnCoordinatorship(config, self.producer_ids.next_id)
        self.slots = self.coordinatorship.slots
        self._tick_at: float | None = None

    def now(self) -> int:
        return self.b.now()

    def num_partitions(self) -> int:
        return self.b.state.topic_partitions.get(TRANSACTION_STATE_TOPIC, 0) or self.b.cfg.txn_partitions

    # ------------------------------------------------------------------ leadership

    def on_role(self, topic: str, partition: int, is_leader: bool, epoch: int) -> None:
        if topic != TRANSACTION_STATE_TOPIC:
            return
        self.world.on_node(self.b.node, 0.0, self._load if is_leader else self._unload, partition, epoch)

    def _load(self, p: int, epoch: int) -> None:
        started = self.coordinatorship.begin_load(p, epoch, self.now())
        if started is None:
            return
        slot, out = started
        t0 = self.world.now_ms
        self._dispatch(slot, out)
        self.b.emit("txn_coordinator_load_started", partition=p, coordinator_epoch=epoch)
        h = self.b.replicas.hosted.get((TRANSACTION_STATE_TOPIC, p))
        records = h.log.log_end_offset if h is not None else 0
        self.world.on_node(self.b.node, LOAD_BASE_MS + records * LOAD_MS_PER_RECORD, self._finish_load, p, slot, t0)

    def _finish_load(self, p: int, slot: TxnSlot, t0: float) -> None:
        if not self.coordinatorship.is_current(slot):
            return

        def read(offset: int):
            hh = self.b.replicas.hosted.get((TRANSACTION_STATE_TOPIC, p))
            return None if hh is None else hh.log.read_bytes(offset)

        stats = load.replay_log(slot.core, read)
        self._dispatch(slot, self.coordinatorship.finish_load(slot, self.now()))
        self.b.emit("txn_coordinator_loaded", partition=p, coordinator_epoch=slot.epoch, records=stats.read,
                    replayed=stats.records, skipped_records=stats.skipped, bytes=stats.bytes,
                    end_offset=stats.end_offset, transactions=len(slot.core.txns),
                    duration_ms=round(self.world.now_ms - t0, 3))
        self._arm()

    def _unload(self, p: int, epoch: int) -> None:
        slot = self.coordinatorship.release(p, epoch)
        if slot is None:
            return
        count, out = self.coordinatorship.unload(slot, self.now())
        self._dispatch(slot, out)
        self.b.emit("txn_coordinator_unloaded", partition=p, coordinator_epoch=epoch, transactions=count)

    # ------------------------------------------------------------------ requests

    def init_producer_id(self, req: Any, reply: Callable[[Any], None]) -> None:
        self._request(TxnCoordinator.init_producer_id, req, reply)

    def add_partitions(self, req: Any, reply: Callable[[Any], None]) -> None:
        self._request(TxnCoordinator.add_partitions, req, reply)

    def add_offsets(self, req: Any, reply: Callable[[Any], None]) -> None:
        self._request(TxnCoordinator.add_offsets, req, reply)

    def end_txn(self, req: Any, reply: Callable[[Any], None]) -> None:
        self._request(TxnCoordinator.end_txn, req, reply)

    def describe(self, req: Any, reply: Callable[[Any], None]) -> None:
        self._request(TxnCoordinator.describe, req, reply, req.transactional_ids[0])

    def _request(self, handler: Callable[[TxnCoordinator, Any, Any, int], Output], req: Any,
                 reply: Callable[[Any], None], txn_id: str | None = None) -> None:
        slot = self.coordinatorship.slot_for(txn_id or req.transactional_id, self.num_partitions())
        if slot is None:
            reply(req.error_response(errors.NOT_COORDINATOR))
            return
        try:
            out = handler(slot.core, reply, req, self.now())
        except CONNECTION_ERRORS:      # a new producer id needed ZooKeeper
            reply(req.error_response(errors.COORDINATOR_NOT_AVAILABLE))
            return
        self._dispatch(slot, out)
        self._arm()

    # ------------------------------------------------------------------ outputs

    def _dispatch(self, slot: TxnSlot, out: Output) -> None:
        def append(cmd) -> int | None:
            st = {"sync": True, "code": None}

            def done(code: int, base: int, s=slot, a=cmd.append_id, st=st, c=cmd) -> None:
                if base >= 0:
                    c.base_offset = base
                if st["sync"]:
                    st["code"] = code
                else:
                    self._append_done(s, a, code)

            self.b.replicas.append((TRANSACTION_STATE_TOPIC, slot.core.partition), list(cmd.records), cmd.acks,
                                   cmd.timeout_ms, done)
            st["sync"] = False
            return st["code"]

        start_appends(slot.core, out, append, self.now)
        self.b.log(*out.events)
        for handle, response in out.responses:
            if callable(handle):
                handle(response)
        markers, out.markers = out.markers, []
        for cmd in markers:
            self.send_markers(slot, cmd)

    def _append_done(self, slot: TxnSlot, append_id: int, code: int) -> None:
        self._dispatch(slot, slot.core.on_append_done(append_id, code, self.now()))
        self._arm()

    def send_markers(self, slot: TxnSlot, cmd: MarkerCmd) -> None:
        by_leader: dict[int, list[TP]] = {}
        now: list[tuple[TP, int]] = []
        state = self.b.state
        for tp in cmd.partitions:
            info = state.metadata.get(tuple(tp))
            if info is None:
                now.append((tuple(tp), PARTITION_GONE))
            elif info.leader < 0 or info.leader not in state.live_brokers:
                now.append((tuple(tp), errors.NOT_LEADER_OR_FOLLOWER))
            else:
                by_leader.setdefault(info.leader, []).append(tuple(tp))
        if now:
            self.world.on_node(self.b.node, 0.0, self._markers_written, slot, cmd, now)
        for leader, parts in sorted(by_leader.items()):
            target = self.b.cluster.brokers.get(leader)
            body = (cmd.producer_id, cmd.producer_epoch, cmd.coordinator_epoch, cmd.commit, tuple(parts))

            def answer(ans: Any, parts=parts) -> None:
                results = ans if ans is not None else [(tp, errors.NETWORK_EXCEPTION) for tp in parts]
                self._markers_written(slot, cmd, results)
            rpc.call(self.world, self.b.node, target.node, target.handle_write_txn_markers, body, answer,
                     self.config.request_timeout_ms + MARKER_EXTRA_MS)

    def _markers_written(self, slot: TxnSlot, cmd: MarkerCmd, results: list) -> None:
        if not self.coordinatorship.is_current(slot):
            return
        self._dispatch(slot, slot.core.on_markers_written(cmd.transactional_id, cmd.coordinator_epoch, results,
                                                          self.now()))
        self._arm()

    # ------------------------------------------------------------------ timers

    def _arm(self) -> None:
        deadlines = [d for s in self.slots.values() if (d := s.core.next_deadline_ms()) is not None]
        if not deadlines:
            return
        at = self.world.now_ms + max(0, min(deadlines) - self.now())
        if self._tick_at is not None and self.world.now_ms <= self._tick_at <= at:
            return
        self._tick_at = at
        self.world.on_node(self.b.node, at - self.world.now_ms, self._tick, at)

    def _tick(self, at: float) -> None:
        if self._tick_at != at:
            return
        self._tick_at = None
        now = self.now()
        for p in sorted(self.slots):
            slot = self.slots.get(p)
            if slot is None:
                continue
            d = slot.core.next_deadline_ms()
            if d is not None and d <= now:
                self._dispatch(slot, slot.core.on_tick(now))
        self._arm()


def write_txn_markers(broker, body: tuple, reply: Callable[[Any], None], timeout_ms: float) -> None:
    """The partition leader's side (node/server/txn_markers.py): one control batch per partition, acks=all;
    the answer, every partition with its error, once every append is done.  A marker on a __consumer_offsets
    partition goes to the group coordinator there; each marker appended is a ``txn_marker_written`` event."""
    pid, pepoch, coordinator_epoch, commit, parts = body
    results: dict[TP, int] = {}

    def finish() -> None:
        if len(results) == len(parts):
            reply([(tp, results[tp]) for tp in parts])

    for tp in parts:
        def done(code: int, offset: int, tp=tp) -> None:
            if tp in results:
                return
            results[tp] = code
            if code == errors.NONE and tp[0] == "__consumer_offsets":
                broker.coordinators.txn_marker_written(tp[1], pid, commit, offset)
            broker.emit("txn_marker_written", topic=tp[0], partition=tp[1], producer_id=pid, producer_epoch=pepoch,
                        coordinator_epoch=coordinator_epoch, commit=commit, offset=offset, error=code)
            finish()
        broker.replicas.append_marker(tp, pid, pepoch, coordinator_epoch, commit, timeout_ms, done)
