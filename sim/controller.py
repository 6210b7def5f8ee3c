"""A simulated broker's controller: ``controller/handlers.py``'s handlers over ``ControllerCore``, as
node/shells/controller_shell.py runs them, their commands carried out over the simulated world.

The handlers hold the order of every step (the election multi, the watches'
re-reads, every state write fenced by ``/controller_epoch``'s zkVersion, the
requests, the log lines); this module does their ZooKeeper calls through the
door, sends the requests over the simulated network, and ticks every 100 ms.  Events are
handled at once, one at a time (the simulator is single-threaded: the real
shell's event queue adds no interleaving the network does not already give).
The planted bug ``zombie-controller`` (the handlers' ``zombie``, the real shell's
switch too) keeps acting after a session expiry, unfenced.
"""
from __future__ import annotations

from typing import Any, Callable

from controller import handlers, redo
from controller.core import ControllerCore, ControllerSettings, LeaderAndIsrCmd, StopReplicaCmd, UpdateMetadataCmd
from replication.broker_state import Header, PartitionInfo
from sim import rpc
from kafkacommon import errors
from sim.zkdoor import CONNECTION_ERRORS, ZkDoor

TICK_MS = 100.0
SEND_TIMEOUT_MS = 1000.0     # a controller request's deadline (the socket timeout)
RETRY_BACKOFF_MS = 50.0      # node/net/channel.py's RETRY_BACKOFF_S


class SimChannel:
    """node/net/channel.py's BrokerChannel: one broker's requests in order, each retried until it is
    answered or the channel closes (the broker is gone, or this controller resigned)."""

    def __init__(self, world, src: str, target, on_answer=lambda msg, answer: None) -> None:
        self.world, self.src, self.target = world, src, target
        self.on_answer = on_answer    # (request, answer): the controller's LeaderAndIsrResponseReceived
        self.queue: list = []
        self.busy = False
        self.closed = False

    def send(self, msg: tuple) -> None:
        self.queue.append(msg)
        if not self.busy:
            self._next()

    def _next(self) -> None:
        if self.closed or not self.queue:
            self.busy = False
            return
        self.busy = True
        rpc.call(self.world, self.src, self.target.node, self.target.handle_controller_request, self.queue[0],
                 self._answered, SEND_TIMEOUT_MS)

    def _answered(self, answer) -> None:
        if self.closed:
            return
        if answer is None:
            self.world.on_node(self.src, RETRY_BACKOFF_MS, self._next)
            return
        msg = self.queue.pop(0)
        self.on_answer(msg, answer)
        self._next()

    def close(self) -> None:
        self.closed = True
        self.queue.clear()


def _info(v) -> PartitionInfo:
    s = v.state
    return PartitionInfo(v.topic, v.partition, s.leader, s.leader_epoch, tuple(s.isr), tuple(v.replicas),
                         v.zk_version, s.controller_epoch, v.is_new)


