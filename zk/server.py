"""Embedded ZooKeeper: real ZooKeeper server processes (standalone or a 3-server ensemble).

Uses Debian's ``zookeeper`` package (``/usr/share/java/zookeeper.jar``) and a JVM. Each
server lives in its own directory holding ``zoo.cfg``, ``myid``, ``log4j.properties``, the
ZooKeeper data (``version-2/``), ``zookeeper.log`` and ``zookeeper.out`` (JVM stdout/stderr).

    python -m zk.server --root DIR [--servers 1|3] [--tick-ms N] [--port P] [--host H]

runs an ensemble in the foreground until SIGTERM/SIGINT and prints its connect string.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from util.jvm_archive import JvmArchive

JAVA_HINT = "Java not found: apt-get install openjdk-17-jre-headless (or run scripts/setup.sh)"
ZK_HINT = ("ZooKeeper not found: apt-get install zookeeper (Debian's package), "
           "or run scripts/setup.sh")
DEFAULT_ZK_JAR = "/usr/share/java/zookeeper.jar"
#: slf4j binding + log4j 1.2 from Debian; without them ZooKeeper logs nothing (NOP logger).
LOG_JARS = ("/usr/share/java/slf4j-log4j12.jar", "/usr/share/java/log4j-1.2.jar")
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
#: The JVM keeps both of its compilers, as a ZooKeeper started by zkServer.sh does: stopping at C1
#: (-XX:TieredStopAtLevel=1) starts a little faster but leaves ZooKeeper's hot paths about twice
#: as slow (a 1,000-op multi: 9.6 ms with C1 alone, 4.0 ms with C2, measured on this machine).
JVM_FLAGS = ["-Xms64m", "-Xmx256m", "-XX:+UseSerialGC",
             "-Xshare:auto", "-XX:-UsePerfData", "-Djava.net.preferIPv4Stack=true",
             "-Dzookeeper.admin.enableServer=false", "-Dzookeeper.4lw.commands.whitelist=*",
             "-Dzookeeper.jmx.log4j.disable=true"]
SERVING_MODES = ("standalone", "leader", "follower")
#: ZooKeeper's forceSync (fsync the transaction log before answering a write); "no" only where
#: short test sessions must not die of a disk flush stall.  Real files either way.
FORCE_SYNC_ENV = "KAFKASIM_ZK_FORCE_SYNC"
POLL_S = 0.05

Peer = tuple[int, int, int]  # (server id, quorum port, election port)


class ZooKeeperNotInstalled(RuntimeError):
    """Java or the ZooKeeper jar is missing; the message says what to install."""


def force_sync() -> str:
    """'yes' (ZooKeeper's default) unless $KAFKASIM_ZK_FORCE_SYNC says 'no'."""
    value = os.environ.get(FORCE_SYNC_ENV, "yes").strip().lower()
    if value not in ("yes", "no"):
        raise ValueError(f"${FORCE_SYNC_ENV} must be 'yes' or 'no', not {value!r}")
    return value


def find_java() -> str:
    """Path of the java binary: $KAFKASIM_JAVA, /usr/bin/java, or ``java`` on PATH."""
    override = os.environ.get("KAFKASIM_JAVA")
    if override:
        if os.access(override, os.X_OK):
            return override
        raise ZooKeeperNotInstalled(f"KAFKASIM_JAVA={override} is not executable. {JAVA_HINT}")
    if os.access("/usr/bin/java", os.X_OK):
        return "/usr/bin/java"
    found = shutil.which("java")
    if not found:
        raise ZooKeeperNotInstalled(JAVA_HINT)
    return found


def zookeeper_classpath() -> str:
    """Java classpath for the server: $KAFKASIM_ZK_CLASSPATH or Debian's jar (+ log jars)."""
    override = os.environ.get("KAFKASIM_ZK_CLASSPATH")
    if override:
        missing = [p for p in override.split(os.pathsep) if p and not os.path.exists(p)]
        if missing:
            raise ZooKeeperNotInstalled(
                f"KAFKASIM_ZK_CLASSPATH entry {missing[0]} does not exist. {ZK_HINT}")
        return override
    if not os.path.isfile(DEFAULT_ZK_JAR):
        raise ZooKeeperNotInstalled(f"{DEFAULT_ZK_JAR} is missing. {ZK_HINT}")
    return os.pathsep.join([DEFAULT_ZK_JAR, *(j for j in LOG_JARS if os.path.isfile(j))])


_handed_out: set[int] = set()
_LOWEST_PORT = 10000
_pick = random.Random()   # seeded from the system's entropy: each process its own ports, seldom adjacent ones


def _ephemeral_low() -> int:
    """The lowest port of the kernel's ephemeral range (the local ports of outgoing connections)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _port_range() -> tuple[int, int]:
    """[lo, hi): the ports below the ephemeral range, split between pytest-xdist's workers when run by one
    (each worker's processes, its tests' clusters included, take their ports from their own share)."""
    lo, hi = _LOWEST_PORT, _ephemeral_low()
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if worker.startswith("gw") and worker[2:].isdigit() and count.isdigit() and int(count) > 0:
        share = (hi - lo) // int(count)
        lo += int(worker[2:]) % int(count) * share
        hi = lo + share
    return lo, hi


def bindable(host: str, port: int) -> bool:
    """Whether a TCP socket can bind ``host``:``port`` now (nothing holds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1", paired: int = 0) -> int:
    """A currently free TCP port on ``host``, never the same one twice in this process.

    Taken below the kernel's ephemeral range: a port from that range (``bind(0)``) can be taken as the local
    port of any outgoing connection before its server binds it (a cluster's broker then failed to start with
    EADDRINUSE).  Each process picks at random in its share of the range, so that two processes seldom try the
    same port and callers that take the ports next to one (``port + 1``) seldom meet another's; a port
    something holds is skipped.

    ``paired``: the port ``p`` returned has ``p + paired`` free too, below the ephemeral range, and both are
    handed out.  A broker with no ``listeners`` puts its Kafka listener at its gRPC port + 10,000
    (``node.config.KAFKA_PORT_OFFSET``): a cluster's ports picked one by one once gave a broker the port of
    another's default listener, and the cluster refused its config."""
    lo, hi = _port_range()
    if paired:
        return _free_pair(host, lo, hi, paired)
    if hi - lo < 100:   # no room below the ephemeral range: the kernel's choice
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind((host, 0))
                port = s.getsockname()[1]
            if port not in _handed_out:
                _handed_out.add(port)
                return port
    for _ in range(10 * (hi - lo)):
        port = _pick.randrange(lo, hi)
        if port not in _handed_out and bindable(host, port):
            _handed_out.add(port)
            return port
    raise OSError(f"no free TCP port on {host} in {lo}..{hi - 1}")


def _free_pair(host: str, lo: int, hi: int, offset: int) -> int:
    """``free_port``'s pick of a port whose partner ``+ offset`` is free as well, both below the ephemeral range:
    in this process's share when the partners fit under the range's top, else anywhere below it."""
    top = _ephemeral_low() - offset
    if min(hi, top) - lo < 100:
        lo, hi = _LOWEST_PORT, top
    hi = min(hi, top)
    if hi - lo < 1:
        raise OSError(f"no TCP port pair {offset} apart below the ephemeral range on {host}")
    for _ in range(10 * (hi - lo)):
        port = _pick.randrange(lo, hi)
        pair = (port, port + offset)
        if all(p not in _handed_out for p in pair) and all(bindable(host, p) for p in pair):
            _handed_out.update(pair)
            return port
    raise OSError(f"no free TCP port pair {offset} apart on {host} in {lo}..{hi - 1}")


def _poll(cond: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``cond`` every POLL_S seconds until it holds; TimeoutError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.1f}s waiting for {what}")
        time.sleep(POLL_S)


def _dial_host(host: str) -> str:
    """Address to connect to for a server bound to ``host`` (wildcards -> loopback)."""
    return "127.0.0.1" if host in ("0.0.0.0", "", "::") else host


def four_letter_word(host: str, port: int, cmd: str = "srvr", timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter word and return the whole reply ('' on any error)."""
    try:
        with socket.create_connection((_dial_host(host), port), timeout=timeout) as s:
            s.sendall(cmd.encode())
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


def _pid_alive(pid: int, marker: str) -> bool:
    """True when ``pid`` exists and is a ZooKeeper JVM whose command line contains ``marker``."""
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().decode(errors="replace")
    except (ProcessLookupError, PermissionError, FileNotFoundError):
        return False
    return MAIN_CLASS in cmdline and marker in cmdline


class ZooKeeperServer:
    """One ZooKeeper server process (standalone when ``peers`` is None)."""

    def __init__(self, data_dir: Path, client_port: int, tick_ms: int = 200, server_id: int = 1,
                 peers: list[Peer] | None = None, host: str = "127.0.0.1",
                 min_session_timeout_ms: int | None = None,
                 max_session_timeout_ms: int = 60000, peer_hosts: dict[int, str] | None = None,
                 prefix: list[str] | None = None, archive_flags: list[str] | None = None) -> None:
        """``archive_flags``: the JVM's class-data archive flags, instead of ZooKeeper's archive's (for the
        server that writes that archive)."""
        self.data_dir = Path(data_dir).resolve()
        self.archive_flags = archive_flags
        self.peer_hosts = dict(peer_hosts or {})   # server id -> host, when the servers differ in host
        self.prefix = list(prefix or [])          # e.g. ["ip", "netns", "exec", NS]: run it elsewhere
        self.client_port = client_port
        self.tick_ms = tick_ms
        self.server_id = server_id
        self.peers: list[Peer] | None = (
            [(int(a), int(b), int(c)) for a, b, c in peers] if peers else None)
        self.host = host
        self.min_session_timeout_ms = min_session_timeout_ms or 2 * tick_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid: int | None = None

    @property
    def config_path(self) -> Path:
        return self.data_dir / "zoo.cfg"

    @property
    def pid(self) -> int | None:
        return self._pid

    @property
    def address(self) -> str:
        """``host:port`` a client should dial."""
        return f"{_dial_host(self.host)}:{self.client_port}"

    def _config(self) -> str:
        tick = self.tick_ms
        lines = [f"tickTime={tick}", f"dataDir={self.data_dir}", f"clientPort={self.client_port}",
                 f"clientPortAddress={self.host}",
                 f"minSessionTimeout={self.min_session_timeout_ms}",
                 f"maxSessionTimeout={self.max_session_timeout_ms}",
                 "admin.enableServer=false", "4lw.commands.whitelist=*",
                 "maxClientCnxns=0", "autopurge.snapRetainCount=3", "autopurge.purgeInterval=0",
                 f"forceSync={force_sync()}"]
        if self.peers:
            # initLimit/syncLimit are in ticks: give the JVMs a few seconds whatever the tick.
            lines += [f"initLimit={max(10, 10000 // tick)}", f"syncLimit={max(5, 2000 // tick)}",
                      "reconfigEnabled=false"]
            if self.host in ("0.0.0.0", ""):
                lines.append("quorumListenOnAllIPs=true")
            peer_host = _dial_host(self.host)
            lines += [f"server.{sid}={self.peer_hosts.get(sid, peer_host)}:{qport}:{eport}"
                      for sid, qport, eport in self.peers]
        return "\n".join(lines) + "\n"

    def _log4j(self) -> str:
        return ("log4j.rootLogger=INFO, FILE\n"
                "log4j.appender.FILE=org.apache.log4j.RollingFileAppender\n"
                f"log4j.appender.FILE.File={self.data_dir / 'zookeeper.log'}\n"
                "log4j.appender.FILE.MaxFileSize=10MB\n"
                "log4j.appender.FILE.MaxBackupIndex=2\n"
                "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout\n"
                "log4j.appender.FILE.layout.ConversionPattern="
                "%d{ISO8601} [myid:%X{myid}] %-5p [%t:%C{1}@%L] - %m%n\n")

    def command(self) -> list[str]:
        """The java command line (raises ZooKeeperNotInstalled when something is missing)."""
        java, classpath = find_java(), zookeeper_classpath()
        archive = archive_flags() if self.archive_flags is None else self.archive_flags
        return [java, *JVM_FLAGS, *archive, f"-Dzookeeper.log.dir={self.data_dir}",
                f"-Dlog4j.configuration=file:{self.data_dir / 'log4j.properties'}",
                "-cp", classpath, MAIN_CLASS, str(self.config_path)]

    def start(self) -> None:
        """Write the config files and spawn the JVM (returns at once; see wait_ready)."""
        if self.is_running():
            raise RuntimeError(f"ZooKeeper server {self.server_id} is already running")
        cmd = self.prefix + self.command()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(self._config())
        (self.data_dir / "myid").write_text(f"{self.server_id}\n")
        (self.data_dir / "log4j.properties").write_text(self._log4j())
        with open(self.data_dir / "zookeeper.out", "ab") as out:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                          stderr=subprocess.STDOUT, cwd=self.data_dir,
                                          start_new_session=True)
        self._pid = self._proc.pid

    def is_running(self) -> bool:
        """True while the server process exists (a stopped/paused one counts as running)."""
        if self._pid is None:
            return False
        if self._proc is not None:
            return self._proc.poll() is None
        return _pid_alive(self._pid, str(self.config_path))

    def _signal(self, sig: int) -> None:
        if self._pid is not None and self.is_running():
            try:
                os.kill(self._pid, sig)
            except ProcessLookupError:
                pass

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (after SIGCONT, in case it is paused), then SIGKILL after ``timeout``."""
        if not self.is_running():
            self._reap()
            return
        self._signal(signal.SIGCONT)
        self._signal(signal.SIGTERM)
        try:
            _poll(lambda: not self.is_running(), timeout, f"zk{self.server_id} to exit")
        except TimeoutError:
            self.kill()
        self._reap()

    def kill(self) -> None:
        """SIGKILL the server and wait until it is gone (a crash, for chaos tests)."""
        self._signal(signal.SIGKILL)
        _poll(lambda: not self.is_running(), 10.0, f"zk{self.server_id} to die")
        self._reap()

    def _reap(self) -> None:
        if self._proc is not None:
            self._proc.wait()

    def pause(self, timeout: float = 5.0) -> None:
        """SIGSTOP: the server freezes (its sessions and quorum links time out).  Returns once every thread
        of the JVM is stopped: the signal is delivered asynchronously, and a thread still running a moment
        after kill() could answer one more request."""
        self._signal(signal.SIGSTOP)
        if self._pid is None:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self._all_threads_stopped():
            time.sleep(0.005)   # polling /proc for the stop to land

    def _all_threads_stopped(self) -> bool:
        try:
            tasks = list(Path(f"/proc/{self._pid}/task").iterdir())
            states = [(t / "stat").read_text().rsplit(")", 1)[1].split()[0] for t in tasks]
        except (OSError, IndexError):
            return True   # gone: nothing left to answer
        return all(st in ("T", "t", "Z", "X") for st in states)

    def resume(self) -> None:
        """SIGCONT after pause()."""
        self._signal(signal.SIGCONT)

    def srvr(self) -> str:
        """Reply to the ``srvr`` four-letter word ('' when unreachable)."""
        return four_letter_word(self.host, self.client_port, "srvr")

    def mode(self) -> str | None:
        """'standalone', 'leader' or 'follower' while serving, else None."""
        for line in self.srvr().splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return None

    def wait_ready(self, timeout: float = 30.0) -> str:
        """Poll ``srvr`` until the server serves; returns its mode. Fails fast if it exits."""
        modes: list[str] = []

        def ready() -> bool:
            if not self.is_running():
                raise RuntimeError(f"ZooKeeper server {self.server_id} exited; see "
                                   f"{self.data_dir / 'zookeeper.out'} and zookeeper.log")
            mode = self.mode()
            if mode in SERVING_MODES:
                modes.append(mode)
                return True
            return False

        _poll(ready, timeout, f"zk{self.server_id} on {self.address} to serve")
        return modes[-1]

    def to_dict(self) -> dict[str, Any]:
        return {"data_dir": str(self.data_dir), "client_port": self.client_port,
                "tick_ms": self.tick_ms, "server_id": self.server_id,
                "peers": [list(p) for p in self.peers] if self.peers else None,
                "host": self.host, "min_session_timeout_ms": self.min_session_timeout_ms,
                "max_session_timeout_ms": self.max_session_timeout_ms, "pid": self._pid}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ZooKeeperServer:
        """Rebuild a handle (possibly in another process); stop/kill then work by pid."""
        server = cls(Path(d["data_dir"]), d["client_port"], d["tick_ms"], d["server_id"],
                     d.get("peers"), d.get("host", "127.0.0.1"),
                     d.get("min_session_timeout_ms"), d.get("max_session_timeout_ms", 60000))
        server._pid = d.get("pid")
        return server


def archive_flags() -> list[str]:
    """The JVM flags that map ZooKeeper's class-data archive (util/jvm_archive.py), written first when there is
    none ([] when none can be had)."""
    return JvmArchive("zookeeper", find_java(), zookeeper_classpath(), JVM_FLAGS).flags(write_archive)


def write_archive(flags: list[str]) -> None:
    """ZooKeeper's class-data archive (util/jvm_archive.py), written by a standalone server started with
    ``flags``, serving, then stopped (SIGTERM): the classes of a start."""
    with tempfile.TemporaryDirectory(prefix="kafkasim-zk-archive-") as d:
        server = ZooKeeperServer(Path(d), free_port(), archive_flags=flags)
        server.start()
        try:
            server.wait_ready(60.0)
        finally:
            server.stop(30.0)
        code = server._proc.returncode if server._proc is not None else None
        if code not in (0, 143):   # killed (stop's SIGKILL), perhaps in the middle of writing: not kept
            raise RuntimeError(f"the ZooKeeper writing the class-data archive exited {code}")


class EmbeddedZooKeeper:
    """A standalone server or a 3-server ensemble under ``root`` (``root/zk<id>``)."""

    def __init__(self, root: Path, servers: int = 1, tick_ms: int = 200, host: str = "127.0.0.1",
                 client_ports: list[int] | None = None, hosts: list[str] | None = None,
                 prefixes: list[list[str]] | None = None) -> None:
        """``hosts``/``prefixes`` (one per server) put each server on its own address, run
        through a command prefix (a chaos run's network namespaces); else all on ``host``."""
        if servers not in (1, 3):
            raise ValueError(f"servers must be 1 or 3, not {servers}")
        if client_ports is not None and len(client_ports) != servers:
            raise ValueError(f"need {servers} client ports, got {len(client_ports)}")
        self.root = Path(root).resolve()
        self.tick_ms = tick_ms
        self.host = host
        own = hosts is not None   # a host each: the well-known ports are free on every one
        ports = client_ports or ([2181] * servers if own else [free_port() for _ in range(servers)])
        peers: list[Peer] | None = None
        if servers == 3:
            peers = [(i + 1, 2888, 3888) if own else (i + 1, free_port(), free_port()) for i in range(servers)]
        peer_hosts = {i + 1: h for i, h in enumerate(hosts)} if own else None
        self.servers: list[ZooKeeperServer] = [
            ZooKeeperServer(self.root / f"zk{i + 1}", ports[i], tick_ms, i + 1, peers,
                            hosts[i] if own else host, peer_hosts=peer_hosts,
                            prefix=prefixes[i] if prefixes else None)
            for i in range(servers)]

    @property
    def connect_string(self) -> str:
        return ",".join(s.address for s in self.servers)

    def __enter__(self) -> "EmbeddedZooKeeper":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout: float = 30.0) -> None:
        """Start every server and wait until the ensemble serves (one leader for 3)."""
        try:
            for server in self.servers:
                server.start()
            self.wait_serving(timeout)
        except BaseException:
            self.stop()
            raise

    def modes(self) -> dict[int, str | None]:
        """Current mode of every server, by server id."""
        return {s.server_id: s.mode() for s in self.servers}

    def leader(self) -> ZooKeeperServer | None:
        """The current leader (or the standalone server), if any."""
        for server in self.servers:
            if server.mode() in ("leader", "standalone"):
                return server
        return None

    def wait_serving(self, timeout: float = 30.0) -> None:
        """Poll until every *running* server serves and exactly one leads (quorum formed)."""
        def serving() -> bool:
            live = [s for s in self.servers if s.is_running()]
            if len(live) * 2 <= len(self.servers):
                raise RuntimeError(f"only {len(live)} of {len(self.servers)} servers running")
            modes = [s.mode() for s in live]
            if len(self.servers) == 1:
                return modes == ["standalone"]
            return (all(m in ("leader", "follower") for m in modes)
                    and modes.count("leader") == 1)

        _poll(serving, timeout, f"ZooKeeper at {self.connect_string} to serve")

    def stop(self, timeout: float = 10.0) -> None:
        """Stop every server (SIGTERM, then SIGKILL)."""
        for server in self.servers:
            server.stop(timeout)

    def to_dict(self) -> dict[str, Any]:
        return {"root": str(self.root), "tick_ms": self.tick_ms, "host": self.host,
                "connect_string": self.connect_string,
                "servers": [s.to_dict() for s in self.servers]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EmbeddedZooKeeper:
        """Rebuild from to_dict() output, e.g. to stop an ensemble started by another process."""
        zk = cls.__new__(cls)
        zk.root = Path(d["root"])
        zk.tick_ms = d["tick_ms"]
        zk.host = d.get("host", "127.0.0.1")
        zk.servers = [ZooKeeperServer.from_dict(s) for s in d["servers"]]
        return zk


def main(argv: list[str] | None = None) -> int:
    """Run an ensemble in the foreground until SIGTERM/SIGINT."""
    ap = argparse.ArgumentParser(prog="python -m zk.server", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, required=True, help="directory for server data")
    ap.add_argument("--servers", type=int, choices=(1, 3), default=1)
    ap.add_argument("--tick-ms", type=int, default=200)
    ap.add_argument("--port", type=int, default=None,
                    help="client port of server 1 (servers 2, 3 use port+1, port+2)")
    ap.add_argument("--host", default="127.0.0.1", help="bind address (0.0.0.0 in containers)")
    ap.add_argument("--timeout", type=float, default=60.0, help="start-up timeout, seconds")
    args = ap.parse_args(argv)

    ports = [args.port + i for i in range(args.servers)] if args.port else None
    try:
        zk = EmbeddedZooKeeper(args.root, args.servers, args.tick_ms, args.host, ports)
    except ZooKeeperNotInstalled as e:
        print(e, file=sys.stderr)
        return 2
    stopping: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        zk.start(args.timeout)
    except (ZooKeeperNotInstalled, RuntimeError, TimeoutError) as e:
        print(f"ZooKeeper failed to start: {e}", file=sys.stderr)
        return 1
    print(zk.connect_string, flush=True)
    # Block the signals only now (children inherit the mask) and wait for them synchronously.
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM, signal.SIGINT])
    try:
        while not stopping:
            if not any(s.is_running() for s in zk.servers):
                print("all ZooKeeper servers exited", file=sys.stderr)
                return 1
            if signal.sigtimedwait([signal.SIGTERM, signal.SIGINT], 1.0) is not None:
                break
    finally:
        zk.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
