"""The Spark analysis pipeline on synthetic runs: wall time, ops/s and rows/s, against the floor of reading the data.

    python -m bench.analysis [--sizes 1000000,10000000] [--master local[2]] [--workdir DIR] [--seed S]
                             [--plant KIND]... [--many R] [--json]
    python -m bench.analysis --small RUN [--repeat N]

The goals (issue 35), each a ratio against a baseline measured in the same benchmark run:

  large      at each size, the whole pipeline against the floor of parsing and pairing (below), same JVM:
             goal at most 2.0x at 10M operations
  many       (``--many R``) R runs of size/R operations each, analysed as one dataset (a directory of runs),
             against the one run of the same size, same JVM: goal at most 1.5x (1,000 runs of 10k)
  small      (``--small RUN``) ``kafkasim analyze RUN`` in a fresh process against a fresh process that starts
             the same Spark session and runs one trivial job over the same files (reads and counts the
             history and event lines), alternated ``--repeat`` times: goal at most 2.5x on a 30-s chaos run

For each size (client operations of one synthetic run, ``analysis.synthetic``):

  generate   the run, cached under ``--workdir`` (default ``/tmp/kafkasim-bench-analysis``) as
             ``ops-<size>-seed<S>[-<plants>]``; reused when its ``bench.json`` names the same
             parameters and generator version (the time is then the one recorded at generation)
  baseline   ``spark.read.text(<history files>).count()`` then the same for the event logs: the
             floor of reading the same lines, in the same session
  floor      the history parsed (``analysis.load.HISTORY_DDL``) and its invokes paired with their
             completions (``analysis.ops_tables``), into Spark's ``noop`` sink: the work every table and
             checker depends on (``--no-parse-floor`` skips it)
  pipeline   ``analysis.main.run([run], master, out)`` (every table, the checkers, the report), and
             the seconds of each of its steps

The profile (issue 49; ``--no-profile`` leaves it out): for the floor and the pipeline, the JVM's CPU seconds by
kind of thread (the driver's planning on py4j's threads, tasks, JIT, GC, other), and the pipeline's Spark jobs,
stages and task seconds by step, from Spark's event log (``bench.spark_profile``); ``--small`` prints the same
for its fresh processes.

Rows are history lines plus event-log lines.  Besides wall time, the CPU seconds of the Spark JVM
(driver and executors, in local mode) and its Python workers are reported (from /proc): on a shared
machine the wall time depends on the neighbours, the CPU time much less; with local[2] the wall time
cannot go below half of it.  The JVM is started before the timings (one session for the whole bench), so
they exclude its start-up (but for ``--small``, which times fresh processes).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any, Self

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from analysis import synthetic
from bench.spark_profile import ThreadCpu, format_machine, format_steps, format_threads, machine, newest_log, steps

GOAL_OPS = 10_000_000
GOAL_LARGE, GOAL_MANY, GOAL_SMALL = 2.0, 1.5, 2.5


def run_dir(workdir: Path, size: int, seed: int, plant: list[str]) -> Path:
    suffix = f"-{'+'.join(sorted(plant))}" if plant else ""
    return workdir / f"ops-{size}-seed{seed}{suffix}"


def ensure_run(workdir: Path, size: int, seed: int, plant: list[str], jobs: int | None) -> tuple[Path, dict]:
    """The cached synthetic run for these parameters, generated if missing or stale."""
    d = run_dir(workdir, size, seed, plant)
    params = {"ops": size, "seed": seed, "plant": sorted(plant), "version": synthetic.FORMAT_VERSION}
    marker = d / "bench.json"
    if marker.exists():
        try:
            doc = json.loads(marker.read_text())
            if doc.get("params") == params and (doc.get("run") and Path(doc["run"], "results.json").exists()):
                doc["cached"] = True
                return Path(doc["run"]), doc
        except ValueError:
            pass
    if d.exists():
        shutil.rmtree(d)
    t = time.monotonic()
    run, = synthetic.generate(d, size, 1, plant, seed, jobs=jobs)
    gen_s = time.monotonic() - t
    res = json.loads((run / "results.json").read_text())
    lines = res["synthetic"]["history_lines"]
    ev_lines = sum(_count_lines(p) for p in sorted((run / "cluster" / "events").glob("broker-*.jsonl")))
    hist = run / "history.jsonl"
    size_b = sum(p.stat().st_size for p in (hist.glob("*.jsonl") if hist.is_dir() else [hist]))
    doc = {"params": params, "run": str(run), "ops": res["ops"]["invoked"], "history_lines": lines,
           "event_lines": ev_lines, "history_bytes": size_b, "generate_s": round(gen_s, 2),
           "generate_lines_per_s": round(lines / gen_s), "expected": res["expected"], "cached": False}
    marker.write_text(json.dumps(doc, indent=1) + "\n")
    return run, doc


def _count_lines(path: Path) -> int:
    n = 0
    with open(path, "rb") as f:
        while True:
            buf = f.read(1 << 24)
            if not buf:
                return n
            n += buf.count(b"\n")


def _tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used so far by process ``pid`` and its descendants (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[int(d.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        total += stats.get(p, (0, 0.0))[1]
        todo.extend(c for c, (pp, _cpu) in stats.items() if pp == p)
    return total


class CpuClock:
    """Wall time, and CPU time of the Spark JVM (driver and executors in local mode) and its Python workers."""

    def __init__(self, spark) -> None:
        from py4j.protocol import Py4JError
        try:
            self.pid: int | None = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
        except (Py4JError, AttributeError, ValueError):
            self.pid = None

    def __enter__(self) -> Self:
        self.t = time.monotonic()
        self.epoch_ms = int(time.time() * 1000)
        self.threads = ThreadCpu(self.pid)
        self.split0 = self.threads.sample()
        self.c = _tree_cpu_s(self.pid) if self.pid else 0.0
        # the JVM's threads read every second: a thread that ends keeps its last reading
        self._done = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        return self

    def _sample(self) -> None:
        while not self._done.wait(1.0):
            self.threads.sample()

    def __exit__(self, *exc: object) -> None:
        self.wall = time.monotonic() - self.t
        self._done.set()
        self._sampler.join()
        self.cpu = (_tree_cpu_s(self.pid) - self.c) if self.pid else None
        # the JVM's CPU by kind of thread (planning, tasks, JIT, GC, other: bench.spark_profile)
        self.split = ThreadCpu.since(self.split0, self.threads.sample())
        if self.cpu is not None:   # the JVM's child processes (Python workers: the segments' decoder)
            self.split["workers"] = round(max(0.0, self.cpu - sum(self.split.values())), 1)


def history_files(run: Path) -> list[str]:
    h = run / "history.jsonl"
    return [str(h / "*.jsonl")] if h.is_dir() else [str(h)]


def bench_size(spark, master: str, run: Path, gen: dict, out_root: Path,
               parse_floor: bool = True, event_dir: Path | None = None) -> dict[str, Any]:
    rows = gen["history_lines"] + gen["event_lines"]
    # the floor: read the same lines and count them
    with CpuClock(spark) as base:
        n_hist = spark.read.text(history_files(run)).count()
        n_ev = spark.read.text(str(run / "cluster" / "events" / "broker-*.jsonl")).count()
    base_s = base.wall
    if n_hist != gen["history_lines"] or n_ev != gen["event_lines"]:
        raise SystemExit(f"{run}: Spark read {n_hist} history and {n_ev} event lines, expected "
                         f"{gen['history_lines']} and {gen['event_lines']}")
    floor_s = floor_cpu = floor_split = None
    if parse_floor:
        # the work every table and checker stands on: parse each history line (HISTORY_DDL) and pair each
        # invoke with its completion (one shuffle), into a sink that writes nothing
        from analysis.load import read_history
        from analysis.ops_tables import paired_rows
        with CpuClock(spark) as fl:
            lines = read_history(spark, {run.name: str(run)})
            paired_rows(lines).write.format("noop").mode("overwrite").save()
        floor_s, floor_cpu = round(fl.wall, 2), None if fl.cpu is None else round(fl.cpu, 1)
        floor_split = fl.split
    floor_load = round(os.getloadavg()[0], 1)
    out = out_root / run.name
    if out.exists():
        shutil.rmtree(out)
    result: dict[str, Any] = {"run": str(run), "ops": gen["ops"], "history_lines": gen["history_lines"],
                              "event_lines": gen["event_lines"], "rows": rows, "history_bytes": gen["history_bytes"],
                              "baseline_s": round(base_s, 2), "baseline_rows_per_s": round(rows / base_s),
                              "baseline_cpu_s": None if base.cpu is None else round(base.cpu, 1),
                              "parse_pair_s": floor_s, "parse_pair_cpu_s": floor_cpu,
                              "parse_pair_load_avg": floor_load}
    from analysis.main import run as pipeline_run
    with CpuClock(spark) as clock:
        summary = pipeline_run([str(run)], master, str(out))
    result["pipeline"] = "analysis.main.run"
    result["cpu_split"] = {"parse_pair": floor_split, "pipeline": clock.split}
    if event_dir is not None and (log := newest_log(event_dir)) is not None:
        result["profile"] = steps(log, since_ms=clock.epoch_ms)
    result["seconds"] = summary["seconds"]
    result["summary"] = _small(summary)
    wall = clock.wall
    result.update(wall_s=round(wall, 2), ops_per_s=round(gen["ops"] / wall), rows_per_s=round(rows / wall),
                  vs_baseline=round(wall / base_s, 2), cpu_s=None if clock.cpu is None else round(clock.cpu, 1),
                  load_avg=round(os.getloadavg()[0], 1))
    return result


def bench_many(spark, master: str, workdir: Path, size: int, runs: int, seed: int, jobs: int | None) -> dict:
    """``runs`` synthetic runs of ``size // runs`` operations (cached under ``workdir``), analysed as one directory."""
    d = workdir / f"many-{size}-x{runs}-seed{seed}"
    params = {"ops": size, "runs": runs, "seed": seed, "version": synthetic.FORMAT_VERSION}
    marker = d / "bench.json"
    if not (marker.exists() and json.loads(marker.read_text()).get("params") == params):
        shutil.rmtree(d, ignore_errors=True)
        t = time.monotonic()
        synthetic.generate(d / "runs", size, runs, [], seed, jobs=jobs)
        marker.write_text(json.dumps({"params": params, "generate_s": round(time.monotonic() - t, 1)}) + "\n")
    out = workdir / "out" / d.name
    shutil.rmtree(out, ignore_errors=True)
    from analysis.main import run as pipeline_run
    with CpuClock(spark) as clock:
        summary = pipeline_run([str(d / "runs")], master, str(out))
    return {"runs": runs, "ops_per_run": size // runs, "wall_s": round(clock.wall, 2),
            "cpu_s": None if clock.cpu is None else round(clock.cpu, 1), "seconds": summary["seconds"],
            "load_avg": round(os.getloadavg()[0], 1)}


