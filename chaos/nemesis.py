"""The nemesis: carries out a schedule's faults on a running cluster, and heals them.

A fault's target is resolved when it fires, against the cluster as ZooKeeper
shows it then (the controller, the coordinator of a group, a partition's
leader...).  Process faults signal the broker or ZooKeeper server processes;
network faults set rules on the fault proxy's links; ``expire-session``
closes a broker's ZooKeeper session with its own credentials; ``truncate``
kills a broker and cuts the tail of one of its segments before it restarts;
``disk-full`` fills, and ``disk-error`` fails the writes of, the filesystem of
the broker's log directory holding the target's partition (``coordinator:<g>``,
``leader:``/``followers:``), or of every one of its directories for any other
target (chaos/disks.py).  A disk fault heals by freeing or repairing the
filesystem and restarting the broker: in Kafka 2.8 an offline log directory
stays offline until the broker restarts.
``reassign`` moves a partition's leader replica to a broker outside its replicas through the controller's
AlterPartitionReassignments (on its own Kafka listener); the controller carries it on (its heal does nothing).
``reassign-failover`` does the same while the new replica's broker is paused, then SIGKILLs the controller
mid-reassignment (its heal starts it again).  Each start and each heal is a nemesis operation in the history.
"""
from __future__ import annotations

import logging
import os
import random
import signal
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from chaos.schedule import Fault
from chaos import disks as disk_faults
from chaos.scenario import DISK_KINDS, NETWORK_KINDS
from chaos.targets import View, is_app_node, nemesis_value, parse_target, resolve, target_partition
from launcher.cluster import Cluster
from node.server.session_file import SessionFile
from zk.client import expire_session

log = logging.getLogger(__name__)

SIGNAL_KINDS = ("kill", "terminate", "pause")   # faults that are a signal, and nothing to report but the nodes


class AppProcesses(Protocol):
    """The user's application processes (``app:<n>`` targets, 1-based), as chaos/apps.py runs them."""

    def kill(self, n: int) -> None: ...

    def terminate(self, n: int) -> None: ...

    def pause(self, n: int) -> None: ...

    def resume(self, n: int) -> None: ...

    def start(self, n: int) -> None: ...


class Links:
    """The proxy's links, by (source node, destination node).  A pair may have several links (the
    clients reach a broker's gRPC port and its Kafka listener on two): a fault acts on all of them."""

    def __init__(self) -> None:
        self.by_pair: dict[tuple[str, str], list[str]] = {}

    def add(self, src: str, dst: str, port_name: str = "") -> str:
        name = f"{src}->{dst}" + (f":{port_name}" if port_name else "")
        self.by_pair.setdefault((src, dst), []).append(name)
        return name

    def directions(self, a: str, b: str) -> list[tuple[str, str]]:
        """(link, direction) pairs that carry bytes from ``a`` to ``b``."""
        return ([(n, "out") for n in self.by_pair.get((a, b), [])]
                + [(n, "back") for n in self.by_pair.get((b, a), [])])


class ProxyNet:
    """Network faults through the fault proxy: one-way rules on the links between two nodes."""

    mode = "proxy"

    def __init__(self, proxy: Any, links: Links):
        self.proxy, self.links = proxy, links

    def _set(self, src: str, dst: str, rules: dict[str, Any]) -> list[str]:
        pairs = self.links.directions(src, dst)
        for link, direction in pairs:
            self.proxy.set(link, direction, **rules)
        return [link for link, _ in pairs]

    def block(self, src: str, dst: str) -> list[str]:
        return self._set(src, dst, {"blocked": True})

    def unblock(self, src: str, dst: str) -> None:
        self._set(src, dst, {"blocked": False})

    def shape(self, src: str, dst: str, latency_ms: float = 0, jitter_ms: float = 0, loss: float = 0) -> list[str]:
        return self._set(src, dst, {"latency_ms": latency_ms, "jitter_ms": jitter_ms, "loss": loss})

    def heal_all(self) -> None:
        self.proxy.clear_all()


class NetnsNet:
    """Network faults with namespaces and iptables (chaos/netns.py): rules on packets, not links."""

    mode = "netns"

    def __init__(self, net: Any):
        self.net = net

    def block(self, src: str, dst: str) -> list[str]:
        self.net.block(src, dst)
        return [f"{src}->{dst}"]

    def unblock(self, src: str, dst: str) -> None:
        self.net.unblock(src, dst)

    def shape(self, src: str, dst: str, latency_ms: float = 0, jitter_ms: float = 0, loss: float = 0) -> list[str]:
        self.net.shape(src, dst, latency_ms, jitter_ms, loss)
        return [f"{src}->{dst}"]

    def heal_all(self) -> None:
        self.net.heal_all()


