"""chaos.netns: real network namespaces, bridge, iptables and NFQUEUE faults (needs root; CI runs as root).

Helper programs run inside the namespaces through ``ip netns exec NS python -c HELPER``:
a TCP echo + UDP logging server, a TCP connect/round-trip probe and a UDP sender.
Every wait polls with a deadline.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator

import pytest

from chaos.netns import PREFIX, NetnsError, NetnsNetwork, cleanup_stale, netns_available
from util import waiting

pytestmark = pytest.mark.cluster  # network namespaces and processes inside them (`ip netns exec`)

ROOT = Path(__file__).resolve().parent.parent
PORT = 7000
NODES = ["b1", "b2", "zk1", "client"]
PYTHON = [sys.executable, "-I", "-S", "-c"]  # the helper needs the standard library only: start fast
FAST_MS = 60  # an unshaped round trip is well under a millisecond; leave room for a loaded machine

HELPER = r'''
import json, socket, sys, threading, time
mode = sys.argv[1]
if mode == "serve":
    port = int(sys.argv[2])
    tcp = socket.socket()
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind(("0.0.0.0", port))
    tcp.listen(64)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("0.0.0.0", port))

    def echo(c):
        with c:
            while data := c.recv(65536):
                c.sendall(data)

    def accept():
        while True:
            threading.Thread(target=echo, args=(tcp.accept()[0],), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    print("ready", flush=True)
    while True:
        data, addr = udp.recvfrom(65536)
        print("udp", addr[0], data.decode(), flush=True)
elif mode == "rtt":  # rtt TIMEOUT HOST:PORT...: connect to each (in parallel), time 3 echo round trips
    def probe(target, out):
        host, port = target.split(":")
        try:
            s = socket.create_connection((host, int(port)), timeout=float(sys.argv[2]))
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            rtts = []
            for i in range(3):
                t0 = time.monotonic()
                s.sendall(b"ping%d" % i)
                got = b""
                while len(got) < 5:
                    got += s.recv(64) or b"EOF!!"
                rtts.append((time.monotonic() - t0) * 1000)
            out[target] = {"ok": True, "rtt_ms": min(rtts)}
        except OSError as e:
            out[target] = {"ok": False, "error": f"{type(e).__name__}: {e}"}

    results = {}
    threads = [threading.Thread(target=probe, args=(t, results)) for t in sys.argv[3:]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps([results[t] for t in sys.argv[3:]]))
elif mode == "udp":
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for _ in range(3):
        try:
            u.sendto(sys.argv[4].encode(), (sys.argv[2], int(sys.argv[3])))
        except OSError:
            pass
        time.sleep(0.01)
'''

CRASHING_RUN = r'''
import os, signal, subprocess, sys
from chaos.netns import NetnsNetwork
net = NetnsNetwork(sys.argv[1], ["b1", "b2"])
net.up()
net.block("b1", "b2")
net.shape("b2", "b1", latency_ms=50)
sleeper = subprocess.Popen(net.exec_prefix("b1") + ["sleep", "300"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)  # not our pipes: the test reads them to the end
print(sleeper.pid, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
'''


def wait_for(cond: Callable[[], object], timeout: float = 5.0, what: str = "condition") -> object:
    """``util.waiting.wait_for`` with this module's default deadline."""
    return waiting.wait_for(cond, timeout, what, interval=0.01)


def run_id() -> str:
    return uuid.uuid4().hex[:6]


def leftovers(prefix: str) -> list[str]:
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout.split()
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    names += [line.split(":")[1].strip().split("@")[0] for line in links.splitlines()]
    return [n for n in names if n.startswith(prefix)]


def assert_gone(prefix: str) -> None:
    wait_for(lambda: not leftovers(prefix), what=f"no namespace or link named {prefix}* (left: {leftovers(prefix)})")


def rules(net: NetnsNetwork) -> list[str]:
    """Every kafkasim rule in the node namespaces."""
    out = []
    for node in net.nodes:
        listing = subprocess.run(net.exec_prefix(node) + ["iptables", "-S"], capture_output=True, text=True,
                                 check=True).stdout
        out += [f"{node}: {line}" for line in listing.splitlines() if "kafkasim" in line]
    return out


class Server:
    """The helper's echo/UDP server inside a node's namespace; its output lines are collected."""

    def __init__(self, net: NetnsNetwork, node: str):
        self.proc = subprocess.Popen(net.exec_prefix(node) + [*PYTHON, HELPER, "serve", str(PORT)],
                                     stdout=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True).start()
        wait_for(lambda: "ready\n" in self.lines, what=f"the server in {node}")

    def received(self, payload: str) -> bool:
        return any(line.split()[-1:] == [payload] for line in self.lines if line.startswith("udp"))

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(5)