def _small(x: Any, depth: int = 0) -> Any:
    """A summary dict cut to something printable."""
    if isinstance(x, dict):
        return {k: _small(v, depth + 1) for k, v in list(x.items())[:30]}
    if isinstance(x, (list, tuple)):
        return [_small(v, depth + 1) for v in x[:10]] + ([f"... {len(x) - 10} more"] if len(x) > 10 else [])
    if isinstance(x, (int, float, bool, str)) or x is None:
        return x if not isinstance(x, str) or len(x) < 300 else x[:300] + "..."
    return str(x)[:300]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.analysis", description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000000,10000000", help="client operations per run, comma-separated")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--workdir", default="/tmp/kafkasim-bench-analysis")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plant", action="append", default=[], metavar="KIND")
    ap.add_argument("--jobs", type=int, default=None, help="generator processes (default: the cores)")
    ap.add_argument("--no-parse-floor", action="store_true",
                    help="skip the second floor: parse the history and pair its operations, writing nothing")
    ap.add_argument("--no-profile", action="store_true",
                    help="no Spark event log, so no per-step profile of the pipeline's jobs")
    ap.add_argument("--many", type=int, default=0, metavar="R",
                    help="also analyse R runs of size/R operations each as one dataset (goal many)")
    ap.add_argument("--small", metavar="RUN", help="only the small-run goal: this run directory, fresh processes")
    ap.add_argument("--repeat", type=int, default=3, help="--small: alternations of baseline and analysis")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    a = ap.parse_args(argv)
    if a.small:
        from bench.analysis_small import bench_small
        res = bench_small(Path(a.small), Path(a.workdir), a.repeat, GOAL_SMALL)
        if a.json:
            print(json.dumps(res, indent=1))
        return 0
    sizes = [int(s.replace("_", "")) for s in a.sizes.split(",") if s.strip()]
    workdir = Path(a.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    gens = []
    for size in sizes:
        run, gen = ensure_run(workdir, size, a.seed, a.plant, a.jobs)
        how = "cached" if gen.get("cached") else "generated"
        print(f"[{size:,} ops] {how}: {run} ({gen['ops']:,} ops, {gen['history_lines']:,} history lines, "
              f"{gen['event_lines']:,} event lines, {gen['history_bytes'] / 1e9:.2f} GB; generation "
              f"{gen['generate_s']} s = {gen['generate_lines_per_s']:,} lines/s)", flush=True)
        gens.append((size, run, gen))
    from analysis.spark import session
    event_dir = None
    if not a.no_profile:   # Spark's event log, for the profile printed per size (one JSON line per task)
        event_dir = Path(os.environ.setdefault("KAFKASIM_SPARK_EVENT_LOG", str(workdir / "eventlog")))
        event_dir.mkdir(parents=True, exist_ok=True)
    t = time.monotonic()
    spark = session(a.master, app="kafkasim-bench-analysis")
    print(f"Spark session {a.master}: {time.monotonic() - t:.1f} s (not counted below)", flush=True)
    box = machine(a.master)   # the figures below are this machine's (bench/RESULTS.md: compare within one session)
    print(format_machine(box), flush=True)
    results = []
    for size, run, gen in gens:
        r = bench_size(spark, a.master, run, gen, workdir / "out", parse_floor=not a.no_parse_floor,
                       event_dir=event_dir)
        r.update(size=size, generate_s=gen["generate_s"], generate_lines_per_s=gen["generate_lines_per_s"], machine=box)
        results.append(r)
        goal = ""
        print(f"[{size:,} ops] baseline read+count {r['baseline_s']:7.1f} s ({r['baseline_rows_per_s']:,} rows/s, "
              f"{r['baseline_cpu_s']} CPU s)  pipeline {r['wall_s']:7.1f} s = {r['ops_per_s']:,} ops/s, "
              f"{r['rows_per_s']:,} rows/s, {r['vs_baseline']}x the baseline, {r['cpu_s']} CPU s "
              f"(load average {r['load_avg']}){goal}", flush=True)
        if r["parse_pair_s"] is not None:
            r["vs_parse_pair"] = round(r["wall_s"] / r["parse_pair_s"], 2)
            r["vs_parse_pair_cpu"] = (round(r["cpu_s"] / r["parse_pair_cpu_s"], 2)
                                      if r["cpu_s"] and r["parse_pair_cpu_s"] else None)
            print(f"    floor of parsing the history and pairing its operations (no output): {r['parse_pair_s']} s "
                  f"({r['parse_pair_cpu_s']} CPU s; load average {r['parse_pair_load_avg']})", flush=True)
            print(f"    goal large: pipeline {r['wall_s']} s ({r['cpu_s']} CPU s) / parse-and-pair {r['parse_pair_s']} s "
                  f"({r['parse_pair_cpu_s']} CPU s) = {r['vs_parse_pair']}x in wall time, {r['vs_parse_pair_cpu']}x in "
                  f"CPU seconds (goal <= {GOAL_LARGE}x at "
                  f"{GOAL_OPS:,} ops{'' if size >= GOAL_OPS else '; measured at ' + format(size, ',')})", flush=True)
        if a.many:
            m = bench_many(spark, a.master, workdir, size, a.many, a.seed, a.jobs)
            r["many"] = m
            m["vs_one_run"] = round(m["wall_s"] / r["wall_s"], 2)
            m["vs_one_run_cpu"] = round(m["cpu_s"] / r["cpu_s"], 2) if m["cpu_s"] and r["cpu_s"] else None
            print(f"    goal many: {a.many} runs of {size // a.many:,} ops as one dataset {m['wall_s']} s "
                  f"({m['cpu_s']} CPU s; listing {m['seconds'].get('listing', '?')} s; load average "
                  f"{m['load_avg']}) / one run of {size:,} ops {r['wall_s']} s ({r['cpu_s']} CPU s; load average "
                  f"{r['load_avg']}), same JVM = {m['vs_one_run']}x in wall time, {m['vs_one_run_cpu']}x in CPU "
                  f"seconds (goal <= {GOAL_MANY}x for 1,000 runs of 10k)", flush=True)
        print("    steps (s): " + ", ".join(f"{k} {v}" for k, v in r["seconds"].items()), flush=True)
        # the profile (issue 49): the JVM's CPU by kind of thread, and the pipeline's Spark jobs by step
        for name, sp in r["cpu_split"].items():
            if sp is not None:
                print(f"    JVM CPU s of {name}: {format_threads(sp)}", flush=True)
        if "profile" in r:
            print("    the pipeline's " + "\n    ".join(format_steps(r["profile"], top=16)), flush=True)
        if "many" in r:
            print(f"    steps of the {a.many} runs (s): " + ", ".join(f"{k} {v}" for k, v in r["many"]["seconds"].items()),
                  flush=True)
    (workdir / "bench-analysis.json").write_text(json.dumps(results, indent=1) + "\n")
    if a.json:
        print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
