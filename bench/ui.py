"""The web view's latency: from a broker writing an event to the page showing it.

    python bench/ui.py [--seconds 20] [--rate 40] [--skip-big] [--json]

Two runs, each a fresh cluster of 3 real brokers (one real ZooKeeper, tick 100 ms) with ``kafkasim ui``
in its own process and the page open in Debian's headless Chromium (Playwright):

  steady        50 offsets partitions, a topic of 3 partitions (RF 3), one producer sending acks=all
                records at --rate/s for --seconds: every send moves HWs, so brokers log hw_changed lines
                all along
  1,000 p.      the same with 1,000 offsets partitions (3,000 replicas) and 200 consumer groups (one
                commit each), the page holding all of them

For every event the page draws, the page records the event's own ``ts_ms`` (the broker's wall clock as it
wrote the line), the time the server's log tail read the line (``seen_ms``, the baseline: nothing can show
an event before it is read) and the time the page drew it (after the SSE message arrived and the next
animation frame ran).  Same machine, same wall clock.  Also: the gaps between the page's animation frames
during the run (a frozen page shows as a long gap) and the time to first draw the whole state.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import TICK_MS, make_cluster, pct  # noqa: E402
from client.group import GroupMember  # noqa: E402
from client.metadata import ClusterClient  # noqa: E402
from client.producer import Producer  # noqa: E402
from node.tools import topics  # noqa: E402
from node.tools.waiting import wait_for  # noqa: E402
from zk.server import EmbeddedZooKeeper, free_port  # noqa: E402

FRAME_GAPS_JS = """() => { window.__gaps = []; let last = performance.now();
  const f = (t) => { window.__gaps.push(t - last); last = t; if (!window.__stopGaps) requestAnimationFrame(f); };
  requestAnimationFrame(f); }"""


def start_ui(cluster) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "node.tools.cli", "ui", "--config", str(cluster.config_path),
                             "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=str(ROOT), env=dict(os.environ, PYTHONPATH=str(ROOT)))
    url = f"http://127.0.0.1:{port}/"

    def up() -> bool:
        import urllib.request
        with urllib.request.urlopen(url + "api/config", timeout=2) as r:
            return r.status == 200
    wait_for(up, 30, "the ui server")
    return proc, url


def run(zk, work: Path, browser, partitions: int, groups: int, seconds: float, rate: float) -> dict:
    c = make_cluster(zk, work, partitions)
    proc = None
    try:
        topics.create_topic(c.zk(), "w", 3, 3, {})
        boot = [f"{b.host}:{b.port}" for b in c.cfg.brokers]
        cc = ClusterClient(boot)
        wait_for(lambda: cc.partitions_for("w"), 30, "topic w")
        producer = Producer(cc, acks=-1)
        producer.send("w", b"warm-up")
        for i in range(groups):   # one commit each: an Empty group with offsets, as after a reset
            m = GroupMember(ClusterClient(boot), f"bench-{i:03d}", ["w"], heartbeat_interval_ms=60_000)
            m.commit_simple({("w", i % 3): 1})
            m.close(leave=False)
        proc, url = start_ui(c)
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        t0 = time.monotonic()
        page.goto(url)
        page.wait_for_function(f"() => document.querySelectorAll('[data-tp]').length >= {partitions + 3}"
                               f" && document.querySelectorAll('#groups [data-group]').length >= {groups}",
                               timeout=120_000, polling=50)
        first_draw_s = time.monotonic() - t0
        page.evaluate("() => { window.__lat = []; }")
        page.evaluate(FRAME_GAPS_JS)
        stop = threading.Event()
        sent = [0]

        def produce() -> None:
            nxt = time.monotonic()
            while not stop.is_set():
                try:
                    producer.send("w", f"r{sent[0]}".encode())
                    sent[0] += 1
                except Exception:
                    pass
                nxt += 1.0 / rate
                stop.wait(max(0.0, nxt - time.monotonic()))  # the workload's pace
        t = threading.Thread(target=produce, daemon=True)
        t.start()
        stop.wait(seconds)
        stop.set()
        t.join(10)
        # let the last lines reach the page before reading its record
        wait_for(lambda: page.evaluate("() => window.__lat.length") > 0, 10, "the page's record")
        stop_wait = time.monotonic() + 1.0
        while time.monotonic() < stop_wait:
            page.wait_for_timeout(100)
        lat = page.evaluate("() => { window.__stopGaps = true; return window.__lat; }")
        gaps = page.evaluate("() => window.__gaps")
        page.close()
        cc.close()
        page_ms = [shown - ts for ts, _seen, shown, *_ in lat]
        tail_ms = [seen - ts for ts, seen, _shown, *_ in lat]
        extra_ms = [shown - seen for _ts, seen, shown, *_ in lat]
        server_ms = [sent - seen for _ts, seen, _shown, _type, sent, _arr in lat]
        wire_ms = [arr - sent for _ts, _seen, _shown, _type, sent, arr in lat]
        draw_ms = [shown - arr for _ts, _seen, shown, _type, _sent, arr in lat]
        return {"partitions": partitions, "groups": groups, "seconds": seconds, "sent": sent[0],
                "events": len(lat), "first_draw_s": round(first_draw_s, 2),
                "page_p50_ms": pct(page_ms, 0.5), "page_p99_ms": pct(page_ms, 0.99),
                "tail_p50_ms": pct(tail_ms, 0.5), "tail_p99_ms": pct(tail_ms, 0.99),
                "server_to_page_p50_ms": pct(extra_ms, 0.5), "server_to_page_p99_ms": pct(extra_ms, 0.99),
                "frame_gap_p99_ms": pct(gaps, 0.99), "frame_gap_max_ms": max(gaps),
                "server_p50_ms": pct(server_ms, 0.5), "server_p99_ms": pct(server_ms, 0.99),
                "wire_p50_ms": pct(wire_ms, 0.5), "wire_p99_ms": pct(wire_ms, 0.99),
                "draw_p50_ms": pct(draw_ms, 0.5), "draw_p99_ms": pct(draw_ms, 0.99)}
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
        c.down()


def main() -> None:
    from playwright.sync_api import sync_playwright

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rate", type=float, default=40.0, help="records/s sent (acks=all)")
    ap.add_argument("--skip-big", action="store_true", help="only the steady 3-broker run")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="kafkasim-bench-") as tmp, \
            EmbeddedZooKeeper(Path(tmp) / "zk", tick_ms=TICK_MS) as zk, sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        try:
            results.append(run(zk, Path(tmp), browser, 50, 0, a.seconds, a.rate))
            if not a.skip_big:
                results.append(run(zk, Path(tmp), browser, 1000, 200, a.seconds, a.rate))
        finally:
            browser.close()
    if a.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{'partitions':>10} {'groups':>6} {'events':>7} {'page p50':>9} {'page p99':>9} {'tail p50':>9} "
          f"{'tail p99':>9} {'+page p50':>9} {'+page p99':>9} {'frame p99':>9} {'frame max':>9} {'first draw':>10}")
    for r in results:
        print(f"{r['partitions']:>10} {r['groups']:>6} {r['events']:>7} {r['page_p50_ms']:8.1f}m "
              f"{r['page_p99_ms']:8.1f}m {r['tail_p50_ms']:8.1f}m {r['tail_p99_ms']:8.1f}m "
              f"{r['server_to_page_p50_ms']:8.1f}m {r['server_to_page_p99_ms']:8.1f}m "
              f"{r['frame_gap_p99_ms']:8.1f}m {r['frame_gap_max_ms']:8.1f}m {r['first_draw_s']:9.2f}s")
    for r in results:
        print(f"{r['partitions']:>10} partitions: tail -> page split: server (read -> SSE sent) p50 "
              f"{r['server_p50_ms']:.1f} p99 {r['server_p99_ms']:.1f}; sent -> page received p50 {r['wire_p50_ms']:.1f} "
              f"p99 {r['wire_p99_ms']:.1f}; received -> drawn p50 {r['draw_p50_ms']:.1f} p99 {r['draw_p99_ms']:.1f} (ms)")
    print("page = event written -> drawn on the page; tail = written -> read by the server's tail (baseline); "
          "+page = read by the tail -> drawn; frame = gaps between the page's animation frames (ms)")
    worst = max(r["page_p99_ms"] for r in results)
    print(f"goal: an event on the page within 250 ms: p99 {worst:.1f} ms {'met' if worst <= 250 else 'MISSED'}")


if __name__ == "__main__":
    main()
