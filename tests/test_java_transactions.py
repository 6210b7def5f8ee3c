"""Exactly-once with Kafka Streams 2.8.2 against a real 3-broker kafkasim cluster, through a SIGKILL of a
transaction coordinator: a Streams application with processing.guarantee=exactly_once
(reference/streams/EosStreamsApp.java).  Each input record must be in the read_committed output exactly once,
and the group's committed offsets must cover every input, no more.  The Java client's own consume-transform-
produce loop with sendOffsetsToTransaction (reference/java/JavaEosPipeline.java) runs through transaction
coordinator SIGKILLs in tests/test_chaos_txn_runs.py, judged by the transactional checkers."""
from __future__ import annotations

import signal
import uuid
from typing import Iterator

import pytest

from kafkacommon.hashing import partition_for
from launcher.cluster import Cluster
from node.config import load_config
from reference.javaclient import JavaStreamsApp
from tests.conftest import write_cluster_yaml
from tests.test_kafka_clients import bootstrap, controller_named, create_topic
from tests.test_kafka_transactions import events, read_all
from util.waiting import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.cluster, pytest.mark.timeout(420)]
TXN_PARTITIONS = 5


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    d = tmp_path_factory.mktemp("java-txn")
    path = write_cluster_yaml(d / "cluster.yaml", f"{zookeeper.connect_string}/t-{uuid.uuid4().hex[:12]}", 3,
                              **{"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 5,
                                 "transaction.state.log.num.partitions": TXN_PARTITIONS})
    c = Cluster(load_config(path), path)
    try:
        c.up(timeout=90)
        wait_for(lambda: all(controller_named(h, p) for h, p in (b.kafka_advertised for b in c.cfg.brokers)), 30.0,
                 "every broker's Kafka listener to name the controller")
        yield c
    finally:
        c.down()


def fill(c: Cluster, topic: str, n: int, partitions: int = 3, start: int = 0) -> None:
    """Values ``start`` .. ``start + n - 1``, spread round-robin over the partitions (by value)."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap(c), "enable.idempotence": True})
    for i in range(start, start + n):
        p.produce(topic, key=b"k%d" % i, value=b"%d" % i, partition=i % partitions)
    assert p.flush(30) == 0


def kill_coordinator_of(c: Cluster, transactional_id: str) -> int:
    """SIGKILL the broker leading ``transactional_id``'s __transaction_state partition; wait for another to load
    it; returns the killed broker (the caller restarts it)."""
    p = partition_for(transactional_id, TXN_PARTITIONS)
    old = c.view().partition("__transaction_state", p)["leader"]
    c.signal_broker(old, signal.SIGKILL)
    wait_for(lambda: any(e["partition"] == p and e["broker"] != old for e in events(c, "txn_coordinator_loaded")),
             60, f"another broker loading {transactional_id}'s transaction coordinator")
    return old


def restart(c: Cluster, broker: int) -> None:
    c.wait_exit(broker, timeout=30)
    c.start_broker(broker)
    c.wait_ready(90)


def committed_offsets(c: Cluster, group: str, topic: str, partitions: int = 3) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition
    check = Consumer({"bootstrap.servers": bootstrap(c), "group.id": group})
    try:
        return [tp.offset for tp in check.committed([TopicPartition(topic, i) for i in range(partitions)], 30)]
    finally:
        check.close()


def exactly_once(out: list[tuple[int, bytes]], n: int) -> None:
    values = sorted(int(v[4:]) for _, v in out)
    assert values == list(range(n)), (f"{len(values)} records for {n} inputs: "
                                      f"{len(values) - len(set(values))} duplicates, "
                                      f"{len(set(range(n)) - set(values))} missing")


def test_kafka_streams_exactly_once_through_a_transaction_coordinator_sigkill(cluster: Cluster, tmp_path) -> None:
    create_topic(cluster, "seos-in", partitions=3)
    create_topic(cluster, "seos-out", partitions=3)
    n = 600
    fill(cluster, "seos-in", n // 2)
    app = JavaStreamsApp(bootstrap(cluster), "seos-app", "seos-in", "seos-out", tmp_path / "state")
    old = None
    try:
        wait_for(lambda: app.state == "RUNNING", 120, "the Streams application running")
        wait_for(lambda: len(read_all(cluster, "seos-out", "read_committed", 1)) >= 1, 60, "a first output")
        old = kill_coordinator_of(cluster, "seos-app-0_1")   # task 0_1's producer's coordinator
        fill(cluster, "seos-in", n // 2, start=n // 2)        # more input while it fails over
        out = read_all(cluster, "seos-out", "read_committed", n, timeout=180)
    finally:
        app.close(60)
        if old is not None:
            restart(cluster, old)
    exactly_once([(p, v) for p, v in out], n)
    assert committed_offsets(cluster, "seos-app", "seos-in") == [n // 3] * 3
    changes = [e for e in events(cluster, "txn_state_changed") if e["transactional_id"].startswith("seos-app-")]
    assert {e["transactional_id"] for e in changes} == {"seos-app-0_0", "seos-app-0_1", "seos-app-0_2"}
    assert any(e["transactional_id"] == "seos-app-0_1" and e["broker"] != old and e["to"] == "CompleteCommit"
               for e in changes)
