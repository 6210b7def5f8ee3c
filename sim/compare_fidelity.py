"""``sim fidelity --compare``: a ``kafkasim compare`` scenario on Kafka 2.8.2 and in the simulator (and, optionally,
on kafkasim's processes), with the simulator's ZooKeeper compared with each real side's, pairwise.

    result = three_sides(load_compare(find_compare("controller-kill")), Path("runs/fid"), seed=1)
    print(result.text)

The Kafka side (and the kafkasim side) is compare/runner.py's ``run_side``, unchanged, into ``OUT/<side>/``;
or, with ``from_dir``, a ``kafkasim compare --out DIR`` run's ``DIR/<scenario>/<side>/observations.json`` is read
instead of running the side again.  The simulated side is sim/compare_run.py's, written to
``OUT/sim/observations.json`` in the same shape.

Only the ZooKeeper streams are compared (``zk <path>``, ``zk-shape <pattern>``, ``zk-paths``: compare/normalize.py's
``zk_entries``, the same relabelling, the scenario's ``merge.phases``): the probes, the members and the steps'
outcomes are client-side, and the simulator has no Kafka listener to probe.  A difference is **listed** when
docs/deviations.md explains it: for the simulator against Kafka 2.8.2, compare's own list (what kafkasim does
otherwise, the simulator runs kafkasim's cores), the scenario's ``listed`` and :data:`SIM_KNOWN`; against
kafkasim's processes, :data:`SIM_KNOWN` alone.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from compare.diff import KNOWN, Difference, Known, compare, merge_phases, outcome, report, scenario_known, streams
from compare.normalize import Entry, Labels, zk_entries
from sim.compare_run import SimCompareRun

SIM, KAFKA, KAFKASIM = "sim", "kafka", "kafkasim"
OBSERVATIONS = "observations.json"   # compare/runner.py's file name, for the simulated side too
SIDE_NAMES = {KAFKA: "Kafka 2.8.2", KAFKASIM: "kafkasim", SIM: "the simulator"}


def _only_root(d: Difference) -> bool:
    """The set of paths differs only by the root (the chroot), which the simulated ZooKeeper starts with."""
    a, b = (e.value if e is not None else None for e in (d.kafka, d.kafkasim))
    return isinstance(a, list) and isinstance(b, list) and set(a) ^ set(b) == {"/"}


#: what differs between the simulator and a real side by construction, each written up in docs/deviations.md
SIM_KNOWN: list[Known] = [
    Known(r"zk /", "the simulated ZooKeeper starts with its root, the chroot a real side's first broker creates",
          "The simulator's ZooKeeper starts with its chroot"),
    Known(r"zk-paths", "the simulated ZooKeeper starts with its root, the chroot a real side's first broker creates",
          "The simulator's ZooKeeper starts with its chroot", _only_root),
]


@dataclass
class Pair:
    real: str                            # kafka or kafkasim
    diffs: list[Difference]
    streams: int
    text: str

    def row(self) -> dict[str, Any]:
        return {"pair": f"{SIM} vs {self.real}", "streams": self.streams, **outcome(self.diffs)}


@dataclass
class ThreeSides:
    scenario: str
    observations: dict[str, dict[str, Any]]
    pairs: list[Pair] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n\n".join(p.text for p in self.pairs)

    def unlisted(self) -> int:
        return sum(p.row()["unlisted"] for p in self.pairs)


def zk_side(obs: dict[str, Any], scenario: Any) -> list[Entry]:
    """A side's compared ZooKeeper entries (compare's normalisation, the scenario's merged phases)."""
    return merge_phases(zk_entries(obs, Labels(obs)), scenario.merged)


def compare_with_sim(scenario: Any, real: str, real_obs: dict[str, Any], sim_obs: dict[str, Any]) -> Pair:
    """The simulator's ZooKeeper against one real side's: each stream's first difference, listed or not."""
    a, b = zk_side(real_obs, scenario), zk_side(sim_obs, scenario)
    known = SIM_KNOWN + (KNOWN + scenario_known(scenario) if real == KAFKA else [])
    diffs = compare(a, b, known)
    text = report(diffs, a, b, title=f"== {scenario.name}: {SIDE_NAMES[real]} vs the simulator (ZooKeeper streams)",
                  sides=(SIDE_NAMES[real], SIDE_NAMES[SIM]), labels=(real, SIM))
    return Pair(real, diffs, len(set(streams(a)) | set(streams(b))), text)


def read_side(from_dir: Path, scenario: Any, side: str) -> dict[str, Any] | None:
    """A side's observations from a ``kafkasim compare --out`` directory (``DIR/<scenario>/<side>/``, or
    ``DIR/<side>/`` when DIR is the scenario's own directory); None when that side did not run there."""
    for d in (from_dir / scenario.name / side, from_dir / side):
        f = d / OBSERVATIONS
        if f.exists():
            return json.loads(f.read_text())
    return None


def three_sides(scenario: Any, out: Path, seed: int = 1, from_dir: Path | None = None, kafkasim: bool = False,
                say: Callable[[str], None] = lambda _t: None) -> ThreeSides:
    """Kafka 2.8.2 (run, or read from ``from_dir``), kafkasim's processes when ``kafkasim`` (likewise), and the
    simulator; every side's observations under ``out/<side>/``; the simulator compared with each real side."""
    out.mkdir(parents=True, exist_ok=True)
    wanted = [KAFKA] + ([KAFKASIM] if kafkasim else [])
    obs: dict[str, dict[str, Any]] = {}
    sim_run = SimCompareRun(scenario, seed=seed, say=say)   # refuses what it cannot run before anything runs
    to_run = []
    for side in wanted:
        got = read_side(from_dir, scenario, side) if from_dir is not None else None
        if got is not None:
            say(f"{side}: {scenario.name} read from {from_dir}")
            obs[side] = got
        elif from_dir is not None:
            raise FileNotFoundError(f"{from_dir}: no {side} run of {scenario.name} ({scenario.name}/{side}/"
                                    f"{OBSERVATIONS}); run it with kafkasim compare, or leave --from out")
        else:
            to_run.append(side)
    if to_run:
        from compare.runner import run_side
        from compare.sides import pick_ports
        ports = pick_ports(scenario.base.brokers)
        for side in to_run:
            obs[side] = run_side(scenario, side, out, ports, say)
    say(f"{SIM}: {scenario.name} ({len(scenario.steps)} steps, seed {seed})")
    obs[SIM] = sim_run.run()
    (out / SIM).mkdir(parents=True, exist_ok=True)
    (out / SIM / OBSERVATIONS).write_text(json.dumps(obs[SIM], indent=1, default=str))
    result = ThreeSides(scenario.name, obs)
    for side in wanted:
        result.pairs.append(compare_with_sim(scenario, side, obs[side], obs[SIM]))
    (out / "fidelity.json").write_text(json.dumps({"scenario": scenario.name, "seed": seed,
                                                   "errors": {s: o.get("error") for s, o in obs.items()},
                                                   "pairs": [p.row() for p in result.pairs]}, indent=2))
    (out / "report.txt").write_text(result.text + "\n")
    return result
