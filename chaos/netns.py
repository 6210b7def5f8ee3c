"""Root-only network faults with real network namespaces, iptables and NFQUEUE.

The alternative to the TCP fault proxy (``chaos/proxy.py``) when the run has root.
``T``: a 6-character token from ``run_id``; ``K``: ``subnet_index``, else from ``T``,
moved on while ``10.213.K.0/24`` overlaps an address or route of the root namespace::

    root namespace: bridge ksT 10.213.K.254/24 (the gateway, and "client"'s address)
        |-- veth ksT1h <-> eth0 10.213.K.1/24 in namespace ksT-<node 1>  (lo up, default via .254)
        |-- veth ksT2h <-> eth0 10.213.K.2/24 in namespace ksT-<node 2>  ...

The bridge's alias ``kafkasim <pid>:<start time>`` names its owner, so :func:`cleanup_stale`
tells a crashed run's leftovers from a live run's.  A fault acts on the packets from
``src`` to ``dst`` (one way, on connections either side opened), by rules inside the
node namespaces only: INPUT ``-s ip(src)`` in dst's, or OUTPUT ``-d <gateway>`` in
src's when dst is the client (who lives in the root namespace).

``block(src, dst)``
    ``iptables -I INPUT 1 -s SRC -m comment --comment kafkasim:block:S->D -j DROP``:
    established connections included; connects from src time out.  TCP needs both
    ways, so connections *from dst to src* stall too (SYN-ACKs dropped), where the
    proxy would still deliver dst's bytes; datagrams from dst to src pass.
``shape(src, dst, latency_ms, jitter_ms, loss)``
    ``iptables -A INPUT -s SRC ... -j NFQUEUE --queue-num Q --queue-bypass`` and a
    thread per shaped link reading the queue on a netlink socket opened in the
    namespace (``setns``): a packet is dropped with probability ``loss``, the others
    accepted after ``latency +/- uniform(jitter)`` ms in arrival order (no reordering,
    as in the proxy).  Appended, so a block wins; all zeros removes it, releasing
    what it holds.  Not ``tc netem``: this CI's kernel has no ``sch_netem``.

Limits: IPv4; at most 14 nodes besides the client; the delay line is Python (some
10k packets/s: control-plane traffic, not bulk); jitter and loss draw from
``random.Random(f"{run_id}:{src}->{dst}")`` but timing is not reproducible; packets
a shape holds when a block starts are delivered; shaping towards the client holds
sent packets (TCP small queues may throttle).  If the host filters bridged traffic
(``br_netfilter``, FORWARD policy DROP), ``up()`` adds ``iptables -I FORWARD -i ksT
-o ksT -j ACCEPT`` (comment ``ksT``) in the root namespace; ``down()`` removes it.
"""
from __future__ import annotations

import ctypes, errno, fcntl, hashlib, ipaddress, json, os, random, re, select, shlex  # noqa: E401
import shutil, signal, socket, struct, subprocess, threading, time  # noqa: E401
from collections import deque
from contextlib import contextmanager
from typing import Callable, Iterator

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


def _run(cmd: list[str], quiet: bool = False) -> str:
    """Run one command; NetnsError with the command and its stderr (``quiet``: "" instead)."""
    try:
        return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=30).stdout
    except subprocess.CalledProcessError as e:
        error = f"{shlex.join(cmd)}: exit {e.returncode}: {(e.stderr or '').strip()}"
    except (OSError, subprocess.TimeoutExpired) as e:
        error = f"{shlex.join(cmd)}: {e}"
    if quiet:
        return ""
    raise NetnsError(error)


def _json(cmd: list[str]) -> list:
    return json.loads(_run(cmd).strip() or "[]")


