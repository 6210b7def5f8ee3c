"""A simulated broker's controller: ``ControllerCore`` driven as node/shells/controller_shell.py drives it.

Election through ``/controller`` (the ephemeral create and the epoch bump in
one multi), watches on ``/controller`` and ``/brokers/ids``, every state write
fenced by ``/controller_epoch``'s zkVersion, a tick every 100 ms, and the
core's requests sent to the brokers over the simulated network.  Events are
handled at once, one at a time (the simulator is single-threaded: the real
shell's event queue adds no interleaving the network does not already give).
The planted bug ``zombie-controller`` keeps acting after a session expiry,
unfenced, as the real shell's switch does.
"""
from __future__ import annotations

from typing import Any

from controller.core import ControllerCore, ControllerSettings, LeaderAndIsrCmd, Plan, StopReplicaCmd, UpdateMetadataCmd
from kafkacommon import errors
from node.server.broker_state import Header, PartitionInfo
from sim import rpc
from sim.zkdoor import CONNECTION_ERRORS, ControllerMovedError, StateVersionConflict, ZkDoor

TICK_MS = 100.0
SEND_TIMEOUT_MS = 1000.0     # a controller request's deadline (the socket timeout)
RETRY_BACKOFF_MS = 50.0      # node/shells/channel.py's RETRY_BACKOFF_S


class SimChannel:
    """node/shells/channel.py's BrokerChannel: one broker's requests in order, each retried until it is
    answered or the channel closes (the broker is gone, or this controller resigned)."""

    def __init__(self, world, src: str, target) -> None:
        self.world, self.src, self.target = world, src, target
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
        self.queue.pop(0)
        self._next()

    def close(self) -> None:
        self.closed = True
        self.queue.clear()


def _info(v) -> PartitionInfo:
    s = v.state
    return PartitionInfo(v.topic, v.partition, s.leader, s.leader_epoch, tuple(s.isr), tuple(v.replicas),
                         v.zk_version, s.controller_epoch)


