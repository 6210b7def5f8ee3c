"""A simulated broker: the broker process's parts around the real cores, on the simulated world.

``BrokerState`` fences the controller's requests, ``SimReplicaManager`` runs
``PartitionReplication``, ``SimCoordinators`` runs ``PartitionCoordinator``,
``SimController`` runs ``ControllerCore``, ``SimTxnCoordinators`` runs
``TxnCoordinator``.  A crash drops everything in memory
(a new incarnation of the node: its timers and in-flight messages are gone);
the disk (a ``SimDisk`` holding the logs' files, and the HW checkpoint) stays,
with the crash's losses, and a restart recovers the logs and registers again,
as node/server/broker.py does.

With ``log_dirs`` > 1 each directory is a ``SimDisk`` of its own, placed and failed by the real rules
(``replication.log_dirs.LogDirs``): an I/O error (a ``disk-full`` or ``disk-error`` fault) takes a directory
offline with its replicas, then the broker writes the ZooKeeper notification, or halts when none is left.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from controller.core import ControllerSettings
from coordinator.core import GroupConfig
from kafkacommon import errors
from kafkacommon.event import Event
from kafkacommon.hashing import partition_for
from replication.broker_state import BrokerState
from replication.log_dirs import LogDirs
from replication import roles
from sim.configs import SimConfigListener
from sim.controller import SimController
from sim.disk import SimDisk
from sim.coordinators import SimCoordinators
from sim.log import SimLog
from sim.replicas import SimReplicaManager
from sim.txn_coordinators import SimTxnCoordinators, write_txn_markers
from transactions.config import TRANSACTION_STATE_TOPIC, TxnConfig
from sim.zkdoor import CONNECTION_ERRORS, ZkDoor
from zk.exceptions import ZkConnectionLost
from kafkacommon.metadata import BrokerRegistration
from zk.paths import OFFSETS_TOPIC

TP = tuple[str, int]
HW_CHECKPOINT_MS = 5000.0     # replica.high-watermark.checkpoint.interval.ms
FSYNC_MS = 1000.0             # how often the simulated OS writes the page cache back
REGISTER_RETRY_MS = 100.0


@dataclass
class SimConfig:
    """The simulated cluster's settings (the chaos runner's cluster.yaml values where it sets them)."""
    brokers: int = 3
    session_timeout_ms: int = 3000
    zk_tick_ms: int = 100
    replica_lag_time_max_ms: int = 3000
    min_insync_replicas: int = 1
    offsets_partitions: int = 10
    offsets_replication_factor: int = 3
    offsets_eager_create: bool = True    # False: the run creates __consumer_offsets (a pinned assignment)
    unclean_leader_election: bool = False
    initial_rebalance_delay_ms: int = 500
    min_session_timeout_ms: int = 500
    commit_timeout_ms: int = 5000
    metadata_resend_interval_ms: int = 2000   # kafkasim.controller.metadata.resend.interval.ms (0: never, as Kafka)
    txn_partitions: int = 10             # transaction.state.log.num.partitions (chaos runs' fast default)
    bugs: frozenset[str] = frozenset()
    log_dirs: int = 1                   # data directories per broker, each a disk of its own
    # a Kafka listener to advertise in /brokers/ids/<id> (PLAINTEXT://127.0.0.1:<this + id>), as a real broker
    # does; 0: none (the simulator has no Kafka listener).  sim/compare_run.py sets it, so that the registration
    # compares with Kafka 2.8.2's
    advertised_port_base: int = 0
    # the paths a real broker's start-up adds for Kafka's tools (/consumers, /brokers/seqid, /config/clients...,
    # /feature, /cluster/id: zk/client.py); off in the simulator's own runs (their seeds replay as they were)
    kafka_paths: bool = False


@dataclass
class Disk:
    """What a broker keeps across crashes: its simulated disks (one per log directory), the logs on them,
    and its HW checkpoint."""
    dirs: list[SimDisk] = field(default_factory=lambda: [SimDisk()])
    logs: dict[TP, SimLog] = field(default_factory=dict)
    hw: dict[TP, int] = field(default_factory=dict)

    @property
    def files(self) -> SimDisk:
        """The first directory's disk."""
        return self.dirs[0]

    def name(self, disk: SimDisk) -> str:
        """A directory's name, as log_dir_failed reports it: ``d0``, ``d1``..."""
        return f"d{next(i for i, d in enumerate(self.dirs) if d is disk)}"

    @property
    def slow_ms(self) -> float:
        """What an append or a fetch read waits on a slow disk (0 when it is not slow)."""
        return self.files.latency_ms("append") if self.files.is_slow else 0.0


