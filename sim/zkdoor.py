"""A simulated broker's door to the simulated ZooKeeper (sim/zk_model.py's ``ZkModel``).

The door offers the calls the controller and the broker make through
``zk.client.ZkClient`` (registration, election, fenced state writes,
snapshot reads), each one a model operation made at the caller's instant
when the broker can reach ZooKeeper (both directions of its link up, the
server up), else ``ConnectionLoss``.  The data are encoded with the real
codecs (zk/codecs.py).  A fired watch travels back over the zk -> broker link
and runs the one-shot callback registered for it; a partitioned broker gets
it when the link heals, as a reconnecting client does.

Sessions: the broker pings every third of its session timeout while it can
reach the server (``touch``); the server expires sessions past their timeout
(``ZkModel.expire_due``, run by :class:`SimZooKeeper` every tick), deleting
their ephemerals.  The broker learns its session expired at its next
successful contact, as kazoo's LOST state arrives on reconnection.  Once it
has been told (its ``on_expired`` ran), the door is kazoo after LOST: it counts
as connected again as soon as the server answers (:meth:`ZkDoor.connected`),
for kazoo opens a new session by itself then, retrying for ever (as Kafka's
``ZooKeeperClient.reinitialize`` does); the door opens that session at the
broker's registration (:meth:`ZkDoor.connect`), the controller's
register-and-re-elect event, which a lost connection left waiting.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from zk.errors import CONNECTION_ERRORS, BadVersion, NodeExists, NoNode, SessionExpired, ZkConnectionLost

from kafkacommon.metadata import LeaderAndIsr
from zk import codecs, paths
from zk import rules
from zk.client import StateWrite
from zk.rules import ControllerMovedError, StateVersionConflict
from kafkacommon.metadata import BrokerRegistration, TopicAssignment
from sim.zk_model import Check, Create, Delete, SetData

ZK_NODE = "zk1"
SIM_CLUSTER_ID = "c2ltdWxhdGVkLWNsdXN0ZXI"   # /cluster/id's id in a simulated cluster (22 characters, as Kafka's)

__all__ = ["CONNECTION_ERRORS", "SimZooKeeper", "ZkDoor", "ControllerMovedError", "StateVersionConflict", "StateWrite"]


class SimZooKeeper:
    """The server: the model, its expiry tick, and the routing of watch events to the sessions' owners."""

    def __init__(self, world, model, tick_ms: int) -> None:
        self.world = world
        self.model = model
        self.tick_ms = tick_ms
        self.doors: dict[int, "ZkDoor"] = {}     # session id -> the door that opened it
        world.node(ZK_NODE)
        world.after(tick_ms, self._tick)

    def _tick(self) -> None:
        """Expire what is due, then sleep until the next session could expire (at most a tick: pings move it)."""
        w = self.world
        if w.nodes[ZK_NODE].up and not w.nodes[ZK_NODE].paused:
            self.route(self.model.expire_due(int(w.now_ms)))
        nxt = self.model.next_expiry()
        w.after(self.tick_ms if nxt is None else min(max(nxt - w.now_ms, 0.0) + 0.001, 10 * self.tick_ms),
                self._tick)

    def route(self, events: Any) -> None:
        for ev in events or ():
            sid = getattr(ev, "session_id", None)
            door = self.doors.get(sid)
            if door is not None:
                door.notify(ev)


