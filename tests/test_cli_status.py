"""`cluster status`: brokers this tool did not start (a docker-compose lab's) are not 'pid None dead'; each broker's
Kafka listeners, as its clients are told to dial them."""
from __future__ import annotations

import io
from types import SimpleNamespace

from node.config import parse_config
from cli.main import kafka_listeners, print_view
from launcher.cluster import Cluster


def test_brokers_never_started_here_are_unknown_not_dead(tmp_path) -> None:
    cfg = parse_config({"run.dir": str(tmp_path / "run"), "offsets.topic.replication.factor": 2,
                        "brokers": [{"id": b, "host": "127.0.0.1", "port": 19090 + b} for b in (1, 2)]}, base_dir=tmp_path)
    cluster = Cluster(cfg, tmp_path / "cluster.yaml")
    assert cluster.processes() == {1: {"pid": None, "state": "unknown"}, 2: {"pid": None, "state": "unknown"}}

    view = SimpleNamespace(controller_id=2, controller_epoch=1, topics={},
                           brokers={1: {"epoch": 24, "host": "127.0.0.1", "port": 19091}})
    out = io.StringIO()
    print_view(view, cluster.processes(), out)
    lines = out.getvalue().splitlines()
    assert lines[1].startswith("Broker 1: registered") and lines[1].endswith("not started by this tool")
    assert lines[2].startswith("Broker 2: not registered") and "None" not in out.getvalue()


def test_status_names_each_brokers_kafka_listeners(tmp_path) -> None:
    cfg = parse_config({"run.dir": str(tmp_path / "run"), "offsets.topic.replication.factor": 2,
                        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                        "brokers": [{"id": 1, "host": "127.0.0.1", "port": 19091},
                                    {"id": 2, "host": "127.0.0.1", "port": 19092,
                                     "listeners": "INTERNAL://0.0.0.0:29092,EXTERNAL://0.0.0.0:39092",
                                     "advertised.listeners": "INTERNAL://broker2:29092,EXTERNAL://127.0.0.1:39092"}]},
                       base_dir=tmp_path)
    cluster = Cluster(cfg, tmp_path / "cluster.yaml")
    listeners = kafka_listeners(cluster)
    # the default listener is the gRPC port + 10000; an advertised address replaces a bind-all one
    assert listeners == {1: ["PLAINTEXT://127.0.0.1:29091"],
                         2: ["INTERNAL://broker2:29092", "EXTERNAL://127.0.0.1:39092"]}

    view = SimpleNamespace(controller_id=1, controller_epoch=1, topics={},
                           brokers={1: {"epoch": 24, "host": "127.0.0.1", "port": 19091}})
    out = io.StringIO()
    print_view(view, cluster.processes(), out, listeners=listeners)
    lines = out.getvalue().splitlines()
    assert "grpc 127.0.0.1:19091" in lines[1] and "kafka PLAINTEXT://127.0.0.1:29091" in lines[1]
    assert lines[2].startswith("Broker 2: not registered")   # a broker not up still has its configured listeners
    assert "kafka INTERNAL://broker2:29092,EXTERNAL://127.0.0.1:39092" in lines[2]
