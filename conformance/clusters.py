"""Both sides up, with the same settings: Kafka 2.8.2 (reference.kafka.ReferenceCluster) and kafkasim
(launcher.cluster.Cluster, what ``kafkasim cluster up`` uses), on one ZooKeeper of the suite's own, each
under its own chroot.

The layout is two brokers a side (ids 1 and 2): the fewest that give every "wrong broker" error (not leader,
not coordinator, not controller) and an invalid replication factor (3), at half the memory of three JVMs.
``__consumer_offsets`` has one partition (replication factor 2), so every group has the same coordinator: a
broker's ListGroups then lists every group on both sides, whichever broker Kafka's random placement made its
leader.
"""
from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import yaml

from launcher.cluster import Cluster
from node.config import load_config
from reference.kafka import ReferenceCluster
from zk.server import EmbeddedZooKeeper, free_port

from conformance.side import Side

BROKERS = 2
SETTINGS: dict[str, Any] = {
    "zookeeper.session.timeout.ms": 6000,
    "offsets.topic.num.partitions": 1,
    "offsets.topic.replication.factor": 2,
    "min.insync.replicas": 1,
    "default.replication.factor": 1,
    "num.partitions": 1,
    "group.initial.rebalance.delay.ms": 0,
    "auto.create.topics.enable": False,
    "controller.socket.timeout.ms": 5000,
    "kafkasim.offsets.topic.create.grace.ms": 30_000,
    "transaction.state.log.num.partitions": 1,
    "transaction.state.log.replication.factor": 2,
    "transaction.state.log.min.isr": 1,
}


def write_config(path: Path, zk_connect: str) -> Path:
    doc: dict[str, Any] = {"run.dir": str(path.parent / "run"), "zookeeper.connect": zk_connect, **SETTINGS,
                           "brokers": [{"id": i, "host": "127.0.0.1", "port": free_port(),
                                        "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}"}
                                       for i in range(1, BROKERS + 1)]}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def fresh_dir(path: Path) -> Path:
    """``path`` made empty: the clusters' files of an earlier run are removed first. Kafka refuses to start on
    a data directory whose ``meta.properties`` names another cluster id, and every run's chroot is a new
    cluster."""
    path = Path(path)
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


class Sides:
    """``with Sides(dir) as (kafka, kafkasim):`` both clusters up in ``dir`` (emptied first), then down (every
    process stopped)."""

    def __init__(self, workdir: Path, heap_mb: int = 512) -> None:
        self.dir = Path(workdir)
        self.heap_mb = heap_mb
        self.zk: EmbeddedZooKeeper | None = None
        self.ref: ReferenceCluster | None = None
        self.sim: Cluster | None = None
        self.sides: list[Side] = []

    def __enter__(self) -> tuple[Side, Side]:
        try:
            return self.up()
        except BaseException:
            self.down()
            raise

    def __exit__(self, *exc: Any) -> None:
        self.down()

    def up(self) -> tuple[Side, Side]:
        fresh_dir(self.dir)
        self.zk = EmbeddedZooKeeper(self.dir / "zookeeper", servers=1, tick_ms=100)
        self.zk.start(timeout=60)
        tag = uuid.uuid4().hex[:8]
        path = write_config(self.dir / "cluster.yaml", f"{self.zk.connect_string}/kafkasim-{tag}")
        cfg = load_config(path)
        self.ref = ReferenceCluster(cfg, zookeeper=self.zk.connect_string, chroot=f"/kafka-{tag}",
                                    heap_mb=self.heap_mb, config_path=path)
        self.sim = Cluster(cfg, path)
        for b in cfg.brokers:          # both start at once; each waits for its own readiness after
            self.sim.start_broker(b.id)
        self.ref.up(timeout=180)
        self.sim.wait_ready(timeout=120)
        kafka = Side("kafka", {b.id: self.ref.listener(b.id) for b in cfg.brokers})
        sim = Side("kafkasim", {b.id: b.kafka_listener for b in cfg.brokers})
        self.sides = [kafka, sim]
        return kafka, sim

    def down(self) -> None:
        for s in self.sides:
            s.close()
        for part in (self.ref, self.sim):
            if part is not None:
                try:
                    part.down()
                except Exception as e:  # stop the rest regardless
                    print(f"conformance: stopping {type(part).__name__}: {e}")
        if self.zk is not None:
            self.zk.stop()
            self.zk = None
