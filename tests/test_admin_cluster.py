"""Kafka 2.8's admin APIs against a real 3-broker cluster, through real clients: controller-only requests
(NOT_CONTROLLER elsewhere, and the clients finding the controller), CreateTopics with manual assignments,
CreatePartitions, AlterConfigs, IncrementalAlterConfigs and DescribeConfigs, and config changes the
brokers apply live.  One cluster for the module (its brokers are OS processes)."""
from __future__ import annotations

import json
import socket
import struct
import subprocess
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from launcher.cluster import Cluster
from listener.protocol import REQUESTS, RESPONSES
from node.config import load_config
from node.events import read_events
from tests.conftest import write_cluster_yaml
from tests.test_kafka_clients import controller_named
from util.waiting import wait_for
from zk.client import ZkClient

pytestmark = pytest.mark.timeout(300)

NOT_CONTROLLER, INVALID_PARTITIONS, INVALID_REPLICA_ASSIGNMENT = 41, 37, 39
INVALID_CONFIG, INVALID_REQUEST, UNKNOWN_TOPIC, NOT_ENOUGH_REPLICAS = 40, 42, 3, 19


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    d = tmp_path_factory.mktemp("admin")
    path = write_cluster_yaml(d / "cluster.yaml", f"{zookeeper.connect_string}/t-{uuid.uuid4().hex[:12]}", 3,
                              **{"offsets.topic.num.partitions": 4, "log.retention.check.interval.ms": 300})
    c = Cluster(load_config(path), path)
    try:
        c.up(timeout=90)
        wait_for(lambda: all(controller_named(h, p) for h, p in (b.kafka_advertised for b in c.cfg.brokers)), 30.0,
                 "every broker's Kafka listener to name the controller")
        yield c
    finally:
        c.down()


def bootstrap(c: Cluster) -> str:
    return ",".join(f"{h}:{p}" for h, p in (b.kafka_advertised for b in c.cfg.brokers))


def admin(c: Cluster):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap(c)})


def controller(c: Cluster) -> int:
    zk = c.zk()
    return zk.read_controller()


def raw(c: Cluster, broker: int, api: int, version: int, **fields: Any) -> Any:
    """One request to one broker's Kafka listener, as kafka-python's generated classes encode it."""
    req = REQUESTS[api](version=version)
    for k, v in fields.items():
        setattr(req, k, v)
    req.with_header(correlation_id=7, client_id="admin-test")
    data = bytes(req.encode(header=True))
    host, port = c.cfg.broker(broker).kafka_advertised
    with socket.create_connection((host, port), timeout=30) as s:
        s.sendall(struct.pack(">i", len(data)) + data)
        (n,) = struct.unpack(">i", _read(s, 4))
        return RESPONSES[api].decode(_read(s, n), version=version, header=True)


