"""Kafka 2.8.2 itself (reference/): three real brokers on the tests' ZooKeeper, under their own chroot.

The module's brokers start once (``kafka``, module-scoped; the jars are fetched with Maven on first use):
they register with Kafka's version-5 JSON, elect a controller, map the class-data archive, take every key the
cluster.yaml was translated to, serve a real client, and elect a new controller after the old one is SIGKILLed.
The other tests start what they need themselves: `kafkasim reference` on its own ZooKeeper, a broker that cannot
start, one whose first start ZooKeeper fails, the broker that writes the class-data archive, and Maven pointed at
a repository it cannot reach.
"""
from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from helpers import processes_mentioning, write_embedded_cluster_yaml

from node.config import load_config
from util.waiting import wait_for
from reference.jars import JarsUnavailable, classpath, ensure_jars
from reference.jvm import MAIN_CLASS, write_archive
from reference.kafka import ReferenceCluster
from tests.conftest import write_cluster_yaml
from util.jvm_archive import QUIET
from zk import paths
from zk.server import find_java, free_port

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def kafka(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReferenceCluster]:
    """Three Kafka 2.8.2 brokers (ids 1..3), 10 offsets partitions, no initial rebalance delay."""
    d = tmp_path_factory.mktemp("reference")
    path = write_cluster_yaml(d / "cluster.yaml", f"{zookeeper.connect_string}/t-{uuid.uuid4().hex[:12]}", 3,
                              **{"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 10,
                                 "zookeeper.session.timeout.ms": 6000})
    ref = ReferenceCluster(load_config(path), config_path=path)
    try:
        ref.up(timeout=180)
        yield ref
    finally:
        ref.down()


