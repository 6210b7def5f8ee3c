"""Shared fixtures: one real ZooKeeper for the whole run, a chroot per test.

Brokers are real OS processes started through node.cluster.Cluster, the same
launcher `kafkasim cluster up` uses.  ZooKeeper runs with a 100 ms tick so
session timeouts of a second or two are allowed and failovers stay quick.
"""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import yaml

from node.cluster import Cluster
from node.config import load_config
from zk.server import EmbeddedZooKeeper, free_port

ZK_TICK_MS = 100


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedZooKeeper]:
    zk = EmbeddedZooKeeper(tmp_path_factory.mktemp("zookeeper"), servers=1, tick_ms=ZK_TICK_MS)
    zk.start(timeout=60)
    yield zk
    zk.stop()


def write_cluster_yaml(path: Path, connect: str, brokers: int, **settings: Any) -> Path:
    doc: dict[str, Any] = {
        "run.dir": str(path.parent / "run"),
        "zookeeper.connect": connect,
        "zookeeper.session.timeout.ms": 1500,
        "offsets.topic.num.partitions": 50,
        "offsets.topic.replication.factor": min(3, brokers),
        "controller.socket.timeout.ms": 3000,
        "controlled.shutdown.retry.backoff.ms": 50,
        "brokers": [{"id": i, "host": "127.0.0.1", "port": free_port()} for i in range(1, brokers + 1)],
    }
    doc.update(settings)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture
def make_cluster(zookeeper: EmbeddedZooKeeper, tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    """make_cluster(brokers=3, start=True, **flat_settings) -> a Cluster on its own chroot."""
    made: list[Cluster] = []

    def make(brokers: int = 3, start: bool = True, **settings: Any) -> Cluster:
        d = tmp_path / f"cluster{len(made)}"
        d.mkdir()
        connect = f"{zookeeper.connect_string}/t-{uuid.uuid4().hex[:12]}"
        flat = {k.replace("__", "."): v for k, v in settings.items()}
        path = write_cluster_yaml(d / "cluster.yaml", connect, brokers, **flat)
        cluster = Cluster(load_config(path), path)
        made.append(cluster)
        if start:
            cluster.up(timeout=60)
        return cluster

    yield make
    for c in made:
        c.down()


@pytest.fixture(scope="session")
def spark():
    """One local[2] SparkSession for the whole test run (starting one costs seconds)."""
    from analysis.spark import session
    s = session("local[2]", app="kafkasim-tests")
    yield s
    s.stop()


@pytest.fixture(scope="session")
def short_chaos_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two short real chaos runs shared by the analysis tests: a clean coordinator-kill run and
    one with a planted bug (so that the checkers have anomalies to agree on)."""
    import io

    from chaos.runner import ChaosRun
    from chaos.scenario import SCENARIO_DIR, load_scenario

    base = tmp_path_factory.mktemp("chaos-runs")
    out = {}
    for name, scenario, bugs in (("clean", "coordinator-kill", ()),
                                 ("planted", "consumer-stalls", ("fenced-generation-commit",))):
        r = ChaosRun(load_scenario(SCENARIO_DIR / f"{scenario}.yaml"), 3, base / name, duration_s=10.0,
                     planted_bugs=bugs, stream=io.StringIO(), progress=False).run()
        out[name] = r.out
    return out