@contextmanager
def _lock() -> Iterator[None]:
    with open(LOCK_PATH, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _owner(pid: int) -> str:
    """``kafkasim <pid>:<start time>`` while process ``pid`` lives (pid reuse changes the start time)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f"{OWNER_TAG}{pid}:{f.read().rsplit(')', 1)[1].split()[19]}"
    except OSError:
        return ""


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
        _run(["ip", "netns", "del", probe], quiet=True)
    return None


def cleanup_stale(prefix: str = PREFIX, dead_owners_only: bool = False) -> list[str]:
    """Remove this module's namespaces, links and root FORWARD rules whose names start with ``prefix``.

    With ``dead_owners_only``, only those of runs whose owner (the bridge's alias)
    is gone, or whose bridge is.  Processes left in a removed namespace are
    killed.  Returns the names removed."""
    with _lock():
        return _cleanup(prefix, dead_owners_only)


def _cleanup(prefix: str, dead_owners_only: bool) -> list[str]:
    links = [link["ifname"] for link in _json(["ip", "-j", "link", "show"])]
    owners = {link["ifname"]: link.get("ifalias", "") for link in _json(["ip", "-j", "link", "show", "type", "bridge"])}

    def doomed(name: str) -> bool:
        m = _NAME_RE.match(name)
        if not m or not name.startswith(prefix):
            return False
        if not dead_owners_only:
            return True
        owner = owners.get(m.group(1))
        if owner is None:  # a namespace or veth whose bridge is gone
            return m.group(2) is not None
        mine = re.fullmatch(rf"{OWNER_TAG}(\d+):\d+", owner)  # else not ours: leave it
        return bool(mine) and _owner(int(mine.group(1))) != owner

    removed = [n["name"] for n in _json(["ip", "-j", "netns", "list"]) if doomed(n["name"])]
    for ns in removed:
        for pid in _run(["ip", "netns", "pids", ns], quiet=True).split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        _run(["ip", "netns", "del", ns], quiet=True)
    for name in sorted((n for n in links if doomed(n)), key=lambda n: n in owners):  # veths, then bridges
        _run(["ip", "link", "del", name], quiet=True)
        removed.append(name)
    for line in _run(["iptables", "-w", "-S", "FORWARD"], quiet=True).splitlines():
        rule = shlex.split(line)
        if rule[:1] == ["-A"] and "--comment" in rule and doomed(rule[rule.index("--comment") + 1]):
            _run(["iptables", "-w", "-D", *rule[1:]], quiet=True)
    return removed


def _in_netns(ns: str, fn: Callable[[], socket.socket]) -> socket.socket:
    """Call ``fn`` in a thread switched into namespace ``ns`` (the thread then ends): its socket stays there."""
    out: dict = {}

    def run() -> None:
        try:
            with open(f"/run/netns/{ns}") as f:
                if _libc.setns(f.fileno(), CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns({ns})")
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - raised again below
            out["error"] = e

    t = threading.Thread(target=run, name=f"setns-{ns}")
    t.start()
    t.join()
    if "error" in out:
        raise NetnsError(f"in namespace {ns}: {out['error']}")
    return out["value"]


# --- the NFQUEUE delay line (netlink messages of linux/netfilter/nfnetlink_queue.h)
_PACKET, _VERDICT, _CONFIG, _VERDICT_BATCH = (3 << 8) | 0, (3 << 8) | 1, (3 << 8) | 2, (3 << 8) | 3


def _nlmsg(kind: int, flags: int, queue: int, attrs: list[tuple[int, bytes]]) -> bytes:
    body = struct.pack("!BBH", socket.AF_UNSPEC, 0, queue)  # nfgenmsg: family, version, res_id = queue
    for atype, value in attrs:
        a = struct.pack("HH", 4 + len(value), atype) + value
        body += a + b"\0" * (-len(a) % 4)
    return struct.pack("IHHII", 16 + len(body), kind, flags, 1, 0) + body


def _parse(data: bytes) -> Iterator[tuple[int, int]]:
    """(kind, value): (2, errno) for an ack or error, (_PACKET, packet id) for a queued packet."""
    off = 0
    while off + 24 <= len(data):
        length, kind = struct.unpack_from("IH", data, off)
        if length < 16:
            return
        if kind == 2:  # NLMSG_ERROR
            yield 2, -struct.unpack_from("i", data, off + 16)[0]
        elif kind == _PACKET and struct.unpack_from("H", data, off + 22)[0] & 0x3FFF == 1:
            yield _PACKET, struct.unpack_from("!I", data, off + 24)[0]  # NFQA_PACKET_HDR comes first
        off += (length + 3) & ~3


class _Queue(threading.Thread):
    """One shaped src->dst link: NFQUEUE queue ``num`` read by this thread on a netlink socket in namespace ``ns``."""

    def __init__(self, ns: str, num: int, rng: random.Random):
        super().__init__(name=f"netns-queue-{num}", daemon=True)
        self.num, self.rng, self.lock, self.stop = num, rng, threading.Lock(), False
        self.latency = self.jitter = self.loss = self.last_due = 0.0
        self.pending: deque[tuple[float, int]] = deque()  # (due, packet id), due non-decreasing
        self.sock = _in_netns(ns, lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12))  # NETFILTER
        try:
            self.sock.bind((0, 0))
            self.sock.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)  # SO_RCVBUFFORCE
            self.sock.setsockopt(270, 5, 1)  # NETLINK_NO_ENOBUFS: a batch verdict covers missed packets
            self.sock.send(_nlmsg(_CONFIG, 1 | 4, num, [(1, struct.pack("!BBH", 1, 0, socket.AF_INET)),  # BIND
                                                        (2, struct.pack("!IB", 0, 1)),  # copy metadata only
                                                        (3, struct.pack("!I", 65536))]))  # queue length
            if not select.select([self.sock], [], [], 5)[0]:
                raise NetnsError(f"binding NFQUEUE {num} in {ns}: no answer from the kernel")
            err = next((v for k, v in _parse(self.sock.recv(65536)) if k == 2), 0)
            if err:
                raise NetnsError(f"binding NFQUEUE {num} in {ns}: {os.strerror(err)}")
            self.sock.setblocking(False)
        except BaseException:
            self.sock.close()
            raise
        self.start()

    def set(self, latency_ms: float, jitter_ms: float, loss: float) -> None:
        """New rules for the packets to come; all zeros also releases the packets held."""
        with self.lock:
            self.latency, self.jitter, self.loss = latency_ms / 1000, jitter_ms / 1000, loss
            if not (latency_ms or jitter_ms or loss):
                self.release(float("inf"))
                self.last_due = 0.0

    def close(self) -> None:
        with self.lock:
            self.stop = True
            self.release(float("inf"))
        self.join(2)
        self.sock.close()

    def verdict(self, packet_id: int, accept: bool, batch: bool) -> None:
        try:
            self.sock.send(_nlmsg(_VERDICT_BATCH if batch else _VERDICT, 1, self.num,
                                  [(2, struct.pack("!II", int(accept), packet_id))]))
        except OSError:
            pass  # the namespace is being torn down: nothing left to release

    def release(self, now: float) -> float:
        """Accept every packet due, in order (one batch verdict); the seconds until the next is due."""
        last = None
        while self.pending and self.pending[0][0] <= now:
            last = self.pending.popleft()[1]
        if last is not None:
            self.verdict(last, True, batch=True)
        return self.pending[0][0] - now if self.pending else 1.0

    def run(self) -> None:
        while True:
            with self.lock:
                if self.stop:
                    return
                wait = min(self.release(time.monotonic()), 0.1)  # 0.1: notice close() soon
            if not select.select([self.sock], [], [], wait)[0]:
                continue
            with self.lock:
                while not self.stop:
                    try:
                        data = self.sock.recv(1 << 20)
                    except OSError:  # BlockingIOError: drained
                        break
                    now = time.monotonic()
                    for packet_id in (v for k, v in _parse(data) if k == _PACKET):
                        if self.loss and self.rng.random() < self.loss:
                            self.verdict(packet_id, False, batch=False)
                            continue
                        delay = max(0.0, self.latency + self.rng.uniform(-self.jitter, self.jitter))
                        self.last_due = max(now + delay, self.last_due)
                        self.pending.append((self.last_due, packet_id))


class NetnsNetwork:
    """One run's namespaces, bridge and fault rules (see the module docstring)."""

    def __init__(self, run_id: str, nodes: list[str], subnet_index: int | None = None):
        self.run_id = run_id
        self.token = run_id if re.fullmatch(r"[a-z0-9]{6}", run_id) else hashlib.sha1(run_id.encode()).hexdigest()[:6]
        self.prefix = self.bridge = PREFIX + self.token
        self.nodes = [n for n in dict.fromkeys(nodes) if n != "client"]
        bad = [n for n in self.nodes if not _NODE_RE.match(n)]
        if bad or len(self.nodes) > MAX_NODES or not 0 <= (subnet_index or 0) <= 255:
            raise NetnsError(f"want at most {MAX_NODES} nodes named [A-Za-z0-9_.] (bad: {bad}), subnet_index 0..255")
        self.subnet_index = subnet_index
        self.k: int | None = None  # the subnet is 10.213.k.0/24 while up
        self._blocks: set[tuple[str, str]] = set()
        self._shapes: set[tuple[str, str]] = set()
        self._queues: dict[int, _Queue] = {}

    def _index(self, node: str) -> int:
        if node != "client" and node not in self.nodes:
            raise NetnsError(f"unknown node {node!r} (nodes: {', '.join(self.nodes)}, client)")
        return MAX_NODES + 1 if node == "client" else self.nodes.index(node) + 1

    def ip(self, node: str) -> str:
        i = self._index(node)
        if self.k is None:
            raise NetnsError(f"{self.bridge} is not up")
        return f"{SUBNET}.{self.k}.{254 if node == 'client' else i}"

    def netns(self, node: str) -> str | None:
        self._index(node)
        return None if node == "client" else f"{self.prefix}-{node}"

    def exec_prefix(self, node: str) -> list[str]:
        return ["ip", "netns", "exec", ns] if (ns := self.netns(node)) else []

    def _pick_subnet(self) -> int:
        nets = [f"{a['local']}/{a['prefixlen']}" for link in _json(["ip", "-j", "-4", "addr", "show"])
                for a in link.get("addr_info", [])]
        nets += [r["dst"] for r in _json(["ip", "-j", "-4", "route", "show", "table", "all"])
                 if r.get("dst") != "default"]
        taken = [n for n in (ipaddress.ip_network(x, strict=False) for x in nets) if n.prefixlen >= 16]  # wider loses
        start = self.subnet_index if self.subnet_index is not None else int(self.token, 36) % 250
        for k in [start] if self.subnet_index is not None else [(start + j) % 250 for j in range(250)]:
            if not any(ipaddress.ip_network(f"{SUBNET}.{k}.0/24").overlaps(n) for n in taken):
                return k
        raise NetnsError(f"no free {SUBNET}.K.0/24 (from K={start}): each overlaps one of {[str(n) for n in taken]}")

    def up(self) -> None:
        if self.k is not None:
            raise NetnsError(f"{self.bridge} is already up")
        try:
            with _lock():
                _cleanup(self.prefix, dead_owners_only=False)
                _cleanup(PREFIX, dead_owners_only=True)
                self.k = self._pick_subnet()
                _run(["ip", "link", "add", self.bridge, "type", "bridge"])
                _run(["ip", "link", "set", self.bridge, "alias", _owner(os.getpid())])
                _run(["ip", "addr", "add", f"{self.ip('client')}/24", "dev", self.bridge])
                _run(["ip", "link", "set", self.bridge, "up"])
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

    def _check_connectivity(self) -> None:
        """TCP connects to a closed port (refused: the packets made it), client -> node 1 -> node 2."""
        pairs = [(None, n) for n in self.nodes[:1]] + [(self.netns(self.nodes[0]), n) for n in self.nodes[1:2]]
        for attempt in (0, 1):
            failed = [f"{ns or 'client'} -> {dst}" for ns, dst in pairs if not self._connects(ns, self.ip(dst))]
            nf = "/proc/sys/net/bridge/bridge-nf-call-iptables"
            if not failed:
                return
            if attempt or "client" in failed[0] or not os.path.exists(nf) or open(nf).read()[0] != "1":
                raise NetnsError(f"{self.bridge}: no connectivity ({', '.join(failed)}) after setting it up")
            _run(["iptables", "-w", "-I", "FORWARD", "-i", self.bridge, "-o", self.bridge,  # br_netfilter + DROP
                  "-m", "comment", "--comment", self.bridge, "-j", "ACCEPT"])

    @staticmethod
    def _connects(ns: str | None, ip: str) -> bool:
        with _in_netns(ns, socket.socket) if ns else socket.socket() as sock:
            sock.settimeout(2)
            return sock.connect_ex((ip, 9)) in (0, errno.ECONNREFUSED)

    def down(self) -> None:
        """Remove everything :meth:`up` made (killing processes still in the namespaces); never raises."""
        for q in self._queues.values():
            q.stop = True
        for q in self._queues.values():
            q.close()
        self._queues.clear()
        self._blocks.clear()
        self._shapes.clear()
        try:
            cleanup_stale(self.prefix)  # namespaces, veths, bridge, FORWARD rule
        except NetnsError:
            pass
        self.k = None

    def __enter__(self) -> "NetnsNetwork":
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def _rule(self, src: str, dst: str, what: str) -> tuple[list[str], str, list[str]]:
        """(``ip netns exec NS iptables -w``, chain, match and target) for the packets from src to dst."""
        if src == dst:
            raise NetnsError(f"no link from {src} to itself")
        ns, chain, match = ((self.netns(src), "OUTPUT", ["-d", self.ip(dst)]) if dst == "client"
                            else (self.netns(dst), "INPUT", ["-s", self.ip(src)]))
        target = ["DROP"] if what == "block" else ["NFQUEUE", "--queue-num", str(self._queue(src, dst)),
                                                   "--queue-bypass"]
        return (["ip", "netns", "exec", ns, "iptables", "-w"], chain,
                [*match, "-m", "comment", "--comment", f"kafkasim:{what}:{src}->{dst}", "-j", *target])

    def _queue(self, src: str, dst: str) -> int:
        return self._index(src) * 16 + self._index(dst)

    def block(self, src: str, dst: str) -> None:
        if (src, dst) not in self._blocks:
            iptables, chain, spec = self._rule(src, dst, "block")
            _run([*iptables, "-I", chain, "1", *spec])
            self._blocks.add((src, dst))

    def unblock(self, src: str, dst: str) -> None:
        if (src, dst) in self._blocks:
            iptables, chain, spec = self._rule(src, dst, "block")
            _run([*iptables, "-D", chain, *spec])
            self._blocks.discard((src, dst))

    def shape(self, src: str, dst: str, latency_ms: float = 0, jitter_ms: float = 0, loss: float = 0) -> None:
        if latency_ms < 0 or jitter_ms < 0 or not 0 <= loss <= 1:
            raise NetnsError(f"bad shape {src}->{dst}: {latency_ms=} {jitter_ms=} {loss=}")
        iptables, chain, spec = self._rule(src, dst, "shape")
        on = bool(latency_ms or jitter_ms or loss)
        if not on and (src, dst) in self._shapes:
            _run([*iptables, "-D", chain, *spec])  # first, so nothing new is queued when the queue opens
            self._shapes.discard((src, dst))
        num = self._queue(src, dst)
        if on and num not in self._queues:  # iptables[3]: the namespace
            self._queues[num] = _Queue(iptables[3], num, random.Random(f"{self.run_id}:{src}->{dst}"))
        if num in self._queues:
            self._queues[num].set(latency_ms, jitter_ms, loss)
        if on and (src, dst) not in self._shapes:
            _run([*iptables, "-A", chain, *spec])  # last, so the queue is bound before anything reaches it
            self._shapes.add((src, dst))

    def heal_all(self) -> None:
        """Remove every block and shape."""
        for src, dst in list(self._blocks):
            self.unblock(src, dst)
        for src, dst in list(self._shapes):
            self.shape(src, dst)
