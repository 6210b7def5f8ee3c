"""Shared by the benchmarks: percentiles, a fresh 3-broker cluster per run on one shared ZooKeeper."""
from __future__ import annotations

import os
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from launcher.cluster import Cluster  # noqa: E402
from node.config import KAFKA_PORT_OFFSET, load_config  # noqa: E402
from node.events import read_run_events  # noqa: E402
from util.waiting import WaitTimeout, wait_for  # noqa: E402
from zk.server import EmbeddedZooKeeper, free_port  # noqa: E402

TICK_MS = 100
SESSION_MS = 1000


def thread_times(pid: int) -> dict[int, tuple[str, float]]:
    """Each thread of process ``pid`` by OS thread id: (its OS name, its CPU seconds, user + system), from
    /proc/PID/task/TID/stat; empty when the process is gone (a thread that ended meanwhile is left out)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, tuple[str, float]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            s = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        f = s.rsplit(")", 1)[1].split()
        out[int(tid)] = (s[s.index("(") + 1:s.rindex(")")], (int(f[11]) + int(f[12])) / tick)
    return out


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
        "brokers": [{"id": i, "host": "127.0.0.1", "port": free_port(paired=KAFKA_PORT_OFFSET)}
                    for i in range(1, brokers + 1)],
    }
    doc.update(settings)
    (d / "cluster.yaml").write_text(yaml.safe_dump(doc))
    c = Cluster(load_config(d / "cluster.yaml"), d / "cluster.yaml")
    c.up(timeout=60)
    settle(c, partitions, min(3, brokers), brokers)
    return c


def settle(c: Cluster, partitions: int, rf: int, brokers: int, timeout: float = 120) -> None:
    """Wait until every broker has taken up every replica it holds and loaded every offsets partition
    it leads.  ``cluster up`` returns once ZooKeeper names a leader for each partition, while the
    brokers are still opening logs (seconds at 1,000 partitions): a measurement started then would
    time that start-up, not the steady cluster."""
    replicas = partitions * rf

    def settled() -> bool:
        roles: set[tuple[int, int]] = set()
        loaded = 0
        for e in read_run_events(c.run_dir):
            t = e["type"]
            if t in ("became_leader", "became_follower") and e["topic"] == "__consumer_offsets":
                roles.add((e["broker"], e["partition"]))
            elif t == "coordinator_loaded":
                loaded += 1
        return len(roles) >= replicas and loaded >= partitions

    wait_for(settled, timeout, f"{brokers} brokers holding {replicas} replicas and loading {partitions} partitions",
             interval=0.2)


def wait_isr_whole(c: Cluster, timeout: float = 120) -> bool:
    """After :func:`settle`, wait out the start-up's ISR churn: a leader drops a follower that has not
    fetched within replica.lag.time.max.ms of its start (at 1,500 partitions on two cores, hundreds
    do) and takes it back later.  So wait until that long after the last role change, then until
    every offsets partition's ISR is whole in ZooKeeper.  False: still not whole after ``timeout``
    (the caller measures anyway and reports it)."""
    last_role = max(e["mono_ns"] for e in read_run_events(c.run_dir) if e["type"] in ("became_leader", "became_follower"))
    quiet_ns = last_role + (c.cfg.get("replica.lag.time.max.ms") + 2000) * 1_000_000
    time.sleep(max(0.0, (quiet_ns - time.monotonic_ns()) / 1e9))  # a fixed span of time, not a condition

    def whole() -> bool:
        parts = c.view().topics["__consumer_offsets"]["partitions"]
        return all(sorted(s["isr"]) == sorted(s["replicas"]) for s in parts.values())

    try:
        wait_for(whole, timeout, "every offsets partition's ISR whole", interval=0.5)
    except WaitTimeout:
        return False
    return True


def warm_zookeeper(zk: EmbeddedZooKeeper, partitions: int = 1000, rounds: int = 150) -> float:
    """Run the controller's write path against ``zk`` until its JIT has compiled it; returns seconds.

    A ZooKeeper server runs for months, so its hot paths are compiled.  A
    benchmark's fresh JVM is not: until the multi, check and setData paths
    have run some 100,000 times, a 1,000-write multi takes 2-3x longer and
    C2 compiler threads take CPU from the brokers being measured.  So this
    writes ``partitions`` partition states, fenced by an epoch znode the way
    the controller does (zk.client.write_states), ``rounds`` times, in a
    chroot of its own that it removes afterwards.
    """
    from zk.client import StateWrite, ZkClient
    from kafkacommon.metadata import LeaderAndIsr

    t0 = time.monotonic()
    chroot = f"/bench-warmup-{uuid.uuid4().hex[:8]}"
    client = ZkClient(f"{zk.connect_string}{chroot}", 10_000)
    client.start()
    try:
        client.kz.ensure_path("/controller_epoch")
        client.kz.ensure_path("/brokers/topics/__consumer_offsets")
        epoch_version = client.kz.get("/controller_epoch")[1].version
        versions: dict[int, int | None] = {p: None for p in range(partitions)}
        for r in range(rounds + 1):
            state = LeaderAndIsr(1 + r % 3, r, (1, 2, 3), 1)
            written = client.write_states(epoch_version, [StateWrite("__consumer_offsets", p, state, versions[p])
                                                          for p in range(partitions)])
            versions = {p: written[("__consumer_offsets", p)] for p in range(partitions)}
    finally:
        client.stop()
    root = ZkClient(zk.connect_string, 10_000)
    root.start()
    try:
        root.kz.delete(chroot, recursive=True)
    finally:
        root.stop()
    return time.monotonic() - t0


class LoadSampler:
    """The machine's 1-minute load average every 5 s while the benchmark runs: how noisy the run was."""

    def __init__(self, every_s: float = 5.0) -> None:
        self.every_s = every_s
        self.before = os.getloadavg()
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="load-sampler")

    def start(self) -> "LoadSampler":
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.samples.append(os.getloadavg()[0])

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.after = os.getloadavg()

    def summary(self) -> str:
        xs = sorted(self.samples) or [self.before[0]]
        return (f"load average (1/5/15 min) before {'/'.join(f'{x:.1f}' for x in self.before)}, after "
                f"{'/'.join(f'{x:.1f}' for x in self.after)}; during, 1-min: min {xs[0]:.1f}, median "
                f"{statistics.median(xs):.1f}, max {xs[-1]:.1f} on {os.cpu_count()} cores")