@dataclass
class Active:
    fault: Fault
    nodes: list[str]
    peers: list[str] = field(default_factory=list)
    flows: list[tuple[str, str]] = field(default_factory=list)   # (src, dst) node pairs with rules set
    detail: dict[str, Any] = field(default_factory=dict)
    skipped: str | None = None
    view: View | None = None
    failed: dict[int, list[Any]] = field(default_factory=dict)   # broker -> the filesystems a disk fault hit


class Nemesis:
    def __init__(self, cluster: Cluster, net: ProxyNet | NetnsNet | None, history: Any,
                 view: Callable[[], View], session_timeout_ms: int, apps: AppProcesses | None = None,
                 disks: Any = None):
        self.disks = disks                # chaos.disks.RunDisks: the brokers' log directories, with disk faults
        self.cluster = cluster
        self.apps = apps
        self.net = net
        self.history = history
        self.view = view
        self.session_timeout_ms = session_timeout_ms
        self.down: set[str] = set()       # killed/terminated nodes, to restart at the end
        self.paused: set[str] = set()

    # ------------------------------------------------------------------ start

    def start(self, fault: Fault) -> Active:
        rng = random.Random(fault.seed)
        view = self.view()
        nodes = resolve(fault.target, view, rng)
        act = Active(fault, nodes)
        act.view = view
        if not nodes:
            act.skipped = f"{fault.target} resolved to nobody"
        elif fault.kind in NETWORK_KINDS:
            act.peers = resolve(fault.peer or "rest", view, rng, exclude=frozenset(nodes))
            self._network(act)
        elif fault.kind in SIGNAL_KINDS:
            # the line first: its time is the fault's start (a SIGTERM's controlled shutdown moves
            # leaders before the process exits, so a line written after it would postdate the moves)
            self._record(act, "start")
            getattr(self, "_" + fault.kind)(act, rng)
            return act
        else:
            getattr(self, "_" + fault.kind.replace("-", "_"))(act, rng)
        self._record(act, "start")
        return act

    def _record(self, act: Active, phase: str) -> None:
        value = nemesis_value(act.fault, phase, act.nodes, act.peers, act.skipped, act.detail)
        self.history.nemesis(act.fault.kind if phase == "start" else "heal", value)

    def _brokers(self, nodes: list[str]) -> list[int]:
        return [int(n[1:]) for n in nodes if n.startswith("b")]

    def _apps(self, nodes: list[str]) -> list[int]:
        return [int(n[3:]) for n in nodes if is_app_node(n)] if self.apps is not None else []

    def _zk(self, nodes: list[str]) -> list[Any]:
        servers = self.cluster.zk_embedded.servers if self.cluster.zk_embedded else []
        return [servers[int(n[2:]) - 1] for n in nodes if n.startswith("zk")]

    def _kill(self, act: Active, rng: random.Random) -> None:
        for b in self._brokers(act.nodes):
            self._signal_broker(b, signal.SIGKILL)
            self.cluster.wait_exit(b, 10)
        for s in self._zk(act.nodes):
            s.kill()
        for n in self._apps(act.nodes):
            self.apps.kill(n)
        self.down.update(act.nodes)

    def _terminate(self, act: Active, rng: random.Random) -> None:
        for b in self._brokers(act.nodes):
            self._signal_broker(b, signal.SIGTERM)
        for s in self._zk(act.nodes):
            s.stop()
        for n in self._apps(act.nodes):
            self.apps.terminate(n)
        for b in self._brokers(act.nodes):
            try:
                self.cluster.wait_exit(b, 30)
            except TimeoutError:
                self._signal_broker(b, signal.SIGKILL)
                self.cluster.wait_exit(b, 10)
        self.down.update(act.nodes)

    def _pause(self, act: Active, rng: random.Random) -> None:
        for b in self._brokers(act.nodes):
            self._signal_broker(b, signal.SIGSTOP)
        for s in self._zk(act.nodes):
            s.pause()
        for n in self._apps(act.nodes):
            self.apps.pause(n)
        self.paused.update(act.nodes)

    def _expire_session(self, act: Active, rng: random.Random) -> None:
        expired = []
        for b in self._brokers(act.nodes):
            creds = SessionFile(self.cluster.cfg.broker(b).log_dir / "zk-session.json").credentials()
            if creds is None:
                continue
            expire_session(self.cluster.connect, *creds)
            expired.append(f"0x{creds[0]:x}")
        act.detail["sessions"] = expired

    def _truncate(self, act: Active, rng: random.Random) -> None:
        """Kill the broker, then cut the tail of the active segment of one of its partitions."""
        brokers = self._brokers(act.nodes)[:1]
        act.nodes = [f"b{b}" for b in brokers]
        for b in brokers:
            self._signal_broker(b, signal.SIGKILL)
            self.cluster.wait_exit(b, 10)
            self.down.add(f"b{b}")
            segments = []
            for d in sorted(p for base in self.cluster.cfg.broker(b).log_dirs for p in base.iterdir() if p.is_dir()):
                logs = sorted(d.glob("*.log"))
                if logs and logs[-1].stat().st_size > 0:
                    segments.append(logs[-1])
            if not segments:
                act.detail["truncated"] = None
                continue
            seg = rng.choice(segments)
            size = seg.stat().st_size
            cut = min(size, act.fault.truncate_bytes or 1)
            os.truncate(seg, size - cut)
            act.detail["truncated"] = {"file": str(seg.relative_to(self.cluster.run_dir)), "bytes": cut,
                                       "size_before": size}

    def _reassign(self, act: Active, rng: random.Random, failover: bool = False) -> None:
        """AlterPartitionReassignments, sent to the controller's Kafka listener, for the target's partition: its
        leader's replica replaced by a live broker outside its replicas (drawn from the fault's seed).  With
        ``failover`` (``reassign-failover``): a broker other than the controller's when there is one, and that
        broker is paused first (the partition's leader instead when it is the controller's), so
        the new replica cannot catch up and the reassignment cannot complete; the controller is SIGKILLed once
        it has answered, and the broker resumed: the next controller must find the reassignment in the topic
        znode and finish it.  The
        detail says what was asked, the answer and (failover) the controller killed."""
        topic, p = parse_target(act.fault.target).arg.rsplit("/", 1)
        view = self.view()
        part, ctl = view.partitions.get((topic, int(p))), view.controller
        spare = sorted(b for b in view.live if part is not None and b not in part["replicas"])
        if part is None or part["leader"] < 0 or not spare or ctl is None:
            act.skipped = f"no leader or controller, or no live broker outside the replicas of {topic}/{p}"
            return
        if failover and len(spare) > 1:   # not the controller's broker: its new replica could catch up and the
            spare = [b for b in spare if b != ctl]   # reassignment complete before the SIGKILL lands
        new = rng.choice(spare)
        target = [new if r == part["leader"] else r for r in part["replicas"]]
        act.detail.update(topic=topic, partition=int(p), replicas=list(part["replicas"]), to=target, controller=ctl)
        # the new replica's broker paused, so that it cannot catch up; when it is the controller's own (the only
        # spare), the partition's leader is paused instead: the new replica has nothing to fetch from until the
        # controller is gone (its replica dies with it)
        paused = (new if new != ctl else part["leader"]) if failover else None
        if paused is not None:
            self._signal_broker(paused, signal.SIGSTOP)
        try:
            act.detail["error"] = self._alter_reassignment(ctl, topic, int(p), target)
            if failover:
                self._signal_broker(ctl, signal.SIGKILL)
                self.cluster.wait_exit(ctl, 10)
                self.down.add(f"b{ctl}")
                act.nodes = [f"b{ctl}"]   # what the heal starts again
        finally:
            if paused is not None:
                self._signal_broker(paused, signal.SIGCONT)

    def _reassign_failover(self, act: Active, rng: random.Random) -> None:
        self._reassign(act, rng, failover=True)

    def _alter_reassignment(self, broker: int, topic: str, partition: int, replicas: list[int]) -> str | None:
        """One AlterPartitionReassignments v0 on ``broker``'s Kafka listener (not through the proxy) -> the error's
        name, or None."""
        import socket
        import struct
        from kafka.protocol.admin.topics import AlterPartitionReassignmentsRequest as Req
        from kafka.protocol.admin.topics import AlterPartitionReassignmentsResponse as Resp
        req = Req(version=0, timeout_ms=30000, topics=[Req.ReassignableTopic(name=topic, partitions=[
            Req.ReassignableTopic.ReassignablePartition(partition_index=partition, replicas=replicas)])])
        req.with_header(correlation_id=1, client_id="kafkasim-nemesis")
        data = bytes(req.encode(header=True))
        try:
            with socket.create_connection(self.cluster.cfg.broker(broker).kafka_advertised, timeout=30) as sock:
                sock.sendall(struct.pack(">i", len(data)) + data)
                size = struct.unpack(">i", _read(sock, 4))[0]
                r = Resp.decode(_read(sock, size), version=0, header=True)
        except OSError as e:
            return f"{type(e).__name__}: {e}"
        codes = [r.error_code] + [x.error_code for t in r.responses for x in t.partitions]
        bad = [c for c in codes if c != 0]
        return f"error code {bad[0]}" if bad else None

    def _disk_full(self, act: Active, rng: random.Random) -> None:
        self._disk_fault(act, lambda fs: disk_faults.fill(fs.target))

    def _disk_error(self, act: Active, rng: random.Random) -> None:
        self._disk_fault(act, lambda fs: fs.fail_writes())

    def _disk_fault(self, act: Active, do: Callable[[Any], Any]) -> None:
        if self.disks is None:
            act.skipped = "the run mounted no filesystems for the log directories"
            return
        view = act.view
        tp = target_partition(act.fault.target, view.offsets_partitions) if view is not None else None
        hit = []
        for b in self._brokers(act.nodes):
            act.failed[b] = self.disks.holding(b, tp)
            for fs in act.failed[b]:
                do(fs)
                hit.append(str(fs.target.relative_to(self.cluster.run_dir)))
        act.detail["dirs"] = hit

    def _heal_disks(self, act: Active) -> None:
        """Free or repair each filesystem and restart its broker (stopped first if it still runs: an offline
        directory stays offline until then; a broker that lost every directory has halted already)."""
        for b, filesystems in sorted(act.failed.items()):
            try:
                self.cluster.signal_broker(b, signal.SIGTERM)
            except RuntimeError:
                pass   # halted (every directory offline) or already down
            else:
                try:
                    self.cluster.wait_exit(b, 30)
                except TimeoutError:
                    self._signal_broker(b, signal.SIGKILL)
                    self.cluster.wait_exit(b, 10)
            for fs in filesystems:
                fs.repair()
            self.cluster.start_broker(b)
            self.down.discard(f"b{b}")

    def _network(self, act: Active) -> None:
        f = act.fault
        flows = []
        for a in act.nodes:
            for b in act.peers:
                if f.direction in ("both", "to"):
                    flows.append((a, b))
                if f.direction in ("both", "from"):
                    flows.append((b, a))
        links: set[str] = set()
        for src, dst in flows:
            if f.kind == "partition":
                links.update(self.net.block(src, dst))
            elif f.kind == "latency":
                links.update(self.net.shape(src, dst, latency_ms=f.latency_ms or 0, jitter_ms=f.jitter_ms or 0))
            else:
                links.update(self.net.shape(src, dst, loss=f.loss or 0.0))
        act.flows = flows
        act.detail["links"] = sorted(links)

    def _signal_broker(self, b: int, sig: signal.Signals) -> None:
        try:
            self.cluster.signal_broker(b, sig)
        except RuntimeError as e:  # not running (a fault already took it down)
            log.info("broker %d: %s", b, e)

    # ------------------------------------------------------------------ heal

    def heal(self, act: Active) -> None:
        if act.skipped:
            self._record(act, "heal")
            return
        kind = act.fault.kind
        if kind in NETWORK_KINDS:
            for src, dst in act.flows:
                if kind == "partition":
                    self.net.unblock(src, dst)
                else:
                    self.net.shape(src, dst, 0, 0, 0)
        elif kind in ("kill", "terminate", "truncate", "reassign-failover"):
            self._restart(act.nodes)
        elif kind == "pause":
            self._resume(act.nodes)
        elif kind in DISK_KINDS:
            self._heal_disks(act)
        self._record(act, "heal")

    def _restart(self, nodes: list[str]) -> None:
        for b in self._brokers(nodes):
            if f"b{b}" in self.down:
                self.cluster.start_broker(b)
        for n, s in zip([n for n in nodes if n.startswith("zk")], self._zk(nodes)):
            if n in self.down:
                s.start()
        for n in self._apps(nodes):
            if f"app{n}" in self.down:
                self.apps.start(n)
        self.down.difference_update(nodes)

    def _resume(self, nodes: list[str]) -> None:
        for b in self._brokers(nodes):
            self._signal_broker(b, signal.SIGCONT)
        for s in self._zk(nodes):
            s.resume()
        for n in self._apps(nodes):
            self.apps.resume(n)
        self.paused.difference_update(nodes)

    def heal_everything(self) -> None:
        """End of run: every node running and unpaused, every link clear."""
        self._resume(sorted(self.paused))
        self._restart(sorted(self.down))
        if self.net is not None:
            self.net.heal_all()


def _read(sock, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        out += chunk
    return out
