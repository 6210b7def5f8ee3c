"""`cluster status` on brokers this tool did not start (a docker-compose lab's): no 'pid None dead'."""
from __future__ import annotations

import io
from types import SimpleNamespace

from node.config import parse_config
from cli.main import print_view
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
