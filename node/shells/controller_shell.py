"""The controller's I/O shell: one event thread, ZooKeeper watches, fenced writes.

Like Kafka's ControllerEventManager, a single thread takes events from a
queue and does all the work; kazoo's watch callbacks and the gRPC handlers
only enqueue.  Decisions come from :class:`controller.core.ControllerCore`, and
the order of each event's steps from :mod:`controller.handlers` (the simulator
runs the same handlers); this module carries out their commands: it reads
ZooKeeper, makes the fenced writes, sends the requests and logs the events.
"""
from __future__ import annotations

import logging
import queue
import random
import threading
import time
from typing import Any, Callable

from controller import handlers
from controller.core import ControllerCore, ControllerSettings
from kafkacommon import errors
from node.net.channel import BrokerChannel, SharedBuild
from controller.redo import ControllerEvents, RegisterBroker
from node.shells.controller_events import (
    AlterIsr, AlterReassignments, ControlledShutdown, ElectLeaders, ElectLeadersRequest, Event, LeaderAndIsrAnswer,
    ListReassignments, Request, event_name,
)
from node.events import EventLog
from proto import kafkasim_pb2 as pb
from zk.client import CONNECTION_ERRORS, ZkClient

log = logging.getLogger(__name__)

TICK_S = 0.1

