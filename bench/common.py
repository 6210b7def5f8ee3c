"""Shared by the benchmarks: percentiles, a fresh 3-broker cluster per run on one shared ZooKeeper."""
from __future__ import annotations

import statistics
import sys
import uuid
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from node.cluster import Cluster  # noqa: E402
from node.config import load_config  # noqa: E402
from zk.server import EmbeddedZooKeeper, free_port  # noqa: E402

TICK_MS = 100
SESSION_MS = 1000


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def summary(xs: list[float]) -> str:
    if not xs:
        return "n/a"
    return f"median {statistics.median(xs):7.1f} ms   p90 {pct(xs, 0.9):7.1f} ms   (n={len(xs)})"


def make_cluster(zk: EmbeddedZooKeeper, workdir: Path, partitions: int, controlled: bool = False,
                 brokers: int = 3, **settings: Any) -> Cluster:
    d = workdir / uuid.uuid4().hex[:8]
    d.mkdir()
    doc = {
        "run.dir": str(d / "run"),
        "zookeeper.connect": f"{zk.connect_string}/bench-{d.name}",
        "zookeeper.session.timeout.ms": SESSION_MS,
        "offsets.topic.num.partitions": partitions,
        "offsets.topic.replication.factor": min(3, brokers),
        "auto.leader.rebalance.enable": False,
        "controlled.shutdown.enable": controlled,
        "brokers": [{"id": i, "host": "127.0.0.1", "port": free_port()} for i in range(1, brokers + 1)],
    }
    doc.update(settings)
    (d / "cluster.yaml").write_text(yaml.safe_dump(doc))
    c = Cluster(load_config(d / "cluster.yaml"), d / "cluster.yaml")
    c.up(timeout=60)
    return c
