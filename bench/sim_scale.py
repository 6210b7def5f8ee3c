"""Clusters bigger than a machine: the simulator's cost from 3 to 100 brokers, and the failover stages at scale.

    python -m bench.sim_scale [--brokers 3,10,30,100] [--partitions-per-broker 1000] [--groups-per-broker 100]
                              [--duration 40] [--timeout 3600]

Each size is one simulated run of ``sim/scale.py``'s scenario (``partitions-per-broker`` partitions of a topic
with no traffic per broker, three replicas each; ``groups-per-broker`` one-member groups per broker committing
every 5 s; the controller killed at 10 s, the coordinator of ``g1`` at 25 s, each back 8 s later), in a process
of its own so that its peak memory is its own.  Invariants are checked at every step; the end-of-run checkers
are not run (minutes at 100 brokers).  Printed per size: wall time, CPU time, peak RSS, simulated events (world
steps), the CPU cost per event (wall time on a shared machine is mostly its load) and its ratio to the smallest
size of the same run (the same-run baseline); then, per
size, the failover stages in simulated time:

* the controller failover: the kill to the new controller's election (its ZooKeeper session expiring is the
  detection), the election to its context loaded (``controller_failover_done``'s ``load_ms``) and to every
  decision written (``total_ms``), and the partitions it loaded;
* the coordinator failover of ``g1``'s broker, over every group it hit: detect, elect, load and first
  commit (judge/timeline.py's stages), medians and maxima;

beside Kafka 2.8's published costs of about 2 ms per partition for a new controller's metadata load and
about 5 ms per partition for a leader election.  The simulator's ZooKeeper calls take no simulated time
(docs/simulation.md, "Simplifications"), so its load and election stages show the protocol's waits
(timeouts, round trips over the simulated network), not ZooKeeper's per-partition cost.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

KAFKA_LOAD_MS_PER_PARTITION = 2.0       # Kafka 2.8, a new controller's metadata load (published estimate)
KAFKA_ELECTION_MS_PER_PARTITION = 5.0   # Kafka 2.8, a leader election through ZooKeeper (published estimate)


def _stage(rows: list[dict], key: str) -> tuple[float | None, float | None]:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return (round(statistics.median(vals), 1), round(max(vals), 1)) if vals else (None, None)


def one(brokers: int, ppb: int, gpb: int, duration_s: float) -> dict:
    """One size, in this process: its figures as a dict."""
    from sim.run import SimRun
    from sim.scale import Scale, options

    s = Scale(brokers=brokers, partitions_per_broker=ppb, groups_per_broker=gpb, duration_s=duration_s)
    t0, c0 = time.perf_counter(), time.process_time()
    run = SimRun(options(s))
    stop = threading.Event()

    def progress() -> None:   # where the run is, every minute (the parent shows the last line on a timeout)
        while not stop.wait(60.0):
            print(f"progress: {time.perf_counter() - t0:.0f} wall s, {time.process_time() - c0:.0f} CPU s, "
                  f"{run.world.now_ms / 1000:.1f} simulated s, {run.world.steps:,} events, "
                  f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB", file=sys.stderr, flush=True)

    threading.Thread(target=progress, daemon=True).start()
    r = run.run()
    stop.set()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    res = r.results
    kills = sorted((h for h in r.history if h.get("process") == "nemesis" and h.get("f") == "kill"
                    and h["value"].get("phase") == "start"), key=lambda h: h["time"])
    ctl: dict = {}
    if kills:
        t_kill = kills[0]["time"]
        elected = [e for e in r.events if e["type"] == "controller_elected" and e["mono_ns"] > t_kill]
        done = [e for e in r.events if e["type"] == "controller_failover_done" and e["mono_ns"] > t_kill]
        if elected:
            ctl["detect_and_elect_ms"] = round((elected[0]["mono_ns"] - t_kill) / 1e6, 1)
        if done:
            d = done[0]
            ctl.update(load_ms=d["load_ms"], total_ms=d["total_ms"], partitions=d["partitions"],
                       states_written=d["states_written"],
                       done_after_kill_ms=round((d["mono_ns"] - t_kill) / 1e6, 1))
    coord_rows = [row for row in res["timeline"] if row.get("fault") == 1 and row.get("group") is not None]
    coord = {k: _stage(coord_rows, k) for k in ("detect_ms", "elect_ms", "load_ms", "first_commit_ms")}
    coord["groups"] = len(coord_rows)
    inv = res.get("invariants") or {}
    return {"brokers": brokers, "partitions": s.partitions, "groups": s.groups, "verdict": res["verdict"],
            "anomalies": [a["kind"] for a in res["checks"]["anomalies"]][:5], "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
            "rss_mb": round(rss_mb), "steps": res["steps"], "simulated_ms": res["simulated_ms"],
            "invariant_checks": inv.get("checks"), "controller": ctl, "coordinator": coord}


def _row(fig: dict, base_us: float | None) -> str:
    us = fig["cpu_s"] / fig["steps"] * 1e6
    ratio = f"{us / base_us:.2f}x" if base_us else "1.00x"
    return (f"{fig['brokers']:>7} {fig['partitions']:>10,} {fig['groups']:>7,} {fig['wall_s']:>9.1f} "
            f"{fig['cpu_s']:>8.1f} {fig['rss_mb']:>8,} {fig['steps']:>11,} {us:>9.1f} {ratio:>7}  {fig['verdict']}"
            + (f" {fig['anomalies']}" if fig["anomalies"] else ""))


def _failovers(fig: dict) -> str:
    c, g = fig["controller"], fig["coordinator"]
    parts = c.get("partitions", fig["partitions"])
    lines = [f"{fig['brokers']} brokers, {fig['partitions']:,} partitions, {fig['groups']:,} groups "
             f"(simulated ms):",
             f"  controller: kill -> new controller elected {c.get('detect_and_elect_ms')}; its load "
             f"{c.get('load_ms')} ({parts:,} partitions; Kafka 2.8 at ~{KAFKA_LOAD_MS_PER_PARTITION:g} ms per "
             f"partition: ~{parts * KAFKA_LOAD_MS_PER_PARTITION / 1000:,.0f} s); every decision written "
             f"{c.get('total_ms')} after it ({c.get('states_written')} states; Kafka 2.8 at "
             f"~{KAFKA_ELECTION_MS_PER_PARTITION:g} ms per election of the dead broker's "
             f"~{fig['partitions'] // fig['brokers']:,} leaderships: "
             f"~{fig['partitions'] // fig['brokers'] * KAFKA_ELECTION_MS_PER_PARTITION / 1000:,.1f} s)",
             f"  coordinator ({g['groups']} groups hit): median/max detect {g['detect_ms'][0]}/{g['detect_ms'][1]}, "
             f"elect {g['elect_ms'][0]}/{g['elect_ms'][1]}, load {g['load_ms'][0]}/{g['load_ms'][1]}, "
             f"first commit {g['first_commit_ms'][0]}/{g['first_commit_ms'][1]}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.sim_scale", description=__doc__.split("\n")[0])
    ap.add_argument("--brokers", default="3,10,30,100", help="comma-separated cluster sizes")
    ap.add_argument("--partitions-per-broker", type=int, default=1000)
    ap.add_argument("--groups-per-broker", type=int, default=100)
    ap.add_argument("--duration", type=float, default=40.0, help="simulated seconds of each run")
    ap.add_argument("--timeout", type=float, default=3600.0, help="wall seconds a size may take")
    ap.add_argument("--base-us", type=float, default=None, help="the CPU us per event to give ratios against "
                    "(a smallest size measured by another run; default: this run's first size)")
    ap.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)   # a child: one size, JSON out
    args = ap.parse_args(argv)
    if args.one is not None:
        print(json.dumps(one(args.one, args.partitions_per_broker, args.groups_per_broker, args.duration)))
        return 0
    sizes = [int(x) for x in args.brokers.split(",") if x.strip()]
    print(f"sim scale: {args.partitions_per_broker} partitions and {args.groups_per_broker} groups per broker, "
          f"{args.duration:g} simulated s, invariants at every step; load average {os.getloadavg()[0]:.1f}")
    print(f"{'brokers':>7} {'partitions':>10} {'groups':>7} {'wall s':>9} {'CPU s':>8} {'RSS MB':>8} {'events':>11} "
          f"{'CPU us/ev':>9} {'ratio':>7}  verdict")
    figs: list[dict] = []
    base_us = args.base_us
    for n in sizes:
        cmd = [sys.executable, "-m", "bench.sim_scale", "--one", str(n),
               "--partitions-per-broker", str(args.partitions_per_broker),
               "--groups-per-broker", str(args.groups_per_broker), "--duration", str(args.duration)]
        try:
            out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired as e:
            err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
            last = [ln for ln in err.splitlines() if ln.startswith("progress:")]
            print(f"{n:>7} did not finish within {args.timeout:g} wall s" + (f"; {last[-1]}" if last else ""))
            break
        if out.returncode != 0:
            print(f"{n:>7} failed: {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else out.returncode}")
            break
        fig = json.loads(out.stdout.strip().splitlines()[-1])
        figs.append(fig)
        print(_row(fig, base_us), flush=True)
        if base_us is None:
            base_us = fig["cpu_s"] / fig["steps"] * 1e6
    print()
    for fig in figs:
        print(_failovers(fig))
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
