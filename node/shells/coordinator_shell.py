"""The group coordinator's I/O shell: one sans-IO core per __consumer_offsets partition led here.

* **The door.** One method per group API (``join_group(request) ->
  Answer[JoinGroupResponse]``, ``offset_commit``, ...), taking and answering
  :mod:`coordinator.messages` types; both front ends (the gRPC servicer and
  the Kafka listener, through node/server/groups_servicer.py's ``GroupsDoor``)
  call them.  A group belongs to partition ``partition_for(group, n)``; the
  request goes to the same API of that partition's
  :class:`coordinator.core.PartitionCoordinator` if this broker has one, else
  its future is answered NOT_COORDINATOR at once.
* **Write path.** A core's output may hold appends.  They go to the offsets
  partition as its leader (``ReplicaManager.append``, acks=all by default),
  while the core's lock is held so the log order is the order the core
  emitted; when the HW covers them (or the append fails) the core's
  ``on_append_done`` replays them and answers the parked requests.
* **Load and unload.** Leadership changes of offsets partitions arrive from
  the replica manager; one loader thread (Kafka's single scheduler thread)
  processes them in order.  A load reads the partition from its log start to
  its LEO in ``offsets.load.buffer.size`` chunks and replays every record
  through the same ``replay``; requests meanwhile get the core's loading answers.
* **Time.** One timer thread runs ``on_tick`` on every core whose
  ``next_deadline_ms`` has come (delayed joins, session expiry, offset expiry).
"""
from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from coordinator import load
from coordinator.core import GroupConfig, Output, PartitionCoordinator
from coordinator.leadership import Coordinatorship, Slot, start_appends
from coordinator.load import LoadStats
from coordinator.messages import (
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse, HeartbeatRequest,
    HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse,
    ListGroupsRequest, ListGroupsResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,
    OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse, TxnOffsetCommitRequest,
)
from coordinator.messages import OffsetDeleteRequest, OffsetDeleteResponse
from kafkacommon import errors
from kafkacommon.hashing import partition_for
from node.events import EventLog
from node.clock import now_ms
from zk.paths import OFFSETS_TOPIC

log = logging.getLogger(__name__)

# an API of the core: (core, handle, request, now_ms) -> Output
Handler = Callable[[PartitionCoordinator, Any, Any, int], Output]


def replay_log(core: PartitionCoordinator, read: Callable[[int], tuple[bytes, int, int] | None],
               lock: threading.Lock | None = None, stopping: threading.Event | None = None,
               end_offset: int | None = None) -> LoadStats:
    """coordinator/load.py's rule (the simulator runs the same), its problems logged here."""
    stats = load.replay_log(core, read, lock=lock, stopping=stopping.is_set if stopping is not None else None,
                            end_offset=end_offset)
    for _offset, message in stats.errors:
        log.warning("%s", message)
    return stats


