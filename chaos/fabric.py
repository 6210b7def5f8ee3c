"""A local cluster wired through the fault proxy: what a chaos run and ``kafkasim.Cluster`` both start.

:func:`start_proxied` starts ZooKeeper, then the fault proxy (``python -m chaos.proxy``) with one
link per (source, destination) pair, then the brokers with their link maps, so every
broker-to-broker, broker-to-ZooKeeper and client-to-broker byte crosses a link the nemesis can
block, delay or thin (docs/chaos.md, "The fault proxy").  With ``kafka=True`` each broker also gets
a link ``client->b<j>:kafka`` to its Kafka listener and advertises that link's port, so real Kafka
clients (and the user's application) reach the brokers through the proxy too.

:func:`cluster_view` reads the cluster as the nemesis resolves targets against it
(:class:`chaos.targets.View`).  :data:`FAST_DEFAULTS` are the cluster settings of chaos runs and of
the public API: short ZooKeeper sessions and few offsets partitions, so failovers take seconds.
"""
from __future__ import annotations

import logging
import random
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from chaos.nemesis import Links, ProxyNet
from chaos.proxy import ProxyProcess
from chaos.targets import OFFSETS_TOPIC, View
from launcher.cluster import Cluster
from node.config import load_config
from node.net.links import LinkMap
from util.waiting import wait_for

log = logging.getLogger(__name__)

#: Cluster settings of chaos runs and of ``kafkasim.Cluster`` (each may be overridden).
FAST_DEFAULTS: dict[str, Any] = {
    "zookeeper.connect": None,
    "zookeeper.embedded.tick.time.ms": 100,
    "zookeeper.session.timeout.ms": 3000,
    "offsets.topic.num.partitions": 10,
    "transaction.state.log.num.partitions": 10,
    "replica.lag.time.max.ms": 3000,
    "group.initial.rebalance.delay.ms": 500,
    "group.min.session.timeout.ms": 500,
    "auto.leader.rebalance.enable": False,
}


def listen_ports(n: int, lo: int = 20000, hi: int = 32000) -> list[int]:
    """Free ports for the brokers, below Linux's ephemeral range (32768+): the proxy's links listen
    on ephemeral ports before the brokers start, and must not take a broker's port meanwhile."""
    rng = random.SystemRandom()
    out: list[int] = []
    while len(out) < n:
        port = rng.randrange(lo, hi)
        if port in out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        out.append(port)
    return out


def broker_entries(brokers: int, kafka: bool) -> list[dict[str, Any]]:
    """cluster.yaml's ``brokers`` list on free ports (with ``kafka``, the Kafka listeners on free ports too:
    the default, port + 10000, may not be)."""
    ports = listen_ports(2 * brokers if kafka else brokers)
    entries: list[dict[str, Any]] = [{"id": i, "host": "127.0.0.1", "port": p}
                                     for i, p in enumerate(ports[:brokers], 1)]
    if kafka:
        for entry, port in zip(entries, ports[brokers:]):
            entry["listeners"] = f"PLAINTEXT://127.0.0.1:{port}"
    return entries


@dataclass
class Fabric:
    """The proxy in front of a cluster: its links, and the addresses clients dial."""
    proxy: ProxyProcess
    links: Links
    client_links: dict[int, str]                  # broker id -> the client's link to its gRPC port
    kafka_links: dict[int, str] = field(default_factory=dict)   # broker id -> the client's link to its Kafka listener

    @property
    def net(self) -> ProxyNet:
        return ProxyNet(self.proxy, self.links)

    @property
    def kafka_bootstrap(self) -> str:
        return ",".join(a for _, a in sorted(self.kafka_links.items()))

    def dial(self, broker: int, advertised: str) -> str:
        return self.client_links.get(broker, advertised)

    def stop(self) -> None:
        self.proxy.stop()