class ZkDoor:
    def __init__(self, server: SimZooKeeper, node: str, session_timeout_ms: int) -> None:
        self.server = server
        self.world = server.world
        self.model = server.model
        self.node = node
        self.session_timeout_ms = session_timeout_ms
        self.session_id: int | None = None
        self.negotiated_ms = session_timeout_ms
        self.expired = False
        self.reconnecting = False   # told the broker its session is lost: a new one opens when the server answers
        self._watches: dict[tuple[str, str], Callable[[Any], None]] = {}
        self._pending: list[Any] = []          # watch events the broker could not be sent yet
        self.on_expired: Callable[[], None] = lambda: None

    # ------------------------------------------------------------------ plumbing

    def connected(self) -> bool:
        """kazoo's CONNECTED: the server answers, and the session is alive or, once the broker was told it is
        lost, a new one is to be had (kazoo reconnects by itself after LOST; here :meth:`connect` opens it)."""
        return self.reachable() and (not self.expired or self.reconnecting)

    def reachable(self) -> bool:
        w = self.world
        zk = w.nodes.get(ZK_NODE)
        return (zk is not None and zk.up and not zk.paused and w.net.reachable(self.node, ZK_NODE)
                and w.net.reachable(ZK_NODE, self.node))

    def _now(self) -> int:
        return int(self.world.now_ms)

    def _op(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if not self.reachable() or self.session_id is None:
            raise ZkConnectionLost("no connection to the simulated ZooKeeper")
        if self.expired:
            raise SessionExpired()
        self._flush()
        try:
            result, events = getattr(self.model, name)(self.session_id, *args, **kwargs)
        except SessionExpired:
            self._expired()
            raise
        self.server.route(events)
        return result

    def _expired(self) -> None:
        if not self.expired:
            self.expired = True
            self._watches.clear()
            self.world.on_node(self.node, 0.0, self._lost)

    def _lost(self) -> None:
        """kazoo's LOST reaches the broker: from now on the client is after a new session."""
        self.reconnecting = True
        self.on_expired()

    def notify(self, ev: Any) -> None:
        """A watch event for our session, from the server.  It reaches the broker after the link's latency
        while the broker can reach the server; otherwise it waits for the next contact, as kazoo's
        SetWatches on reconnection makes the server send what fired meanwhile."""
        self._pending.append(ev)
        self._flush()

    def _flush(self) -> None:
        if not self._pending or not self.reachable():
            return
        events, self._pending = self._pending, []
        lat = self.world.net.latency(ZK_NODE, self.node)
        for ev in events:
            self.world.on_node(self.node, lat, self._fire, ev, self.session_id)

    def _fire(self, ev: Any, session_id: int | None) -> None:
        if session_id is None or session_id != self.session_id:
            return
        path, kind = getattr(ev, "path", None), str(getattr(ev, "type", ""))
        if kind == "NONE":       # the session expired (kazoo's LOST)
            self._expired()
            return
        keys = [("child", path)] if kind == "CHILD" else [("data", path)]
        if kind == "DELETED":
            keys.append(("child", path))
        for key in keys:
            cb = self._watches.pop(key, None)
            if cb is not None:
                cb(ev)

    def _watch(self, kind: str, path: str, cb: Callable[[Any], None] | None) -> bool:
        if cb is None:
            return False
        self._watches[(kind, path)] = cb
        return True

    # ------------------------------------------------------------------ session

    def connect(self) -> None:
        if not self.reachable():
            raise ZkConnectionLost("no connection to the simulated ZooKeeper")
        self.session_id, self.negotiated_ms = self.model.connect(self._now(), self.session_timeout_ms)
        self.expired = self.reconnecting = False
        self._watches.clear()
        self._pending.clear()
        self.server.doors[self.session_id] = self

    def ping(self) -> None:
        """The client's heartbeat; an expired session is found out here."""
        if self.session_id is None or self.expired or not self.reachable():
            return
        self._flush()
        try:
            self.model.touch(self.session_id, self._now())
        except SessionExpired:
            self._expired()

    def close(self) -> None:
        if self.session_id is not None and self.reachable() and not self.expired:
            self.server.route(self.model.close(self.session_id, self._now()))
        self.session_id = None

    def abandon(self) -> None:
        """The process died: the session lives on in the server until it expires, and what the server sends
        it (its watches, its expiry) reaches nobody: a restarted broker has a session of its own."""
        if self.session_id is not None and self.server.doors.get(self.session_id) is self:
            del self.server.doors[self.session_id]
        self.session_id = None
        self.reconnecting = False
        self._watches.clear()
        self._pending.clear()

    # ------------------------------------------------------------------ brokers

    def ensure_persistent_paths(self, kafka_paths: bool = False) -> None:
        """The persistent paths; with ``kafka_paths`` also what zk/client.py's ``ensure_persistent_paths`` and
        ``ensure_cluster_id`` add for Kafka's tools (its other paths, /feature, /cluster/id), as a real broker's
        start-up writes them."""
        for p in paths.PERSISTENT_PATHS + (paths.KAFKA_PERSISTENT_PATHS if kafka_paths else ()):
            self._op("ensure_path", p)
        if kafka_paths:
            for path, data in ((paths.FEATURE, codecs.encode_feature_znode()),
                               (paths.CLUSTER_ID, codecs.encode_cluster_id(SIM_CLUSTER_ID))):
                try:
                    self._op("create", path, data, makepath=True)
                except NodeExists:
                    pass

    def register_broker(self, reg: BrokerRegistration) -> int | None:
        """Create /brokers/ids/<id>; its czxid (the broker epoch), or None while an old session holds it."""
        path = paths.broker(reg.broker_id)
        try:
            self._op("create", path, codecs.encode_broker(reg), ephemeral=True)
        except NodeExists:
            pass
        (_data, stat) = self._op("get", path)
        return stat.czxid if stat.ephemeral_owner == self.session_id else None

    def allocate_producer_id_block(self, broker_id: int, size: int = 1000) -> tuple[int, int]:
        """zk/config_store.py's claim of the next ``size`` producer ids: a conditional update of
        /latest_producer_id_block (Kafka's ProducerIdManager in ZooKeeper mode)."""
        while True:
            try:
                data, stat = self._op("get", paths.PRODUCER_ID_BLOCK)
            except NoNode:
                try:
                    self._op("create", paths.PRODUCER_ID_BLOCK, codecs.encode_producer_id_block(broker_id, 0, size - 1))
                    return 0, size - 1
                except NodeExists:
                    continue
            start = codecs.decode_producer_id_block(data) + 1 if data else 0
            try:
                self._op("set", paths.PRODUCER_ID_BLOCK, codecs.encode_producer_id_block(broker_id, start,
                                                                                        start + size - 1),
                         version=stat.version)
                return start, start + size - 1
            except BadVersion:
                continue

    def read_brokers(self, watch: Callable[[Any], None] | None = None) -> dict[int, BrokerRegistration]:
        ids = self._op("get_children", paths.BROKER_IDS, watch=self._watch("child", paths.BROKER_IDS, watch))
        out = {}
        for i in sorted(int(x) for x in ids if x.isdigit()):
            try:
                data, stat = self._op("get", paths.broker(i))
            except NoNode:
                continue
            out[i] = codecs.decode_broker(i, data, stat.czxid)
        return out

    # ------------------------------------------------------------------ controller

    def read_controller(self, watch: Callable[[Any], None] | None = None) -> int | None:
        stat = self._op("exists", paths.CONTROLLER, watch=self._watch("data", paths.CONTROLLER, watch))
        if stat is None:
            return None
        try:
            data, _ = self._op("get", paths.CONTROLLER)
        except NoNode:
            return None
        return codecs.decode_controller(data).broker_id

    def read_controller_with_epoch(self, watch: Callable[[Any], None] | None = None
                                   ) -> tuple[int | None, tuple[int, int] | None]:
        """zk.client's: /controller (its watch armed), then /controller_epoch's (epoch, zkVersion) or None."""
        controller = self.read_controller(watch)
        try:
            data, stat = self._op("get", paths.CONTROLLER_EPOCH)
        except NoNode:
            return controller, None
        return controller, (codecs.decode_controller_epoch(data), stat.version)

    def read_controller_epoch(self) -> tuple[int, int]:
        try:
            data, stat = self._op("get", paths.CONTROLLER_EPOCH)
        except NoNode:
            try:
                self._op("create", paths.CONTROLLER_EPOCH, codecs.encode_controller_epoch(0))
            except NodeExists:
                pass
            data, stat = self._op("get", paths.CONTROLLER_EPOCH)
        return codecs.decode_controller_epoch(data), stat.version

    def try_elect_controller(self, broker_id: int, timestamp_ms: int, epoch: tuple[int, int] | None = None,
                             then: Callable[[], Any] | None = None) -> tuple[bool, int, int]:
        """zk.client.ZkClient.try_elect_controller, over the model (the ops and their reading: zk/rules.py);
        ``then()`` right after the multi, as the real door sends its requests right behind it."""
        epoch, version = self.read_controller_epoch() if epoch is None else epoch
        results = self._op("multi", [_model_op(op) for op in rules.election_ops(broker_id, timestamp_ms, epoch,
                                                                                 version)])
        if then is not None:
            then()
        if not any(isinstance(r, Exception) for r in results):
            return True, epoch + 1, version + 1
        try:
            cdata, _ = self._op("get", paths.CONTROLLER)
            edata, estat = self._op("get", paths.CONTROLLER_EPOCH)
        except NoNode:
            return False, epoch, version
        if rules.won_after_failure(broker_id, epoch + 1, cdata, edata):
            return True, epoch + 1, estat.version
        return False, codecs.decode_controller_epoch(edata), estat.version

    def delete_controller_if_ours(self) -> bool:
        try:
            _d, stat = self._op("get", paths.CONTROLLER)
        except NoNode:
            return False
        if stat.ephemeral_owner != self.session_id:
            return False
        try:
            self._op("delete", paths.CONTROLLER, version=stat.version)
        except (NoNode, BadVersion):
            return False
        return True

    def read_snapshot(self, broker_watch=None, topic_watch=None) -> tuple[int, int, dict, dict, dict]:
        """(controller epoch, its zkVersion, brokers, topics, states)."""
        epoch, version, brokers, topics, _rt, _bc, _ld = self.read_context(broker_watch, topic_watch)
        states = self.read_states([(t, p) for t, a in topics.items() for p in a.partitions])
        return epoch, version, brokers, topics, states

    def snapshot_requests(self, broker_watch=None, topic_watch=None, log_dir_watch=None) -> None:
        """zk.client's snapshot_requests, the snapshot's first round trip sent behind the election multi: its
        children read with their watches armed (a lost election's too); :meth:`read_context` reads again at its
        own instant (the model has no round trip to save)."""
        for path, cb in ((paths.BROKER_IDS, broker_watch), (paths.TOPICS, topic_watch),
                         (paths.LOG_DIR_EVENT_NOTIFICATION, log_dir_watch)):
            if cb is not None:
                try:
                    self._op("get_children", path, watch=self._watch("child", path, cb))
                except NoNode:
                    pass

    def read_context(self, broker_watch=None, topic_watch=None, topic_data_watch=None,
                     broker_id: int | None = None, log_dir_watch=None) -> tuple[int, int, dict, dict, int, dict, tuple]:
        """A new controller's context but the states: (controller epoch, its zkVersion, brokers, topics with
        their configs, round trips, this broker's dynamic configs, the log dir event notifications' sequence
        numbers when ``log_dir_watch`` is given, its watch armed), as zk.client's read_snapshot(with_states=
        False) reads and counts them; ``topic_data_watch`` is armed on every topic znode (the door keeps one
        callback per znode, so arming it again replaces it)."""
        data, stat = self._op("get", paths.CONTROLLER_EPOCH)
        brokers = self.read_brokers(broker_watch)
        names = self._op("get_children", paths.TOPICS, watch=self._watch("child", paths.TOPICS, topic_watch))
        log_dirs: tuple = ()
        if log_dir_watch is not None:
            try:
                children = self._op("get_children", paths.LOG_DIR_EVENT_NOTIFICATION,
                                    watch=self._watch("child", paths.LOG_DIR_EVENT_NOTIFICATION, log_dir_watch))
            except NoNode:
                children = []
            log_dirs = tuple(sorted(paths.log_dir_event_sequence(n) for n in children
                                    if n.startswith(paths.LOG_DIR_EVENT_PREFIX)))
        topics = {}
        for t in sorted(names):
            try:
                d, _s = self._op("get", paths.topic(t), watch=self._watch("data", paths.topic(t), topic_data_watch))
            except NoNode:
                continue
            topics[t] = dataclasses.replace(codecs.decode_topic(t, d), config=self.read_entity_config(f"topics/{t}"))
        entities = [] if broker_id is None else [paths.DEFAULT_ENTITY, str(broker_id)]
        broker_configs = {e: self.read_entity_config(f"brokers/{e}") for e in entities}
        return codecs.decode_controller_epoch(data), stat.version, brokers, topics, 2, broker_configs, log_dirs

    def read_deletion_requests(self, watch: Callable[[Any], None] | None = None) -> list[str]:
        return sorted(self._op("get_children", paths.DELETE_TOPICS,
                               watch=self._watch("child", paths.DELETE_TOPICS, watch)))

    def read_states(self, tps) -> dict[tuple[str, int], tuple[LeaderAndIsr, int]]:
        out = {}
        for t, p in tps:
            path = paths.partition_state(t, p)
            try:
                d, s = self._op("get", path)
            except NoNode:
                continue
            out[(t, p)] = (codecs.decode_partition_state(path, d), s.version)
        return out

    def _fenced_multi(self, fence_version: int, ops: list[tuple]) -> list[Any]:
        results = self._op("multi", [_model_op(op) for op in [rules.fence_op(fence_version)] + ops])
        error = rules.multi_failure(results, [op[1] for op in ops], fence_version)
        if error is not None:
            raise error
        return results[1:]

    def write_states(self, fence_version: int, writes: list) -> dict[tuple[str, int], int]:
        parents = [("create", p, b"", False)
                   for p in rules.state_parents([w for w in writes if w.zk_version is None])
                   if self._op("exists", p) is None]
        results = self._fenced_multi(fence_version, parents + rules.state_write_ops(writes))[len(parents):]
        return {(w.topic, w.partition): 0 if w.zk_version is None else _version(r) for w, r in zip(writes, results)}

    def create_topic(self, fence_version: int, a: TopicAssignment) -> None:
        exists = self._op("exists", paths.config_topic(a.topic)) is not None
        self._fenced_multi(fence_version, rules.topic_create_ops(a, exists))

    def write_topic_assignment(self, fence_version: int, a: TopicAssignment) -> None:
        self._fenced_multi(fence_version, [rules.topic_assignment_op(a)])

    def read_zk_reassignment(self, watch: Callable[[Any], None] | None = None) -> dict | None:
        path = paths.REASSIGN_PARTITIONS
        if self._op("exists", path, watch=self._watch("data", path, watch)) is None:
            return None
        try:
            data, _s = self._op("get", path)
            return codecs.decode_reassignment(data)
        except NoNode:
            return None
        except codecs.CodecError:
            return {}

    def write_zk_reassignment(self, fence_version: int, partitions: dict) -> None:
        ops = rules.zk_reassignment_ops(partitions, self._op("exists", paths.REASSIGN_PARTITIONS) is not None)
        if ops:
            try:
                self._fenced_multi(fence_version, ops)
            except NoNode:
                pass

    def request_reassignment(self, partitions: dict) -> None:
        self._op("create", paths.REASSIGN_PARTITIONS, codecs.encode_reassignment(partitions))

    # ------------------------------------------------------------------ admin and configs (zk/config_store.py's)

    def create_topic_znode(self, a: TopicAssignment) -> None:
        """kafka-topics.sh: the topic's configs (``a.config``) at /config/topics/<t>, then /brokers/topics/<t>."""
        self._set_or_create(paths.config_topic(a.topic), codecs.encode_entity_config(a.config))
        self._op("create", paths.topic(a.topic), codecs.encode_topic(a))

    def _set_or_create(self, path: str, data: bytes) -> None:
        try:
            self._op("set", path, data)
        except NoNode:
            self._op("create", path, data, makepath=True)

    def read_topic(self, topic: str) -> tuple[TopicAssignment, int, bool] | None:
        try:
            data, stat = self._op("get", paths.topic(topic))
        except NoNode:
            return None
        return codecs.decode_topic(topic, data), stat.version, codecs.topic_reassigning(topic, data)

    def set_topic_assignment(self, a: TopicAssignment, version: int) -> None:
        self._op("set", paths.topic(a.topic), codecs.encode_topic(a), version=version)

    def read_entity_config(self, entity_path: str) -> dict[str, str]:
        path = paths.config_entity(entity_path)
        try:
            data, _s = self._op("get", path)
        except NoNode:
            return {}
        return codecs.decode_entity_config(path, data)

    def change_entity_config(self, entity_path: str, config: dict) -> str:
        self._set_or_create(paths.config_entity(entity_path), codecs.encode_entity_config(config))
        created = self._op("create", f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}",
                           codecs.encode_config_change(entity_path), sequence=True, makepath=True)
        return created.rsplit("/", 1)[-1]

    def read_config_changes(self, watch: Callable[[Any], None] | None = None) -> list[str]:
        return sorted(self._op("get_children", paths.CONFIG_CHANGES,
                               watch=self._watch("child", paths.CONFIG_CHANGES, watch)))

    def read_config_change(self, name: str) -> tuple[str, int] | None:
        path = f"{paths.CONFIG_CHANGES}/{name}"
        try:
            data, stat = self._op("get", path)
        except NoNode:
            return None
        return codecs.decode_config_change(path, data), stat.ctime

    def delete_config_change(self, name: str) -> None:
        try:
            self._op("delete", f"{paths.CONFIG_CHANGES}/{name}")
        except NoNode:
            pass

    # ------------------------------------------------------------------ log directory failures

    def propagate_log_dir_event(self, broker_id: int) -> str:
        """zk.client.ZkClient.propagate_log_dir_event: the persistent sequential notification."""
        return self._op("create", paths.LOG_DIR_EVENT_NOTIFICATION + "/" + paths.LOG_DIR_EVENT_PREFIX,
                        codecs.encode_log_dir_event(broker_id), sequence=True)

    def read_log_dir_events(self, watch: Callable[[Any], None] | None = None) -> list[tuple[str, int | None]]:
        try:
            names = self._op("get_children", paths.LOG_DIR_EVENT_NOTIFICATION,
                             watch=self._watch("child", paths.LOG_DIR_EVENT_NOTIFICATION, watch))
        except NoNode:
            return []
        out: list[tuple[str, int | None]] = []
        for seq in sorted(paths.log_dir_event_sequence(n) for n in names if n.startswith(paths.LOG_DIR_EVENT_PREFIX)):
            try:
                d, _s = self._op("get", paths.log_dir_event(seq))
            except NoNode:
                continue
            try:
                out.append((seq, codecs.decode_log_dir_event(d)))
            except codecs.CodecError:
                out.append((seq, None))
        return out

    def delete_log_dir_events(self, fence_version: int, sequences: list[str]) -> None:
        for ops in rules.log_dir_event_delete_ops(fence_version, sequences):
            results = self._op("multi", [_model_op(op) for op in ops])
            error = rules.multi_failure(results, [op[1] for op in ops[1:]], fence_version)
            if error is not None and not isinstance(error, NoNode):
                raise error


def _model_op(op: tuple) -> Any:
    """zk/rules.py's op tuple as the model's multi op."""
    if op[0] == "create":
        return Create(op[1], op[2], ephemeral=op[3])
    if op[0] == "set":
        return SetData(op[1], op[2], op[3])
    if op[0] == "delete":
        return Delete(op[1], op[2])
    return Check(op[1], op[2])


def _version(result: Any) -> int:
    if isinstance(result, int):
        return result
    return getattr(result, "version")
