"""The docker-compose lab's start-up: `up` to every healthcheck passing, against the same cluster as local processes.

    python -m bench.lab [--runs 3]

Each run brings the lab up on the host's network (docker-compose.hostnet.yml, free ports) from the current
image and times ``docker-compose up -d`` until every container's healthcheck passes, then until the cluster
is ready (a controller and a leader for each of the 50 offsets partitions, as ``kafkasim cluster up``
waits for), and ``down -v``.  The baseline, in the same run: the same definition (ZooKeeper and 3 brokers)
started as local processes by launcher.cluster (``kafkasim cluster up``), timed to the same readiness.
Needs a Docker engine (started here, and stopped again, if none answers) and the image
(scripts/lab-image.sh, run first: a no-op when it is current, and timed).
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import yaml

from node.config import load_config
from launcher.cluster import Cluster
from launcher.lab import HOSTNET_FILES, REPO, ComposeLab, Dockerd
from zk.server import free_port


def definition(d: Path, zk_connect: str | None) -> Path:
    ports = [free_port() for _ in range(6)]
    doc = {"run.dir": "/data/run" if zk_connect else str(d / "run"), "zookeeper.connect": zk_connect,
           "zookeeper.session.timeout.ms": 6000, "offsets.topic.num.partitions": 50,
           "offsets.topic.replication.factor": 3,
           "brokers": [{"id": i + 1, "host": "127.0.0.1", "port": ports[i],
                        "listeners": f"PLAINTEXT://127.0.0.1:{ports[3 + i]}"} for i in range(3)]}
    path = d / "cluster.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def lab_run(d: Path) -> tuple[float, float, float]:
    zk_port = free_port()
    path = definition(d, f"127.0.0.1:{zk_port}/bench")
    cfg = load_config(path)
    env = {"KAFKASIM_LAB_CONFIG": str(path), "KAFKASIM_LAB_ZK_PORT": str(zk_port),
           **{f"KAFKASIM_LAB_PORT{b.id}": str(b.port) for b in cfg.brokers}}
    lab = ComposeLab(f"kafkasimbench{uuid.uuid4().hex[:8]}", HOSTNET_FILES, env)
    t0 = time.monotonic()
    try:
        lab.up()
        lab.wait_healthy(300)
        healthy = time.monotonic() - t0
        cluster = Cluster(cfg, path)
        cluster.wait_ready(120)
        ready = time.monotonic() - t0
        cluster.close()
    finally:
        t1 = time.monotonic()
        lab.down()
    return healthy, ready, time.monotonic() - t1


def process_run(d: Path) -> tuple[float, float]:
    path = definition(d, None)
    cluster = Cluster(load_config(path), path)
    t0 = time.monotonic()
    try:
        cluster.up(timeout=120)
        ready = time.monotonic() - t0
    finally:
        t1 = time.monotonic()
        cluster.down()
    return ready, time.monotonic() - t1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kafkasim-bench-lab-") as tmp:
        engine = Dockerd.ensure(Path(tmp) / "dockerd.log")
        try:
            t0 = time.monotonic()
            tag = subprocess.run([str(REPO / "scripts" / "lab-image.sh")], capture_output=True, text=True,
                                 check=True).stdout.strip()
            print(f"scripts/lab-image.sh: {time.monotonic() - t0:.1f} s ({tag})")
            rows = []
            for i in range(args.runs):
                healthy, ready, down = lab_run(Path(tempfile.mkdtemp(dir=tmp)))
                p_ready, p_down = process_run(Path(tempfile.mkdtemp(dir=tmp)))
                rows.append((healthy, ready, down, p_ready, p_down))
                print(f"run {i + 1}: lab up->healthy {healthy:.1f} s, ->ready {ready:.1f} s, down -v {down:.1f} s; "
                      f"local processes up->ready {p_ready:.1f} s, down {p_down:.1f} s")
            med = [statistics.median(c) for c in zip(*rows)]
            print(f"median of {args.runs}: lab up->healthy {med[0]:.1f} s, ->ready {med[1]:.1f} s "
                  f"({med[1] / med[3]:.2f}x the local processes' {med[3]:.1f} s), down -v {med[2]:.1f} s "
                  f"(processes {med[4]:.1f} s)")
        finally:
            engine.stop()


if __name__ == "__main__":
    main()
