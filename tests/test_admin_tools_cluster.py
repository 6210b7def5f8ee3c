"""Kafka 2.8.2's own tools, and the Python clients' admin calls, against a real 3-broker kafkasim cluster:
kafka-delete-records (DeleteRecords), kafka-leader-election preferred and unclean (ElectLeaders),
kafka-reassign-partitions --generate/--execute/--verify/--list/--cancel (AlterPartitionReassignments,
ListPartitionReassignments) and the ZooKeeper-era /admin/reassign_partitions, kafka-consumer-groups
--delete-offsets (OffsetDelete).  One cluster for the module (its brokers are OS processes), one JVM for the
tools that share one."""
from __future__ import annotations

import json
import re
import signal
import uuid
from pathlib import Path
from typing import Iterator

import grpc
import pytest

from launcher.cluster import Cluster
from node.config import load_config
from node.events import read_events
from proto import kafkasim_pb2 as pb
from proto import kafkasim_pb2_grpc as pbg
from reference.javaclient import ToolRunner
from tests.conftest import write_cluster_yaml
from tests.test_kafka_clients import bootstrap, controller_named
from util.waiting import wait_for
from zk import codecs, paths

pytestmark = [pytest.mark.kafka, pytest.mark.cluster, pytest.mark.timeout(420)]


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    d = tmp_path_factory.mktemp("admin-tools")
    path = write_cluster_yaml(d / "cluster.yaml", f"{zookeeper.connect_string}/t-{uuid.uuid4().hex[:12]}", 3, **{
        "group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 4,
        "auto.leader.rebalance.enable": False,          # leaders stay where the tests put them
        "log.retention.check.interval.ms": 300,
        "zookeeper.session.timeout.ms": 15000})        # a broker paused a few seconds stays registered
    c = Cluster(load_config(path), path)
    try:
        c.up(timeout=90)
        wait_for(lambda: all(controller_named(h, p) for h, p in (b.kafka_advertised for b in c.cfg.brokers)), 30.0,
                 "every broker's Kafka listener to name the controller and all three brokers")
        yield c
    finally:
        c.down()


@pytest.fixture(scope="module")
def tools() -> Iterator[ToolRunner]:
    runner = ToolRunner()
    try:
        yield runner
    finally:
        runner.close()


def create(c: Cluster, topic: str, assignment: dict[int, list[int]], **configs: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap(c)})
    admin.create_topics([NewTopic(topic, num_partitions=len(assignment),
                                  replica_assignment=[assignment[p] for p in sorted(assignment)],
                                  config=configs)], operation_timeout=20)[topic].result(timeout=30)


def produce(c: Cluster, topic: str, partition: int, n: int, prefix: str = "v", batches: bool = False) -> None:
    """``n`` records, acks=all (``batches``: each in a batch of its own)."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap(c), "acks": "all", "enable.idempotence": True})
    acked: list = []
    for i in range(n):
        p.produce(topic, value=f"{prefix}{i}".encode(), partition=partition,
                  on_delivery=lambda err, msg: acked.append(err))
        if batches:
            p.flush(30)
    p.flush(30)
    assert acked == [None] * n, acked


def read_all(c: Cluster, topic: str, partition: int, end: int) -> list[tuple[int, bytes]]:
    """Every record of one partition, from its earliest offset to its high watermark (librdkafka), once the high
    watermark is ``end`` (a new leader's HW may lag the acknowledged writes until its followers fetch, as
    Kafka's)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    cons = Consumer({"bootstrap.servers": bootstrap(c), "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                     "enable.auto.commit": False})
    try:
        low, high = wait_for(lambda: (lambda w: w if w[1] == end else None)(
            cons.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)), 30.0,
            f"{topic}-{partition}'s high watermark to be {end}")
        cons.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        out: list[tuple[int, bytes]] = []
        while len(out) < high - low:
            msg = cons.poll(10)
            assert msg is not None, f"{topic}-{partition}: {len(out)} of {high - low} records read"
            if msg.error() is None:
                out.append((msg.offset(), msg.value()))
        return out
    finally:
        cons.close()


