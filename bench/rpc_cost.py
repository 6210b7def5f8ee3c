"""gRPC's fixed cost per call between two brokers' processes (issue 49, branch rpc49): the CPU per unary call of a
few bytes on the client's side and on the server's, over the broker's own server (node/server/rpc_server.py's
AioServer on its pool) and node/net/peers.py's channel, the variants side by side in the same run.

Two processes: this one (the client) and a server it starts (``--serve``), which offers on one port the broker's
aio server (a plain handler: run on the migration pool, as the Broker service's LeaderAndIsr/UpdateMetadata; an
async handler: on the loop, as Fetch) and on a second a plain ``grpc.server`` (threads only).  Each variant runs
``--calls`` calls; the CPU of each process (all its threads, gRPC's C threads too) is read before and after
(the server's by a call of its own, outside the count).  The variants:

- ``aio_pool``: a blocking call on a kept channel, the handler on the aio server's pool;
- ``aio_loop``: the same, the handler a coroutine on the loop;
- ``aio_loop_future``: the same through ``.future().result()`` (what a cancellable call costs the caller);
- ``plain``: a blocking call to the plain ``grpc.server``;
- ``new_channel``: a new peer channel, its first call, its close (per call: a TCP and HTTP/2 set-up);
- ``cut_close``: a poll parked at the server is cut by closing its channel; the next call goes on a spare channel
  dialled in advance, and a new spare is dialled (node/replicas/fetcher.py before rpc49);
- ``cut_close_shared``: the same, every channel of the cut on one connection (peer_channel's ``share``);
- ``new_channel_shared``: a new channel, its first call, its close, on the connection of a channel kept open;
- ``cut_cancel``: the parked poll is cut by cancelling the call; the next call goes on the same channel.
  Both cut variants also make one call while the poll is parked (so it has reached the server).

The server counts the parked polls it saw cancelled, so the table shows that the server side sees each cut.

    PYTHONPATH=$PWD python3 bench/rpc_cost.py [--calls 2000] [--rounds 3] [--only aio_pool,plain]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from concurrent import futures
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402

from node.net.peers import connecting, peer_channel  # noqa: E402
from node.server.rpc_server import AioServer  # noqa: E402

VARIANTS = ("aio_pool", "aio_loop", "aio_loop_future", "plain", "new_channel", "new_channel_shared", "cut_close",
            "cut_close_shared", "cut_cancel")
PAYLOAD = b"x" * 24


def _ident(b: bytes) -> bytes:
    return b


def _cpu_ns() -> int:
    return time.process_time_ns()


class _Counts:
    parked = 0
    cancelled = 0


def _handlers(counts: _Counts, with_async: bool) -> grpc.GenericRpcHandler:
    def sync_echo(req, ctx):
        return req

    def cpu(req, ctx):
        return f"{_cpu_ns()} {counts.cancelled} {counts.parked}".encode()

    methods = {"SyncEcho": grpc.unary_unary_rpc_method_handler(sync_echo, _ident, _ident),
               "Cpu": grpc.unary_unary_rpc_method_handler(cpu, _ident, _ident)}
    if with_async:
        async def async_echo(req, ctx):
            return req

        async def park(req, ctx):
            counts.parked += 1
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                counts.cancelled += 1
                raise
            return req

        async def acpu(req, ctx):
            return cpu(req, ctx)

        methods["AsyncEcho"] = grpc.unary_unary_rpc_method_handler(async_echo, _ident, _ident)
        methods["Park"] = grpc.unary_unary_rpc_method_handler(park, _ident, _ident)
        methods["Cpu"] = grpc.unary_unary_rpc_method_handler(acpu, _ident, _ident)
    return grpc.method_handlers_generic_handler("bench.S", methods)


def serve(port_file: str) -> None:
    """The server process: the broker's aio server (its pool and limits as node/server/broker.py sets them) and a
    plain grpc.server, on ports written to ``port_file``; runs until stdin closes."""
    counts = _Counts()
    pool = futures.ThreadPoolExecutor(max_workers=2048, thread_name_prefix="grpc")
    aio = AioServer(pool, maximum_concurrent_rpcs=4096)
    aio.on_loop(lambda: aio.server.add_generic_rpc_handlers((_handlers(counts, True),)))
    aio_port = aio.add_insecure_port("127.0.0.1:0")
    aio.start()
    plain = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    plain.add_generic_rpc_handlers((_handlers(counts, False),))
    plain_port = plain.add_insecure_port("127.0.0.1:0")
    plain.start()
    Path(port_file + ".tmp").write_text(f"{aio_port} {plain_port}")
    os.replace(port_file + ".tmp", port_file)
    sys.stdin.read()
    plain.stop(0)
    aio.stop(0)


class Client:
    def __init__(self, aio_target: str, plain_target: str) -> None:
        self.aio_target, self.plain_target = aio_target, plain_target
        self.aio = peer_channel(aio_target)
        self.plain = peer_channel(plain_target)
        self._ctl = peer_channel(aio_target)   # the CPU reads' own channel
        self._ctl_plain = peer_channel(plain_target)

    def call(self, channel: grpc.Channel, method: str):
        return channel.unary_unary(f"/bench.S/{method}", request_serializer=_ident, response_deserializer=_ident)

    def server_state(self, plain: bool = False) -> tuple[int, int, int]:
        out = self.call(self._ctl_plain if plain else self._ctl, "Cpu")(b"", timeout=10).decode().split()
        return int(out[0]), int(out[1]), int(out[2])

    def run(self, variant: str, n: int) -> dict:
        plain = variant == "plain"
        work = getattr(self, "_" + variant)
        prepared = work(None)   # set-up, outside the count
        s0, c0, _ = self.server_state(plain)
        t0, w0 = _cpu_ns(), time.perf_counter_ns()
        for _ in range(n):
            prepared = work(prepared)
        w1, t1 = time.perf_counter_ns(), _cpu_ns()
        s1, c1, _ = self.server_state(plain)
        if variant.startswith("cut") and isinstance(prepared, tuple):
            prepared[0].close()
            if len(prepared) > 2 and prepared[2] is not None:
                prepared[2].close()
        return {"client_ms": (t1 - t0) / 1e6 / n, "server_ms": (s1 - s0) / 1e6 / n, "wall_ms": (w1 - w0) / 1e6 / n,
                "server_saw_cancelled": c1 - c0}

    def _on_kept(self, st, channel: str, method: str, future: bool = False):
        """A call on a kept channel; ``st`` None: make its stub first."""
        if st is None:
            return self.call(getattr(self, channel), method)
        if future:
            st.future(PAYLOAD, timeout=10).result()
        else:
            st(PAYLOAD, timeout=10)
        return st

    def _aio_pool(self, st):
        return self._on_kept(st, "aio", "SyncEcho")

    def _aio_loop(self, st):
        return self._on_kept(st, "aio", "AsyncEcho")

    def _aio_loop_future(self, st):
        return self._on_kept(st, "aio", "AsyncEcho", future=True)

    def _plain(self, st):
        return self._on_kept(st, "plain", "SyncEcho")

    def _new_channel(self, st):
        if st is None:
            return True
        ch = peer_channel(self.aio_target)
        self.call(ch, "AsyncEcho")(PAYLOAD, timeout=10)
        ch.close()
        return st

    def _new_channel_shared(self, st):
        if st is None:   # a kept channel of the same connection (a fetcher's, for a controller's sender)
            self._kept = peer_channel(self.aio_target, share="bench")
            self.call(self._kept, "AsyncEcho")(PAYLOAD, timeout=10)
            return True
        ch = peer_channel(self.aio_target, share="bench")
        self.call(ch, "AsyncEcho")(PAYLOAD, timeout=10)
        ch.close()
        return st

    def _cut_close_shared(self, st):
        return self._cut_close(st, "cut")

    def _cut_close(self, st, share=None, connect=None):
        connect = connect or connecting
        if st is None:
            ch = peer_channel(self.aio_target, share=share)
            self.call(ch, "AsyncEcho")(PAYLOAD, timeout=10)
            return (ch, None, connect(peer_channel(self.aio_target, share=share)))
        ch, _, spare = st
        poll = self.call(ch, "Park").future(PAYLOAD, timeout=30)
        self.call(ch, "AsyncEcho")(PAYLOAD, timeout=10)
        ch.close()                      # cut: the poll ends with an error
        try:
            poll.result()
        except (grpc.RpcError, ValueError, grpc.FutureCancelledError):
            pass
        ch, spare = spare, connect(peer_channel(self.aio_target, share=share))
        self.call(ch, "AsyncEcho")(PAYLOAD, timeout=10)   # the next request, on the spare
        return (ch, None, spare)

    def _cut_cancel(self, st):
        if st is None:
            ch = peer_channel(self.aio_target)
            self.call(ch, "AsyncEcho")(PAYLOAD, timeout=10)
            return (ch, None)
        ch, _ = st
        poll = self.call(ch, "Park").future(PAYLOAD, timeout=30)
        self.call(ch, "AsyncEcho")(PAYLOAD, timeout=10)
        poll.cancel()                   # cut: the call is cancelled, the channel kept
        try:
            poll.result()
        except (grpc.RpcError, grpc.FutureCancelledError):
            pass
        self.call(ch, "AsyncEcho")(PAYLOAD, timeout=10)   # the next request, on the same channel
        return (ch, None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--serve", metavar="PORT_FILE", help=argparse.SUPPRESS)
    ap.add_argument("--calls", type=int, default=2000, help="calls per variant and round (cut variants: a fifth)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds, the variants alternating within each")
    ap.add_argument("--only", default=",".join(VARIANTS), help="comma-separated variants")
    a = ap.parse_args()
    if a.serve:
        serve(a.serve)
        return
    variants = [v for v in a.only.split(",") if v]
    port_file = f"/tmp/rpc_cost_{os.getpid()}.ports"
    env = dict(os.environ)
    srv = subprocess.Popen([sys.executable, __file__, "--serve", port_file], stdin=subprocess.PIPE, env=env)
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(port_file):
            if time.monotonic() > deadline or srv.poll() is not None:
                raise SystemExit("the server did not start")
            time.sleep(0.05)
        aio_port, plain_port = Path(port_file).read_text().split()
        client = Client(f"127.0.0.1:{aio_port}", f"127.0.0.1:{plain_port}")
        for v in variants:   # warm-up
            client.run(v, 50)
        results: dict[str, list[dict]] = {v: [] for v in variants}
        for r in range(a.rounds):
            for v in variants:
                n = a.calls // 5 if v.startswith("cut") or v == "new_channel" else a.calls
                results[v].append(client.run(v, n))
        print(f"# gRPC's CPU per call, medians of {a.rounds} rounds; 1-min load {_load()} at the end")
        print(f"{'variant':18} {'client ms':>10} {'server ms':>10} {'both ms':>8} {'wall ms':>8} {'cancels seen':>13}")
        for v in variants:
            rs = results[v]
            c = statistics.median(x["client_ms"] for x in rs)
            s = statistics.median(x["server_ms"] for x in rs)
            w = statistics.median(x["wall_ms"] for x in rs)
            seen = sum(x["server_saw_cancelled"] for x in rs)
            print(f"{v:18} {c:10.3f} {s:10.3f} {c + s:8.3f} {w:8.3f} {seen:13d}")
    finally:
        try:
            srv.stdin.close()
            srv.wait(10)
        except Exception:
            srv.kill()
        if os.path.exists(port_file):
            os.unlink(port_file)


def _load() -> str:
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


if __name__ == "__main__":
    main()
