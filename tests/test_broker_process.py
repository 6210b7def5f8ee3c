"""The broker process's own edges: start-up failures are reported, never hung on."""
from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from pathlib import Path

import yaml

from node.events import read_events

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