class SimController:
    def __init__(self, broker, zk: ZkDoor, settings: ControllerSettings, zombie: bool = False) -> None:
        self.b = broker
        self.world = broker.world
        self.zk = zk
        self.core = ControllerCore(settings, rng=self.world.rng.randrange)
        self.handlers = handlers.ControllerHandlers(self.core, broker.id, zombie=zombie)
        # controller/redo.py: each event's handler, its guard, the tick's order, the session's expiry, and what a
        # lost connection cut short (redone on a tick), as the broker's event thread runs them
        self.events = redo.ControllerEvents(self.handlers)
        self.redo = self.events.redo
        self.channels: dict[int, SimChannel] = {}
        self._watchers: dict[str, Callable[[Any], None]] = {}
        self._io: dict[type, Callable[[Any], Any]] = {   # the handlers' commands, carried out here
            handlers.ReadController: lambda c: zk.read_controller(watch=self._on(redo.CONTROLLER_CHANGE)),
            handlers.DeleteControllerIfOurs: lambda c: zk.delete_controller_if_ours(),
            handlers.ReadControllerAndEpoch: lambda c: zk.read_controller_with_epoch(
                watch=self._on(redo.CONTROLLER_CHANGE)),
            handlers.TryElect: lambda c: zk.try_elect_controller(
                self.b.id, self.b.now(), epoch=c.epoch,
                then=None if c.then is None else lambda: zk.snapshot_requests(**self._snapshot_watches(c.then))),
            handlers.ReadSnapshot: lambda c: handlers.Snapshot(*zk.read_context(
                topic_data_watch=self._on(redo.PARTITION_MODIFICATIONS), broker_id=self.b.id,
                **self._snapshot_watches(c))),
            handlers.CachedStates: lambda c: {},     # no metadata cache: a new controller reads the states
            handlers.ReadBrokers: lambda c: zk.read_brokers(watch=self._on(redo.BROKER_CHANGE)),
            handlers.ReadStates: lambda c: zk.read_states(c.tps),
            handlers.ReadDeletionRequests: lambda c: zk.read_deletion_requests(watch=self._on(redo.TOPIC_DELETION)),
            handlers.CreateTopic: lambda c: zk.create_topic(c.fence, c.assignment),
            handlers.WriteStates: lambda c: zk.write_states(c.fence, c.writes),
            handlers.DeleteTopic: self._unsupported,
            handlers.DropDeletionMarker: self._unsupported,
            handlers.WriteAssignment: lambda c: zk.write_topic_assignment(c.fence, c.assignment),
            handlers.ReadZkReassignment: lambda c: zk.read_zk_reassignment(
                watch=self._on(redo.ZK_PARTITION_REASSIGNMENT) if c.watch else None),
            handlers.WriteZkReassignment: lambda c: zk.write_zk_reassignment(c.fence, c.partitions),
            handlers.Send: lambda c: self._send(c.requests),
            handlers.CloseChannels: lambda c: self._close_channels(),
            handlers.Emit: lambda c: self.b.emit(c.name, **c.fields),
            handlers.Clock: lambda c: self.b.now(),
            handlers.MonoNs: lambda c: self.b.mono_ns(),
            handlers.Later: lambda c: self.world.on_node(self.b.node, 0.0, self._guard, c.event),
            redo.RegisterBroker: lambda c: self.b.register_again(),
            handlers.ReadLogDirEvents: lambda c: zk.read_log_dir_events(watch=self._on(redo.LOG_DIR_EVENT)),
            handlers.DeleteLogDirEvents: lambda c: zk.delete_log_dir_events(c.fence, list(c.sequences)),
        }

    def _snapshot_watches(self, c: handlers.ReadSnapshot) -> dict[str, Any]:
        return dict(broker_watch=self._on(redo.BROKER_CHANGE) if c.watch_brokers else None,
                    topic_watch=self._on(redo.TOPIC_CHANGE),
                    log_dir_watch=self._on(redo.LOG_DIR_EVENT) if c.log_dir_events else None)

    @property
    def active_controller_id(self) -> int:
        return self.handlers.active_controller_id

    @staticmethod
    def _unsupported(cmd: Any) -> None:
        raise NotImplementedError(f"the simulator deletes no topics ({type(cmd).__name__})")

    def _do(self, cmd: Any) -> Any:
        return self._io[type(cmd)](cmd)

    # ------------------------------------------------------------------ events

    def start(self) -> None:
        self._guard(redo.STARTUP)
        self.world.on_node(self.b.node, TICK_MS, self._tick)

    def _connected(self) -> bool:
        """kazoo's CONNECTED (sim/zkdoor.py): after the session's expiry, as soon as ZooKeeper answers again, so
        the register-and-re-elect event a lost connection cut short is redone then (as the broker's kazoo
        reconnects with a new session by itself and its event thread redoes it)."""
        return self.zk.connected()

    def _guard(self, event: str) -> None:
        """One event, handled at once (controller/redo.py's guard around it)."""
        self.events.run(event, self._do)

    def _tick(self) -> None:
        self.events.tick(self._connected, self._do)   # what is due again, then the core's timers
        # a broker that is not the controller only retries cut-short work: it ticks less often
        self.world.on_node(self.b.node, TICK_MS if self.core.active or self.redo.pending else 5 * TICK_MS,
                           self._tick)

    def _on(self, event: str) -> Callable[[Any], None]:
        """A watch's callback: the event it fires, handled at once (one callable per event, made once, as a
        client library keeps a path's watchers in a set)."""
        cb = self._watchers.get(event)
        if cb is None:
            cb = self._watchers[event] = lambda _watched: self._guard(event)
        return cb

    def config_changed(self) -> None:
        """The broker's config-change listener saw a change: the active controller reads the configs again."""
        if self.core.active:
            self._guard(redo.CONFIG_CHANGE)

    def _answered(self, bid: int, msg: tuple, answer: Any) -> None:
        """A broker's answer to one of our requests: a LeaderAndIsr's is an event (controller/log_dirs.py)."""
        if msg[0] != "LeaderAndIsr" or not isinstance(answer, tuple) or answer[0] != 0:
            return
        by_tp = {(p.topic, p.partition): 0 for p in msg[2]}
        by_tp.update(answer[1])
        if self.core.response_matters(bid, by_tp):
            try:   # a request (controller/redo.py): not redone; a later answer or a failover tells again
                self.events.request("leader_and_isr_response",
                                    self.handlers.leader_and_isr_response(bid, msg[1].broker_epoch, by_tp), self._do)
            except CONNECTION_ERRORS:
                pass

    def on_session_expired(self) -> None:
        """Kafka's Expire (controller/redo.py): nothing cut short is redone; resign (unless a zombie); then
        register anew and re-elect, one event (redone on a tick while ZooKeeper cannot take it)."""
        self._guard(self.events.expire(self._do))

    # ------------------------------------------------------------------ requests from brokers

    def request(self, name: str, steps: Any, fenced: Any) -> Any:
        """An admin request to this controller (the handlers' ``alter_reassignments``, ``elect_leaders_request``,
        ...) carried out now, guarded as the broker's event thread guards it (controller/redo.py) -> its answer
        (``fenced`` when the controller was fenced meanwhile); a lost connection raises (the request fails)."""
        return self.events.request(name, steps, self._do, fenced=fenced)

    def handle_alter_isr(self, payload: Any, reply) -> None:
        broker_id, broker_epoch, items = payload
        try:
            answer = self.events.request("alter_isr", self.handlers.alter_isr(broker_id, broker_epoch, items),
                                         self._do, fenced=(errors.NOT_CONTROLLER, {}))
        except CONNECTION_ERRORS:
            return   # no answer: the leader's request times out and it proposes again
        reply(answer)

    # ------------------------------------------------------------------ requests to brokers

    def _close_channels(self) -> None:
        for ch in self.channels.values():
            ch.close()
        self.channels.clear()

    def _send(self, requests: dict[int, list]) -> None:
        for gone in set(self.channels) - set(self.core.live):
            self.channels.pop(gone).close()
        for bid, cmds in requests.items():
            target = self.b.cluster.brokers.get(bid)
            reg = self.core.live.get(bid)
            if target is None or reg is None:
                continue
            ch = self.channels.get(bid)
            if ch is None:
                ch = self.channels[bid] = SimChannel(self.world, self.b.node, target,
                                                     lambda msg, answer, bid=bid: self._answered(bid, msg, answer))
            header = Header(self.b.id, self.core.epoch, reg.epoch)
            for cmd in cmds:
                if isinstance(cmd, LeaderAndIsrCmd):
                    msg = ("LeaderAndIsr", header, [_info(v) for v in cmd.partitions])
                elif isinstance(cmd, UpdateMetadataCmd):
                    msg = ("UpdateMetadata", header, [_info(v) for v in cmd.partitions],
                           [(r.broker_id, r.host, r.port, r.epoch) for r in cmd.live_brokers])
                elif isinstance(cmd, StopReplicaCmd):
                    msg = ("StopReplica", header, list(cmd.partitions), cmd.delete)
                else:
                    continue
                ch.send(msg)
