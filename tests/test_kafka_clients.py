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

from launcher.cluster import Cluster
from node.config import load_config
from node.events import read_events
from util.waiting import wait_for
from tests.conftest import write_cluster_yaml

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from kafka_cluster(zookeeper, tmp_path_factory, "kafka-clients")


def kafka_cluster(zookeeper, tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Cluster]:
    """Three brokers with 10 offsets partitions and no initial rebalance delay, up until the generator ends."""
    d = tmp_path_factory.mktemp(name)
    path = write_cluster_yaml(d / "cluster.yaml", f"{zookeeper.connect_string}/t-{uuid.uuid4().hex[:12]}", 3,
                              **{"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 10})
    c = Cluster(load_config(path), path)
    try:
        c.up(timeout=90)
        # every listener's Metadata names the controller (as in Kafka, a broker learns it from the controller's
        # first request, which may still be on its way when the cluster is up): librdkafka's admin client sends
        # CreateTopics to that controller, and does not ask again soon when none is named
        wait_for(lambda: all(controller_named(h, p) for h, p in (b.kafka_advertised for b in c.cfg.brokers)), 30.0,
                 "every broker's Kafka listener to name the controller and all three brokers")
        yield c
    finally:
        c.down()


def controller_named(host: str, port: int, brokers: int = 3) -> bool:
    """Whether the Kafka listener at host:port names a controller and every broker in its Metadata (a broker learns
    both from the controller's UpdateMetadata; CreateTopics, as Kafka's, places replicas on the brokers its
    metadata cache knows)."""
    from confluent_kafka.admin import AdminClient
    md = AdminClient({"bootstrap.servers": f"{host}:{port}"}).list_topics(timeout=5)
    return md.controller_id >= 0 and len(md.brokers) == brokers


def bootstrap(c: Cluster) -> str:
    return ",".join(f"{h}:{p}" for h, p in (b.kafka_advertised for b in c.cfg.brokers))


def kafka_events(c: Cluster) -> list[dict]:
    out = []
    for b in c.cfg.brokers:
        p = Path(c.cfg.run_dir) / "events" / f"broker-{b.id}.jsonl"
        out += [e for e in read_events(p) if e["type"] == "kafka_request"]
    return out


def create_topic(c: Cluster, topic: str, partitions: int = 3, rf: int = 3, **configs: str) -> None:
    """CreateTopics through librdkafka's admin client (it sends it to the controller Metadata names)."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap(c)})
    admin.create_topics([NewTopic(topic, partitions, rf, config=configs)], operation_timeout=15)[topic].result(timeout=20)


def kcat(c: Cluster, *args: str, input: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(["kcat", "-b", bootstrap(c), *args], input=input, capture_output=True, timeout=timeout)


def test_kcat_metadata_produce_consume(cluster: Cluster) -> None:
    create_topic(cluster, "kcat-t", partitions=3)
    # CreateTopics is answered once the controller has the leaders; a broker that has not applied the
    # UpdateMetadata yet answers LEADER_NOT_AVAILABLE, and a client asks again (Kafka 2.8.2's source completes
    # CreateTopics on the handling broker's own cache too; not compared with a running 2.8.2)
    def listed():
        x = kcat(cluster, "-L", "-t", "kcat-t")
        return x if x.returncode != 0 or b'topic "kcat-t" with 3 partitions' in x.stdout else None
    r = wait_for(listed, 30, "kcat-t's 3 partitions in Metadata")
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


def test_kafka_python_producer_and_group_consumer(cluster: Cluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient
    create_topic(cluster, "kp-t", partitions=2)
    producer = KafkaProducer(bootstrap_servers=bootstrap(cluster), acks="all", client_id="kp-producer")
    # kafka-python is idempotent by default: InitProducerId, then sequenced batches
    try:
        metas = [producer.send("kp-t", key=b"k%d" % i, value=b"v%d" % i, headers=[("hk", b"hv%d" % i)])
                 for i in range(30)]
        producer.flush(30)
        offsets = [m.get(timeout=30) for m in metas]
    finally:
        producer.close(5)
    assert all(md.offset >= 0 for md in offsets)
    consumer = KafkaConsumer("kp-t", bootstrap_servers=bootstrap(cluster), group_id="kp-group",
                             auto_offset_reset="earliest", enable_auto_commit=False, client_id="kp-consumer",
                             consumer_timeout_ms=20000)
    seen = {}
    try:
        for msg in consumer:
            seen[msg.key] = (msg.value, list(msg.headers))
            if len(seen) == 30:
                break
        consumer.commit()
        parts = consumer.assignment()
        committed = {tp.partition: consumer.committed(tp) for tp in parts}
    finally:
        consumer.close()
    assert seen == {b"k%d" % i: (b"v%d" % i, [("hk", b"hv%d" % i)]) for i in range(30)}
    assert sum(committed.values()) == 30, committed
    # OffsetFetch through the listener, from an admin client outside the group
    admin = KafkaAdminClient(bootstrap_servers=bootstrap(cluster), client_id="kp-admin")
    try:
        got = admin.list_group_offsets("kp-group")["kp-group"]
        described = admin.describe_groups(["kp-group"])
        listed = admin.list_groups()
    finally:
        admin.close()
    assert {tp: om.offset for tp, om in got.items()} == {TopicPartition("kp-t", p): committed[p] for p in committed}
    assert "kp-group" in repr(described) and "kp-group" in repr(listed), (described, listed)
    evs = kafka_events(cluster)
    assert any(e["api"] == "InitProducerId" and e["error"] is None for e in evs if e["client_id"] == "kp-producer")
    assert {"JoinGroup", "SyncGroup", "OffsetCommit", "OffsetFetch"} <= {
        e["api"] for e in evs if e["client_id"] == "kp-consumer"}


def test_confluent_kafka_producer_and_group_consumer(cluster: Cluster) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource
    create_topic(cluster, "ck-t", partitions=3, **{"min.insync.replicas": "2"})
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    res = ConfigResource(ConfigResource.Type.TOPIC, "ck-t")
    configs = admin.describe_configs([res])[res].result(timeout=30)
    assert configs["min.insync.replicas"].value == "2" and configs["cleanup.policy"].value == "delete"
    delivered = []
    p = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all", "client.id": "ck-producer",
                  "linger.ms": 5, "enable.idempotence": True})
    for i in range(40):
        p.produce("ck-t", key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"%d" % i)],
                  on_delivery=lambda err, msg: delivered.append((err, msg.partition(), msg.offset())))
    assert p.flush(30) == 0
    assert len(delivered) == 40 and all(err is None for err, _, _ in delivered), delivered
    assert any(e["api"] == "InitProducerId" and e["error"] is None
               for e in kafka_events(cluster) if e["client_id"] == "ck-producer")
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "ck-group", "client.id": "ck-consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    seen = {}
    try:
        c.subscribe(["ck-t"])
        def poll() -> bool:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                seen[m.key()] = (m.value(), m.headers())
            return len(seen) == 40
        wait_for(poll, 60, "40 records through confluent-kafka", interval=0)
        c.commit(asynchronous=False)
        committed = c.committed([TopicPartition("ck-t", i) for i in range(3)], timeout=20)
    finally:
        c.close()
    assert seen == {b"k%d" % i: (b"v%d" % i, [("h", b"%d" % i)]) for i in range(40)}
    last = {}
    for _, part, off in delivered:
        last[part] = max(last.get(part, -1), off)
    assert {tp.partition: tp.offset for tp in committed} == {q: last.get(q, -1) + 1 if q in last else -1001
                                                              for q in range(3)}


def test_a_librdkafka_member_and_a_kafkasim_member_share_a_group(cluster: Cluster) -> None:
    """One core, two front doors: the group coordinator sees both members, whichever door they use."""
    import threading
    from confluent_kafka import Consumer
    from client.group import GroupMember
    from client.metadata import ClusterClient
    create_topic(cluster, "mix-t", partitions=4)
    cc = ClusterClient([f"{b.host}:{b.port}" for b in cluster.cfg.brokers])
    wait_for(lambda: cc.refresh() or True, 30, "kafkasim client metadata")
    ours = GroupMember(cc, "mix-group", ["mix-t"], client_id="kafkasim-member", assignors=["range"],
                       session_timeout_ms=6000, heartbeat_interval_ms=300)
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            try:
                ours.poll(100)
            except Exception:
                stop.wait(0.05)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    theirs = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "mix-group",
                       "client.id": "rdkafka-member", "partition.assignment.strategy": "range",
                       "session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
    try:
        theirs.subscribe(["mix-t"])

        seen: list = []

        def split() -> bool:
            theirs.poll(0.2)
            a = {tp.partition for tp in theirs.assignment()}
            b = {p for _, p in ours.assignment}
            seen[:] = [a, b]
            return bool(a) and bool(b) and not a & b and a | b == {0, 1, 2, 3}
        try:
            wait_for(split, 60, "the 4 partitions split between the two members", interval=0)
        except Exception as e:
            raise AssertionError(f"assignments (librdkafka, kafkasim): {seen}; {e.__cause__!r}") from None
    finally:
        theirs.close()
        stop.set()
        t.join(10)
        ours.close()
    joins = [e for e in kafka_events(cluster) if e["api"] == "JoinGroup" and e["client_id"] == "rdkafka-member"]
    assert joins and joins[-1]["error"] is None or any(j["error"] is None for j in joins)


def test_a_producer_creates_its_topic_on_first_use(cluster: Cluster) -> None:
    """auto.create.topics.enable (Kafka's default, true): Metadata for an unknown topic creates it."""
    from confluent_kafka import Producer
    delivered = []
    p = Producer({"bootstrap.servers": bootstrap(cluster), "client.id": "auto-producer"})
    p.produce("auto-t", value=b"first", on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    assert p.flush(60) == 0
    assert delivered == [(None, 0)]
    r = kcat(cluster, "-L", "-t", "auto-t")
    assert 'topic "auto-t" with 1 partitions' in r.stdout.decode(), r.stdout
    assert any(e["api"] == "Metadata" and e["error"] == "LEADER_NOT_AVAILABLE"
               for e in kafka_events(cluster) if e["client_id"] == "auto-producer")


def test_a_record_holding_the_old_splice_marker_is_fetched_intact_beside_a_large_partition(cluster: Cluster) -> None:
    """The poison pill: a small record whose value holds the listener's old in-band marker (``\\x00KSIMBLOB`` and
    an index), fetched in the same Fetch as a partition of 32 KiB or more, used to make every fetch close the
    connection or corrupt the answer.  confluent-kafka reads every record back as produced, byte for byte."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from tests.test_listener_payloads import ADVERSARIAL
    from zk.admin import create_topic as create_in_zk
    create_in_zk(cluster.zk(), "pill-t", 2, 3, {}, assignment={0: (1, 2, 3), 1: (1, 2, 3)})   # both led by broker 1
    p = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all", "client.id": "pill-producer",
                  "linger.ms": 50, "message.max.bytes": 2_000_000})
    sent = {0: [v for v in ADVERSARIAL if v] * 3, 1: [bytes([i]) * 40_000 for i in range(3)]}
    for part, values in sent.items():
        for v in values:
            p.produce("pill-t", value=v, partition=part)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "pill-reader", "client.id": "pill-consumer",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 50})
    got: dict[int, list[bytes]] = {0: [], 1: []}
    try:
        c.assign([TopicPartition("pill-t", q, 0) for q in (0, 1)])

        def read() -> bool:
            m = c.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                got[m.partition()].append(m.value())
            return sum(map(len, got.values())) == sum(map(len, sent.values()))
        wait_for(read, 60, "every record of pill-t back", interval=0)
    finally:
        c.close()
    assert got == sent
    closed = [e for e in kafka_events(cluster) if e["client_id"] == "pill-consumer" and e.get("closed")]
    assert closed == []


def test_aiokafka_producer_and_group_consumer(cluster: Cluster) -> None:
    """aiokafka speaks older versions (ApiVersions v0, Metadata v5, Produce v7, Fetch v11, OffsetFetch v3)."""
    import asyncio
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    create_topic(cluster, "aio-t", partitions=2)

    async def run() -> tuple[dict, dict]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap(cluster), client_id="aio-producer", acks="all")
        await producer.start()
        try:
            for i in range(10):
                await producer.send_and_wait("aio-t", key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"%d" % i)])
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("aio-t", bootstrap_servers=bootstrap(cluster), group_id="aio-group",
                                    client_id="aio-consumer", auto_offset_reset="earliest",
                                    enable_auto_commit=False)
        await consumer.start()
        seen = {}
        try:
            async def read() -> None:
                async for msg in consumer:
                    seen[msg.key] = (msg.value, list(msg.headers))
                    if len(seen) == 10:
                        return
            await asyncio.wait_for(read(), 60)
            await consumer.commit()
            committed = {tp.partition: await consumer.committed(tp) for tp in consumer.assignment()}
        finally:
            await consumer.stop()
        return seen, committed

    seen, committed = asyncio.run(run())
    assert seen == {b"k%d" % i: (b"v%d" % i, [("h", b"%d" % i)]) for i in range(10)}
    assert sum(committed.values()) == 10, committed
    apis = {(e["api"], e["api_version"]) for e in kafka_events(cluster) if e["client_id"] == "aio-consumer"}
    assert ("ApiVersions", 0) in apis and ("JoinGroup", 5) in apis, apis


def test_kafkajs_producer_and_group_consumer(cluster: Cluster) -> None:
    """kafkajs (Node): CreateTopics, Produce v7, a group (JoinGroup v5) with commits, OffsetFetch v4."""
    import json
    js = Path(__file__).parent / "js"
    r = subprocess.run(["node", str(js / "check.js"), bootstrap(cluster), "js-t", "js-group", "12"],
                       capture_output=True, timeout=120, cwd=js)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    out = json.loads(r.stdout.decode().strip().splitlines()[-1])
    assert out["seen"] == {f"k{i}": [f"v{i}", str(i)] for i in range(12)}
    (topic,) = out["offsets"]
    assert sum(int(p["offset"]) for p in topic["partitions"]) == 12, out["offsets"]
    assert any(e["api"] == "JoinGroup" and e["error"] is None
               for e in kafka_events(cluster) if e["client_id"] == "kafkajs-check")


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_from_librdkafka_are_read_by_kafkasims_consumer(cluster: Cluster, codec: str) -> None:
    """confluent-kafka compresses its batches (stored as they arrived); kafkasim's own consumer
    (client/consumer.py, over gRPC) decompresses and reads them."""
    from confluent_kafka import Producer
    from client.consumer import PartitionFetcher
    from client.metadata import ClusterClient
    topic = f"zip-{codec}"
    create_topic(cluster, topic, partitions=1, rf=2)
    p = Producer({"bootstrap.servers": bootstrap(cluster), "compression.type": codec, "linger.ms": 20,
                  "client.id": f"zip-{codec}", "enable.idempotence": True})
    for i in range(200):
        p.produce(topic, key=b"k%d" % i, value=b"%s value %d " % (codec.encode(), i) * 10)
    assert p.flush(30) == 0
    cc = ClusterClient([f"{b.host}:{b.port}" for b in cluster.cfg.brokers])
    wait_for(lambda: cc.refresh() or True, 30, "kafkasim client metadata")
    fetcher = PartitionFetcher(cc, auto_offset_reset="earliest")
    fetcher.assign([(topic, 0)])
    seen: dict[int, tuple] = {}

    def read_all() -> bool:
        for r in fetcher.poll(200):
            seen[r.offset] = (r.key, r.value)
        return len(seen) == 200
    wait_for(read_all, 30, f"200 {codec} records through kafkasim's consumer", interval=0)
    assert seen == {i: (b"k%d" % i, b"%s value %d " % (codec.encode(), i) * 10) for i in range(200)}
    from kafka.record.default_records import DefaultRecordBatch
    log = Path(cluster.cfg.run_dir)
    segs = sorted(log.glob(f"**/{topic}-0/*.log"))
    assert segs and DefaultRecordBatch(segs[0].read_bytes()).compression_type == \
        {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}[codec]    # the log kept the client's compression


def test_clients_follow_leaders_when_a_broker_stops(cluster: Cluster) -> None:
    """Last in the module (it stops and restarts a broker): an idempotent librdkafka producer keeps
    producing through NOT_LEADER_OR_FOLLOWER and a lost connection, and nothing is lost or doubled."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient
    create_topic(cluster, "move-t", partitions=3)
    delivered = []
    p = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all", "enable.idempotence": True,
                  "client.id": "move-producer", "linger.ms": 5})

    def send(first: int, n: int) -> None:
        for i in range(first, first + n):
            p.produce("move-t", key=b"k%d" % i, value=b"v%d" % i,
                      on_delivery=lambda err, msg: delivered.append(err))
        assert p.flush(60) == 0
    send(0, 30)
    meta = AdminClient({"bootstrap.servers": bootstrap(cluster)}).list_topics("move-t", timeout=20)
    victim = meta.topics["move-t"].partitions[0].leader
    cluster.stop_broker(victim)   # SIGTERM: controlled shutdown moves its leaderships away
    try:
        send(30, 30)
        assert delivered == [None] * 60, delivered
        r = kcat(cluster, "-C", "-t", "move-t", "-e", "-f", "%k\n")
        assert r.returncode == 0, r.stderr
        assert sorted(r.stdout.decode().split()) == sorted("k%d" % i for i in range(60))
    finally:
        cluster.start_broker(victim)
        cluster.wait_ready(90)