class CoordinatorShell:
    def __init__(self, broker_id: int, replicas, events: EventLog, config: GroupConfig,
                 num_partitions: Callable[[], int], load_buffer_bytes: int = 5 << 20,
                 clock: Callable[[], int] = now_ms,
                 new_member_suffix: Callable[[], str] = lambda: str(uuid.uuid4())) -> None:
        self.broker_id = broker_id
        self.replicas = replicas
        self.events = events
        self.config = config
        self.num_partitions = num_partitions
        self.load_buffer_bytes = load_buffer_bytes
        self.clock = clock
        self.new_member_suffix = new_member_suffix
        self.coordinatorship = Coordinatorship(config, new_member_suffix)   # slot.io: the core's lock
        self._slots = self.coordinatorship.slots
        self._jobs: queue.Queue = queue.Queue()
        # appends' outcomes whose thread found the core's lock or its partition's taken (see _acked)
        self._completions = ThreadPoolExecutor(max_workers=1, thread_name_prefix="group-completions")
        self._timer = threading.Condition()
        self._stopping = threading.Event()
        self._threads = [threading.Thread(target=self._loader, name="group-loader", daemon=True),
                         threading.Thread(target=self._ticker, name="group-timer", daemon=True)]
        for t in self._threads:
            t.start()

    # ------------------------------------------------------------------ leadership (from the replica manager)

    def on_leadership(self, topic: str, partition: int, is_leader: bool, leader_epoch: int) -> None:
        if topic != OFFSETS_TOPIC:
            return
        self._jobs.put(("load" if is_leader else "unload", partition, leader_epoch))

    def _loader(self) -> None:
        while not self._stopping.is_set():
            try:
                kind, p, epoch = self._jobs.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                if kind == "load":
                    self._load(p, epoch)
                else:
                    self._unload(p, epoch)
            except Exception:
                log.exception("%s of offsets partition %d failed", kind, p)
            finally:
                self._jobs.task_done()

    def released(self, partitions: set[int]) -> bool:
        """None of ``partitions`` is coordinated here any more, and no load or unload is queued or under way
        (an unload's parked joins and syncs have been answered): what a stop waits for before it closes the
        Kafka listeners."""
        return self._jobs.unfinished_tasks == 0 and not partitions & set(self._slots)

    def _load(self, p: int, epoch: int) -> None:
        lock = threading.Lock()
        t0 = time.monotonic_ns()
        with lock:   # requests wait for the load to have begun
            started = self.coordinatorship.begin_load(p, epoch, self.clock(), io=lock)
        if started is None:
            return
        slot, out = started
        core = slot.core
        self._dispatch(slot, out)
        self.events.emit("coordinator_load_started", partition=p, leader_epoch=epoch)
        tp = (OFFSETS_TOPIC, p)
        stats = LoadStats()
        try:
            stats = replay_log(core, lambda offset: self.replicas.read_log(tp, offset, self.load_buffer_bytes),
                               lock=lock, stopping=self._stopping,
                               end_offset=self.coordinatorship.load_end_offset(lambda: self.replicas.checkpointed_hw(tp)))
        finally:  # as Kafka: the partition becomes owned even when its load failed
            with lock:
                out = self.coordinatorship.finish_load(slot, self.clock(), stats.end_offset)
            self._dispatch(slot, out)
        self.events.emit("coordinator_loaded", partition=p, leader_epoch=epoch, records=stats.read,
                         replayed=stats.records,
                         skipped_records=stats.skipped, bytes=stats.bytes, end_offset=stats.end_offset,
                         groups=len(core.group_ids()), duration_ms=round((time.monotonic_ns() - t0) / 1e6, 3))
        self._poke()

    def _unload(self, p: int, epoch: int) -> None:
        slot = self.coordinatorship.release(p, epoch)
        if slot is None:
            return
        with slot.io:
            groups, out = self.coordinatorship.unload(slot, self.clock())
        self._dispatch(slot, out)
        self.events.emit("coordinator_unloaded", partition=p, leader_epoch=epoch, groups=groups)

    # ------------------------------------------------------------------ the door: one method per API
    #
    # Each returns the future of the core's answer (NOT_COORDINATOR at once when this broker coordinates no
    # partition of the group, or the partition was unloaded meanwhile).  With ``block=False`` the request is
    # handed over only if that cannot block: when the core's lock and its offsets partition's are both free
    # at once (a load, or a log cleaner pass, holds them a while); else nothing is done and the answer is
    # None: call again where waiting is harmless.  The gRPC server's event loop calls with block=False.
    # A request handed over with block=False leaves the wake-up of the followers' parked fetches for its appends
    # to the caller's :meth:`wake_fetches` (the door calls it once per turn of its loop: group commit).

    def join_group(self, req: JoinGroupRequest, block: bool = True) -> Answer[JoinGroupResponse] | None:
        return self._request(req.group_id, PartitionCoordinator.join_group, req, block)

    def sync_group(self, req: SyncGroupRequest, block: bool = True) -> Answer[SyncGroupResponse] | None:
        return self._request(req.group_id, PartitionCoordinator.sync_group, req, block)

    def heartbeat(self, req: HeartbeatRequest, block: bool = True) -> Answer[HeartbeatResponse] | None:
        return self._request(req.group_id, PartitionCoordinator.heartbeat, req, block)

    def leave_group(self, req: LeaveGroupRequest, block: bool = True) -> Answer[LeaveGroupResponse] | None:
        return self._request(req.group_id, PartitionCoordinator.leave_group, req, block)

    def offset_commit(self, req: OffsetCommitRequest, block: bool = True) -> Answer[OffsetCommitResponse] | None:
        return self._request(req.group_id, PartitionCoordinator.offset_commit, req, block)

    def txn_offset_commit(self, req: TxnOffsetCommitRequest,
                          block: bool = True) -> Answer[OffsetCommitResponse] | None:
        return self._request(req.group_id, PartitionCoordinator.txn_offset_commit, req, block)

    def txn_marker_written(self, partition: int, producer_id: int, commit: bool, offset: int) -> None:
        """A transaction marker was written to offsets partition ``partition`` (WriteTxnMarkers, on this
        broker as its leader): the core commits or discards the producer's pending offsets."""
        slot = self._slots.get(partition)
        if slot is None:
            return      # not loaded here: whoever loads the partition reads the marker from the log
        with slot.io:
            if self._slots.get(partition) is not slot:
                return
            out = slot.core.complete_txn(producer_id, commit, offset, self.clock())
            self._start_appends(slot, out)
        self._finish(out)

    def offset_fetch(self, req: OffsetFetchRequest, block: bool = True) -> Answer[OffsetFetchResponse] | None:
        return self._request(req.group_id, PartitionCoordinator.offset_fetch, req, block)

    def describe_groups(self, req: DescribeGroupsRequest,
                        block: bool = True) -> Answer[DescribeGroupsResponse] | None:
        """Each group at its own core; with ``block=False``, a request for one group only."""
        if len(req.group_ids) == 1:
            return self._request(req.group_ids[0], PartitionCoordinator.describe_groups, req, block)
        if not block:
            return None
        parts = [self._request(g, PartitionCoordinator.describe_groups, DescribeGroupsRequest([g]), True)
                 for g in req.group_ids]
        return _gathered(parts, lambda rs: DescribeGroupsResponse([g for r in rs for g in r.groups]))

    def delete_groups(self, req: DeleteGroupsRequest, block: bool = True) -> Answer[DeleteGroupsResponse] | None:
        """Each group at its own core, one after the other; with ``block=False``, a request for one group only."""
        if len(req.group_ids) == 1:
            return self._request(req.group_ids[0], PartitionCoordinator.delete_groups, req, block)
        if not block:
            return None
        parts = [self._request(g, PartitionCoordinator.delete_groups, DeleteGroupsRequest([g]), True)
                 for g in req.group_ids]
        return _gathered(parts, lambda rs: DeleteGroupsResponse([x for r in rs for x in r.results]))

    def offset_delete(self, req: OffsetDeleteRequest, block: bool = True) -> Answer[OffsetDeleteResponse] | None:
        return self._request(req.group_id, PartitionCoordinator.offset_delete, req, block)

    def list_groups(self, req: ListGroupsRequest) -> ListGroupsResponse:
        """Every core answers for its groups (it may block on their locks); COORDINATOR_LOAD_IN_PROGRESS while
        a partition loads."""
        code, groups = errors.NONE, []
        for slot in list(self._slots.values()):
            fut = Answer()
            with slot.io:
                out = PartitionCoordinator.list_groups(slot.core, fut, req, self.clock())
                self._start_appends(slot, out)
            self._finish(out)
            if not fut.done():
                continue
            r = fut.result()
            if r.error_code != errors.NONE:
                code = r.error_code
            groups.extend(r.groups)
        if self.loading_partitions():
            code = errors.COORDINATOR_LOAD_IN_PROGRESS
        return ListGroupsResponse(code, sorted(groups, key=lambda g: g[0]))

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions())

    def _request(self, group_id: str, handler: Handler, req: Any, block: bool) -> Answer | None:
        """``handler(core, future, req, now)`` on the group's core, its appends started; the future answers."""
        fut = Answer()
        slot = self._slots.get(self.partition_of(group_id))
        if slot is None:
            fut.set_result(req.error_response(errors.NOT_COORDINATOR))
            return fut
        if block:
            with slot.io:
                out = self._take(slot, handler, fut, req)
            return self._answered(fut, req, out)
        if not slot.io.acquire(blocking=False):
            return None
        try:
            partition_lock = self.replicas.partition_lock((OFFSETS_TOPIC, slot.core.partition))
            if partition_lock is not None and not partition_lock.acquire(blocking=False):
                return None
            try:
                out = self._take(slot, handler, fut, req, wake_later=True)
            finally:
                if partition_lock is not None:
                    partition_lock.release()
        finally:
            slot.io.release()
        return self._answered(fut, req, out)

    def wake_fetches(self) -> None:
        """The followers' parked fetches woken for the appends of requests handed over with block=False."""
        self.replicas.wake_fetches()

    def _take(self, slot: Slot, handler: Handler, fut: Answer, req: Any, wake_later: bool = False) -> Output | None:
        """With ``slot.io`` (its lock) held: the core's handler takes ``req`` and its appends start; None when the
        slot was unloaded meanwhile."""
        if self._slots.get(slot.core.partition) is not slot:
            return None
        out = handler(slot.core, fut, req, self.clock())
        self._start_appends(slot, out, wake_later)
        return out

    def _answered(self, fut: Answer, req: Any, out: Output | None) -> Answer:
        """After the locks: log the core's events and answer what it answered at once."""
        if out is None:
            fut.set_result(req.error_response(errors.NOT_COORDINATOR))
        else:
            self._finish(out)
        return fut

    def loading_partitions(self) -> list[int]:
        return [p for p, s in list(self._slots.items()) if s.core.status == "loading"]

    # ------------------------------------------------------------------ outputs

    def _dispatch(self, slot: Slot, out: Output) -> None:
        if out.appends:
            with slot.io:
                self._start_appends(slot, out)
        self._finish(out)

    def _start_appends(self, slot: Slot, out: Output, wake_later: bool = False) -> None:
        """Called with the slot's lock held: coordinator.leadership.start_appends, to this broker's log
        (``wake_later``: see :meth:`wake_fetches`)."""
        def append(cmd) -> int | None:
            records = [(k, v, None) for k, v in cmd.records]
            done = self.replicas.append((OFFSETS_TOPIC, slot.core.partition), records, cmd.acks, cmd.timeout_ms,
                                        on_done=lambda code, s=slot, a=cmd.append_id: self._acked(s, a, code),
                                        producer=cmd.producer, inline=True, wake_later=wake_later,
                                        on_appended=lambda base, c=cmd: setattr(c, "base_offset", base))
            return None if done is None else done[0]
        start_appends(slot.core, out, append, self.clock)

    def _acked(self, slot: Slot, append_id: int, code: int) -> None:
        """An append's outcome, on the thread that knew it (the follower's Fetch that moved the HW, or the
        purgatory's): taken up there when the core's lock and its partition's are free at once, as Kafka's
        request handler completes a DelayedProduce and runs the coordinator's callback; else handed to this
        shell's completion thread, so that a Fetch never waits for a load or a cleaner pass."""
        if not slot.io.acquire(blocking=False):
            self._completions.submit(self._append_done, slot, append_id, code)
            return
        try:
            partition_lock = self.replicas.partition_lock((OFFSETS_TOPIC, slot.core.partition))
            if partition_lock is not None and not partition_lock.acquire(blocking=False):
                self._completions.submit(self._append_done, slot, append_id, code)
                return
            try:
                out = slot.core.on_append_done(append_id, code, self.clock())
                self._start_appends(slot, out)
            finally:
                if partition_lock is not None:
                    partition_lock.release()
        finally:
            slot.io.release()
        self._finish(out)

    def _append_done(self, slot: Slot, append_id: int, code: int) -> None:
        with slot.io:
            out = slot.core.on_append_done(append_id, code, self.clock())
            self._start_appends(slot, out)
        self._finish(out)

    def _finish(self, out: Output) -> None:
        self.events.log(*out.events)
        for handle, response in out.responses:
            if isinstance(handle, Answer) and not handle.done():
                handle.set_result(response)

    # ------------------------------------------------------------------ timers

    def _poke(self) -> None:
        with self._timer:
            self._timer.notify()

    def _ticker(self) -> None:
        while not self._stopping.is_set():
            now = self.clock()
            earliest = None
            for slot in list(self._slots.values()):
                with slot.io:
                    d = slot.core.next_deadline_ms()
                    if d is not None and d <= now:
                        out = slot.core.on_tick(now)
                        self._start_appends(slot, out)
                        d = slot.core.next_deadline_ms()
                    else:
                        out = None
                if out is not None:
                    self._finish(out)
                if d is not None:
                    earliest = d if earliest is None else min(earliest, d)
            wait_s = 0.1 if earliest is None else min(0.1, max(0.0, (earliest - self.clock()) / 1000))
            with self._timer:
                if wait_s > 0:
                    self._timer.wait(wait_s)

    def close(self) -> None:
        self._stopping.set()
        self._poke()
        self._completions.shutdown(wait=False)
        for p in list(self._slots):
            slot = self._slots.pop(p)
            with slot.io:
                out = slot.core.unload(self.clock())
            self._finish(out)


