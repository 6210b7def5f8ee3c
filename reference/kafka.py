"""Real Kafka 2.8.2 brokers beside kafkasim: ``ReferenceCluster(cfg).up()``.

Each broker is one JVM started as ``bin/kafka-server-start.sh`` starts it (``kafka.Kafka server.properties``
with the distribution's JVM options, a smaller heap), on the cluster.yaml's ZooKeeper, or on an embedded
Debian ZooKeeper of its own, under a chroot of its own (``/kafka-reference``).  Its ``server.properties`` is
the cluster.yaml translated by ``reference/properties.py``; its listeners are on 127.0.0.1, on free ports
(or kafkasim's listener ports plus an offset), recorded with the pids in ``<run.dir>/reference/reference.json``
so that ``kafkasim reference status|down`` and the signals find them from another process.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from node.config import ClusterConfig
from util.procs import process_state
from util.waiting import wait_for
from reference.jars import ensure_jars
from reference.jvm import MAIN_CLASS, STARTED, STARTING, archive_flags, broker_command
from reference.properties import broker_properties, cluster_properties, render
from zk import paths
from zk.client import ZkClient
from zk.errors import NoNode
from zk.server import EmbeddedZooKeeper, free_port

STATE_FILE = "reference.json"
DEFAULT_CHROOT = "/kafka-reference"
DEFAULT_HEAP_MB = 512
#: the group `up` asks a coordinator for, to make Kafka create __consumer_offsets (eager creation)
PROBE_GROUP = "kafkasim-reference-up"
#: A broker whose ZooKeeper did not answer its start-up in time (its session expired while a busy machine kept
#: it from running, or it could not connect) dies: Kafka 2.8.2 logs "Fatal error during KafkaServer startup" and
#: exits, for its supervisor to start it again.  While a cluster comes up (``up``, ``wait_ready(restart=True)``)
#: the reference is that supervisor, this many times per broker; any other exit ends the wait with its log.
STARTUP_RESTARTS = 2
STARTUP_FATAL = b"Fatal error during KafkaServer startup"
ZOOKEEPER_FAILURES = (b"SessionExpiredException", b"ZooKeeperClientTimeoutException", b"ConnectionLossException")


def all_threads_stopped(pid: int) -> bool:
    """Whether every thread of ``pid`` is stopped (a SIGSTOP reaches a JVM's threads one by one)."""
    try:
        states = [(t / "stat").read_text().rsplit(")", 1)[1].split()[0] for t in Path(f"/proc/{pid}/task").iterdir()]
    except (OSError, IndexError):
        return True
    return all(s in ("T", "t", "Z", "X") for s in states)


def rss_kb(pid: int | None) -> int | None:
    """The resident set of ``pid`` in KiB (VmRSS), None when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError, TypeError):
        pass
    return None


class ReferenceCluster:
    """Kafka 2.8.2 brokers with ``cfg``'s ids and settings.

    ``zookeeper``: a ZooKeeper connect string (optionally with a chroot) to use instead of the cluster.yaml's;
    ``chroot``: appended to it; ``port_offset``: each broker listens on its kafkasim Kafka listener ports plus
    this (default: free ports); ``extra``: more Kafka keys for every broker's server.properties;
    ``class_archive``: the brokers map the class-data archive (reference/jvm.py: a faster start, some shared
    memory); False starts them exactly as the distribution's script does, for the benchmarks' figures.
    """

    def __init__(self, cfg: ClusterConfig, *, zookeeper: str | None = None, chroot: str = DEFAULT_CHROOT,
                 port_offset: int | None = None, extra: Mapping[str, Any] | None = None,
                 heap_mb: int = DEFAULT_HEAP_MB, config_path: Path | str | None = None, class_archive: bool = True):
        if isinstance(heap_mb, bool) or not isinstance(heap_mb, int) or heap_mb < 128:
            raise ValueError(f"heap_mb must be an integer of at least 128 (MB), got {heap_mb!r}")
        if not chroot.startswith("/") or chroot.endswith("/") or "//" in chroot:
            raise ValueError(f"chroot {chroot!r} must be an absolute ZooKeeper path, like /kafka-reference")
        cluster_properties(cfg)   # a key Kafka 2.8.2 cannot be given fails here, before anything starts
        self.cfg = cfg
        self.config_path = str(Path(config_path).resolve()) if config_path else cfg.source
        self.root = cfg.run_dir / "reference"
        self.state_path = self.root / STATE_FILE
        self.chroot = chroot
        self.port_offset = port_offset
        self.extra = dict(extra or {})
        self.heap_mb = heap_mb
        self.class_archive = class_archive
        self.zk_base = zookeeper or cfg.zookeeper_connect   # None: an embedded ZooKeeper of our own
        self.zk_embedded: EmbeddedZooKeeper | None = None
        self.pids: dict[int, int] = {}
        self.ports: dict[int, dict[str, int]] = {}   # broker id -> listener name -> port
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self._log_marks: dict[int, int] = {}          # broker id -> server.log's size when we last started it
        self._stopped: set[int] = set()               # brokers we killed or stopped on purpose (not an exit to report)
        self._restarts: dict[int, int] = {}           # broker id -> start-ups we began again (STARTUP_RESTARTS)
        #: what was started again while coming up, one line each ("broker 3's start-up failed (...)")
        self.startup_restarts: list[str] = []
        self._zk: ZkClient | None = None
        self._load_state()

    # ------------------------------------------------------------------ state file

    def _load_state(self) -> None:
        try:
            state = json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            return
        self.chroot = state.get("chroot", self.chroot)
        zk = state.get("zookeeper", {})
        self.zk_base = zk.get("connect", self.zk_base)
        if zk.get("servers"):
            self.zk_embedded = EmbeddedZooKeeper.from_dict(zk["servers"])
        for b, v in state.get("brokers", {}).items():
            self.ports[int(b)] = {k: int(p) for k, p in v["listeners"].items()}
            if v.get("pid"):
                self.pids[int(b)] = v["pid"]

    def _save_state(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        state = {"config": self.config_path, "chroot": self.chroot, "zk_connect": self.zk_connect_or_none,
                 "zookeeper": {"connect": self.zk_base, "owned": self.zk_embedded is not None,
                               "servers": self.zk_embedded.to_dict() if self.zk_embedded else None},
                 "brokers": {str(b.id): {"pid": self.pids.get(b.id), "listeners": self.listeners(b.id),
                                         "dir": str(self.broker_dir(b.id))} for b in self.cfg.brokers}}
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self.state_path)

    # ------------------------------------------------------------------ addresses

    @property
    def zk_connect_or_none(self) -> str | None:
        return None if self.zk_base is None else self.zk_base + self.chroot

    @property
    def zk_connect(self) -> str:
        """The brokers' zookeeper.connect: ZooKeeper's hosts and the reference's chroot."""
        if self.zk_base is None:
            raise RuntimeError("no ZooKeeper yet: run `kafkasim reference up` first "
                               f"({self.state_path} not found)")
        return self.zk_base + self.chroot

    @property
    def zk_chroot(self) -> str:
        """The reference's chroot path in ZooKeeper (under the cluster.yaml's own chroot, if it has one)."""
        base = self.zk_base or ""
        return (("/" + base.split("/", 1)[1]) if "/" in base else "") + self.chroot

    def listeners(self, broker_id: int) -> dict[str, int]:
        """Broker ``broker_id``'s listener names and 127.0.0.1 ports, chosen on first use and kept."""
        if broker_id not in self.ports:
            spec = self.cfg.broker(broker_id)
            ports: dict[str, int] = {}
            for name, _host, port in spec.kafka_listeners:
                if self.port_offset is None:
                    ports[name] = free_port()
                    continue
                p = port + self.port_offset
                if not 0 < p < 65536:
                    raise ValueError(f"broker {broker_id}: listener {name} port {port} + offset {self.port_offset} "
                                     f"is not a port")
                ports[name] = p
            self.ports[broker_id] = ports
        return self.ports[broker_id]

    def listener(self, broker_id: int) -> tuple[str, int]:
        """The (host, port) a client dials for broker ``broker_id`` (its first listener)."""
        return "127.0.0.1", next(iter(self.listeners(broker_id).values()))

    @property
    def bootstrap_servers(self) -> str:
        return ",".join("%s:%d" % self.listener(b.id) for b in self.cfg.brokers)

    def broker_dir(self, broker_id: int) -> Path:
        return self.root / f"broker-{broker_id}"

    # ------------------------------------------------------------------ ZooKeeper

    def start_zookeeper(self, timeout: float = 60.0) -> None:
        """An embedded ZooKeeper of our own when the cluster.yaml names none (not kafkasim's: its port)."""
        if self.zk_base is not None and self.zk_embedded is None:
            return
        if self.zk_embedded and all(s.is_running() for s in self.zk_embedded.servers):
            return
        self.zk_embedded = EmbeddedZooKeeper(self.root / "zookeeper",
                                             servers=self.cfg.get("zookeeper.embedded.servers"),
                                             tick_ms=self.cfg.get("zookeeper.embedded.tick.time.ms"))
        self.zk_embedded.start(timeout=timeout)
        self.zk_base = self.zk_embedded.connect_string
        self._save_state()

    def zk(self) -> ZkClient:
        """A client under the reference's chroot (Kafka's znodes at their usual paths)."""
        if self._zk is None:
            self._zk = ZkClient(self.zk_connect, self.cfg.session_timeout_ms, 10_000)
            self._zk.start()
        return self._zk

    def close(self) -> None:
        if self._zk is not None:
            self._zk.stop()
            self._zk = None

    def registrations(self) -> dict[int, dict[str, Any]]:
        """Each registered broker's ``/brokers/ids/<id>`` JSON, as Kafka wrote it."""
        out = {}
        for child in self.zk().get_children(paths.BROKER_IDS):
            try:
                data, _ = self.zk().get(paths.broker(int(child)))
            except NoNode:
                continue
            out[int(child)] = json.loads(data)
        return out

    def controller(self) -> int | None:
        return self.zk().read_controller()

    # ------------------------------------------------------------------ processes

    def properties(self, broker_id: int) -> dict[str, str]:
        return broker_properties(self.cfg, broker_id, listeners=self.listeners(broker_id), zk_connect=self.zk_connect,
                                 log_dir=str(self.broker_dir(broker_id) / "data"), extra=self.extra)

    def command(self, broker_id: int) -> list[str]:
        """Broker ``broker_id``'s JVM command line; with ``class_archive``, the brokers' class-data archive's
        flags too (reference/jvm.py; the archive written first by a broker of its own when this JDK and these jars
        have none)."""
        d = self.broker_dir(broker_id)
        return broker_command(self.heap_mb, d / "logs", d / "server.properties",
                              archive_flags() if self.class_archive else ())

    def is_running(self, broker_id: int) -> bool:
        """Our JVM for this broker exists (running or paused); a reused pid does not count."""
        proc = self._procs.get(broker_id)
        if proc is not None and proc.pid == self.pids.get(broker_id):
            return proc.poll() is None    # ours (its exec of java may not have happened yet)
        pid = self.pids.get(broker_id)
        if process_state(pid) == "dead":
            return False
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            return False
        return MAIN_CLASS in cmdline and str(self.broker_dir(broker_id) / "server.properties") in cmdline

    def state(self, broker_id: int) -> str:
        """'running', 'paused' or 'dead'."""
        return process_state(self.pids.get(broker_id)) if self.is_running(broker_id) else "dead"

    def start(self, broker_id: int, wait: bool = True, timeout: float = 90.0) -> int:
        """Start broker ``broker_id``'s JVM (its data and ports as before) and, with ``wait``, wait until it has
        started (:meth:`started`); returns its pid."""
        if self.is_running(broker_id):
            raise RuntimeError(f"reference broker {broker_id} is already running (pid {self.pids[broker_id]})")
        self.port_free_or_fail(broker_id)
        d = self.broker_dir(broker_id)
        (d / "logs").mkdir(parents=True, exist_ok=True)
        (d / "server.properties").write_text(render(self.properties(broker_id)))
        log = d / "logs" / "server.log"
        self._log_marks[broker_id] = log.stat().st_size if log.exists() else 0
        with open(d / "logs" / "kafka.out", "ab") as out:
            proc = subprocess.Popen(self.command(broker_id), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True, cwd=str(d))
        self._procs[broker_id] = proc
        self.pids[broker_id] = proc.pid
        self._stopped.discard(broker_id)
        self._save_state()
        if wait:
            self.wait_alive(lambda: self.started(broker_id), timeout, f"reference broker {broker_id} to start")
        return proc.pid

    def _logged_since_start(self, broker_id: int) -> bytes:
        """What broker ``broker_id``'s server.log gained since we last started it."""
        log = self.broker_dir(broker_id) / "logs" / "server.log"
        try:
            with open(log, "rb") as f:
                mark = self._log_marks.get(broker_id, 0)
                f.seek(mark if mark <= os.fstat(f.fileno()).st_size else 0)
                return f.read()
        except OSError:
            return b""

    def started(self, broker_id: int) -> bool:
        """The broker's last start-up is over: it logged ``started`` after its last ``starting``.  Until then
        Kafka 2.8.2 answers SIGTERM by halting without its controlled shutdown ("Kafka server is still starting
        up, cannot shut down!"), its registration left for the session timeout to remove."""
        text = self._logged_since_start(broker_id)
        return text.rfind(STARTED) > text.rfind(STARTING)

    def startup_failure(self, broker_id: int) -> str | None:
        """The exception broker ``broker_id``'s last start-up died of, when it was ZooKeeper not answering in
        time (:data:`ZOOKEEPER_FAILURES`); None for any other ending, or none yet."""
        text = self._logged_since_start(broker_id)
        at = text.rfind(STARTUP_FATAL)
        if at < 0:
            return None
        cause = text[at:].splitlines()[1:2]   # the exception's line follows the ERROR line
        if cause and any(name in cause[0] for name in ZOOKEEPER_FAILURES):
            return cause[0].decode(errors="replace").strip()
        return None

    def port_free_or_fail(self, broker_id: int) -> None:
        for name, port in self.listeners(broker_id).items():
            with socket.socket() as s:
                # as Java's server sockets bind: a killed broker's connections in TIME_WAIT do not stop it
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind(("127.0.0.1", port))
                except OSError as e:
                    raise RuntimeError(f"reference broker {broker_id}: listener {name} port {port} is taken "
                                       f"({e.strerror})") from e

    def _signal(self, broker_id: int, sig: signal.Signals) -> int:
        if not self.is_running(broker_id):
            raise RuntimeError(f"reference broker {broker_id} is not running")
        pid = self.pids[broker_id]
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self._stopped.add(broker_id)
        os.kill(pid, sig)
        return pid

    def _exited(self, broker_id: int) -> bool:
        return not self.is_running(broker_id)   # polling our own child reaps it

    def wait_exit(self, broker_id: int, timeout: float) -> None:
        wait_for(lambda: self._exited(broker_id), timeout,
                 f"reference broker {broker_id} (pid {self.pids.get(broker_id)}) to exit")

    def kill(self, broker_id: int, timeout: float = 10.0) -> None:
        """SIGKILL, and wait until the JVM is gone (its ZooKeeper session lives on until it expires)."""
        self._signal(broker_id, signal.SIGKILL)
        self.wait_exit(broker_id, timeout)

    def terminate(self, broker_id: int, timeout: float = 60.0) -> None:
        """SIGTERM (Kafka's controlled shutdown when enabled), and wait until the JVM exits."""
        self._signal(broker_id, signal.SIGCONT)   # a paused JVM cannot act on SIGTERM
        self._signal(broker_id, signal.SIGTERM)
        self.wait_exit(broker_id, timeout)

    def pause(self, broker_id: int, timeout: float = 5.0) -> None:
        """SIGSTOP; returns once every thread of the JVM has stopped."""
        pid = self._signal(broker_id, signal.SIGSTOP)
        wait_for(lambda: all_threads_stopped(pid), timeout, f"every thread of reference broker {broker_id} to stop")

    def resume(self, broker_id: int) -> None:
        self._signal(broker_id, signal.SIGCONT)

    def stop(self, broker_id: int, timeout: float = 30.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``; nothing when it is not running."""
        if not self.is_running(broker_id):
            return
        try:
            self.terminate(broker_id, timeout)
        except TimeoutError:
            self.kill(broker_id)

    def rss_kb(self, broker_id: int) -> int | None:
        return rss_kb(self.pids.get(broker_id)) if self.is_running(broker_id) else None

    # ------------------------------------------------------------------ the whole cluster

    def up(self, timeout: float = 120.0) -> dict[str, Any]:
        """Fetch the jars if needed, start ZooKeeper (when ours) and every broker not running, and wait
        until ready (see :meth:`wait_ready`, a start-up ZooKeeper failed started again); returns
        :meth:`status`."""
        ensure_jars()
        self.start_zookeeper()
        for b in self.cfg.brokers:
            if not self.is_running(b.id):
                self.start(b.id, wait=False)
        self.wait_ready(timeout, restart=True)
        return self.status()

    def wait_ready(self, timeout: float = 120.0, restart: bool = False) -> None:
        """Every broker is registered and has finished its start-up, a controller is elected, every broker's
        Metadata names every broker and the controller; with ``kafkasim.offsets.topic.eager.create`` (as
        kafkasim's ``cluster up`` waits), __consumer_offsets exists and each of its partitions has a leader.
        ``restart``: a broker whose start-up ZooKeeper failed is started again (:data:`STARTUP_RESTARTS`)."""
        deadline = time.monotonic() + timeout
        ids = sorted(b.id for b in self.cfg.brokers)
        self.wait_alive(lambda: sorted(self.zk().read_brokers()) == ids and self.controller() is not None, timeout,
                        f"reference brokers {ids} to register and elect a controller", restart=restart)
        self.wait_alive(lambda: all(self.started(b) for b in ids), max(1.0, deadline - time.monotonic()),
                        "every reference broker to finish its start-up", restart=restart)
        self.wait_alive(lambda: all(self._metadata_complete(b) for b in ids), max(1.0, deadline - time.monotonic()),
                        "every reference broker's Metadata to name every broker and the controller", 0.1)
        if self.cfg.get("kafkasim.offsets.topic.eager.create"):
            self._create_offsets_topic(max(1.0, deadline - time.monotonic()))

    def wait_alive(self, cond: Callable[[], Any], timeout: float, what: str, interval: float = 0.05,
                   restart: bool = False) -> Any:
        """wait_for(cond), but a broker we started exiting ends the wait at once with its log (wait_for takes
        the condition's exceptions for "not yet"); with ``restart``, one whose start-up ZooKeeper failed is
        started again instead (:meth:`restart_failed_startups`)."""
        exited: list[RuntimeError] = []

        def step() -> Any:
            try:
                if restart:
                    self.restart_failed_startups()
                self.check_alive()
            except RuntimeError as e:
                exited.append(e)
                return True
            return cond()

        value = wait_for(step, timeout, what, interval)
        if exited:
            raise exited[0]
        return value

    def restart_failed_startups(self) -> list[int]:
        """Start again each broker we started that has exited because ZooKeeper failed its start-up
        (:meth:`startup_failure`), at most :data:`STARTUP_RESTARTS` times each; returns their ids.  Each is
        recorded in :attr:`startup_restarts`."""
        again = []
        for b in self.cfg.brokers:
            if b.id not in self.pids or b.id in self._stopped or self.is_running(b.id):
                continue
            cause = self.startup_failure(b.id)
            if cause is None or self._restarts.get(b.id, 0) >= STARTUP_RESTARTS:
                continue
            self._restarts[b.id] = self._restarts.get(b.id, 0) + 1
            self.startup_restarts.append(f"broker {b.id}'s start-up failed ({cause}); started again "
                                         f"({self._restarts[b.id]} of {STARTUP_RESTARTS})")
            self.start(b.id, wait=False)
            again.append(b.id)
        return again

    def check_alive(self) -> None:
        """Raise, with the end of its log, when a broker we started has exited (not one we killed or stopped)."""
        for b in self.cfg.brokers:
            if b.id in self.pids and b.id not in self._stopped and not self.is_running(b.id):
                out = self.broker_dir(b.id) / "logs" / "kafka.out"
                server = self.broker_dir(b.id) / "logs" / "server.log"
                tail = "".join(p.read_text(errors="replace")[-1500:] for p in (out, server) if p.exists())
                raise RuntimeError(f"reference broker {b.id} (pid {self.pids[b.id]}) exited:\n{tail}")

    def _metadata_complete(self, broker_id: int) -> bool:
        from confluent_kafka.admin import AdminClient
        md = AdminClient({"bootstrap.servers": "%s:%d" % self.listener(broker_id), "log_level": 0}
                         ).list_topics(timeout=2)
        return md.controller_id >= 0 and sorted(md.brokers) == sorted(b.id for b in self.cfg.brokers)

    def _create_offsets_topic(self, timeout: float) -> None:
        """Kafka creates __consumer_offsets on the first FindCoordinator: ask one, once a second until the
        topic exists, then wait until each partition has a leader."""
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        asked = [0.0]
        want = self.cfg.get("offsets.topic.num.partitions")

        def ready() -> bool:
            snap = self.zk().read_snapshot()
            topic = snap.topics.get(paths.OFFSETS_TOPIC)
            if topic is None:
                if time.monotonic() - asked[0] >= 1.0:
                    asked[0] = time.monotonic()
                    admin.describe_consumer_groups([PROBE_GROUP], request_timeout=1.0)
                return False
            states = [snap.states.get((paths.OFFSETS_TOPIC, p)) for p in topic.partitions]
            return len(states) == want and all(s is not None and s[0].leader >= 0 for s in states)

        self.wait_alive(ready, timeout, "__consumer_offsets to be created with a leader for every partition", 0.1)

    def down(self, timeout: float = 30.0) -> None:
        """Stop every broker at once (SIGTERM: each does its controlled shutdown; SIGKILL after ``timeout``),
        then our own ZooKeeper if we started one."""
        self.close()
        running = [b.id for b in self.cfg.brokers if self.is_running(b.id)]
        for b in running:
            for sig in (signal.SIGCONT, signal.SIGTERM):   # a paused JVM cannot act on SIGTERM
                try:
                    os.kill(self.pids[b], sig)
                except ProcessLookupError:
                    pass
        for b in running:
            try:
                self.wait_exit(b, timeout)
            except TimeoutError:
                if self.is_running(b):
                    os.kill(self.pids[b], signal.SIGKILL)
                self.wait_exit(b, 10.0)
        if self.zk_embedded is not None:
            self.zk_embedded.stop()
        self.pids.clear()
        self.state_path.unlink(missing_ok=True)

    def status(self) -> dict[str, Any]:
        """Each broker's pid, state, listener and registration (ZooKeeper's view), and the controller."""
        zk_error = None
        try:
            regs, controller = self.registrations(), self.controller()
        except Exception as e:  # ZooKeeper down or never started: say so, still list the processes
            regs, controller, zk_error = {}, None, f"{type(e).__name__}: {e}"
        brokers = []
        for b in self.cfg.brokers:
            reg = regs.get(b.id)
            ports = self.ports.get(b.id)
            brokers.append({"id": b.id, "pid": self.pids.get(b.id), "state": self.state(b.id),
                            "listener": f"127.0.0.1:{next(iter(ports.values()))}" if ports else None,
                            "registered": reg is not None, "endpoints": reg.get("endpoints") if reg else None})
        return {"up": self.state_path.exists(), "zookeeper": self.zk_connect_or_none, "chroot": self.zk_chroot,
                "controller": controller, "zk_error": zk_error, "brokers": brokers}

    def logged_config(self, broker_id: int) -> dict[str, str]:
        """The ``KafkaConfig values:`` block broker ``broker_id`` last logged at start: every broker key Kafka
        knows, with the value it took ({} before it has logged one)."""
        log = self.broker_dir(broker_id) / "logs" / "server.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        head = "INFO KafkaConfig values:"
        start = text.rfind(head)
        if start < 0:
            return {}
        out: dict[str, str] = {}
        for line in text[start + len(head):].splitlines()[1:]:
            if not line.startswith("\t"):
                break
            key, _, value = line.strip().partition(" = ")
            out[key] = value
        return out