def test_brokers_register_with_kafkas_json_and_elect_a_controller(kafka: ReferenceCluster) -> None:
    regs = kafka.registrations()
    assert sorted(regs) == [1, 2, 3]
    for b, reg in regs.items():
        host, port = kafka.listener(b)
        assert reg["version"] == 5
        assert reg["endpoints"] == [f"PLAINTEXT://{host}:{port}"]
        assert (reg["host"], reg["port"]) == (host, port)
        assert reg["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
        assert "features" in reg
    data, _ = kafka.zk().get(paths.CONTROLLER)
    controller = json.loads(data)
    assert controller["version"] == 1 and controller["brokerid"] in regs
    assert kafka.zk_chroot.endswith("/kafka-reference")
    # eager creation (the cluster.yaml's default): __consumer_offsets was created with a leader everywhere
    snap = kafka.zk().read_snapshot()
    offsets = snap.topics[paths.OFFSETS_TOPIC]
    assert sorted(offsets.partitions) == list(range(10))
    assert all(len(r) == 3 for r in offsets.partitions.values())
    assert all(snap.states[(paths.OFFSETS_TOPIC, p)][0].leader in regs for p in offsets.partitions)


def test_every_broker_maps_the_class_data_archive(kafka: ReferenceCluster) -> None:
    """The brokers' JVMs map the archive reference/jvm.py keeps (written by an earlier start, or by this one's)."""
    for b in (1, 2, 3):
        cmdline = Path(f"/proc/{kafka.pids[b]}/cmdline").read_bytes().split(b"\0")
        given = [a.decode().split("=", 1)[1] for a in cmdline if a.startswith(b"-XX:SharedArchiveFile=")]
        assert len(given) == 1 and Path(given[0]).is_file(), cmdline
        assert given[0] in Path(f"/proc/{kafka.pids[b]}/maps").read_text(), f"broker {b} did not map {given[0]}"


@pytest.mark.cluster
def test_the_archive_written_is_one_this_jdk_maps_for_kafka(tmp_path: Path) -> None:
    """write_archive's broker dumps its classes at its exit, into an archive a JVM must map (-Xshare:on fails
    otherwise) on the brokers' class path."""
    archive = tmp_path / "kafka.jsa"
    write_archive([f"-XX:ArchiveClassesAtExit={archive}", *QUIET])
    assert archive.stat().st_size > 1_000_000
    out = subprocess.run([find_java(), "-Xshare:on", f"-XX:SharedArchiveFile={archive}", "-cp", classpath(),
                          MAIN_CLASS, "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "2.8.2" in out.stdout, out.stdout + out.stderr


def test_every_translated_key_is_a_kafka_key_with_our_value(kafka: ReferenceCluster) -> None:
    """Kafka logs each broker key it knows with the value it took: every key we wrote is there, unchanged."""
    for b in (1, 2, 3):
        logged = kafka.logged_config(b)
        written = kafka.properties(b)
        assert logged, f"broker {b} logged no KafkaConfig"
        assert {k: logged.get(k) for k in written} == written
    assert kafka.logged_config(1)["replica.lag.time.max.ms"] == "10000"


def test_a_real_client_produces_and_consumes(kafka: ReferenceCluster) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    admin.create_topics([NewTopic("ref-t", 3, 3)], operation_timeout=20)["ref-t"].result(timeout=30)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "acks": "all", "enable.idempotence": True})
    sent = [f"record-{i}".encode() for i in range(12)]
    for i, value in enumerate(sent):
        producer.produce("ref-t", key=str(i).encode(), value=value)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": "ref-g",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got: list[bytes] = []
    try:
        consumer.subscribe(["ref-t"])

        def all_read() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
            return len(got) >= len(sent)

        wait_for(all_read, 60, "the 12 records to be consumed")
        consumer.commit(asynchronous=False)
        committed = consumer.committed([tp for tp in consumer.assignment()], timeout=10)
    finally:
        consumer.close()
    assert sorted(got) == sorted(sent)
    assert sum(tp.offset for tp in committed) == len(sent)


def test_sigkill_of_the_controller_elects_another(kafka: ReferenceCluster) -> None:
    old = kafka.controller()
    _, epoch_before = kafka.zk().read_controller_and_epoch()
    kafka.kill(old)
    # its ZooKeeper session expires (6 s), /controller goes, a survivor takes it in a new epoch
    new = wait_for(lambda: (c := kafka.controller()) not in (None, old) and c, 30, "a new controller")
    _, epoch_after = kafka.zk().read_controller_and_epoch()
    assert new in {1, 2, 3} - {old}
    assert epoch_after > epoch_before
    assert old not in kafka.registrations()
    # it comes back on its port, with its data (its meta.properties names the same cluster id)
    port = kafka.listener(old)
    kafka.start(old)   # and waits until its start-up is over
    reg = kafka.registrations()[old]
    assert (reg["host"], reg["port"]) == port


def test_pause_resume_and_terminate_one_broker(kafka: ReferenceCluster) -> None:
    b = next(i for i in (1, 2, 3) if i != kafka.controller())
    kafka.pause(b)
    assert kafka.state(b) == "paused"
    kafka.resume(b)
    assert kafka.state(b) == "running"
    kafka.terminate(b)   # Kafka's controlled shutdown, then it closes its ZooKeeper session before it exits
    assert kafka.state(b) == "dead"
    assert b not in kafka.registrations()
    kafka.start(b)
    assert b in kafka.registrations()


@pytest.mark.cluster
def test_a_broker_that_exits_at_start_up_is_reported_with_its_log(zookeeper, tmp_path: Path) -> None:
    path = write_cluster_yaml(tmp_path / "cluster.yaml", f"{zookeeper.connect_string}/t-{uuid.uuid4().hex[:12]}", 1)
    ref = ReferenceCluster(load_config(path), extra={"num.network.threads": 0})   # Kafka: "at least 1"
    try:
        with pytest.raises(RuntimeError, match="reference broker 1 .* exited") as e:
            ref.up(timeout=60)
        assert "num.network.threads" in str(e.value)
    finally:
        ref.down()


class _FirstStartWithoutZooKeeper(ReferenceCluster):
    """Its broker's first start dials a closed port for ZooKeeper; every later start, the real one."""
    starts = 0

    def properties(self, broker_id: int) -> dict[str, str]:
        props = super().properties(broker_id)
        self.starts += 1
        if self.starts == 1:
            props["zookeeper.connect"] = f"127.0.0.1:{free_port()}{self.chroot}"
        return props


@pytest.mark.cluster
def test_a_broker_whose_zookeeper_failed_its_start_up_is_started_again(zookeeper, tmp_path: Path) -> None:
    """Kafka 2.8.2 exits when ZooKeeper does not answer its start-up in time (here it cannot connect within
    zookeeper.connection.timeout.ms); `up` starts it again, says so, and the broker comes up."""
    path = write_cluster_yaml(tmp_path / "cluster.yaml", f"{zookeeper.connect_string}/t-{uuid.uuid4().hex[:12]}", 1,
                              **{"zookeeper.connection.timeout.ms": 2000, "offsets.topic.replication.factor": 1})
    ref = _FirstStartWithoutZooKeeper(load_config(path))
    try:
        status = ref.up(timeout=120)
        assert ref.starts == 2
        (note,) = ref.startup_restarts
        assert note.startswith("broker 1's start-up failed (kafka.zookeeper.ZooKeeperClientTimeoutException")
        assert note.endswith("started again (1 of 2)")
        assert status["controller"] == 1 and status["brokers"][0]["registered"]
        log = (ref.broker_dir(1) / "logs" / "server.log").read_text()
        assert log.count("Fatal error during KafkaServer startup") == 1 and " started (kafka.server.KafkaServer)" in log
    finally:
        ref.down()


@pytest.mark.cluster
def test_an_unreachable_repository_is_named_plainly(tmp_path: Path) -> None:
    """Maven pointed at a closed loopback port (as a machine without Maven Central is): the error says so."""
    settings = tmp_path / "settings.xml"
    settings.write_text("<settings><mirrors><mirror><id>unreachable</id><mirrorOf>*</mirrorOf>"
                        "<url>http://127.0.0.1:9/</url></mirror></mirrors></settings>")
    with pytest.raises(JarsUnavailable, match="Maven could not reach its repository") as e:
        ensure_jars(tmp_path / "cache", mvn_args=["-s", str(settings), f"-Dmaven.repo.local={tmp_path / 'repo'}"],
                    quiet=True)
    assert "Connection refused" in str(e.value)
    assert not (tmp_path / "cache").exists()


def kafkasim(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli.main", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=240)


@pytest.mark.cluster
def test_the_command_runs_kafka_on_a_zookeeper_of_its_own(tmp_path: Path) -> None:
    """`kafkasim reference up|status|down`: one broker on the reference's own embedded ZooKeeper (the
    cluster.yaml names none); `down` leaves no process behind; a key Kafka cannot take stops `up` at once."""
    bad = write_embedded_cluster_yaml(tmp_path / "bad", [free_port()], 3000, **{
        "offsets.topic.replication.factor": 1, "kafkasim.isr.kip841.enable": True})
    r = kafkasim("reference", "up", "--config", bad)
    assert r.returncode == 2 and "kafkasim.isr.kip841.enable: true cannot run on Kafka 2.8.2" in r.stderr
    assert not (tmp_path / "bad" / "run").exists()

    path = write_embedded_cluster_yaml(tmp_path / "ok", [free_port()], 3000, **{
        "offsets.topic.replication.factor": 1, "kafkasim.offsets.topic.eager.create": False})
    try:
        up = kafkasim("reference", "up", "--config", path)
        assert up.returncode == 0, up.stdout + up.stderr
        assert "Controller: broker 1" in up.stdout and "Broker 1: registered" in up.stdout
        status = json.loads(kafkasim("reference", "status", "--config", path, "--json").stdout)
        assert status["up"] and status["controller"] == 1 and status["chroot"] == "/kafka-reference"
        (b,) = status["brokers"]
        assert b["registered"] and b["state"] == "running" and b["endpoints"] == [f"PLAINTEXT://{b['listener']}"]
        assert set(processes_mentioning(str(tmp_path / "ok"))) >= {b["pid"]}   # and its ZooKeeper
    finally:
        down = kafkasim("reference", "down", "--config", path)
    assert down.returncode == 0, down.stderr
    assert processes_mentioning(str(tmp_path / "ok")) == {}
    assert "not up" in kafkasim("reference", "status", "--config", path).stdout
