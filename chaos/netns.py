"""Root-only network faults with real network namespaces, iptables and NFQUEUE.

The alternative to the TCP fault proxy (``chaos/proxy.py``) when the run has root:
brokers and ZooKeeper servers talk over real IP, and faults act on packets.

Topology (one :class:`NetnsNetwork` per run, ``T`` = 6-character token from ``run_id``)::

    root namespace: bridge ksT, 10.213.K.254/24 (the gateway; also "client"'s address)
        |-- veth ksT1h <-> eth0 10.213.K.1/24 in namespace ksT-<node 1>
        |-- veth ksT2h <-> eth0 10.213.K.2/24 in namespace ksT-<node 2>  ...

Every node but ``"client"`` gets a namespace with ``lo`` up and a default route
via the gateway; the client stays in the root namespace and reaches the nodes
through the bridge.  ``K`` comes from ``subnet_index``, else from the token,
moving on while ``10.213.K.0/24`` overlaps an address or route of the root
namespace.  The bridge's alias, ``kafkasim <pid>:<start time>``, names its owner
so :func:`cleanup_stale` can tell a crashed run's leftovers from a live run.

Faults act on the packets from ``src`` to ``dst`` (one way; both the connections
``src`` opened and the replies it sends on connections ``dst`` opened).  Rules
live inside the node namespaces, never in the root namespace: in ``dst``'s
namespace (chain INPUT, ``-s ip(src)``), or in ``src``'s (chain OUTPUT,
``-d <gateway>``) when ``dst`` is the client.

``block(src, dst)``
    ``iptables -I INPUT 1 -s SRC -m comment --comment kafkasim:block:S->D -j DROP``.
    Packets are dropped on arrival, established connections included: connects
    from src time out.  TCP needs both ways, so a connection *from dst to src*
    also stalls (its SYN-ACKs/ACKs are dropped), unlike the proxy, where the
    other side's bytes still reach the listener; datagrams from dst to src pass.
``shape(src, dst, latency_ms, jitter_ms, loss)``
    ``iptables -A INPUT -s SRC ... -j NFQUEUE --queue-num Q --queue-bypass``, and
    a userspace delay line in this process (a thread reading netlink socket(s)
    opened inside the namespaces with ``setns``) that drops each packet with
    probability ``loss`` and releases the rest after ``latency +/- uniform(jitter)``
    ms, in arrival order (like the proxy: no reordering).  Appended, so a block
    (inserted first) wins.  ``shape(src, dst)`` with all zeros removes it and
    releases the packets held.  (``tc netem`` is not used: kernels built
    without ``sch_netem``, as here, are common in CI VMs.)
``heal_all()``
    Removes every block and shape.

Limits: IPv4 only; at most 14 nodes besides the client; the delay line is
Python (fine for control-plane traffic, a few 10k packets/s, not for bulk
throughput); jitter and loss draw from ``random.Random(f"{run_id}:{src}->{dst}")``
but packet timing is not reproducible; packets already held by the delay line
when a block starts are still delivered; shaping towards the client holds
locally sent packets, which TCP small queues may throttle.  If bridged traffic
is filtered by the host (``br_netfilter`` with a FORWARD policy of DROP),
``up()`` adds ``iptables -I FORWARD -i ksT -o ksT -j ACCEPT`` in the root
namespace (comment ``ksT``) and :meth:`down` removes it.
"""
from __future__ import annotations

import ctypes
import fcntl
import hashlib
import ipaddress
import json
import os
import random
import re
import select
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from collections import deque
from contextlib import contextmanager
from typing import Iterator

__all__ = ["NetnsError", "NetnsNetwork", "cleanup_stale", "netns_available", "PREFIX"]

PREFIX = "ks"
SUBNET = "10.213"
MAX_NODES = 14
OWNER_TAG = "kafkasim "
LOCK_PATH = "/run/lock/kafkasim-netns.lock" if os.path.isdir("/run/lock") else "/tmp/kafkasim-netns.lock"
_NAME_RE = re.compile(rf"^({PREFIX}[a-z0-9]{{6}})(-.+|\d+h)?$")
_NODE_RE = re.compile(r"^[A-Za-z0-9_.]{1,40}$")
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


