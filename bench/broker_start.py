"""What a broker's start costs, from its spawn until the cluster is up: the CPU seconds of each broker process and
the wall time of ``Cluster.up``, for a 3-broker cluster on one shared ZooKeeper, started the way the launcher
starts it (``python -m node``: node/boot.py) and, as the same run's baseline, with a plain import of the broker
(bench/plain_broker.py: the collector on, kafka-python's and aiokafka's whole packages), alternated.

    python3 bench/broker_start.py [--passes 8]

The test suite starts several hundred brokers, so their start-up is a large part of its CPU.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from launcher.cluster import Cluster  # noqa: E402
from node.config import load_config  # noqa: E402
from util.procs import cpu_seconds  # noqa: E402
from zk.server import EmbeddedZooKeeper, free_port  # noqa: E402

PLAIN = [sys.executable, str(REPO / "bench" / "plain_broker.py")]


def cluster_yaml(d: Path, connect: str) -> Path:
    doc = {"run.dir": str(d / "run"), "zookeeper.connect": connect, "offsets.topic.num.partitions": 50,
           "offsets.topic.replication.factor": 3,
           "brokers": [{"id": i, "host": "127.0.0.1", "port": free_port(),
                        "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}"} for i in (1, 2, 3)]}
    (d / "cluster.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return d / "cluster.yaml"


def start(base: Path, zk: EmbeddedZooKeeper, plain: bool) -> tuple[float, float]:
    """(mean CPU seconds of a broker from its spawn until the cluster is up, seconds of ``up``)."""
    d = Path(tempfile.mkdtemp(dir=base))
    path = cluster_yaml(d, f"{zk.connect_string}/b-{uuid.uuid4().hex[:8]}")
    cluster = Cluster(load_config(path), path)
    if plain:
        cluster.prefixes = {b.id: PLAIN for b in cluster.cfg.brokers}
    t = time.monotonic()
    try:
        cluster.up(timeout=120)
        wall = time.monotonic() - t
        cpu = statistics.mean(cpu_seconds(p["pid"]) for p in cluster.processes().values())
    finally:
        cluster.down()
    return cpu, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passes", type=int, default=8)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kafkasim-bench-broker-start-") as tmp:
        base = Path(tmp)
        zk = EmbeddedZooKeeper(base / "zookeeper", servers=1, tick_ms=100)
        zk.start(timeout=60)
        try:
            start(base, zk, plain=False)   # warm: the page cache, ZooKeeper's JIT
            got: dict[str, list[tuple[float, float]]] = {"python -m node": [], "plain import": []}
            loads = []
            for i in range(args.passes):
                for kind in (("python -m node", "plain import") if i % 2 == 0 else ("plain import", "python -m node")):
                    got[kind].append(start(base, zk, plain=kind == "plain import"))
                loads.append(os.getloadavg()[0])
        finally:
            zk.stop()
    print(f"3-broker cluster up, {args.passes} passes alternated (1-minute load {min(loads):.1f}-{max(loads):.1f})")
    for kind, rows in got.items():
        cpu, wall = [r[0] for r in rows], [r[1] for r in rows]
        print(f"  {kind:<15} CPU per broker median {statistics.median(cpu):.2f} s (min {min(cpu):.2f})   "
              f"up median {statistics.median(wall):.2f} s")
    ratio = statistics.median(r[0] for r in got["python -m node"]) / statistics.median(r[0] for r in got["plain import"])
    print(f"  CPU per broker, python -m node / plain import: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
