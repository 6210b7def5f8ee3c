"""Kafka 2.8.2's Java client and Kafka's own command-line tools against a real 3-broker kafkasim cluster.

The Java programs (reference/java/*.java: an idempotent producer, a group member, a runner of Kafka's tools) are
compiled at first use against the jar cache (reference/jars.py) and driven through JSON lines
(reference/javaclient.py).  Every tool runs in one JVM (``tools``) shared by the module, as does the cluster.
"""
from __future__ import annotations

import random
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from launcher.cluster import Cluster
from reference.javaclient import JavaMember, JavaProducer, ToolRunner, unb64
from util.waiting import wait_for
from tests.test_kafka_clients import bootstrap, create_topic, kafka_cluster, kafka_events

pytestmark = [pytest.mark.kafka, pytest.mark.cluster, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from kafka_cluster(zookeeper, tmp_path_factory, "java-clients")


@pytest.fixture(scope="module")
def tools() -> Iterator[ToolRunner]:
    runner = ToolRunner()
    try:
        yield runner
    finally:
        runner.close()


def values(n: int, seed: int) -> list[tuple[bytes | None, bytes, list[tuple[str, bytes]]]]:
    """``n`` (key, value, headers): every byte value, empty values, null keys, compressible and random runs."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        key = None if i % 7 == 3 else b"k%d\x00\xff" % i
        kind = i % 4
        value = (bytes(range(256)) if kind == 0 else b"" if kind == 1 and i % 8 == 1
                 else (b"record %d " % i) * rng.randint(1, 200) if kind == 2
                 else rng.randbytes(rng.randint(1, 3000)))
        out.append((key, value, [("i", b"%d" % i), ("bin", rng.randbytes(5))] if i % 3 else []))
    return out


def read_back(c: Cluster, topic: str, partitions: int, count: int) -> dict[tuple[int, int], tuple]:
    """Every record of ``topic`` from offset 0, read by confluent-kafka: (partition, offset) -> (key, value, headers)."""
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap(c), "group.id": f"{topic}-reader", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 50})
    got: dict[tuple[int, int], tuple] = {}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])

        def read() -> bool:
            for m in consumer.consume(500, 0.5):
                assert m.error() is None, m.error()
                got[(m.partition(), m.offset())] = (m.key(), m.value() or b"", list(m.headers() or []))
            return len(got) >= count
        wait_for(read, 60, f"{count} records of {topic} back", interval=0)
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_java_idempotent_producer_every_record_read_back_byte_for_byte(cluster: Cluster, codec: str) -> None:
    """The Java producer, idempotent with acks=all and ``codec``: each send acknowledged once at its own
    offset, and every record (keys, values, headers) read back byte for byte by librdkafka; the log keeps
    the Java client's compression."""
    from kafka.record.default_records import DefaultRecordBatch
    topic = f"java-{codec}"
    create_topic(cluster, topic, partitions=2, rf=3)
    sent = values(150, seed=len(codec))
    with JavaProducer(bootstrap(cluster), {"acks": "all", "enable.idempotence": True, "compression.type": codec,
                                           "linger.ms": 5, "client.id": f"java-producer-{codec}"}) as p:
        for i, (key, value, headers) in enumerate(sent):
            p.send(str(i), topic, value, key=key, headers=headers)
        acks = p.flush(timeout=60)
    bad = [a for a in acks if not a["ok"]]
    assert not bad and len(acks) == len(sent), bad or acks
    at = {int(a["id"]): (a["partition"], a["offset"]) for a in acks}
    assert sorted(at) == list(range(len(sent))) and len(set(at.values())) == len(sent)
    got = read_back(cluster, topic, 2, len(sent))
    assert len(got) == len(sent)
    for i, (key, value, headers) in enumerate(sent):
        assert got[at[i]] == (key, value, headers), f"record {i} at {at[i]}"
    used = {e["api"] for e in kafka_events(cluster) if e["client_id"] == f"java-producer-{codec}" and e["error"] is None}
    assert {"InitProducerId", "Produce"} <= used, used
    segs = sorted(Path(cluster.cfg.run_dir).glob(f"**/{topic}-0/*.log"))
    assert segs and DefaultRecordBatch(segs[0].read_bytes()).compression_type == \
        {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}[codec]


def describe_partitions(out: str) -> dict[int, dict[str, str]]:
    """TopicCommand --describe's partition lines: partition -> {Leader, Replicas, Isr}."""
    parts = {}
    for line in out.splitlines():
        fields = dict(re.findall(r"(\w+): (\S*)", line))
        if "Partition" in fields:
            parts[int(fields["Partition"])] = fields
    return parts


def test_topic_command_create_describe_list_delete(cluster: Cluster, tools: ToolRunner) -> None:
    bs = bootstrap(cluster)
    r = tools.run("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "tool-t", "--partitions", "3",
                  "--replication-factor", "2", "--config", "retention.ms=3600000", "--config", "cleanup.policy=compact")
    assert r.rc == 0 and "Created topic tool-t." in r.out, r
    r = tools.run("kafka-topics", "--bootstrap-server", bs, "--describe", "--topic", "tool-t")
    assert r.rc == 0, r
    head = r.out.splitlines()[0]
    assert "PartitionCount: 3" in head and "ReplicationFactor: 2" in head, r
    configs = dict(kv.split("=", 1) for kv in head.split("Configs: ", 1)[1].split(","))
    assert configs == {"retention.ms": "3600000", "cleanup.policy": "compact"}, head
    parts = describe_partitions(r.out)
    snap = cluster.zk().read_snapshot()
    assert sorted(parts) == [0, 1, 2], r
    for p, f in parts.items():   # the tool shows what ZooKeeper holds
        state = snap.states[("tool-t", p)][0]
        assert [int(x) for x in f["Replicas"].split(",")] == list(snap.topics["tool-t"].partitions[p]), r
        assert int(f["Leader"]) == state.leader and sorted(map(int, f["Isr"].split(","))) == sorted(state.isr), r
    r = tools.run("kafka-topics", "--bootstrap-server", bs, "--describe", "--under-replicated-partitions")
    assert r.rc == 0 and r.out == "", r
    # refused as Kafka 2.8.2 refuses them, in its words (the tool prints the broker's message)
    for args, exception, message in (
            (("--topic", "tool-t"), "TopicExistsException", "Topic 'tool-t' already exists."),
            (("--topic", "tool-rf", "--replication-factor", "9"), "InvalidReplicationFactorException",
             "Replication factor: 9 larger than available brokers: 3."),
            (("--topic", "tool/t"), "InvalidTopicException", 'Topic name "tool/t" is illegal, it contains a '
                                                             "character other than ASCII alphanumerics, '.', '_' and '-'")):
        r = tools.run("kafka-topics", "--bootstrap-server", bs, "--create", "--partitions", "1", *args)
        assert r.rc == 1 and exception in r.err and f"Error while executing topic command : {message}\n" in r.out, r
    r = tools.run("kafka-topics", "--bootstrap-server", bs, "--list")
    assert r.rc == 0 and "tool-t" in r.out.split(), r
    r = tools.run("kafka-topics", "--bootstrap-server", bs, "--delete", "--topic", "tool-t")
    assert r.rc == 0, r

    def gone() -> bool:
        listed = tools.run("kafka-topics", "--bootstrap-server", bs, "--list")
        return listed.rc == 0 and "tool-t" not in listed.out.split() and "tool-t" not in cluster.zk().read_snapshot().topics
    wait_for(gone, 30, "tool-t to be deleted")


def test_consumer_group_command_list_describe_reset_delete(cluster: Cluster, tools: ToolRunner) -> None:
    from confluent_kafka import Producer
    bs = bootstrap(cluster)
    create_topic(cluster, "cg-t", partitions=2)
    p = Producer({"bootstrap.servers": bs, "acks": "all"})
    for i in range(30):
        p.produce("cg-t", key=b"k%d" % i, value=b"v%d" % i, partition=i % 2)
    assert p.flush(30) == 0
    member = JavaMember(bs, "cg-group", "cg-t", {"auto.offset.reset": "earliest", "client.id": "cg-java"})
    try:
        seen = []

        def consumed_all() -> bool:
            msg, _ = member.poll(200)
            seen.extend(msg.get("polled", []))
            return len(seen) == 30
        wait_for(consumed_all, 60, "the Java member to read cg-t", interval=0)
        assert member.commit()["committed"] == {"cg-t/0": 15, "cg-t/1": 15}
        r = tools.run("kafka-consumer-groups", "--bootstrap-server", bs, "--list")
        assert r.rc == 0 and "cg-group" in r.out.split(), r
        r = tools.run("kafka-consumer-groups", "--bootstrap-server", bs, "--describe", "--group", "cg-group")
        assert r.rc == 0, r
        rows = [line.split() for line in r.out.splitlines() if line.startswith("cg-group")]
        assert sorted((row[1], row[2], row[3], row[4], row[5]) for row in rows) == \
            [("cg-t", "0", "15", "15", "0"), ("cg-t", "1", "15", "15", "0")], r
        assert all(row[6] == member.member_id and row[8] == "cg-java" for row in rows), r
        r = tools.run("kafka-consumer-groups", "--bootstrap-server", bs, "--describe", "--group", "cg-group", "--state")
        assert r.rc == 0 and re.search(r"cg-group\s+\S+ \(\d\)\s+range\s+Stable\s+1", r.out), r
        r = tools.run("kafka-consumer-groups", "--bootstrap-server", bs, "--reset-offsets", "--group", "cg-group",
                      "--topic", "cg-t", "--to-earliest", "--execute")
        assert "can only be reset if the group 'cg-group' is inactive, but the current state is Stable" in r.out, r
    finally:
        member.close()
    r = tools.run("kafka-consumer-groups", "--bootstrap-server", bs, "--reset-offsets", "--group", "cg-group",
                  "--topic", "cg-t", "--to-earliest", "--execute")
    assert r.rc == 0 and re.search(r"cg-group\s+cg-t\s+0\s+0\s", r.out) and re.search(r"cg-group\s+cg-t\s+1\s+0\s", r.out), r
    r = tools.run("kafka-consumer-groups", "--bootstrap-server", bs, "--reset-offsets", "--group", "cg-group",
                  "--topic", "cg-t:1", "--to-offset", "7", "--execute")
    assert r.rc == 0, r
    r = tools.run("kafka-consumer-groups", "--bootstrap-server", bs, "--describe", "--group", "cg-group")
    rows = sorted(tuple(line.split()[1:6]) for line in r.out.splitlines() if line.startswith("cg-group"))
    assert rows == [("cg-t", "0", "0", "15", "15"), ("cg-t", "1", "7", "15", "8")], r
    assert "has no active members" in r.err + r.out, r
    r = tools.run("kafka-consumer-groups", "--bootstrap-server", bs, "--delete", "--group", "cg-group")
    assert r.rc == 0 and "Deletion of requested consumer groups ('cg-group') was successful." in r.out, r
    r = tools.run("kafka-consumer-groups", "--bootstrap-server", bs, "--list")
    assert r.rc == 0 and "cg-group" not in r.out.split(), r
    r = tools.run("kafka-consumer-groups", "--bootstrap-server", bs, "--delete", "--group", "cg-group")
    assert "GroupIdNotFoundException" in r.out, r


def test_config_command_describes_topics_and_brokers(cluster: Cluster, tools: ToolRunner) -> None:
    bs = bootstrap(cluster)
    create_topic(cluster, "cfg-t", partitions=1, rf=2, **{"retention.ms": "1234567", "min.insync.replicas": "2"})
    r = tools.run("kafka-configs", "--bootstrap-server", bs, "--describe", "--entity-type", "topics",
                  "--entity-name", "cfg-t")
    assert r.rc == 0 and r.out.startswith("Dynamic configs for topic cfg-t are:"), r
    lines = sorted(line.split()[0] for line in r.out.splitlines()[1:])
    assert lines == ["min.insync.replicas=2", "retention.ms=1234567"], r
    r = tools.run("kafka-configs", "--bootstrap-server", bs, "--describe", "--entity-type", "topics",
                  "--entity-name", "cfg-t", "--all")
    shown = dict(line.split()[0].split("=", 1) for line in r.out.splitlines()[1:])
    assert r.rc == 0 and shown["retention.ms"] == "1234567" and shown["cleanup.policy"] == "delete", r
    r = tools.run("kafka-configs", "--bootstrap-server", bs, "--describe", "--entity-type", "brokers")
    assert r.rc == 0, r
    assert [line for line in r.out.splitlines() if line.endswith(" are:")] == [
        "Dynamic configs for broker 1 are:", "Dynamic configs for broker 2 are:", "Dynamic configs for broker 3 are:",
        "Default configs for brokers in the cluster are:"], r
    r = tools.run("kafka-configs", "--bootstrap-server", bs, "--describe", "--entity-type", "brokers",
                  "--entity-name", "2", "--all")
    shown = dict(line.split()[0].split("=", 1) for line in r.out.splitlines()[1:])
    assert r.rc == 0 and r.out.startswith("All configs for broker 2 are:"), r
    assert shown["offsets.topic.num.partitions"] == "10" and shown["zookeeper.session.timeout.ms"] == "3000", r


def test_leader_election_command(cluster: Cluster, tools: ToolRunner) -> None:
    """Preferred election of partitions already led by their preferred replica: Kafka 2.8.2 answers
    ELECTION_NOT_NEEDED and the tool says so (printing the partitions it elected on that line: none), exit 0.
    The elections themselves: tests/test_admin_tools_cluster.py."""
    create_topic(cluster, "elect-t", partitions=2, rf=3)
    r = tools.run("kafka-leader-election", "--bootstrap-server", bootstrap(cluster), "--election-type", "preferred",
                  "--topic", "elect-t", "--partition", "0")
    assert r.rc == 0 and r.out == "Valid replica already elected for partitions \n", r


def test_producer_and_consumer_performance(cluster: Cluster, tools: ToolRunner) -> None:
    from confluent_kafka import Consumer, TopicPartition
    bs = bootstrap(cluster)
    create_topic(cluster, "perf-t", partitions=3)
    r = tools.run("kafka-producer-perf-test", "--topic", "perf-t", "--num-records", "20000", "--record-size", "200",
                  "--throughput", "-1", "--producer-props", f"bootstrap.servers={bs}", "acks=all",
                  "enable.idempotence=true", "compression.type=lz4", "client.id=java-perf-producer")
    assert r.rc == 0 and re.match(r"20000 records sent, [\d.]+ records/sec", r.out.splitlines()[-1]), r
    assert "ERROR" not in r.err and "Exception" not in r.out, r
    c = Consumer({"bootstrap.servers": bs, "group.id": "perf-check"})
    try:
        ends = [c.get_watermark_offsets(TopicPartition("perf-t", p), timeout=10)[1] for p in range(3)]
    finally:
        c.close()
    assert sum(ends) == 20000, ends
    r = tools.run("kafka-consumer-perf-test", "--bootstrap-server", bs, "--topic", "perf-t", "--messages", "20000",
                  "--group", "perf-group", "--timeout", "30000")
    assert r.rc == 0, r
    header, row = r.out.strip().splitlines()[-2:]
    stats = dict(zip([h.strip() for h in header.split(",")], [v.strip() for v in row.split(",")]))
    assert stats["data.consumed.in.nMsg"] == "20000", r
    assert abs(float(stats["data.consumed.in.MB"]) - 20000 * 200 / 1024 / 1024) < 0.01, r
    assert "ERROR" not in r.err and "WARN" not in r.err, r


def test_kafkasim_reference_tool_runs_a_kafka_tool(cluster: Cluster) -> None:
    """``kafkasim reference tool NAME ARGS``: one tool from the cache, as bin/NAME.sh runs it."""
    create_topic(cluster, "cli-tool-t", partitions=1)
    r = subprocess.run([sys.executable, "-m", "cli.main", "reference", "tool", "kafka-topics", "--bootstrap-server",
                        bootstrap(cluster), "--describe", "--topic", "cli-tool-t"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0 and "Topic: cli-tool-t\tPartitionCount: 1" in r.stdout, r
    r = subprocess.run([sys.executable, "-m", "cli.main", "reference", "tool", "kafka-nonesuch"],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 2 and "unknown Kafka tool 'kafka-nonesuch'" in r.stderr, r


def test_java_consumer_commits_through_a_coordinator_sigkill(cluster: Cluster) -> None:
    """A Java group member polls and commits synchronously after every poll while its group's coordinator
    is SIGKILLed: its commits go on at the new coordinator, its consumption skips no offset, and once it
    has left, OffsetFetch at the new coordinator returns exactly the last commit it saw succeed for every
    partition (no acknowledged commit lost).  Last in the module: it restarts the broker it killed."""
    import signal
    from confluent_kafka import Producer
    from client.admin import GroupAdmin
    from client.metadata import ClusterClient
    bs = bootstrap(cluster)
    create_topic(cluster, "jfo-t", partitions=2)
    stop = threading.Event()
    p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True, "linger.ms": 5})

    def produce() -> None:
        i = 0
        while not stop.is_set():
            p.produce("jfo-t", value=b"v%d" % i)
            p.poll(0.02)
            i += 1
        p.flush(30)
    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    cc = ClusterClient([f"{b.host}:{b.port}" for b in cluster.cfg.brokers])
    admin = GroupAdmin(cc)
    old = admin.coordinator("jfo-group")[0]
    member = JavaMember(bs, "jfo-group", "jfo-t", {"auto.offset.reset": "earliest", "client.id": "jfo-java",
                                                   "session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
    acks: list[tuple[int, dict[str, int]]] = []     # (mono_ns, offsets) of each commit the Java client returned
    failed: list[dict] = []
    offsets_seen: dict[int, list[int]] = {0: [], 1: []}
    member_stop = threading.Event()
    crashed: list[BaseException] = []

    def run() -> None:
        positions: dict[tuple[str, int], int] = {}
        try:
            while not member_stop.is_set():
                msg, events = member.poll(100)
                if any("revoked" in e or "lost" in e for e in events):
                    positions.clear()
                for topic, part, offset, *_ in msg.get("polled", []):
                    offsets_seen[part].append(offset)
                    positions[(topic, part)] = offset + 1
                if positions:
                    done = member.commit(positions)
                    if "committed" in done:
                        acks.append((time.monotonic_ns(), done["committed"]))
                    else:
                        failed.append(done)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            crashed.append(e)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        wait_for(lambda: len(acks) >= 5 or crashed, 60, "the Java member committing")
        assert not crashed, crashed
        t0 = time.monotonic_ns()
        cluster.signal_broker(old, signal.SIGKILL)

        def resumed() -> bool:
            assert not crashed, crashed
            first = next((e["mono_ns"] for e in kafka_events(cluster) if e["api"] == "OffsetCommit"
                          and e["client_id"] == "jfo-java" and e["error"] is None and e["broker"] != old
                          and e["mono_ns"] > t0), None)
            return first is not None and sum(1 for ts, _ in acks if ts > first) >= 3
        wait_for(resumed, 60, "the Java member's commits on the new coordinator")
        new = admin.coordinator("jfo-group")[0]
        assert new != old
    finally:
        member_stop.set()
        t.join(120)
        member.close()
        stop.set()
        producer.join(30)
    assert not crashed, crashed
    last: dict[int, int] = {}
    for _, offsets in acks:
        for name, o in offsets.items():
            part = int(name.rsplit("/", 1)[1])
            assert o >= last.get(part, -1), f"the Java client's commits went backwards: {acks}"
            last[part] = o
    got = {p: o for (topic, p), o in admin.committed("jfo-group").items() if topic == "jfo-t"}
    cc.close()
    assert got == last, f"OffsetFetch at broker {new} after the SIGKILL of broker {old}: {got}; acknowledged: {last}"
    for part, seen in offsets_seen.items():   # no offset skipped (a re-delivery after a rebalance may repeat)
        assert sorted(set(seen)) == list(range(max(seen) + 1)), f"partition {part}: offsets skipped"
    cluster.wait_exit(old, timeout=30)
    cluster.start_broker(old)
    cluster.wait_ready(90)
