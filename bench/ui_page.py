"""The web view's page alone: a recorded live stream replayed to it, so two pages can be compared on the same input.

    python bench/ui_page.py record STREAM [--partitions 1000] [--groups 200] [--seconds 25] [--rate 40]
    python bench/ui_page.py replay STREAM [--static DIR] [--seconds 15] [--trace FILE]

``record`` runs bench/ui.py's workload (3 real brokers, one real ZooKeeper, ``kafkasim ui`` in its own process, a
producer sending acks=all records at --rate/s, --groups groups with one commit each) and saves what the server's
``/api/stream`` sent, line by line, with the second each line was read.

``replay`` serves a page (this tree's ui/static, or --static DIR: another tree's, to compare) and sends it the
recorded snapshot, then the recorded batches at their recorded pace, each batch's times (the events' ts_ms and
seen_ms, the batch's sent_ms) moved by the same amount to now.  The page is opened in Debian's headless Chromium
and measured as bench/ui.py does: for each event, written -> drawn on the page (its recorded tail and server
delays included, the page's own part live), its long tasks, its frames, and the CPU of all Chromium's processes.
Only the page and the browser run: no cluster, no server work, so the difference between two pages is the pages'.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import TICK_MS, pct  # noqa: E402
from bench.ui import (LONG_TASKS_JS, TRACE_CATEGORIES, browser_process_pid, cpu_s, start_ui,  # noqa: E402
                      stop_ui, trace_summary, workload)


def record(out: Path, partitions: int, groups: int, seconds: float, rate: float) -> int:
    from zk.server import EmbeddedZooKeeper

    with tempfile.TemporaryDirectory(prefix="kafkasim-bench-") as tmp, \
            EmbeddedZooKeeper(Path(tmp) / "zk", tick_ms=TICK_MS) as zk:
        c, producer = workload(zk, Path(tmp), partitions, groups)
        proc = None
        try:
            proc, url = start_ui("--config", str(c.config_path))
            port = int(url.rsplit(":", 1)[1].strip("/"))
            sock = socket.create_connection(("127.0.0.1", port), timeout=60)
            sock.sendall(f"GET /api/stream HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n\r\n".encode())
            f = sock.makefile("rb")
            stop = threading.Event()

            def produce() -> None:
                nxt, i = time.monotonic(), 0
                while not stop.is_set():
                    try:
                        producer.send("w", f"r{i}".encode())
                        i += 1
                    except Exception:
                        pass
                    nxt += 1.0 / rate
                    stop.wait(max(0.0, nxt - time.monotonic()))
            t = threading.Thread(target=produce, daemon=True)
            t.start()
            t0, n = time.monotonic(), 0
            with open(out, "w") as w:
                while time.monotonic() - t0 < seconds:
                    line = f.readline()
                    if not line:
                        break
                    w.write(f"{time.monotonic() - t0:.4f}\t{line.decode().rstrip(chr(10)).rstrip(chr(13))}\n")
                    n += line.startswith(b"event: batch")
            stop.set()
            t.join(10)
            sock.close()
            producer.cluster.close()
            return n
        finally:
            stop_ui(proc)
            c.down()


def load_stream(path: Path) -> tuple[str, list[tuple[float, str]]]:
    msgs, kind = [], None
    for line in open(path):
        t, _, body = line.rstrip("\n").partition("\t")
        if body.startswith("event: "):
            kind = body[7:]
        elif body.startswith("data: "):
            msgs.append((float(t), kind, body[6:]))
    snapshot = next(d for _, k, d in msgs if k == "snapshot")
    return snapshot, [(t, d) for t, k, d in msgs if k == "batch"]


def serve(static: Path, snapshot: str, batches: list[tuple[float, str]], seconds: float, delay_s: float):
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import FileResponse, JSONResponse, StreamingResponse
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    t_first = batches[0][0]

    async def index(request):
        return FileResponse(static / "index.html", headers={"Cache-Control": "no-store"})

    async def config(request):
        return JSONResponse({"mode": "live", "read_only": False, "host": "127.0.0.1", "token_in_page": True,
                             "run_dir": "(recorded stream)", "brokers": [1, 2, 3]})

    async def stream(request):
        async def gen():
            yield "event: snapshot\ndata: " + snapshot + "\n\n"
            await asyncio.sleep(delay_s)
            t0 = time.monotonic()
            for t, data in batches:
                if t - t_first > seconds + 5:
                    break
                wait = t - t_first - (time.monotonic() - t0)
                if wait > 0:
                    await asyncio.sleep(wait)
                b = json.loads(data)
                shift = time.time() * 1000.0 - b["sent_ms"]
                b["sent_ms"] += shift
                for e in b["events"]:
                    for k in ("ts_ms", "seen_ms"):
                        if k in e:
                            e[k] += shift
                yield "event: batch\ndata: " + json.dumps(b, separators=(",", ":")) + "\n\n"
            while True:
                await asyncio.sleep(15)
                yield ": keep-alive\n\n"
        return StreamingResponse(gen(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/", index), Route("/api/config", config), Route("/api/stream", stream),
                            Mount("/static", StaticFiles(directory=static))])
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the replay server did not start")
        time.sleep(0.05)
    return server, f"http://127.0.0.1:{port}/"


def replay(stream: Path, static: Path, seconds: float, trace: Path | None, screenshot: Path | None) -> dict:
    from playwright.sync_api import sync_playwright

    snapshot, batches = load_stream(stream)
    n_rows = len(json.loads(snapshot)["partitions"])
    delay_s = 6.0
    server, url = serve(static, snapshot, batches, seconds, delay_s)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            try:
                page = browser.new_page(viewport={"width": 1500, "height": 1000})
                t0 = time.monotonic()
                page.goto(url)
                page.wait_for_function(f"() => document.querySelectorAll('[data-tp]').length >= {n_rows}",
                                       timeout=60_000, polling=50)
                page.evaluate("() => { window.__lat = []; window.__render = []; }")
                page.evaluate(LONG_TASKS_JS)
                page.wait_for_timeout(max(0.0, delay_s + 1.0 - (time.monotonic() - t0)) * 1000)
                pid = browser_process_pid()
                c0 = (time.monotonic(), cpu_s(pid, tree=True) if pid else 0.0)
                if trace:
                    browser.start_tracing(page=page, path=str(trace), categories=TRACE_CATEGORIES)
                page.wait_for_timeout(seconds * 1000)
                if trace:
                    browser.stop_tracing()
                c1 = (time.monotonic(), cpu_s(pid, tree=True) if pid else 0.0)
                lat = page.evaluate("() => window.__lat")
                longs = page.evaluate("() => window.__long")
                render = page.evaluate("() => window.__render")
                if screenshot:
                    page.screenshot(path=str(screenshot))
            finally:
                browser.close()
    finally:
        server.should_exit = True
    page_ms = [shown - ts for ts, _seen, shown, *_ in lat]
    wire = [arr - sent for _ts, _seen, _shown, _type, sent, arr in lat]
    draw = [shown - arr for _ts, _seen, shown, _type, _sent, arr in lat]
    return {"static": str(static), "rows": n_rows, "events": len(lat), "frames": len(render),
            "page_p50_ms": pct(page_ms, 0.5), "page_p99_ms": pct(page_ms, 0.99),
            "wire_p50_ms": pct(wire, 0.5), "wire_p99_ms": pct(wire, 0.99),
            "draw_p50_ms": pct(draw, 0.5), "draw_p99_ms": pct(draw, 0.99),
            "long_tasks": len(longs), "long_task_max_ms": max(longs, default=0.0),
            "chromium_cpu_ms_per_s": round(1000 * (c1[1] - c0[1]) / (c1[0] - c0[0]), 1),
            "load": round(os.getloadavg()[0], 1),
            "trace_cpu_ms_per_s": trace_summary(trace, seconds) if trace else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("stream", type=Path)
    r.add_argument("--partitions", type=int, default=1000)
    r.add_argument("--groups", type=int, default=200)
    r.add_argument("--seconds", type=float, default=25.0)
    r.add_argument("--rate", type=float, default=40.0)
    p = sub.add_parser("replay")
    p.add_argument("stream", type=Path)
    p.add_argument("--static", type=Path, default=ROOT / "ui" / "static", help="the page's directory")
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--trace", type=Path, help="record a Chromium trace of the page while measuring")
    p.add_argument("--screenshot", type=Path)
    p.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.cmd == "record":
        n = record(a.stream, a.partitions, a.groups, a.seconds, a.rate)
        print(f"{a.stream}: {n} batches")
        return
    res = replay(a.stream, a.static, a.seconds, a.trace, a.screenshot)
    if a.json:
        print(json.dumps(res))
        return
    print(f"{res['static']}: {res['rows']} rows, {res['events']} events, written -> drawn p50 {res['page_p50_ms']:.1f} "
          f"p99 {res['page_p99_ms']:.1f} ms; sent -> received p50 {res['wire_p50_ms']:.1f} p99 "
          f"{res['wire_p99_ms']:.1f}; received -> drawn p50 {res['draw_p50_ms']:.1f} p99 {res['draw_p99_ms']:.1f}; "
          f"{res['frames']} frames, {res['long_tasks']} long tasks (longest {res['long_task_max_ms']:.0f} ms); "
          f"Chromium {res['chromium_cpu_ms_per_s']:.0f} ms CPU/s; load {res['load']}")
    if res["trace_cpu_ms_per_s"]:
        print("the page's main thread, CPU ms per second by kind: "
              + ", ".join(f"{k} {v}" for k, v in res["trace_cpu_ms_per_s"].items()))


if __name__ == "__main__":
    main()