def _read(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        assert chunk, "connection closed"
        out += chunk
    return out


def create(c: Cluster, topic: str, partitions: int = 2, rf: int = 3, **configs: str) -> None:
    from confluent_kafka.admin import NewTopic
    a = admin(c)   # held until the result: a dropped client destroys its handle
    a.create_topics([NewTopic(topic, partitions, rf, config=configs)])[topic].result(timeout=30)


def events(c: Cluster, kind: str) -> list[dict]:
    out = []
    for b in c.cfg.brokers:
        out += [e for e in read_events(Path(c.cfg.run_dir) / "events" / f"broker-{b.id}.jsonl") if e["type"] == kind]
    return out


# ---------------------------------------------------------------------- controller-only requests

def test_only_the_controller_creates_deletes_and_adds_partitions(cluster: Cluster) -> None:
    """KafkaApis 2.8: CreateTopics, DeleteTopics and CreatePartitions answer NOT_CONTROLLER on any broker but the
    controller; librdkafka's and kafka-python's admin clients then find it through Metadata."""
    R19, R37 = REQUESTS[19], REQUESTS[37]
    ctl = controller(cluster)
    other = next(b.id for b in cluster.cfg.brokers if b.id != ctl)
    r = raw(cluster, other, 19, 5, timeout_ms=5000, topics=[R19.CreatableTopic(
        name="nc-t", num_partitions=1, replication_factor=1, assignments=[], configs=[])])
    assert [(t.name, t.error_code) for t in r.topics] == [("nc-t", NOT_CONTROLLER)]
    r = raw(cluster, other, 37, 2, timeout_ms=5000, validate_only=False,
            topics=[R37.CreatePartitionsTopic(name="nc-t", count=2, assignments=None)])
    assert [(t.name, t.error_code) for t in r.results] == [("nc-t", NOT_CONTROLLER)]
    r = raw(cluster, other, 20, 4, timeout_ms=5000, topic_names=["nc-t"])
    assert [(t.name, t.error_code) for t in r.responses] == [("nc-t", NOT_CONTROLLER)]
    # the controller itself serves them
    r = raw(cluster, ctl, 19, 5, timeout_ms=20000, topics=[R19.CreatableTopic(
        name="nc-t", num_partitions=1, replication_factor=1, assignments=[], configs=[])])
    assert [(t.name, t.error_code, t.num_partitions) for t in r.topics] == [("nc-t", 0, 1)]
    # real clients, bootstrapped on a broker that is not the controller, find it
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
    a = AdminClient({"bootstrap.servers": "%s:%d" % cluster.cfg.broker(other).kafka_advertised})
    a.create_topics([NewTopic("nc-c", 1, 2)])["nc-c"].result(timeout=30)
    a.create_partitions([NewPartitions("nc-c", 3)])["nc-c"].result(timeout=30)
    from kafka.admin import KafkaAdminClient, NewPartitions as KNewPartitions, NewTopic as KNewTopic
    k = KafkaAdminClient(bootstrap_servers="%s:%d" % cluster.cfg.broker(other).kafka_advertised)
    try:
        k.create_topics([KNewTopic("nc-k", 1, 2)], timeout_ms=20000)
        k.create_partitions({"nc-k": KNewPartitions(2)}, timeout_ms=20000)
        k.delete_topics(["nc-t"], timeout_ms=20000)
    finally:
        k.close()
    md = a.list_topics(timeout=10)
    assert len(md.topics["nc-c"].partitions) == 3 and len(md.topics["nc-k"].partitions) == 2
    wait_for(lambda: "nc-t" not in a.list_topics(timeout=10).topics, 20, "nc-t to be deleted")
    handled = {(e["api"], e["error"]) for e in events(cluster, "kafka_request") if e["api"] in (
        "CreateTopics", "CreatePartitions", "DeleteTopics")}
    assert ("CreateTopics", "NOT_CONTROLLER") in handled and ("CreatePartitions", None) in handled


def test_create_topics_takes_manual_assignments_with_kafkas_checks(cluster: Cluster) -> None:
    from confluent_kafka.admin import NewTopic
    a = admin(cluster)
    a.create_topics([NewTopic("ma-t", num_partitions=3, replica_assignment=[[2, 3], [3, 1], [1, 2]])])["ma-t"].result(timeout=30)
    parts = a.list_topics(timeout=10).topics["ma-t"].partitions
    assert {p: list(parts[p].replicas) for p in parts} == {0: [2, 3], 1: [3, 1], 2: [1, 2]}
    assert all(parts[p].leader == parts[p].replicas[0] for p in parts)
    R = REQUESTS[19]
    A = R.CreatableTopic.CreatableReplicaAssignment

    def one(name: str, assignments: list, n: int = -1, rf: int = -1) -> tuple[int, str]:
        r = raw(cluster, controller(cluster), 19, 5, timeout_ms=10000, topics=[R.CreatableTopic(
            name=name, num_partitions=n, replication_factor=rf, assignments=assignments, configs=[])])
        return r.topics[0].error_code, r.topics[0].error_message or ""

    assert one("ma-gap", [A(partition_index=0, broker_ids=[1]), A(partition_index=2, broker_ids=[2])]) == (
        INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence")
    assert one("ma-dup", [A(partition_index=0, broker_ids=[1, 1])])[0] == INVALID_REPLICA_ASSIGNMENT
    assert one("ma-rf", [A(partition_index=0, broker_ids=[1, 2]), A(partition_index=1, broker_ids=[3])]) == (
        INVALID_REPLICA_ASSIGNMENT, "All partitions should have the same number of replicas")
    assert one("ma-both", [A(partition_index=0, broker_ids=[1])], n=1)[0] == INVALID_REQUEST
    assert "ma-gap" not in a.list_topics(timeout=10).topics


# ---------------------------------------------------------------------- CreatePartitions

def test_create_partitions_through_the_controllers_watch(cluster: Cluster) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewPartitions
    a = admin(cluster)
    create(cluster, "cp-t", partitions=2, rf=2)
    a.create_partitions([NewPartitions("cp-t", 3)], validate_only=True)["cp-t"].result(timeout=30)
    assert len(a.list_topics(timeout=10).topics["cp-t"].partitions) == 2     # validate_only changes nothing
    a.create_partitions([NewPartitions("cp-t", 4)])["cp-t"].result(timeout=30)
    a.create_partitions([NewPartitions("cp-t", 5, replica_assignment=[[3, 1]])])["cp-t"].result(timeout=30)
    parts = a.list_topics(timeout=10).topics["cp-t"].partitions
    assert sorted(parts) == [0, 1, 2, 3, 4] and list(parts[4].replicas) == [3, 1]
    assert all(parts[p].leader >= 0 and len(parts[p].replicas) == 2 for p in parts)
    # the znode has the whole assignment; the controller elected the new ones (partitions_added)
    data, _ = cluster.zk().get("/brokers/topics/cp-t")
    assert sorted(json.loads(data)["partitions"]) == ["0", "1", "2", "3", "4"]
    added = [e for e in events(cluster, "partitions_added") if e["topic"] == "cp-t"]
    assert sorted(p for e in added for p in e["partitions"]) == [2, 3, 4]
    p = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all"})
    p.produce("cp-t", b"into-the-new-partition", partition=4)
    assert p.flush(30) == 0
    for count, assignment, code in ((3, None, INVALID_PARTITIONS), (5, None, INVALID_PARTITIONS),
                                    (6, [[3, 9]], INVALID_REPLICA_ASSIGNMENT), (7, [[1, 2]], INVALID_REPLICA_ASSIGNMENT)):
        spec = NewPartitions("cp-t", count) if assignment is None else NewPartitions("cp-t", count, replica_assignment=
                                                                                    assignment)
        fut = a.create_partitions([spec])["cp-t"]
        with pytest.raises(Exception) as e:
            fut.result(timeout=30)
        assert e.value.args[0].code() == code, e.value


# ---------------------------------------------------------------------- configs

def test_alter_and_describe_topic_configs_in_kafkas_znodes(cluster: Cluster) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource
    a = admin(cluster)
    create(cluster, "cfg-t", partitions=1, rf=3, **{"retention.ms": "600000"})
    zk: ZkClient = cluster.zk()
    assert json.loads(zk.get("/config/topics/cfg-t")[0]) == {"version": 1, "config": {"retention.ms": "600000"}}
    res = ConfigResource("topic", "cfg-t")
    a.incremental_alter_configs([ConfigResource("topic", "cfg-t", incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("segment.ms", "3600000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])])[res].result(timeout=30)
    assert json.loads(zk.get("/config/topics/cfg-t")[0])["config"] == {"cleanup.policy": "delete,compact",
                                                                     "segment.ms": "3600000"}
    changes = [json.loads(zk.get(f"/config/changes/{n}")[0]) for n in zk.get_children("/config/changes")]
    assert {"version": 2, "entity_path": "topics/cfg-t"} in changes
    got = a.describe_configs([res])[res].result(timeout=30)
    assert len(got) == 26
    assert got["cleanup.policy"].value == "delete,compact" and got["segment.ms"].value == "3600000"
    assert got["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert got["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value and got["retention.ms"].value == "604800000"
    assert got["segment.ms"].synonyms["segment.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert "log.roll.ms" in got["segment.ms"].synonyms
    # every broker applied it (config_changed) ...
    wait_for(lambda: {e["broker"] for e in events(cluster, "config_changed") if e["entity_name"] == "cfg-t"}
             == {1, 2, 3}, 20, "every broker to apply the change")
    # ... and AlterConfigs replaces the whole set
    a.alter_configs([ConfigResource("topic", "cfg-t", set_config={"max.message.bytes": "2000"})])[res].result(timeout=30)
    assert json.loads(zk.get("/config/topics/cfg-t")[0])["config"] == {"max.message.bytes": "2000"}
    a.incremental_alter_configs([ConfigResource("topic", "cfg-t", incremental_configs=[
        ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.SET)])],
        validate_only=True)[res].result(timeout=30)
    assert json.loads(zk.get("/config/topics/cfg-t")[0])["config"] == {"max.message.bytes": "2000"}
    for resource, code in ((ConfigResource("topic", "cfg-t", set_config={"retention.mss": "1"}), INVALID_CONFIG),
                           (ConfigResource("topic", "cfg-t", set_config={"retention.ms": "-7"}), INVALID_REQUEST),
                           (ConfigResource("topic", "cfg-t", set_config={"preallocate": "true"}), INVALID_CONFIG),
                           (ConfigResource("topic", "nope-t", set_config={"retention.ms": "1"}), UNKNOWN_TOPIC),
                           (ConfigResource("broker", "1", set_config={"zookeeper.session.timeout.ms": "1"}),
                            INVALID_REQUEST),
                           (ConfigResource("broker", "1", set_config={"max.connections": "10"}), INVALID_CONFIG)):
        with pytest.raises(Exception) as e:
            a.alter_configs([resource])[resource].result(timeout=30)
        assert getattr(e.value.args[0], "code", lambda: e.value)() == code, (resource, e.value)
    assert json.loads(zk.get("/config/topics/cfg-t")[0])["config"] == {"max.message.bytes": "2000"}


def test_a_cluster_wide_broker_default_is_a_synonym_of_every_topic(cluster: Cluster) -> None:
    """kafka-configs --entity-default: /config/brokers/<default>, which every broker applies (librdkafka takes
    no empty broker name, so the requests are sent as they are on the wire)."""
    from confluent_kafka.admin import ConfigResource, ConfigSource
    a = admin(cluster)
    create(cluster, "bd-t", partitions=1, rf=1)
    R44, R32 = REQUESTS[44], REQUESTS[32]

    def default(op: int, value: str | None) -> Any:
        return raw(cluster, 2, 44, 1, validate_only=False, resources=[R44.AlterConfigsResource(
            resource_type=4, resource_name="", configs=[R44.AlterConfigsResource.AlterableConfig(
                name="log.retention.bytes", config_operation=op, value=value)])])

    assert [(r.error_code, r.resource_name) for r in default(0, "123456789").responses] == [(0, "")]
    try:
        assert json.loads(cluster.zk().get("/config/brokers/<default>")[0])["config"] == {
            "log.retention.bytes": "123456789"}
        res = ConfigResource("topic", "bd-t")

        def source() -> tuple:
            got = a.describe_configs([res])[res].result(timeout=30)["retention.bytes"]
            return got.value, got.source
        wait_for(lambda: source() == ("123456789", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value), 20,
                 "the topic to show the cluster-wide default")
        mine = ConfigResource("broker", "1")
        # each broker applies the change when its own notification watch fires (Kafka's too): the topic's answer
        # came from one broker, broker 1 may take longer
        got = wait_for(lambda: (g := a.describe_configs([mine])[mine].result(timeout=30))
                       and g["log.retention.bytes"].value == "123456789" and g, 20,
                       "broker 1 to show the cluster-wide default")
        assert not got["log.retention.bytes"].is_read_only
        assert got["zookeeper.session.timeout.ms"].is_read_only
        def described() -> list:
            d = raw(cluster, 3, 32, 1, include_synonyms=True, resources=[R32.DescribeConfigsResource(
                resource_type=4, resource_name="", configuration_keys=None)]).results[0]
            return [(c.name, c.value, c.config_source) for c in d.configs]
        wait_for(lambda: described() == [("log.retention.bytes", "123456789", 3)], 20,
                 "broker 3 to describe the cluster-wide default")
    finally:
        assert default(1, None).responses[0].error_code == 0
    assert json.loads(cluster.zk().get("/config/brokers/<default>")[0])["config"] == {}


def test_live_changes_are_enforced_by_the_brokers(cluster: Cluster) -> None:
    """min.insync.replicas raised above the ISR refuses acks=all at once; segment.bytes and retention.ms lowered
    roll and delete segments on a live topic."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import ConfigResource
    a = admin(cluster)
    create(cluster, "live-t", partitions=1, rf=3)

    def alter(**config: str) -> None:
        res = ConfigResource("topic", "live-t", set_config=config)
        a.alter_configs([res])[res].result(timeout=30)

    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bootstrap(cluster), acks="all", retries=0, linger_ms=0,
                      enable_idempotence=False, request_timeout_ms=10000)

    def produce(n: int = 1, size: int = 10) -> list:
        """Each record in a batch of its own: -> None for each acknowledged one, else the error."""
        out = []
        for _ in range(n):
            try:
                p.send("live-t", b"x" * size).get(timeout=30)
                out.append(None)
            except Exception as e:
                out.append(e)
        return out

    assert produce() == [None]
    alter(**{"min.insync.replicas": "4"})
    wait_for(lambda: produce()[0] is not None, 20, "acks=all to be refused")
    assert type(produce()[0]).__name__ == "NotEnoughReplicasError"
    alter(**{"min.insync.replicas": "2", "segment.bytes": "1000", "retention.ms": "3600000"})
    wait_for(lambda: produce() == [None], 20, "acks=all to be taken again")
    assert produce(8, size=300) == [None] * 8
    leader = a.list_topics(timeout=10).topics["live-t"].partitions[0].leader
    logdir = cluster.cfg.broker(leader).log_dir / "live-t-0"
    assert len(list(logdir.glob("*.log"))) >= 4     # rolled at 1,000 bytes
    c = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "live-g"})
    try:
        assert c.get_watermark_offsets(TopicPartition("live-t", 0), timeout=10)[0] == 0
        alter(**{"min.insync.replicas": "2", "segment.bytes": "1000", "retention.ms": "1"})
        wait_for(lambda: c.get_watermark_offsets(TopicPartition("live-t", 0), timeout=10)[0] > 0, 30,
                 "retention to move the log start offset")
    finally:
        c.close()
        p.close(5)
    deleted = [e for e in events(cluster, "log_segments_deleted") if e["topic"] == "live-t"]
    assert deleted and all("retention_ms" in e["reasons"] for e in deleted)


def test_log_append_time_stamps_produced_batches_with_the_leaders_clock(cluster: Cluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    create(cluster, "lat-t", partitions=1, rf=2, **{"message.timestamp.type": "LogAppendTime"})
    p = KafkaProducer(bootstrap_servers=bootstrap(cluster), acks="all")
    try:
        md = p.send("lat-t", b"v", timestamp_ms=1000).get(timeout=30)
    finally:
        p.close(5)
    assert md.timestamp > 1_700_000_000_000    # the produce answer's log_append_time_ms, not the producer's 1000
    c = KafkaConsumer(bootstrap_servers=bootstrap(cluster), auto_offset_reset="earliest", consumer_timeout_ms=20000)
    try:
        c.assign([TopicPartition("lat-t", 0)])
        (rec,) = [next(iter(c))]
    finally:
        c.close()
    assert (rec.timestamp, rec.timestamp_type) == (md.timestamp, 1)


# ---------------------------------------------------------------------- Kafka 2.8.2's own tools

def kafka_tool(c: Cluster, main: str, *args: str) -> subprocess.CompletedProcess:
    """One of Kafka 2.8.2's command-line tools (its jars: reference/jars.py) against the cluster."""
    from reference.jars import classpath, ensure_jars
    ensure_jars()
    host, port = c.cfg.broker(1).kafka_advertised
    return subprocess.run(["java", "-Xmx256m", "-cp", classpath(), main, "--bootstrap-server", f"{host}:{port}", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.kafka
def test_kafka_configs_alters_and_describes_topic_and_broker_configs(cluster: Cluster) -> None:
    create(cluster, "tool-cfg", partitions=1, rf=2)
    r = kafka_tool(cluster, "kafka.admin.ConfigCommand", "--entity-type", "topics", "--entity-name", "tool-cfg",
                   "--alter", "--add-config", "retention.ms=1000000,cleanup.policy=[compact,delete]")
    assert r.returncode == 0 and "Completed updating config for topic tool-cfg." in r.stdout, r.stdout + r.stderr
    assert json.loads(cluster.zk().get("/config/topics/tool-cfg")[0])["config"] == {
        "retention.ms": "1000000", "cleanup.policy": "compact,delete"}
    r = kafka_tool(cluster, "kafka.admin.ConfigCommand", "--entity-type", "topics", "--entity-name", "tool-cfg",
                   "--alter", "--delete-config", "retention.ms")
    assert r.returncode == 0, r.stdout + r.stderr
    r = kafka_tool(cluster, "kafka.admin.ConfigCommand", "--entity-type", "topics", "--entity-name", "tool-cfg",
                   "--describe")
    assert r.returncode == 0 and "cleanup.policy=compact,delete" in r.stdout and "retention.ms" not in r.stdout, \
        r.stdout + r.stderr
    r = kafka_tool(cluster, "kafka.admin.ConfigCommand", "--entity-type", "topics", "--entity-name", "tool-cfg",
                   "--alter", "--add-config", "retention.mss=1")
    assert r.returncode != 0 and "retention.mss" in r.stdout + r.stderr
    # the cluster-wide broker defaults, and one broker's
    r = kafka_tool(cluster, "kafka.admin.ConfigCommand", "--entity-type", "brokers", "--entity-default", "--alter",
                   "--add-config", "log.cleaner.delete.retention.ms=3600000")
    assert r.returncode == 0, r.stdout + r.stderr
    r = kafka_tool(cluster, "kafka.admin.ConfigCommand", "--entity-type", "brokers", "--entity-name", "2",
                   "--describe", "--all")
    assert r.returncode == 0 and "log.cleaner.delete.retention.ms=3600000 sensitive=false synonyms={" \
        "DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.delete.retention.ms=3600000" in r.stdout, r.stdout + r.stderr
    r = kafka_tool(cluster, "kafka.admin.ConfigCommand", "--entity-type", "brokers", "--entity-default", "--alter",
                   "--delete-config", "log.cleaner.delete.retention.ms")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.kafka
def test_kafka_topics_adds_partitions_and_creates_with_a_replica_assignment(cluster: Cluster) -> None:
    r = kafka_tool(cluster, "kafka.admin.TopicCommand", "--create", "--topic", "tool-t",
                   "--replica-assignment", "1:2,2:3")
    assert r.returncode == 0 and "Created topic tool-t." in r.stdout, r.stdout + r.stderr
    r = kafka_tool(cluster, "kafka.admin.TopicCommand", "--alter", "--topic", "tool-t", "--partitions", "4")
    assert r.returncode == 0, r.stdout + r.stderr
    r = kafka_tool(cluster, "kafka.admin.TopicCommand", "--describe", "--topic", "tool-t")
    assert r.returncode == 0 and "PartitionCount: 4" in r.stdout, r.stdout + r.stderr
    lines = [ln for ln in r.stdout.splitlines() if "Partition: " in ln]
    assert len(lines) == 4 and "Replicas: 1,2" in lines[0] and "Replicas: 2,3" in lines[1], r.stdout
    assert all("Leader: none" not in ln for ln in lines), r.stdout
    r = kafka_tool(cluster, "kafka.admin.TopicCommand", "--alter", "--topic", "tool-t", "--partitions", "2")
    assert r.returncode != 0 and "Topic currently has 4 partitions, which is higher than the requested 2." in r.stdout, \
        r.stdout + r.stderr
