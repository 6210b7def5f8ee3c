"""Transactions with real clients against a real 3-broker cluster: confluent-kafka (librdkafka) producing in
transactions, committing and aborting, a read_committed consumer, fencing of a zombie producer; kafkajs's
transactions with sendOffsets.  librdkafka's exactly-once consume-transform-produce through SIGKILLs of its
transaction coordinator is tests/test_chaos_txn_runs.py's run (judged by the transactional checkers)."""
from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from launcher.cluster import Cluster
from node.config import load_config
from node.events import read_events
from tests.conftest import write_cluster_yaml
from tests.test_kafka_clients import bootstrap, controller_named, create_topic
from util.waiting import wait_for

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    d = tmp_path_factory.mktemp("kafka-txn")
    path = write_cluster_yaml(d / "cluster.yaml", f"{zookeeper.connect_string}/t-{uuid.uuid4().hex[:12]}", 3,
                              **{"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 5,
                                 "transaction.state.log.num.partitions": 5})
    c = Cluster(load_config(path), path)
    try:
        c.up(timeout=90)
        wait_for(lambda: all(controller_named(h, p) for h, p in (b.kafka_advertised for b in c.cfg.brokers)), 30.0,
                 "every broker's Kafka listener to name the controller")
        yield c
    finally:
        c.down()


def events(c: Cluster, name: str) -> list[dict]:
    out = []
    for b in c.cfg.brokers:
        out += [e for e in read_events(Path(c.cfg.run_dir) / "events" / f"broker-{b.id}.jsonl") if e["type"] == name]
    return out


def producer(c: Cluster, txn_id: str, **extra):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap(c), "transactional.id": txn_id, "linger.ms": 5, **extra})
    p.init_transactions(60)
    return p


def read_all(c: Cluster, topic: str, isolation: str, expect: int, timeout: float = 30) -> list[tuple[int, bytes]]:
    from confluent_kafka import Consumer
    cons = Consumer({"bootstrap.servers": bootstrap(c), "group.id": f"r-{uuid.uuid4().hex[:8]}",
                     "auto.offset.reset": "earliest", "isolation.level": isolation, "enable.auto.commit": False})
    cons.subscribe([topic])
    got: list[tuple[int, bytes]] = []

    def poll() -> bool:
        m = cons.poll(0.5)
        if m is not None and m.error() is None:
            got.append((m.partition(), m.value()))
        return len(got) >= expect
    try:
        wait_for(poll, timeout, f"{expect} records from {topic} ({isolation})")
        for _ in range(4):       # nothing more comes
            m = cons.poll(0.5)
            if m is not None and m.error() is None:
                got.append((m.partition(), m.value()))
    finally:
        cons.close()
    return got


def test_committed_and_aborted_transactions_with_a_read_committed_consumer(cluster: Cluster) -> None:
    create_topic(cluster, "txn-out", partitions=3)
    p = producer(cluster, "txn-a")
    p.begin_transaction()
    for i in range(30):
        p.produce("txn-out", value=b"c%d" % i, partition=i % 3)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(30):
        p.produce("txn-out", value=b"a%d" % i, partition=i % 3)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(3):
        p.produce("txn-out", value=b"open%d" % i, partition=i)
    p.flush(30)                           # written, neither committed nor aborted yet
    committed = read_all(cluster, "txn-out", "read_committed", 30)
    assert sorted(v for _, v in committed) == sorted(b"c%d" % i for i in range(30))
    everything = read_all(cluster, "txn-out", "read_uncommitted", 63)
    assert len(everything) == 63
    p.commit_transaction(30)
    assert len(read_all(cluster, "txn-out", "read_committed", 33)) == 33
    changes = [e for e in events(cluster, "txn_state_changed") if e["transactional_id"] == "txn-a"]
    assert [e["to"] for e in changes][:6] == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit", "Ongoing",
                                              "PrepareAbort"]
    written = [e for e in events(cluster, "txn_marker_written") if e["topic"] == "txn-out"]
    assert {e["error"] for e in written} == {0} and len(written) >= 9
    # __transaction_state was created on the first transactional FindCoordinator with Kafka's transactionTopicConfigs
    zk = cluster.zk()
    assert json.loads(zk.get("/config/topics/__transaction_state")[0])["config"] == {
        "cleanup.policy": "compact", "compression.type": "uncompressed", "segment.bytes": "104857600",
        "min.insync.replicas": "2", "unclean.leader.election.enable": "false"}


def test_a_new_producer_fences_the_zombie(cluster: Cluster) -> None:
    from confluent_kafka import KafkaException
    create_topic(cluster, "fence-out", partitions=1)
    zombie = producer(cluster, "txn-z")
    zombie.begin_transaction()
    zombie.produce("fence-out", value=b"zombie")
    zombie.flush(30)
    fresh = producer(cluster, "txn-z")      # fences the first: its open transaction is aborted
    fresh.begin_transaction()
    fresh.produce("fence-out", value=b"fresh")
    fresh.commit_transaction(30)
    with pytest.raises(KafkaException) as e:
        zombie.commit_transaction(30)
    assert e.value.args[0].fatal() or "fenced" in str(e.value).lower()
    assert [v for _, v in read_all(cluster, "fence-out", "read_committed", 1)] == [b"fresh"]
    assert any(e["transactional_id"] == "txn-z" for e in events(cluster, "txn_fenced"))


def test_kafkajs_transactions(cluster: Cluster) -> None:
    """kafkajs (Node): an aborted transaction, then consume-transform-produce with sendOffsets (AddOffsetsToTxn,
    TxnOffsetCommit), read back by a read_committed kafkajs consumer."""
    import json
    import subprocess
    js = Path(__file__).parent / "js"
    n = 40
    r = subprocess.run(["node", str(js / "txn.js"), bootstrap(cluster), "js-txn-in", "js-txn-out", "js-txn-g", str(n)],
                       capture_output=True, timeout=180, cwd=js)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    out = json.loads(r.stdout.decode().strip().splitlines()[-1])
    assert sorted(out["values"]) == sorted(f"out-{i}" for i in range(n)), out["values"]
    (topic,) = out["offsets"]
    assert sum(int(p["offset"]) for p in topic["partitions"]) == n, out["offsets"]
    assert out["transactions"] >= 1
    changes = [e for e in events(cluster, "txn_state_changed") if e["transactional_id"] == "kafkajs-txn-app"]
    assert "CompleteAbort" in {e["to"] for e in changes} and "CompleteCommit" in {e["to"] for e in changes}
