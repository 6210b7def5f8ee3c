"""What the fault proxy (chaos/proxy.py) costs with no rules set: direct vs through the proxy, same run.

    python -m bench.proxy [--calls 2000] [--megabytes 200] [--runs 3] [--json]

  gRPC unary    a unary-unary bytes echo (100-byte payloads) on a local grpc.server;
                p50/p99 round trip over --calls calls per path, after a warm-up.
                The direct and proxied calls alternate in blocks of 250, so that
                machine noise falls on both alike.
  bulk          --megabytes streamed over one TCP connection to a sink that counts
                them and answers when it has seen EOF; MB/s from the first byte sent
                to that answer; the median of --runs runs per path.

The proxy is a separate process (python -m chaos.proxy); the clients and servers
share this process.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402

from bench.common import pct  # noqa: E402
from chaos.proxy_control import ProxyProcess  # noqa: E402

BLOCK = 250
CHUNK = 1 << 20


def grpc_server() -> tuple[grpc.Server, int]:
    server = grpc.server(ThreadPoolExecutor(4))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "echo.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(lambda req, ctx: req)}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


def grpc_latency(direct_port: int, proxy_port: int, calls: int) -> dict[str, list[float]]:
    opts = [("grpc.enable_http_proxy", 0)]
    chans = {"direct": grpc.insecure_channel(f"127.0.0.1:{direct_port}", options=opts),
             "proxy": grpc.insecure_channel(f"127.0.0.1:{proxy_port}", options=opts)}
    stubs = {k: ch.unary_unary("/echo.Echo/Echo") for k, ch in chans.items()}
    payload = os.urandom(100)
    for stub in stubs.values():
        for _ in range(200):
            stub(payload, timeout=10)
    out: dict[str, list[float]] = {"direct": [], "proxy": []}
    while len(out["proxy"]) < calls:
        for k, stub in stubs.items():
            for _ in range(min(BLOCK, calls - len(out[k]))):
                t = time.perf_counter()
                stub(payload, timeout=10)
                out[k].append((time.perf_counter() - t) * 1000)
    for ch in chans.values():
        ch.close()
    return out


class Sink:
    """Counts what each connection sends; answers the count after EOF."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        buf = bytearray(CHUNK)
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                n = 0
                while (k := conn.recv_into(buf)) > 0:
                    n += k
                conn.sendall(str(n).encode())

    def close(self) -> None:
        self.listener.close()


def bulk_mb_s(port: int, megabytes: int) -> float:
    chunk = memoryview(os.urandom(CHUNK))
    with socket.create_connection(("127.0.0.1", port)) as s:
        t = time.perf_counter()
        for _ in range(megabytes):
            s.sendall(chunk)
        s.shutdown(socket.SHUT_WR)
        got = s.recv(64)
        elapsed = time.perf_counter() - t
    assert int(got) == megabytes * CHUNK, got
    return megabytes * CHUNK / 1e6 / elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--megabytes", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-proxy-") as tmp, \
            ProxyProcess.start(Path(tmp), seed=1) as proxy:
        server, gport = grpc_server()
        sink = Sink()
        try:
            gproxy = proxy.add_link("client->grpc", f"127.0.0.1:{gport}")
            sproxy = proxy.add_link("client->sink", f"127.0.0.1:{sink.port}")
            lat = grpc_latency(gport, gproxy, args.calls)
            bulk: dict[str, list[float]] = {"direct": [], "proxy": []}
            for _ in range(args.runs):
                bulk["direct"].append(bulk_mb_s(sink.port, args.megabytes))
                bulk["proxy"].append(bulk_mb_s(sproxy, args.megabytes))
            stats = proxy.stats()
        finally:
            server.stop(0)
            sink.close()

    rows = [
        ("gRPC unary p50 (ms)", pct(lat["direct"], 0.5), pct(lat["proxy"], 0.5)),
        ("gRPC unary p99 (ms)", pct(lat["direct"], 0.99), pct(lat["proxy"], 0.99)),
        (f"bulk {args.megabytes} MB (MB/s)", statistics.median(bulk["direct"]), statistics.median(bulk["proxy"])),
    ]
    if args.json:
        print(json.dumps({"rows": [{"metric": m, "direct": d, "proxy": p, "ratio": p / d} for m, d, p in rows],
                          "calls": args.calls, "megabytes": args.megabytes, "runs": args.runs,
                          "bulk_runs": bulk, "proxy_stats": stats}, indent=2))
        return 0
    print(f"fault proxy overhead, no rules ({args.calls} calls of 100 B per path; "
          f"bulk: median of {args.runs} runs of {args.megabytes} MB, one connection)\n")
    print(f"{'':28} {'direct':>10} {'proxy':>10} {'proxy/direct':>13}")
    for metric, d, p in rows:
        print(f"{metric:28} {d:10.3f} {p:10.3f} {p / d:13.2f}")
    print("\nbulk runs (MB/s): direct " + ", ".join(f"{x:.0f}" for x in bulk["direct"])
          + "; proxy " + ", ".join(f"{x:.0f}" for x in bulk["proxy"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
