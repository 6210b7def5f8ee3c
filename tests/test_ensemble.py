"""`cluster up` on an embedded 3-server ZooKeeper ensemble, which survives losing its leader."""
from __future__ import annotations

import pytest

import json

import yaml

from helpers import offsets_partitions
from launcher.cluster import Cluster, process_state
from node.config import KAFKA_PORT_OFFSET, load_config
from util.waiting import wait_for
from zk.server import free_port

pytestmark = pytest.mark.cluster  # an embedded ZooKeeper ensemble and brokers, through Cluster directly


def test_cluster_up_on_a_three_server_ensemble(tmp_path):
    doc = {
        "run.dir": str(tmp_path / "run"),
        "zookeeper.connect": None,
        "zookeeper.embedded.servers": 3,
        "zookeeper.embedded.tick.time.ms": 100,
        "zookeeper.session.timeout.ms": 3000,
        "offsets.topic.num.partitions": 10,
        "brokers": [{"id": i, "host": "127.0.0.1", "port": free_port(paired=KAFKA_PORT_OFFSET)} for i in (1, 2, 3)],
    }
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(doc))
    cluster = Cluster(load_config(path), path)
    try:
        view = cluster.up(timeout=90)
        assert view.controller_epoch == 1
        state = json.loads((tmp_path / "run" / "cluster.json").read_text())
        servers = state["zookeeper"]["servers"]["servers"]
        assert len(servers) == 3 and len(cluster.connect.split(",")) == 3
        # fault ZooKeeper itself: kill its leader; the ensemble re-elects and the cluster keeps working
        leader = cluster.zk_embedded.leader()
        assert leader is not None and leader.mode() == "leader"
        leader.kill()
        cluster.close()  # our own client may have been on the dead server
        wait_for(lambda: [s for s in cluster.zk_embedded.servers if s.is_running() and s.mode() == "leader"],
                 30, "a new ZooKeeper leader")
        after = wait_for(lambda: (v := cluster.view()) and len(v.brokers) == 3 and v, 30,
                         "the brokers to be registered through the surviving servers")
        assert after.controller_id in (1, 2, 3)
        assert all(s["leader"] >= 0 for s in offsets_partitions(after).values())
        pids = [s["pid"] for s in servers]
    finally:
        cluster.down()
    assert all(process_state(pid) == "dead" for pid in pids)
