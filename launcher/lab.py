"""The docker-compose lab, driven from the host: the Docker engine, compose commands, the lab's containers.

``Dockerd`` starts a Docker engine when none answers, in the mode this project's machines need: no
bridge, no iptables rules, no forwarding, so nothing a container does leaves the host (the lab's
containers then run on the host's network: docker-compose.hostnet.yml).  ``ComposeLab`` runs
``docker-compose`` for one project and maps the lab's services to containers, for the tests
(tests/test_lab.py) and for chaos runs aimed at a lab (chaos/compose.py).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from util.waiting import wait_for

REPO = Path(__file__).resolve().parents[1]
#: dockerd's options here: no docker0 bridge, no NAT or forwarding rules; the image cache persists.
DOCKERD_ARGS = ["--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-forward=false",
                "--ip-masq=false"]
DATA_ROOT = "/var/lib/docker"
HOSTNET_FILES = ("docker-compose.hostnet.yml",)


class LabError(RuntimeError):
    """A docker or docker-compose command failed; the message carries its output."""


def docker_exe() -> str:
    exe = shutil.which("docker")
    if not exe:
        raise LabError("docker is missing: apt-get install docker.io (scripts/setup.sh does)")
    return exe


def compose_exe() -> str:
    exe = shutil.which("docker-compose")
    if not exe:
        raise LabError("docker-compose is missing: apt-get install docker-compose (scripts/setup.sh does)")
    return exe


def engine_answers() -> bool:
    try:
        return subprocess.run([docker_exe(), "version", "--format", "{{.Server.Version}}"],
                              capture_output=True, timeout=20).returncode == 0
    except subprocess.TimeoutExpired:
        return False


@dataclass
class Dockerd:
    """A Docker engine this process started (``proc``), or one that was already running (None)."""

    proc: subprocess.Popen | None = None

    @classmethod
    def ensure(cls, log_path: Path, data_root: str = DATA_ROOT, timeout: float = 60) -> "Dockerd":
        if engine_answers():
            return cls(None)
        exe = shutil.which("dockerd")
        if not exe:
            raise LabError("dockerd is missing: apt-get install docker.io (scripts/setup.sh does)")
        if os.geteuid() != 0:
            raise LabError("no Docker engine answers, and starting dockerd needs root")
        log = open(log_path, "ab")
        proc = subprocess.Popen([exe, *DOCKERD_ARGS, "--data-root", data_root], stdout=log, stderr=log,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        d = cls(proc)
        try:
            wait_for(lambda: proc.poll() is not None or engine_answers(), timeout, "dockerd to answer")
        except TimeoutError:
            d.stop()
            raise
        if proc.poll() is not None:
            raise LabError(f"dockerd exited ({proc.returncode}); see {log_path}")
        return d

    def stop(self, timeout: float = 30) -> None:
        """Stops the engine only if this object started it."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def run(cmd: list[str], timeout: float = 120, check: bool = True, **kw: Any) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise LabError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip() or p.stdout.strip()}")
    return p


