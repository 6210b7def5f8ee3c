"""The small-run goal of bench/analysis.py: ``kafkasim analyze RUN`` in a fresh process against a fresh
process that starts the same Spark session (``analysis.spark.session``, local[*], with the same settings for the
run's size) and runs one trivial job
over the same files (the run's history and event logs read as text and counted), alternated.  A third fresh
process per pass measures the floor of this design (``FLOOR``): the same session, the inputs parsed and kept as
the analysis keeps them, and as many tables written as the analysis writes, each a plain projection of an input:
what the analysis would cost if none of its tables, checkers or report took any work of its own.
The three end alike, as ``kafkasim analyze`` ends: the process exits without stopping Spark (its JVM then stops
on its own, waited for before the next command and not counted).  Until 2026-12-01 the floor and the baseline
stopped their sessions inside the time measured, 0.1-1.0 s that the analysis never spends (bench/RESULTS.md).

Each side's wall time and CPU seconds (the process and its descendants, the Spark JVM included, sampled from
/proc every 0.2 s: a process's last 0.2 s may be missed).  The analysis prints its steps' seconds
(``KAFKASIM_TIMES``) and its Spark jobs are counted from Spark's event log (``spark.eventLog.enabled``).
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench.spark_profile import KINDS, ThreadCpu, format_machine, format_steps, machine, newest_log, steps

ROOT = Path(__file__).resolve().parent.parent

TRIVIAL = r"""
import sys
from analysis.spark import session
from analysis.load import expand
from analysis.files import scan_runs
files = scan_runs(expand([sys.argv[1]]))
spark = session(None, input_bytes=files.input_bytes)   # the analysis' own session, sized alike
paths = [f for fs in list(files.history.values()) + list(files.events.values()) for f in fs]
print(spark.read.text(paths).count())
"""

# The floor of any analysis that writes the pipeline's tables with Spark: the same session and settings, the
# inputs read and parsed once and kept as the analysis keeps them, then as many tables written as the analysis
# writes, each a plain projection of one input (no pairing, no checker, no report); the event lines and segments
# kept as the analysis keeps them (``kept(..., many=True)``: local checkpoints, not local relations)
FLOOR = r"""
import sys
from pathlib import Path
from analysis.spark import session, sized_to, adaptive_off, kept
from analysis.load import expand, load_runs
from analysis.files import scan_runs
from analysis.main import TABLES, write_table
runs = expand([sys.argv[1]])
files = scan_runs(runs)
spark = session(None, input_bytes=files.input_bytes)
out = Path(sys.argv[2])
with adaptive_off(spark), sized_to(spark, files.input_bytes):
    inputs = load_runs(spark, list(runs.values()), files=files)
    sources = [inputs.ops, kept(inputs.parsed_events(), many=True), kept(inputs.segments, many=True)]
    for i, name in enumerate(TABLES):
        write_table(spark, sources[i % len(sources)], out / name)
print(len(TABLES))
"""


def _cpu_of(pids: set[int]) -> dict[int, float]:
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in pids:
        try:
            f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[pid] = (int(f[11]) + int(f[12])) / tick
    return out


def _children(pid: int) -> set[int]:
    found, todo = {pid}, [pid]
    parents: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(d.name))
    while todo:
        for c in parents.get(todo.pop(), []):
            if c not in found:
                found.add(c)
                todo.append(c)
    return found


def timed(cmd: list[str], env: dict[str, str], log: Path,
          split: dict[str, float] | None = None) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds of the process tree, exit code.  ``split``, when given, gets the tree's CPU
    seconds by kind: the JVM's threads (``bench.spark_profile.KINDS``) and ``python`` (every other process)."""
    seen: dict[int, float] = {}
    jvms: dict[int, ThreadCpu] = {}
    t = time.monotonic()
    with open(log, "w") as out:
        p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                tree = _children(p.pid) | set(seen)
                seen.update(_cpu_of(tree))
                if split is not None:
                    for pid in tree - set(jvms):
                        if _comm(pid) == "java":
                            jvms[pid] = ThreadCpu(pid)
                    for jvm in jvms.values():
                        jvm.sample()
                done.wait(0.2)

        th = threading.Thread(target=sample, daemon=True)
        th.start()
        rc = p.wait()
        wall = time.monotonic() - t
        done.set()
        th.join()
        # its JVM stops once it exits (PySpark's gateway ends on the closed pipe): waited for, not counted, so
        # that it neither overlaps the next command nor misses its own event log's end
        _gone(set(seen) - {p.pid})
    if split is not None:
        split.update(dict.fromkeys(KINDS, 0.0))
        for jvm in jvms.values():
            for k, v in jvm.sample().items():
                split[k] += v
        split["python"] = sum(c for pid, c in seen.items() if pid not in jvms)
        split.update({k: round(v, 1) for k, v in split.items()})
    return wall, sum(seen.values()), rc


