"""A broker process: ZooKeeper registration, the gRPC server, and the controller elector.

    kafkasim broker --id N [--config cluster.yaml] [--zookeeper CONNECT]
    python -m node --id N ...

SIGTERM (or SIGINT) stops it cleanly: it resigns as controller, closes its
ZooKeeper session so that its ephemeral znodes go at once, and exits 0.  Every
step of the stop is bounded, even with ZooKeeper gone; past the bound a
watchdog (node/server/shutdown.py) logs ``shutdown_timed_out`` and exits 3.

A log directory that fails (an I/O error) goes offline; the broker then writes
Kafka's log directory event notification, or, when no directory is left online,
halts with status 1 as Kafka 2.8 does (``broker_halted``): no controlled shutdown,
no session close, so its registration goes when its ZooKeeper session expires.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import gc
import json
import logging
import os
import signal
import sys
import threading
import time
from concurrent import futures

from kafkacommon import errors
from listener.app import make_listener
from listener.limits import Limits, Quotas, parse_overrides
from listener.context import ListenerContext, cluster_id_for
from node.server import bugs
from replication.broker_state import BrokerState
from node.config import STATE_FILE, ClusterConfig, ConfigError, load_config
from node.server.settings import controller_settings, group_config, replica_settings, txn_config
from node.dynamic_config import DynamicBrokerConfig
from node.shells.config_listener import ConfigChangeListener
from node.shells.controller_shell import ControllerShell
from node.shells.coordinator_shell import CoordinatorShell
from node.shells.txn_shell import TxnShell
from node.server.txn_door import TxnDoor
from transactions.config import TRANSACTION_STATE_TOPIC
from zk.producer_ids import ProducerIds
from node.server.groups_servicer import GroupsServicer
from node.server.internal_topics import InternalTopic
from node.server.rpc_server import AioServer
from node.net.links import DIRECT, LinkMap, LinkMapError
from node.listeners import parse_protocol_map
from node.events import EventLog
from node.replicas.replica_manager import CleanerSettings, ReplicaManager
from node.server.servicer import BrokerServicer
from node.server.session_file import SessionFile
from node.server.shutdown import ShutdownWatchdog, await_handover, controlled_shutdown_budget_s, stop_deadline_s
from node.net.peers import peer_channel
from proto import kafkasim_pb2 as pb
from proto import groups_pb2_grpc as gpbg
from proto import kafkasim_pb2_grpc as pbg
from zk.client import ZkClient
from zk import paths as zk_paths
from kafkacommon.metadata import BrokerRegistration
from zk.errors import CONNECTION_ERRORS, ZkConnectionLost, ZkError
from replication.log_dirs import DirFailure

log = logging.getLogger("kafkasim.broker")


def resolve_zookeeper(cfg: ClusterConfig, override: str | None) -> str:
    """The connect string: --zookeeper, else cluster.yaml's, else the embedded one from the run dir."""
    if override:
        return override
    if cfg.zookeeper_connect:
        return cfg.zookeeper_connect
    state = cfg.run_dir / STATE_FILE
    try:
        return json.loads(state.read_text())["zookeeper"]["connect"]
    except (OSError, ValueError, KeyError):
        raise ConfigError(f"{cfg.source}: zookeeper.connect is not set and no embedded ZooKeeper is running "
                          f"({state} not found): start one with `kafkasim cluster up`, or pass --zookeeper") from None