def state(c: Cluster, topic: str, partition: int) -> dict:
    """The partition as ZooKeeper has it: replicas, adding, removing, leader, ISR."""
    zk = c.zk()
    a = codecs.decode_topic(topic, zk.get(paths.topic(topic))[0])
    st = codecs.decode_partition_state("s", zk.get(paths.partition_state(topic, partition))[0])
    return {"replicas": list(a.partitions[partition]), "adding": list(a.adding.get(partition, ())),
            "removing": list(a.removing.get(partition, ())), "leader": st.leader, "isr": sorted(st.isr)}


def hosted(c: Cluster) -> dict[int, dict[tuple[str, int], pb.ReplicaStatus]]:
    """Each running broker's replicas, as its DescribeBroker answers."""
    out = {}
    for b in c.cfg.brokers:
        try:
            with grpc.insecure_channel(f"{b.host}:{b.port}") as ch:
                r = pbg.BrokerStub(ch).DescribeBroker(pb.DescribeBrokerRequest(), timeout=5)
        except grpc.RpcError:
            continue
        out[b.id] = {(s.topic, s.partition): s for s in r.replicas}
    return out


def events(c: Cluster, kind: str) -> list[dict]:
    out = []
    for b in c.cfg.brokers:
        out += [e for e in read_events(Path(c.cfg.run_dir) / "events" / f"broker-{b.id}.jsonl") if e["type"] == kind]
    return out


# ---------------------------------------------------------------------- DeleteRecords

def test_delete_records_command_moves_the_log_start_on_every_replica(cluster: Cluster, tools: ToolRunner,
                                                                      tmp_path: Path) -> None:
    """kafka-delete-records: the leader's log start offset moves to the offset asked for, the tool gets the low
    watermark once every replica's log start reached it; past the high watermark is OFFSET_OUT_OF_RANGE; a
    compacted topic refuses (POLICY_VIOLATION); consumers start there; retention deletes the segments below."""
    create(cluster, "dr-t", {0: [1, 2, 3], 1: [2, 3, 1]}, **{"segment.bytes": "300"})
    create(cluster, "dr-c", {0: [1, 2, 3]}, **{"cleanup.policy": "compact"})
    produce(cluster, "dr-t", 0, 20, batches=True)   # segments of a few batches each
    produce(cluster, "dr-t", 1, 3)
    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "dr-t", "partition": 0, "offset": 12}, {"topic": "dr-t", "partition": 1, "offset": 50},
        {"topic": "dr-c", "partition": 0, "offset": 0}, {"topic": "dr-none", "partition": 0, "offset": 0}]}))
    r = tools.run("kafka-delete-records", "--bootstrap-server", bootstrap(cluster), "--offset-json-file", str(spec))
    assert r.rc == 0 and r.out.startswith("Executing records delete operation\nRecords delete operation completed:"), r
    lines = dict(line.split("\t", 1) for line in r.out.splitlines()[2:])
    assert lines["partition: dr-t-0"] == "low_watermark: 12", r
    assert lines["partition: dr-t-1"].startswith("error: org.apache.kafka.common.errors.OffsetOutOfRangeException"), r
    assert lines["partition: dr-c-0"].startswith("error: org.apache.kafka.common.errors.PolicyViolationException"), r
    assert "UnknownTopicOrPartitionException" in lines["partition: dr-none-0"], r
    # every replica's log start offset is 12 (the tool's answer waited for the low watermark)
    starts = {b: h[("dr-t", 0)].log_start_offset for b, h in hosted(cluster).items()}
    assert starts == {1: 12, 2: 12, 3: 12}, starts
    assert [v for _, v in read_all(cluster, "dr-t", 0, 20)] == [f"v{i}".encode() for i in range(12, 20)]
    (ev,) = [e for e in events(cluster, "records_deleted") if e["topic"] == "dr-t"]
    assert (ev["partition"], ev["log_start_offset"], ev["broker"]) == (0, 12, state(cluster, "dr-t", 0)["leader"])
    # the retention pass then deletes the segments wholly below it, on the leader and the followers
    wait_for(lambda: {e["broker"] for e in events(cluster, "log_segments_deleted")
                      if e["topic"] == "dr-t" and "log_start_offset" in e["reasons"]} == {1, 2, 3}, 30.0,
             "every replica's retention to delete the segments below the log start offset")
    # confluent-kafka's admin call: up to the high watermark (OFFSET_END)
    from confluent_kafka import OFFSET_END, TopicPartition
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    (fut,) = admin.delete_records([TopicPartition("dr-t", 1, OFFSET_END)]).values()
    assert fut.result(timeout=30).low_watermark == 3
    assert read_all(cluster, "dr-t", 1, 3) == []