class Answer:
    """The future of one request's answer: the part of ``concurrent.futures.Future`` the doors and tests use
    (``done``, ``result``, ``set_result``, ``set_exception``, ``add_done_callback``), without the Condition
    (and its RLock) a ``Future`` makes for every request (issue 49: 3% of a broker's samples under commits).
    Set from any thread, once; later sets are ignored, as ``_finish`` ignores an answered handle."""

    __slots__ = ("_lock", "_done", "_value", "_error", "_callbacks", "_event")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[["Answer"], None]] | None = None
        self._event: threading.Event | None = None     # made by a blocking result() only

    def done(self) -> bool:
        return self._done

    def set_result(self, value: Any) -> None:
        self._settle(value, None)

    def set_exception(self, error: BaseException) -> None:
        self._settle(None, error)

    def _settle(self, value: Any, error: BaseException | None) -> None:
        with self._lock:
            if self._done:
                return
            self._value, self._error, self._done = value, error, True
            callbacks, self._callbacks, event = self._callbacks, None, self._event
        if event is not None:
            event.set()
        for fn in callbacks or ():
            try:
                fn(self)
            except Exception:
                log.exception("an answer's callback failed")

    def add_done_callback(self, fn: Callable[["Answer"], None]) -> None:
        """``fn(self)`` once the answer is set: at once (on this thread) if it is already."""
        with self._lock:
            if not self._done:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(fn)
                return
        fn(self)

    def result(self, timeout: float | None = None) -> Any:
        if not self._done:
            with self._lock:
                if not self._done and self._event is None:
                    self._event = threading.Event()
                event = self._event
            if event is not None and not event.wait(timeout):
                raise TimeoutError("no answer in time")
        if self._error is not None:
            raise self._error
        return self._value


def _gathered(parts: list[Answer], combine: Callable[[list[Any]], Any]) -> Answer:
    """A future of ``combine(the parts' results, in order)`` once every part is done (a part's exception
    becomes its exception)."""
    whole = Answer()
    if not parts:
        whole.set_result(combine([]))
        return whole
    left = [len(parts)]
    lock = threading.Lock()

    def one_done(_: Answer) -> None:
        with lock:
            left[0] -= 1
            if left[0]:
                return
        try:
            whole.set_result(combine([p.result() for p in parts]))
        except BaseException as e:   # a part's failure (or a cancelled part) is the whole's
            whole.set_exception(e)

    for p in parts:
        p.add_done_callback(one_done)
    return whole
