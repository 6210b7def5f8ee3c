"""The fidelity check: one scenario on real processes and in the simulator gives the same control-plane sequence.

    steps = control_sequence(run_dir)          # a chaos run's or a simulated run's directory
    diffs = compare(control_sequence(real_dir), control_sequence(sim_dir))
    print(report(real_steps, sim_steps, diffs))

The **compared sequence** is read from a run directory's ``cluster/events/broker-*.jsonl``
(docs/events.md) and ``history.jsonl`` (docs/chaos.md), the same way for both runs, up to the
history's ``end`` mark: the end phase (every fault healed at once, the final reads, the brokers'
controlled shutdowns) is not compared, so a scenario leaves time after its last heal.  It is made of streams,
each compared entry by entry:

- ``faults``: each fault as it fired: id, kind, target and the brokers it hit;
- ``controller``: each ``controller_elected``: the epoch and the winner;
- ``<topic>/<p>``: each ``partition_state_written``: reason, leader, leader epoch and ISR (as a set);
- ``coordinator <group>``: each ``coordinator_loaded`` of the group's offsets partition: the broker
  and the leader epoch it loaded at.

Every entry also carries its **phase**, the last fault started before it (``-`` before the first), so a
change that comes under another fault than on the other side is a difference too.  Streams are compared
one by one, not interleaved: two partitions' changes a few ms apart may land in either order on real
processes.

**Broker ids** are the same on both sides because the scenario pins them (``cluster.controller``: that
broker starts alone and wins the first election; ``topics[].replicas``: every assignment, the
offsets topic's included).  What no scenario can pin is which surviving broker wins a controller election
after the controller dies: that is a race for the ``/controller`` znode, in Kafka as here.  So the
``controller`` stream alone is relabelled by first appearance (``c1`` the first controller, ``c2`` the
next new one...): it compares the epochs and whether a controller is new or returns, not which
survivor won.  A scenario that needs more should make the election uncontested.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from judge.history import read_history
from judge.timeline import END_PHASE
from kafkacommon.hashing import partition_for
from node.events import read_run_events

OFFSETS_TOPIC = "__consumer_offsets"
FAULTS, CONTROLLER = "faults", "controller"


@dataclass(frozen=True)
class Step:
    stream: str
    phase: int                 # the last fault started before it; -1 before the first
    what: tuple                # what is compared
    t_ms: float                # since the run's first event (shown, never compared)

    def key(self) -> tuple:
        return (self.phase, self.what)

    def text(self) -> str:
        return f"{_phase(self.phase):>4}  {self.stream:<24} {describe(self.stream, self.what)}"


def _phase(p: int) -> str:
    return "-" if p < 0 else f"#{p}"


def describe(stream: str, what: tuple) -> str:
    if stream == FAULTS:
        fid, kind, target, nodes, skipped = what
        hit = f"skipped ({skipped})" if skipped else f"-> {', '.join(map(str, nodes))}"
        return f"fault {fid}: {kind} {target} {hit}"
    if stream == CONTROLLER:
        epoch, label = what
        return f"controller {label} epoch {epoch}"
    if stream.startswith("coordinator "):
        broker, epoch = what
        return f"loaded on broker {broker} at leader epoch {epoch}"
    reason, leader, epoch, isr = what
    return f"{reason}: leader {leader} epoch {epoch} isr {list(isr)}"


def _node_id(n: Any) -> Any:
    return int(n[1:]) if isinstance(n, str) and n[:1] == "b" and n[1:].isdigit() else n


def control_sequence(run_dir: Path | str) -> list[Step]:
    """The compared sequence of a run directory (a chaos run's, or ``sim run --out``'s)."""
    run_dir = Path(run_dir)
    ops = read_history(run_dir / "history.jsonl")
    events = read_run_events(run_dir / "cluster")
    return sequence_of(ops, events)


def sequence_of(ops: list[dict[str, Any]], events: list[dict[str, Any]]) -> list[Step]:
    """The compared sequence of a history and its merged event logs (docs/chaos.md, docs/events.md)."""
    starts: list[int] = []        # the fault starts' times, in order
    stop = None
    steps: list[tuple[int, str, tuple]] = []
    for op in ops:
        if op.get("process") != "nemesis":
            continue
        v = op.get("value") or {}
        if op.get("f") == END_PHASE or v.get("phase") == END_PHASE:
            stop = op["time"] if stop is None else stop
        elif v.get("phase") == "start" and "fault" in v:
            starts.append(op["time"])
            steps.append((op["time"], FAULTS, (v["fault"], v.get("kind"), v.get("target"),
                                               tuple(_node_id(n) for n in v.get("nodes") or ()),
                                               v.get("skipped"))))
    groups = sorted({op["group"] for op in ops if isinstance(op.get("group"), str)})
    offsets_parts = 1 + max((e["partition"] for e in events if e.get("type") == "partition_state_written"
                             and e.get("topic") == OFFSETS_TOPIC), default=-1)
    coordinated: dict[int, list[str]] = {}
    if offsets_parts:
        for g in groups:
            coordinated.setdefault(partition_for(g, offsets_parts), []).append(g)
    for e in events:
        t, kind = e["mono_ns"], e.get("type")
        if stop is not None and t > stop:
            break
        if kind == "controller_elected":
            steps.append((t, CONTROLLER, (e["epoch"], e["broker"])))
        elif kind == "partition_state_written":
            steps.append((t, f"{e['topic']}/{e['partition']}",
                          (e["reason"], e["leader"], e["leader_epoch"], tuple(sorted(e["isr"])))))
        elif kind == "coordinator_loaded":
            for g in coordinated.get(e.get("partition"), ()):
                steps.append((t, f"coordinator {g}", (e["broker"], e["leader_epoch"])))
    steps.sort(key=lambda s: s[0])
    t0 = steps[0][0] if steps else 0
    labels: dict[int, str] = {}
    out = []
    for t, stream, what in steps:
        if stream == CONTROLLER:   # relabelled by first appearance (see the module's doc)
            what = (what[0], labels.setdefault(what[1], f"c{len(labels) + 1}"))
        phase = sum(1 for s in starts if s <= t) - 1
        out.append(Step(stream, phase, what, (t - t0) / 1e6))
    return out


@dataclass(frozen=True)
class Difference:
    stream: str
    index: int                 # the first entry of the stream that differs
    real: Step | None          # None: the stream ended on this side
    sim: Step | None
    before: Step | None        # the last entry both sides agree on

    def text(self) -> str:
        def side(s: Step | None) -> str:
            return s.text() if s is not None else "(nothing more)"
        agreed = f"after: {self.before.text()}" if self.before else "at its first entry"
        return (f"{self.stream}, entry {self.index + 1} ({agreed})\n"
                f"  real: {side(self.real)}\n  sim:  {side(self.sim)}")


def _streams(steps: Iterable[Step]) -> dict[str, list[Step]]:
    out: dict[str, list[Step]] = {}
    for s in steps:
        out.setdefault(s.stream, []).append(s)
    return out


def compare(real: list[Step], sim: list[Step]) -> list[Difference]:
    """Each stream's first difference, the earliest first (by when it came in the real run)."""
    a, b = _streams(real), _streams(sim)
    diffs = []
    for stream in list(a) + [s for s in b if s not in a]:
        ra, sb = a.get(stream, []), b.get(stream, [])
        for i in range(max(len(ra), len(sb))):
            x = ra[i] if i < len(ra) else None
            y = sb[i] if i < len(sb) else None
            if x is None or y is None or x.key() != y.key():
                diffs.append(Difference(stream, i, x, y, ra[i - 1] if i else None))
                break

    def when(d: Difference) -> float:
        return d.real.t_ms if d.real is not None else (d.before.t_ms if d.before is not None else 0.0)
    return sorted(diffs, key=when)