# ---------------------------------------------------------------------- ElectLeaders

def test_leader_election_command_preferred(cluster: Cluster, tools: ToolRunner) -> None:
    """kafka-leader-election --election-type preferred: the preferred replica back as leader once it is in the
    ISR; a second run finds nothing to do (ELECTION_NOT_NEEDED); --all-topic-partitions too."""
    create(cluster, "le-p", {0: [1, 2, 3]})
    produce(cluster, "le-p", 0, 5)
    cluster.stop_broker(1)
    wait_for(lambda: state(cluster, "le-p", 0)["leader"] == 2, 30.0, "broker 2 to lead le-p-0")
    cluster.start_broker(1)
    wait_for(lambda: state(cluster, "le-p", 0)["isr"] == [1, 2, 3], 60.0, "broker 1 back in the ISR")
    bs = bootstrap(cluster)
    r = tools.run("kafka-leader-election", "--bootstrap-server", bs, "--election-type", "preferred",
                  "--topic", "le-p", "--partition", "0")
    assert r.rc == 0 and "Successfully completed leader election (PREFERRED) for partitions le-p-0" in r.out, r
    assert state(cluster, "le-p", 0)["leader"] == 1
    r = tools.run("kafka-leader-election", "--bootstrap-server", bs, "--election-type", "preferred",
                  "--topic", "le-p", "--partition", "0")
    # (Kafka 2.8.2's tool prints the partitions it elected on that line, none: its own slip)
    assert r.rc == 0 and r.out == "Valid replica already elected for partitions \n", r
    r = tools.run("kafka-leader-election", "--bootstrap-server", bs, "--election-type", "preferred",
                  "--all-topic-partitions")
    assert r.rc == 0 and "le-p-0" not in r.out, r   # every partition: those needing none are not listed
    from kafka.admin import KafkaAdminClient   # kafka-python's admin client finds the controller too
    kp = KafkaAdminClient(bootstrap_servers=bs, client_id="kp-admin")
    try:
        resp = kp.elect_leaders(0, {"le-p": [0]}, raise_errors=False)
    finally:
        kp.close()
    assert [(t.topic, p.partition_id, p.error_code) for t in resp.replica_election_results
            for p in t.partition_result] == [("le-p", 0, 84)]   # ELECTION_NOT_NEEDED
    assert [v for _, v in read_all(cluster, "le-p", 0, 5)] == [f"v{i}".encode() for i in range(5)]


def test_leader_election_command_unclean(cluster: Cluster, tools: ToolRunner) -> None:
    """kafka-leader-election --election-type unclean: a partition whose ISR's only replica is gone (and with it
    the leader) stays offline with unclean elections off; the unclean election on request elects the first live
    replica.  A partition with a live leader needs none."""
    create(cluster, "le-u", {0: [2, 3]})
    produce(cluster, "le-u", 0, 3)
    cluster.stop_broker(3)
    wait_for(lambda: state(cluster, "le-u", 0)["isr"] == [2], 30.0, "3 out of le-u-0's ISR")
    cluster.stop_broker(2)   # its controlled shutdown cannot move le-u-0 (no other ISR member); then it is gone
    try:
        unclean_election(cluster, tools)
    finally:
        cluster.start_broker(2)
    wait_for(lambda: state(cluster, "le-u", 0)["isr"] == [2, 3], 60.0, "broker 2 back in le-u-0's ISR")


