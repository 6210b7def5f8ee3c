"""The web view: how soon an event is on the page, and how much memory the page holds through a long replay.

    python bench/ui.py [--seconds 20] [--rate 40] [--skip-big] [--skip-memory | --only-memory]
                       [--replay-hours 1] [--speed 10] [--json]

Latency: two runs, each a fresh cluster of 3 real brokers (one real ZooKeeper, tick 100 ms, session 6 s) with
``kafkasim ui`` in its own process and the page open in Debian's headless Chromium (Playwright):

  steady        50 offsets partitions, a topic of 3 partitions (RF 3), one producer sending acks=all
                records at --rate/s for --seconds: every send moves HWs, so brokers log hw_changed lines
                all along
  1,000 p.      the same with 1,000 offsets partitions (3,000 replicas) and 200 consumer groups (one
                commit each), the page holding all of them

For every event the page draws, the page records the event's own ``ts_ms`` (the broker's wall clock as it
wrote the line), the time the server's log tail read the line (``seen_ms``, the baseline: nothing can show
an event before it is read), when the server sent it, when the page received it, and when the page drew it
(the animation frame that put it in the DOM; the frame is painted right after).  Same machine, same wall
clock.  Also, from the page: its long tasks (the Long Tasks API: any task of 50 ms or more on its main
thread) and how long each frame's drawing took.

Memory: an hour-long run is synthesized in the run-directory format ``kafkasim ui --replay`` reads (events/
broker-N.jsonl and ui.jsonl: 3 brokers, 50 offsets partitions and a topic of 3, a steady stream of HW moves,
20 groups rebalancing, a broker killed every 2 minutes and restarted 30 s later, each kill moving leaders,
ISRs, the controller and coordinators).  The page replays it at --speed (10x: six minutes), and its
JavaScript heap (CDP ``Runtime.getHeapUsage``) and DOM size are read every 20 s, and after a forced garbage
collection at the start, halfway and at the end.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
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
from zk.admin import create_topic  # noqa: E402
from util.waiting import wait_for  # noqa: E402
from zk.server import EmbeddedZooKeeper, free_port  # noqa: E402

#: A steady workload on a loaded 2-core machine: the bench's usual 1 s session expires under load, and a
#: storm of ISR changes is not the steady state this measures.
SESSION_MS = 6000
LONG_TASKS_JS = """() => { window.__long = [];
  new PerformanceObserver((l) => { for (const e of l.getEntries()) window.__long.push(e.duration); })
    .observe({ type: "longtask" }); }"""


def start_ui(*args: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "cli.main", "ui", *args, "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=str(ROOT), env=dict(os.environ, PYTHONPATH=str(ROOT)))
    url = f"http://127.0.0.1:{port}/"

    def up() -> bool:
        import urllib.request
        with urllib.request.urlopen(url + "api/config", timeout=2) as r:
            return r.status == 200
    wait_for(up, 60, "the ui server")
    return proc, url


def stop_ui(proc: subprocess.Popen | None) -> None:
    if proc is None:
        return
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


#: The renderer main thread's work in a trace, by Chromium's own event names (their CPU time, ``tdur``).
TRACE_CATEGORIES = ["devtools.timeline", "disabled-by-default-devtools.timeline", "blink", "v8",
                    "disabled-by-default-devtools.timeline.frame"]
TRACE_KINDS = {"style": ("UpdateLayoutTree", "RecalculateStyles"), "layout": ("Layout",),
               "prepaint": ("PrePaint",), "paint": ("Paint",), "layerize": ("Layerize",),
               "commit": ("Commit",), "intersection": ("IntersectionObserverController::computeIntersections",),
               "script": ("FunctionCall", "EventDispatch", "TimerFire", "FireAnimationFrame", "v8.compile",
                          "EvaluateScript", "RunMicrotasks")}


def trace_summary(path: Path, seconds: float) -> dict:
    """CPU ms per second of the page's main thread in a Chromium trace, by kind (the outermost event of each
    kind only, so nested events are not counted twice), the number of frames drawn, and the median CPU of
    one frame's rendering (style to commit) and of its layerization."""
    doc = json.loads(Path(path).read_text())
    evs = doc["traceEvents"] if isinstance(doc, dict) else doc
    main = {(e["pid"], e["tid"]) for e in evs if e.get("ph") == "M" and e.get("name") == "thread_name"
            and e.get("args", {}).get("name") == "CrRendererMain"}
    kind_of = {n: k for k, names in TRACE_KINDS.items() for n in names}
    per: dict[tuple, list] = {}
    for e in evs:
        if (e.get("pid"), e.get("tid")) in main and e.get("ph") == "X" and "dur" in e:
            per.setdefault((e["pid"], e["tid"]), []).append(e)
    best: dict = {}
    for key, xs in per.items():   # the renderer of the page is the busiest one
        out = {k: 0.0 for k in TRACE_KINDS} | {"all_tasks": 0.0, "frames": 0}
        xs.sort(key=lambda e: (e["ts"], -e["dur"]))
        open_until: dict[str, float] = {}
        task_until = -1.0
        for e in xs:
            cpu = e.get("tdur", e["dur"]) / 1000.0
            if e["name"] in ("ThreadControllerImpl::RunTask", "RunTask") and e["ts"] >= task_until:
                out["all_tasks"] += cpu
                task_until = e["ts"] + e["dur"]
            k = kind_of.get(e["name"])
            if k and e["ts"] >= open_until.get(k, -1.0):
                out[k] += cpu
                open_until[k] = e["ts"] + e["dur"]
            if e["name"] == "Layerize":
                out["frames"] += 1
                out.setdefault("_layerize", []).append(cpu)
            if e["name"] == "WebFrameWidgetImpl::UpdateLifecycle":
                out.setdefault("_frame", []).append(cpu)
        if out["all_tasks"] > best.get("all_tasks", -1):
            best = out
    res = {k: round(v / seconds, 1) for k, v in best.items() if k[0] != "_" and k != "frames"}
    res["frames"] = best.get("frames", 0)
    for k in ("_frame", "_layerize"):
        xs = sorted(best.get(k, []))
        res[k[1:] + "_p50_ms"] = round(xs[len(xs) // 2], 2) if xs else 0.0
    return res


def proc_stats():
    """(pid, name, the fields after the name) of every process in /proc/*/stat."""
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                st = (d / "stat").read_text()
            except OSError:
                continue
            yield int(d.name), st[st.index("(") + 1:st.rindex(")")], st[st.rindex(")") + 2:].split()


def cpu_s(pid: int, tree: bool = False) -> float:
    """CPU seconds (user + system) of a process, or of it and every process under it."""
    tick = os.sysconf("SC_CLK_TCK")
    procs = {q: (int(f[1]), int(f[11]) + int(f[12])) for q, _name, f in proc_stats()}
    total = 0
    for q, (parent, ticks) in procs.items():
        while q != pid and q in procs and tree:
            q = procs[q][0]
        if q == pid:
            total += ticks
    return total / tick


class PlainReader:
    """A second subscriber to the page's stream, in this process: a socket read line by line, no browser.  For
    every batch it keeps when the server stamped it sent and when it was read here, so the wait between the
    server and the page can be split into what any client would see and what the browser adds."""

    SENT = re.compile(rb'"sent_ms":([0-9.]+)')

    def __init__(self, url: str):
        import socket
        from urllib.parse import urlparse
        u = urlparse(url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=5)
        self.sock.sendall(f"GET /api/stream HTTP/1.1\r\nHost: {u.netloc}\r\nAccept: text/event-stream\r\n\r\n".encode())
        self.lat: list[float] = []
        self.on = False
        self._stop = False
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self) -> None:
        f = self.sock.makefile("rb")
        while not self._stop:
            try:
                line = f.readline()
            except OSError:
                return
            if not line:
                return
            if self.on and line.startswith(b"data: "):
                m = self.SENT.search(line[-40:]) or self.SENT.search(line)
                if m:
                    self.lat.append(time.time() * 1000.0 - float(m.group(1)))

    def close(self) -> None:
        self._stop = True
        try:
            self.sock.close()
        except OSError:
            pass


def browser_process_pid() -> int | None:
    """The headless Chromium this process started (its renderers, GPU and utility processes are under it)."""
    me = os.getpid()
    parents = {q: int(f[1]) for q, _name, f in proc_stats()}
    for q, name, f in proc_stats():
        # playwright's driver (node) is this process's child; Chromium is the driver's child
        if "chrom" in name and int(f[1]) != me and parents.get(int(f[1])) == me:
            return q
    return None


def workload(zk, work: Path, partitions: int, groups: int):
    """The bench's cluster: a topic ``w`` of 3 partitions at RF 3, one record in it, and ``groups`` Empty
    groups with one commit each (as after a reset).  Returns (cluster, its producer)."""
    c = make_cluster(zk, work, partitions, **{"zookeeper.session.timeout.ms": SESSION_MS})
    try:
        create_topic(c.zk(), "w", 3, 3, {})
        boot = [f"{b.host}:{b.port}" for b in c.cfg.brokers]
        cc = ClusterClient(boot)
        wait_for(lambda: cc.partitions_for("w"), 30, "topic w")
        producer = Producer(cc, acks=-1)
        producer.send("w", b"warm-up")
        for i in range(groups):
            m = GroupMember(ClusterClient(boot), f"bench-{i:03d}", ["w"], heartbeat_interval_ms=60_000)
            m.commit_simple({("w", i % 3): 1})
            m.close(leave=False)
    except BaseException:
        c.down()
        raise
    return c, producer


def run(zk, work: Path, browser, partitions: int, groups: int, seconds: float, rate: float,
        trace: Path | None = None) -> dict:
    c, producer = workload(zk, work, partitions, groups)
    proc = None
    try:
        proc, url = start_ui("--config", str(c.config_path))
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        t0 = time.monotonic()
        page.goto(url)
        page.wait_for_function(f"() => document.querySelectorAll('[data-tp]').length >= {partitions + 3}"
                               f" && document.querySelectorAll('#groups [data-group]').length >= {groups}",
                               timeout=120_000, polling=50)
        first_draw_s = time.monotonic() - t0
        plain = PlainReader(url)
        plain.on = True
        browser_pid = browser_process_pid()
        cpu0 = (time.monotonic(), cpu_s(proc.pid), cpu_s(browser_pid, tree=True) if browser_pid else 0.0)
        page.evaluate("() => { window.__lat = []; window.__render = []; }")
        page.evaluate(LONG_TASKS_JS)
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
        if trace:
            browser.start_tracing(page=page, path=str(trace), categories=TRACE_CATEGORIES)
        stop.wait(seconds)
        if trace:
            browser.stop_tracing()
        cpu1 = (time.monotonic(), cpu_s(proc.pid), cpu_s(browser_pid, tree=True) if browser_pid else 0.0)
        stop.set()
        t.join(10)
        # let the last lines reach the page before reading its record
        wait_for(lambda: page.evaluate("() => window.__lat.length") > 0, 10, "the page's record")
        stop_wait = time.monotonic() + 1.0
        while time.monotonic() < stop_wait:
            page.wait_for_timeout(100)
        lat = page.evaluate("() => window.__lat")
        longs = page.evaluate("() => window.__long")
        render = page.evaluate("() => window.__render")
        page.close()
        plain.close()
        producer.cluster.close()
        page_ms = [shown - ts for ts, _seen, shown, *_ in lat]
        tail_ms = [seen - ts for ts, seen, _shown, *_ in lat]
        extra_ms = [shown - seen for _ts, seen, shown, *_ in lat]
        server_ms = [sent - seen for _ts, seen, _shown, _type, sent, _arr in lat]
        wire_ms = [arr - sent for _ts, _seen, _shown, _type, sent, arr in lat]
        draw_ms = [shown - arr for _ts, _seen, shown, _type, _sent, arr in lat]
        return {"partitions": partitions, "groups": groups, "seconds": seconds, "sent": sent[0],
                "events": len(lat), "first_draw_s": round(first_draw_s, 2), "load": round(os.getloadavg()[0], 1),
                "page_p50_ms": pct(page_ms, 0.5), "page_p99_ms": pct(page_ms, 0.99),
                "tail_p50_ms": pct(tail_ms, 0.5), "tail_p99_ms": pct(tail_ms, 0.99),
                "server_to_page_p50_ms": pct(extra_ms, 0.5), "server_to_page_p99_ms": pct(extra_ms, 0.99),
                "long_tasks": len(longs), "long_task_max_ms": max(longs, default=0.0),
                "frame_draw_p99_ms": pct(render, 0.99) if render else 0.0,
                "server_p50_ms": pct(server_ms, 0.5), "server_p99_ms": pct(server_ms, 0.99),
                "wire_p50_ms": pct(wire_ms, 0.5), "wire_p99_ms": pct(wire_ms, 0.99),
                "draw_p50_ms": pct(draw_ms, 0.5), "draw_p99_ms": pct(draw_ms, 0.99),
                "server_cpu_ms_per_s": round(1000 * (cpu1[1] - cpu0[1]) / (cpu1[0] - cpu0[0]), 1),
                "browser_cpu_ms_per_s": round(1000 * (cpu1[2] - cpu0[2]) / (cpu1[0] - cpu0[0]), 1),
                "plain_p50_ms": pct(plain.lat, 0.5) if plain.lat else 0.0,
                "plain_p99_ms": pct(plain.lat, 0.99) if plain.lat else 0.0,
                "trace_cpu_ms_per_s": trace_summary(trace, seconds) if trace else None}
    finally:
        try:
            stop_ui(proc)
        finally:
            c.down()


# ---------------------------------------------------------------------------------------------- memory

def synthesize_run(run_dir: Path, seconds: float, offsets: int = 50, rate: float = 10.0, groups: int = 20,
                   seed: int = 7) -> int:
    """Write a run of ``seconds`` in the format the replay reads; returns its number of lines."""
    rnd = random.Random(seed)
    ev = run_dir / "events"
    ev.mkdir(parents=True)
    files = {b: open(ev / f"broker-{b}.jsonl", "w") for b in (1, 2, 3)}
    files[-1] = open(ev / "ui.jsonl", "w")
    wall0, mono0 = 1_790_000_000_000.0, 10_000_000_000
    n = [0]

    def emit(t_s: float, broker: int, type_: str, **fields) -> None:
        line = {"ts_ms": round(wall0 + t_s * 1000, 3), "mono_ns": mono0 + int(t_s * 1e9), "broker": broker,
                "type": type_, **fields}
        files[broker].write(json.dumps(line, separators=(",", ":")) + "\n")
        n[0] += 1

    parts = [("__consumer_offsets", p) for p in range(offsets)] + [("w", p) for p in range(3)]
    state = {tp: {"leader": 1 + i % 3, "epoch": 0, "isr": [1, 2, 3], "v": 0} for i, tp in enumerate(parts)}
    hw = {p: 0 for p in range(3)}
    live, controller, epoch = {1, 2, 3}, 1, 1
    names = [f"g{i:02d}" for i in range(groups)]
    gen = {g: 1 for g in names}
    home = {g: 1 + i % 3 for i, g in enumerate(names)}

    def write(t: float, tp, leader: int, isr: list[int], reason: str) -> None:
        s = state[tp]
        s.update(leader=leader, isr=isr, epoch=s["epoch"] + (leader != s["leader"]), v=s["v"] + 1)
        emit(t, controller, "partition_state_written", topic=tp[0], partition=tp[1], leader=leader,
             leader_epoch=s["epoch"], isr=isr, zk_version=s["v"], reason=reason, epoch=epoch)
        if tp[0] == "__consumer_offsets" and leader >= 0:
            emit(t + 0.002, leader, "coordinator_load_started", partition=tp[1])
            emit(t + 0.004, leader, "coordinator_loaded", partition=tp[1], duration_ms=round(rnd.uniform(1, 4), 3))

    for b in (1, 2, 3):
        emit(0.0, b, "broker_starting", pid=1000 + b)
        emit(0.05, b, "broker_registered", broker_epoch=20 + b, session_id=f"0x{b:x}")
    emit(0.1, 1, "controller_elected", epoch=1, elect_ms=2.0)
    emit(0.1, 1, "topic_created", topic="__consumer_offsets", partitions=offsets)
    for i, tp in enumerate(parts):
        write(0.2 + i * 0.001, tp, state[tp]["leader"], [1, 2, 3], "new_partition")
    for g in names:
        emit(0.5, home[g], "group_created", group=g)
    t, next_fault, victim, back = 1.0, 120.0, 1, []
    while t < seconds:
        p = rnd.randrange(3)   # one acks=all record: the leader's HW moves, then each follower's
        hw[p] += 1
        s = state[("w", p)]
        if s["leader"] >= 0:
            for k, b in enumerate(sorted(s["isr"], key=lambda b: b != s["leader"])):
                emit(t + k * 0.002, b, "hw_changed", topic="w", partition=p, old=hw[p] - 1, new=hw[p])
        if rnd.random() < groups / 300.0 / rate:   # a rebalance every ~5 minutes per group
            g = rnd.choice(names)
            gen[g] += 1
            b = home[g]
            emit(t, b, "group_state_changed", group=g, **{"from": "Stable"}, to="PreparingRebalance",
                 generation=gen[g] - 1)
            emit(t + 0.05, b, "group_generation", group=g, generation=gen[g], protocol="range",
                 leader=f"{g}-m1", members=[f"{g}-m1", f"{g}-m2"])
            emit(t + 0.06, b, "group_state_changed", group=g, **{"from": "CompletingRebalance"}, to="Stable",
                 generation=gen[g])
        if t >= next_fault:   # kill a broker: leaders and ISRs move; the controller too if it was the one
            emit(t, -1, "ui_action", action="kill", target=victim, ok=True)
            emit(t + 0.01, victim, "broker_stopped")
            live.discard(victim)
            if victim == controller:
                controller, epoch = min(live), epoch + 1
                emit(t + 0.3, controller, "controller_elected", epoch=epoch, elect_ms=3.0)
            else:
                emit(t + 0.3, controller, "broker_change", dead=[victim])
            for i, tp in enumerate(parts):
                s = state[tp]
                isr = [b for b in s["isr"] if b != victim]
                leader = s["leader"] if s["leader"] != victim else (isr[0] if isr else -1)
                write(t + 0.31 + i * 0.0005, tp, leader, isr, "broker_failure")
            back.append((t + 30.0, victim))
            victim, next_fault = victim % 3 + 1, next_fault + 120.0
        if back and t >= back[0][0]:   # it comes back and catches up into every ISR
            _, b = back.pop(0)
            emit(t, b, "broker_starting", pid=2000 + int(t))
            emit(t + 0.05, b, "broker_registered", broker_epoch=100 + int(t), session_id=f"0x{int(t):x}")
            live.add(b)
            for i, tp in enumerate(parts):
                write(t + 2.0 + i * 0.0005, tp, state[tp]["leader"], sorted(state[tp]["isr"] + [b]), "isr_expand")
        t += rnd.expovariate(rate)
    for f in files.values():
        f.close()
    return n[0]


def heap(page, cdp, gc: bool = False) -> dict:
    if gc:
        cdp.send("HeapProfiler.collectGarbage")
    h = cdp.send("Runtime.getHeapUsage")
    m = {x["name"]: x["value"] for x in cdp.send("Performance.getMetrics")["metrics"]}
    return {"used_mb": round(h["usedSize"] / 2**20, 2), "total_mb": round(h["totalSize"] / 2**20, 2),
            "nodes": int(m.get("Nodes", 0)), "listeners": int(m.get("JSEventListeners", 0)),
            "t": page.evaluate("() => (Number(document.body.dataset.t || 0))"), "gc": gc}


def run_memory(browser, work: Path, hours: float, speed: float, sample_s: float = 20.0) -> dict:
    run_dir = work / "hour-run"
    t0 = time.monotonic()
    lines = synthesize_run(run_dir, hours * 3600)
    made_s = time.monotonic() - t0
    proc, url = start_ui("--replay", str(run_dir))
    try:
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable")
        page.goto(url)
        page.wait_for_function("() => document.body.dataset.t !== undefined", timeout=120_000)
        start_ns = page.evaluate("() => Number(document.body.dataset.t)")
        page.evaluate("(t) => window.seekTo(t)", start_ns + 2_000_000_000)   # past the start: every partition
        page.wait_for_function("() => document.querySelectorAll('[data-tp]').length >= 53", timeout=120_000)
        samples = [dict(heap(page, cdp, gc=True), phase="start", wall_s=0.0)]
        page.select_option("#speed", str(int(speed)) if speed == int(speed) else str(speed))
        page.click("#play")
        t1 = time.monotonic()
        halfway = False
        while page.evaluate("() => document.querySelector('#play').textContent.includes('pause')"):
            page.wait_for_timeout(sample_s * 1000)
            wall = round(time.monotonic() - t1, 1)
            if not halfway and wall >= hours * 3600 / speed / 2:
                samples.append(dict(heap(page, cdp, gc=True), phase="halfway", wall_s=wall))
                halfway = True
            else:
                samples.append(dict(heap(page, cdp), phase="playing", wall_s=wall))
            if wall > hours * 3600 / speed * 3 + 120:
                raise RuntimeError("the replay did not reach its end")
        page.wait_for_timeout(1000)
        samples.append(dict(heap(page, cdp, gc=True), phase="end", wall_s=round(time.monotonic() - t1, 1)))
        page.close()
        for s in samples:
            s["run_s"] = round((s.pop("t") - start_ns) / 1e9, 1)
        gcd = [s for s in samples if s["gc"]]
        return {"hours": hours, "speed": speed, "lines": lines, "synthesized_s": round(made_s, 1),
                "samples": samples,
                "start_mb": gcd[0]["used_mb"], "end_mb": gcd[-1]["used_mb"],
                "peak_mb": max(s["used_mb"] for s in samples),
                "nodes_start": gcd[0]["nodes"], "nodes_end": gcd[-1]["nodes"],
                "nodes_max": max(s["nodes"] for s in samples)}
    finally:
        stop_ui(proc)


def main() -> None:
    from playwright.sync_api import sync_playwright

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rate", type=float, default=40.0, help="records/s sent (acks=all)")
    ap.add_argument("--skip-big", action="store_true", help="only the steady 3-broker run")
    ap.add_argument("--only-big", action="store_true", help="only the 1,000-partition run")
    ap.add_argument("--trace", type=Path, help="record a Chromium trace of the page while measuring, one file "
                    "per run in this directory, and print the main thread's CPU by kind")
    ap.add_argument("--skip-memory", action="store_true", help="no hour-long replay")
    ap.add_argument("--only-memory", action="store_true", help="only the hour-long replay")
    ap.add_argument("--replay-hours", type=float, default=1.0)
    ap.add_argument("--speed", type=float, default=10.0, choices=[0.5, 1, 2, 5, 10], help="the page's replay speed")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    results, memory = [], None
    with tempfile.TemporaryDirectory(prefix="kafkasim-bench-") as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        try:
            if not a.only_memory:
                with EmbeddedZooKeeper(Path(tmp) / "zk", tick_ms=TICK_MS) as zk:
                    if a.trace:
                        a.trace.mkdir(parents=True, exist_ok=True)
                    for n, g in ([] if a.only_big else [(50, 0)]) + ([] if a.skip_big else [(1000, 200)]):
                        results.append(run(zk, Path(tmp), browser, n, g, a.seconds, a.rate,
                                           a.trace / f"trace-{n}.json" if a.trace else None))
            if not a.skip_memory:
                memory = run_memory(browser, Path(tmp), a.replay_hours, a.speed)
        finally:
            browser.close()
    if a.json:
        print(json.dumps({"latency": results, "memory": memory}, indent=2))
        return
    if results:
        print(f"{'partitions':>10} {'groups':>6} {'events':>7} {'page p50':>9} {'page p99':>9} {'tail p50':>9} "
              f"{'tail p99':>9} {'+page p50':>9} {'+page p99':>9} {'long tasks':>10} {'longest':>8} "
              f"{'first draw':>10} {'load':>5}")
        for r in results:
            print(f"{r['partitions']:>10} {r['groups']:>6} {r['events']:>7} {r['page_p50_ms']:8.1f}m "
                  f"{r['page_p99_ms']:8.1f}m {r['tail_p50_ms']:8.1f}m {r['tail_p99_ms']:8.1f}m "
                  f"{r['server_to_page_p50_ms']:8.1f}m {r['server_to_page_p99_ms']:8.1f}m "
                  f"{r['long_tasks']:>10} {r['long_task_max_ms']:7.0f}m {r['first_draw_s']:9.2f}s {r['load']:5.1f}")
        for r in results:
            print(f"{r['partitions']:>10} partitions: tail -> page split: server (read -> SSE sent) p50 "
                  f"{r['server_p50_ms']:.1f} p99 {r['server_p99_ms']:.1f}; sent -> page received p50 "
                  f"{r['wire_p50_ms']:.1f} p99 {r['wire_p99_ms']:.1f} (a plain socket reader in the bench: p50 "
                  f"{r['plain_p50_ms']:.1f} p99 {r['plain_p99_ms']:.1f}); CPU: the ui server {r['server_cpu_ms_per_s']:.0f} "
                  f"ms/s, Chromium (all its processes) {r['browser_cpu_ms_per_s']:.0f} ms/s; received -> drawn p50 {r['draw_p50_ms']:.1f} "
                  f"p99 {r['draw_p99_ms']:.1f}; a frame's drawing p99 {r['frame_draw_p99_ms']:.1f} (ms)")
        for r in results:
            if r["trace_cpu_ms_per_s"]:
                print(f"{r['partitions']:>10} partitions: the page's main thread, CPU ms per second by kind: "
                      + ", ".join(f"{k} {v}" for k, v in r["trace_cpu_ms_per_s"].items()))
        print("page = event written -> drawn on the page; tail = written -> read by the server's tail (the "
              "baseline, same run); +page = read by the tail -> drawn; long tasks = the page's tasks >= 50 ms; "
              "load = load average at the end")
        worst = max(r["page_p99_ms"] for r in results)
        print(f"goal: an event on the page within 250 ms: p99 {worst:.1f} ms {'met' if worst <= 250 else 'MISSED'}")
    if memory:
        m = memory
        print(f"\nmemory: a {m['hours']:g} h synthesized run ({m['lines']:,} lines) replayed at {m['speed']:g}x")
        print(f"{'phase':>8} {'wall s':>7} {'run s':>7} {'JS heap MB':>10} {'of MB':>7} {'DOM nodes':>9} {'listeners':>9}")
        for s in m["samples"]:
            print(f"{s['phase'] + ('*' if s['gc'] else ''):>8} {s['wall_s']:7.1f} {s['run_s']:7.1f} {s['used_mb']:10.2f} "
                  f"{s['total_mb']:7.2f} {s['nodes']:9} {s['listeners']:9}")
        print(f"(* after a forced garbage collection) JS heap start {m['start_mb']:.2f} MB, end {m['end_mb']:.2f} MB, "
              f"peak {m['peak_mb']:.2f} MB; DOM nodes start {m['nodes_start']}, end {m['nodes_end']}, "
              f"max {m['nodes_max']}")


if __name__ == "__main__":
    main()
