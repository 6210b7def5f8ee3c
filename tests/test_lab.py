"""The docker-compose lab, run for real: a Docker engine, the lab's image, ZooKeeper and three brokers in
containers (on the host's network: docker-compose.hostnet.yml), broken with docker kill/pause/unpause.

The lab comes up once for the module; the tests run in order on it, and the last tears it down.  The
image is built (or found current) by scripts/lab-image.sh; dockerd is started if none answers and
stopped again at the end (only the one started here).
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import grpc
import pytest
import yaml

from client.admin import GroupAdmin
from client.producer import Producer
from kafkacommon import errors
from kafkacommon.hashing import partition_for
from node.config import load_config
from zk.admin import create_topic
from launcher.cluster import Cluster
from launcher.lab import HOSTNET_FILES, REPO, ComposeLab, Dockerd
from util.waiting import wait_for
from proto import groups_pb2 as gpb
from proto import groups_pb2_grpc as gpbg
from test_groups_cluster import FAST_GROUPS, Consumers, client, coordinator_of, member
from zk.server import free_port

pytestmark = pytest.mark.cluster  # dockerd, docker-compose, containers


@dataclass
class Lab:
    compose: ComposeLab
    cluster: Cluster
    config_path: Path

    def service(self, broker: int) -> str:
        return self.compose.brokers[broker]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    d = tmp_path_factory.mktemp("lab")
    engine = Dockerd.ensure(d / "dockerd.log")
    try:
        build = subprocess.run([str(REPO / "scripts" / "lab-image.sh")], capture_output=True, text=True,
                               timeout=1800)
        assert build.returncode == 0, build.stderr[-3000:]
        zk_port = free_port()
        grpc_ports = [free_port() for _ in range(3)]
        kafka_ports = [free_port() for _ in range(3)]
        other_ports = [free_port() for _ in range(3)]  # a second listener, advertised under another name
        config = {
            "run.dir": "/data/run",
            "zookeeper.connect": f"127.0.0.1:{zk_port}/kafkasim",
            "zookeeper.session.timeout.ms": 6000,
            "offsets.topic.num.partitions": 50,
            "offsets.topic.replication.factor": 3,
            **FAST_GROUPS,
            "auto.leader.rebalance.enable": False,  # no preferred-leader move under a test's feet after a restart
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
            "brokers": [{"id": i + 1, "host": "127.0.0.1", "port": grpc_ports[i],
                         "listeners": f"PLAINTEXT://127.0.0.1:{kafka_ports[i]},OTHER://127.0.0.1:{other_ports[i]}",
                         "advertised.listeners": f"PLAINTEXT://127.0.0.1:{kafka_ports[i]},"
                                                 f"OTHER://localhost:{other_ports[i]}"} for i in range(3)],
        }
        config_path = d / "cluster.yaml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        env = {"KAFKASIM_LAB_CONFIG": str(config_path), "KAFKASIM_LAB_ZK_PORT": str(zk_port),
               **{f"KAFKASIM_LAB_PORT{i + 1}": str(p) for i, p in enumerate(grpc_ports)}}
        compose = ComposeLab(f"kafkasimtest{uuid.uuid4().hex[:8]}", HOSTNET_FILES, env)
        try:
            compose.up()
            compose.wait_healthy(180)
            cluster = Cluster(load_config(config_path), config_path)
            yield Lab(compose, cluster, config_path)
            cluster.close()
        finally:
            compose.down()
    finally:
        engine.stop()


def status(lab: Lab) -> dict:
    p = subprocess.run([sys.executable, "-m", "cli.main", "cluster", "status", "--json",
                        "--config", str(lab.config_path)], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def offsets_isrs_full(doc: dict) -> bool:
    [offsets] = [t for t in doc["topics"] if t["topic"] == "__consumer_offsets"] or [None]
    return offsets is not None and len(offsets["partitions"]) == 50 and all(
        len(p["isr"]) == 3 and p["leader"] in p["isr"] for p in offsets["partitions"])


def test_up_every_healthcheck_passes_and_status_shows_the_cluster(lab: Lab) -> None:
    assert {s: lab.compose.health(s) for s in lab.compose.services()} == dict.fromkeys(lab.compose.services(),
                                                                                       "healthy")
    def full() -> dict | None:
        doc = status(lab)
        return doc if offsets_isrs_full(doc) else None

    doc = wait_for(full, 60, "50 offsets partitions with full ISRs")
    assert doc["controller"]["epoch"] == 1 and doc["controller"]["broker_id"] in (1, 2, 3)
    assert [b["id"] for b in doc["brokers"]] == [1, 2, 3] and all(b["alive"] for b in doc["brokers"])
    # the containers' brokers were not started by this tool: their processes are unknown here, not dead
    assert [b["process"] for b in doc["brokers"]] == [{"pid": None, "state": "unknown"}] * 3


def listed_brokers(bootstrap: str) -> list[tuple[int, str]]:
    meta = subprocess.run(["kcat", "-b", bootstrap, "-L", "-J"], capture_output=True, text=True, timeout=60)
    assert meta.returncode == 0, meta.stderr
    return sorted((b["id"], b["name"]) for b in json.loads(meta.stdout)["brokers"])


def test_kcat_from_the_host_lists_the_brokers_produces_and_consumes(lab: Lab) -> None:
    brokers = lab.cluster.cfg.brokers
    bootstrap = "%s:%d" % brokers[0].kafka_listener
    assert listed_brokers(bootstrap) == [(b.id, "%s:%d" % b.advertised_on("PLAINTEXT")) for b in brokers]
    # in through the OTHER listener: told the addresses advertised for OTHER
    other = "127.0.0.1:%d" % brokers[1].kafka_listeners[1][2]
    assert listed_brokers(other) == [(b.id, "localhost:%d" % b.kafka_listeners[1][2]) for b in brokers]
    create_topic(lab.cluster.zk(), "kc", 1, 3, {})
    wait_for(lambda: lab.cluster.view().topics.get("kc", {}).get("partitions", {}).get(0, {}).get("leader", -1) >= 0,
             30, "a leader for kc/0")
    prod = subprocess.run(["kcat", "-b", bootstrap, "-P", "-t", "kc", "-p", "0"], input="one\ntwo\nthree\n",
                          capture_output=True, text=True, timeout=60)
    assert prod.returncode == 0, prod.stderr
    cons = subprocess.run(["kcat", "-b", bootstrap, "-C", "-t", "kc", "-o", "beginning", "-e", "-q"],
                          capture_output=True, text=True, timeout=60)
    assert cons.returncode == 0, cons.stderr
    assert cons.stdout.split() == ["one", "two", "three"]


def group_led_by(lab: Lab, broker: int) -> str:
    """A group name whose offsets partition ``broker`` leads now."""
    parts = lab.cluster.view().topics["__consumer_offsets"]["partitions"]
    return next(g for g in (f"g{i}" for i in range(1000)) if parts[partition_for(g, 50)]["leader"] == broker)


def test_killing_the_controllers_container_elects_a_new_one_and_loses_no_commit(lab: Lab) -> None:
    view = lab.cluster.view()
    old = view.controller_id
    assert view.controller_epoch == 1
    create_topic(lab.cluster.zk(), "t", 4, 3, {"min.insync.replicas": 2})
    producer = Producer(client(lab.cluster))
    for i in range(100):
        producer.send("t", b"v%d" % i, partition=i % 4)
    group = group_led_by(lab, old)  # its coordinator is the controller: one kill, both failovers
    consumers = Consumers(*(member(lab.cluster, group, f"c{i}") for i in range(2)), commit=True)
    try:
        consumers.wait_stable()
        assert coordinator_of(lab.cluster, group) == old
        wait_for(lambda: sum(consumers.acked.values()) >= 50, 30, "commits before the kill")
        lab.compose.kill(lab.service(old))
        killed_at = time.monotonic()
        v = wait_for(lambda: (v := lab.cluster.view()).controller_id not in (None, old) and v, 60, "a new controller")
        assert v.controller_epoch == 2
        wait_for(lambda: consumers.last_ack and consumers.last_ack[0] != old and consumers.last_ack[1] > killed_at,
                 60, "a commit acknowledged by the new coordinator")
        consumers.wait_stable(timeout=60)
    finally:
        consumers.close()
    committed = GroupAdmin(client(lab.cluster)).committed(group)
    for tp, offset in consumers.acked.items():
        assert committed.get(tp, -1) >= offset, (tp, offset, committed)
    lab.compose.start(lab.service(old))  # back for the next test, in every ISR again
    wait_for(lambda: offsets_isrs_full(status(lab)), 90, f"broker {old} back in every offsets ISR")


def test_a_paused_coordinator_loses_its_group_and_its_late_commit_is_rejected(lab: Lab) -> None:
    admin = GroupAdmin(client(lab.cluster))

    def commit(offset: int, target: str) -> gpb.OffsetCommitResponse:
        with grpc.insecure_channel(target) as ch:
            return gpbg.GroupsStub(ch).OffsetCommit(gpb.OffsetCommitRequest(
                group_id="simple", generation_id=-1, retention_time_ms=-1, partitions=[
                    gpb.OffsetCommitPartition(topic="t", partition=0, offset=offset, leader_epoch=-1)]), timeout=60)

    def first_commit() -> tuple[int, str] | None:
        """The group's coordinator once it takes a commit (after the last test's failover, the new leaders
        of the offsets partitions may still be loading them)."""
        c = admin.coordinator("simple")
        return c if c and commit(5, c[1]).partitions[0].error_code == errors.NONE else None

    old, endpoint = wait_for(first_commit, 60, "a first commit of group simple")
    lab.compose.pause(lab.service(old))
    late: dict = {}
    sender = threading.Thread(target=lambda: late.setdefault("r", commit(99, endpoint)), daemon=True)
    sender.start()  # reaches the frozen coordinator's socket; handled only after unpause
    try:
        wait_for(lambda: coordinator_of(lab.cluster, "simple") != old, 60, "a new coordinator past the session timeout")
        new_endpoint = admin.coordinator("simple")[1]
        wait_for(lambda: admin.committed("simple").get(("t", 0)) == 5, 30, "the new coordinator to load offset 5")
        assert commit(7, new_endpoint).partitions[0].error_code == errors.NONE
    finally:
        lab.compose.unpause(lab.service(old))
    sender.join(60)
    code = late["r"].partitions[0].error_code
    assert code != errors.NONE, "a deposed coordinator acknowledged a commit"
    assert code in (errors.NOT_COORDINATOR, errors.REQUEST_TIMED_OUT, errors.COORDINATOR_NOT_AVAILABLE), code
    assert admin.committed("simple")[("t", 0)] == 7


def test_down_v_leaves_no_container_network_or_volume(lab: Lab) -> None:
    assert lab.compose.leftovers()["containers"]  # the lab is there...
    lab.compose.down()
    assert lab.compose.leftovers() == {"containers": [], "networks": [], "volumes": []}  # ...and then nothing
