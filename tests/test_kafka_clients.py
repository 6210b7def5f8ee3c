"""Real Kafka clients against a real 3-broker cluster, through the brokers' Kafka listeners.

kcat (librdkafka from Debian), kafka-python and confluent-kafka (librdkafka in the wheel) each
create, produce, consume in a group, commit and read back, against one cluster shared by the
module's tests (its brokers are OS processes; starting one costs seconds).
"""
from __future__ import annotations

import subprocess
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from node.cluster import Cluster
from node.config import load_config
from node.events import read_events
from node.waiting import wait_for
from tests.conftest import write_cluster_yaml

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    d = tmp_path_factory.mktemp("kafka-clients")
    path = write_cluster_yaml(d / "cluster.yaml", f"{zookeeper.connect_string}/t-{uuid.uuid4().hex[:12]}", 3,
                              **{"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 10})
    c = Cluster(load_config(path), path)
    try:
        c.up(timeout=90)
        yield c
    finally:
        c.down()


def bootstrap(c: Cluster) -> str:
    return ",".join(f"{h}:{p}" for h, p in (b.kafka_advertised for b in c.cfg.brokers))


def kafka_events(c: Cluster) -> list[dict]:
    out = []
    for b in c.cfg.brokers:
        p = Path(c.cfg.run_dir) / "events" / f"broker-{b.id}.jsonl"
        out += [e for e in read_events(p) if e["type"] == "kafka_request"]
    return out


def create_topic(c: Cluster, topic: str, partitions: int = 3, rf: int = 3) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap(c)})
    fut = admin.create_topics([NewTopic(topic, partitions, rf)], operation_timeout=30)[topic]
    fut.result(timeout=60)


def kcat(c: Cluster, *args: str, input: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(["kcat", "-b", bootstrap(c), *args], input=input, capture_output=True, timeout=timeout)


def test_kcat_metadata_produce_consume(cluster: Cluster) -> None:
    create_topic(cluster, "kcat-t", partitions=3)
    r = kcat(cluster, "-L", "-t", "kcat-t")
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    assert "3 brokers" in text and "1 topics" in text, text
    assert 'topic "kcat-t" with 3 partitions' in text, text
    lines = b"".join(b"k%d:v%d\n" % (i, i) for i in range(20))
    r = kcat(cluster, "-P", "-t", "kcat-t", "-K:", "-H", "h1=x1", "-H", "h2=x2", input=lines)
    assert r.returncode == 0, r.stderr
    r = kcat(cluster, "-C", "-t", "kcat-t", "-e", "-f", "%k=%s|%h\n")
    assert r.returncode == 0, r.stderr
    got = sorted(r.stdout.decode().splitlines())
    assert got == sorted(f"k{i}=v{i}|h1=x1,h2=x2" for i in range(20)), got
    evs = kafka_events(cluster)
    assert any(e["api"] == "Produce" and e["client_id"] == "rdkafka" and e["error"] is None for e in evs)