def brokers_known(c: Cluster) -> set[int]:
    """The live brokers a listener's Metadata names (each broker learns them from the controller, once it has
    processed a broker's registration)."""
    from confluent_kafka.admin import AdminClient
    return set(AdminClient({"bootstrap.servers": bootstrap(c)}).list_topics(timeout=5).brokers)


def unclean_election(cluster: Cluster, tools: ToolRunner) -> None:
    wait_for(lambda: state(cluster, "le-u", 0)["leader"] == -1, 30.0, "le-u-0 offline")
    cluster.start_broker(3)
    wait_for(lambda: brokers_known(cluster) == {1, 3}, 60.0, "the controller to know broker 3 is back")
    assert state(cluster, "le-u", 0)["leader"] == -1   # unclean.leader.election.enable is false
    bs = bootstrap(cluster)
    r = tools.run("kafka-leader-election", "--bootstrap-server", bs, "--election-type", "unclean",
                  "--topic", "le-u", "--partition", "0")
    assert r.rc == 0 and "Successfully completed leader election (UNCLEAN) for partitions le-u-0" in r.out, r
    assert state(cluster, "le-u", 0)["leader"] == 3 and state(cluster, "le-u", 0)["isr"] == [3]
    assert [e for e in events(cluster, "unclean_leader_election") if e["topic"] == "le-u"]
    r = tools.run("kafka-leader-election", "--bootstrap-server", bs, "--election-type", "unclean",
                  "--topic", "le-u", "--partition", "0")
    assert r.rc == 0 and r.out == "Valid replica already elected for partitions \n", r


# ---------------------------------------------------------------------- reassignment

def reassign(tools: ToolRunner, c: Cluster, *args: str):
    return tools.run("kafka-reassign-partitions", "--bootstrap-server", bootstrap(c), *args)


def test_reassign_partitions_command_generate_execute_verify(cluster: Cluster, tools: ToolRunner,
                                                            tmp_path: Path) -> None:
    """kafka-reassign-partitions with --bootstrap-server: --generate proposes, --execute starts the reassignment
    (AlterPartitionReassignments), --verify reports it complete once the controller has taken the new replicas
    into the ISR, moved the leader and removed the old replicas; every record is still there."""
    create(cluster, "ra-t", {0: [1, 2], 1: [2, 3]})
    produce(cluster, "ra-t", 0, 30)
    produce(cluster, "ra-t", 1, 10)
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "ra-t"}]}))
    r = reassign(tools, cluster, "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "1,3")
    assert r.rc == 0 and "Current partition replica assignment" in r.out, r
    proposed = json.loads(r.out.split("Proposed partition reassignment configuration\n", 1)[1].strip())
    assert {(p["topic"], p["partition"]) for p in proposed["partitions"]} == {("ra-t", 0), ("ra-t", 1)}
    assert all(set(p["replicas"]) <= {1, 3} and len(p["replicas"]) == 2 for p in proposed["partitions"]), proposed
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "ra-t", "partition": 0, "replicas": [3, 1]}, {"topic": "ra-t", "partition": 1, "replicas": [3, 1]}]}))
    r = reassign(tools, cluster, "--execute", "--reassignment-json-file", str(plan))
    assert r.rc == 0 and "Successfully started partition reassignments for ra-t-0,ra-t-1" in r.out, r

    def verified() -> bool:
        r = reassign(tools, cluster, "--verify", "--reassignment-json-file", str(plan))
        assert r.rc == 0, r
        return all(f"Reassignment of partition ra-t-{p} is complete." in r.out for p in (0, 1))
    wait_for(verified, 90.0, "--verify to report both reassignments complete")
    for p in (0, 1):
        s = state(cluster, "ra-t", p)
        assert (s["replicas"], s["adding"], s["removing"], s["isr"]) == ([3, 1], [], [], [1, 3]), s
    assert state(cluster, "ra-t", 1)["leader"] == 3   # its leader (2) left: the first live target replica in the ISR
    assert [v for _, v in read_all(cluster, "ra-t", 0, 30)] == [f"v{i}".encode() for i in range(30)]
    assert [v for _, v in read_all(cluster, "ra-t", 1, 10)] == [f"v{i}".encode() for i in range(10)]
    wait_for(lambda: ("ra-t", 0) not in hosted(cluster)[2] and ("ra-t", 1) not in hosted(cluster)[2], 30.0,
             "broker 2 to stop its replicas")
    gone = cluster.cfg.broker(2).log_dir
    assert not list(gone.glob("ra-t-*")), list(gone.iterdir())   # StopReplica with deletion: the logs are gone
    kinds = [(e["type"], e["partition"]) for e in events(cluster, "reassignment_started")
             + events(cluster, "reassignment_completed") if e["topic"] == "ra-t"]
    assert sorted(kinds) == [("reassignment_completed", 0), ("reassignment_completed", 1),
                             ("reassignment_started", 0), ("reassignment_started", 1)]
    r = reassign(tools, cluster, "--list")
    assert r.rc == 0 and "No partition reassignments found." in r.out, r


