"""``sim shrink``: the smallest fault schedule (fewest faults, then shortest) that still fails the same checker.

Greedy, as delta debugging's last step: drop faults one at a time while the
run still fails; then halve each remaining fault's length while it still
fails; then cut the run's duration to just after the last heal.  Every
attempt is a whole simulated run with the same seed and the candidate
schedule (each fault resolves its target with its own seed, so the faults
kept behave as they did, as far as the cluster lets them).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from chaos.checkers import CHECKERS
from chaos.schedule import Fault
from sim.faults import shorter
from sim.run import SimOptions, SimResult, SimRun


def checker_of(kinds: list[str]) -> str | None:
    """The first checker (in chaos/'s order) reporting one of ``kinds``."""
    for name, (_fn, ks) in CHECKERS.items():
        if set(ks) & set(kinds):
            return name
    return None


@dataclass
class Shrunk:
    opts: SimOptions
    faults: list[Fault]
    checker: str
    result: SimResult
    attempts: int
    original_faults: int


def shrink(opts: SimOptions, *, budget: int = 150,
           on_attempt: Callable[[int, list[Fault], bool], None] | None = None) -> Shrunk | None:
    """None when the seed's run does not fail."""
    base = SimRun(opts).run()
    checker = checker_of(base.kinds)
    if checker is None:
        return None
    kinds = set(CHECKERS[checker][1])
    best_opts = replace(opts, schedule=list(base.faults))
    best = base
    attempts = 0

    def fails(candidate: SimOptions) -> SimResult | None:
        nonlocal attempts
        attempts += 1
        r = SimRun(candidate).run()
        ok = bool(kinds & set(r.kinds))
        if on_attempt is not None:
            on_attempt(attempts, list(candidate.schedule or []), ok)
        return r if ok else None

    # 1. fewer faults: drop one at a time, last first, until none can go
    changed = True
    while changed and attempts < budget:
        changed = False
        faults = list(best_opts.schedule or [])
        for i in reversed(range(len(faults))):
            if attempts >= budget:
                break
            cand = replace(best_opts, schedule=faults[:i] + faults[i + 1:])
            r = fails(cand)
            if r is not None:
                best_opts, best, changed = cand, r, True
                break
    # 2. shorter faults
    for i in range(len(best_opts.schedule or [])):
        while attempts < budget:
            faults = list(best_opts.schedule or [])
            f = faults[i]
            if f.heal_at_ms - f.at_ms <= 200:
                break
            faults[i] = shorter(f)
            cand = replace(best_opts, schedule=faults)
            r = fails(cand)
            if r is None:
                break
            best_opts, best = cand, r
    # 3. a shorter run
    last = max((f.heal_at_ms for f in best_opts.schedule or []), default=0)
    dur = max(5.0, round(last / 1000 + 3, 1))
    if dur < best_opts.duration_s and attempts < budget:
        cand = replace(best_opts, duration_s=dur)
        r = fails(cand)
        if r is not None:
            best_opts, best = cand, r
    faults = [replace(f, id=i) for i, f in enumerate(best_opts.schedule or [])]
    return Shrunk(replace(best_opts, schedule=faults), faults, checker, best, attempts, len(base.faults))
