"""Synthetic chaos runs of any size, with planted anomalies, for the analysis tests and benchmarks.

    python -m analysis.synthetic OUT_DIR --ops N [--runs R] [--plant KIND]... [--seed S] [--jobs J] [--check]

    from analysis.synthetic import generate
    runs = generate(out_dir, ops=5000, plant=["lost-write"], seed=3)   # -> [Path of each run directory]

Each run directory has the chaos run format (docs/chaos.md, "The run directory"):
``history.jsonl`` (a file, or for large runs a directory of ``part-NNNNN.jsonl``
files written in parallel), ``cluster/events/broker-<id>.jsonl``, a compacted
``__consumer_offsets`` segment per replica in ``cluster/data/``,
``results.json``, ``schedule.json``, and ``planted.json`` (what was planted
and the history lines and events that show it).  docs/analysis.md,
"Synthetic runs", describes the model; in short:

* The run is a sequence of **ticks** (50 ms).  Each tick has a fixed shape:
  every producer sends once, every group member polls, members commit every
  few ticks, heartbeat every second, the probe commits and reads back.  Ops
  never span ticks, and brokers' events that are not tied to an op (faults,
  elections, loads) are logged in the idle end of a tick.
* Everything a tick needs (offsets, positions, generations, who leads what)
  is a closed form of the tick number and small per-tick numpy arrays
  computed once (:class:`Plan`), so any range of ticks can be written by a
  worker process without the ones before it: that is how a 10M-op history
  is written in parallel.
* Faults are SIGKILLs of a role (``coordinator:g1``, ``controller``, ...)
  with the events a real failover leaves, simulated on a small cluster model.
* A **clean** run is judged ``valid`` with no anomaly by ``judge.checkers``;
  each ``--plant KIND`` plants a few anomalies of exactly that kind
  (:data:`PLANT_KINDS`).

The generator's parts: ``analysis.synth_shape`` (the fixed shape, the plants,
small helpers), ``analysis.synth_model`` (the cluster model), ``analysis.synth_plan``
(:class:`Plan`), ``analysis.synth_ticks`` (writing a range of ticks) and
``analysis.synth_tail`` (the end of the run, the segments); this module writes
a whole run with them, in parallel.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from analysis.synth_shape import (
    BROKERS, DEFAULT_INSTANCES, FORMAT_VERSION, GROUPS, PART_LINES, PLANT_HOW, PLANT_KINDS, SINGLE_FILE_LINES,
    SyntheticError, TICK_NS, tick_start,
)
from analysis.synth_plan import Plan
from analysis.synth_ticks import write_ticks
from analysis.synth_tail import write_segments, write_tail

__all__ = ["FORMAT_VERSION", "PLANT_HOW", "PLANT_KINDS", "SyntheticError", "generate", "main", "write_run"]

_PLAN: Plan | None = None   # the run being written, for the forked writers (_task)


# ---------------------------------------------------------------------- a whole run

def _task(args: tuple) -> dict[str, Any]:
    kind, t0, t1, hist, ev_dir, tag = args
    plan = _PLAN
    assert plan is not None
    if kind == "tail":
        return write_tail(plan, Path(hist), Path(ev_dir), tag)
    return write_ticks(plan, t0, t1, Path(hist), Path(ev_dir), tag)


def _concat(parts: list[Path], dest: Path) -> None:
    with open(dest, "wb") as out:
        for p in parts:
            with open(p, "rb") as f:
                shutil.copyfileobj(f, out, 1 << 22)
            p.unlink()


def write_run(run: Path, ops: int, seed: int, plant: Iterable[str] = (), *, jobs: int | None = None,
              instances: int = DEFAULT_INSTANCES, part_lines: int = PART_LINES,
              single_file_lines: int = SINGLE_FILE_LINES, check: bool = False) -> dict[str, Any]:
    """Write one synthetic run into directory ``run`` (created; it must be empty or absent)."""
    global _PLAN
    t_begin = time.monotonic()
    run = Path(run)
    if run.exists() and any(run.iterdir()):
        raise SyntheticError(f"{run}: exists and is not empty")
    plan = Plan(run.name, ops, seed, plant, instances)
    t_plan = time.monotonic() - t_begin
    ev_dir = run / "cluster" / "events"
    tmp = run / ".parts"
    tmp.mkdir(parents=True)
    ev_dir.mkdir(parents=True)
    split = plan.total_lines_est > single_file_lines
    chunks = plan.chunks(part_lines if split else 1 << 62)
    hist = run / "history.jsonl"
    if split:
        hist.mkdir()
        targets = [hist / f"part-{i:05d}.jsonl" for i in range(len(chunks) + 1)]
    else:
        targets = [tmp / f"history.{i:05d}" for i in range(len(chunks) + 1)]
    tasks = [("ticks", t0, t1, str(targets[i]), str(tmp), f"{i:05d}") for i, (t0, t1) in enumerate(chunks)]
    tasks.append(("tail", 0, 0, str(targets[-1]), str(tmp), f"{len(chunks):05d}"))
    for tgt in targets:
        Path(tgt).touch()
    jobs = jobs or os.cpu_count() or 1
    _PLAN = plan
    try:
        if jobs > 1 and len(tasks) > 2 and "fork" in multiprocessing.get_all_start_methods():
            ctx = multiprocessing.get_context("fork")
            order = [len(tasks) - 1] + list(range(len(tasks) - 1))   # the tail (all final reads) first
            with ctx.Pool(min(jobs, len(tasks))) as pool:
                res = pool.map(_task, [tasks[i] for i in order], chunksize=1)
            results = [None] * len(tasks)
            for i, r in zip(order, res):
                results[i] = r
        else:
            results = [_task(tk) for tk in tasks]
    finally:
        _PLAN = None
    if not split:
        _concat([Path(t) for t in targets], hist)
    for b in BROKERS:
        _concat([tmp / f"broker-{b}.{i:05d}" for i in range(len(tasks))], ev_dir / f"broker-{b}.jsonl")
    shutil.rmtree(tmp)
    write_segments(plan, run)
    counts: dict[str, int] = {}
    for r in results:
        for k, v in r["counts"].items():
            counts[k] = counts.get(k, 0) + v
        for pid, got in r["plants"].items():
            pl = plan._plant_by_id[pid]
            pl["ops"].extend(got["ops"])
            pl["events"].extend(got["events"])
    for pl in plan.plants:
        pl["ops"] = sorted(set(pl["ops"]))
    lines = sum(r["lines"] for r in results)
    tail = results[-1]
    invoked = sum(v for k, v in counts.items() if not k.startswith(("kill:", "heal:")))
    duration_s = round((tail["end_ns"] - tick_start(0)) / 1e9, 3)
    t_write = time.monotonic() - t_begin - t_plan
    planted_kinds = sorted({p["kind"] for p in plan.plants})
    expected = {k: sum(1 for p in plan.plants if p["kind"] == k) for k in planted_kinds}
    (run / "planted.json").write_text(json.dumps({
        "run": run.name, "seed": seed, "kinds": planted_kinds, "requested": plan.plant_kinds,
        "expected_anomaly_counts": expected, "how": {k: PLANT_HOW[k] for k in planted_kinds},
        "plants": plan.plants}, indent=1) + "\n")
    (run / "schedule.json").write_text(json.dumps([
        {"fault": f.id, "kind": "kill", "target": f.target, "nodes": [f.victim], "at_ms": (f.start * TICK_NS) // 10**6,
         "duration.ms": (f.heal - f.start) * TICK_NS // 10**6, "detect_ms": (f.detect - f.start) * TICK_NS // 10**6,
         "plant": f.plant} for f in plan.faults], indent=1) + "\n")
    results_doc: dict[str, Any] = {
        "scenario": "synthetic", "seed": seed, "duration_s": duration_s, "planted_bugs": [],
        "planted": planted_kinds, "verdict": "invalid" if expected else "valid", "exit_code": 1 if expected else 0,
        "expected": {"verdict": "invalid" if expected else "valid", "anomaly_counts": expected},
        "checks": None, "timeline": None,
        "ops": {"invoked": invoked, "ops_per_s": round(invoked / max(duration_s, 1e-9), 1),
                "by_outcome": dict(sorted(counts.items()))},
        "faults": len(plan.faults), "member_crashes": 0, "member_stalls": 0,
        "drained": {g.name: True for g in GROUPS}, "workload_errors": [],
        "synthetic": {"ops_requested": ops, "ticks": plan.T, "history_lines": lines, "part_files": split,
                      "parts": len(tasks) if split else 1, "rebalances": {g: len(v) - 1 for g, v in plan.reb.items()},
                      "plan_s": round(t_plan, 3), "write_s": round(t_write, 3)},
    }
    if check:
        from judge.checkers import check as run_checks
        from judge.history import read_history
        from judge.timeline import failover_timeline
        from judge.timeline_summary import summarize
        from node.events import read_run_events
        ops_l = [op for f in (sorted(hist.glob("part-*.jsonl")) if split else [hist]) for op in read_history(f)]
        events = read_run_events(run / "cluster")
        res = run_checks(ops_l, events)
        rows = failover_timeline(ops_l, events)
        results_doc.update(verdict=res.verdict, exit_code=res.exit_code, checks=res.to_json(), timeline=rows,
                           timeline_summary=summarize(rows))
    (run / "results.json").write_text(json.dumps(results_doc, indent=2, default=str) + "\n")
    return results_doc


def generate(out_dir: Path | str, ops: int, runs: int = 1, plant: Iterable[str] = (), seed: int = 0, *,
             jobs: int | None = None, instances: int = DEFAULT_INSTANCES, part_lines: int = PART_LINES,
             single_file_lines: int = SINGLE_FILE_LINES, check: bool = False) -> list[Path]:
    """Write ``runs`` synthetic runs into ``out_dir`` with about ``ops`` client operations in all.

    Run i is ``out_dir/synth-<seed>-<i>``.  ``plant``: anomaly kinds to plant in every run
    (:data:`PLANT_KINDS`, or ``"all"``), ``instances`` of each.  Deterministic for a seed."""
    plant = list(plant)
    if "all" in plant:
        plant = [k for k in plant if k != "all"] + [k for k in PLANT_KINDS if k not in plant]
    for k in plant:
        if k not in PLANT_KINDS:
            raise SyntheticError(f"unknown plant kind {k!r}; expected one of {', '.join(PLANT_KINDS)}")
    if runs < 1 or ops < 1:
        raise SyntheticError("runs and ops must be positive")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(runs):
        run = out / f"synth-{seed}-{i:03d}"
        write_run(run, max(1, ops // runs), seed * 1000 + i, plant, jobs=jobs, instances=instances,
                  part_lines=part_lines, single_file_lines=single_file_lines, check=check)
        paths.append(run)
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m analysis.synthetic", description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--ops", type=int, required=True, help="client operations in all (about)")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--plant", action="append", default=[], metavar="KIND",
                    help=f"plant anomalies of this kind (repeatable; 'all'): {', '.join(PLANT_KINDS)}")
    ap.add_argument("--instances", type=int, default=DEFAULT_INSTANCES, help="anomalies planted per kind")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=None, help="writer processes (default: the cores)")
    ap.add_argument("--check", action="store_true", help="run judge.checkers on each run (small runs only)")
    a = ap.parse_args(argv)
    t = time.monotonic()
    try:
        paths = generate(a.out_dir, a.ops, a.runs, a.plant, a.seed, jobs=a.jobs, instances=a.instances,
                         check=a.check)
    except SyntheticError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    dt = time.monotonic() - t
    lines = 0
    for p in paths:
        r = json.loads((p / "results.json").read_text())
        lines += r["synthetic"]["history_lines"]
        extra = f", checked: {r['verdict']} {r['checks']['anomaly_counts']}" if r.get("checks") else ""
        print(f"{p}: {r['ops']['invoked']} ops, {r['synthetic']['history_lines']} lines, {r['faults']} faults, "
              f"planted {r['expected']['anomaly_counts'] or 'nothing'}{extra}")
    print(f"{len(paths)} run(s), {lines} history lines in {dt:.1f} s ({lines / max(dt, 1e-9):,.0f} lines/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