def test_a_reassignment_in_progress_is_listed_and_cancelled(cluster: Cluster, tools: ToolRunner,
                                                           tmp_path: Path) -> None:
    """A reassignment that cannot finish (its new replica's broker is paused), started by kafka-python's admin
    client: ListPartitionReassignments shows RS, AR and RR (kafka-reassign-partitions --list, kafka-python);
    --cancel goes back to the original replicas."""
    from kafka import TopicPartition as KTP
    from kafka.admin import KafkaAdminClient
    ctl = cluster.zk().read_controller()
    y, z = sorted(b.id for b in cluster.cfg.brokers if b.id != ctl)[::-1]
    create(cluster, "rc-t", {0: [ctl, z]})
    produce(cluster, "rc-t", 0, 5)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "rc-t", "partition": 0, "replicas": [ctl, y]}]}))
    bs = ",".join("%s:%d" % cluster.cfg.broker(b).kafka_advertised for b in (ctl, z))   # not the paused one
    kp = KafkaAdminClient(bootstrap_servers=bs, client_id="kp-admin")
    try:
        assert kp.list_partition_reassignments() == {}   # (it knows the controller before the pause)
        cluster.signal_broker(y, signal.SIGSTOP)
        kp.alter_partition_reassignments({KTP("rc-t", 0): [ctl, y]})
        listed = kp.list_partition_reassignments()
    except BaseException:
        cluster.signal_broker(y, signal.SIGCONT)
        raise
    finally:
        kp.close()
    try:
        assert listed == {KTP("rc-t", 0): {"replicas": [ctl, y, z], "adding_replicas": [y],
                                           "removing_replicas": [z]}}, listed
        s = state(cluster, "rc-t", 0)
        assert (s["replicas"], s["adding"], s["removing"]) == ([ctl, y, z], [y], [z]), s
        r = tools.run("kafka-reassign-partitions", "--bootstrap-server", bs, "--list")
        assert r.rc == 0 and f"rc-t-0: replicas: {ctl},{y},{z}. adding: {y}. removing: {z}." in r.out, r
        r = tools.run("kafka-reassign-partitions", "--bootstrap-server", bs, "--cancel", "--preserve-throttles",
                      "--reassignment-json-file", str(plan))
        assert r.rc == 0 and "Successfully cancelled partition reassignment for: rc-t-0" in r.out, r
        s = state(cluster, "rc-t", 0)
        assert (s["replicas"], s["adding"], s["removing"], s["isr"]) == ([ctl, z], [], [], sorted([ctl, z])), s
    finally:
        cluster.signal_broker(y, signal.SIGCONT)
    assert [v for _, v in read_all(cluster, "rc-t", 0, 5)] == [f"v{i}".encode() for i in range(5)]


def test_the_zookeeper_reassignment_znode_is_still_watched(cluster: Cluster) -> None:
    """The ZooKeeper-era tools write /admin/reassign_partitions; Kafka 2.8's controller still watches it, runs
    the same steps, and deletes the znode once every partition in it is done."""
    create(cluster, "rz-t", {0: [1, 2]})
    produce(cluster, "rz-t", 0, 4)
    cluster.zk().request_reassignment({("rz-t", 0): (2, 3)})
    wait_for(lambda: cluster.zk().exists(paths.REASSIGN_PARTITIONS) is None, 60.0, "the znode to be deleted")
    s = state(cluster, "rz-t", 0)
    assert (s["replicas"], s["adding"], s["removing"], s["isr"]) == ([2, 3], [], [], [2, 3]), s
    assert [v for _, v in read_all(cluster, "rz-t", 0, 4)] == [f"v{i}".encode() for i in range(4)]


