"""Each planted bug is found by a sweep of a few seeds, and ``sim shrink`` cuts its schedule to at most
3 faults that still fail the same checker.  The seed ranges are small (bench/sim.py sweeps from seed 1
and records how far each bug takes); the runs are short (12 simulated seconds, 3 offsets partitions)."""
from __future__ import annotations

import random
from dataclasses import replace

import yaml

import pytest

from judge.registry import kinds_of
from chaos.scenario import parse_scenario
from chaos.schedule import make_schedule
from sim import scenario
from sim.faults import CHAOS_KINDS
from sim.run import SimOptions, SimRun
from sim.shrink import checker_of, shrink
from sim.sweep import sweep

BASE = SimOptions(seed=1, duration_s=12.0, offsets_partitions=3)
# bug -> (seeds to sweep, the fault kinds drawn, the checkers that may catch it, shrink attempts)
CASES = {
    "commit-before-hw": (range(8, 10), None, {"split-coordinator", "lost-commit"}, 3),
    "fenced-generation-commit": (range(17, 19), None, {"fenced-generation", "commit-order"}, 3),
    "zombie-controller": (range(2, 4), None, {"controllers"}, 3),
    "hw-ignores-lagging-isr": (range(29, 31), None, {"lost-write", "offsets", "hw", "hw-within-isr"}, 3),
    "load-to-hw": (range(3, 5), None, {"lost-commit", "commit-order"}, 3),
    "elect-outside-isr": (range(70, 72), ("pause", "kill"), {"unclean-election", "lost-write", "offsets"}, 3),
}

@pytest.mark.parametrize("bug", sorted(CASES))
def test_a_sweep_finds_the_planted_bug_and_shrink_cuts_it_to_three_faults(bug: str) -> None:
    seeds, kinds, checkers, budget = CASES[bug]
    opts = replace(BASE, bugs=(bug,), **({"faults": kinds} if kinds else {}))
    found = [o for o in sweep(opts, seeds, stop_on_failure=True) if o.verdict == "invalid"]
    assert found, f"{bug}: no seed in {seeds} failed"
    assert checker_of(list(found[0].kinds)) in checkers, found[0]
    s = shrink(replace(opts, seed=found[0].seed), budget=budget)
    assert s is not None and s.checker in checkers
    assert len(s.faults) <= 3 and len(s.faults) <= found[0].faults
    assert set(s.result.kinds) & set(kinds_of(s.checker))
    # without the bug, the shrunk schedule passes: the bug, not the faults, made it fail
    assert SimRun(replace(s.opts, bugs=())).run().verdict == "valid"
    # printed as a scenario file: a chaos scenario (faults.schedule) when its kinds allow, read back the same
    doc = yaml.safe_load(scenario.dump(s.opts, s.faults))
    if all(f.kind in CHAOS_KINDS for f in s.faults):
        assert [f.kind for f in make_schedule(parse_scenario(doc), random.Random(0))] == [f.kind for f in s.faults]
    again = scenario.parse(doc, seed=s.opts.seed)
    assert (again.schedule, again.duration_s, again.offsets_partitions) == (s.faults, s.opts.duration_s, 3)
