"""Chaos runs aimed at the docker-compose lab (``kafkasim chaos run --target compose``).

The run brings up the lab's containers (docker-compose.yml with docker-compose.hostnet.yml: the host's
network, ports picked for the run) from the lab's image, with the run's cluster directory mounted at
the same path inside the brokers, so their event logs and partition logs land where the checkers read
them.  The nemesis drives :class:`ComposeCluster` as it drives local processes, and faults become
Docker operations: kill -> ``docker kill``, terminate -> ``docker kill --signal TERM`` (the broker's
controlled shutdown), pause/resume -> ``docker pause``/``unpause`` (the cgroup freezer), restart ->
``docker start``; truncate and expire-session work on the mounted files as usual.

Network faults need a network namespace per node; on the host's network the containers share the
host's, so a run with network faults is refused with that reason (use the local processes'
``network: netns`` mode for those).
"""
from __future__ import annotations

import signal
import uuid
from pathlib import Path
from typing import Any

import yaml

from node.config import load_config
from launcher.cluster import Cluster, ClusterView
from launcher.lab import HOSTNET_FILES, ComposeLab, LabError, docker_exe, engine_answers, run
from util.waiting import wait_for
from zk.server import four_letter_word, free_port

LAB_BROKERS = 3
IMAGE = "kafkasim:latest"


class ZkContainer:
    """The lab's ZooKeeper service, as the nemesis handles a ZooKeeper server."""

    def __init__(self, lab: ComposeLab, port: int):
        self.lab, self.port = lab, port
        self.address = f"127.0.0.1:{port}"

    def serving(self) -> bool:
        try:
            return "Mode:" in four_letter_word("127.0.0.1", self.port)
        except OSError:
            return False

    def is_running(self) -> bool:
        return self.lab.running(self.lab.zookeeper)

    def kill(self) -> None:
        self.lab.kill(self.lab.zookeeper)

    def stop(self) -> None:
        self.lab.stop(self.lab.zookeeper)

    def pause(self) -> None:
        self.lab.pause(self.lab.zookeeper)

    def resume(self) -> None:
        self.lab.unpause(self.lab.zookeeper)

    def start(self) -> None:
        self.lab.start(self.lab.zookeeper)
        wait_for(self.serving, 60, "ZooKeeper's container to serve again")


class ContainerEnsemble:
    """Stands where the runner expects an embedded ensemble: its servers and connect string."""

    def __init__(self, server: ZkContainer):
        self.servers = [server]
        self.connect_string = server.address

    def stop(self) -> None:
        pass  # `docker-compose down` stops it with the brokers


class ComposeCluster(Cluster):
    """A :class:`Cluster` whose brokers and ZooKeeper are the lab's containers."""

    def __init__(self, cfg: Any, config_path: Path, lab: ComposeLab, zk: ZkContainer):
        super().__init__(cfg, config_path)
        self.lab = lab
        self.zk_embedded = ContainerEnsemble(zk)  # type: ignore[assignment]
        self.connect = cfg.zookeeper_connect

    def service(self, broker_id: int) -> str:
        self.cfg.broker(broker_id)
        return self.lab.brokers[broker_id]

    def start_zookeeper(self, timeout: float = 60.0) -> None:
        pass  # `docker-compose up` starts it first (the brokers wait for its healthcheck)

    def up(self, timeout: float = 60.0) -> ClusterView:
        self.lab.up()
        self.lab.wait_healthy(max(timeout, 180))
        return self.wait_ready(timeout)

    def _check_alive(self) -> None:
        for b, service in self.lab.brokers.items():
            if not self.lab.running(service):
                tail = self.lab.compose("logs", "--tail", "40", service, check=False).stdout
                raise RuntimeError(f"broker {b}'s container exited during start-up:\n{tail}")

    def start_broker(self, broker_id: int) -> int:
        service = self.service(broker_id)
        if self.lab.running(service):
            raise RuntimeError(f"broker {broker_id} is already running ({service})")
        self.lab.start(service)
        return self.lab.pid(service)

    def signal_broker(self, broker_id: int, sig: signal.Signals) -> int:
        service = self.service(broker_id)
        st = self.lab.state(service)
        if not st.get("Running"):
            raise RuntimeError(f"broker {broker_id} is not running")
        if sig == signal.SIGSTOP:
            self.lab.pause(service)
        elif sig == signal.SIGCONT:
            if st.get("Paused"):
                self.lab.unpause(service)
        elif sig in (signal.SIGKILL, signal.SIGTERM):
            if st.get("Paused"):
                self.lab.unpause(service)  # a frozen process cannot act on SIGTERM
            self.lab.docker("kill", "--signal", sig.name, self.lab.container(service))
        else:
            raise RuntimeError(f"{sig.name} has no Docker equivalent here")
        return int(st.get("Pid") or 0)

    def wait_exit(self, broker_id: int, timeout: float = 10.0) -> None:
        service = self.service(broker_id)
        wait_for(lambda: not self.lab.running(service), timeout, f"broker {broker_id}'s container to stop")

    def stop_broker(self, broker_id: int, timeout: float = 10.0) -> None:
        service = self.service(broker_id)
        if self.lab.state(service).get("Paused"):
            self.lab.unpause(service)
        self.lab.stop(service, int(timeout))

    def down(self, timeout: float = 15.0) -> None:
        self.close()
        self.lab.down()

    def processes(self) -> dict[int, dict[str, Any]]:
        out = {}
        for b, service in self.lab.brokers.items():
            st = self.lab.state(service)
            out[b] = {"pid": st.get("Pid") or None, "state": "paused" if st.get("Paused") else st.get("Status")}
        return out


