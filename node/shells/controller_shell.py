"""The controller's I/O shell: one event thread, ZooKeeper watches, fenced writes.

Like Kafka's ControllerEventManager, a single thread takes events from a
queue and does all the work; kazoo's watch callbacks and the gRPC handlers
only enqueue.  Decisions come from :class:`controller.core.ControllerCore`;
this module reads ZooKeeper for it, makes its writes (every one fenced by
/controller_epoch's zkVersion), and sends its requests.
"""
from __future__ import annotations

import logging
import queue
import random
import threading
import time
from typing import Any, Callable

from controller.core import ControllerCore, ControllerSettings, Plan
from kafkacommon import errors
from node.server import wire
from node.shells.channel import BrokerChannel
from node.shells.controller_events import (redo_on_connection_loss, AlterIsr, ControlledShutdown, ElectLeaders,
                                           Event, Request)
from node.events import EventLog
from proto import kafkasim_pb2 as pb
from zk.client import CONNECTION_ERRORS, ControllerMovedError, StateVersionConflict, ZkClient

log = logging.getLogger(__name__)

TICK_S = 0.1

class ControllerShell:
    def __init__(self, broker_id: int, zk: ZkClient, settings: ControllerSettings, events: EventLog,
                 socket_timeout_s: float, register_broker: Callable[[], None],
                 cached_states: Callable[[], dict] = dict,
                 dial: Callable[[int, str], str] = lambda broker_id, advertised: advertised,
                 seed: int | None = None, clock_ms: Callable[[], int] = lambda: int(time.monotonic() * 1000),
                 zombie: bool = False):
        self.broker_id = broker_id
        # A planted bug for the chaos checkers' tests (never in a real broker): a controller that
        # lost its session keeps acting, and its writes are not fenced by /controller_epoch.
        self._zombie = zombie
        self.zk = zk
        self.events = events
        self.socket_timeout_s = socket_timeout_s
        self._register_broker = register_broker
        self._cached_states = cached_states
        self._dial = dial
        self._clock_ms = clock_ms
        rng = random.Random(seed)
        self.core = ControllerCore(settings, rng=rng.randrange)
        self._queue: "queue.Queue[Event | Request]" = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="controller-event-thread", daemon=True)
        self._channels: dict[int, BrokerChannel] = {}
        self._stopped = threading.Event()
        self.active_controller_id = -1
        self._orphan_suspected = False  # /controller may be ours while we do not act: re-check on ticks
        self._redo: list[Event] = []    # events a lost connection cut short, redone once it is back
        self.failovers = 0
        self._last_write_ms = 0.0
        self._events: dict[Event, Callable[[], None]] = {
            Event.STARTUP: self._elect, Event.CONTROLLER_CHANGE: self._on_controller_change,
            Event.BROKER_CHANGE: self._on_broker_change, Event.TOPIC_CHANGE: self._on_topic_change,
            Event.TOPIC_DELETION: self._on_topic_deletion, Event.EXPIRE: self._on_expire,
            Event.REGISTER_AND_REELECT: self._on_register_and_reelect, Event.TICK: self._handle_tick,
            Event.SHUTDOWN: self._on_shutdown}
        self._requests: dict[type, Callable[[Any], None]] = {
            ElectLeaders: self._on_elect_leaders, ControlledShutdown: self._on_controlled_shutdown,
            AlterIsr: self._on_alter_isr}

    # ------------------------------------------------------------------ public (any thread)

    @property
    def is_active(self) -> bool:
        return self.core.active

    @property
    def epoch(self) -> int:
        return self.core.epoch if self.core.active else 0

    def start(self) -> None:
        self._thread.start()
        self.enqueue(Event.STARTUP)

    def enqueue(self, event: Event | Request) -> None:
        self._queue.put(event)

    def on_session_state(self, state: str) -> None:
        """kazoo listener: LOST = our session expired; CONNECTED after LOST = a new session."""
        if state == "LOST":
            self.enqueue(Event.EXPIRE)

    def elect_leaders(self, tps: list[tuple[str, int]] | None, timeout_s: float = 10.0) -> dict[tuple[str, int], int]:
        req = ElectLeaders(tps)
        self.enqueue(req)
        return req.future.result(timeout=timeout_s)

    def controlled_shutdown(self, broker_id: int, broker_epoch: int,
                            timeout_s: float = 10.0) -> tuple[int, list[tuple[str, int]]]:
        """Handle a ControlledShutdown (from the network, or from this broker itself)."""
        req = ControlledShutdown(broker_id, broker_epoch)
        self.enqueue(req)
        return req.future.result(timeout=timeout_s)

    def alter_isr(self, broker_id: int, broker_epoch: int, items: list, timeout_s: float = 10.0):
        """Handle an AlterIsr from a partition leader: (top error, {tp: (error, state, zk_version)})."""
        req = AlterIsr(broker_id, broker_epoch, items)
        self.enqueue(req)
        return req.future.result(timeout=timeout_s)

    def shutdown(self) -> None:
        if self._thread.is_alive():
            self.enqueue(Event.SHUTDOWN)
            self._thread.join(timeout=5)
        self._close_channels()

    # ------------------------------------------------------------------ event thread

    def _run(self) -> None:
        next_tick = time.monotonic() + TICK_S
        while not self._stopped.is_set():
            # Overdue timers run before queued events: a controller resumed after
            # a pause does its periodic work before it learns (from the Expire
            # event) that it was replaced, which is exactly a zombie's behaviour.
            now = time.monotonic()
            if now >= next_tick:
                event: Event | Request = Event.TICK
                next_tick = now + TICK_S
            else:
                try:
                    event = self._queue.get(timeout=next_tick - now)
                except queue.Empty:
                    continue
            kind = event.kind if isinstance(event, Request) else event.value
            try:
                self._handle(event)
            except ControllerMovedError as e:
                self.events.emit("controller_fenced", epoch=self.core.epoch, detail=str(e))
                self._resign("fenced")
            except CONNECTION_ERRORS as e:
                log.warning("controller event %s cut short by the ZooKeeper connection: %r", kind, e)
                self.events.emit("controller_error", event=kind, error=repr(e),
                                 redo=redo_on_connection_loss(event))
                if isinstance(event, Request):
                    event.future.set_exception(e)
                elif redo_on_connection_loss(event) and event not in self._redo:
                    self._redo.append(event)
            except Exception as e:  # keep the event thread alive, and say what happened
                log.exception("controller event %s failed", kind)
                self.events.emit("controller_error", event=kind, error=repr(e))
                if isinstance(event, Request):
                    event.future.set_exception(e)
            if event is Event.SHUTDOWN:
                return

    def _handle(self, event: Event | Request) -> None:
        if isinstance(event, Request):
            self._requests[type(event)](event)
        else:
            self._events[event]()

    def _on_broker_change(self) -> None:
        if self.core.active:
            brokers = self.zk.read_brokers(watch=self._broker_watch)
            self._execute(self.core.on_broker_change(brokers))

    def _on_topic_deletion(self) -> None:
        if self.core.active:
            requested = self.zk.read_deletion_requests(watch=self._deletion_watch)
            if requested:
                self._execute(self.core.on_topic_deletion(requested))

    def _on_topic_change(self) -> None:
        if self.core.active:
            snap = self.zk.read_snapshot(topic_watch=self._topic_watch)
            self._execute(self.core.on_topics_change(snap.topics))

    def _on_expire(self) -> None:
        # Kafka's Expire: drop queued work (and work waiting to be redone), resign, then
        # register anew and re-elect, which decides everything again.
        self._drain()
        self._redo.clear()
        if self.core.active and not self._zombie:
            self._resign("session expired")
        self.events.emit("zk_session_expired")
        self.enqueue(Event.REGISTER_AND_REELECT)

    def _on_register_and_reelect(self) -> None:
        self._register_broker()
        if self._zombie and self.core.active:
            self.enqueue(Event.BROKER_CHANGE)  # the planted bug: carry on as controller, unfenced
        else:
            self._elect()

    def _on_shutdown(self) -> None:
        if self.core.active:
            self._resign("shutdown")
        self._stopped.set()

    def _on_elect_leaders(self, req: ElectLeaders) -> None:
        if not self.core.active:
            req.future.set_result({tp: errors.NOT_CONTROLLER for tp in (req.tps or [])}
                                  or {("", -1): errors.NOT_CONTROLLER})
            return
        plan = self.core.elect_preferred(req.tps, reason="preferred_admin")
        self._execute(plan)
        req.future.set_result({(w.topic, w.partition): errors.NONE for w in plan.writes})

    def _on_controlled_shutdown(self, req: ControlledShutdown) -> None:
        code, plan, remaining = self.core.on_controlled_shutdown(req.broker_id, req.broker_epoch)
        if code == errors.NONE:
            self._execute(plan)
            if not self.core.active:  # fenced while writing
                code = errors.NOT_CONTROLLER
        req.future.set_result((code, remaining))

    def _on_alter_isr(self, req: AlterIsr) -> None:
        code, plan, results = self.core.on_alter_isr(req.broker_id, req.broker_epoch, req.items)
        if code == errors.NONE and plan.writes:
            try:
                self._execute(plan, retry_conflicts=False)
            except StateVersionConflict as e:
                self.events.emit("zk_write_conflict", path=e.path)
                results, retry = self.core.on_alter_isr_conflict(
                    plan, results, self.zk.read_states(sorted(self.core.states)))
                self._execute(retry)
            if not self.core.active:
                code = errors.NOT_CONTROLLER
        req.future.set_result((code, self.core.alter_isr_answer(results)))

    def _handle_tick(self) -> None:
        if self._redo and self.zk.connected:
            for event in self._redo:
                self.enqueue(event)
            self._redo.clear()
        if self.core.active:
            plan = self.core.on_tick(self._clock_ms())
            if not plan.empty:
                self._execute(plan)
        elif self._orphan_suspected and self.zk.connected:
            self._elect()

    def _drain(self) -> None:
        while True:
            try:
                event = self._queue.get_nowait()
            except queue.Empty:
                return
            if isinstance(event, Request):
                event.drop()
            elif event is Event.SHUTDOWN:
                self._stopped.set()

    # ------------------------------------------------------------------ election

    def _controller_watch(self, _event: Any) -> None:
        self.enqueue(Event.CONTROLLER_CHANGE)

    def _broker_watch(self, _event: Any) -> None:
        self.enqueue(Event.BROKER_CHANGE)

    def _topic_watch(self, _event: Any) -> None:
        self.enqueue(Event.TOPIC_CHANGE)

    def _deletion_watch(self, _event: Any) -> None:
        self.enqueue(Event.TOPIC_DELETION)

    def _elect(self) -> None:
        current = self.zk.read_controller(watch=self._controller_watch)
        if current is not None:
            self.active_controller_id = current
            if current == self.broker_id and not self.core.active:
                # /controller names us but we are not acting (KAFKA-13407): delete it, which
                # fires everyone's watch (ours too) and runs the election again.
                deleted = self.zk.delete_controller_if_ours()
                self.events.emit("controller_znode_orphaned", controller_id=current, deleted=deleted)
                self._orphan_suspected = not deleted
            else:
                self._orphan_suspected = False
            return
        t0 = time.monotonic_ns()
        won, epoch, version = self.zk.try_elect_controller(self.broker_id, int(time.time() * 1000))
        if not won:
            winner = self.zk.read_controller(watch=self._controller_watch)
            self.active_controller_id = -1 if winner is None else winner
            self.events.emit("controller_election_lost", controller_id=self.active_controller_id, epoch=epoch)
            return
        self.active_controller_id = self.broker_id
        self.events.emit("controller_elected", epoch=epoch, epoch_zk_version=version,
                         elect_ms=round((time.monotonic_ns() - t0) / 1e6, 3))
        try:
            self._on_failover(epoch, version)
        except ControllerMovedError:
            raise
        except Exception:
            # We won but could not act: give the role back rather than hold /controller idle.
            self._resign("failover failed")
            self._orphan_suspected = True
            try:
                self._orphan_suspected = not self.zk.delete_controller_if_ours()
            except Exception:
                pass  # retried from the tick once ZooKeeper answers
            raise

    def _on_controller_change(self) -> None:
        current = self.zk.read_controller(watch=self._controller_watch)
        if self.core.active and current != self.broker_id:
            self._resign("controller znode changed" if current is not None else "controller znode deleted")
        if current is None:
            self._elect()
        else:
            self.active_controller_id = current

    def _on_failover(self, epoch: int, version: int) -> None:
        """Load the context and act on it.

        The partition states come from this broker's metadata cache when it
        covers every partition (every broker gets them all through
        UpdateMetadata), which keeps the 1,000-znode read off the critical
        path.  That is safe: every write is conditional on the cached
        zkVersion, so a stale entry fails the atomic multi (BADVERSION) and
        the shell re-reads; and right after acting, :meth:`_verify_states`
        re-reads every state and reconciles any difference.
        """
        t0 = time.monotonic_ns()
        snap = self.zk.read_snapshot(broker_watch=self._broker_watch, topic_watch=self._topic_watch,
                                     with_states=False)
        if snap.epoch_zk_version != version:
            raise ControllerMovedError(f"epoch moved to {snap.controller_epoch} while loading")
        wanted = [(t, p) for t, a in snap.topics.items() for p in a.partitions]
        cache = self._cached_states()
        from_cache = bool(wanted) and all(tp in cache for tp in wanted)
        if from_cache:
            snap.states = {tp: cache[tp] for tp in wanted}
        else:
            snap.states = self.zk.read_states(wanted)
            snap.round_trips += 1
        load_ms = (time.monotonic_ns() - t0) / 1e6
        self.failovers += 1
        t1 = time.monotonic_ns()
        plan = self.core.on_failover(epoch, version, snap.brokers, snap.topics, snap.states, self._clock_ms())
        decide_ms = (time.monotonic_ns() - t1) / 1e6
        written = self._execute(plan)
        self.events.emit("controller_failover_done", epoch=epoch, load_ms=round(load_ms, 3),
                         decide_ms=round(decide_ms, 3), write_ms=round(self._last_write_ms, 3),
                         zk_round_trips=snap.round_trips, partitions=len(snap.states),
                         states_from_cache=from_cache, states_written=written,
                         total_ms=round((time.monotonic_ns() - t0) / 1e6, 3))
        if from_cache and self.core.active:
            self._verify_states(plan)
        if self.core.active:
            self.enqueue(Event.TOPIC_DELETION)  # resume deletions requested before (and arm the watch)

    def _verify_states(self, acted: Plan) -> None:
        """Re-read every partition state; where the cache we decided from was stale, decide again."""
        written = {(w.topic, w.partition) for w in acted.writes}
        fresh = self.zk.read_states([tp for tp in self.core.states])
        stale = {tp: st for tp, st in fresh.items() if tp not in written and st != self.core.states.get(tp)}
        missing = [tp for tp in self.core.states if tp not in fresh]
        self.events.emit("controller_cache_verified", epoch=self.core.epoch, partitions=len(fresh),
                         stale=len(stale), missing=len(missing))
        if stale:
            self._execute(self.core.reload_states(stale))

    def _resign(self, reason: str) -> None:
        epoch = self.core.epoch
        was_active = self.core.active
        self.core.on_resign()
        self._close_channels(drain=True)
        if was_active:
            self.events.emit("controller_resigned", epoch=epoch, reason=reason)

    # ------------------------------------------------------------------ carrying out a plan

    def _execute(self, plan: Plan, depth: int = 0, retry_conflicts: bool = True) -> int:
        """Make the plan's fenced writes, then log its events and send its requests.

        On BADVERSION the states are re-read and decided again, unless
        ``retry_conflicts`` is False (a request's own change, such as AlterIsr,
        cannot be re-derived): then StateVersionConflict reaches the caller.
        """
        if not self.core.active:
            return 0
        for name, fields in plan.observed:
            self.events.emit(name, controller_epoch=self.core.epoch, **fields)
        self._last_write_ms = 0.0
        t0 = time.monotonic_ns()
        versions: dict[tuple[str, int], int] = {}
        if plan.has_writes:
            try:
                for topic in plan.topic_creates:
                    self.zk.create_topic(self._fence(), topic)
                writes = plan.writes
                if self._zombie:  # the planted bug: no fencing at all, not even the states' zkVersions
                    writes = [w._replace(zk_version=-1) if w.zk_version is not None else w for w in writes]
                versions = self.zk.write_states(self._fence(), writes)
                for a in plan.topic_deletes:
                    self.zk.delete_topic(self._fence(), a)
                for topic in plan.markers_to_drop:
                    self.zk.delete_deletion_marker(self._fence(), topic)
            except ControllerMovedError as e:
                self.events.emit("zk_write_fenced", epoch=self.core.epoch, writes=len(plan.writes), detail=str(e))
                self._resign("fenced by a newer controller epoch")
                return 0
            except StateVersionConflict as e:
                if depth >= 3 or not retry_conflicts:
                    raise
                self.events.emit("zk_write_conflict", path=e.path)
                states = self.zk.read_states([(t, p) for t in self.core.topics for p in self.core.topics[t].partitions])
                retry = self.core.reload_states(states)
                retry.full_sync |= plan.full_sync
                return self._execute(retry, depth + 1)
            write_ms = (time.monotonic_ns() - t0) / 1e6
            self._last_write_ms = write_ms
        requests = self.core.commit(plan, versions)
        self._send(requests)  # first: brokers learn their new roles before we write the log lines
        for w in plan.writes:
            s = w.state
            self.events.emit("partition_state_written", topic=w.topic, partition=w.partition, reason=w.reason,
                             leader=s.leader, leader_epoch=s.leader_epoch, isr=list(s.isr),
                             controller_epoch=s.controller_epoch, zk_version=versions[(w.topic, w.partition)],
                             previous_leader=w.previous.leader if w.previous else None,
                             previous_isr=list(w.previous.isr) if w.previous else None)
        if plan.writes:
            self.events.emit("partition_states_written", epoch=self.core.epoch, count=len(plan.writes),
                             write_ms=round(write_ms, 3), mono_ns_written=t0 + int(write_ms * 1e6))
        for a in plan.topic_deletes:
            self.events.emit("topic_deleted", controller_epoch=self.core.epoch, topic=a.topic,
                             partitions=len(a.partitions))
        for name, fields in plan.events:
            self.events.emit(name, controller_epoch=self.core.epoch, **fields)
        return len(plan.writes)

    def _fence(self) -> int:
        """The /controller_epoch version every write is conditional on (-1, which matches any
        version, only with the planted zombie bug)."""
        return -1 if self._zombie else self.core.epoch_zk_version

    def _send(self, requests: dict[int, list[Any]]) -> None:
        live = self.core.live
        for gone in set(self._channels) - set(live):
            self._channels.pop(gone).close()
        for b, cmds in requests.items():
            reg = live[b]
            target = self._dial(b, reg.endpoint())
            ch = self._channels.get(b)
            if ch is None or ch.target != target:
                if ch is not None:
                    ch.close()
                ch = self._channels[b] = BrokerChannel(b, target, self.socket_timeout_s, self._on_response)
            header = pb.ControllerHeader(controller_id=self.broker_id, controller_epoch=self.core.epoch,
                                         broker_epoch=reg.epoch)
            for cmd in cmds:
                ch.send(wire.command_to_pb(cmd, header))

    def _on_response(self, broker_id: int, kind: str, request: Any, response: Any) -> None:
        if response.error_code != errors.NONE:
            self.events.emit("controller_request_failed", request=kind, target=broker_id,
                             error=errors.name(response.error_code),
                             request_controller_epoch=request.header.controller_epoch)

    def _close_channels(self, drain: bool = False) -> None:
        for ch in self._channels.values():
            ch.close(drain=drain)
        self._channels.clear()