class ControllerShell:
    def __init__(self, broker_id: int, zk: ZkClient, settings: ControllerSettings, events: EventLog,
                 socket_timeout_s: float, register_broker: Callable[[], None],
                 cached_states: Callable[[], dict] = dict,
                 cached_names: Callable[[], tuple[Any, Any]] = lambda: ((), ()),
                 dial: Callable[[int, str], str] = lambda broker_id, advertised: advertised,
                 seed: int | None = None, clock_ms: Callable[[], int] = lambda: int(time.monotonic() * 1000),
                 zombie: bool = False):
        self.broker_id = broker_id
        self.zk = zk
        self.events = events
        self.socket_timeout_s = socket_timeout_s
        self._register_broker = register_broker
        self._cached_states = cached_states
        self._cached_names = cached_names   # (broker ids, topics) of this broker's metadata cache
        self._dial = dial
        self._clock_ms = clock_ms
        rng = random.Random(seed)
        self.core = ControllerCore(settings, rng=rng.randrange)
        # zombie: a planted bug for the chaos checkers' tests (never in a real broker): a controller that
        # lost its session keeps acting, and its writes are not fenced by /controller_epoch.
        self.handlers = handlers.ControllerHandlers(self.core, broker_id, zombie=zombie)
        self._queue: "queue.Queue[Event | Request]" = queue.Queue()
        self._pb_states: dict[Any, Any] = {}   # PartitionView -> its state encoded (wire.partition_field)
        self._thread = threading.Thread(target=self._run, name="controller-event-thread", daemon=True)
        self._channels: dict[int, BrokerChannel] = {}
        self._stopped = threading.Event()
        # controller/redo.py: each event's handler, its guard, the tick's order, the session's expiry, and the
        # events a lost connection cut short (redone once it is back), as the simulator's controller runs them
        self.events_core = ControllerEvents(self.handlers)
        self.redo = self.events_core.redo
        # the event lines of the event being handled, stamped when its handler made them and written together
        # before its next I/O (a failover's plan logs a line per partition between two ZooKeeper writes)
        self._stamped: list[dict] = []
        # a won election's snapshot, its first round trip sent behind the election multi (TryElect's ``then``)
        self._prefetched: tuple[handlers.ReadSnapshot, Any] | None = None
        self._watched_topics: set[str] = set()   # topic znodes with our data watch armed (partition changes)
        self._watchers: dict[Event, Callable[[Any], None]] = {}
        h = self.handlers
        self._requests: dict[type, Callable[[Any], Any]] = {   # each request's handler (its steps)
            ElectLeaders: lambda r: h.elect_leaders(r.tps),
            ControlledShutdown: lambda r: h.controlled_shutdown(r.broker_id, r.broker_epoch),
            AlterIsr: lambda r: h.alter_isr(r.broker_id, r.broker_epoch, r.items),
            ElectLeadersRequest: lambda r: h.elect_leaders_request(r.tps, r.election_type),
            AlterReassignments: lambda r: h.alter_reassignments(r.requested),
            ListReassignments: lambda r: h.list_reassignments(r.tps),
            LeaderAndIsrAnswer: lambda r: h.leader_and_isr_response(r.broker_id, r.broker_epoch, r.errors)}
        zkc = self.zk
        self._io: dict[type, Callable[[Any], Any]] = {  # the handlers' commands, carried out here
            handlers.ReadController: lambda c: zkc.read_controller(watch=self._on(Event.CONTROLLER_CHANGE)),
            handlers.DeleteControllerIfOurs: lambda c: zkc.delete_controller_if_ours(),
            handlers.ReadControllerAndEpoch: lambda c: zkc.read_controller_with_epoch(
                watch=self._on(Event.CONTROLLER_CHANGE)),
            handlers.TryElect: self._try_elect,
            handlers.ReadSnapshot: self._read_snapshot,
            handlers.CachedStates: lambda c: self._cached_states(),
            handlers.ReadBrokers: lambda c: zkc.read_brokers(watch=self._on(Event.BROKER_CHANGE)),
            handlers.ReadStates: lambda c: zkc.read_states(list(c.tps)),
            handlers.ReadDeletionRequests: lambda c: zkc.read_deletion_requests(watch=self._on(Event.TOPIC_DELETION)),
            handlers.CreateTopic: lambda c: zkc.create_topic(c.fence, c.assignment),
            handlers.WriteStates: lambda c: zkc.write_states(c.fence, list(c.writes)),
            handlers.DeleteTopic: lambda c: zkc.delete_topic(c.fence, c.assignment),
            handlers.DropDeletionMarker: lambda c: zkc.delete_deletion_marker(c.fence, c.topic),
            handlers.WriteAssignment: lambda c: zkc.write_topic_assignment(c.fence, c.assignment),
            handlers.ReadZkReassignment: lambda c: zkc.read_zk_reassignment(
                watch=self._on(Event.ZK_PARTITION_REASSIGNMENT) if c.watch else None),
            handlers.WriteZkReassignment: lambda c: zkc.write_zk_reassignment(c.fence, c.partitions),
            handlers.Send: lambda c: self._send(c.requests),
            handlers.CloseChannels: lambda c: self._close_channels(),
            handlers.Clock: lambda c: self._clock_ms(),
            handlers.MonoNs: lambda c: time.monotonic_ns(),
            handlers.Later: lambda c: self.enqueue(Event(c.event)),
            RegisterBroker: lambda c: self._register_broker(),
            handlers.ReadLogDirEvents: lambda c: zkc.read_log_dir_events(watch=self._on(Event.LOG_DIR_EVENT)),
            handlers.DeleteLogDirEvents: lambda c: zkc.delete_log_dir_events(c.fence, list(c.sequences)),
        }

    @property
    def active_controller_id(self) -> int:
        return self.handlers.active_controller_id

    @property
    def failovers(self) -> int:
        return self.handlers.failovers

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

    def request(self, req: Request, timeout_s: float) -> Any:
        """Enqueue a request (a Kafka admin request: ElectLeadersRequest, AlterReassignments, ListReassignments)
        and wait for its answer (its ``dropped`` answer when a session expiry drains the queue)."""
        self.enqueue(req)
        return req.future.result(timeout=timeout_s)

    def elect_leaders_request(self, tps: list[tuple[str, int]], election_type: int,
                              timeout_s: float) -> dict[tuple[str, int], tuple[int, str | None, int]]:
        """The Kafka ElectLeaders request: {tp: (error, message, the new leader or -1)}."""
        answer = self.request(ElectLeadersRequest(list(tps), election_type), timeout_s)
        return answer if answer is not None else {tp: (errors.NOT_CONTROLLER, None, -1) for tp in tps}

    def alter_reassignments(self, requested: dict, timeout_s: float) -> tuple[int, dict]:
        """AlterPartitionReassignments: (top-level error, {tp: (error, message)})."""
        return self.request(AlterReassignments(dict(requested)), timeout_s)

    def list_reassignments(self, tps: list[tuple[str, int]] | None, timeout_s: float) -> tuple[int, dict]:
        """ListPartitionReassignments: (top-level error, {tp: (replicas, adding, removing)})."""
        return self.request(ListReassignments(tps), timeout_s)

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

    def config_changed(self) -> None:
        """A topic's or this broker's config changed (the broker's config-change listener): the active
        controller reads the configs again (an unclean election newly allowed happens then)."""
        if self.core.active:
            self.enqueue(Event.CONFIG_CHANGE)

    def shutdown(self) -> None:
        """Stop the event thread after the event under way, dropping those still queued (their requests answered
        NOT_CONTROLLER: the next controller takes them), as Kafka's ControllerEventManager.close clears its queue
        before its ShutdownEventThread: a stopping controller with a backlog (AlterIsr after AlterIsr at 10,000
        partitions) would otherwise work it off before it resigns, and its successor redo it."""
        if self._thread.is_alive():
            self._drain()
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
            kind = event_name(event)
            try:
                self._handle(event)
            except Exception as e:  # keep the event thread alive, and say what happened
                log.exception("controller event %s failed", kind)
                self.events.emit("controller_error", event=kind, error=repr(e))
                if isinstance(event, Request) and not event.future.done():
                    event.future.set_exception(e)
            if event is Event.SHUTDOWN:
                return

    def _handle(self, event: Event | Request) -> None:
        try:
            self._handle_event(event)
        finally:
            self._write_events()

    def _handle_event(self, event: Event | Request) -> None:
        core = self.events_core
        if isinstance(event, Request):
            try:
                answer = core.request(event.kind, self._requests[type(event)](event), self._do, fenced=event.dropped)
            except CONNECTION_ERRORS as e:   # logged by the core; the caller gets the error and asks again
                self._write_events()
                event.future.set_exception(e)
            else:
                self._write_events()          # the request's lines before its answer
                event.future.set_result(answer)
        elif event is Event.TICK:
            core.tick(lambda: self.zk.connected, self._do)
        elif event is Event.EXPIRE:
            self._drain()     # Kafka's Expire drops the queued work too
            self.enqueue(Event(core.expire(self._do)))
        else:
            core.run(event.value, self._do)
            if event is Event.SHUTDOWN:
                self._stopped.set()

    def _do(self, cmd: Any) -> Any:
        kind = type(cmd)
        if kind is handlers.Emit:
            self._stamped.append(self.events.stamp(cmd.name, **cmd.fields))
            return None
        if kind is handlers.MonoNs or kind is handlers.Clock:
            return self._io[kind](cmd)
        if self._stamped:
            self._write_events()   # every line before the I/O that follows it
        if self._prefetched is not None and kind is not handlers.ReadSnapshot:
            self._prefetched = None   # a prefetch is only for the ReadSnapshot that follows the election
        return self._io[kind](cmd)

    def _write_events(self) -> None:
        if self._stamped:
            lines, self._stamped = self._stamped, []
            self.events.write_stamped(lines)

    def _snapshot_watches(self, cmd: handlers.ReadSnapshot) -> dict[str, Any]:
        return dict(broker_watch=self._on(Event.BROKER_CHANGE) if cmd.watch_brokers else None,
                    topic_watch=self._on(Event.TOPIC_CHANGE),
                    log_dir_watch=self._on(Event.LOG_DIR_EVENT) if cmd.log_dir_events else None)

    def _try_elect(self, cmd: handlers.TryElect) -> tuple[bool, int, int]:
        """The election multi; a ``then`` snapshot's first round trip goes right behind it (kept for the
        ReadSnapshot that follows, dropped by any other command)."""
        self._prefetched = None

        def then() -> None:
            # the context's second round trip too, on the names this broker's metadata cache holds (the dead
            # broker among them): read_snapshot makes it again only for a name outside them
            names = self._cached_names()
            self._prefetched = (cmd.then, self.zk.snapshot_requests(
                **self._snapshot_watches(cmd.then), guess=names if names[0] else None,
                topic_data_watch=self._topic_data_watch, watched=self._watched_topics, broker_id=self.broker_id))

        return self.zk.try_elect_controller(self.broker_id, int(time.time() * 1000), epoch=cmd.epoch,
                                            then=then if cmd.then is not None else None)

    def _read_snapshot(self, cmd: handlers.ReadSnapshot) -> handlers.Snapshot:
        sent, self._prefetched = self._prefetched, None
        snap = self.zk.read_snapshot(with_states=False, topic_data_watch=self._topic_data_watch,
                                     watched=self._watched_topics, broker_id=self.broker_id,
                                     first=sent[1] if sent is not None and sent[0] == cmd else None,
                                     **self._snapshot_watches(cmd))
        return handlers.Snapshot(snap.controller_epoch, snap.epoch_zk_version, snap.brokers, snap.topics,
                                 snap.round_trips, snap.broker_configs, tuple(snap.log_dir_events or ()))

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

    # ------------------------------------------------------------------ watches

    def _on(self, event: Event) -> Callable[[Any], None]:
        """A watch's callback (kazoo's thread): the event it fires, onto the queue.  One callable per event, made
        once: kazoo keeps a path's watchers in a set, so the same one armed again is not called twice."""
        cb = self._watchers.get(event)
        if cb is None:
            cb = self._watchers[event] = lambda _watched: self.enqueue(event)
        return cb

    def _topic_data_watch(self, event: Any) -> None:
        """A topic znode changed or went (Kafka's PartitionModificationsHandler): re-armed by the next read."""
        self._watched_topics.discard(event.path.rsplit("/", 1)[-1])
        self.enqueue(Event.PARTITION_MODIFICATIONS)

    # ------------------------------------------------------------------ requests to brokers

    def _send(self, requests: dict[int, list[Any]]) -> None:
        live = self.core.live
        for gone in set(self._channels) - set(live):
            self._channels.pop(gone).close()
        shared = SharedBuild(self._pb_states) if len(requests) > 1 else None
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
                ch.send_command(cmd, header, shared)
        if len(self._pb_states) > 2 * len(self.core.states) + 1000:   # states long replaced: start afresh
            self._pb_states.clear()

    def _on_response(self, broker_id: int, kind: str, request: Any, response: Any) -> None:
        if kind == "LeaderAndIsr" and response.error_code == errors.NONE:
            # every partition of the request with its error (NONE unless listed): Kafka's LeaderAndIsrResponse
            by_tp = {(p.topic, p.partition): errors.NONE for p in request.partitions}
            by_tp.update({(e.topic, e.partition): e.error_code for e in response.partition_errors})
            if self.core.response_matters(broker_id, by_tp):
                self.enqueue(LeaderAndIsrAnswer(broker_id, request.header.broker_epoch, by_tp))
        if response.error_code != errors.NONE:
            self.events.emit("controller_request_failed", request=kind, target=broker_id,
                             error=errors.name(response.error_code),
                             request_controller_epoch=request.header.controller_epoch)

    def _close_channels(self) -> None:
        """Kafka's ControllerChannelManager.shutdown on resignation: every channel stops, its queue dropped."""
        for ch in self._channels.values():
            ch.close()
        self._channels.clear()