class SimController:
    def __init__(self, broker, zk: ZkDoor, settings: ControllerSettings, zombie: bool = False) -> None:
        self.b = broker
        self.world = broker.world
        self.zk = zk
        self.zombie = zombie
        self.core = ControllerCore(settings, rng=self.world.rng.randrange)
        self.active_controller_id = -1
        self._redo = False
        self.channels: dict[int, SimChannel] = {}

    # ------------------------------------------------------------------ events

    def start(self) -> None:
        self._guard(self._elect)
        self.world.on_node(self.b.node, TICK_MS, self._tick)

    def _guard(self, fn, *args: Any) -> None:
        try:
            fn(*args)
        except ControllerMovedError as e:
            self.b.emit("controller_fenced", epoch=self.core.epoch, detail=str(e))
            self._resign("fenced")
        except CONNECTION_ERRORS as e:
            self.b.emit("controller_error", event=getattr(fn, "__name__", "?"), error=repr(e), redo=True)
            self._redo = True

    def _tick(self) -> None:
        if self._redo and self.zk.reachable() and not self.zk.expired:
            self._redo = False
            self._guard(self._elect if not self.core.active else self._on_broker_change)
        if self.core.active:
            plan = self.core.on_tick(self.b.now())
            if not plan.empty:
                self._guard(self._execute, plan)
        # a broker that is not the controller only retries cut-short work: it ticks less often
        self.world.on_node(self.b.node, TICK_MS if self.core.active or self._redo else 5 * TICK_MS, self._tick)

    def _controller_watch(self, _ev: Any) -> None:
        self._guard(self._on_controller_change)

    def _broker_watch(self, _ev: Any) -> None:
        self._guard(self._on_broker_change)

    def _topic_watch(self, _ev: Any) -> None:
        self._guard(self._on_topic_change)

    def _on_broker_change(self) -> None:
        if self.core.active:
            self._execute(self.core.on_broker_change(self.zk.read_brokers(watch=self._broker_watch)))

    def _on_topic_change(self) -> None:
        if self.core.active:
            _e, _v, _b, topics, _s = self.zk.read_snapshot(topic_watch=self._topic_watch)
            self._execute(self.core.on_topics_change(topics))

    def on_session_expired(self) -> None:
        """Kafka's Expire: resign (unless a zombie); the broker then registers again and calls reelect."""
        if self.core.active and not self.zombie:
            self._resign("session expired")
        self.b.emit("zk_session_expired")
        self._redo = False

    def reelect(self) -> None:
        if self.zombie and self.core.active:
            self._guard(self._on_broker_change)   # the planted bug: carry on as controller, unfenced
        else:
            self._guard(self._elect)

    # ------------------------------------------------------------------ election

    def _elect(self) -> None:
        current = self.zk.read_controller(watch=self._controller_watch)
        if current is not None:
            self.active_controller_id = current
            if current == self.b.id and not self.core.active:
                deleted = self.zk.delete_controller_if_ours()
                self.b.emit("controller_znode_orphaned", controller_id=current, deleted=deleted)
            return
        won, epoch, version = self.zk.try_elect_controller(self.b.id, self.b.now())
        if not won:
            winner = self.zk.read_controller(watch=self._controller_watch)
            self.active_controller_id = -1 if winner is None else winner
            self.b.emit("controller_election_lost", controller_id=self.active_controller_id, epoch=epoch)
            return
        self.active_controller_id = self.b.id
        self.b.emit("controller_elected", epoch=epoch, epoch_zk_version=version, elect_ms=0.0)
        self._on_failover(epoch, version)

    def _on_controller_change(self) -> None:
        current = self.zk.read_controller(watch=self._controller_watch)
        if self.core.active and current != self.b.id and not self.zombie:
            self._resign("controller znode changed" if current is not None else "controller znode deleted")
        if current is None:
            self._elect()
        else:
            self.active_controller_id = current

    def _on_failover(self, epoch: int, version: int) -> None:
        cur_epoch, cur_version, brokers, topics, states = self.zk.read_snapshot(
            broker_watch=self._broker_watch, topic_watch=self._topic_watch)
        if cur_version != version:
            raise ControllerMovedError(f"epoch moved to {cur_epoch} while loading")
        plan = self.core.on_failover(epoch, version, brokers, topics, states, self.b.now())
        written = self._execute(plan)
        self.b.emit("controller_failover_done", epoch=epoch, load_ms=0.0, decide_ms=0.0, write_ms=0.0,
                    zk_round_trips=3, partitions=len(states), states_from_cache=False, states_written=written,
                    total_ms=0.0)

    def _resign(self, reason: str) -> None:
        epoch, was_active = self.core.epoch, self.core.active
        self.core.on_resign()
        for ch in self.channels.values():
            ch.close()
        self.channels.clear()
        if was_active:
            self.b.emit("controller_resigned", epoch=epoch, reason=reason)

    # ------------------------------------------------------------------ requests from brokers

    def handle_alter_isr(self, payload: Any, reply) -> None:
        broker_id, broker_epoch, items = payload
        code, plan, results = self.core.on_alter_isr(broker_id, broker_epoch, items)
        try:
            if code == errors.NONE and plan.writes:
                try:
                    self._execute(plan, retry_conflicts=False)
                except StateVersionConflict as e:
                    self.b.emit("zk_write_conflict", path=e.path)
                    results, retry = self.core.on_alter_isr_conflict(plan, results,
                                                                     self.zk.read_states(sorted(self.core.states)))
                    self._execute(retry)
                if not self.core.active:
                    code = errors.NOT_CONTROLLER
        except ControllerMovedError as e:
            self.b.emit("controller_fenced", epoch=self.core.epoch, detail=str(e))
            self._resign("fenced")
            code = errors.NOT_CONTROLLER
        except CONNECTION_ERRORS:
            return   # no answer: the leader's request times out and it proposes again
        reply((code, self.core.alter_isr_answer(results)))

    # ------------------------------------------------------------------ carrying out a plan

    def _execute(self, plan: Plan, depth: int = 0, retry_conflicts: bool = True) -> int:
        if not self.core.active:
            return 0
        for name, fields in plan.observed:
            self.b.emit(name, controller_epoch=self.core.epoch, **fields)
        t0 = self.b.mono_ns()
        versions: dict = {}
        fence = -1 if self.zombie else self.core.epoch_zk_version
        if plan.has_writes:
            try:
                for topic in plan.topic_creates:
                    self.zk.create_topic(fence, topic)
                writes = plan.writes
                if self.zombie:
                    writes = [w._replace(zk_version=-1) if w.zk_version is not None else w for w in writes]
                versions = self.zk.write_states(fence, writes)
            except ControllerMovedError as e:
                self.b.emit("zk_write_fenced", epoch=self.core.epoch, writes=len(plan.writes), detail=str(e))
                self._resign("fenced by a newer controller epoch")
                return 0
            except StateVersionConflict as e:
                if depth >= 3 or not retry_conflicts:
                    raise
                self.b.emit("zk_write_conflict", path=e.path)
                states = self.zk.read_states([(t, p) for t in self.core.topics for p in self.core.topics[t].partitions])
                retry = self.core.reload_states(states)
                retry.full_sync |= plan.full_sync
                return self._execute(retry, depth + 1)
        requests = self.core.commit(plan, versions)
        self._send(requests)
        for w in plan.writes:
            s = w.state
            self.b.emit("partition_state_written", topic=w.topic, partition=w.partition, reason=w.reason,
                        leader=s.leader, leader_epoch=s.leader_epoch, isr=list(s.isr),
                        controller_epoch=s.controller_epoch, zk_version=versions[(w.topic, w.partition)],
                        previous_leader=w.previous.leader if w.previous else None,
                        previous_isr=list(w.previous.isr) if w.previous else None)
        if plan.writes:
            self.b.emit("partition_states_written", epoch=self.core.epoch, count=len(plan.writes), write_ms=0.0,
                        mono_ns_written=t0)
        for name, fields in plan.events:
            self.b.emit(name, controller_epoch=self.core.epoch, **fields)
        return len(plan.writes)

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
                ch = self.channels[bid] = SimChannel(self.world, self.b.node, target)
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