def _gone(pids: set[int], limit_s: float = 60.0) -> None:
    """Wait until none of ``pids`` runs (a zombie counts as ended), at most ``limit_s``."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        alive = False
        for pid in pids:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z":
                alive = True
                break
        if not alive:
            return
        time.sleep(0.02)


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _jobs(event_dir: Path) -> tuple[int, int]:
    """(jobs, stages) in the newest Spark event log of ``event_dir``."""
    logs = sorted(event_dir.glob("*"), key=lambda p: p.stat().st_mtime)
    if not logs:
        return 0, 0
    jobs = stages = 0
    with open(logs[-1]) as f:
        for line in f:
            if '"SparkListenerJobStart"' in line:
                jobs += 1
            elif '"SparkListenerStageCompleted"' in line:
                stages += 1
    return jobs, stages


def bench_small(run: Path, workdir: Path, repeat: int, goal: float) -> dict:
    work = workdir / "small"
    shutil.rmtree(work, ignore_errors=True)
    events = work / "eventlog"
    events.mkdir(parents=True)
    env = dict(os.environ, KAFKASIM_TIMES="1", PYTHONPATH=str(ROOT))
    base, full, cpu_b, cpu_f, jobs, floor, cpu_fl = [], [], [], [], [], [], []
    split_fl: dict[str, float] = {}
    split_f: dict[str, float] = {}
    box = machine("local[*]")   # the figures below are this machine's (bench/RESULTS.md: compare within one session)
    print(format_machine(box), flush=True)
    for i in range(repeat):
        w, c, rc = timed([sys.executable, "-c", FLOOR, str(run), str(work / "floor-out")], env,
                         work / f"floor-{i}.log", split_fl)
        assert rc == 0, (work / f"floor-{i}.log").read_text()[-2000:]
        floor.append(w)
        cpu_fl.append(c)
        w, c, rc = timed([sys.executable, "-c", TRIVIAL, str(run)], env, work / f"baseline-{i}.log")
        assert rc == 0, (work / f"baseline-{i}.log").read_text()[-2000:]
        base.append(w)
        cpu_b.append(c)
        envf = dict(env, KAFKASIM_SPARK_EVENT_LOG=str(events))
        w, c, rc = timed([sys.executable, "-m", "cli.main", "analyze", str(run), "--out", str(work / "out")],
                         envf, work / f"analyze-{i}.log", split_f)
        assert rc == 0, (work / f"analyze-{i}.log").read_text()[-2000:]
        full.append(w)
        cpu_f.append(c)
        jobs.append(_jobs(events))
        print(f"  pass {i + 1}: baseline {base[-1]:.1f} s ({cpu_b[-1]:.1f} CPU s), floor {floor[-1]:.1f} s "
              f"({cpu_fl[-1]:.1f} CPU s), analyze {full[-1]:.1f} s "
              f"({cpu_f[-1]:.1f} CPU s, {jobs[-1][0]} Spark jobs, {jobs[-1][1]} stages)", flush=True)
    b, f, fl = statistics.median(base), statistics.median(full), statistics.median(floor)
    res = {"run": str(run), "baseline_s": [round(x, 1) for x in base], "analyze_s": [round(x, 1) for x in full],
           "baseline_cpu_s": [round(x, 1) for x in cpu_b], "analyze_cpu_s": [round(x, 1) for x in cpu_f],
           "floor_s": [round(x, 1) for x in floor], "floor_cpu_s": [round(x, 1) for x in cpu_fl],
           "floor_ratio": round(fl / b, 2),
           "jobs_stages": jobs, "ratio": round(f / b, 2), "load_avg": round(os.getloadavg()[0], 1), "machine": box,
           "steps": (work / f"analyze-{repeat - 1}.log").read_text().splitlines()[-40:]}
    print(f"goal small: analyze {f:.1f} s (median of {repeat}; {statistics.median(cpu_f):.1f} CPU s) / session + "
          f"one job {b:.1f} s ({statistics.median(cpu_b):.1f} CPU s) = {res['ratio']}x (goal <= {goal}x; load "
          f"average {res['load_avg']})", flush=True)
    print(f"  floor: the inputs parsed and kept, and the analysis' tables written as plain projections of them, "
          f"nothing computed: {fl:.1f} s ({statistics.median(cpu_fl):.1f} CPU s) = {res['floor_ratio']}x the "
          f"baseline; the analysis is {f / fl:.2f}x this floor", flush=True)
    # the profile (issue 49): where the last pass's CPU went, by kind of thread, and its Spark jobs by step
    res["cpu_split"] = {"floor": split_fl, "analyze": split_f}
    print("  CPU s of the last pass by kind (the JVM's threads; python: the driver and any Python workers):", flush=True)
    for name, sp in (("floor", split_fl), ("analyze", split_f)):
        print(f"    {name:<8} " + ", ".join(f"{k} {sp.get(k, 0.0):.1f}" for k in (*KINDS, "python")), flush=True)
    log = newest_log(events)
    if log is not None:
        prof = steps(log)
        res["profile"] = prof
        print("  the last analyze's " + "\n  ".join(format_steps(prof)), flush=True)
    (workdir / "bench-analysis-small.json").write_text(json.dumps(res, indent=1) + "\n")
    return res
