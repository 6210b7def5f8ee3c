"""kafkasim beside Kafka 2.8.2, in one run, with the same settings: each figure, its same-run ratio, the goal.

    python bench/vs_kafka.py [--rounds 3] [--coordinator-runs 3] [--partitions 50 1000]
                             [--only start memory controller coordinator throughput commits replay idle]
                             [--records 200000] [--requests 1000] [--fetch-mb 200]
                             [--commit-seconds 10] [--commit-threads 8] [--per-request 10]
                             [--replay-records 1000000] [--replay-moves 2]
                             [--idle-partitions 1000 10000] [--idle-window 20]
                             [--scale-partitions 1000 10000] [--fsync-partitions 1000] [--json PATH] [--quick]

Both sides run from one cluster.yaml per cluster (bench/vs_sides.py): kafkasim reads it, and
reference/properties.py translates it into each Kafka 2.8.2 broker's server.properties, so the settings are
equal (3 brokers, ZooKeeper session 1 s, RF 3 offsets topic, auto leader rebalance off, ...).  Every cluster
is fresh, on its own chroot of one shared ZooKeeper (tick 100 ms, warmed up first as in
bench/controller_failover.py).  The two sides never run at once: each measurement is made on one side and
then on the other, the order alternating from round to round, so both see the same stretch of a shared,
noisy machine; the load average is printed beside each figure.

  start         launch of the brokers -> ready (bench/vs_sides.py's Readiness: registered, a controller,
                every listener's Metadata whole, __consumer_offsets led, a coordinator answering), at 50
                offsets partitions (every cluster of the run counts) and at each --partitions count (the
                controller block's clusters, or, without it, start-only clusters of their own); these also
                give the time until every offsets partition's coordinator had loaded (kafkasim's events,
                Kafka's server.log) and kafkasim's start stages from its event logs.
  memory        each broker's RSS right after ready, and after the produce/consume workloads.
  controller    the controller gets SIGTERM (controlled shutdown off) or SIGKILL, at each --partitions count
                of __consumer_offsets; time from the signal until ZooKeeper shows a live leader for every
                partition it led (bench/vs_controller.py).
  coordinator   a group's coordinator gets SIGTERM (controlled shutdown on) or SIGKILL; time from the signal
                to the first commit the new coordinator accepts, with librdkafka and the Java consumer, and
                (kafkasim only) kafkasim's own client, with the new coordinator's load beside it
                (bench/vs_coordinator.py).
  throughput    librdkafka: produce records/s (acks=all, 100-byte records), the acks=all p50 of one record,
                consume MB/s (bench/vs_throughput.py).
  commits       librdkafka: OffsetCommit throughput, --per-request offsets a request (10: issue 49's small
                commits), RF 3, acks=all, --commit-threads consumers with a group each committing synchronously
                for --commit-seconds (after an unmeasured pass), and beside it the same consumers' OffsetFetch
                of those offsets (no write: the path's floor) (bench/vs_commits.py, bench/commit_load.py).
  replay        a new coordinator's load of one offsets partition holding --replay-records commit records:
                its leader gets SIGTERM (controlled shutdown) --replay-moves times; the load's own time from
                Kafka's server.log ("Finished loading offsets and group metadata from ... in T milliseconds
                ..., of which S milliseconds was spent in the scheduler": T - S) and kafkasim's
                coordinator_loaded event; records/s (bench/vs_replay.py).
  idle          no client: the 5 brokers' CPU (/proc utime + stime) over --idle-window s once a topic of each
                --idle-partitions count (RF 3) is created, and each side's largest count over its smallest
                (issue 49's scale row) (bench/vs_idle.py).  Not in the default run: only with --only idle.
  scale         5 brokers, a topic of each --scale-partitions count (RF 3), the controller SIGTERMed: until the
                next controller's failover is done, and the ratio of the counts (bench/vs_scale.py; --only).
  fsyncs        the same SIGTERM at each --fsync-partitions count, the survivors under strace -f: their fsyncs
                by file kind, and the partitions they lead under a new leader epoch (bench/vs_fsyncs.py;
                --only; counted, not timed).
The commits, replay, idle, scale and fsyncs blocks' clusters have a 6 s ZooKeeper session (LONG_SESSION; none waits
for a session to expire), the others 1 s.

Goals (kafkasim / Kafka 2.8.2, same run; issue 46): control-plane latencies <= 1.0x, cluster start <= 0.5x,
memory per broker <= 0.3x, produce throughput >= 0.3x, acks=all p50 <= 1.5x, consume throughput >= 0.5x.
Issue 49's clean coordinator failover: kafkasim's client's first commit <= the new coordinator's load + 10 ms
(median), librdkafka's <= 1.5x kafkasim's client's.  Issue 49's commits, replay, idle and scale paths are
printed beside Kafka 2.8.2 without a goal (issue 49's goals for them are against kafkasim's own baselines:
bench/coordinator.py, bench/scale.py).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import TICK_MS, LoadSampler, warm_zookeeper  # noqa: E402
from bench.vs_commits import commit_throughput  # noqa: E402
from bench.vs_controller import controller_failover  # noqa: E402
from bench.vs_coordinator import coordinator_failovers  # noqa: E402
from bench.vs_fsyncs import controller_sigterm_fsyncs, fsync_report  # noqa: E402
from bench.vs_idle import BROKERS as SCALE_BROKERS, idle_cpu, idle_scale  # noqa: E402
from bench.vs_replay import offsets_replay  # noqa: E402
from bench.vs_scale import controller_sigterm, scale_ratio  # noqa: E402
from bench.vs_sides import Side, launch_until_ready, make_side, wait_isr_whole, write_cluster_yaml  # noqa: E402
from bench.vs_throughput import workloads  # noqa: E402
from util.waiting import wait_for  # noqa: E402
from zk.server import EmbeddedZooKeeper  # noqa: E402

KINDS = ("kafkasim", "kafka")
NAMES = {"kafkasim": "kafkasim", "kafka": "Kafka 2.8.2"}
BLOCKS = ("start", "memory", "controller", "coordinator", "throughput", "commits", "replay", "idle", "scale",
          "fsyncs")
#: what runs without --only (idle and scale start 10,000-partition clusters, fsyncs strace: only when asked)
DEFAULT_BLOCKS = BLOCKS[:-3]
#: every cluster's settings (the rest are both sides' shared defaults, written by reference/properties.py)
BASE = {"zookeeper.session.timeout.ms": 1000, "offsets.topic.replication.factor": 3,
        "auto.leader.rebalance.enable": False}
#: the commits, replay, idle and scale blocks' clusters: a 1 s session expires on this shared machine while a JVM
#: starts or a 10,000-partition topic is created, and none of those blocks waits for a session to expire
LONG_SESSION = {"zookeeper.session.timeout.ms": 6000}
COORDINATOR = {"controlled.shutdown.enable": True, "controlled.shutdown.retry.backoff.ms": 50,
               "group.initial.rebalance.delay.ms": 100, "group.min.session.timeout.ms": 1000}


class Run:
    """One cluster of one side: its start, its measurements, its stop."""

    def __init__(self, work: Path, zk: EmbeddedZooKeeper, kind: str, partitions: int, settings: dict[str, Any],
                 profile: bool = False, brokers: int = 3):
        cfg = write_cluster_yaml(work, zk.connect_string, brokers,
                                 {**BASE, "offsets.topic.num.partitions": partitions, **settings})
        self.side: Side = make_side(kind, cfg)
        self.kind, self.partitions = kind, partitions
        self.profile = profile      # py-spy on each broker from its launch until ready (bench/vs_profile.py)
        self.spies: dict[int, Any] = {}
        self.start_profiles: dict[int, dict] = {}

    def _attach(self) -> None:
        from bench.vs_profile import PySpy
        for b in self.side.ids:
            pid = self.side.pid(b)
            if pid is not None:
                self.spies[b] = PySpy(pid, rate=100).__enter__()

    def __enter__(self) -> "Run":
        la = os.getloadavg()[0]
        try:
            self.start_s = launch_until_ready(self.side, on_launched=self._attach if self.profile else None)
            if self.spies:
                from bench.vs_profile import top
                for b, spy in self.spies.items():
                    spy.__exit__()
                    self.start_profiles[b] = {"broker": b, **top(spy.samples)}
                self.spies.clear()
            self.start_load = la
            wait_isr_whole(self.side, 120)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        for spy in self.spies.values():   # a start that failed: its profilers stop too
            spy.__exit__()
        self.spies.clear()
        try:
            self.side.down()
        finally:
            self.side.remove_files()

    def rss_mb(self) -> list[float]:
        return [(self.side.rss_kb(b) or 0) / 1024 for b in self.side.ids]


def run_round(r: int, work: Path, zk: EmbeddedZooKeeper, a: argparse.Namespace, res: dict[str, list]) -> None:
    order = KINDS if r % 2 == 0 else KINDS[::-1]

    def both(block: str, fn: Callable[[str], None]) -> None:
        for kind in order:
            t = time.monotonic()
            try:
                fn(kind)
            except Exception as e:   # a block that fails is reported and left out; the run goes on
                traceback.print_exc()
                res.setdefault(f"{kind}|failed", []).append({"round": r + 1, "block": block,
                                                              "error": f"{type(e).__name__}: {e}"[:3000]})
            print(f"  round {r + 1}: {block} on {NAMES[kind]} in {time.monotonic() - t:.0f} s "
                  f"(load {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)
            if a.json:
                a.json.write_text(json.dumps(res, indent=2, default=str))

    def add(key: str, kind: str, value: Any) -> None:
        res.setdefault(f"{kind}|{key}", []).append(value)

    def start_sample(run: Run) -> None:
        add(f"start {run.partitions}", run.kind, {"s": run.start_s, "load": run.start_load})

    if {"start", "memory", "throughput"} & set(a.only):
        def throughput(kind: str) -> None:
            with Run(work, zk, kind, 50, {"controlled.shutdown.enable": True}) as run:
                start_sample(run)
                add("rss ready", kind, {"mb": run.rss_mb(), "load": os.getloadavg()[0]})
                if {"throughput", "memory"} & set(a.only):
                    w = workloads(run.side, a.records, a.requests, a.fetch_mb,
                                  profile=a.profile and kind == "kafkasim")
                    add("rss after workload", kind, {"mb": run.rss_mb(), "load": os.getloadavg()[0]})
                    for k, v in w.items():
                        add(k, kind, v)
        both("start, memory and throughput", throughput)
    if "start" in a.only and "controller" not in a.only:
        # the controller block starts a cluster at each --partitions count; without it, start ones of their own
        for n in [n for n in a.partitions if n != 50]:
            def start(kind: str, n: int = n) -> None:
                with Run(work, zk, kind, n, {"controlled.shutdown.enable": False},
                         profile=a.profile and kind == "kafkasim") as run:
                    start_sample(run)
                    for prof in run.start_profiles.values():
                        add(f"start profile {n}", kind, prof)
                    add(f"rss ready {n}", kind, {"mb": run.rss_mb(), "load": os.getloadavg()[0]})
                    loaded = wait_for(run.side.coordinators_loaded_ms, 300, "every coordinator loaded", interval=0.5)
                    add(f"loaded {n}", kind, {"s": loaded / 1000, "load": os.getloadavg()[0]})
                    if kind == "kafkasim":
                        add(f"start stages {n}", kind, {**run.side.start_stages(run.side.launch_mono_ns),
                                                        "ready": run.start_s * 1000})
            both(f"start at {n} partitions", start)
    if "coordinator" in a.only:
        def coordinator(kind: str) -> None:
            with Run(work, zk, kind, 50, COORDINATOR) as run:
                start_sample(run)
                add("rss ready", kind, {"mb": run.rss_mb(), "load": os.getloadavg()[0]})
                for f in coordinator_failovers(run.side, a.coordinator_signals, a.coordinator_runs):
                    add(f"coordinator {f['signal']}", kind, f)
        both("coordinator failover", coordinator)
    if "controller" in a.only:
        for n in a.partitions:
            for sig in a.controller_signals:
                def controller(kind: str, n: int = n, sig: signal.Signals = sig) -> None:
                    with Run(work, zk, kind, n, {"controlled.shutdown.enable": False}) as run:
                        start_sample(run)
                        if n != 50:
                            add(f"rss ready {n}", kind, {"mb": run.rss_mb(), "load": os.getloadavg()[0]})
                        add(f"controller {sig.name} {n}", kind, controller_failover(run.side, sig))
                both(f"controller failover {sig.name} at {n} partitions", controller)
    if "commits" in a.only:
        def commits(kind: str) -> None:
            with Run(work, zk, kind, 50, {"controlled.shutdown.enable": True, **LONG_SESSION}) as run:
                start_sample(run)
                for x in commit_throughput(run.side, a.commit_seconds, a.commit_threads, a.per_request):
                    add(f"commits {x['threads']}", kind, x)
        both("commit throughput", commits)
    if "replay" in a.only:
        def replay(kind: str) -> None:
            with Run(work, zk, kind, 50, {**COORDINATOR, **LONG_SESSION}) as run:
                start_sample(run)
                for x in offsets_replay(run.side, a.replay_records, a.replay_moves):
                    add("replay", kind, x)
        both("coordinator load (replay)", replay)
    if "idle" in a.only:
        for n in a.idle_partitions:
            def idle(kind: str, n: int = n) -> None:
                with Run(work, zk, kind, 50, {"controlled.shutdown.enable": False, **LONG_SESSION},
                         brokers=SCALE_BROKERS) as run:
                    add(f"idle {n}", kind, idle_cpu(run.side, n, a.idle_window))
            both(f"idle CPU at {n} partitions", idle)
    if "scale" in a.only:
        for n in a.scale_partitions:
            def scale(kind: str, n: int = n) -> None:
                with Run(work, zk, kind, 50, {"controlled.shutdown.enable": True, **LONG_SESSION},
                         brokers=SCALE_BROKERS) as run:
                    add(f"scale {n}", kind, controller_sigterm(run.side, n))
            both(f"controller SIGTERM at {n} partitions, {SCALE_BROKERS} brokers", scale)
    if "fsyncs" in a.only:
        for n in a.fsync_partitions:
            def fsyncs(kind: str, n: int = n) -> None:
                with Run(work, zk, kind, 50, {"controlled.shutdown.enable": True, **LONG_SESSION},
                         brokers=SCALE_BROKERS) as run:
                    add(f"fsyncs {n}", kind, controller_sigterm_fsyncs(run.side, n, work))
            both(f"the fsyncs of a controller SIGTERM at {n} partitions, {SCALE_BROKERS} brokers", fsyncs)


# ---------------------------------------------------------------------- the report

def med(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def load_of(rows: list[dict]) -> str:
    m = med([r["load"] for r in rows])
    return "" if m is None else f"{m:.1f}"


def fmt(x: float | None, unit: str) -> str:
    if x is None:
        return "n/a"
    if unit == "ms":
        return f"{x:,.1f} ms"
    if unit == "s":
        return f"{x:.2f} s"
    if unit == "MB":
        return f"{x:.0f} MB"
    if unit == "MB/s":
        return f"{x:,.1f} MB/s"
    if unit == "/s":
        return f"{x:,.0f}/s"
    if unit == "%":
        return f"{x:.1f}%"
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:g}"


def report(res: dict[str, list], a: argparse.Namespace) -> list[dict]:
    """Print the table; returns its rows."""
    rows: list[dict] = []

    def row(name: str, key: str, value: Callable[[dict], float | None], unit: str, goal: str | None,
            ok: Callable[[float], bool] | None) -> None:
        ks, kf = res.get(f"kafkasim|{key}", []), res.get(f"kafka|{key}", [])
        if not ks and not kf:
            return
        vs, vf = med([value(r) for r in ks]), med([value(r) for r in kf])
        ratio = vs / vf if vs is not None and vf and unit else None   # a count (no unit) has no ratio
        verdict = "" if goal is None else "n/a" if ratio is None else "met" if ok(ratio) else "MISSED"
        n = (sum(value(r) is not None for r in ks), sum(value(r) is not None for r in kf))
        rows.append({"figure": name, "kafkasim": vs, "kafka": vf, "ratio": ratio, "goal": goal, "verdict": verdict,
                     "unit": unit, "n": n, "load": (load_of(ks), load_of(kf))})

    le = lambda g: (lambda x: x <= g)   # noqa: E731
    ge = lambda g: (lambda x: x >= g)   # noqa: E731
    for n in sorted({50, *a.partitions}):
        row(f"cluster start until ready, {n} partitions", f"start {n}", lambda r: r["s"], "s", "<= 0.5x", le(0.5))
        row("  (until every offsets partition's coordinator loaded)", f"loaded {n}", lambda r: r["s"], "s", None,
            None)
    row("memory per broker (RSS), after ready", "rss ready", lambda r: med(r["mb"]), "MB", "<= 0.3x", le(0.3))
    row("memory per broker (RSS), after the workload", "rss after workload", lambda r: med(r["mb"]), "MB",
        "<= 0.3x", le(0.3))
    for n in a.partitions:
        if n != 50:
            row(f"memory per broker (RSS), after ready, {n} partitions", f"rss ready {n}", lambda r: med(r["mb"]),
                "MB", "<= 0.3x", le(0.3))
    for sig in ("SIGTERM", "SIGKILL"):
        for n in a.partitions:
            row(f"controller failover, {sig}, {n} partitions: every leader elected", f"controller {sig} {n}",
                lambda r: r["all_leaders"], "ms", "<= 1.0x", le(1.0))
            row("  (the next controller elected)", f"controller {sig} {n}", lambda r: r["controller"], "ms",
                None, None)
    for sig in ("SIGTERM", "SIGKILL"):
        key = f"coordinator {sig}"
        for client in ("librdkafka", "Java"):
            row(f"coordinator failover, {sig}: first commit, {client}", key, lambda r, c=client: r.get(c), "ms",
                "<= 1.0x", le(1.0))
        for client in ("kafkasim client", "kafkasim client, commits only"):
            row(f"  ({client}: kafkasim only)", key, lambda r, c=client: r.get(c), "ms", None, None)
        row("  (the new broker leading the partition: Kafka's log only)", key, lambda r: r.get("leading"), "ms",
            None, None)
        row("  (its load started: until then NOT_COORDINATOR)", key, lambda r: r.get("load_started"), "ms", None,
            None)
        row("  (other loads it started after the election, first)", key, lambda r: r.get("queued"), "", None, None)
        row("  (the new coordinator loaded)", key, lambda r: r.get("loaded"), "ms", None, None)
        row("  (the other ISR member following the new leader)", key, lambda r: r.get("followers"), "ms", None, None)
        row("  (the old coordinator unloaded)", key, lambda r: r.get("unloaded"), "ms", None, None)
        row("  (the partition's new leader in ZooKeeper)", key, lambda r: r.get("elected"), "ms", None, None)
    row("produce, librdkafka, acks=all, 100-byte records", "produce", lambda r: r["records_per_s"], "/s",
        ">= 0.3x", ge(0.3))
    row("acks=all p50, one record, librdkafka", "latency", lambda r: r["p50_ms"], "ms", "<= 1.5x", le(1.5))
    row("  (acks=all p99)", "latency", lambda r: r["p99_ms"], "ms", None, None)
    row("consume, librdkafka, 1,000-byte records", "consume", lambda r: r["mb_per_s"], "MB/s", ">= 0.5x", ge(0.5))
    for th in a.commit_threads:
        row(f"commits, librdkafka, {a.per_request} offsets each, {th} threads: offsets/s", f"commits {th}",
            lambda r: r["offsets_per_s"], "/s", None, None)
        row("  (a commit's mean time: threads / requests/s)", f"commits {th}", lambda r: r.get("commit_ms"), "ms",
            None, None)
        row("  (the same consumers' OffsetFetch, no write: requests/s)", f"commits {th}",
            lambda r: r.get("offset_fetch_requests_per_s"), "/s", None, None)
        row("  (an acks=all produce of one record to the same topic, p50)", f"commits {th}",
            lambda r: r.get("produce_p50_ms"), "ms", None, None)
    row("coordinator load (replay) of one offsets partition: records/s", "replay", lambda r: r["records_per_s"],
        "/s", None, None)
    row("  (the load itself)", "replay", lambda r: r["load_ms"], "ms", None, None)
    row("  (commit records in the partition)", "replay", lambda r: r["records"], "", None, None)
    row("  (filling it, librdkafka, 100 offsets a commit: records/s)", "replay", lambda r: r["fill_records_per_s"],
        "/s", None, None)
    for n in a.idle_partitions:
        row(f"idle CPU of the {SCALE_BROKERS} brokers, {n:,}-partition topic (RF 3), % of a core", f"idle {n}",
            lambda r: r["total_pct"], "%", None, None)
        row("  (the topic's creation until every ISR whole)", f"idle {n}", lambda r: r["create_s"], "s", None, None)
    for n in a.scale_partitions:
        for k, what in (("ready", f"controller SIGTERM, {SCALE_BROKERS} brokers, {n:,}-partition topic: the next "
                                  "controller ready"), ("moved", "  (the last leader moved off it)"),
                        ("elected", "  (the next controller elected)")):
            row(what, f"scale {n}", lambda r, k=k: r[k], "ms", None, None)
    print(f"\nkafkasim beside Kafka 2.8.2: 3 brokers each ({SCALE_BROKERS} in the idle and scale blocks), the same "
          f"cluster.yaml, ZooKeeper tick {TICK_MS} ms; "
          f"medians over {a.rounds} round(s); load = median 1-min load average at the measurements")
    print(f"{'figure':<66} {'kafkasim':>13} {'Kafka 2.8.2':>13} {'ratio':>7}  {'goal':<8} {'':<6} "
          f"{'n':>5}  load (kafkasim / Kafka)")
    for x in rows:
        ratio = "" if x["ratio"] is None else f"{x['ratio']:.2f}x"
        print(f"{x['figure']:<66} {fmt(x['kafkasim'], x['unit']):>13} {fmt(x['kafka'], x['unit']):>13} "
              f"{ratio:>7}  {x['goal'] or '':<8} {x['verdict']:<6} {x['n'][0]:>2}/{x['n'][1]:<2}  "
              f"{x['load'][0]} / {x['load'][1]}")
    idle_scale(res, a.idle_partitions, NAMES)
    scale_ratio(res, a.scale_partitions, NAMES)
    fsync_report(res, a.fsync_partitions, NAMES)
    failover_runs(res)
    clean_failover(res)
    controller_stages(res, a)
    start_stages(res, a)
    profiles(res)
    for kind in KINDS:
        for f in res.get(f"{kind}|failed", []):
            print(f"FAILED on {NAMES[kind]}, round {f['round']}, {f['block']}: {f['error']}")
        for sig in ("SIGTERM", "SIGKILL"):
            for f in res.get(f"{kind}|coordinator {sig}", []):
                if "error" in f:
                    print(f"a {sig} coordinator failover on {NAMES[kind]} failed (left out): {f['error']}")
    goals = [x for x in rows if x["goal"]]
    for verdict in ("met", "MISSED", "n/a"):
        these = [x["figure"].strip() for x in goals if x["verdict"] == verdict]
        if these:
            print(f"goals against Kafka 2.8.2 {verdict}: {len(these)} of {len(goals)}" + (
                "" if verdict == "met" else ": " + "; ".join(these)))
    if goals:
        print("(these count only the goals against Kafka 2.8.2; issue 49's goals are the 'goal:' lines above)")
    return rows


def controller_stages(res: dict[str, list], a: argparse.Namespace) -> None:
    """kafkasim's controller failovers split by its event logs (Kafka's have no such split here)."""
    lines = []
    for sig in ("SIGTERM", "SIGKILL"):
        for n in a.partitions:
            runs = res.get(f"kafkasim|controller {sig} {n}", [])
            if runs and runs[0].get("total_ms") is not None:
                lines.append(f"  {sig}, {n} partitions: " + ", ".join(
                    f"{k} {fmt(med([r.get(k) for r in runs]), 'ms')}"
                    for k in ("session_closing", "load_ms", "decide_ms", "write_ms", "total_ms")))
    if lines:
        print("\nkafkasim's controller failover from its event logs (medians): the old broker closing its ZooKeeper "
              "session (from the signal; SIGKILL: none), then the next controller's own load, decide, write, total:")
        print("\n".join(lines))


def start_stages(res: dict[str, list], a: argparse.Namespace) -> None:
    """Where kafkasim's start went, from its event logs (the start-only clusters of --only start)."""
    for n in a.partitions:
        runs = res.get(f"kafkasim|start stages {n}", [])
        if not runs:
            continue
        print(f"\nkafkasim's start at {n} offsets partitions, ms from the launch of its brokers (medians of {len(runs)}; "
              f"Kafka 2.8.2's median start beside it: {fmt(med([r['s'] for r in res.get(f'kafka|start {n}', [])]), 's')}):")
        for stage in runs[0]:
            print(f"  {stage:<58} {fmt(med([r.get(stage) for r in runs]), 'ms'):>12}")
        for prof in res.get(f"kafkasim|start profile {n}", []):
            print(f"  broker {prof['broker']}, py-spy from its launch until ready, {prof['samples']} samples; share "
                  f"of samples on the stack / at its top:")
            for (pt, ft), (ps, fs) in zip(prof["total"][:10], prof["self"][:10]):
                print(f"    {pt:5.1f}%  {ft[:62]:<62}  {ps:5.1f}%  {fs[:60]}")


