"""Where the web view's events come from: the run's event logs (followed or read whole), a chaos run's
history and results, and, live, what ZooKeeper, the broker processes and the brokers' gRPC say."""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, Callable

from node.events import read_json_lines

UI_LOG = "ui.jsonl"


def events_dir(run_dir: Path) -> Path:
    """A run's event directory: ``events/`` (a cluster's run dir) or ``cluster/events/`` (a chaos run)."""
    for d in (run_dir / "events", run_dir / "cluster" / "events"):
        if d.is_dir():
            return d
    raise FileNotFoundError(f"{run_dir}: no events/ or cluster/events/ directory")


class LogTail:
    """Follows every ``*.jsonl`` of an events directory (the brokers' logs and the UI's own), parsing only
    new complete lines.  Each event gets ``seen_ms``: the wall-clock time this tail read it."""

    def __init__(self, directory: Path):
        self.dir = directory
        self._offsets: dict[Path, int] = {}

    def poll(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for p in sorted(self.dir.glob("*.jsonl")):
            start = self._offsets.get(p, 0)
            try:
                if p.stat().st_size <= start:
                    continue
                with open(p, "rb") as f:
                    f.seek(start)
                    chunk = f.read()
            except OSError:
                continue
            end = chunk.rfind(b"\n") + 1
            if not end:
                continue
            self._offsets[p] = start + end
            seen = time.time() * 1000.0
            for line in chunk[:end].splitlines():
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                if isinstance(obj, dict) and "mono_ns" in obj:
                    obj["seen_ms"] = round(seen, 3)
                    out.append(obj)
        out.sort(key=lambda e: e["mono_ns"])
        return out


def load_run(run_dir: Path) -> dict[str, Any]:
    """A finished run, for replay: every event and history line on one ``mono_ns`` axis, the results."""
    d = events_dir(run_dir)
    items: list[tuple[int, dict[str, Any]]] = []
    for p in sorted(d.glob("*.jsonl")):
        items.extend((e["mono_ns"], e) for e in read_json_lines(p) if "mono_ns" in e)
    hist = run_dir / "history.jsonl"
    if hist.exists():
        items.extend((op["time"], op) for op in read_json_lines(hist) if "time" in op)
    items.sort(key=lambda kv: kv[0])
    results = None
    if (run_dir / "results.json").exists():
        try:
            results = json.loads((run_dir / "results.json").read_text())
        except ValueError:
            results = None
    # wall time of a mono instant, for display: from any event carrying both clocks
    wall = next((e["ts_ms"] - e["mono_ns"] / 1e6 for _, e in items if "ts_ms" in e), None)
    return {"items": items, "results": results, "wall_offset_ms": wall}


def offsets_partitions(items: list[tuple[int, dict[str, Any]]], default: int = 50) -> int:
    for _, e in items:
        if e.get("type") == "topic_created" and e.get("topic") == "__consumer_offsets":
            return int(e["partitions"])
    return default


class LivePoller:
    """A thread that observes the live cluster and hands each observation to ``sink`` as a synthetic event:
    ``ui_zk`` (ZooKeeper: brokers, controller; assignments now and then), ``ui_procs`` (the broker
    processes), ``ui_replicas`` (each broker's replicas: LEO, HW) and ``ui_group`` (a group's describe)."""

    def __init__(self, cluster: Any, sink: Callable[[dict[str, Any]], None], interval_s: float = 0.5,
                 groups: Callable[[], list[str]] = lambda: []):
        self.cluster = cluster
        self.sink = sink
        self.interval_s = interval_s
        self.groups = groups
        self._stop = threading.Event()
        # a describe of a group whose coordinator just died can wait seconds: it has its own thread, so
        # the brokers, the controller and the replicas keep being observed meanwhile
        self._threads = [threading.Thread(target=self._run, daemon=True, name="ui-poller"),
                         threading.Thread(target=self._run_groups, daemon=True, name="ui-group-poller")]
        self._admin = None
        self._group_cursor = 0

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(5)

    def _emit(self, type_: str, **fields: Any) -> None:
        self.sink({"ts_ms": round(time.time() * 1000.0, 3), "mono_ns": time.monotonic_ns(), "broker": -1,
                   "type": type_, **fields})

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            for step in (self._procs, self._zk) + ((self._replicas,) if n % 2 == 0 else ()):
                try:
                    step(n)
                except Exception:  # the cluster may be half down: the next round tries again
                    pass
            n += 1
            self._stop.wait(self.interval_s)

    def _run_groups(self) -> None:
        n = 0
        while not self._stop.is_set():
            try:
                self._groups(n)
            except Exception:  # no coordinator reachable now: the next round tries again
                pass
            n += 1
            self._stop.wait(self.interval_s)

    def _procs(self, n: int) -> None:
        self._emit("ui_procs", brokers={str(b): p for b, p in self.cluster.processes().items()})

    def _zk(self, n: int) -> None:
        zk = self.cluster.zk()
        fields: dict[str, Any] = {}
        if n % 10 == 0:
            view = self.cluster.view()
            fields["assignments"] = {f"{t}-{p}": s["replicas"] for t, v in view.topics.items()
                                     for p, s in v["partitions"].items()}
        brokers = zk.read_brokers()
        controller, epoch = zk.read_controller_and_epoch()
        self._emit("ui_zk", brokers={str(b): r.epoch for b, r in brokers.items()}, controller=controller,
                   epoch=epoch, **fields)

    def _replicas(self, n: int) -> None:
        import grpc

        from proto import kafkasim_pb2 as pb
        from proto import kafkasim_pb2_grpc as pbg

        parts: dict[str, dict[str, Any]] = {}
        for b in self.cluster.cfg.brokers:
            if self.cluster.processes().get(b.id, {}).get("state") in ("dead", "paused"):
                continue
            try:
                with grpc.insecure_channel(f"{b.host}:{b.port}") as ch:
                    r = pbg.BrokerStub(ch).DescribeBroker(pb.DescribeBrokerRequest(), timeout=1.0)
            except grpc.RpcError:
                continue
            for s in r.replicas:
                entry = parts.setdefault(f"{s.topic}-{s.partition}", {"leo": {}, "hw_all": {}})
                entry["leo"][str(b.id)] = s.log_end_offset
                entry["hw_all"][str(b.id)] = s.high_watermark
        self._emit("ui_replicas", partitions=parts)

    def _groups(self, n: int) -> None:
        from client.admin import GroupAdmin
        from client.metadata import ClusterClient

        names = self.groups()
        if not names:
            return
        if self._admin is None:
            self._admin = GroupAdmin(ClusterClient([f"{b.host}:{b.port}" for b in self.cluster.cfg.brokers],
                                                   request_timeout_s=2.0), timeout_s=5.0)
        # at most 20 groups a round, in turn: 200 groups are each described every 20 rounds
        batch = [names[(self._group_cursor + i) % len(names)] for i in range(min(20, len(names)))]
        self._group_cursor = (self._group_cursor + len(batch)) % max(1, len(names))
        for g in batch:
            if self._stop.is_set():
                return
            try:
                # no ListOffsets: a partition leader that just died would hold the describe up; the lag is
                # taken from the HWs the view already has (ui/state.py)
                d = self._admin.describe(g, with_offsets=False)
                committed = self._admin.committed(g)
            except Exception:
                continue
            self._emit("ui_group", group=g, coordinator=d.coordinator, state=d.state,
                       generation=d.generation, protocol=d.protocol, members=d.members,
                       offsets={f"{t}-{p}": off for (t, p), off in sorted(committed.items())})
