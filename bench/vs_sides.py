"""The two sides of bench/vs_kafka.py behind one interface: kafkasim and Kafka 2.8.2, from one cluster.yaml.

``write_cluster_yaml`` writes the cluster.yaml both sides run from: kafkasim reads it (``launcher.cluster``), and
``reference.kafka.ReferenceCluster`` translates it into each Kafka broker's ``server.properties``
(``reference/properties.py``), so both run with the same effective settings.  Each side is a fresh chroot of
one shared ZooKeeper.  :class:`KafkasimSide` and :class:`KafkaSide` start, signal, restart and stop brokers,
and say where a broker keeps an offsets partition's segments and when it logged a coordinator's stages;
:func:`launch_until_ready` times a start with one readiness rule for both (:func:`ready`).
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import struct
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from launcher.cluster import Cluster
from node.config import ClusterConfig, load_config
from node.events import read_run_events
from reference.kafka import ReferenceCluster, rss_kb
from reference.serverlog import offsets_loaded, wall_ms
from util.procs import process_state
from util.waiting import wait_for
from zk import paths
from zk.client import ZkClient
from zk.server import free_port

OFFSETS = paths.OFFSETS_TOPIC
#: the group a readiness probe asks about (FindCoordinator, then OffsetFetch)
PROBE_GROUP = "vs-ready-probe"
OBSERVER_SESSION_MS = 10_000


def write_cluster_yaml(workdir: Path, zk_connect: str, brokers: int, settings: dict[str, Any]) -> Path:
    """A fresh directory under ``workdir`` with a cluster.yaml: ``brokers`` brokers on 127.0.0.1, ZooKeeper
    ``zk_connect`` under a chroot of its own, and ``settings``."""
    d = workdir / uuid.uuid4().hex[:8]
    d.mkdir()
    # every port chosen here (the default Kafka listener, the gRPC port + 10000, can be another broker's port)
    doc = {"run.dir": str(d / "run"), "zookeeper.connect": f"{zk_connect}/vs-{d.name}",
           "brokers": [{"id": i, "host": "127.0.0.1", "port": free_port(),
                        "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}"} for i in range(1, brokers + 1)]}
    doc.update(settings)
    path = d / "cluster.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


class Side:
    """One side's cluster: subclasses start and signal its brokers."""

    name = ""

    def __init__(self, cfg_path: Path) -> None:
        self.cfg_path = cfg_path
        self.cfg: ClusterConfig = load_config(cfg_path)
        self.ids = [b.id for b in self.cfg.brokers]
        self.launch_mono_ns = 0          # when launch_until_ready launched the brokers (monotonic ns, wall ms)
        self.launch_wall_ms = 0.0
        self._observer: ZkClient | None = None

    # --- what subclasses provide
    def launch(self) -> None:
        """Start every broker's process, without waiting."""
        raise NotImplementedError

    def zk_connect(self) -> str:
        """The brokers' ZooKeeper connect string, their chroot included."""
        raise NotImplementedError

    @property
    def bootstrap(self) -> str:
        raise NotImplementedError

    def listener(self, broker_id: int) -> str:
        raise NotImplementedError

    def pid(self, broker_id: int) -> int | None:
        raise NotImplementedError

    def started(self, broker_id: int) -> bool:
        """The broker's start-up is over (a SIGTERM now gets a clean shutdown)."""
        raise NotImplementedError

    def wait_exit(self, broker_id: int, timeout: float) -> None:
        raise NotImplementedError

    def start(self, broker_id: int) -> None:
        """Start a stopped broker again and wait until its start-up is over."""
        raise NotImplementedError

    def offsets_segments(self, broker_id: int, partition: int) -> list[Path]:
        raise NotImplementedError

    def coordinator_stages(self, old: int, new: int, partition: int, wall0_ms: float, mono0_ns: int,
                           elected: float) -> dict[str, float | None]:
        """ms from the signal to: the old broker's unload of the partition done (its coordinator resigned, its
        parked requests answered); the new broker leading the partition (Kafka's state-change.log; kafkasim
        logs no event at that moment, its ``became_leader`` comes once the whole LeaderAndIsr is applied), its
        load starting (2.8.1+, KAFKA-10614: a partition whose load waits behind others on the one loader thread
        answers NOT_COORDINATOR until then) and done; and the other brokers following the new leader (from
        then on their fetches can complete an acks=all append, a commit).  ``queued``: the other loads the new
        broker started between the partition's election (``elected``, ms from the signal) and this load."""
        raise NotImplementedError

    def down(self) -> None:
        raise NotImplementedError

    def controller_ready_ms(self, broker: int, epoch: int) -> float | None:
        """Wall-clock ms at which ``broker``, the next controller, was done with its failover of ``epoch``."""
        raise NotImplementedError

    def coordinators_loaded_ms(self) -> float | None:
        """ms from the launch until every offsets partition's coordinator had loaded (its last load done), None
        while some have not: a start's end for the groups of every partition, not only the readiness probe's."""
        raise NotImplementedError

    def log_files(self, broker_id: int) -> list[Path]:
        """Where the broker's own output goes (its tail explains a broker that died or never got ready)."""
        raise NotImplementedError

    # --- common
    def log_tail(self, broker_id: int, chars: int = 1500) -> str:
        return "".join(f"--- {p.name}: ...{p.read_text(errors='replace')[-chars:]}\n"
                       for p in self.log_files(broker_id) if p.exists())

    def zk(self) -> ZkClient:
        """The benchmark's own ZooKeeper client under the side's chroot, with a session of its own
        (``OBSERVER_SESSION_MS``: the brokers' 1 s session expires on a loaded machine, and the observer's
        requests wait up to its session timeout)."""
        if self._observer is None:
            self._observer = ZkClient(self.zk_connect(), OBSERVER_SESSION_MS, OBSERVER_SESSION_MS)
            self._observer.start()
        return self._observer

    def close_observer(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer = None

    def signal(self, broker_id: int, sig: signal.Signals) -> None:
        pid = self.pid(broker_id)
        if pid is None or process_state(pid) == "dead":
            raise RuntimeError(f"{self.name} broker {broker_id} is not running")
        os.kill(pid, sig)

    def rss_kb(self, broker_id: int) -> int | None:
        return rss_kb(self.pid(broker_id))

    def remove_files(self) -> None:
        shutil.rmtree(self.cfg_path.parent, ignore_errors=True)


class KafkasimSide(Side):
    name = "kafkasim"

    def __init__(self, cfg_path: Path) -> None:
        super().__init__(cfg_path)
        self.cluster = Cluster(self.cfg, cfg_path)
        self._started_at: dict[int, int] = {}

    def launch(self) -> None:
        self.cluster.start_zookeeper()   # nothing: the cluster.yaml names the shared ZooKeeper
        for b in self.ids:
            self._started_at[b] = time.monotonic_ns()
            self.cluster.start_broker(b)

    def zk_connect(self) -> str:
        return self.cluster.connect

    @property
    def bootstrap(self) -> str:
        return ",".join(self.listener(b) for b in self.ids)

    def listener(self, broker_id: int) -> str:
        return "%s:%d" % self.cfg.broker(broker_id).kafka_advertised

    def grpc_bootstrap(self) -> list[str]:
        return [f"{b.host}:{b.port}" for b in self.cfg.brokers]

    def pid(self, broker_id: int) -> int | None:
        pid = self.cluster.pids.get(broker_id)
        return pid if pid is not None and process_state(pid) != "dead" else None

    def started(self, broker_id: int) -> bool:
        """Registered since its last start (from then on its main thread waits for SIGTERM: a clean stop)."""
        t0 = self._started_at.get(broker_id, 0)
        return any(e["type"] == "broker_registered" and e["broker"] == broker_id and e["mono_ns"] > t0
                   for e in read_run_events(self.cluster.run_dir))

    def wait_exit(self, broker_id: int, timeout: float) -> None:
        self.cluster.wait_exit(broker_id, timeout)

    def start(self, broker_id: int) -> None:
        self._started_at[broker_id] = time.monotonic_ns()
        self.cluster.start_broker(broker_id)
        wait_for(lambda: self.started(broker_id), 60, f"kafkasim broker {broker_id} to start", interval=0.1)

    def offsets_segments(self, broker_id: int, partition: int) -> list[Path]:
        return sorted((self.cfg.broker(broker_id).log_dir / f"{OFFSETS}-{partition}").glob("*.log"))

    def events(self) -> list[dict]:
        return read_run_events(self.cluster.run_dir)

    def log_files(self, broker_id: int) -> list[Path]:
        return [self.cluster.run_dir / "logs" / f"broker-{broker_id}.log"]

    def coordinator_stages(self, old: int, new: int, partition: int, wall0_ms: float, mono0_ns: int,
                           elected: float) -> dict[str, float | None]:
        ev = [e for e in self.events() if e["mono_ns"] >= mono0_ns]

        def at(broker: int, type_: str, **match: Any) -> float | None:
            e = next((e for e in ev if e["broker"] == broker and e["type"] == type_
                      and all(e.get(k) == v for k, v in match.items())), None)
            return None if e is None else (e["mono_ns"] - mono0_ns) / 1e6
        followers = [at(b, "became_follower", topic=OFFSETS, partition=partition) for b in self.ids
                     if b not in (old, new)]
        load_started = at(new, "coordinator_load_started", partition=partition)
        queued = None if load_started is None else sum(
            1 for e in ev if e["broker"] == new and e["type"] == "coordinator_load_started"
            and e["partition"] != partition and elected <= (e["mono_ns"] - mono0_ns) / 1e6 <= load_started)
        return {"unloaded": at(old, "coordinator_unloaded", partition=partition),
                "leading": None, "load_started": load_started, "queued": queued,
                "loaded": at(new, "coordinator_loaded", partition=partition),
                # logged once the follower's whole LeaderAndIsr request is applied: an upper bound
                "followers": None if None in followers or not followers else max(followers)}

    def coordinators_loaded_ms(self) -> float | None:
        n = self.cfg.get("offsets.topic.num.partitions")
        last: dict[int, int] = {}
        for e in self.events():
            if e["type"] == "coordinator_loaded" and e["mono_ns"] >= self.launch_mono_ns:
                last[e["partition"]] = e["mono_ns"]
        return (max(last.values()) - self.launch_mono_ns) / 1e6 if len(last) == n else None

    def start_stages(self, mono0_ns: int) -> dict[str, float | None]:
        """Where a start's time went, from the event logs: ms from the launch (``mono0_ns``) to each stage, for
        the stages every broker goes through the last broker's time, for per-partition ones the first and last."""
        ev = [e for e in self.events() if e["mono_ns"] >= mono0_ns]

        def ms(e: dict | None) -> float | None:
            return None if e is None else round((e["mono_ns"] - mono0_ns) / 1e6, 1)

        def last_per_broker(type_: str) -> float | None:
            firsts = {}
            for e in ev:
                if e["type"] == type_:
                    firsts.setdefault(e["broker"], e)
            return max(ms(e) for e in firsts.values()) if len(firsts) == len(self.ids) else None

        def first(type_: str, **match: Any) -> dict | None:
            return next((e for e in ev if e["type"] == type_ and all(e.get(k) == v for k, v in match.items())), None)

        def span(type_: str, **match: Any) -> tuple[float | None, float | None]:
            these = [e for e in ev if e["type"] == type_ and all(e.get(k) == v for k, v in match.items())]
            return (ms(these[0]), ms(these[-1])) if these else (None, None)
        created = first("topic_created", topic=OFFSETS)
        # the plan's states are written (and logged) before its topic_created
        written = next((e for e in reversed(ev) if e["type"] == "partition_states_written" and created is not None
                        and e["broker"] == created["broker"] and e["mono_ns"] <= created["mono_ns"]), None)
        leaders, followers = span("became_leader", topic=OFFSETS), span("became_follower", topic=OFFSETS)
        loads, loaded = span("coordinator_load_started"), span("coordinator_loaded")
        return {"every broker starting (its process up, first event)": last_per_broker("broker_starting"),
                "every broker registered": last_per_broker("broker_registered"),
                "controller elected": ms(first("controller_elected")),
                "controller failover done": ms(first("controller_failover_done")),
                "offsets topic created (decided)": ms(created),
                "offsets partition states written to ZooKeeper": None if written is None
                else round((written["mono_ns_written"] - mono0_ns) / 1e6, 1),
                "  (their write)": None if written is None else written["write_ms"],
                "first became_leader (LeaderAndIsr applied)": leaders[0],
                "last became_leader": leaders[1], "last became_follower": followers[1],
                "first coordinator load started": loads[0], "last coordinator load started": loads[1],
                "last coordinator loaded": loaded[1]}

    def controller_stages(self, old: int, mono0_ns: int) -> dict[str, float | None]:
        """From the event logs, ms: the old broker closing its ZooKeeper session (from the signal), and the next
        controller's own failover stages (controller_failover_done)."""
        ev = [e for e in self.events() if e["mono_ns"] >= mono0_ns]
        closing = next((e for e in ev if e["broker"] == old and e["type"] == "zk_session_closing"), None)
        done = next((e for e in ev if e["type"] == "controller_failover_done"), None)
        out: dict[str, float | None] = {"session_closing": None if closing is None
                                        else (closing["mono_ns"] - mono0_ns) / 1e6}
        for k in ("load_ms", "decide_ms", "write_ms", "total_ms"):
            out[k] = None if done is None else done.get(k)
        return out

    def controller_ready_ms(self, broker: int, epoch: int) -> float | None:
        done = [e for e in self.events() if e["type"] == "controller_failover_done" and e.get("epoch") == epoch
                and e["broker"] == broker]
        return done[0]["ts_ms"] if done else None

    def down(self) -> None:
        try:
            self.close_observer()
            self.cluster.down(timeout=20)
        finally:
            self.cluster.close()


class KafkaSide(Side):
    name = "Kafka 2.8.2"

    def __init__(self, cfg_path: Path) -> None:
        super().__init__(cfg_path)
        # Kafka as bin/kafka-server-start.sh starts it: no class-data archive (its memory and start in the figures)
        self.ref = ReferenceCluster(self.cfg, config_path=cfg_path, class_archive=False)

    def launch(self) -> None:
        self.ref.start_zookeeper()       # nothing: the cluster.yaml names the shared ZooKeeper
        for b in self.ids:
            self.ref.start(b, wait=False)

    def zk_connect(self) -> str:
        return self.ref.zk_connect

    @property
    def bootstrap(self) -> str:
        return self.ref.bootstrap_servers

    def listener(self, broker_id: int) -> str:
        return "%s:%d" % self.ref.listener(broker_id)

    def pid(self, broker_id: int) -> int | None:
        return self.ref.pids.get(broker_id) if self.ref.is_running(broker_id) else None

    def started(self, broker_id: int) -> bool:
        return self.ref.started(broker_id)

    def wait_exit(self, broker_id: int, timeout: float) -> None:
        self.ref.wait_exit(broker_id, timeout)

    def start(self, broker_id: int) -> None:
        self.ref.start(broker_id, wait=True)

    def offsets_segments(self, broker_id: int, partition: int) -> list[Path]:
        return sorted((self.ref.broker_dir(broker_id) / "data" / f"{OFFSETS}-{partition}").glob("*.log"))

    def log_files(self, broker_id: int) -> list[Path]:
        logs = self.ref.broker_dir(broker_id) / "logs"
        return [logs / "kafka.out", logs / "server.log"]

    def _log_lines(self, broker_id: int, name: str, pattern: str) -> list[float]:
        path = self.ref.broker_dir(broker_id) / "logs" / name
        rx = re.compile(pattern)
        out = []
        for line in path.read_text(errors="replace").splitlines() if path.exists() else []:
            if rx.search(line):
                t = wall_ms(line)
                if t is not None:
                    out.append(t)
        return out

    def controller_ready_ms(self, broker: int, epoch: int) -> float | None:
        times = self._log_lines(broker, "controller.log", rf"Ready to serve as the new controller with epoch {epoch}\b")
        return times[0] if times else None

    def offsets_loads(self, broker_id: int) -> list[dict[str, Any]]:
        """Every finished offsets load in ``broker_id``'s server.log (reference.serverlog.offsets_loaded)."""
        path = self.ref.broker_dir(broker_id) / "logs" / "server.log"
        lines = path.read_text(errors="replace").splitlines() if path.exists() else []
        return [r for r in map(offsets_loaded, lines) if r is not None and r["wall_ms"] is not None]

    def load_starts(self, broker_id: int) -> dict[str, float]:
        """Per offsets partition (``__consumer_offsets-N``), the wall-clock ms its last load started on
        ``broker_id``: a load's "Finished loading ... in T milliseconds ..., of which S milliseconds was spent in
        the scheduler" line less T - S (2.8.2 logs its start at DEBUG only)."""
        return {r["partition"]: r["wall_ms"] - r["load_ms"] for r in self.offsets_loads(broker_id)}

    def coordinators_loaded_ms(self) -> float | None:
        n = self.cfg.get("offsets.topic.num.partitions")
        last: dict[str, float] = {}
        for b in self.ids:
            for r in self.offsets_loads(b):
                t = r["wall_ms"]
                if t >= self.launch_wall_ms - 1.0:
                    last[r["partition"]] = max(t, last.get(r["partition"], t))
        return max(last.values()) - self.launch_wall_ms if len(last) == n else None

    def coordinator_stages(self, old: int, new: int, partition: int, wall0_ms: float, mono0_ns: int,
                           elected: float) -> dict[str, float | None]:
        tp = re.escape(f"{OFFSETS}-{partition} ")

        def first(broker: int, name: str, pattern: str) -> float | None:
            # log4j stamps whole milliseconds: an event of the signal's own millisecond shows as up to 1 ms early
            ts = [t for t in self._log_lines(broker, name, pattern) if t >= wall0_ms - 1.0]
            return (min(ts) - wall0_ms) if ts else None
        followers = [first(b, "state-change.log", f"Follower {tp}starts at leader epoch") for b in self.ids
                     if b not in (old, new)]
        leading = first(new, "state-change.log", f"Leader {tp}starts at leader epoch")
        starts = {name: t - wall0_ms for name, t in self.load_starts(new).items() if t >= wall0_ms - 1.0}
        load_started = starts.get(f"{OFFSETS}-{partition}")
        queued = None if load_started is None else sum(
            1 for name, t in starts.items() if name != f"{OFFSETS}-{partition}" and elected <= t <= load_started)
        return {"unloaded": first(old, "server.log", f"Finished unloading {tp}for coordinator epoch"),
                "leading": leading, "load_started": load_started, "queued": queued,
                "loaded": first(new, "server.log", f"Finished loading offsets and group metadata from {tp}"),
                "followers": None if None in followers or not followers else max(followers)}

    def down(self) -> None:
        """SIGKILL every broker (the data is thrown away; a clean stop of three JVMs takes seconds)."""
        try:
            self.close_observer()
            for b in self.ids:
                if self.ref.is_running(b):
                    os.kill(self.ref.pids[b], signal.SIGKILL)
            for b in self.ids:
                self.ref.wait_exit(b, 30)
        finally:
            self.ref.close()
            self.ref.state_path.unlink(missing_ok=True)


def make_side(kind: str, cfg_path: Path) -> Side:
    return KafkasimSide(cfg_path) if kind == "kafkasim" else KafkaSide(cfg_path)


# ---------------------------------------------------------------------- start until ready

class Readiness:
    """One readiness rule for both sides, checked from outside as a client sees the cluster:

    * every broker registered in ZooKeeper, a controller elected, every broker's start-up over;
    * every broker's listener answering Metadata that names every broker and the controller;
    * ``__consumer_offsets`` with a leader for each partition in ZooKeeper: a FindCoordinator is sent every
      100 ms (to each broker in turn) until the topic exists, as a client looking for its coordinator would
      (Kafka 2.8.2 creates the topic on the first one; kafkasim's controller creates it once every broker has
      registered);
    * a group's coordinator answering an OffsetFetch (librdkafka's ``committed()``).
    """

    def __init__(self, side: Side) -> None:
        from confluent_kafka import Consumer
        from confluent_kafka.admin import AdminClient
        self.side = side
        self.admins = {b: AdminClient({"bootstrap.servers": side.listener(b), "log_level": 0}) for b in side.ids}
        self.consumer = Consumer({"bootstrap.servers": side.bootstrap, "group.id": PROBE_GROUP, "log_level": 0,
                                  "enable.auto.commit": False})
        self.asked = 0.0
        self.stage = "registered"

    def close(self) -> None:
        self.consumer.close()

    def check(self) -> bool:
        from confluent_kafka import TopicPartition
        side, zk = self.side, self.side.zk()
        if self.stage == "registered":
            if sorted(zk.read_brokers()) != side.ids or zk.read_controller() is None:
                return False
            if not all(side.started(b) for b in side.ids):
                return False
            self.stage = "metadata"
        if self.stage == "metadata":
            for b, admin in self.admins.items():
                md = admin.list_topics(timeout=1)
                if md.controller_id < 0 or sorted(md.brokers) != side.ids:
                    return False
            self.stage = "offsets"
        if self.stage == "offsets":
            snap = zk.read_snapshot()
            topic = snap.topics.get(OFFSETS)
            if topic is None:
                if time.monotonic() - self.asked >= 0.1:
                    self.asked = time.monotonic()
                    find_coordinator(side.listener(side.ids[int(self.asked * 10) % len(side.ids)]), PROBE_GROUP)
                return False
            want = side.cfg.get("offsets.topic.num.partitions")
            states = [snap.states.get((OFFSETS, p)) for p in topic.partitions]
            if len(states) != want or not all(s is not None and s[0].leader >= 0 for s in states):
                return False
            self.stage = "coordinator"
        self.consumer.committed([TopicPartition(OFFSETS, 0)], timeout=2)   # raises until a coordinator answers
        return True


def find_coordinator(address: str, group: str, timeout: float = 1.0) -> bytes | None:
    """One FindCoordinator (v0) for ``group`` to the listener at ``address``; the answer's bytes, None on failure.
    (confluent-kafka's admin client, which could send one, trips a librdkafka assertion when such a request
    times out under it: rd_kafka_enq_once_del_source_return.)"""
    host, port = address.rsplit(":", 1)
    group_bytes = group.encode()
    client = b"vs-ready-probe"
    body = struct.pack(">hhih", 10, 0, 1, len(client)) + client + struct.pack(">h", len(group_bytes)) + group_bytes
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as s:
            s.sendall(struct.pack(">i", len(body)) + body)
            size = struct.unpack(">i", _read(s, 4))[0]
            return _read(s, size)
    except (OSError, struct.error):
        return None


def _read(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return buf


def launch_until_ready(side: Side, timeout: float = 300.0, on_launched: Any = None) -> float:
    """Start every broker of ``side`` and wait until :class:`Readiness` holds; seconds from the launch.
    ``on_launched()`` is called once the brokers' processes exist (a profiler attaching to them)."""
    t0 = time.monotonic()
    side.launch_mono_ns, side.launch_wall_ms = time.monotonic_ns(), time.time() * 1000.0
    side.launch()
    if on_launched is not None:
        on_launched()
    probe = Readiness(side)
    dead: list[int] = []

    def step() -> bool:
        dead.extend(b for b in side.ids if side.pid(b) is None)
        return bool(dead) or probe.check()
    try:
        wait_for(step, timeout, f"{side.name} to be ready", interval=0.05)
        if dead:
            raise RuntimeError(f"{side.name} broker(s) {sorted(set(dead))} exited while starting:\n"
                               + "".join(side.log_tail(b) for b in sorted(set(dead))))
    except TimeoutError as e:
        try:
            registered = set(side.zk().read_brokers())
        except Exception:   # noqa: BLE001 (the message is what matters here)
            registered = set()
        stuck = [b for b in side.ids if b not in registered] or side.ids[:1]
        raise TimeoutError(f"{e} (stuck at: {probe.stage}; registered: {sorted(registered)}); the log of broker "
                           f"{stuck[0]}:\n{side.log_tail(stuck[0], 1000)}") from e
    finally:
        probe.close()
    return time.monotonic() - t0


def isr_gaps(side: Side, topics: tuple[str, ...] = (OFFSETS,)) -> list[str]:
    """Each partition of ``topics`` whose ISR in ZooKeeper is not all its replicas (a missing topic too)."""
    snap = side.zk().read_snapshot()
    gaps = []
    for t in topics:
        if t not in snap.topics:
            gaps.append(f"{t} missing")
            continue
        for p, replicas in sorted(snap.topics[t].partitions.items()):
            st = snap.states.get((t, p))
            if st is None or sorted(st[0].isr) != sorted(replicas):
                gaps.append(f"{t}-{p} isr {None if st is None else sorted(st[0].isr)} of {sorted(replicas)}")
    return gaps


def isr_whole(side: Side, topics: tuple[str, ...] = (OFFSETS,)) -> bool:
    return not isr_gaps(side, topics)


def wait_isr_whole(side: Side, timeout: float, topics: tuple[str, ...] = (OFFSETS,)) -> None:
    """Until every ISR of ``topics`` is whole; on timeout, the error says which are not, and which brokers are
    registered."""
    try:
        wait_for(lambda: isr_whole(side, topics), timeout, "every ISR whole", interval=0.2)
    except TimeoutError as e:
        gaps = isr_gaps(side, topics)
        raise TimeoutError(f"{side.name}: {e}: {len(gaps)} partitions not whole, e.g. {gaps[:3]}; brokers "
                           f"registered {sorted(side.zk().read_brokers())}") from e
