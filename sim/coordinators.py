"""A simulated broker's group coordinators: one ``PartitionCoordinator`` per offsets partition it leads.

As node/shells/coordinator_shell.py, with the broker's own code: one method
per group API (``join_group(request, reply)``, ...) hands the request to the
same API of the group's core, or answers NOT_COORDINATOR (the request's
``error_response``) when this broker has none; a leadership
gain queues a load, a loss an unload (``coordinator.leadership``'s steps and
epoch fencing; the log read from its start to its LEO and replayed by
``coordinator.load.replay_log``); the core's appends go to the offsets partition
as its leader, with the core's acks (``start_appends``); ``on_tick`` runs when the
earliest timer is due.  A load takes simulated time in proportion to the
records read (``LOAD_MS_PER_RECORD``).
"""
from __future__ import annotations

from typing import Any, Callable

from coordinator import messages as m
from coordinator.core import GroupConfig, Output, PartitionCoordinator
from coordinator.leadership import Coordinatorship, Slot, start_appends
from coordinator.load import replay_log
from kafkacommon import errors
from sim.log import ProducerBatch
from zk.paths import OFFSETS_TOPIC

LOAD_BASE_MS = 1.0
LOAD_MS_PER_RECORD = 0.002
TICK_MS = 10.0


class SimCoordinators:
    def __init__(self, broker, config: GroupConfig, suffix: Callable[[], str], load_to_hw: bool = False) -> None:
        self.b = broker
        self.world = broker.world
        # load_to_hw: the planted bug "load-to-hw" (the load stops at the checkpointed HW), in the core
        self.coordinatorship = Coordinatorship(config, suffix, planted_load_to_hw=load_to_hw)
        self.slots = self.coordinatorship.slots
        self._tick_at: float | None = None

    def now(self) -> int:
        return self.b.now()

    def num_partitions(self) -> int:
        return self.b.state.topic_partitions.get(OFFSETS_TOPIC, 0) or self.b.cfg.offsets_partitions

    # ------------------------------------------------------------------ leadership

    def on_role(self, topic: str, partition: int, is_leader: bool, epoch: int) -> None:
        if topic != OFFSETS_TOPIC:
            return
        if is_leader:
            self.world.on_node(self.b.node, 0.0, self._load, partition, epoch)
        else:
            self.world.on_node(self.b.node, 0.0, self._unload, partition, epoch)

    def _load(self, p: int, epoch: int) -> None:
        started = self.coordinatorship.begin_load(p, epoch, self.now())
        if started is None:
            return
        slot, out = started
        t0 = self.world.now_ms
        self._dispatch(slot, out)
        self.b.emit("coordinator_load_started", partition=p, leader_epoch=epoch)
        h = self.b.replicas.hosted.get((OFFSETS_TOPIC, p))
        records = h.log.log_end_offset if h is not None else 0
        self.world.on_node(self.b.node, LOAD_BASE_MS + records * LOAD_MS_PER_RECORD, self._finish_load, p, slot,
                           t0)

    def _finish_load(self, p: int, slot: Slot, t0: float) -> None:
        if not self.coordinatorship.is_current(slot):
            return
        end = self.coordinatorship.load_end_offset(lambda: self.b.hw_checkpoint().get((OFFSETS_TOPIC, p), 0))

        def read(offset: int):
            hh = self.b.replicas.hosted.get((OFFSETS_TOPIC, p))
            return None if hh is None else hh.log.read_bytes(offset)

        stats = replay_log(slot.core, read, end_offset=end)
        self._dispatch(slot, self.coordinatorship.finish_load(slot, self.now()))
        self.b.emit("coordinator_loaded", partition=p, leader_epoch=slot.epoch, records=stats.read,
                    replayed=stats.records, skipped_records=stats.skipped, bytes=stats.bytes,
                    end_offset=stats.end_offset, groups=len(slot.core.group_ids()),
                    duration_ms=round(self.world.now_ms - t0, 3))
        self._arm()

    def _unload(self, p: int, epoch: int) -> None:
        slot = self.coordinatorship.release(p, epoch)
        if slot is None:
            return
        groups, out = self.coordinatorship.unload(slot, self.now())
        self._dispatch(slot, out)
        self.b.emit("coordinator_unloaded", partition=p, leader_epoch=epoch, groups=groups)

    # ------------------------------------------------------------------ requests

    def join_group(self, req: m.JoinGroupRequest, reply: Callable[[m.JoinGroupResponse], None]) -> None:
        self._request(PartitionCoordinator.join_group, req, reply)

    def sync_group(self, req: m.SyncGroupRequest, reply: Callable[[m.SyncGroupResponse], None]) -> None:
        self._request(PartitionCoordinator.sync_group, req, reply)

    def heartbeat(self, req: m.HeartbeatRequest, reply: Callable[[m.HeartbeatResponse], None]) -> None:
        self._request(PartitionCoordinator.heartbeat, req, reply)

    def leave_group(self, req: m.LeaveGroupRequest, reply: Callable[[m.LeaveGroupResponse], None]) -> None:
        self._request(PartitionCoordinator.leave_group, req, reply)

    def offset_commit(self, req: m.OffsetCommitRequest, reply: Callable[[m.OffsetCommitResponse], None]) -> None:
        self._request(PartitionCoordinator.offset_commit, req, reply)

    def txn_offset_commit(self, req: m.TxnOffsetCommitRequest,
                          reply: Callable[[m.OffsetCommitResponse], None]) -> None:
        self._request(PartitionCoordinator.txn_offset_commit, req, reply)

    def txn_marker_written(self, partition: int, producer_id: int, commit: bool, offset: int) -> None:
        """A transaction marker written to offsets partition ``partition`` as its leader here (WriteTxnMarkers):
        the core commits or discards the producer's pending offsets (a partition not loaded here reads the
        marker from the log when it loads)."""
        slot = self.slots.get(partition)
        if slot is None:
            return
        self._dispatch(slot, slot.core.complete_txn(producer_id, commit, offset, self.now()))
        self._arm()

    def offset_fetch(self, req: m.OffsetFetchRequest, reply: Callable[[m.OffsetFetchResponse], None]) -> None:
        self._request(PartitionCoordinator.offset_fetch, req, reply)

    def _request(self, handler: Callable[[PartitionCoordinator, Any, Any, int], Output], req: Any,
                 reply: Callable[[Any], None]) -> None:
        """``handler(core, reply, req, now)`` on the group's core; NOT_COORDINATOR when there is none here."""
        slot = self.coordinatorship.slot_for(req.group_id, self.num_partitions())
        if slot is None:
            reply(req.error_response(errors.NOT_COORDINATOR))
            return
        out = handler(slot.core, reply, req, self.now())
        self._dispatch(slot, out)
        self._arm()

    def _dispatch(self, slot: Slot, out: Output) -> None:
        def append(cmd) -> int | None:
            st = {"sync": True, "code": None}

            def done(code: int, base: int, s=slot, a=cmd.append_id, st=st, c=cmd) -> None:
                if base >= 0:
                    c.base_offset = base   # as the broker's on_appended: where the records went
                if st["sync"]:
                    st["code"] = code      # answered at once: start_appends feeds it back, in order
                else:
                    self._append_done(s, a, code)

            producer = None if cmd.producer is None else ProducerBatch(cmd.producer[0], cmd.producer[1], -1, True)
            self.b.replicas.append((OFFSETS_TOPIC, slot.core.partition), list(cmd.records), cmd.acks,
                                   cmd.timeout_ms, done, producer)
            st["sync"] = False
            return st["code"]

        start_appends(slot.core, out, append, self.now)
        self._finish(out)

    def _append_done(self, slot: Slot, append_id: int, code: int) -> None:
        self._dispatch(slot, slot.core.on_append_done(append_id, code, self.now()))
        self._arm()

    def _finish(self, out: Output) -> None:
        self.b.log(*out.events)
        for handle, response in out.responses:
            if callable(handle):
                handle(response)

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
