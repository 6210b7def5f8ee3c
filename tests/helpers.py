"""Reading what the brokers wrote (their event logs), and finding our processes."""
from __future__ import annotations

import os
from typing import Any

from launcher.cluster import Cluster, process_state
from node.events import read_run_events


def serve_broker(servicer: Any) -> tuple[Any, str]:
    """``servicer`` (a ``proto.kafkasim_pb2_grpc.BrokerServicer``) served by a gRPC server on loopback: (the server,
    its address).  Stop it with ``server.stop(0)``."""
    from concurrent import futures

    import grpc

    from proto import kafkasim_pb2_grpc as pbg

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pbg.add_BrokerServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"127.0.0.1:{port}"


def events(cluster: Cluster, broker: int | None = None, type_: str | None = None, **match: Any) -> list[dict]:
    return [e for e in read_run_events(cluster.run_dir)
            if (broker is None or e["broker"] == broker) and (type_ is None or e["type"] == type_)
            and all(e.get(k) == v for k, v in match.items())]


def earliest_expiry_ms(session_ms: int) -> float:
    """The soonest a killed process's ZooKeeper session can expire, counted from the kill.  The server counts the
    timeout from the last packet it had from the client, and kazoo pings once a third of the session has passed
    since it last sent anything: so the session can end up to a third early of the kill (a little more for the
    ping's own timing)."""
    return session_ms * 2 / 3 * 0.95


def offsets_partitions(view) -> dict[int, dict]:
    return view.topics["__consumer_offsets"]["partitions"]


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def processes_mentioning(marker: str) -> dict[int, str]:
    """Live (not dead, not zombie) processes whose command line contains ``marker``."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and entry != str(os.getpid()):
            cmd = _cmdline(int(entry))
            if marker in cmd and process_state(int(entry)) != "dead":
                out[int(entry)] = cmd
    return out


def write_embedded_cluster_yaml(d, ports: list[int], session_ms: int, **settings: Any):
    """A cluster.yaml for an embedded ZooKeeper (tick 100 ms), everything under ``d``."""
    import yaml

    d.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {
        "run.dir": str(d / "run"),
        "zookeeper.connect": None,
        "zookeeper.embedded.tick.time.ms": 100,
        "zookeeper.session.timeout.ms": session_ms,
        "offsets.topic.num.partitions": 50,
        "offsets.topic.replication.factor": 3,
        "brokers": [{"id": i, "host": "127.0.0.1", "port": port} for i, port in enumerate(ports, start=1)],
    }
    doc.update(settings)
    path = d / "cluster.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path