def report(real: list[Step], sim: list[Step], diffs: list[Difference]) -> str:
    """The real run's sequence (each entry marked = when the simulator's stream has it at the same place),
    then the first difference, or SAME."""
    bad = {(d.stream, d.index) for d in diffs}
    seen: dict[str, int] = {}
    lines = [f"compared sequence (real run: {len(real)} entries, simulated: {len(sim)}; phase = the last fault "
             f"started; controllers relabelled by first appearance)"]
    for s in real:
        i = seen[s.stream] = seen.get(s.stream, -1) + 1
        first_bad = min((d.index for d in diffs if d.stream == s.stream), default=None)
        mark = "=" if first_bad is None or i < first_bad else ("X" if (s.stream, i) in bad else "?")
        lines.append(f"  {mark} {s.t_ms:9.1f} ms  {s.text()}")
    if not diffs:
        lines.append("SAME: every stream has the same entries in the same order, under the same faults")
    else:
        lines.append(f"DIFFERENT in {len(diffs)} stream(s); the first difference:")
        lines.append("  " + diffs[0].text().replace("\n", "\n  "))
        for d in diffs[1:]:
            lines.append("also: " + d.text().replace("\n", "\n  "))
    return "\n".join(lines)


def run_both(scenario_path: Path | str, out: Path, seed: int = 1, real_dir: Path | None = None,
             sim_dir: Path | None = None, stream: Any = None) -> tuple[list[Step], list[Step], dict[str, str]]:
    """Run the scenario on real processes (``chaos run``) and in the simulator (``sim run --scenario``),
    each into a directory under ``out`` (or read ``real_dir``/``sim_dir`` when given), and return both
    compared sequences and the two runs' verdicts."""
    import io

    from chaos.runner import ChaosRun
    from chaos.scenario import load_scenario
    from sim import scenario as sim_scenario
    from sim.run import SimRun

    verdicts = {}
    if real_dir is None:
        real_dir = out / "real"
        r = ChaosRun(load_scenario(scenario_path), seed, real_dir, stream=stream or io.StringIO(), progress=False).run()
        verdicts["real"] = r.verdict
    if sim_dir is None:
        sim_dir = out / "sim"
        verdicts["sim"] = SimRun(sim_scenario.load(scenario_path, seed=seed), sim_dir).run().verdict
    return control_sequence(real_dir), control_sequence(sim_dir), verdicts