class NetnsError(RuntimeError):
    """A namespace, iptables or netlink operation failed (the message has the command and its stderr)."""


def _run(cmd: list[str], timeout: float = 20) -> str:
    try:
        return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=timeout).stdout
    except subprocess.CalledProcessError as e:
        raise NetnsError(f"{shlex.join(cmd)}: exit {e.returncode}: {(e.stderr or '').strip()}") from None
    except (OSError, subprocess.TimeoutExpired) as e:
        raise NetnsError(f"{shlex.join(cmd)}: {e}") from None


def _try(cmd: list[str]) -> bool:
    try:
        _run(cmd)
        return True
    except NetnsError:
        return False


def _json(cmd: list[str]) -> list:
    out = _run(cmd).strip()
    return json.loads(out) if out else []


@contextmanager
def _lock() -> Iterator[None]:
    with open(LOCK_PATH, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _start_time(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[19]


def _owner_alive(alias: str) -> bool:
    try:
        pid, start = alias[len(OWNER_TAG):].split(":")
        return _start_time(int(pid)) == start
    except (OSError, ValueError):
        return False


def netns_available() -> str | None:
    """None if this process can use :class:`NetnsNetwork`, else why not."""
    if os.geteuid() != 0:
        return f"the netns network mode needs root (running as uid {os.geteuid()})"
    for tool in ("ip", "iptables"):
        if shutil.which(tool) is None:
            return f"the netns network mode needs `{tool}`, which is not on PATH"
    probe = f"{PREFIX}probe-{os.getpid()}"
    try:
        _run(["ip", "netns", "add", probe])
        _run(["ip", "netns", "exec", probe, "iptables", "-w", "-S"])
    except NetnsError as e:
        return f"the netns network mode is not usable here: {e}"
    finally:
        _try(["ip", "netns", "del", probe])
    return None


def cleanup_stale(prefix: str = PREFIX, dead_owners_only: bool = False) -> list[str]:
    """Remove this module's namespaces, links and root FORWARD rules whose names start with ``prefix``.

    With ``dead_owners_only``, only those of runs whose owning process is gone
    (bridge alias) or whose bridge is missing.  Processes left in a removed
    namespace are killed.  Returns the names removed."""
    with _lock():
        return _cleanup(prefix, dead_owners_only)


def _cleanup(prefix: str, dead_owners_only: bool) -> list[str]:
    links = [link["ifname"] for link in _json(["ip", "-j", "link", "show"])]
    owners = {link["ifname"]: link.get("ifalias", "") for link in _json(["ip", "-j", "link", "show", "type", "bridge"])}

    def doomed(name: str) -> bool:
        m = _NAME_RE.match(name)
        if not m or not name.startswith(prefix):
            return False
        owner = owners.get(m.group(1), "")
        return not dead_owners_only or not owner.startswith(OWNER_TAG) or not _owner_alive(owner)

    removed = []
    for ns in [n["name"] for n in _json(["ip", "-j", "netns", "list"]) if doomed(n["name"])]:
        for pid in _run(["ip", "netns", "pids", ns]).split() if os.path.exists(f"/run/netns/{ns}") else []:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        _try(["ip", "netns", "del", ns])
        removed.append(ns)
    for name in sorted((n for n in links if doomed(n)), key=lambda n: n not in owners):  # veths, then bridges
        _try(["ip", "link", "del", name])
        removed.append(name)
    if shutil.which("iptables"):
        for line in _run(["iptables", "-w", "-S", "FORWARD"]).splitlines():
            rule = shlex.split(line)
            if "--comment" in rule and doomed(rule[rule.index("--comment") + 1]) and rule[0] == "-A":
                _try(["iptables", "-w", "-D", *rule[1:]])
    return removed


def _in_netns(ns: str, fn):
    """Call ``fn`` in a thread switched into namespace ``ns``: sockets it opens stay there."""
    out: dict = {}

    def run() -> None:
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        try:
            target = os.open(f"/run/netns/{ns}", os.O_RDONLY)
            try:
                if _libc.setns(target, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns({ns})")
                try:
                    out["value"] = fn()
                finally:
                    _libc.setns(own, CLONE_NEWNET)
            finally:
                os.close(target)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller
            out["error"] = e
        finally:
            os.close(own)

    t = threading.Thread(target=run, name=f"setns-{ns}")
    t.start()
    t.join()
    if "error" in out:
        raise NetnsError(f"in namespace {ns}: {out['error']}")
    return out["value"]


# --- the NFQUEUE delay line (netlink protocol of linux/netfilter/nfnetlink_queue.h) ---
_MSG_PACKET, _MSG_VERDICT, _MSG_CONFIG, _MSG_VERDICT_BATCH = (3 << 8) | 0, (3 << 8) | 1, (3 << 8) | 2, (3 << 8) | 3
_NF_DROP, _NF_ACCEPT = 0, 1


def _nlmsg(msg_type: int, flags: int, seq: int, queue: int, attrs: list[tuple[int, bytes]]) -> bytes:
    body = struct.pack("!BBH", socket.AF_UNSPEC, 0, queue)
    for kind, value in attrs:
        a = struct.pack("HH", 4 + len(value), kind) + value
        body += a + b"\0" * (-len(a) % 4)
    return struct.pack("IHHII", 16 + len(body), msg_type, flags, seq, 0) + body


def _parse(data: bytes) -> Iterator[tuple[str, int, int]]:
    """("err", seq, errno) for acks and errors, ("pkt", queue, packet id) for queued packets."""
    off = 0
    while off + 16 <= len(data):
        length, kind, _flags, seq, _pid = struct.unpack_from("IHHII", data, off)
        if length < 16:
            return
        if kind == 2:
            yield "err", seq, -struct.unpack_from("i", data, off + 16)[0]
        elif kind == _MSG_PACKET:
            queue = struct.unpack_from("!H", data, off + 18)[0]
            a = off + 20
            while a + 4 <= off + length:
                alen, atype = struct.unpack_from("HH", data, a)
                if alen < 4:
                    break
                if atype & 0x3FFF == 1:  # NFQA_PACKET_HDR: __be32 packet_id, ...
                    yield "pkt", queue, struct.unpack_from("!I", data, a + 4)[0]
                a += (alen + 3) & ~3
        off += (length + 3) & ~3


def _nl_socket() -> socket.socket:
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12)  # NETLINK_NETFILTER
    s.bind((0, 0))
    s.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)  # SO_RCVBUFFORCE
    s.setsockopt(270, 5, 1)  # SOL_NETLINK, NETLINK_NO_ENOBUFS: a batch verdict covers any missed packet
    s.setblocking(False)
    return s


class _Queue:
    def __init__(self, sock: socket.socket, rng: random.Random):
        self.sock, self.rng = sock, rng
        self.latency = self.jitter = self.loss = 0.0
        self.active = False
        self.pending: deque[tuple[float, int]] = deque()  # (due, packet id), due non-decreasing
        self.last_due = 0.0


class _DelayLine:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.socks: dict[str, socket.socket] = {}
        self.queues: dict[int, _Queue] = {}
        self.seq = 0
        self.stop = False
        self.wake_r, self.wake_w = os.pipe()
        self.thread: threading.Thread | None = None

    def set(self, ns: str, queue: int, rng: random.Random, latency: float, jitter: float, loss: float) -> None:
        with self.lock:
            sock = self.socks.get(ns) or self.socks.setdefault(ns, _in_netns(ns, _nl_socket))
            q = self.queues.get(queue)
            if q is None:
                self._request(sock, queue, [(1, struct.pack("!BBH", 1, 0, socket.AF_INET)),  # CMD BIND
                                            (2, struct.pack("!IB", 0, 1)),                    # PARAMS: copy meta
                                            (3, struct.pack("!I", 65536))])                   # QUEUE_MAXLEN
                q = self.queues[queue] = _Queue(sock, rng)
            q.latency, q.jitter, q.loss, q.active = latency / 1000, jitter / 1000, loss, True
        if self.thread is None:
            self.thread = threading.Thread(target=self._loop, name="netns-delay-line", daemon=True)
            self.thread.start()
        os.write(self.wake_w, b"x")

    def clear(self, queue: int) -> None:
        with self.lock:
            q = self.queues.get(queue)
            if q is not None:
                q.active = False
                if q.pending:
                    self._verdict(q.sock, queue, q.pending[-1][1], _NF_ACCEPT, batch=True)
                    q.pending.clear()

    def close(self) -> None:
        for queue in list(self.queues):
            self.clear(queue)
        with self.lock:
            self.stop = True
        os.write(self.wake_w, b"x")
        if self.thread is not None:
            self.thread.join(5)
        for s in self.socks.values():
            s.close()
        os.close(self.wake_r)
        os.close(self.wake_w)

    def _request(self, sock: socket.socket, queue: int, attrs: list[tuple[int, bytes]]) -> None:
        self.seq += 1
        sock.send(_nlmsg(_MSG_CONFIG, 1 | 4, self.seq, queue, attrs))  # NLM_F_REQUEST | NLM_F_ACK
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if not select.select([sock], [], [], max(0.0, deadline - time.monotonic()))[0]:
                continue
            for kind, a, b in _parse(sock.recv(1 << 20)):
                if kind == "pkt":
                    self._on_packet(a, b)
                elif a == self.seq:
                    if b:
                        raise NetnsError(f"binding NFQUEUE {queue}: {os.strerror(b)}")
                    return
        raise NetnsError(f"binding NFQUEUE {queue}: no answer from the kernel")

    def _verdict(self, sock: socket.socket, queue: int, packet_id: int, verdict: int, batch: bool) -> None:
        msg = _nlmsg(_MSG_VERDICT_BATCH if batch else _MSG_VERDICT, 1, 0, queue,
                     [(2, struct.pack("!II", verdict, packet_id))])
        try:
            sock.send(msg)
        except OSError:
            pass  # the packet is gone (namespace torn down); nothing to release

    def _on_packet(self, queue: int, packet_id: int) -> None:
        q = self.queues.get(queue)
        if q is None or not q.active:
            if q is not None:
                self._verdict(q.sock, queue, packet_id, _NF_ACCEPT, batch=False)
            return
        if q.loss and q.rng.random() < q.loss:
            self._verdict(q.sock, queue, packet_id, _NF_DROP, batch=False)
            return
        now = time.monotonic()
        due = max(now + max(0.0, q.latency + q.rng.uniform(-q.jitter, q.jitter)), q.last_due)
        q.last_due = due
        q.pending.append((due, packet_id))

    def _release(self) -> float | None:
        now, wait = time.monotonic(), None
        for queue, q in self.queues.items():
            last = None
            while q.pending and q.pending[0][0] <= now:
                last = q.pending.popleft()[1]
            if last is not None:
                self._verdict(q.sock, queue, last, _NF_ACCEPT, batch=True)
            if q.pending:
                wait = min(wait if wait is not None else 1.0, q.pending[0][0] - now)
        return wait

    def _loop(self) -> None:
        while True:
            with self.lock:
                if self.stop:
                    return
                socks, wait = list(self.socks.values()), self._release()
            readable = select.select([*socks, self.wake_r], [], [], wait)[0]
            with self.lock:
                for s in readable:
                    if s == self.wake_r:
                        os.read(self.wake_r, 4096)
                        continue
                    while True:
                        try:
                            data = s.recv(1 << 20)
                        except (BlockingIOError, OSError):
                            break
                        for kind, a, b in _parse(data):
                            if kind == "pkt":
                                self._on_packet(a, b)


class NetnsNetwork:
    """One run's namespaces, bridge and fault rules (see the module docstring)."""

    def __init__(self, run_id: str, nodes: list[str], subnet_index: int | None = None):
        self.run_id = run_id
        self.token = run_id if re.fullmatch(r"[a-z0-9]{6}", run_id) else hashlib.sha1(run_id.encode()).hexdigest()[:6]
        self.prefix = self.bridge = PREFIX + self.token
        self.nodes = [n for n in dict.fromkeys(nodes) if n != "client"]
        bad = [n for n in self.nodes if not _NODE_RE.match(n)]
        if bad or len(self.nodes) > MAX_NODES:
            raise NetnsError(f"nodes must be at most {MAX_NODES} names of [A-Za-z0-9_.] (bad: {bad})")
        if subnet_index is not None and not 0 <= subnet_index <= 255:
            raise NetnsError(f"subnet_index must be 0..255, got {subnet_index}")
        self.subnet_index = subnet_index
        self.k: int | None = None
        self._blocks: dict[tuple[str, str], tuple[str, list[str]]] = {}
        self._shapes: dict[tuple[str, str], tuple[str, list[str], int]] = {}
        self._forward_rule: list[str] | None = None
        self._delay: _DelayLine | None = None

    # --- addressing
    def _index(self, node: str) -> int:
        if node == "client":
            return MAX_NODES + 1
        if node not in self.nodes:
            raise NetnsError(f"unknown node {node!r} (nodes: {', '.join(self.nodes)}, client)")
        return self.nodes.index(node) + 1

    def ip(self, node: str) -> str:
        i = self._index(node)
        if self.k is None:
            raise NetnsError("the network is not up")
        return f"{SUBNET}.{self.k}.{254 if node == 'client' else i}"

    def netns(self, node: str) -> str | None:
        self._index(node)
        return None if node == "client" else f"{self.prefix}-{node}"

    def exec_prefix(self, node: str) -> list[str]:
        ns = self.netns(node)
        return [] if ns is None else ["ip", "netns", "exec", ns]

    def _pick_subnet(self) -> int:
        taken = []
        for cmd in (["ip", "-4", "-o", "addr", "show"], ["ip", "-4", "route", "show", "table", "all"]):
            for word in _run(cmd).split():
                try:
                    net = ipaddress.ip_network(word, strict=False)
                except ValueError:
                    continue
                if net.version == 4 and net.prefixlen >= 16:  # a wider route loses to our connected /24
                    taken.append(net)
        start = self.subnet_index if self.subnet_index is not None else int(self.token, 36) % 250
        for k in [start] if self.subnet_index is not None else [(start + j) % 250 for j in range(250)]:
            mine = ipaddress.ip_network(f"{SUBNET}.{k}.0/24")
            if not any(mine.overlaps(net) for net in taken):
                return k
        raise NetnsError(f"no free {SUBNET}.K.0/24 subnet (from K={start}): all overlap {taken}")

    # --- lifecycle
    def up(self) -> None:
        if self.k is not None:
            raise NetnsError(f"{self.bridge} is already up")
        with _lock():
            _cleanup(self.prefix, dead_owners_only=False)
            _cleanup(PREFIX, dead_owners_only=True)
            self.k = self._pick_subnet()
            _run(["ip", "link", "add", self.bridge, "type", "bridge"])
            _run(["ip", "link", "set", self.bridge, "alias", f"{OWNER_TAG}{os.getpid()}:{_start_time(os.getpid())}"])
            _run(["ip", "addr", "add", f"{self.ip('client')}/24", "dev", self.bridge])
            _run(["ip", "link", "set", self.bridge, "up"])
        try:
            for i, node in enumerate(self.nodes, 1):
                ns, host = self.netns(node), f"{self.prefix}{i}h"
                _run(["ip", "netns", "add", ns])
                _run(["ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", ns])
                _run(["ip", "link", "set", host, "master", self.bridge, "up"])
                _run(["ip", "-n", ns, "addr", "add", f"{self.ip(node)}/24", "dev", "eth0"])
                _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
                _run(["ip", "-n", ns, "link", "set", "lo", "up"])
                _run(["ip", "-n", ns, "route", "add", "default", "via", self.ip("client")])
            self._check_connectivity()
        except BaseException:
            self.down()
            raise

    def _reachable(self, from_ns: str | None, to: str) -> bool:
        """A TCP connect to port 9 of ``to``: refused (or accepted) means the packets made it."""
        sock = _in_netns(from_ns, socket.socket) if from_ns else socket.socket()
        with sock:
            sock.settimeout(2)
            try:
                sock.connect((to, 9))
            except ConnectionRefusedError:
                return True
            except OSError:
                return False
            return True

    def _check_connectivity(self) -> None:
        pairs = [(None, self.ip(n)) for n in self.nodes[:1]]
        pairs += [(self.netns(self.nodes[0]), self.ip(self.nodes[1]))] if len(self.nodes) > 1 else []
        for attempt in (0, 1):
            failed = [(src or "client", dst) for src, dst in pairs if not self._reachable(src, dst)]
            if not failed:
                return
            nf = "/proc/sys/net/bridge/bridge-nf-call-iptables"
            if attempt or failed[0][0] == "client" or not os.path.exists(nf) or open(nf).read().strip() != "1":
                raise NetnsError(f"{self.bridge}: no connectivity {failed} after setting up the namespaces")
            self._forward_rule = ["FORWARD", "-i", self.bridge, "-o", self.bridge, "-m", "comment",
                                  "--comment", self.bridge, "-j", "ACCEPT"]
            _run(["iptables", "-w", "-I", *self._forward_rule])

    def down(self) -> None:
        """Remove everything :meth:`up` made; processes still in the namespaces are killed."""
        if self._delay is not None:
            self._delay.close()
            self._delay = None
        self._blocks.clear()
        self._shapes.clear()
        for i in range(1, len(self.nodes) + 1):
            _try(["ip", "link", "del", f"{self.prefix}{i}h"])
        try:
            cleanup_stale(self.prefix)
        except NetnsError:
            pass
        if self._forward_rule is not None:
            _try(["iptables", "-w", "-D", *self._forward_rule])
            self._forward_rule = None
        self.k = None

    def __enter__(self) -> "NetnsNetwork":
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    # --- faults
    def _where(self, src: str, dst: str) -> tuple[str, list[str]]:
        """The namespace and chain/match selecting packets from src to dst."""
        if src == dst or self.k is None:
            raise NetnsError(f"no link {src}->{dst}" if src == dst else "the network is not up")
        if dst == "client":
            return self.netns(src), ["OUTPUT", "-d", self.ip("client")]
        return self.netns(dst), ["INPUT", "-s", self.ip(src)]

    def _iptables(self, ns: str, *args: str) -> None:
        _run(["ip", "netns", "exec", ns, "iptables", "-w", *args])

    def block(self, src: str, dst: str) -> None:
        if (src, dst) in self._blocks:
            return
        ns, match = self._where(src, dst)
        rule = [*match, "-m", "comment", "--comment", f"kafkasim:block:{src}->{dst}", "-j", "DROP"]
        self._iptables(ns, "-I", rule[0], "1", *rule[1:])
        self._blocks[(src, dst)] = (ns, rule)

    def unblock(self, src: str, dst: str) -> None:
        entry = self._blocks.pop((src, dst), None)
        if entry is not None:
            self._iptables(entry[0], "-D", *entry[1])

    def shape(self, src: str, dst: str, latency_ms: float = 0, jitter_ms: float = 0, loss: float = 0) -> None:
        if latency_ms < 0 or jitter_ms < 0 or not 0 <= loss <= 1:
            raise NetnsError(f"bad shape {latency_ms=} {jitter_ms=} {loss=}")
        ns, match = self._where(src, dst)
        queue = self._index(src) * 16 + self._index(dst)
        if not (latency_ms or jitter_ms or loss):
            entry = self._shapes.pop((src, dst), None)
            if entry is not None:
                self._iptables(entry[0], "-D", *entry[1])
                self._delay.clear(entry[2])
            return
        if self._delay is None:
            self._delay = _DelayLine()
        self._delay.set(ns, queue, random.Random(f"{self.run_id}:{src}->{dst}"), latency_ms, jitter_ms, loss)
        if (src, dst) not in self._shapes:
            rule = [*match, "-m", "comment", "--comment", f"kafkasim:shape:{src}->{dst}",
                    "-j", "NFQUEUE", "--queue-num", str(queue), "--queue-bypass"]
            self._iptables(ns, "-A", *rule)
            self._shapes[(src, dst)] = (ns, rule, queue)

    def heal_all(self) -> None:
        for src, dst in list(self._blocks):
            self.unblock(src, dst)
        for src, dst in list(self._shapes):
            self.shape(src, dst)
