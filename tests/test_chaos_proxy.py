"""The per-link TCP fault proxy (chaos/proxy.py): a real proxy process, real sockets, no mocks.

One proxy process serves the whole module; each test adds its own links (names
are unique) and the rules are cleared after every test.  Waits poll a condition
with a deadline; the only fixed windows are the "nothing happens for 0.3 s"
checks, which cannot be written any other way.  Timing checks are lower bounds.
"""
from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

from chaos.proxy import LinkRandom, ProxyError, ProxyProcess, rto_ms
from chaos.proxy_control import BadRequest, parse_request
from util import waiting

ROOT = Path(__file__).resolve().parent.parent
QUIET_S = 0.3  # how long "nothing happens" is watched for


def wait_for(cond: Callable[[], object], timeout: float = 5.0, what: str = "condition") -> object:
    """``util.waiting.wait_for`` with this module's default deadline."""
    return waiting.wait_for(cond, timeout, what, interval=0.01)


def stays(pred: Callable[[], object], duration: float = QUIET_S, what: str = "condition") -> None:
    deadline = time.monotonic() + duration
    while time.monotonic() < deadline:
        assert pred(), f"{what} stopped holding"
        time.sleep(0.01)


def recv_exact(sock: socket.socket, n: int, timeout: float = 10.0) -> bytes:
    sock.settimeout(timeout)
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(1 << 20, n - len(buf)))
        if not chunk:
            raise AssertionError(f"EOF after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def assert_no_data(sock: socket.socket, duration: float = QUIET_S) -> None:
    sock.settimeout(duration)
    try:
        data = sock.recv(1, socket.MSG_PEEK)
    except (socket.timeout, BlockingIOError):
        return
    finally:
        sock.settimeout(10)
    raise AssertionError(f"expected nothing for {duration} s, got {data!r}")


def assert_closed(sock: socket.socket, timeout: float = 5.0) -> None:
    """The peer closed or reset: recv gives EOF or ECONNRESET (after any remaining data)."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass


class ServerConn:
    def __init__(self, sock: socket.socket, echo: bool) -> None:
        self.sock, self.echo = sock, echo
        self.data = bytearray()
        self.eof = False
        self.error: Exception | None = None
        self.resetting = False
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            while True:
                chunk = self.sock.recv(65536)
                if self.resetting:
                    return
                if not chunk:
                    self.eof = True
                    if self.echo:
                        self.sock.shutdown(socket.SHUT_WR)
                    return
                self.data += chunk
                if self.echo:
                    self.sock.sendall(chunk)
        except OSError as e:
            self.error = e

    def rst(self) -> None:
        """Close with an RST.  (A close() while the reader thread sits in recv() would only
        take effect when that recv() returns: wake it first with shutdown(SHUT_RD).)"""
        self.resetting = True
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.shutdown(socket.SHUT_RD)
        self.thread.join(5)
        self.sock.close()


class Server:
    """A TCP server on 127.0.0.1 that records what each connection sends, and echoes it if asked."""

    def __init__(self, echo: bool = True) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.addr = f"127.0.0.1:{self.port}"
        self.echo = echo
        self.conns: list[ServerConn] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            conn = ServerConn(sock, self.echo)
            self.conns.append(conn)   # listed before it echoes: a client that got an echo finds it here
            conn.thread.start()

    def received(self) -> bytes:
        return b"".join(bytes(c.data) for c in self.conns)

    def close(self) -> None:
        self.listener.close()
        for c in self.conns:
            c.sock.close()


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyProcess]:
    p = ProxyProcess.start(tmp_path_factory.mktemp("proxy"), seed=42)
    yield p
    assert p.stop() == 0


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


_names = itertools.count(1)


@pytest.fixture
def link(proxy: ProxyProcess, server: Server) -> Iterator[tuple[str, int]]:
    """(name, port) of a fresh link to the echo server."""
    name = f"b{next(_names)}->b0"
    port = proxy.add_link(name, server.addr)
    yield name, port
    proxy.clear_all()
    proxy.reset(name)


def connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def ping(sock: socket.socket, data: bytes = b"ping") -> float:
    """Send, read the echo; the round-trip time in seconds."""
    t = time.monotonic()
    sock.sendall(data)
    assert recv_exact(sock, len(data)) == data
    return time.monotonic() - t


# -- the random source ------------------------------------------------------------------


def test_link_random_is_seeded_per_link_and_bounded() -> None:
    def draws(seed: int, name: str) -> list[tuple[float, bool]]:
        r = LinkRandom(seed, name)
        return [r.chunk_delay_ms(20, 5, 0.1) for _ in range(1000)]

    seq = draws(7, "b1->b2")
    assert seq == draws(7, "b1->b2")
    assert seq != draws(8, "b1->b2")
    assert seq != draws(7, "b2->b1")
    kept = [d for d, lost in seq if not lost]
    assert all(15 <= d <= 25 for d in kept)
    assert len(set(kept)) == len(kept) > 800  # really jittered
    assert 50 <= sum(lost for _, lost in seq) <= 150  # ~10 %
    assert all(d >= 15 + 200 for d, lost in seq if lost)
    r = LinkRandom(1, "x")
    assert r.chunk_delay_ms(0, 0, 0) == (0.0, False)
    assert r.chunk_delay_ms(5, 10, 0)[0] >= 0  # never negative
    assert r.chunk_delay_ms(0, 0, 1.0) == (200.0, True)
    assert r.chunk_delay_ms(0, 0, 1.0, consecutive_losses=2) == (800.0, True)


def test_rto_doubles_and_is_capped() -> None:
    assert [rto_ms(n) for n in range(7)] == [200, 400, 800, 1600, 3200, 3200, 3200]
    assert rto_ms(10_000) == 3200


@pytest.mark.cluster  # another Python process
def test_link_random_is_the_same_in_another_process() -> None:
    code = ("import json; from chaos.proxy import LinkRandom; r = LinkRandom(3, 'b1->zk2'); "
            "print(json.dumps([r.chunk_delay_ms(10, 4, 0.3) for _ in range(50)]))")
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    r = LinkRandom(3, "b1->zk2")
    assert json.loads(out.stdout) == [list(r.chunk_delay_ms(10, 4, 0.3)) for _ in range(50)]


# -- forwarding -----------------------------------------------------------------------------


def test_forwards_megabytes_both_ways_byte_exact(proxy: ProxyProcess, server: Server, link) -> None:
    name, port = link
    payload = os.urandom(4 * 1024 * 1024)
    sock = connect(port)
    sender = threading.Thread(target=sock.sendall, args=(payload,))
    sender.start()
    assert recv_exact(sock, len(payload)) == payload
    sender.join(10)
    assert server.received() == payload
    sock.shutdown(socket.SHUT_WR)  # EOF travels through, the echo server answers with its own
    wait_for(lambda: server.conns[0].eof, what="EOF at the server")
    assert_closed(sock)
    st = wait_for(lambda: (s := proxy.stats()[name])["open"] == 0 and s, what="the connection to close")
    assert st["accepted"] == 1
    assert st["bytes_out"] == st["bytes_back"] == len(payload)
    assert st["held_out"] == st["held_back"] == 0


def test_stats_count_connections(proxy: ProxyProcess, server: Server, link) -> None:
    name, port = link
    socks = [connect(port) for _ in range(3)]
    for s in socks:
        ping(s)
    st = proxy.stats()[name]
    assert (st["accepted"], st["open"], st["bytes_out"], st["bytes_back"]) == (3, 3, 12, 12)
    assert st["upstream"] == server.addr and st["port"] == port
    for s in socks:
        s.close()
    wait_for(lambda: proxy.stats()[name]["open"] == 0, what="open == 0")


def test_grpc_round_trip_through_proxy(proxy: ProxyProcess) -> None:
    from concurrent.futures import ThreadPoolExecutor

    import grpc

    server = grpc.server(ThreadPoolExecutor(4))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "echo.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(lambda req, ctx: req)}),))
    gport = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        name = f"client->g{next(_names)}"
        port = proxy.add_link(name, f"127.0.0.1:{gport}")
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.enable_http_proxy", 0)]) as ch:
            echo = ch.unary_unary("/echo.Echo/Echo")
            for payload in (b"x", os.urandom(100), os.urandom(1 << 20)):
                assert echo(payload, timeout=10) == payload
            proxy.set(name, latency_ms=50)  # both directions: one round trip >= 100 ms
            t = time.monotonic()
            assert echo(b"slow", timeout=10) == b"slow"
            assert time.monotonic() - t >= 0.09
            proxy.clear(name)
            assert echo(b"fast", timeout=10) == b"fast"
        st = proxy.stats()[name]
        assert st["accepted"] == 1 and st["bytes_out"] > (1 << 20)
    finally:
        server.stop(0)


# -- partitions -----------------------------------------------------------------------------


def test_blocked_out_holds_data_until_heal(proxy: ProxyProcess, server: Server, link) -> None:
    name, port = link
    sock = connect(port)
    ping(sock, b"hello")
    proxy.set(name, direction="out", blocked=True)
    payload = os.urandom(200_000)
    sender = threading.Thread(target=sock.sendall, args=(payload,))
    sender.start()
    wait_for(lambda: not sender.is_alive(), what="sendall to return")
    stays(lambda: server.received() == b"hello", what="nothing more at the server")
    assert proxy.stats()[name]["rules"]["out"]["blocked"] is True
    proxy.set(name, direction="out", blocked=False)
    wait_for(lambda: len(server.received()) == 5 + len(payload), what="delivery after heal")
    assert server.received() == b"hello" + payload
    assert recv_exact(sock, len(payload)) == payload


def test_block_holds_bytes_already_read(proxy: ProxyProcess, server: Server, link) -> None:
    name, port = link
    sock = connect(port)
    ping(sock)
    proxy.set(name, direction="out", latency_ms=300)
    sock.sendall(b"x" * 1000)
    wait_for(lambda: proxy.stats()[name]["held_out"] == 1000, what="1000 bytes held")
    proxy.set(name, direction="out", blocked=True)  # the latency runs out during the block
    stays(lambda: server.received() == b"ping" and proxy.stats()[name]["held_out"] == 1000,
          duration=0.4, what="bytes held while blocked")
    proxy.clear(name)
    assert recv_exact(sock, 1000) == b"x" * 1000
    assert server.received() == b"ping" + b"x" * 1000
    assert proxy.stats()[name]["held_out"] == 0


def test_blocked_back_is_one_way(proxy: ProxyProcess, server: Server, link) -> None:
    name, port = link
    sock = connect(port)
    ping(sock)
    proxy.set(name, direction="back", blocked=True)
    sock.sendall(b"abc")
    wait_for(lambda: server.received() == b"pingabc", what="the server to receive")
    assert_no_data(sock)
    proxy.set(name, direction="back", blocked=False)
    assert recv_exact(sock, 3) == b"abc"


def test_new_connection_during_out_block_does_not_reach_upstream(proxy: ProxyProcess, server: Server,
                                                                  link) -> None:
    name, port = link
    proxy.set(name, direction="out", blocked=True)
    sock = connect(port)  # accepted by the proxy ...
    sock.sendall(b"early")
    sock.shutdown(socket.SHUT_WR)
    wait_for(lambda: proxy.stats()[name]["waiting"] == 1, what="a waiting connection")
    stays(lambda: not server.conns, what="no connection upstream")  # ... but upstream is never dialled
    assert_no_data(sock, 0.05)
    proxy.clear(name)
    wait_for(lambda: server.conns and server.conns[0].eof, what="data and EOF upstream after heal")
    assert server.received() == b"early"
    assert recv_exact(sock, 5) == b"early"
    assert_closed(sock)


def test_eof_waits_for_heal(proxy: ProxyProcess, server: Server, link) -> None:
    name, port = link
    sock = connect(port)
    ping(sock)
    proxy.set(name, direction="out", blocked=True)
    sock.sendall(b"last")
    sock.shutdown(socket.SHUT_WR)
    stays(lambda: not server.conns[0].eof and server.received() == b"ping", what="no EOF upstream")
    proxy.set(name, direction="out", blocked=False)
    wait_for(lambda: server.conns[0].eof, what="EOF after heal")
    assert server.received() == b"pinglast"


def test_upstream_reset_reaches_client_only_after_heal(proxy: ProxyProcess, server: Server, link) -> None:
    name, port = link
    sock = connect(port)
    ping(sock)
    proxy.set(name, direction="back", blocked=True)
    server.conns[0].rst()
    assert_no_data(sock)
    proxy.set(name, direction="back", blocked=False)
    assert_closed(sock)
    wait_for(lambda: proxy.stats()[name]["open"] == 0, what="the connection to be gone")


def test_reset_closes_both_sides(proxy: ProxyProcess, server: Server, link) -> None:
    name, port = link
    socks = [connect(port) for _ in range(2)]
    for s in socks:
        ping(s)
    assert proxy.reset(name) == 2
    for s in socks:
        assert_closed(s)
    wait_for(lambda: all(c.eof or c.error for c in server.conns), what="the server side to close")
    assert proxy.stats()[name]["open"] == 0
    ping(connect(port))  # the link itself still works


def test_unreachable_upstream_closes_the_client(proxy: ProxyProcess) -> None:
    dead = socket.create_server(("127.0.0.1", 0))
    addr = f"127.0.0.1:{dead.getsockname()[1]}"
    dead.close()
    port = proxy.add_link(f"b{next(_names)}->gone", addr)
    try:
        sock = connect(port)
    except ConnectionResetError:  # the RST came before connect() had looked at the socket
        return
    assert_closed(sock)


# -- latency and loss -----------------------------------------------------------------------


def test_latency_is_a_lower_bound_on_round_trips(proxy: ProxyProcess, server: Server, link) -> None:
    name, port = link
    sock = connect(port)
    ping(sock)
    proxy.set(name, direction="out", latency_ms=60)
    proxy.set(name, direction="back", latency_ms=40)
    for _ in range(3):
        assert ping(sock) >= 0.09


def test_jitter_preserves_order(proxy: ProxyProcess, server: Server, link) -> None:
    name, port = link
    sock = connect(port)
    ping(sock)
    proxy.set(name, latency_ms=10, jitter_ms=10)
    msgs = [struct.pack(">I", i) * 4 for i in range(300)]

    def send() -> None:
        for m in msgs:
            sock.sendall(m)
            time.sleep(0.001)  # pacing, so that the proxy reads many separate chunks

    sender = threading.Thread(target=send)
    sender.start()
    assert recv_exact(sock, 16 * len(msgs)) == b"".join(msgs)
    sender.join(10)
    assert server.received() == b"ping" + b"".join(msgs)


def test_loss_one_stalls_every_chunk(proxy: ProxyProcess, server: Server, link) -> None:
    name, port = link
    sock = connect(port)
    ping(sock)
    proxy.set(name, direction="out", loss=1.0)
    assert ping(sock) >= 0.19
    proxy.set(name, direction="out", loss=0.0)
    assert ping(sock, b"after") >= 0  # still delivered, in order


# -- control --------------------------------------------------------------------------------


def test_bad_requests_get_clear_errors_and_change_nothing(proxy: ProxyProcess, server: Server, link) -> None:
    name, port = link
    ctl = socket.create_connection(("127.0.0.1", proxy.control_port), timeout=10)
    rfile = ctl.makefile("rb")

    def ask(raw: bytes | dict) -> dict:
        ctl.sendall(raw if isinstance(raw, bytes) else json.dumps(raw).encode() + b"\n")
        return json.loads(rfile.readline())

    cases: list[tuple[bytes | dict, str]] = [
        (b"not json\n", "not JSON"),
        (b"[1, 2]\n", "must be a JSON object"),
        ({"op": "explode"}, "unknown op 'explode'"),
        ({"link": name}, "unknown op None"),
        ({"op": "set", "link": "nope", "blocked": True}, "unknown link 'nope'"),
        ({"op": "set", "link": name, "loss": 1.5}, "loss must be between 0 and 1"),
        ({"op": "set", "link": name, "latency_ms": -1}, "latency_ms must be >= 0"),
        ({"op": "set", "link": name, "jitter_ms": "5"}, "jitter_ms must be a number"),
        ({"op": "set", "link": name, "blocked": "yes"}, "blocked must be true or false"),
        ({"op": "set", "link": name, "direction": "sideways", "blocked": True}, "direction must be"),
        ({"op": "set", "link": name, "latency": 5}, "unknown field 'latency'"),
        ({"op": "set", "link": name, "blocked": True, "loss": 7}, "loss must be between 0 and 1"),
        ({"op": "set", "link": 3}, "link must be a non-empty string"),
        ({"op": "add_link", "name": name, "upstream": server.addr}, "already exists"),
        ({"op": "add_link", "name": "x->y"}, "missing field 'upstream'"),
        ({"op": "add_link", "name": "x->y", "upstream": "nohost"}, "host:port"),
        ({"op": "add_link", "name": "x->y", "upstream": "h:99999"}, "port in 1..65535"),
        ({"op": "add_link", "name": "x->y", "upstream": server.addr, "listen_port": "1"}, "listen_port"),
        ({"op": "add_link", "name": "x->y", "upstream": server.addr, "listen_port": server.port},
         "cannot listen"),
        ({"op": "reset"}, "missing field 'link'"),
        ({"op": "stats", "verbose": True}, "unknown field 'verbose'"),
    ]
    for raw, expected in cases:
        resp = ask(raw)
        assert resp["ok"] is False, raw
        assert expected in resp["error"], (raw, resp)
    assert ask(b"\n" + json.dumps({"op": "stats"}).encode() + b"\n")["ok"] is True  # blank lines skipped
    st = proxy.stats()
    assert "x->y" not in st
    assert st[name]["rules"]["out"] == {"blocked": False, "latency_ms": 0.0, "jitter_ms": 0.0, "loss": 0.0}
    with pytest.raises(ProxyError, match="unknown link 'nope'"):
        proxy.set("nope", blocked=True)
    ctl.close()
    ping(connect(port))  # still serving


def test_parse_request_normalises() -> None:
    assert parse_request({"op": "set", "link": "a->b", "direction": "out", "latency_ms": 5}) == {
        "op": "set", "link": "a->b", "directions": ("out",), "rules": {"latency_ms": 5.0}}
    assert parse_request({"op": "set", "link": "a->b", "blocked": False})["directions"] == ("out", "back")
    req = parse_request({"op": "add_link", "name": "a->b", "upstream": "127.0.0.1:9"})
    assert (req["host"], req["port"], req["listen_port"]) == ("127.0.0.1", 9, 0)
    for bad in ({"op": "set", "link": "a", "loss": float("nan")}, {"op": "set", "link": "a", "latency_ms": True}):
        with pytest.raises(BadRequest):
            parse_request(bad)


# -- the process ------------------------------------------------------------------------


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie nobody has reaped yet is gone too
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


@pytest.mark.cluster  # starts the proxy process
def test_ready_file_shutdown_and_sigterm(tmp_path: Path) -> None:
    p = ProxyProcess.start(tmp_path, seed=1)
    (ready,) = tmp_path.glob("proxy-*.ready.json")
    assert json.loads(ready.read_text()) == {"control_port": p.control_port, "pid": p.pid}
    assert p.stats() == {}
    assert p.stop() == 0 and not p.alive()
    with ProxyProcess.start(tmp_path, seed=1) as q:
        os.kill(q.pid, signal.SIGTERM)
        wait_for(lambda: not q.alive(), what="exit on SIGTERM")
        with pytest.raises(ProxyError, match="control connection"):
            q.stats()


@pytest.mark.cluster  # starts the proxy process
def test_a_spawned_proxy_serves_once_waited_for_and_a_killed_one_is_reaped(tmp_path: Path) -> None:
    starting = ProxyProcess.spawn(tmp_path / "a", seed=1)    # returns before the proxy listens
    with starting.wait() as p:
        assert p.stats() == {}
    doomed = ProxyProcess.spawn(tmp_path / "b", seed=1)
    doomed.kill()                                            # what was started beside it failed
    with pytest.raises(ProxyError, match="exited with status -9 before it was ready"):
        doomed.wait()


@pytest.mark.cluster  # starts the proxy process
def test_exits_when_its_parent_dies(tmp_path: Path) -> None:
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from chaos.proxy_control import ProxyProcess
        p = ProxyProcess.start(Path({str(tmp_path)!r}), seed=5)
        print(p.pid, flush=True)
        sys.stdin.read()
    """)
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    pid = int(child.stdout.readline())  # type: ignore[union-attr]
    try:
        assert not _gone(pid)
        child.kill()
        child.wait()
        wait_for(lambda: _gone(pid), timeout=5, what=f"proxy {pid} to exit after its parent died")
    finally:
        if not _gone(pid):
            os.kill(pid, signal.SIGKILL)