def probe(net: NetnsNetwork, src: str, *dsts: str, timeout: float = 1.0) -> dict | list[dict]:
    """From src's namespace, connect to each dst's server (at once) and time 3 echo round trips.

    A dst is a node, or ``"loopback"`` for src's own server at 127.0.0.1."""
    targets = [f"{'127.0.0.1' if dst == 'loopback' else net.ip(dst)}:{PORT}" for dst in dsts]
    cmd = net.exec_prefix(src) + [*PYTHON, HELPER, "rtt", str(timeout), *targets]
    results = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=30).stdout)
    return results[0] if len(dsts) == 1 else results


def send_udp(net: NetnsNetwork, src: str, dst: str, payload: str) -> None:
    cmd = net.exec_prefix(src) + [*PYTHON, HELPER, "udp", net.ip(dst), str(PORT), payload]
    subprocess.run(cmd, check=True, capture_output=True, timeout=30)


def connects(result: dict) -> bool:
    return result["ok"]


def timed_out(result: dict) -> bool:
    return not result["ok"] and "timed out" in result["error"]


@pytest.fixture
def net() -> Iterator[NetnsNetwork]:
    assert netns_available() is None, netns_available()
    network = NetnsNetwork(run_id(), NODES)
    network.up()
    yield network
    network.down()
    assert_gone(network.prefix)


@pytest.fixture
def servers(net: NetnsNetwork) -> Iterator[dict[str, Server]]:
    started = {node: Server(net, node) for node in ("b1", "b2", "zk1")}
    yield started
    for server in started.values():
        server.stop()


def test_up_then_down_leaves_no_namespace_or_bridge():
    assert netns_available() is None
    network = NetnsNetwork(run_id(), NODES)
    with pytest.raises(NetnsError, match="not up"):
        network.ip("b1")
    with network:
        k = network.k
        assert network.ip("b1") == f"10.213.{k}.1" and network.ip("zk1") == f"10.213.{k}.3"
        assert network.ip("client") == f"10.213.{k}.254"
        assert network.netns("client") is None and network.exec_prefix("client") == []
        assert network.exec_prefix("b2") == ["ip", "netns", "exec", f"{network.prefix}-b2"]
        assert sorted(leftovers(network.prefix)) == sorted(
            [network.bridge, f"{network.prefix}1h", f"{network.prefix}2h", f"{network.prefix}3h",
             f"{network.prefix}-b1", f"{network.prefix}-b2", f"{network.prefix}-zk1"])
        addrs = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", network.bridge], capture_output=True,
                               text=True, check=True).stdout
        assert f"10.213.{k}.254/24" in addrs
        inside = subprocess.run(network.exec_prefix("b1") + ["ip", "-4", "-o", "addr"], capture_output=True,
                                text=True, check=True).stdout
        assert "127.0.0.1/8" in inside and f"10.213.{k}.1/24" in inside
    assert_gone(network.prefix)
    network.down()  # twice: harmless
    with pytest.raises(NetnsError):
        NetnsNetwork("x", [f"n{i}" for i in range(15)])
    with pytest.raises(NetnsError):
        NetnsNetwork("x", ["b 1"])


def test_nodes_reach_each_other_the_client_reaches_them_and_loopback_works(net, servers):
    assert all(map(connects, probe(net, "b1", "b2", "zk1", "loopback")))  # loopback: a broker talks to itself
    assert all(map(connects, probe(net, "zk1", "b1", "b2")))
    assert all(map(connects, probe(net, "client", "b1", "b2", "zk1")))
    send_udp(net, "b2", "b1", "hello")
    wait_for(lambda: servers["b1"].received("hello"), what="the datagram")
    assert any(line.startswith(f"udp {net.ip('b2')} ") for line in servers["b1"].lines)  # no NAT


def test_block_is_one_way_and_unblock_restores(net, servers):
    net.block("b1", "b2")
    net.block("b1", "b2")  # idempotent
    assert len(rules(net)) == 1
    to_b2, to_zk1 = probe(net, "b1", "b2", "zk1")
    assert timed_out(to_b2) and connects(to_zk1)
    send_udp(net, "b1", "b2", "lost")
    send_udp(net, "b2", "b1", "oneway")  # the other direction still carries packets...
    wait_for(lambda: servers["b1"].received("oneway"), what="b2 -> b1 datagram")
    to_b1, to_zk1 = probe(net, "b2", "b1", "zk1")
    assert timed_out(to_b1)  # ...but TCP needs both ways: b1's SYN-ACKs are dropped
    assert connects(to_zk1) and connects(probe(net, "zk1", "b2"))  # other links untouched
    net.unblock("b1", "b2")
    net.unblock("b1", "b2")  # idempotent
    assert rules(net) == []
    assert connects(probe(net, "b1", "b2")) and connects(probe(net, "b2", "b1"))
    send_udp(net, "b1", "b2", "after")
    wait_for(lambda: servers["b2"].received("after"), what="b1 -> b2 datagram after the heal")
    assert not servers["b2"].received("lost")  # sent before "after" on the same path: it was dropped


