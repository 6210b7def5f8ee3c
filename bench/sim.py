"""The simulator's speed, against the real-process chaos rate measured in the same run.

    python -m bench.sim [--real-seconds 30] [--failover-runs 20] [--sweep-seeds 16] [--bug-seeds 200]

1. **Real chaos rate** (the baseline): one `coordinator-kill` chaos run of ``--real-seconds`` on real
   processes; coordinator moves (timeline rows that moved) per wall minute, start-up and analysis
   included.
2. **Simulated coordinator failovers per wall minute, one core**: simulated runs whose faults kill,
   pause or expire the session of a group's coordinator back to back (three groups of two members
   committing every second, a producer at 5 sends/s); every move the timeline counts, per wall minute
   of the whole runs (start-up, end phase and checkers included).
3. **Simulated seconds per wall second**: one run, 3 brokers, 3 groups, a producer at 20 sends/s, no
   faults, 120 simulated seconds.
4. **Seeds per minute** of ``sim sweep --jobs 2`` (default options: 30 s, the default fault mix).
5. **Each planted bug**: seeds until a sweep (from seed 1) finds it, and the faults of its shrunk schedule.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from chaos.schedule import Fault  # noqa: E402
from sim.bugs import BUGS  # noqa: E402
from sim.run import SimOptions, SimRun  # noqa: E402
from sim.shrink import shrink  # noqa: E402
from sim.sweep import run_seed, sweep  # noqa: E402


def real_chaos_rate(seconds: float) -> tuple[float, int, float]:
    """(moves per wall minute, moves, wall s) of one real coordinator-kill chaos run."""
    import io

    from chaos.runner import ChaosRun
    from chaos.scenario import find_scenario, load_scenario

    scenario = load_scenario(find_scenario("coordinator-kill"))
    with tempfile.TemporaryDirectory(prefix="bench-sim-real-") as tmp:
        t0 = time.perf_counter()
        r = ChaosRun(scenario, 7, Path(tmp) / "run", duration_s=seconds, stream=io.StringIO(),
                     progress=False).run()
        wall = time.perf_counter() - t0
    moves = sum(1 for row in r.results["timeline"] if row.get("group") is not None and row.get("moved"))
    return moves / wall * 60, moves, wall


def failover_schedule(seed: int, duration_ms: int, groups: int) -> list[Fault]:
    """Back-to-back coordinator faults: kill / pause / session expiry of g1, g2, g3 in turn."""
    import random
    rng = random.Random(seed)
    out, t, i = [], 1500, 0
    kinds = ("kill", "pause", "expire-session")
    while t < duration_ms - 2500:
        kind = kinds[i % 3]
        length = rng.randint(2300, 3000) if kind != "expire-session" else 500
        out.append(Fault(id=i, at_ms=t, heal_at_ms=t + length, kind=kind, target=f"coordinator:g{i % groups + 1}",
                         seed=rng.getrandbits(32)))
        t += length + rng.randint(100, 400)
        i += 1
    return out


def sim_failover_rate(runs: int, duration_s: float) -> tuple[float, int, float, float]:
    """(moves per wall minute, moves, wall s, simulated s)."""
    moves, simulated = 0, 0.0
    t0 = time.perf_counter()
    for seed in range(1, runs + 1):
        opts = SimOptions(seed=seed, groups=3, duration_s=duration_s, offsets_partitions=3, members=2,
                          stall_every_ms=None, rate=5.0, commit_interval_ms=1000, poll_interval_ms=500.0,
                          schedule=failover_schedule(seed, int(duration_s * 1000), 3))
        r = SimRun(opts).run()
        moves += sum(1 for row in r.results["timeline"] if row.get("group") is not None and row.get("moved"))
        simulated += r.results["simulated_ms"] / 1000
    wall = time.perf_counter() - t0
    return moves / wall * 60, moves, wall, simulated


def sim_speed(seconds: float) -> tuple[float, float, float]:
    t0 = time.perf_counter()
    r = SimRun(SimOptions(seed=1, groups=3, duration_s=seconds, faults=(), stall_every_ms=None)).run()
    wall = time.perf_counter() - t0
    return r.results["simulated_ms"] / 1000 / wall, r.results["simulated_ms"] / 1000, wall


def sweep_rate(seeds: int, jobs: int) -> tuple[float, float, dict]:
    t0 = time.perf_counter()
    outs = sweep(SimOptions(seed=1), range(1, seeds + 1), jobs=jobs)
    wall = time.perf_counter() - t0
    verdicts: dict[str, int] = {}
    for o in outs:
        verdicts[o.verdict] = verdicts.get(o.verdict, 0) + 1
    return seeds / wall * 60, wall, verdicts


#: the fault kinds a bug's sweep draws when not the default mix (elect-outside-isr needs a partition's
#: followers gone while its leader dies: pauses and kills)
BUG_KINDS = {"elect-outside-isr": ("pause", "kill")}
#: the transaction bugs' sweeps: the transactional workload (tests/test_sim_txn.py's options), 20 s runs
TXN_BASE = dict(duration_s=20.0, groups=0, transactions=2,
                faults=("kill", "pause", "partition", "expire-session", "slow-disk"))
BUG_OPTIONS = {"lso-from-hw": TXN_BASE,
               "marker-before-prepare": dict(TXN_BASE, txn_crash_every_ms=(2000, 6000))}


def bug_hunt(bug: str, max_seeds: int) -> tuple[int | None, int | None, int | None, float]:
    """(seeds until found, faults in that seed's run, faults after shrinking, wall s); 12 s runs, 3 offsets
    partitions, as tests/test_sim_bugs.py's (the transaction bugs: BUG_OPTIONS, tests/test_sim_txn.py's)."""
    t0 = time.perf_counter()
    base = SimOptions(seed=1, bugs=(bug,), duration_s=12.0, offsets_partitions=3)
    if bug in BUG_OPTIONS:
        base = SimOptions(seed=1, bugs=(bug,), **BUG_OPTIONS[bug])
    if bug in BUG_KINDS:
        base = replace(base, faults=BUG_KINDS[bug])
    for seed in range(1, max_seeds + 1):
        o = run_seed(replace(base, seed=seed))
        if o.verdict == "invalid":
            s = shrink(replace(base, seed=seed), budget=40)
            return seed, o.faults, (len(s.faults) if s else None), time.perf_counter() - t0
    return None, None, None, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.sim", description=__doc__.split("\n")[0])
    ap.add_argument("--real-seconds", type=float, default=30.0)
    ap.add_argument("--failover-runs", type=int, default=20)
    ap.add_argument("--failover-duration", type=float, default=30.0)
    ap.add_argument("--speed-seconds", type=float, default=120.0)
    ap.add_argument("--sweep-seeds", type=int, default=16)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--bug-seeds", type=int, default=200)
    ap.add_argument("--skip", action="append", default=[], choices=["real", "failover", "speed", "sweep", "bugs"])
    a = ap.parse_args(argv)
    real = None
    if "real" not in a.skip:
        real, n, wall = real_chaos_rate(a.real_seconds)
        print(f"real chaos run (coordinator-kill, {a.real_seconds:g} s): {n} coordinator moves in {wall:.1f} s wall "
              f"= {real:.1f} per wall minute", flush=True)
    if "failover" not in a.skip:
        rate, n, wall, simulated = sim_failover_rate(a.failover_runs, a.failover_duration)
        ratio = f" = {rate / real:.0f}x the real rate" if real else ""
        print(f"simulated: {n} coordinator moves in {wall:.1f} s wall ({simulated:.0f} simulated s, "
              f"{a.failover_runs} runs) = {rate:.0f} per wall minute on one core{ratio}", flush=True)
    if "speed" not in a.skip:
        x, simulated, wall = sim_speed(a.speed_seconds)
        print(f"speed: {simulated:.0f} simulated s in {wall:.1f} s wall = {x:.1f} simulated s per wall s "
              "(3 brokers, 3 groups, 20 sends/s)", flush=True)
    if "sweep" not in a.skip:
        per_min, wall, verdicts = sweep_rate(a.sweep_seeds, a.jobs)
        print(f"sweep --jobs {a.jobs}: {a.sweep_seeds} seeds in {wall:.1f} s = {per_min:.1f} seeds per minute "
              f"({verdicts})", flush=True)
    if "bugs" not in a.skip:
        for bug in BUGS:
            found, faults, shrunk, wall = bug_hunt(bug, a.bug_seeds)
            print(f"planted {bug}: found at seed {found} ({faults} faults), shrunk to {shrunk} faults, "
                  f"{wall:.0f} s wall", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