class NoNet:
    """Network faults on the host's network: none possible (the containers share one namespace)."""

    mode = "none"

    def heal_all(self) -> None:
        pass


def check_lab_possible(brokers: int, zookeeper_servers: int, fault_kinds: list[str], network_kinds: tuple) -> None:
    """Refuses, with the reason, what a run against the lab cannot do."""
    if brokers != LAB_BROKERS or zookeeper_servers != 1:
        raise RuntimeError(f"--target compose: the lab has {LAB_BROKERS} brokers and 1 ZooKeeper server; "
                           f"the scenario asks for {brokers} and {zookeeper_servers}")
    net = sorted({k for k in fault_kinds if k in network_kinds})
    if net:
        raise RuntimeError(f"--target compose: network faults ({', '.join(net)}) need a network namespace per node, "
                           "and the lab's containers share the host's; run them on local processes "
                           "(network: netns) instead")
    if not engine_answers():
        raise RuntimeError("--target compose: no Docker engine answers (start dockerd: README, 'docker-compose')")
    if run([docker_exe(), "image", "inspect", IMAGE], check=False).returncode != 0:
        raise RuntimeError(f"--target compose: no {IMAGE} image: build it with scripts/lab-image.sh "
                           "(or docker-compose build)")


def start_compose_cluster(config_path: Path, extra_env: dict[str, str]) -> ComposeCluster:
    """Rewrites the run's cluster.yaml for the lab (ZooKeeper in its container, the run dir absolute and
    mounted) and brings the lab up; the cluster is ready when this returns."""
    config_path = config_path.resolve()
    doc = yaml.safe_load(config_path.read_text())
    run_dir = (config_path.parent / doc["run.dir"]).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    zk_port = free_port()
    tick = doc.pop("zookeeper.embedded.tick.time.ms", 200)
    doc.pop("zookeeper.embedded.servers", None)
    doc["run.dir"] = str(run_dir)
    doc["zookeeper.connect"] = f"127.0.0.1:{zk_port}/chaos"
    config_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    cfg = load_config(config_path)
    override = {"version": "3.9", "services": {
        "zookeeper": {"command": ["python", "-m", "zk.server", "--root", "/data", "--port", str(zk_port),
                                  "--host", "127.0.0.1", "--tick-ms", str(tick)]},
        **{f"broker{b.id}": {"volumes": [f"{run_dir}:{run_dir}"], "environment": dict(extra_env)}
           for b in cfg.brokers}}}
    override_path = config_path.parent / "compose.override.yml"
    override_path.write_text(yaml.safe_dump(override, sort_keys=False))
    env = {"KAFKASIM_LAB_CONFIG": str(config_path), "KAFKASIM_LAB_ZK_PORT": str(zk_port),
           **{f"KAFKASIM_LAB_PORT{b.id}": str(b.port) for b in cfg.brokers}}
    lab = ComposeLab(f"kafkasimchaos{uuid.uuid4().hex[:8]}", (*HOSTNET_FILES, str(override_path)), env)
    cluster = ComposeCluster(cfg, config_path, lab, ZkContainer(lab, zk_port))
    try:
        cluster.up(timeout=90)
    except (LabError, TimeoutError, RuntimeError):
        lab.down()
        raise
    return cluster
