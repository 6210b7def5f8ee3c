"""The broker process's own edges: start-up failures are reported, and neither start-up nor a stop is
ever hung on."""
from __future__ import annotations

import pytest

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import yaml

from conftest import write_cluster_yaml
from launcher.cluster import Cluster
from node.config import load_config
from node.events import read_events
from node.server.shutdown import stop_deadline_s
from util.waiting import wait_for
from zk.server import EmbeddedZooKeeper

pytestmark = pytest.mark.cluster  # brokers and a ZooKeeper of its own, spawned by the tests themselves

ROOT = Path(__file__).resolve().parent.parent


def test_a_broker_whose_port_is_taken_exits_with_a_clear_error(zookeeper, tmp_path):
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        cfg = {"run.dir": str(tmp_path / "run"),
               "zookeeper.connect": f"{zookeeper.connect_string}/t-{uuid.uuid4().hex[:8]}",
               "offsets.topic.replication.factor": 1,
               "brokers": [{"id": 1, "host": "127.0.0.1", "port": port}]}
        path = tmp_path / "cluster.yaml"
        path.write_text(yaml.safe_dump(cfg))
        r = subprocess.run([sys.executable, "-m", "node", "--id", "1", "--config", str(path)],
                           capture_output=True, text=True, timeout=60, cwd=str(ROOT))
    finally:
        holder.close()
    assert r.returncode == 1
    assert "broker 1 failed to start" in r.stderr and str(port) in r.stderr
    failed = [e for e in read_events(tmp_path / "run" / "events" / "broker-1.jsonl")
              if e["type"] == "broker_start_failed"]
    assert failed and str(port) in failed[0]["error"]


def test_an_unknown_broker_id_is_a_config_error(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"run.dir": str(tmp_path / "run"), "offsets.topic.replication.factor": 1,
                                    "brokers": [{"id": 1, "port": 19999}]}))
    r = subprocess.run([sys.executable, "-m", "node", "--id", "7", "--config", str(path)],
                       capture_output=True, text=True, timeout=60, cwd=str(ROOT))
    assert r.returncode == 2 and "7" in r.stderr


def test_a_broker_whose_zookeeper_died_still_exits_promptly_on_sigterm(tmp_path):
    """ZooKeeper SIGKILLed, then SIGTERM: each broker (the controller and the other) gives its controlled
    shutdown up at once (no ZooKeeper, so no controller can be found), stops, and exits 0, well before
    its shutdown watchdog's bound.  Kazoo used to keep the controlled shutdown's read of /controller
    queued until ZooKeeper came back, and the broker never exited."""
    zk = EmbeddedZooKeeper(tmp_path / "zk", servers=1, tick_ms=100)  # our own: this test kills it
    zk.start(timeout=60)
    procs: dict[int, subprocess.Popen] = {}
    try:
        path = write_cluster_yaml(tmp_path / "cluster.yaml", zk.connect_string, 2, **{
            "offsets.topic.num.partitions": 4, "zookeeper.session.timeout.ms": 2000,
            "controller.socket.timeout.ms": 1000, "controlled.shutdown.max.retries": 3})
        cfg = load_config(path)
        (tmp_path / "run").mkdir()
        for b in (1, 2):
            with open(tmp_path / "run" / f"broker-{b}.log", "ab") as out:
                procs[b] = subprocess.Popen([sys.executable, "-m", "node", "--id", str(b), "--config", str(path)],
                                            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            cwd=str(ROOT))
        cluster = Cluster(cfg, path)
        try:
            controller = cluster.wait_ready(60).controller_id
        finally:
            cluster.close()
        assert all(p.poll() is None for p in procs.values())

        zk.servers[0].kill()
        t0 = time.monotonic()
        for p in procs.values():
            os.kill(p.pid, signal.SIGTERM)
        bound = stop_deadline_s(cfg)  # the watchdog's: 3 x (1 + 0.05) + 2 x 2 + 12 s
        wait_for(lambda: all(p.poll() is not None for p in procs.values()), bound + 10,
                 "both brokers to exit after SIGTERM with ZooKeeper dead")
        elapsed = time.monotonic() - t0

        for b, p in procs.items():
            evs = read_events(tmp_path / "run" / "events" / f"broker-{b}.jsonl")
            stop = [e["type"] for e in evs[next(i for i, e in enumerate(evs) if e["type"] == "signal_received"):]]
            assert p.returncode == 0, (b, p.returncode, stop)  # 3 = the watchdog had to end it
            assert "shutdown_timed_out" not in stop and stop[-1] == "broker_stopped", (b, stop)
            done, = [e for e in evs if e["type"] == "controlled_shutdown_done"]
            assert not done["succeeded"] and done["gave_up"] == "zookeeper_unreachable", (b, done)
            # not retried through the whole budget (3 attempts): given up before a request, or after one
            # that was under way as ZooKeeper died
            assert done["attempts"] <= 1, (b, done)
            assert stop.index("controlled_shutdown_done") < stop.index("zk_session_closing"), (b, stop)
            if b == controller:
                assert "controller_resigned" in stop, stop
        assert elapsed < bound, f"took {elapsed:.1f}s, the watchdog's bound is {bound:.1f}s"
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        zk.stop()


def test_the_registration_names_the_kafka_listeners_and_keeps_the_grpc_address_for_kafkasim(make_cluster):
    """/brokers/ids/<id> is Kafka's version-5 JSON: a tool reading ZooKeeper dials ``endpoints`` and reaches the
    Kafka listener; kafkasim's own readers (the codec, the launcher's view) still find the gRPC address."""
    import json

    from confluent_kafka.admin import AdminClient

    from zk import paths

    cluster = make_cluster(brokers=1, **{"offsets.topic.num.partitions": 1})
    spec = cluster.cfg.broker(1)
    data, _ = cluster.zk().get(paths.broker(1))
    reg = json.loads(data)
    host, port = spec.kafka_advertised
    assert reg["endpoints"] == [f"PLAINTEXT://{host}:{port}"]
    assert (reg["host"], reg["port"], reg["listener_security_protocol_map"]) == (host, port, {"PLAINTEXT": "PLAINTEXT"})
    assert reg["kafkasim_grpc"] == f"{spec.host}:{spec.port}" and "rack" not in reg
    address = reg["endpoints"][0].partition("://")[2]
    md = AdminClient({"bootstrap.servers": address, "log_level": 0}).list_topics(timeout=10)
    assert sorted(md.brokers) == [1]
    assert cluster.view().brokers[1]["port"] == spec.port   # the launcher (status, chaos, ui) reads gRPC