class SimBroker:
    def __init__(self, cluster, broker_id: int) -> None:
        self.cluster = cluster
        self.world = cluster.world
        self.cfg: SimConfig = cluster.cfg
        self.id = broker_id
        self.node = f"b{broker_id}"
        self.disk = Disk([SimDisk() for _ in range(max(1, self.cfg.log_dirs))])
        self.running = False
        self.zk: ZkDoor | None = None

    # ------------------------------------------------------------------ plumbing for the parts

    def now(self) -> int:
        return self.world.core_ms(self.node)

    def mono_ns(self) -> int:
        return self.world.mono_ns()

    def emit(self, type_: str, **fields: Any) -> None:
        self.cluster.emit(self.id, type_, fields)

    def log(self, *events: Event) -> None:
        for e in events:
            self.cluster.emit(self.id, e.name, e.fields)

    def disk_log(self, tp: TP, is_new: bool = False) -> SimLog | None:
        """The replica's log, created where the rules place it; None: it is offline (its directory failed,
        or a directory is offline and it is not new)."""
        log = self.disk.logs.get(tp)
        if log is not None:
            return None if self.dirs.is_offline(tp) else log
        placement = self.dirs.placement(tp, is_new)
        for d in placement.dirs:
            try:
                log = SimLog(self.disk.dirs[int(d[1:])], *tp)
            except OSError as e:
                self.dir_failed(d, "create", e)
                continue
            self.dirs.created(tp, d)
            self.disk.logs[tp] = log
            return log
        if not self.dirs.is_offline(tp) and self.dirs.offline:
            self.dirs.lost(tp)
        return None

    def dir_of(self, log: SimLog) -> str:
        return self.disk.name(log.disk)

    def dir_failed(self, d: str, what: str, e: OSError) -> None:
        """An I/O error in log directory ``d`` (replication.log_dirs' rules): its replicas go offline; then
        the ZooKeeper notification, or a halt when no directory is left."""
        failure = self.dirs.fail(d, f"{type(e).__name__}: {e}", what)
        if not failure.first:
            return
        self.log(*failure.events)
        for tp in failure.partitions:
            self.replicas.take_offline(tp)
        if failure.halt:
            self.emit("broker_halted", reason=f"every log directory is offline (the last: {d})", exit_code=1)
            self.crash()
        else:
            self._notify_dir_failure(d)

    def _notify_dir_failure(self, d: str) -> None:
        try:
            path = self.zk.propagate_log_dir_event(self.id)
        except CONNECTION_ERRORS:
            self.world.on_node(self.node, REGISTER_RETRY_MS, self._notify_dir_failure, d)
            return
        self.emit("log_dir_event_notified", dir=d, path=path)

    def disk_wrote(self, log: SimLog) -> None:
        pass   # the page cache has it; fsync comes with the periodic flush

    def hw_checkpoint(self) -> dict[TP, int]:
        return self.disk.hw

    def read_topic_config(self, topic: str) -> dict:
        """A topic's overrides when a replica is first hosted (the broker defaults, and an event, when ZooKeeper
        cannot be reached then, as node/server/broker.py's after its retries)."""
        try:
            return self.zk.read_entity_config(f"topics/{topic}") if self.zk is not None else {}
        except CONNECTION_ERRORS as e:
            self.emit("topic_config_unreadable", topic=topic, error=f"{type(e).__name__}: {e}")
            return {}

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        bugs = self.cfg.bugs
        self.world.restart(self.node)
        self.running = True
        self.state = BrokerState(self.id, check_controller_epoch="zombie-controller" not in bugs)
        self.replicas = SimReplicaManager(self)
        group_cfg = GroupConfig(min_session_timeout_ms=self.cfg.min_session_timeout_ms,
                                initial_rebalance_delay_ms=self.cfg.initial_rebalance_delay_ms,
                                commit_timeout_ms=self.cfg.commit_timeout_ms,
                                commit_required_acks=1 if "commit-before-hw" in bugs else -1,
                                check_commit_generation="fenced-generation-commit" not in bugs)
        self.coordinators = SimCoordinators(self, group_cfg, self._member_suffix,
                                            load_to_hw="load-to-hw" in bugs)
        self.replicas.on_role = self._on_role
        self.emit("broker_starting", host="sim", port=9000 + self.id, pid=0, planted_bugs=sorted(bugs),
                  kafka_listener=None)
        self.dirs = LogDirs([f"d{i}" for i in range(len(self.disk.dirs))])   # offline ones come back on restart
        for tp, log in sorted(self.disk.logs.items()):
            self.dirs.found(tp, self.dir_of(log))
        for tp, log in sorted(self.disk.logs.items()):
            if self.dirs.is_offline(tp):
                continue
            try:
                cut, dropped = log.recover()
            except OSError as e:   # Kafka's loadLogs: the directory is offline from the start
                self.dirs.fail(self.dir_of(log), f"{type(e).__name__}: {e}", "log recovery")
                continue
            if cut:
                self.emit("log_recovered", topic=tp[0], partition=tp[1], truncated_bytes=cut,
                          dropped_batches=dropped, log_end_offset=log.log_end_offset)
        if not self.dirs.online():   # Kafka's createAndValidateLogDirs / loadLogs: none left, halt
            self.emit("broker_halted", reason="no log directory is online at start-up", exit_code=1)
            self.crash()
            return
        self.zk = ZkDoor(self.cluster.zk, self.node, self.cfg.session_timeout_ms)
        self.zk.on_expired = self._on_session_expired
        self.txn_coordinators = SimTxnCoordinators(self, TxnConfig(
            planted_marker_before_prepare="marker-before-prepare" in bugs))
        settings = ControllerSettings(
            broker_id=self.id, offsets_partitions=self.cfg.offsets_partitions,
            offsets_replication_factor=min(self.cfg.offsets_replication_factor, self.cfg.brokers),
            unclean_leader_election=self.cfg.unclean_leader_election, auto_leader_rebalance=False,
            expected_brokers=self.cfg.brokers, offsets_eager_create=self.cfg.offsets_eager_create,
            metadata_resend_interval_ms=self.cfg.metadata_resend_interval_ms,
            planted_elect_outside_isr="elect-outside-isr" in bugs)
        self.controller = SimController(self, self.zk, settings, zombie="zombie-controller" in bugs)
        self.configs = SimConfigListener(self)
        self._register()
        self.world.on_node(self.node, self.cfg.session_timeout_ms / 3, self._ping)
        self.world.on_node(self.node, self.cfg.replica_lag_time_max_ms / 2, self._shrink_check)
        self.world.on_node(self.node, HW_CHECKPOINT_MS, self._checkpoint)
        self.world.on_node(self.node, FSYNC_MS, self._fsync)

    def _on_role(self, topic: str, partition: int, is_leader: bool, epoch: int) -> None:
        self.coordinators.on_role(topic, partition, is_leader, epoch)
        self.txn_coordinators.on_role(topic, partition, is_leader, epoch)

    def _member_suffix(self) -> str:
        return "%032x" % self.world.rng.getrandbits(128)

    def crash(self, lose_unsynced: bool = False, torn_bytes: int = 0) -> None:
        """SIGKILL (or a power loss with ``lose_unsynced``): memory gone, the disk as the crash left it."""
        self.world.crash(self.node)
        self.running = False
        if self.zk is not None:
            self.zk.abandon()
        files = self.disk.files
        if lose_unsynced:
            for disk in self.disk.dirs:
                disk.crash(0.0)
        if torn_bytes:
            # the torn tail (as chaos's truncate fault cuts a real segment): the largest log's last bytes
            last = max(self.disk.logs.values(), key=lambda lg: lg.size_bytes, default=None)
            if last is not None:
                files.truncate(last.path, max(0, last.size_bytes - torn_bytes))
                files.fsync(last.path)

    def _try_register(self) -> bool:
        """Connect (a new session when there is none) and register this broker; False when ZooKeeper cannot be
        reached, or an old session of this broker still holds its znode (it waits for that to expire)."""
        zk = self.zk
        try:
            if zk.session_id is None or zk.expired:
                zk.connect()
                self.emit("broker_registering", predecessor_session=None)
            zk.ensure_persistent_paths(self.cfg.kafka_paths)
            epoch = zk.register_broker(self._registration())
        except CONNECTION_ERRORS:
            return False
        if epoch is None:
            return False
        self.state.broker_epoch = epoch
        self.emit("broker_registered", broker_epoch=epoch, session_id=f"0x{zk.session_id:x}")
        self.configs.process()   # every notification present (a new session's watch too)
        return True

    def _registration(self) -> BrokerRegistration:
        base = self.cfg.advertised_port_base
        if not base:
            return BrokerRegistration(self.id, "sim", 9000 + self.id, self.now())
        return BrokerRegistration(self.id, "sim", 9000 + self.id, self.now(),
                                  listeners=(("PLAINTEXT", "127.0.0.1", base + self.id),),
                                  protocols=(("PLAINTEXT", "PLAINTEXT"),))

    def _register(self) -> None:
        """At start: register (retried every 100 ms until it can), then the controller's startup."""
        if not self._try_register():
            self.world.on_node(self.node, REGISTER_RETRY_MS, self._register)
            return
        self.controller.start()

    def register_again(self) -> None:
        """The controller's register-and-re-elect event, after the session expired (controller/redo.py's
        ``RegisterBroker``): a connection error when it cannot yet, so the event is redone on a tick."""
        if not self._try_register():
            raise ZkConnectionLost(f"broker {self.id} could not register yet")

    def _on_session_expired(self) -> None:
        self.controller.on_session_expired()

    def _ping(self) -> None:
        self.zk.ping()
        self.world.on_node(self.node, self.zk.negotiated_ms / 3, self._ping)

    def _shrink_check(self) -> None:
        self.replicas.check_shrinks()
        self.world.on_node(self.node, self.cfg.replica_lag_time_max_ms / 2, self._shrink_check)

    def _checkpoint(self) -> None:
        for i, disk in enumerate(self.disk.dirs):   # one replication-offset-checkpoint per online directory
            d = f"d{i}"
            if d in self.dirs.offline:
                continue
            hws = {tp: h.repl.high_watermark for tp, h in self.replicas.hosted.items() if self.dir_of(h.log) == d}
            try:
                disk.write("replication-offset-checkpoint", repr(sorted(hws.items())).encode())
            except OSError as e:
                self.dir_failed(d, "high watermark checkpoint write", e)
                continue
            self.disk.hw.update(hws)
        if self.running:
            self.world.on_node(self.node, HW_CHECKPOINT_MS, self._checkpoint)

    def _fsync(self) -> None:
        for tp, log in sorted(self.disk.logs.items()):
            if self.dirs.is_offline(tp):
                continue
            try:
                log.fsync()
            except OSError as e:
                self.dir_failed(self.dir_of(log), "flush", e)
        if self.running:
            self.world.on_node(self.node, FSYNC_MS, self._fsync)

    # ------------------------------------------------------------------ requests (from the network)

    def handle_controller_request(self, msg: tuple, reply: Callable[[Any], None]) -> None:
        kind, header = msg[0], msg[1]
        if kind == "LeaderAndIsr":
            out = self.state.leader_and_isr(header, msg[2], self.dirs.leader_and_isr_errors(
                [(p.topic, p.partition) for p in msg[2]]))
            first, together, last = roles.leader_and_isr_order(
                out.became_leader + out.became_follower,
                lambda p: h.repl if (h := self.replicas.hosted.get((p.topic, p.partition))) is not None else None,
                self.id)
            for p in first + together + last:   # the broker's order (it takes up ``together`` side by side)
                code = self.replicas.apply_leader_and_isr(p)
                if code:
                    out.partition_errors[(p.topic, p.partition)] = code
            self.log(*out.events)
            reply((out.error, dict(out.partition_errors)))   # the controller reads the per-partition errors
            return
        elif kind == "UpdateMetadata":
            out = self.state.update_metadata(header, msg[2], msg[3])
            if out.error == errors.NONE:
                for p in msg[2]:
                    self.replicas.update_isr_if_newer(p)
                self.replicas.set_live_brokers({b for b, *_ in msg[3]})
        else:
            out = self.state.stop_replica(header, msg[2], -1, msg[3])
            for tp in out.stopped:
                self.replicas.stop_replica(tp)
                if msg[3]:   # deleted (a reassignment removed this replica): its log and HW go
                    log = self.disk.logs.pop(tp, None)
                    if log is not None:
                        self.disk.files.delete(log.path)
                    self.disk.hw.pop(tp, None)
        self.log(*out.events)
        reply(out.error)

    def handle_alter_isr(self, payload: Any, reply: Callable[[Any], None]) -> None:
        if not self.controller.core.active:
            reply((errors.NOT_CONTROLLER, {}))
            return
        self.controller.handle_alter_isr(payload, reply)

    def handle_fetch(self, req: Any, reply: Callable[[Any], None]) -> None:
        if self.disk.slow_ms:   # a slow disk: the read waits its turn
            self.world.on_node(self.node, self.disk.slow_ms, self.replicas.handle_fetch, req, reply)
            return
        self.replicas.handle_fetch(req, reply)

    def handle_produce(self, req: Any, reply: Callable[[Any], None]) -> None:
        if self.disk.slow_ms:   # a slow disk: the append waits its turn
            self.world.on_node(self.node, self.disk.slow_ms, self._produce, req, reply)
            return
        self._produce(req, reply)

    def _produce(self, req: Any, reply: Callable[[Any], None]) -> None:
        tp, records, acks, timeout_ms, *producer = req      # producer: a ProducerBatch (idempotent, transactional)
        self.replicas.append(tp, records, acks, timeout_ms, lambda code, base: reply((code, base)),
                             producer[0] if producer else None)

    def handle_consume(self, req: Any, reply: Callable[[Any], None]) -> None:
        tp, offset = req
        reply(self.replicas.read_committed(tp, offset))

    def handle_fetch_isolated(self, req: Any, reply: Callable[[Any], None]) -> None:
        """A consumer's Fetch with an isolation level: (tp, offset, read_committed) -> SimReplicaManager's
        ``read_isolated``."""
        tp, offset, read_committed = req
        reply(self.replicas.read_isolated(tp, offset, read_committed))

    def handle_txn(self, req: Any, reply: Callable[[Any], None]) -> None:
        """(an API of SimTxnCoordinators, its request), as the Kafka listener's transactional APIs: an
        AddOffsetsToTxn gets the group's __consumer_offsets partition here (node/server/txn_door.py)."""
        api, body = req
        if api is SimTxnCoordinators.add_offsets:
            from dataclasses import replace
            n = self.state.topic_partitions.get(OFFSETS_TOPIC, 0) or self.cfg.offsets_partitions
            body = replace(body, offsets_partition=partition_for(body.group_id, n))
        api(self.txn_coordinators, body, reply)

    def handle_write_txn_markers(self, body: Any, reply: Callable[[Any], None]) -> None:
        write_txn_markers(self, body, reply, self.txn_coordinators.config.request_timeout_ms)

    def handle_find_txn_coordinator(self, txn_id: str, reply: Callable[[Any], None]) -> None:
        """FindCoordinator with key type 1 (node/server/txn_door.py's rule, without the lazy creation of
        __transaction_state: a simulated run creates it)."""
        n = self.state.topic_partitions.get(TRANSACTION_STATE_TOPIC, 0)
        info = self.state.metadata.get((TRANSACTION_STATE_TOPIC, partition_for(txn_id, n))) if n else None
        if info is None or info.leader < 0 or info.leader not in self.state.live_brokers:
            reply((errors.COORDINATOR_NOT_AVAILABLE, -1))
        else:
            reply((errors.NONE, info.leader))

    def handle_group(self, req: Any, reply: Callable[[Any], None]) -> None:
        """(an API of SimCoordinators, e.g. ``SimCoordinators.join_group``, its request): to this broker's
        coordinators (those of its current incarnation)."""
        api, body = req
        api(self.coordinators, body, reply)

    def handle_find_coordinator(self, group: str, reply: Callable[[Any], None]) -> None:
        n = self.state.topic_partitions.get(OFFSETS_TOPIC, 0)
        info = self.state.metadata.get((OFFSETS_TOPIC, partition_for(group, n))) if n else None
        if info is None or info.leader < 0 or info.leader not in self.state.live_brokers:
            reply((errors.COORDINATOR_NOT_AVAILABLE, -1))
        else:
            reply((errors.NONE, info.leader))

    def handle_metadata(self, topic: str, reply: Callable[[Any], None]) -> None:
        n = self.state.topic_partitions.get(topic, 0)
        leaders = {}
        for p in range(n):
            info = self.state.metadata.get((topic, p))
            leaders[p] = info.leader if info is not None and info.leader in self.state.live_brokers else -1
        reply(leaders)
