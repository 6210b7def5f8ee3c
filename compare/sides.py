"""The two sides of a differential run: kafkasim (the launcher's ``Cluster``) and Kafka 2.8.2 (``ReferenceCluster``).

Both get the same cluster.yaml settings, the same broker ids and the same Kafka listener ports (the sides
run one after the other, never at once), each on a fresh Debian ZooKeeper of its own under the chroot
``/cmp``, whose transaction log is the record of every ZooKeeper write (``zk/txnlog.py``).  When a scenario
cuts a broker off ZooKeeper (``expire session``), every broker reaches ZooKeeper through its own link of the
fault proxy (``chaos/proxy.py``); nothing else goes through it.

A side offers the same verbs on both: start the cluster (the pinned controller first, alone, until it
wins), create a pinned topic, kill, terminate, pause, resume or start a broker, cut or heal its ZooKeeper
link, and a preferred election as each side's tool does it.
"""
from __future__ import annotations

import signal
from pathlib import Path
from typing import Any, Callable

import yaml

from chaos.proxy_control import ProxyProcess
from chaos.scenario import OFFSETS_TOPIC, TopicSpec
from compare.probe import Probe, ProbeError
from compare.scenario import CompareScenario
from kafkacommon import errors
from launcher.cluster import Cluster
from node.config import ClusterConfig, load_config
from node.net.links import LinkMap
from reference.jars import ensure_jars
from reference.kafka import ReferenceCluster, all_threads_stopped
from util.procs import process_state
from util.waiting import wait_for
from zk import admin
from zk.client import ZkClient
from zk.server import EmbeddedZooKeeper, four_letter_word, free_port

CHROOT = "/cmp"
#: the settings both sides run with unless the scenario sets them (short, so that a run takes a minute)
DEFAULTS: dict[str, Any] = {
    "zookeeper.session.timeout.ms": 6000,
    "replica.lag.time.max.ms": 4000,
    "group.initial.rebalance.delay.ms": 0,
    "auto.leader.rebalance.enable": False,
    "controlled.shutdown.retry.backoff.ms": 500,
    "controller.socket.timeout.ms": 5000,
    "offsets.topic.num.partitions": 3,
    "kafkasim.offsets.topic.eager.create": False,   # Kafka's lazy creation; a pinned one is created by the run
}


def cluster_document(scenario: CompareScenario, run_dir: Path, zk_connect: str, ports: list[int]) -> dict[str, Any]:
    """The cluster.yaml of one side: the defaults, the scenario's settings, pinned ports."""
    s = scenario.base
    doc: dict[str, Any] = {"run.dir": str(run_dir), "zookeeper.connect": zk_connect,
                           "offsets.topic.replication.factor": min(3, s.brokers), **DEFAULTS}
    offsets = next((t for t in s.topics if t.name == OFFSETS_TOPIC), None)
    if offsets is not None:
        doc.update({"offsets.topic.num.partitions": offsets.partitions,
                    "offsets.topic.replication.factor": offsets.replication_factor})
    doc.update(s.cluster_config)
    doc["brokers"] = [{"id": i, "host": "127.0.0.1", "port": ports[2 * (i - 1)],
                       "listeners": f"PLAINTEXT://127.0.0.1:{ports[2 * (i - 1) + 1]}"} for i in range(1, s.brokers + 1)]
    return doc


def pick_ports(brokers: int) -> list[int]:
    """A gRPC port and a Kafka listener port per broker, free now (kept for both sides)."""
    out: list[int] = []
    while len(out) < 2 * brokers:
        p = free_port()
        if p not in out:
            out.append(p)
    return out