class Broker:
    def __init__(self, cfg: ClusterConfig, broker_id: int, zk_connect: str, links: LinkMap = DIRECT,
                 planted_bugs: frozenset[str] = frozenset()):
        self.cfg = cfg
        self.links = links
        self.planted_bugs = planted_bugs
        self.spec = cfg.broker(broker_id)
        self.broker_id = broker_id
        self.events = EventLog(cfg.run_dir / "events" / f"broker-{broker_id}.jsonl", broker_id)
        self.state = BrokerState(broker_id, check_controller_epoch="zombie-controller" not in planted_bugs)
        self.session_file = SessionFile(self.spec.log_dir / "zk-session.json")
        self.zk = ZkClient(links.zookeeper_connect(zk_connect), cfg.session_timeout_ms, cfg.connection_timeout_ms)
        self.controller = ControllerShell(
            broker_id, self.zk, controller_settings(cfg, broker_id), self.events,
            socket_timeout_s=cfg.get("controller.socket.timeout.ms") / 1000.0,
            register_broker=self._register, cached_states=self._cached_states,
            cached_names=lambda: (tuple(self.state.live_brokers), tuple(self.state.topic_partitions)),
            dial=links.dial,
            zombie="zombie-controller" in planted_bugs)
        self.zk.add_state_listener(self.controller.on_session_state)
        g = cfg.get
        self.dynamic = DynamicBrokerConfig(cfg, broker_id)   # /config/brokers/<id> and <default> over cluster.yaml
        self.replicas = ReplicaManager(
            broker_id, list(self.spec.log_dirs),
            replica_settings(cfg), self.events,
            broker_epoch=lambda: self.state.broker_epoch, endpoint_of=self._endpoint_of,
            controller_endpoint=lambda: self._endpoint_of(self.state.controller_id),
            fetch_wait_ms=g("replica.fetch.wait.max.ms"), segment_bytes=g("log.segment.bytes"),
            checkpoint_interval_ms=g("replica.high.watermark.checkpoint.interval.ms"),
            topic_config=self._topic_config,
            cleaner=CleanerSettings(g("log.cleaner.enable"), g("log.cleaner.backoff.ms"),
                                    g("log.cleaner.min.cleanable.ratio.percent") / 100),
            log_defaults=self.dynamic.lookup, retention_check_interval_ms=g("log.retention.check.interval.ms"),
            fetch_max_bytes=g("replica.fetch.max.bytes"), on_dir_failure=self._on_dir_failure,
            shutting_down=lambda: self.stopping.is_set())   # Kafka's isShuttingDown, from the stop signal on
        self.groups = CoordinatorShell(broker_id, self.replicas, self.events, group_config(cfg, planted_bugs),
                                       num_partitions=self._offsets_partitions,
                                       load_buffer_bytes=g("offsets.load.buffer.size"))
        self.producer_ids = ProducerIds(self.zk, broker_id)
        self.txns = TxnShell(broker_id, self.replicas, self.state, self.events, txn_config(cfg),
                             num_partitions=self._txn_partitions, new_producer_id=self.producer_ids.next_id,
                             endpoint_of=self._endpoint_of, load_buffer_bytes=g("transaction.state.log.load.buffer.size"))

        def on_leadership(topic: str, partition: int, is_leader: bool, leader_epoch: int) -> None:
            self.groups.on_leadership(topic, partition, is_leader, leader_epoch)
            self.txns.on_leadership(topic, partition, is_leader, leader_epoch)
        self.replicas.on_leadership = on_leadership
        self.config_changes = ConfigChangeListener(self.zk, self.events.emit, self._topic_config_changed,
                                                   self._broker_config_changed)
        self.zk.add_state_listener(self.config_changes.on_session_state)
        # long polls (followers, consumers) hold a worker each: size the pool for them; workers start
        # lazily, with small stacks.  Parked joins and syncs hold none (node/server/rpc_server.py)
        threading.stack_size(1 << 20)
        pool = futures.ThreadPoolExecutor(max_workers=2048, thread_name_prefix="grpc")
        self.server = AioServer(pool, maximum_concurrent_rpcs=4096)
        self.servicer = BrokerServicer(self.state, self.events, self.controller, self.replicas, pool,
                                       on_offsets_marker=self.groups.txn_marker_written,
                                       marker_timeout_ms=g("request.timeout.ms"))
        self.server.add(pbg.add_BrokerServicer_to_server, self.servicer)
        # Kafka's GroupMetadataManager.offsetsTopicConfigs at /config/topics/__consumer_offsets; the placement's the
        # default (compacted)
        self.offsets_topic = InternalTopic(zk_paths.OFFSETS_TOPIC, "offsets.topic.replication.factor", "offsets",
                                           self.state, self.zk, self.events, lambda: (
                                               g("offsets.topic.num.partitions"), g("offsets.topic.replication.factor"),
                                               None, {"cleanup.policy": "compact", "compression.type": "producer",
                                                      "segment.bytes": str(g("offsets.topic.segment.bytes"))}))
        self.txn_topic = InternalTopic(TRANSACTION_STATE_TOPIC, "transaction.state.log.replication.factor",
                                       "transaction", self.state, self.zk, self.events, lambda: (
                                           g("transaction.state.log.num.partitions"),
                                           g("transaction.state.log.replication.factor"),
                                           self._txn_topic_config(), None))
        lazy = None if g("kafkasim.offsets.topic.eager.create") else self.offsets_topic.create
        groups_servicer = GroupsServicer(self.state, self.groups, pool, lazy)
        self.server.add(gpbg.add_GroupsServicer_to_server, groups_servicer)
        self.cluster_id = cluster_id_for(zk_connect)   # also written to /cluster/id when absent (start())
        txn_door = TxnDoor(self.state, self.txns, pool, self.txn_topic.create, self._offsets_partitions)
        # the Kafka-protocol listeners: real clients, the same cores (listener/); one per name in `listeners`,
        # each answering with the brokers' endpoints advertised for its name
        context = ListenerContext(
            broker_id, self.state, self.replicas, groups_servicer.door, txn_door, self.producer_ids.next_id, self.zk,
            endpoint_of=self._kafka_endpoint_of,
            rack_of=lambda b: self._spec_of(b).rack if self._spec_of(b) else None,
            cluster_id=self.cluster_id, pool=pool, message_max_bytes=g("message.max.bytes"),
            num_partitions=g("num.partitions"), default_replication_factor=g("default.replication.factor"),
            delete_topic_enable=g("delete.topic.enable"), auto_create_topics=g("auto.create.topics.enable"),
            topic_config=self._topic_config, broker_config=self.dynamic,
            is_controller=lambda: self.controller.is_active, controller=self.controller,
            create_internal_topic=self._create_internal_topic)
        limits = Limits(max_request_bytes=g("socket.request.max.bytes"), idle_ms=g("connections.max.idle.ms"),
                        partial_frame_ms=g("request.timeout.ms"), max_connections=g("max.connections"),
                        max_per_ip=g("max.connections.per.ip"),
                        per_ip_overrides=parse_overrides(g("max.connections.per.ip.overrides")),
                        queued_max_requests=g("queued.max.requests"))
        quotas = Quotas(limits)   # broker-wide: every listener's connections and queued requests
        self.kafkas = [make_listener(dataclasses.replace(context, endpoint_of=functools.partial(
                           self._kafka_endpoint_of, listener=name)), host, port, limits, self.events.emit, quotas)
                       for name, host, port in self.spec.kafka_listeners]
        self.kafka = self.kafkas[0]
        self._kafka_error: str | None = None   # why the Kafka listener could not start (then none is registered)
        self.stopping = threading.Event()

    def _create_internal_topic(self, topic: str) -> bool | None:
        """A Metadata request named an internal topic that does not exist, with topic creation allowed: Kafka
        2.8.2's AutoTopicCreationManager creates it with its own partitions, replication factor and configs ->
        False below its replication factor of live brokers; None when this broker does not create it
        (``__consumer_offsets`` under kafkasim's eager creation: the controller makes it)."""
        if topic == zk_paths.OFFSETS_TOPIC:
            return None if self.cfg.get("kafkasim.offsets.topic.eager.create") else self.offsets_topic.create()
        if topic == TRANSACTION_STATE_TOPIC:
            return self.txn_topic.create()
        return None

    def _txn_topic_config(self) -> dict:
        """Kafka's TransactionStateManager.transactionTopicConfigs: compacted, uncompressed, no unclean election,
        transaction.state.log.min.isr and its segment size."""
        return {"cleanup.policy": "compact", "compression.type": "uncompressed",
                "segment.bytes": self.cfg.get("transaction.state.log.segment.bytes"),
                "min.insync.replicas": self.cfg.get("transaction.state.log.min.isr"),
                "unclean.leader.election.enable": False}

    def _txn_partitions(self) -> int:
        return self.state.topic_partitions.get(TRANSACTION_STATE_TOPIC) or self.cfg.get("transaction.state.log.num.partitions")


    def _on_dir_failure(self, failure: DirFailure) -> None:
        """After a log directory went offline and its replicas stopped being served (the replica manager's
        log-dir-failure-handler thread): halt when none is left (Kafka's LogManager.handleLogDirFailure:
        Exit.halt(1), before anything is written to ZooKeeper), else write the notification
        (KafkaZkClient.propagateLogDirEvent), retried while ZooKeeper is unreachable."""
        if failure.halt:
            self.events.emit("broker_halted", reason=f"every log directory is offline (the last: {failure.dir})",
                             exit_code=1)
            self.events.close()
            logging.shutdown()
            os._exit(1)
        while not self.stopping.is_set():
            try:
                path = self.zk.propagate_log_dir_event(self.broker_id)
            except CONNECTION_ERRORS:
                self.stopping.wait(0.1)
                continue
            except ZkError as e:
                self.events.emit("log_dir_event_not_notified", dir=failure.dir, error=f"{type(e).__name__}: {e}")
                return
            self.events.emit("log_dir_event_notified", dir=failure.dir, path=path)
            return

    def _endpoint_of(self, broker_id: int) -> str | None:
        b = self.state.live_brokers.get(broker_id)
        return self.links.dial(broker_id, f"{b[0]}:{b[1]}") if b else None

    def _spec_of(self, broker_id: int):
        return next((b for b in self.cfg.brokers if b.id == broker_id), None)

    def _kafka_endpoint_of(self, broker_id: int, listener: str = "PLAINTEXT") -> tuple[str, int] | None:
        """A live broker's endpoint advertised for ``listener`` (the one a request came in on), from cluster.yaml
        (every broker reads the same file); None when it is not live or has no such listener (as Kafka leaves a
        broker without the listener out of Metadata)."""
        spec = self._spec_of(broker_id)
        live = spec is not None and broker_id in self.state.live_brokers
        return spec.advertised_on(listener) if live else None

    def _offsets_partitions(self) -> int:
        """The offsets topic's partition count as the metadata cache has it, else the configured one."""
        return self.state.topic_partitions.get(zk_paths.OFFSETS_TOPIC) or self.cfg.get("offsets.topic.num.partitions")

    def _topic_config(self, topic: str) -> dict:
        base = {}
        if topic == zk_paths.OFFSETS_TOPIC:  # Kafka's offsets topic: compacted, its own segment size
            base = {"cleanup.policy": "compact", "segment.bytes": self.cfg.get("offsets.topic.segment.bytes")}
        elif topic == TRANSACTION_STATE_TOPIC:   # Kafka's transactionTopicConfigs
            base = self._txn_topic_config()
        try:
            overrides = self.zk.read_topic_config(topic)  # retried across a lost connection
        except (ZkError, ValueError) as e:
            # the session expired, ZooKeeper stayed away past the retry deadline, or the znode does not
            # decode: the broker defaults apply to this replica, and the log says so
            self.events.emit("topic_config_unreadable", topic=topic, error=f"{type(e).__name__}: {e}")
            return base
        return base | (overrides or {})  # None: the topic is gone (being deleted): the defaults

    def _topic_config_changed(self, topic: str, config: dict) -> int:
        """A ``topics/<t>`` change notification: the hosted partitions take the configs, and the controller
        (if it is this broker) reads them again."""
        base = {}
        if topic == zk_paths.OFFSETS_TOPIC:
            base = {"cleanup.policy": "compact", "segment.bytes": self.cfg.get("offsets.topic.segment.bytes")}
        elif topic == TRANSACTION_STATE_TOPIC:
            base = self._txn_topic_config()
        done = self.replicas.reconfigure_topic(topic, base | dict(config))
        self.controller.config_changed()
        return len(done)

    def _broker_config_changed(self, entity: str, config: dict) -> int | None:
        """A ``brokers/<id|<default>>`` change notification: None when it is another broker's."""
        if not self.dynamic.update(entity, config):
            return None
        n = self.replicas.reconfigure_all()
        self.controller.config_changed()
        return n

    def _cached_states(self) -> dict:
        """This broker's metadata cache as the controller core's (LeaderAndIsr, zkVersion) map; empty (the new
        controller reads the states from ZooKeeper, as Kafka's does) while a controller request is being applied
        here: the cache is changing, and the requests queued behind that one (the UpdateMetadata after a
        controlled shutdown's LeaderAndIsr) are not in it yet, so a failover deciding from it would write from
        stale zkVersions, fail on BADVERSION and read every state anyway."""
        if self.servicer.applying():   # set in __init__; the controller asks only once started
            return {}
        return dict(self.state.controller_view)

    def start(self) -> None:
        address = f"{self.spec.host}:{self.spec.port}"
        if self.server.add_insecure_port(address) == 0:
            raise OSError(f"broker {self.broker_id}: cannot listen on {address}")
        self.server.start()
        kafka_error = None
        for kafka in self.kafkas:
            try:
                kafka.start()
            except OSError as e:
                if self.spec.listeners is not None:  # configured: a port taken is a start-up failure
                    raise OSError(f"broker {self.broker_id}: cannot listen on {kafka.host}:{kafka.port} "
                                  f"(listeners): {e}") from e
                kafka_error = str(e)  # the default port is taken: serve gRPC only, and say so
        self.events.emit("broker_starting", host=self.spec.host, port=self.spec.port, pid=os.getpid(),
                         planted_bugs=sorted(self.planted_bugs),
                         kafka_listener=None if kafka_error else f"{self.kafka.host}:{self.kafka.port}")
        if kafka_error:
            self.events.emit("kafka_listener_failed", host=self.kafka.host, port=self.kafka.port, error=kafka_error)
        self._kafka_error = kafka_error
        self.zk.start()
        self._ensure_persistent_paths()
        for entity in (zk_paths.DEFAULT_ENTITY, str(self.broker_id)):   # Kafka's dynamicConfig.initialize
            self.dynamic.update(entity, self.zk.read_entity_config(f"brokers/{entity}"))
        self.config_changes.start()
        self._register()
        self.controller.start()

    def _ensure_persistent_paths(self) -> None:
        """Before we register there is no session state to lose, so a session that expired in a
        ZooKeeper stall is simply replaced (kazoo opens a new one) and the paths made again."""
        deadline = time.monotonic() + max(30.0, 3 * self.cfg.session_timeout_ms / 1000.0)
        while True:
            try:
                self.zk.ensure_persistent_paths()
                stored = self.zk.ensure_cluster_id(self.cluster_id)
                if stored != self.cluster_id:   # a chroot another cluster (a Kafka) set up first
                    self.events.emit("cluster_id_differs", stored=stored, served=self.cluster_id)
                return
            except CONNECTION_ERRORS:
                if time.monotonic() >= deadline or self.stopping.wait(0.1):
                    raise

    def _register(self) -> None:
        # endpoints: the advertised Kafka listeners (what Kafka's tools reading ZooKeeper dial), when they
        # listen; host/port: the gRPC address, written beside them for kafkasim's own readers (zk/codecs.py)
        listeners = () if self._kafka_error else self.spec.advertised_endpoints
        protocols = parse_protocol_map(self.cfg.get("listener.security.protocol.map"))
        reg = BrokerRegistration(self.broker_id, self.spec.host, self.spec.port, int(time.time() * 1000),
                                 self.spec.rack, listeners=tuple(listeners),
                                 protocols=tuple((name, protocols.get(name, name)) for name, _, _ in listeners))
        wait_s = 2 * self.cfg.session_timeout_ms / 1000.0 + 5
        predecessor = self.session_file.dead_predecessor_session()
        self.events.emit("broker_registering", predecessor_session=f"0x{predecessor:x}" if predecessor else None)
        for attempt in range(50):
            try:
                epoch = self.zk.register_broker(reg, wait_s, predecessor)
                break
            except CONNECTION_ERRORS:
                if self.stopping.wait(0.1):
                    return
        else:   # a connection error: the controller's register-and-re-elect is redone once ZooKeeper is back
            raise ZkConnectionLost(f"broker {self.broker_id}: could not register in ZooKeeper "
                                   f"(50 attempts, each waiting up to {wait_s:.0f} s for the connection)")
        self.state.broker_epoch = epoch
        try:
            self.session_file.record(self.zk.session_id, self.zk.session_password)
        except OSError as e:   # its log directory is full or failing: only a fast restart's proof is lost
            self.events.emit("session_file_not_written", path=str(self.session_file.path),
                             error=f"{type(e).__name__}: {e}")
        self.events.emit("broker_registered", broker_epoch=epoch, session_id=f"0x{self.zk.session_id:x}",
                         replaced_predecessor=f"0x{predecessor:x}" if predecessor else None)

    def _controlled_shutdown(self) -> set[tuple[str, int]] | None:
        """Kafka's controlled shutdown: ask the controller to move our leaderships away and take
        us out of ISRs, retrying while some remain; then shut down whatever the answer.  Returns the partitions
        the controller's last answer left here, None when no answer was NONE.

        Bounded: ``controlled.shutdown.max.retries`` attempts within their budget (node/server/shutdown.py).
        The controller is found through ZooKeeper, and only a controller connected to it can write
        the moves: when our client has no connection and none comes back within one retry backoff,
        no controller can be found, so the broker stops asking at once (``gave_up``)."""
        attempts = max(1, self.cfg.get("controlled.shutdown.max.retries"))
        backoff_s = self.cfg.get("controlled.shutdown.retry.backoff.ms") / 1000.0
        timeout_s = self.cfg.get("controller.socket.timeout.ms") / 1000.0
        t0 = time.monotonic_ns()
        deadline = time.monotonic() + controlled_shutdown_budget_s(self.cfg)
        self.events.emit("controlled_shutdown_started", broker_epoch=self.state.broker_epoch)
        code, remaining, made, gave_up = errors.UNKNOWN_SERVER_ERROR, [], 0, None
        for attempt in range(1, attempts + 1):
            left = deadline - time.monotonic()
            if left <= 0:
                gave_up = "budget_spent"
                break
            if not self.zk.wait_connected(min(backoff_s, left)):
                gave_up = "zookeeper_unreachable"
                break
            made = attempt
            try:
                code, remaining = self._ask_controller_to_shut_down(max(0.05, min(timeout_s, left)))
            except Exception as e:  # controller unreachable or gone: retry like Kafka
                code, remaining = errors.UNKNOWN_SERVER_ERROR, []
                log.warning("controlled shutdown attempt %d failed: %r", attempt, e)
            if code == errors.NONE and not remaining:
                break
            if attempt < attempts:
                threading.Event().wait(backoff_s)  # retry backoff (controlled.shutdown.retry.backoff.ms)
        self.events.emit("controlled_shutdown_done", attempts=made, succeeded=code == errors.NONE and not remaining,
                         error=errors.name(code), remaining=[f"{t}-{p}" for t, p in remaining], gave_up=gave_up,
                         duration_ms=round((time.monotonic_ns() - t0) / 1e6, 3))
        return set(remaining) if code == errors.NONE else None

    def _released(self, moved: set[tuple[str, int]]) -> bool:
        return (self.groups.released({p for t, p in moved if t == zk_paths.OFFSETS_TOPIC})
                and self.txns.released({p for t, p in moved if t == TRANSACTION_STATE_TOPIC}))

    def _ask_controller_to_shut_down(self, timeout_s: float) -> tuple[int, list[tuple[str, int]]]:
        if self.controller.is_active:
            return self.controller.controlled_shutdown(self.broker_id, self.state.broker_epoch, timeout_s)
        controller = self.zk.read_controller()
        reg = self.zk.read_brokers().get(controller) if controller is not None else None
        if reg is None:
            return errors.NOT_CONTROLLER, []
        with peer_channel(self.links.dial(controller, reg.endpoint())) as ch:
            r = pbg.BrokerStub(ch).ControlledShutdown(
                pb.ControlledShutdownRequest(broker_id=self.broker_id, broker_epoch=self.state.broker_epoch),
                timeout=timeout_s)
        return r.error_code, [(tp.topic, tp.partition) for tp in r.remaining_partitions]

    def stop(self, watchdog: ShutdownWatchdog | None = None) -> None:
        """Hand over (controlled shutdown), stop serving, close the groups and the logs, resign, then close the
        ZooKeeper session last: Kafka 2.8's ``KafkaServer.shutdown`` order.

        Closing the session is what starts the failover elsewhere (our
        ephemerals go at once), so everything slow happens before it, and
        main() exits right after it without interpreter teardown, leaving the
        CPU to the brokers taking over.

        No step waits on ZooKeeper or the controller unboundedly: the ZooKeeper
        client stops waiting for a lost connection first (zk.fail_fast), and
        ``watchdog`` (armed by main()) is told each step, to name the one it
        finds stuck.
        """
        step = watchdog.enter if watchdog is not None else (lambda _name: None)
        self.zk.fail_fast()
        self.events.emit("broker_stopping", controller=self.controller.is_active)
        if self.cfg.get("controlled.shutdown.enable"):
            step("controlled_shutdown")
            led = self.replicas.led_with_followers()
            remaining = self._controlled_shutdown()
            moved = led - remaining if remaining is not None else set()
            if moved:
                step("controlled_shutdown_handover")
                await_handover(moved, self.replicas.led_with_followers, self._released, self.events)
        step("server_stop")
        self.config_changes.stop()
        for kafka in self.kafkas:
            kafka.stop()
        self.server.stop(grace=0.2)
        step("groups_close")
        self.groups.close()
        self.txns.close()
        step("replicas_close")
        self.replicas.close()
        # as Kafka 2.8's KafkaServer.shutdown: the controller stops after the log manager, just before the
        # session closes; until then it handles its events and its channels deliver what it queued (the
        # controlled shutdown's ISR shrinks), and what is still queued when it resigns is dropped
        step("controller_shutdown")
        self.controller.shutdown()
        step("zk_session_close")
        self.events.emit("zk_session_closing", session_id=f"0x{self.zk.session_id:x}")
        t0 = time.monotonic_ns()
        try:
            closed, error = self.zk.stop(), None  # closes the session: /brokers/ids/<id> (and /controller) go now
        except Exception as e:
            log.exception("closing the ZooKeeper session failed")
            closed, error = False, repr(e)
        if not closed:
            self.events.emit("zk_session_close_failed", error=error or "timed out",
                             duration_ms=round((time.monotonic_ns() - t0) / 1e6, 3))
        # a controller request still being applied (its reads of ZooKeeper fail now that the session is closed)
        # logs its last lines before broker_stopped, as Kafka's request handlers finish before it reports itself shut down
        self.servicer.wait_applied(1.0)
        if watchdog is not None and not watchdog.finish():
            return  # it fired: the process is ending with its exit status
        self.events.emit("broker_stopped")
        self.events.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kafkasim broker", description="Run one broker in the foreground.")
    ap.add_argument("--id", type=int, required=True, help="broker.id, as listed in cluster.yaml")
    ap.add_argument("--config", default="cluster.yaml", help="cluster definition (default: cluster.yaml)")
    ap.add_argument("--zookeeper", default=None, help="ZooKeeper connect string, overriding cluster.yaml")
    ap.add_argument("--links", default=None, help="JSON link map: dial peers and ZooKeeper through these "
                                                  "addresses (a chaos run's fault proxy); see node/net/links.py")
    args = ap.parse_args(argv)
    logging.basicConfig(level=os.environ.get("KAFKASIM_LOG", "WARNING"),
                        format=f"%(asctime)s broker-{args.id} %(name)s %(levelname)s %(message)s")
    try:
        cfg = load_config(args.config)
        cfg.broker(args.id)
        connect = resolve_zookeeper(cfg, args.zookeeper)
        links = LinkMap.load(args.links) if args.links else DIRECT
        planted_bugs = bugs.planted()
    except (ConfigError, LinkMapError, bugs.UnknownBug) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    # Block SIGTERM/SIGINT before any thread exists (threads inherit the mask), and take them
    # synchronously below.  With a Python handler instead, the kernel may deliver the signal to
    # a gRPC or kazoo thread while the main thread sleeps in a lock, and it is never handled.
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    broker = Broker(cfg, args.id, connect, links, planted_bugs)
    default_hook = threading.excepthook

    def thread_died(hook_args: threading.ExceptHookArgs) -> None:
        """No thread may die of an exception unseen: each such death is a bug, and the event says so."""
        thread = hook_args.thread.name if hook_args.thread is not None else "?"
        broker.events.emit("thread_died", thread=thread,
                           error=f"{hook_args.exc_type.__name__}: {hook_args.exc_value}")
        default_hook(hook_args)

    threading.excepthook = thread_died
    try:
        broker.start()
    except Exception as e:  # say why, and exit even though gRPC/kazoo threads may be running
        log.exception("start-up failed")
        broker.events.emit("broker_start_failed", error=repr(e))
        broker.events.close()
        print(f"error: broker {args.id} failed to start: {e}", file=sys.stderr, flush=True)
        os._exit(1)
    # what start-up allocated goes to the collector's permanent generation, and the young generation is
    # collected after 20,000 net allocations, not 700: a request's few hundred short-lived objects are freed by
    # reference counting, and at the default the collector took ~10% of a broker's CPU under commits (issue 49)
    gc.freeze()
    gc.set_threshold(20_000, *gc.get_threshold()[1:])
    received = signal.sigwait(stop_signals)
    broker.events.emit("signal_received", signal=signal.Signals(received).name)
    broker.stopping.set()
    watchdog = ShutdownWatchdog(broker.events, stop_deadline_s(cfg)).start()
    broker.stop(watchdog)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown (gRPC's threads): the event log is closed and synced


if __name__ == "__main__":
    sys.exit(main())