def test_block_to_and_from_the_client(net, servers):
    net.block("client", "b1")
    to_b1, to_b2 = probe(net, "client", "b1", "b2")
    assert timed_out(to_b1) and connects(to_b2)
    net.unblock("client", "b1")
    assert connects(probe(net, "client", "b1"))
    net.block("b1", "client")  # in b1's OUTPUT chain: the root namespace is never touched
    assert rules(net) and all(r.startswith("b1: -A OUTPUT") for r in rules(net))
    to_b1, to_b2 = probe(net, "client", "b1", "b2")
    assert timed_out(to_b1) and connects(to_b2)
    net.heal_all()
    assert rules(net) == []
    assert connects(probe(net, "client", "b1"))
    with pytest.raises(NetnsError):
        net.block("b1", "b1")
    with pytest.raises(NetnsError):
        net.block("b1", "nobody")


def test_shape_latency_is_per_destination_and_heal_all_clears(net, servers):
    net.shape("b1", "b2", latency_ms=100)
    slow, fast = probe(net, "b1", "b2", "zk1")
    assert slow["rtt_ms"] >= 90, slow
    assert fast["rtt_ms"] < FAST_MS, fast
    net.shape("b1", "b2", latency_ms=30)  # changed in place
    changed = probe(net, "b1", "b2")
    assert 25 <= changed["rtt_ms"] < 90, changed
    net.shape("b1", "b2")  # all zeros: removed
    assert rules(net) == [] and probe(net, "b1", "b2")["rtt_ms"] < FAST_MS

    net.shape("client", "b1", latency_ms=100)
    net.shape("b2", "client", latency_ms=100)
    net.shape("b1", "zk1", loss=1.0)
    net.block("zk1", "b2")
    assert len(rules(net)) == 4
    to_b1, to_b2, to_zk1 = probe(net, "client", "b1", "b2", "zk1")
    assert to_b1["rtt_ms"] >= 90 and to_b2["rtt_ms"] >= 90, (to_b1, to_b2)  # b2's replies to the client are late
    assert to_zk1["rtt_ms"] < FAST_MS, to_zk1
    b1_to_zk1, zk1_to_b2 = probe(net, "b1", "zk1")["ok"], probe(net, "zk1", "b2")["ok"]
    assert not b1_to_zk1 and not zk1_to_b2  # every packet lost; blocked
    net.heal_all()
    assert rules(net) == []
    results = probe(net, "client", "b1", "b2") + [probe(net, "b1", "zk1"), probe(net, "zk1", "b2")]
    assert all(r["ok"] and r["rtt_ms"] < FAST_MS for r in results), results


def crash_a_run(rid: str) -> int:
    """A run that sets up its network, starts a process in it and is SIGKILLed; the sleeper's pid."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", CRASHING_RUN, rid], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert len(leftovers(PREFIX + rid)) == 5  # bridge, 2 veths, 2 namespaces
    return int(done.stdout.split()[0])


def process_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_cleanup_stale_removes_a_crashed_runs_leftovers(net, servers):
    crashed = run_id()
    sleeper = crash_a_run(crashed)
    removed = cleanup_stale(dead_owners_only=True)  # every prefix: only runs whose owner is dead
    assert f"{PREFIX}{crashed}-b1" in removed and net.bridge not in removed
    assert_gone(PREFIX + crashed)
    wait_for(lambda: process_gone(sleeper), what="the process left in the crashed run's namespace")
    assert connects(probe(net, "b1", "b2"))  # a live run is left alone

    again = run_id()
    crash_a_run(again)
    rerun = NetnsNetwork(again, ["b1", "b2"])  # the same run id: up() clears its own names first
    with rerun:
        assert rerun.ip("b1")
    assert_gone(PREFIX + again)

    explicit = run_id()
    crash_a_run(explicit)
    assert len(cleanup_stale(PREFIX + explicit)) == 5
    assert_gone(PREFIX + explicit)


def test_two_networks_at_once_do_not_collide():
    one, two = NetnsNetwork(run_id(), NODES), NetnsNetwork(run_id(), NODES)
    started: list[Server] = []
    try:
        one.up()
        two.up()
        assert one.k != two.k and one.bridge != two.bridge and one.netns("b1") != two.netns("b1")
        started += [Server(one, "b1"), Server(two, "b1")]
        one.block("b2", "b1")
        assert timed_out(probe(one, "b2", "b1"))
        assert connects(probe(two, "b2", "b1"))
        clash = NetnsNetwork(run_id(), ["b1"], subnet_index=one.k)
        with pytest.raises(NetnsError, match="no free"):
            clash.up()
        assert_gone(clash.prefix)
    finally:
        for server in started:
            server.stop()
        one.down()
        two.down()
    assert_gone(one.prefix)
    assert_gone(two.prefix)