def profiles(res: dict[str, list]) -> None:
    for name in ("produce", "latency", "consume"):
        for r in res.get(f"kafkasim|{name}", []):
            prof = r.get("profile")
            if not prof:
                continue
            print(f"\nwhere kafkasim's leader (broker {prof['broker']}) spent the {name} workload, py-spy, "
                  f"{prof['samples']} samples (warm-up included); share of samples on the stack / at its top:")
            for (pt, ft), (ps, fs) in zip(prof["total"][:10], prof["self"][:10]):
                print(f"  {pt:5.1f}%  {ft[:62]:<62}  {ps:5.1f}%  {fs[:60]}")


STAGES = ("unloaded", "leading", "load_started", "loaded", "followers")
CLIENTS = ("kafkasim client", "kafkasim client, commits only", "librdkafka", "Java")


def failover_runs(res: dict[str, list]) -> None:
    """Every coordinator failover, both sides, ms from the signal: where each one's time went."""
    if not any(res.get(f"{kind}|coordinator {sig}") for kind in KINDS for sig in ("SIGTERM", "SIGKILL")):
        return
    print("\ncoordinator failovers, each run, ms from the signal: the old coordinator unloaded / the new broker "
          "leading the partition / its load started (after N other loads) / loaded / the other ISR member "
          "following; then each client's first commit on the new coordinator (kafkasim client / the same, "
          "commits only / librdkafka / Java; - where the side has no such client):")
    for sig in ("SIGTERM", "SIGKILL"):
        for kind in KINDS:
            for r in res.get(f"{kind}|coordinator {sig}", []):
                if "error" in r:
                    continue
                stages = [fmt(r.get(k), "ms") for k in STAGES]
                stages[2] += f" (after {r['queued']})" if r.get("queued") is not None else ""
                clients = [fmt(r.get(c), "ms") if c in r else "-" for c in CLIENTS]
                print(f"  {sig} {NAMES[kind]:<11} load {r['load']:4.1f}: " + " / ".join(stages) + "  |  "
                      + " / ".join(clients))
    for kind in KINDS:
        for sig in ("SIGTERM", "SIGKILL"):
            runs = [r for r in res.get(f"{kind}|coordinator {sig}", []) if r.get("loaded") is not None]
            gaps = {c: med([r[c] - r["loaded"] for r in runs if r.get(c) is not None]) for c in CLIENTS}
            gaps = {c: g for c, g in gaps.items() if g is not None}
            if gaps:
                print(f"  {NAMES[kind]}, {sig}: first commit after the new coordinator loaded (median): "
                      + ", ".join(f"{c} + {g:,.1f} ms" for c, g in gaps.items()))
                # the partition's log grows with every commit of the block's clients, run after run, so its load
                # lasts longer each time, and the rest of the failover (the LeaderAndIsr requests, the follower's
                # first fetches in the new epoch) overlaps it: a longer load leaves less to do after it
                took = med([r["loaded"] - r["load_started"] for r in runs if r.get("load_started") is not None])
                if took is not None:
                    print(f"    (the partition's load itself took {took:,.1f} ms, median; bench/coordinator.py's "
                          f"fresh cluster loads a short log: its gap after the load is the stricter figure)")


