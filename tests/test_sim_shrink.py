"""``sim shrink``'s passes: the reshapes it tries stay inside the run, a fault's brokers are read from the
history, and a schedule that single drops cannot cut (elect-outside-isr's first seed in a sweep from 1)
goes to 3 faults by pinning targets and reshaping a fault."""
from __future__ import annotations

from chaos.schedule import Fault
from sim.run import SimOptions, SimResult
from sim.shrink import brokers_hit, ShrinkSearch, shrink

OPTS = SimOptions(seed=9, bugs=("elect-outside-isr",), duration_s=12.0, offsets_partitions=3, faults=("pause", "kill"))


def test_the_reshapes_of_a_fault_swap_its_kind_move_it_and_widen_it_within_the_run() -> None:
    kill = Fault(id=0, at_ms=500, heal_at_ms=11500, kind="kill", target="controller", seed=1)
    base = SimResult(9, "invalid", 1, {}, [kill])
    s = ShrinkSearch(OPTS, base, {"unclean-election"}, budget=0, on_attempt=None)
    shapes = list(s.reshapes(kill))
    assert shapes[0].kind == "pause" and (shapes[0].at_ms, shapes[0].heal_at_ms) == (500, 11500)
    # moved by 250 ms either way (a second earlier or later leaves the run), widened only up to its end
    assert [(f.at_ms, f.heal_at_ms) for f in shapes[1:]] == [(250, 11250), (750, 11750), (500, 12000)]
    assert all(0 <= f.at_ms and f.heal_at_ms <= 12000 for f in shapes)
    part = Fault(id=1, at_ms=0, heal_at_ms=100, kind="partition", target="random", seed=2, peer="zookeeper",
                 direction="both")
    swapped = next(iter(s.reshapes(part)))
    assert (swapped.kind, swapped.peer, swapped.direction) == ("pause", None, None)


def test_the_brokers_a_fault_hit_are_its_nemesis_start_lines() -> None:
    line = lambda f, phase, nodes, **kw: {"process": "nemesis", "value": dict(fault=f, phase=phase, nodes=nodes, **kw)}
    r = SimResult(1, "invalid", 1, {}, [], history=[
        line(0, "start", [3, 1]), line(1, "start", [], skipped="nobody"), line(0, "heal", [3, 1]),
        line(2, "start", [2, "zk1"]), {"process": 0, "value": {"fault": 9}}])
    assert brokers_hit(r) == {0: [3, 1], 2: [2]}


def test_a_schedule_single_drops_cannot_cut_goes_to_three_faults_by_pinning_and_reshaping() -> None:
    s = shrink(OPTS, budget=40)
    assert s is not None and s.checker == "unclean-election" and s.original_faults == 5
    assert len(s.faults) == 3 and s.attempts <= 40
    assert all(f.target.startswith("broker:") for f in s.faults)
