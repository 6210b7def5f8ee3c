"""``sim sweep``: many seeds, in worker processes, with a progress bar; a table of verdicts and failing seeds."""
from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from typing import Callable, Iterable

from sim.run import SimOptions, SimRun


@dataclass(frozen=True)
class Outcome:
    seed: int
    verdict: str
    kinds: tuple[str, ...]
    faults: int
    failovers: int
    simulated_ms: float
    wall_s: float
    digest: str


def run_seed(opts: SimOptions) -> Outcome:
    t0 = time.perf_counter()
    r = SimRun(opts).run()
    moved = sum(1 for row in r.results["timeline"] if row.get("group") is not None and row.get("moved"))
    return Outcome(opts.seed, r.verdict, tuple(r.kinds), len(r.faults), moved, r.results["simulated_ms"],
                   time.perf_counter() - t0, r.digest)


def sweep(base: SimOptions, seeds: Iterable[int], jobs: int = 1,
          on_done: Callable[[Outcome], None] | None = None, stop_on_failure: bool = False) -> list[Outcome]:
    """Run every seed; results in seed order.  ``stop_on_failure``: stop at the first invalid seed found."""
    seeds = list(seeds)
    out: list[Outcome] = []
    if jobs <= 1:
        for s in seeds:
            o = run_seed(replace(base, seed=s))
            out.append(o)
            if on_done is not None:
                on_done(o)
            if stop_on_failure and o.verdict == "invalid":
                break
        return sorted(out, key=lambda o: o.seed)
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(run_seed, replace(base, seed=s)): s for s in seeds}
        for fut in as_completed(futures):
            o = fut.result()
            out.append(o)
            if on_done is not None:
                on_done(o)
            if stop_on_failure and o.verdict == "invalid":
                for f in futures:
                    f.cancel()
                break
    return sorted(out, key=lambda o: o.seed)


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