# ---------------------------------------------------------------------- OffsetDelete

def test_consumer_groups_delete_offsets(cluster: Cluster, tools: ToolRunner) -> None:
    """kafka-consumer-groups --delete-offsets: a Stable group keeps the offsets of the topics it subscribes to
    (GROUP_SUBSCRIBED_TO_TOPIC) and loses the others'; once Empty, every offset asked for goes."""
    from confluent_kafka import Consumer, TopicPartition
    create(cluster, "od-sub", {0: [1, 2, 3], 1: [2, 3, 1]})
    create(cluster, "od-other", {0: [3, 1, 2]})
    produce(cluster, "od-sub", 0, 3)
    bs = bootstrap(cluster)
    cons = Consumer({"bootstrap.servers": bs, "group.id": "od-g", "enable.auto.commit": False,
                     "auto.offset.reset": "earliest"})
    try:
        cons.subscribe(["od-sub"])
        wait_for(lambda: cons.poll(0.5) is not None and cons.assignment(), 60.0, "the member to be assigned")
        cons.commit(offsets=[TopicPartition("od-sub", 0, 2), TopicPartition("od-sub", 1, 0),
                             TopicPartition("od-other", 0, 7)], asynchronous=False)
        r = tools.run("kafka-consumer-groups", "--bootstrap-server", bs, "--delete-offsets", "--group", "od-g",
                      "--topic", "od-other")
        assert r.rc == 0 and "Request succeed for deleting offsets with topic od-other group od-g" in r.out, r
        assert re.search(r"od-other\s+0\s+Successful", r.out), r
        r = tools.run("kafka-consumer-groups", "--bootstrap-server", bs, "--delete-offsets", "--group", "od-g",
                      "--topic", "od-sub:0")
        assert "Encounter some partition level error" in r.out + r.err, r
        assert re.search(r"od-sub\s+0\s+Error: .*subscribed", r.out), r
        got = {(tp.topic, tp.partition): tp.offset for tp in cons.committed(
            [TopicPartition("od-sub", 0), TopicPartition("od-other", 0)], timeout=10)}
        assert got == {("od-sub", 0): 2, ("od-other", 0): -1001}, got   # -1001: no committed offset
    finally:
        cons.close()
    r = tools.run("kafka-consumer-groups", "--bootstrap-server", bs, "--delete-offsets", "--group", "od-g",
                  "--topic", "od-sub")
    assert r.rc == 0 and "Request succeed for deleting offsets with topic od-sub group od-g" in r.out, r
    r = tools.run("kafka-consumer-groups", "--bootstrap-server", bs, "--delete-offsets", "--group", "od-g",
                  "--topic", "od-sub")
    assert "'od-g' does not exist." in r.out + r.err, r   # no offsets left: the Empty group died
    assert [e["group"] for e in events(cluster, "offsets_deleted")].count("od-g") == 2
    # kafka-python's delete_group_offsets on an Empty group
    from kafka import TopicPartition as KTP
    from kafka.admin import KafkaAdminClient
    cons = Consumer({"bootstrap.servers": bs, "group.id": "od-k"})
    try:
        cons.commit(offsets=[TopicPartition("od-other", 0, 1)], asynchronous=False)
    finally:
        cons.close()
    kp = KafkaAdminClient(bootstrap_servers=bs, client_id="kp-admin")
    try:
        got = kp.delete_group_offsets("od-k", [KTP("od-other", 0), KTP("od-none", 0)])
    finally:
        kp.close()
    assert {tp: e.__name__ for tp, e in got.items()} == {KTP("od-other", 0): "NoError",
                                                          KTP("od-none", 0): "UnknownTopicOrPartitionError"}, got