@dataclass
class ComposeLab:
    """One compose project: ``docker-compose -p project -f files...`` with ``env`` added."""

    project: str
    files: tuple[str, ...] = ("docker-compose.yml",)
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path = REPO
    brokers: dict[int, str] = field(default_factory=lambda: {1: "broker1", 2: "broker2", 3: "broker3"})
    zookeeper: str = "zookeeper"

    def compose(self, *args: str, timeout: float = 180, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [compose_exe(), "-p", self.project]
        for f in self.files:
            cmd += ["-f", f]
        return run([*cmd, *args], timeout=timeout, check=check, cwd=self.cwd, env={**os.environ, **self.env})

    def services(self) -> list[str]:
        return [self.zookeeper, *self.brokers.values()]

    def up(self) -> None:
        self.compose("up", "-d", "--no-build")

    def down(self) -> None:
        self.compose("down", "-v", "--remove-orphans", "--timeout", "10")

    def container(self, service: str) -> str:
        """The service's container id, from its compose labels (`docker ps`: a docker-compose call costs
        a Python start, seconds on a loaded machine)."""
        cid = self.docker("ps", "-aq", "--filter", f"label=com.docker.compose.project={self.project}",
                          "--filter", f"label=com.docker.compose.service={service}").stdout.split()
        if len(cid) != 1:
            raise LabError(f"{self.project}: service {service} has {len(cid)} containers")
        return cid[0]

    def state(self, service: str) -> dict[str, Any]:
        out = run([docker_exe(), "inspect", "--format", "{{json .State}}", self.container(service)]).stdout
        return json.loads(out)

    def health(self, service: str) -> str:
        """'healthy', 'starting', 'unhealthy', or the container's status when it has no healthcheck."""
        st = self.state(service)
        return (st.get("Health") or {}).get("Status") or st.get("Status", "")

    def all_healthy(self) -> bool:
        return all(self.health(s) == "healthy" for s in self.services())

    def wait_healthy(self, timeout: float) -> None:
        """Until every service's healthcheck passes; on a timeout, the error shows each one's last checks
        and log lines."""
        try:
            wait_for(self.all_healthy, timeout, "every healthcheck to pass")
        except TimeoutError as e:
            lines = [str(e)]
            for s in self.services():
                try:
                    st = self.state(s)
                    checks = [(c.get("ExitCode"), c.get("Output", "").strip()[-200:])
                              for c in (st.get("Health") or {}).get("Log", [])[-2:]]
                    lines.append(f"{s}: {st.get('Status')}, health {(st.get('Health') or {}).get('Status')}: {checks}")
                except LabError as err:
                    lines.append(f"{s}: {err}")
                lines.append(self.compose("logs", "--no-color", "--tail", "15", s, check=False).stdout)
            raise LabError("\n".join(lines)) from e

    def pid(self, service: str) -> int:
        """The container's first process on the host (its namespaces are /proc/<pid>/ns/*)."""
        return int(self.state(service)["Pid"])

    def docker(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return run([docker_exe(), *args], timeout=timeout)

    def kill(self, service: str) -> None:
        self.docker("kill", self.container(service))

    def stop(self, service: str, timeout_s: int = 20) -> None:
        self.docker("stop", "--time", str(timeout_s), self.container(service), timeout=timeout_s + 30)

    def pause(self, service: str) -> None:
        self.docker("pause", self.container(service))

    def unpause(self, service: str) -> None:
        self.docker("unpause", self.container(service))

    def start(self, service: str) -> None:
        """Starts the service's stopped container again (what `docker-compose start` does)."""
        self.docker("start", self.container(service))

    def running(self, service: str) -> bool:
        return bool(self.state(service).get("Running"))

    def leftovers(self) -> dict[str, list[str]]:
        """Containers, networks and volumes still labelled with this project."""
        label = f"label=com.docker.compose.project={self.project}"
        out = {}
        for kind, cmd in (("containers", ["ps", "-aq"]), ("networks", ["network", "ls", "-q"]),
                          ("volumes", ["volume", "ls", "-q"])):
            out[kind] = self.docker(*cmd, "--filter", label).stdout.split()
        return out


def build_image(log_path: Path) -> str:
    """scripts/lab-image.sh on an engine that answers (started here, and stopped again, if none did);
    the image's tag."""
    engine = Dockerd.ensure(log_path)
    try:
        p = subprocess.run([str(REPO / "scripts" / "lab-image.sh")], stdout=subprocess.PIPE, text=True,
                           timeout=3600)
        if p.returncode != 0:
            raise LabError(f"scripts/lab-image.sh exited {p.returncode} (its output is above)")
        return p.stdout.strip()
    finally:
        engine.stop()


def main(argv: list[str] | None = None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="python3 -m launcher.lab", description="the docker-compose lab's image")
    ap.add_argument("action", choices=["image"], help="image: build the lab's image (scripts/lab-image.sh), "
                    "starting and then stopping a dockerd if none runs")
    ap.add_argument("--dockerd-log", default="/var/log/kafkasim-dockerd.log")
    args = ap.parse_args(argv)
    try:
        print(build_image(Path(args.dockerd_log)))
    except LabError as e:
        print(f"lab: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
