"""The simulated cluster: the world, the ZooKeeper model, the brokers, and their event logs.

Events are kept in memory, one list per broker, in docs/events.md's shape
(``ts_ms``, ``mono_ns``, ``broker``, ``type``, fields) and written out at the
end as ``events/broker-<id>.jsonl``.  ``mono_ns`` is virtual time in ns, made
strictly increasing across the whole run (the history's ``time`` too: one
clock), so merged logs sort in the order things happened.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from sim.broker import SimBroker, SimConfig
from sim.zk_model import ZkModel
from sim.zkdoor import CONNECTION_ERRORS, SimZooKeeper, ZkDoor
from kafkacommon.metadata import TopicAssignment
from zk.errors import NoNode

ZK_MAX_SESSION_MS = 60_000              # zk/server.py's maxSessionTimeout
WALL_BASE_MS = 1_800_000_000_000.0   # ts_ms of virtual time 0 (a fixed instant: byte-identical replays)


class Clock:
    """The one clock of a run's history and events: virtual ns, strictly increasing."""

    def __init__(self, world) -> None:
        self.world = world
        self.last = -1

    def __call__(self) -> int:
        t = max(self.world.mono_ns(), self.last + 1)
        self.last = t
        return t


class SimCluster:
    def __init__(self, world, cfg: SimConfig) -> None:
        self.world = world
        self.cfg = cfg
        self.clock = Clock(world)
        self.events: dict[int, list[dict[str, Any]]] = {}
        # the bounds zk/server.py gives the real embedded server: 2 ticks to 60 s (ZooKeeper's own default
        # maximum, 20 ticks, would cut the brokers' 3 s sessions to 2 s at the chaos runner's 100 ms tick)
        self.zk = SimZooKeeper(world, ZkModel(tick_ms=cfg.zk_tick_ms, max_session_timeout_ms=ZK_MAX_SESSION_MS),
                               cfg.zk_tick_ms)
        self.brokers = {i: SimBroker(self, i) for i in range(1, cfg.brokers + 1)}
        self._observer: ZkDoor | None = None
        self.on_emit: Callable[[dict[str, Any]], None] | None = None   # each event as logged (sim/invariants.py)

    def emit(self, broker: int, type_: str, fields: dict[str, Any]) -> None:
        ns = self.clock()
        e = {"ts_ms": round(WALL_BASE_MS + ns / 1e6, 3), "mono_ns": ns, "broker": broker, "type": type_, **fields}
        self.events.setdefault(broker, []).append(e)
        if self.on_emit is not None:
            self.on_emit(e)

    def start(self, only: int | None = None) -> None:
        """Start every broker not running yet (``only``: just that one), in id order."""
        for b in self.brokers.values():
            if not b.running and only in (None, b.id):
                b.start()

    # ------------------------------------------------------------------ the nemesis's view

    def _door(self) -> ZkDoor:
        d = self._observer
        if d is None or d.session_id is None or d.expired or not self.zk.model.alive(d.session_id):
            d = self._observer = ZkDoor(self.zk, "nemesis", 20_000)
            d.connect()
        d.ping()
        return d

    def zk_view(self) -> tuple[list[int], int | None, dict]:
        """(registered brokers, controller, {(topic, p): {leader, isr, replicas}}), read from the model."""
        if not self.world.nodes["zk1"].up:
            return [], None, {}
        try:
            d = self._door()
            brokers = sorted(d.read_brokers())
            controller = d.read_controller()
            _e, _v, _b, topics, states = d.read_snapshot()
        except (NoNode, *CONNECTION_ERRORS):
            return [], None, {}
        parts = {tp: {"leader": st.leader, "isr": list(st.isr), "replicas": list(topics[tp[0]].partitions[tp[1]])}
                 for tp, (st, _ver) in states.items()}
        return brokers, controller, parts

    def topic_states(self, topic: str) -> dict[int, dict]:
        """One topic's partitions as zk_view has them ({p: {leader, isr, replicas}}), reading only that topic's
        znodes ({} when ZooKeeper cannot be reached or the topic is not there)."""
        if not self.world.nodes["zk1"].up:
            return {}
        try:
            d = self._door()
            got = d.read_topic(topic)
            if got is None:
                return {}
            a = got[0]
            states = d.read_states([(topic, p) for p in sorted(a.partitions)])
        except (NoNode, *CONNECTION_ERRORS):
            return {}
        return {p: {"leader": st.leader, "isr": list(st.isr), "replicas": list(a.partitions[p])}
                for (_t, p), (st, _ver) in states.items()}

    def expire_session(self, broker_id: int) -> None:
        b = self.brokers[broker_id]
        sid = b.zk.session_id if b.zk is not None else None
        if sid is not None and self.zk.model.alive(sid):
            self.zk.route(self.zk.model.expire(sid, int(self.world.now_ms)))

    def create_topic(self, name: str, partitions: int, rf: int,
                     replicas: tuple[tuple[int, ...], ...] | None = None, config: dict | None = None) -> None:
        """kafka-topics.sh --create: the assignment znode (``replicas``, or drawn from the seed); the
        controller does the rest."""
        from kafkacommon.assignment import assign_replicas
        ids = sorted(self.brokers)
        rng = self.world.rng
        assignment = dict(enumerate(replicas)) if replicas else assign_replicas(
            partitions, min(rf, len(ids)), ids, start_index=rng.randrange(len(ids)), shift=rng.randrange(len(ids)))
        a = TopicAssignment(name, assignment, config=config or {})
        self._door().create_topic_znode(a)

    def add_partitions(self, name: str, count: int, replicas: tuple[tuple[int, ...], ...] | None = None) -> dict:
        """CreatePartitions (zk/admin.py's add_partitions, over the model): the new partitions' assignment,
        Kafka's rules (kafkacommon/assignment.py), joins the topic's znode; the controller's watch on it
        elects them.  -> the new partitions' assignment."""
        from kafkacommon.assignment import new_partitions_assignment
        d = self._door()
        a, version, _reassigning = d.read_topic(name)
        added = new_partitions_assignment(name, a.partitions, sorted(self.brokers), count,
                                          [list(r) for r in replicas] if replicas else None)
        d.set_topic_assignment(TopicAssignment(name, {**a.partitions, **added}, a.topic_id), version)
        return added

    def alter_topic_config(self, name: str, config: dict) -> None:
        """kafka-configs --alter (zk/admin.py's change_topic_config, over the model): the topic's whole new
        config, checked as Kafka checks it, and a change notification every broker applies."""
        from kafkacommon.topic_config import validate
        validate(config)
        self._door().change_entity_config(f"topics/{name}", {k: str(v) for k, v in config.items()})

    # ------------------------------------------------------------------ admin requests to the controller

    def _controller(self):
        """The active controller's SimController (a request to any other broker gets NOT_CONTROLLER)."""
        for b in self.brokers.values():
            if b.running and getattr(b, "controller", None) is not None and b.controller.core.active:
                return b.controller
        return None

    def alter_reassignments(self, requested: dict) -> tuple[int, dict]:
        """AlterPartitionReassignments to the controller ({(topic, p): target replicas or None to cancel}) ->
        (top-level error, {(topic, p): (error, message)}), as the Kafka listener's handler gets it."""
        from kafkacommon.errors import NOT_CONTROLLER
        ctl = self._controller()
        if ctl is None:
            return NOT_CONTROLLER, {}
        return ctl.request("alter_reassignments", ctl.handlers.alter_reassignments(requested), (NOT_CONTROLLER, {}))

    def list_reassignments(self, tps: list | None = None) -> tuple[int, dict]:
        from kafkacommon.errors import NOT_CONTROLLER
        ctl = self._controller()
        if ctl is None:
            return NOT_CONTROLLER, {}
        return ctl.request("list_reassignments", ctl.handlers.list_reassignments(tps), (NOT_CONTROLLER, {}))

    def elect_leaders(self, tps: list, election_type: int) -> dict:
        """ElectLeaders (0: preferred, 1: unclean) to the controller -> {(topic, p): (error, message, leader)}."""
        from kafkacommon.errors import NOT_CONTROLLER
        ctl = self._controller()
        if ctl is None:
            return {tp: (NOT_CONTROLLER, None, -1) for tp in tps}
        return ctl.request("elect_leaders_request", ctl.handlers.elect_leaders_request(list(tps), election_type),
                           {tp: (NOT_CONTROLLER, None, -1) for tp in tps})

    def request_zk_reassignment(self, partitions: dict) -> None:
        """The ZooKeeper-era kafka-reassign-partitions: /admin/reassign_partitions, which the controller watches."""
        self._door().request_reassignment(partitions)

    # ------------------------------------------------------------------ output

    def write_events(self, run_dir: Path) -> None:
        d = run_dir / "events"
        d.mkdir(parents=True, exist_ok=True)
        for bid in sorted(self.brokers):
            lines = [json.dumps(e, separators=(",", ":"), default=str) + "\n" for e in self.events.get(bid, [])]
            (d / f"broker-{bid}.jsonl").write_text("".join(lines), encoding="utf-8")

    def merged_events(self) -> list[dict[str, Any]]:
        out = [e for bid in sorted(self.events) for e in self.events[bid]]
        return sorted(out, key=lambda e: e["mono_ns"])