class Side:
    """What a step does to a cluster, the same way on both sides."""
    name = ""

    def __init__(self, scenario: CompareScenario, root: Path, ports: list[int]) -> None:
        self.scenario = scenario
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.zookeeper = EmbeddedZooKeeper(root / "zookeeper", servers=1, tick_ms=100)
        self.ports = ports
        self.proxy: ProxyProcess | None = None
        self.zk_links: dict[int, str] = {}       # broker id -> its proxy link to ZooKeeper
        self.paused: set[int] = set()
        self.cfg: ClusterConfig | None = None
        self.config_path = root / "cluster.yaml"

    # ------------------------------------------------------------------ set-up

    def prepare(self) -> None:
        """Start ZooKeeper (and the proxy, when a step cuts a broker off it); write cluster.yaml."""
        self.zookeeper.start(timeout=60)
        doc = cluster_document(self.scenario, self.root / "cluster", self.zookeeper.connect_string + CHROOT,
                               self.ports)
        self.config_path.write_text(yaml.safe_dump(doc, sort_keys=False))
        self.cfg = load_config(self.config_path)
        if self.scenario.needs_zk_links():
            self.proxy = ProxyProcess.start(self.root / "proxy", seed=1)
            for b in self.cfg.brokers:
                port = self.proxy.add_link(f"b{b.id}->zk1", self.zookeeper.servers[0].address)
                self.zk_links[b.id] = f"127.0.0.1:{port}"

    def broker_ids(self) -> list[int]:
        return [b.id for b in self.cfg.brokers]

    def kafka_address(self, broker_id: int) -> tuple[str, int]:
        return "127.0.0.1", self.ports[2 * (broker_id - 1) + 1]

    def probe(self, broker_id: int, timeout_s: float = 10.0) -> Probe:
        return Probe(*self.kafka_address(broker_id), timeout_s=timeout_s)

    def zk(self) -> ZkClient:
        raise NotImplementedError

    def zxid(self) -> int:
        """The last transaction ZooKeeper applied (``srvr``)."""
        s = self.zookeeper.servers[0]
        for line in four_letter_word("127.0.0.1", s.client_port, "srvr").splitlines():
            if line.startswith("Zxid:"):
                return int(line.split(":", 1)[1].strip(), 16)
        return -1

    def txn_dir(self) -> Path:
        return self.zookeeper.servers[0].data_dir / "version-2"

    def start(self, timeout_s: float = 120.0) -> None:
        """Every broker up; with ``cluster.controller``, that one first and alone until it is the controller."""
        first = self.scenario.base.controller
        if first is not None:
            self.start_broker(first)
            self.wait_set_up(lambda: self.zk().read_controller() == first, 60, f"broker {first} to become the controller")
        for b in self.broker_ids():
            if b != first:
                self.start_broker(b, wait=False)
        ids = self.broker_ids()
        self.wait_set_up(lambda: sorted(self.zk().read_brokers()) == ids and self.zk().read_controller() is not None,
                         timeout_s, f"brokers {ids} to register and elect a controller")
        for b in ids:
            self.wait_started(b, timeout_s)
        wait_for(lambda: all(self._metadata_complete(b) for b in ids), timeout_s,
                 "every broker's Metadata to name every broker and the controller")

    def wait_set_up(self, cond: Callable[[], Any], timeout_s: float, what: str) -> None:
        """Wait, while the cluster is being set up, for ``cond``."""
        wait_for(cond, timeout_s, what)

    def set_up_notes(self) -> list[str]:
        """What the set-up did beyond the scenario's base (a broker started again), for the run's output."""
        return []

    def _metadata_complete(self, broker_id: int) -> bool:
        try:
            md = self.probe(broker_id, 2.0).metadata([])
        except ProbeError:
            return False
        return md["controller_id"] >= 0 and sorted(b["node_id"] for b in md["brokers"]) == self.broker_ids()

    def create_setup_topic(self, t: TopicSpec) -> None:
        raise NotImplementedError

    def wait_leaders(self, topic: str, timeout_s: float = 60.0) -> None:
        def led() -> bool:
            snap = self.zk().read_snapshot()
            a = snap.topics.get(topic)
            return a is not None and all(
                (s := snap.states.get((topic, p))) is not None and s[0].leader >= 0 for p in a.partitions)
        wait_for(led, timeout_s, f"every partition of {topic} to have a leader")

    # ------------------------------------------------------------------ faults

    def start_broker(self, broker_id: int, wait: bool = True) -> None:
        raise NotImplementedError

    def wait_started(self, broker_id: int, timeout_s: float = 90.0) -> None:
        wait_for(lambda: broker_id in self.zk().read_brokers(), timeout_s, f"broker {broker_id} to register")

    def kill(self, broker_id: int) -> None:
        raise NotImplementedError

    def terminate(self, broker_id: int) -> None:
        raise NotImplementedError

    def pause(self, broker_id: int) -> None:
        raise NotImplementedError

    def resume(self, broker_id: int) -> None:
        raise NotImplementedError

    def running(self, broker_id: int) -> bool:
        raise NotImplementedError

    def answering(self) -> list[int]:
        """The brokers whose process runs and is not paused."""
        return [b for b in self.broker_ids() if self.running(b) and b not in self.paused]

    def cut_zk(self, broker_id: int) -> None:
        if self.proxy is None:
            raise RuntimeError("no ZooKeeper links (the scenario has no expire step)")
        self.proxy.set(f"b{broker_id}->zk1", blocked=True)

    def heal_zk(self, broker_id: int) -> None:
        if self.proxy is not None:
            self.proxy.clear(f"b{broker_id}->zk1")

    def elect_preferred(self, partitions: list[tuple[str, int]] | None) -> dict[str, Any]:
        """``kafka-leader-election.sh --election-type preferred``: ElectLeaders at the controller."""
        r = self.probe(self.zk().read_controller()).elect_preferred(partitions)
        return {"error": errors.name(r["error_code"]) if r["error_code"] else None,
                "partitions": {f"{t['topic']}/{p['partition_id']}": (errors.name(p["error_code"]) if p["error_code"]
                                                                     else None)
                               for t in r["replica_election_results"] for p in t["partition_result"]}}

    def stop(self) -> None:
        """Every broker, the proxy, ZooKeeper (the transaction log stays on disk)."""
        raise NotImplementedError

    def _stop_rest(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()
            self.proxy = None
        self.zookeeper.stop()


class KafkasimSide(Side):
    name = "kafkasim"

    def prepare(self) -> None:
        super().prepare()
        self.cluster = Cluster(self.cfg, self.config_path)
        for b, link in self.zk_links.items():
            path = self.root / f"links-{b}.json"
            LinkMap({}, link).write(path)
            self.cluster.links[b] = path

    def zk(self) -> ZkClient:
        return self.cluster.zk()

    def start_broker(self, broker_id: int, wait: bool = True) -> None:
        self.cluster.start_broker(broker_id)
        if wait:
            self.wait_started(broker_id)

    def wait_started(self, broker_id: int, timeout_s: float = 90.0) -> None:
        super().wait_started(broker_id, timeout_s)
        wait_for(lambda: self._metadata_complete_self(broker_id), timeout_s, f"broker {broker_id}'s Kafka listener")

    def _metadata_complete_self(self, broker_id: int) -> bool:
        try:
            self.probe(broker_id, 2.0).metadata([])
            return True
        except ProbeError:
            return False

    def create_setup_topic(self, t: TopicSpec) -> None:
        configs: dict[str, Any] = {}
        if t.name == OFFSETS_TOPIC:   # what Kafka's GroupMetadataManager gives it (offsetsTopicConfigs)
            configs = {"cleanup.policy": "compact", "compression.type": "producer",
                       "segment.bytes": self.cfg.get("offsets.topic.segment.bytes")}
        admin.create_topic(self.zk(), t.name, t.partitions, t.replication_factor, configs,
                           assignment=dict(enumerate(t.replicas)) if t.replicas else None, timeout_s=60)

    def kill(self, broker_id: int) -> None:
        self.cluster.signal_broker(broker_id, signal.SIGKILL)
        self.cluster.wait_exit(broker_id, 10)
        self.paused.discard(broker_id)

    def terminate(self, broker_id: int) -> None:
        self.cluster.signal_broker(broker_id, signal.SIGCONT)
        self.cluster.signal_broker(broker_id, signal.SIGTERM)
        self.cluster.wait_exit(broker_id, 60)
        self.paused.discard(broker_id)

    def pause(self, broker_id: int) -> None:
        pid = self.cluster.signal_broker(broker_id, signal.SIGSTOP)
        wait_for(lambda: all_threads_stopped(pid), 5, f"broker {broker_id} to stop")
        self.paused.add(broker_id)

    def resume(self, broker_id: int) -> None:
        self.cluster.signal_broker(broker_id, signal.SIGCONT)
        self.paused.discard(broker_id)

    def running(self, broker_id: int) -> bool:
        return process_state(self.cluster.pids.get(broker_id)) != "dead"

    def stop(self) -> None:
        try:
            self.cluster.down(timeout=30)
        finally:
            self._stop_rest()


class _Reference(ReferenceCluster):
    """ReferenceCluster whose brokers may each dial ZooKeeper through a link of their own."""

    zk_links: dict[int, str] = {}

    def properties(self, broker_id: int) -> dict[str, str]:
        props = super().properties(broker_id)
        if broker_id in self.zk_links:
            props["zookeeper.connect"] = self.zk_links[broker_id] + self.chroot
        return props


class KafkaSide(Side):
    name = "kafka"

    def prepare(self) -> None:
        ensure_jars()
        super().prepare()
        self.ref = _Reference(self.cfg, zookeeper=self.zookeeper.connect_string, chroot=CHROOT, port_offset=0,
                              config_path=self.config_path)
        self.ref.zk_links = dict(self.zk_links)

    def zk(self) -> ZkClient:
        return self.ref.zk()

    def start_broker(self, broker_id: int, wait: bool = True) -> None:
        self.ref.start(broker_id, wait=wait)

    def wait_set_up(self, cond: Callable[[], Any], timeout_s: float, what: str) -> None:
        """A Kafka broker that exits ends the wait at once, with its log, unless ZooKeeper failed its start-up
        on a busy machine: Kafka 2.8.2 exits then, and it is started again (reference/kafka.py's
        STARTUP_RESTARTS)."""
        self.ref.wait_alive(cond, timeout_s, what, restart=True)

    def set_up_notes(self) -> list[str]:
        return list(self.ref.startup_restarts)

    def wait_started(self, broker_id: int, timeout_s: float = 90.0) -> None:
        self.wait_set_up(lambda: broker_id in self.zk().read_brokers() and self.ref.started(broker_id), timeout_s,
                         f"Kafka broker {broker_id} to register and finish starting")

    def create_setup_topic(self, t: TopicSpec) -> None:
        configs: dict[str, str] = {}
        if t.name == OFFSETS_TOPIC:   # GroupMetadataManager.offsetsTopicConfigs
            configs = {"cleanup.policy": "compact", "compression.type": "producer",
                       "segment.bytes": str(self.cfg.get("offsets.topic.segment.bytes"))}
        controller = self.zk().read_controller()
        r = self.probe(controller).create_topics(
            t.name, t.partitions, t.replication_factor, configs,
            assignment=dict(enumerate(t.replicas)) if t.replicas else None)
        code = r["topics"][0]["error_code"]
        if code:
            raise RuntimeError(f"Kafka: CreateTopics {t.name}: {errors.name(code)} {r['topics'][0]['error_message']}")
        self.wait_leaders(t.name)

    def kill(self, broker_id: int) -> None:
        self.ref.kill(broker_id)
        self.paused.discard(broker_id)

    def terminate(self, broker_id: int) -> None:
        self.ref.terminate(broker_id)
        self.paused.discard(broker_id)

    def pause(self, broker_id: int) -> None:
        self.ref.pause(broker_id)
        self.paused.add(broker_id)

    def resume(self, broker_id: int) -> None:
        self.ref.resume(broker_id)
        self.paused.discard(broker_id)

    def running(self, broker_id: int) -> bool:
        return self.ref.is_running(broker_id)

    def stop(self) -> None:
        try:
            self.ref.down(timeout=30)
        finally:
            self._stop_rest()


SIDES = {"kafkasim": KafkasimSide, "kafka": KafkaSide}
