"""``sim sweep``: many seeds, in worker processes, with a progress bar; a table of verdicts and failing seeds.

A seed whose run raises is an outcome like the others, verdict ``crashed``, with the exception and its
traceback: the sweep goes on with the other seeds.  (A worker process that dies outright, which no
Python exception reports, breaks the pool: the seeds it left unfinished are reported crashed too.)
"""
from __future__ import annotations

import json
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable, Iterable

from sim.run import SimOptions, SimRun

CRASHED = "crashed"


@dataclass(frozen=True)
class Outcome:
    seed: int
    verdict: str                 # valid, invalid, unknown, or crashed (the run raised)
    kinds: tuple[str, ...]
    faults: int
    failovers: int
    simulated_ms: float
    wall_s: float
    digest: str
    error: str = ""              # crashed: the exception, one line
    traceback: str = ""          # crashed: its whole traceback
    violation: str = ""          # invalid: the first anomaly (an invariant's names the step that broke it)

    @property
    def failed(self) -> bool:
        return self.verdict in ("invalid", CRASHED)


def _crashed(seed: int, wall_s: float, error: str, trace: str) -> Outcome:
    return Outcome(seed, CRASHED, (), 0, 0, 0.0, wall_s, "", error, trace)


def run_seed(opts: SimOptions) -> Outcome:
    t0 = time.perf_counter()
    try:
        r = SimRun(opts).run()
    except Exception as e:   # the seed is a finding, not the end of the sweep
        return _crashed(opts.seed, time.perf_counter() - t0, f"{type(e).__name__}: {e}", traceback.format_exc())
    moved = sum(1 for row in r.results["timeline"] if row.get("group") is not None and row.get("moved"))
    return Outcome(opts.seed, r.verdict, tuple(r.kinds), len(r.faults), moved, r.results["simulated_ms"],
                   time.perf_counter() - t0, r.digest, violation=first_violation(r.results))


def first_violation(results: dict) -> str:
    """An invalid run's first anomaly in one line: its kind, its message and, when an invariant stopped the
    run, the step that broke it ("" for a run with none)."""
    anomalies = results["checks"]["anomalies"]
    if not anomalies:
        return ""
    a = anomalies[0]
    stop = (a.get("details") or {}).get("stopped_at")
    where = f" (step {stop['step_index']} at {stop['time_ms']:.3f} ms: {stop['step']})" if stop else ""
    return f"{a['kind']}: {a['message']}{where}"


def sweep(base: SimOptions, seeds: Iterable[int], jobs: int = 1,
          on_done: Callable[[Outcome], None] | None = None, stop_on_failure: bool = False) -> list[Outcome]:
    """Run every seed; results in seed order.  ``stop_on_failure``: stop at the first invalid or crashed seed."""
    seeds = list(seeds)
    out: list[Outcome] = []
    if jobs <= 1:
        for s in seeds:
            o = run_seed(replace(base, seed=s))
            out.append(o)
            if on_done is not None:
                on_done(o)
            if stop_on_failure and o.failed:
                break
        return sorted(out, key=lambda o: o.seed)
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        t0 = time.perf_counter()
        futures = {pool.submit(run_seed, replace(base, seed=s)): s for s in seeds}
        for fut in as_completed(futures):
            try:
                o = fut.result()
            except BrokenProcessPool as e:
                o = _crashed(futures[fut], time.perf_counter() - t0,
                             f"the worker process died ({type(e).__name__}: {e})", traceback.format_exc())
            out.append(o)
            if on_done is not None:
                on_done(o)
            if stop_on_failure and o.failed:
                for f in futures:
                    f.cancel()
                break
    return sorted(out, key=lambda o: o.seed)


def verdict_counts(outcomes: Iterable[Outcome]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.verdict] = counts.get(o.verdict, 0) + 1
    return dict(sorted(counts.items()))


def write_outcomes(out_dir: Path, outcomes: list[Outcome], summary: dict) -> None:
    """``outcomes.jsonl`` (one line per seed, a crashed one with its error and traceback), ``summary.json``
    (the options, counts by verdict, the failing and crashed seeds, the wall time) and, per crashed seed,
    ``crashed/seed-<N>.txt`` (its traceback)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "outcomes.jsonl", "w") as f:
        for o in outcomes:
            f.write(json.dumps(asdict(o), sort_keys=True) + "\n")
    crashed = [o for o in outcomes if o.verdict == CRASHED]
    if crashed:
        (out_dir / "crashed").mkdir(exist_ok=True)
        for o in crashed:
            (out_dir / "crashed" / f"seed-{o.seed}.txt").write_text(o.traceback)
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")


def parse_seeds(text: str) -> range:
    """``A..B`` (inclusive) or a single seed."""
    if ".." in text:
        a, b = text.split("..", 1)
        lo, hi = int(a), int(b)
    else:
        lo = hi = int(text)
    if hi < lo:
        raise ValueError(f"--seeds {text}: the end is before the start")
    return range(lo, hi + 1)