def start_proxied(cluster: Cluster, config_path: Path, out: Path, seed: int, *, kafka: bool,
                  up: Callable[[Cluster], Any] | None = None) -> Fabric:
    """Start ZooKeeper, the proxy (its files in ``out/proxy``, link maps in ``out/links``) and the brokers
    (``up(cluster)``, default ``cluster.up()``).  With ``kafka``, ``config_path`` is rewritten so each broker
    advertises its Kafka link and ``cluster.cfg`` is reloaded from it.  On failure the proxy is stopped."""
    starting = ProxyProcess.spawn(out / "proxy", seed=seed)   # its interpreter starts beside ZooKeeper's JVM
    try:
        cluster.start_zookeeper()
        proxy = starting.wait()
    except BaseException:
        starting.kill()
        raise
    servers = cluster.zk_embedded.servers
    try:
        links = Links()
        cfg = cluster.cfg
        brokers = {b.id: f"{b.host}:{b.port}" for b in cfg.brokers}
        addr: dict[tuple[str, str], str] = {}

        def link(src: str, dst: str, upstream: str, port_name: str = "") -> str:
            a = f"127.0.0.1:{proxy.add_link(links.add(src, dst, port_name), upstream)}"
            addr[(src, dst + port_name)] = a
            return a

        for i in brokers:
            for j, upstream in brokers.items():
                if i != j:
                    link(f"b{i}", f"b{j}", upstream)
            for n, s in enumerate(servers, start=1):
                link(f"b{i}", f"zk{n}", s.address)
        client_links = {j: link("client", f"b{j}", upstream) for j, upstream in brokers.items()}
        kafka_links: dict[int, str] = {}
        if kafka:
            doc = yaml.safe_load(config_path.read_text())
            for b in cfg.brokers:
                host, port = b.kafka_listener
                kafka_links[b.id] = link("client", f"b{b.id}", f"{host}:{port}", "kafka")
            for entry in doc["brokers"]:
                entry["advertised.listeners"] = f"PLAINTEXT://{kafka_links[entry['id']]}"
            config_path.write_text(yaml.safe_dump(doc, sort_keys=False))
            cluster.cfg = load_config(config_path)
        (out / "links").mkdir(exist_ok=True)
        for i in brokers:
            lm = LinkMap({j: addr[(f"b{i}", f"b{j}")] for j in brokers if j != i},
                         ",".join(addr[(f"b{i}", f"zk{n}")] for n in range(1, len(servers) + 1)))
            lm.write(out / "links" / f"broker-{i}.json")
            cluster.links[i] = out / "links" / f"broker-{i}.json"
        fabric = Fabric(proxy, links, client_links, kafka_links)
        (up or (lambda c: c.up(timeout=90)))(cluster)
        return fabric
    except BaseException:
        proxy.stop()
        raise


def start_first(cluster: Cluster, first: int | None, timeout: float = 90) -> None:
    """Start the brokers; with ``first``, that broker alone until it is the controller (it wins the first
    election), then the others."""
    if first is not None:
        cluster.start_zookeeper()
        cluster.start_broker(first)
        wait_for(lambda: cluster.view().controller_id == first, 60, f"broker {first} to become the controller")
    cluster.up(timeout=timeout)


def cluster_view(cluster: Cluster, last: View | None = None, apps: list[int] | None = None) -> View:
    """The cluster now, as ZooKeeper says (read directly, not through the proxy); when ZooKeeper cannot be
    read (it may be faulted), ``last``."""
    try:
        v = cluster.view()
    except Exception as e:
        if last is None:
            raise
        log.info("view unavailable (%s); using the last one", e)
        return last
    parts = {(t, p): {"leader": s["leader"], "isr": s["isr"], "replicas": s["replicas"]}
             for t, topic in v.topics.items() for p, s in topic["partitions"].items()}
    n = len(v.topics.get(OFFSETS_TOPIC, {}).get("partitions", {})) or cluster.cfg.get("offsets.topic.num.partitions")
    zk = len(cluster.zk_embedded.servers) if cluster.zk_embedded else 0
    txn = len(v.topics.get("__transaction_state", {}).get("partitions", {})) or \
        cluster.cfg.get("transaction.state.log.num.partitions")
    return View([b.id for b in cluster.cfg.brokers], set(v.brokers), list(range(1, zk + 1)), v.controller_id,
                parts, n, apps=list(apps or []), txn_partitions=txn)
