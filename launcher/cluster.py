"""Starting, inspecting and stopping a local cluster of real processes.

``kafkasim cluster up`` starts ZooKeeper (when embedded) and one OS process
per broker, detached, and records them in ``<run.dir>/cluster.json`` so that
later commands (status, broker kill/term/pause/resume/start, down) can find
them.  Tests drive the same class against a shared ZooKeeper with a chroot.
What the cluster looks like comes from ZooKeeper (:func:`read_view`) and from
the brokers themselves (:func:`replica_offsets`: each replica's LEO, the HW).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from kafkacommon import errors
from node.config import STATE_FILE, ClusterConfig
from proto import kafkasim_pb2 as pb
from proto import kafkasim_pb2_grpc as pbg
from util.procs import process_state  # noqa: F401  (also this module's public name)
from util.waiting import wait_for
from zk import paths
from zk.client import ZkClient
from zk.codecs import decode_controller_epoch
from zk.server import EmbeddedZooKeeper

REPO = Path(__file__).resolve().parents[1]


@dataclass
class ClusterView:
    """What ZooKeeper says about the cluster (the authority), plus our processes."""

    controller_id: int | None
    controller_epoch: int
    brokers: dict[int, dict[str, Any]]
    topics: dict[str, dict[str, Any]]

    def partition(self, topic: str, p: int) -> dict[str, Any]:
        return self.topics[topic]["partitions"][p]

    def to_json(self) -> dict[str, Any]:
        return {
            "controller": {"broker_id": self.controller_id, "epoch": self.controller_epoch},
            "brokers": [dict(id=b, **info) for b, info in sorted(self.brokers.items())],
            "topics": [{"topic": t, "config": v["config"], "partitions": [
                dict(partition=p, **s) for p, s in sorted(v["partitions"].items())]}
                for t, v in sorted(self.topics.items())],
        }


def read_view(zk: ZkClient) -> ClusterView:
    snap = zk.read_snapshot()
    # The controller and its epoch are read together and after the states, so a view never
    # pairs a new controller with an old epoch, nor shows states newer than its epoch.
    controller, epoch = zk.read_controller_and_epoch()
    brokers = {b: {"host": r.host, "port": r.port, "epoch": r.epoch, "rack": r.rack}
               for b, r in snap.brokers.items()}
    topics: dict[str, dict[str, Any]] = {}
    for t, a in snap.topics.items():
        parts = {}
        for p, replicas in sorted(a.partitions.items()):
            st = snap.states.get((t, p))
            parts[p] = {"replicas": list(replicas),
                        "leader": st[0].leader if st else -1,
                        "leader_epoch": st[0].leader_epoch if st else -1,
                        "isr": list(st[0].isr) if st else [],
                        "controller_epoch": st[0].controller_epoch if st else -1,
                        "zk_version": st[1] if st else -1}
        topics[t] = {"config": dict(a.config), "partitions": parts}
    return ClusterView(controller, epoch, brokers, topics)



def replica_offsets(view: ClusterView, timeout_s: float = 2.0) -> dict[tuple[str, int], dict[str, Any]]:
    """Ask every registered broker for its hosted replicas: per partition the HW (the
    leader's), the log start offset, and each replica's LEO."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for b, info in sorted(view.brokers.items()):
        try:
            with grpc.insecure_channel(f"{info['host']}:{info['port']}") as ch:
                r = pbg.BrokerStub(ch).DescribeBroker(pb.DescribeBrokerRequest(), timeout=timeout_s)
        except grpc.RpcError:
            continue  # paused or dying: its replicas show no LEO
        for s in r.replicas:
            entry = out.setdefault((s.topic, s.partition), {"leo": {}, "high_watermark": None,
                                                            "log_start_offset": None})
            entry["leo"][b] = s.log_end_offset
            if s.is_leader:
                entry["high_watermark"] = s.high_watermark
                entry["log_start_offset"] = s.log_start_offset
    return out


def add_offsets(view: ClusterView) -> None:
    """Put the replicas' LEOs and the HW into the view's partitions (in place)."""
    offsets = replica_offsets(view)
    for t, info in view.topics.items():
        for p, s in info["partitions"].items():
            o = offsets.get((t, p), {})
            s["high_watermark"] = o.get("high_watermark")
            s["log_start_offset"] = o.get("log_start_offset")
            s["leo"] = {str(b): leo for b, leo in sorted(o.get("leo", {}).items())}


class Cluster:
    def __init__(self, cfg: ClusterConfig, config_path: Path | str):
        self.cfg = cfg
        self.config_path = Path(config_path).resolve()
        self.run_dir = cfg.run_dir
        self.state_path = self.run_dir / STATE_FILE
        self.zk_embedded: EmbeddedZooKeeper | None = None
        self.connect = cfg.zookeeper_connect
        self.pids: dict[int, int] = {}
        self.links: dict[int, Path] = {}     # broker id -> link map file (chaos runs: dial through the fault proxy)
        self.extra_env: dict[str, str] = {}  # added to the brokers' environment (chaos: planted bugs)
        self.prefixes: dict[int, list[str]] = {}  # broker id -> command prefix (chaos: ip netns exec NS)
        self._zk: ZkClient | None = None
        self._load_state()

    # ------------------------------------------------------------------ state file

    def _load_state(self) -> None:
        try:
            state = json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            return
        self.pids = {int(b): v["pid"] for b, v in state.get("brokers", {}).items()}
        zk = state.get("zookeeper", {})
        self.connect = zk.get("connect", self.connect)
        if zk.get("servers"):
            self.zk_embedded = EmbeddedZooKeeper.from_dict(zk["servers"])

    def _save_state(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        state = {"config": str(self.config_path),
                 "zookeeper": {"connect": self.connect, "embedded": self.zk_embedded is not None,
                               "servers": self.zk_embedded.to_dict() if self.zk_embedded else None},
                 "brokers": {str(b): {"pid": pid} for b, pid in sorted(self.pids.items())}}
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self.state_path)

    # ------------------------------------------------------------------ zookeeper

    def zk(self) -> ZkClient:
        if self._zk is None:
            if not self.connect:
                raise RuntimeError(f"no ZooKeeper: run `kafkasim cluster up` first ({self.state_path} not found)")
            self._zk = ZkClient(self.connect, self.cfg.session_timeout_ms, 10_000)
            self._zk.start()
        return self._zk

    def close(self) -> None:
        if self._zk is not None:
            self._zk.stop()
            self._zk = None

    def view(self) -> ClusterView:
        return read_view(self.zk())

    def controller_epoch(self) -> int:
        data, _ = self.zk().get(paths.CONTROLLER_EPOCH)
        return decode_controller_epoch(data)

    def elect_preferred_leaders(self, partitions: list[tuple[str, int]] | None = None,
                                timeout_s: float = 15.0) -> int:
        """``kafka-leader-election.sh --preferred``: the controller's ElectLeaders over ``partitions`` (None:
        every partition); the number of partitions it moved.  RuntimeError when no controller is active or
        it answers with an error."""
        view = self.view()
        if view.controller_id is None:
            raise RuntimeError("no active controller")
        b = view.brokers[view.controller_id]
        tps = [pb.TopicPartition(topic=t, partition=p) for t, p in partitions or ()]
        with grpc.insecure_channel(f"{b['host']}:{b['port']}") as ch:
            resp = pbg.BrokerStub(ch).ElectLeaders(pb.ElectLeadersRequest(partitions=tps, preferred=True),
                                                  timeout=timeout_s)
        if resp.error_code:
            raise RuntimeError(errors.name(resp.error_code))
        # one answer per partition, as Kafka's: NONE where it moved, ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE
        return sum(1 for e in resp.partition_errors if e.error_code == errors.NONE)

    # ------------------------------------------------------------------ lifecycle

    def start_zookeeper(self, timeout: float = 60.0) -> None:
        if self.cfg.zookeeper_connect:
            return
        if self.zk_embedded and all(s.is_running() for s in self.zk_embedded.servers):
            return
        port = self.cfg.get("zookeeper.embedded.port")
        servers = self.cfg.get("zookeeper.embedded.servers")
        self.zk_embedded = EmbeddedZooKeeper(self.run_dir / "zookeeper", servers=servers,
                                             tick_ms=self.cfg.get("zookeeper.embedded.tick.time.ms"),
                                             client_ports=[port] if port and servers == 1 else None)
        self.zk_embedded.start(timeout=timeout)
        self.connect = self.zk_embedded.connect_string
        self._save_state()

    def start_broker(self, broker_id: int) -> int:
        self.cfg.broker(broker_id)
        if process_state(self.pids.get(broker_id)) != "dead":
            raise RuntimeError(f"broker {broker_id} is already running (pid {self.pids[broker_id]})")
        logs = self.run_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        cmd = [*self.prefixes.get(broker_id, []), sys.executable, "-m", "node", "--id", str(broker_id),
               "--config", str(self.config_path)]
        if self.connect:
            cmd += ["--zookeeper", self.connect]
        if broker_id in self.links:
            cmd += ["--links", str(self.links[broker_id])]
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   **self.extra_env)
        with open(logs / f"broker-{broker_id}.log", "ab") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, cwd=str(REPO), env=env)
        self.pids[broker_id] = proc.pid
        self._save_state()
        return proc.pid

    def up(self, timeout: float = 60.0) -> ClusterView:
        self.start_zookeeper()
        for b in self.cfg.brokers:
            if process_state(self.pids.get(b.id)) == "dead":
                self.start_broker(b.id)
        return self.wait_ready(timeout)

    def wait_ready(self, timeout: float = 60.0) -> ClusterView:
        """A controller is elected and every offsets partition has a leader (with a lazily created offsets
        topic, ``kafkasim.offsets.topic.eager.create: false``, only as long as the topic exists)."""
        want = self.cfg.get("offsets.topic.num.partitions")
        n = len(self.cfg.brokers)
        lazy = not self.cfg.get("kafkasim.offsets.topic.eager.create")

        def ready() -> ClusterView | None:
            self._check_alive()
            v = self.view()
            offsets = v.topics.get(paths.OFFSETS_TOPIC)
            if v.controller_id is None or len(v.brokers) < n:
                return None
            if offsets is None:
                return v if lazy else None
            parts = offsets["partitions"]
            if len(parts) == want and all(s["leader"] >= 0 for s in parts.values()):
                return v
            return None

        return wait_for(ready, timeout, "a controller and a leader for every offsets partition")

    def _check_alive(self) -> None:
        for b, pid in self.pids.items():
            if process_state(pid) == "dead":
                log = self.run_dir / "logs" / f"broker-{b}.log"
                tail = log.read_text()[-2000:] if log.exists() else ""
                raise RuntimeError(f"broker {b} (pid {pid}) exited during start-up:\n{tail}")

    def signal_broker(self, broker_id: int, sig: signal.Signals) -> int:
        pid = self.pids.get(broker_id)
        if process_state(pid) == "dead":
            raise RuntimeError(f"broker {broker_id} is not running")
        os.kill(pid, sig)  # type: ignore[arg-type]
        return pid  # type: ignore[return-value]

    def wait_exit(self, broker_id: int, timeout: float = 10.0) -> None:
        pid = self.pids.get(broker_id)
        wait_for(lambda: process_state(pid) == "dead" and self._reaped(pid), timeout,
                 f"broker {broker_id} (pid {pid}) to exit")

    @staticmethod
    def _reaped(pid: int | None) -> bool:
        """Reap our child if it has exited; True once it is gone (or was never our child)."""
        if not pid:
            return True
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return True
        return done == pid

    def stop_broker(self, broker_id: int, timeout: float = 10.0) -> None:
        pid = self.pids.get(broker_id)
        if process_state(pid) == "dead":
            return
        os.kill(pid, signal.SIGCONT)  # a paused broker cannot handle SIGTERM
        os.kill(pid, signal.SIGTERM)
        try:
            self.wait_exit(broker_id, timeout)
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            self.wait_exit(broker_id, timeout)

    def down(self, timeout: float = 15.0) -> None:
        """Stop every broker at once (SIGTERM: each does its controlled shutdown), then ZooKeeper."""
        self.close()
        running = [b for b, pid in self.pids.items() if process_state(pid) != "dead"]
        for b in running:
            os.kill(self.pids[b], signal.SIGCONT)  # a paused broker cannot handle SIGTERM
            os.kill(self.pids[b], signal.SIGTERM)
        for b in running:
            try:
                self.wait_exit(b, timeout)
            except TimeoutError:
                os.kill(self.pids[b], signal.SIGKILL)
                self.wait_exit(b, timeout)
        if self.zk_embedded is not None:
            self.zk_embedded.stop()
        self.pids.clear()
        self.state_path.unlink(missing_ok=True)

    def processes(self) -> dict[int, dict[str, Any]]:
        """Each configured broker's process as this tool started it: state 'running', 'paused' or
        'dead', or 'unknown' for a broker this tool never started (a docker-compose lab's brokers)."""
        return {b.id: {"pid": pid, "state": process_state(pid) if pid else "unknown"}
                for b in self.cfg.brokers for pid in [self.pids.get(b.id)]}