def clean_failover(res: dict[str, list]) -> None:
    """Issue 49's clean coordinator failover goals, on kafkasim's side."""
    runs = [r for r in res.get("kafkasim|coordinator SIGTERM", []) if "error" not in r]
    if not runs:
        return
    ks, rd = med([r.get("kafkasim client") for r in runs]), med([r.get("librdkafka") for r in runs])
    print("\nclean coordinator failover on kafkasim (SIGTERM), issue 49's goals:")
    for name in ("kafkasim client", "kafkasim client, commits only"):
        for r in sorted(runs, key=lambda r: r.get(name) or 0)[len(runs) // 2:len(runs) // 2 + 1]:
            print(f"  the median run's {name}, ms from the signal (op, phase, fields):")
            for op in r.get(f"{name} ops", []):
                print(f"    {op}")
    for name in ("kafkasim client", "kafkasim client, commits only"):
        own = [r[name] - r["loaded"] for r in runs if r.get(name) is not None and r.get("loaded") is not None]
        ready = [r[name] - max(r["loaded"], r["followers"]) for r in runs
                 if None not in (r.get(name), r.get("loaded"), r.get("followers"))]
        if own:
            m = statistics.median(own)
            print(f"goal: {name}: first commit <= loaded + 10 ms (median): loaded + {m:.1f} ms "
                  f"{'met' if m <= 10 else 'MISSED'}")
        if ready:
            print(f"  (from the later of the load and the follower following the new leader, which an acks=all "
                  f"commit needs: + {statistics.median(ready):.1f} ms, median)")
    if ks and rd:
        print(f"goal: librdkafka <= 1.5x kafkasim's client: {rd:.1f} / {ks:.1f} ms = {rd / ks:.2f}x "
              f"{'met' if rd <= 1.5 * ks else 'MISSED'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--coordinator-runs", type=int, default=3, help="failovers per signal per round and side")
    ap.add_argument("--partitions", type=int, nargs="+", default=[50, 1000])
    ap.add_argument("--only", nargs="+", choices=BLOCKS, default=list(DEFAULT_BLOCKS),
                    help="blocks to run (default: all but idle, scale and fsyncs)")
    ap.add_argument("--controller-signals", nargs="+", default=["SIGTERM", "SIGKILL"], choices=["SIGTERM", "SIGKILL"])
    ap.add_argument("--coordinator-signals", nargs="+", default=["SIGTERM", "SIGKILL"],
                    choices=["SIGTERM", "SIGKILL"])
    ap.add_argument("--records", type=int, default=200_000, help="records for the produce throughput")
    ap.add_argument("--requests", type=int, default=1000, help="single-record requests for the acks=all p50")
    ap.add_argument("--fetch-mb", type=int, default=200, help="MB the consumer reads")
    ap.add_argument("--commit-seconds", type=float, default=10.0, help="each commit throughput window")
    ap.add_argument("--commit-threads", type=int, nargs="+", default=[8], help="committing consumers (a group each)")
    ap.add_argument("--per-request", type=int, default=10, help="offsets per commit request")
    ap.add_argument("--replay-records", type=int, default=1_000_000, help="commit records in the loaded partition")
    ap.add_argument("--replay-moves", type=int, default=2, help="loads per round and side")
    ap.add_argument("--idle-partitions", type=int, nargs="+", default=[1000, 10_000])
    ap.add_argument("--idle-window", type=float, default=20.0, help="seconds of idle CPU measured")
    ap.add_argument("--scale-partitions", type=int, nargs="+", default=[1000, 10_000],
                    help="the scale block's topic sizes (5 brokers, RF 3)")
    ap.add_argument("--fsync-partitions", type=int, nargs="+", default=[1000],
                    help="the fsyncs block's topic sizes (5 brokers, RF 3)")
    ap.add_argument("--warmup-rounds", type=int, default=150, help="ZooKeeper warm-up (bench/common.py)")
    ap.add_argument("--profile", action="store_true",
                    help="sample kafkasim's partition leader with py-spy during each throughput workload, and "
                         "kafkasim's brokers from their launch until ready in --only start's own clusters "
                         "(pip install py-spy), and print where their time goes")
    ap.add_argument("--json", type=Path, help="write the raw figures here")
    ap.add_argument("--quick", action="store_true", help="1 round, 1 failover, 50,000 records, 300 requests, 50 MB, "
                    "3 s of commits, 100,000 records replayed once, 10 s of idle CPU")
    a = ap.parse_args()
    if a.profile:
        from bench.vs_profile import available
        if not available():
            ap.error("--profile needs py-spy: pip install py-spy")
    if a.quick:
        a.rounds, a.coordinator_runs, a.records, a.requests, a.fetch_mb = 1, 1, 50_000, 300, 50
        a.commit_seconds, a.replay_records, a.replay_moves, a.idle_window = 3.0, 100_000, 1, 10.0
    a.controller_signals = [signal.Signals[s] for s in a.controller_signals]
    a.coordinator_signals = [signal.Signals[s] for s in a.coordinator_signals]
    res: dict[str, list] = {}
    t0 = time.monotonic()
    loads = LoadSampler().start()
    with tempfile.TemporaryDirectory(prefix="kafkasim-vs-") as tmp:
        zk = EmbeddedZooKeeper(Path(tmp) / "zk", tick_ms=TICK_MS)
        zk.start(timeout=60)
        try:
            if a.warmup_rounds:
                took = warm_zookeeper(zk, max(a.partitions), a.warmup_rounds)
                print(f"  ZooKeeper warmed up in {took:.1f} s", file=sys.stderr)
            for r in range(a.rounds):
                run_round(r, Path(tmp), zk, a, res)
                if a.json:
                    a.json.write_text(json.dumps(res, indent=2, default=str))
        except KeyboardInterrupt:   # what was measured so far is still reported
            print("interrupted: the figures so far", file=sys.stderr)
        finally:
            zk.stop()
    loads.stop()
    print(f"\n(the run took {(time.monotonic() - t0) / 60:.1f} min; {loads.summary()})")
    rows = report(res, a)
    if a.json:
        a.json.write_text(json.dumps({"results": res, "table": rows}, indent=2, default=str))


if __name__ == "__main__":
    main()
