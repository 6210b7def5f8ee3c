"""The fault schedule: generated from a seed, so the same seed gives the same schedule.

A pure function of (scenario, seeded generator, duration): faults come one after another
(a fault heals before the next one starts), starting ``faults.start.after.ms``
into the run, ``faults.interval.ms`` apart, none starting in the last
``faults.quiet.end.ms``.  Each fault carries its own ``seed`` for the choices
made when it fires (``random``, ``minority``...), so resolving a fault never
disturbs the schedule.  The schedule is written to ``schedule.json`` in the
run directory and printed; it contains nothing that varies between runs.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, Sequence, TypeVar

from chaos.scenario import NETWORK_KINDS, Range, Scenario

_T = TypeVar("_T")


class ScheduleRng(Protocol):
    """The generator a schedule is drawn from: ``random.Random(schedule_rng_seed(seed))``, made by the caller."""

    def randint(self, a: int, b: int) -> int: ...

    def choices(self, population: Sequence[_T], weights: Sequence[float]) -> list[_T]: ...

    def getrandbits(self, k: int) -> int: ...


def schedule_rng_seed(seed: int) -> str:
    """What a run's schedule generator is seeded with, so one seed always gives one schedule."""
    return f"kafkasim-schedule:{seed}"


@dataclass(frozen=True)
class Fault:
    id: int
    at_ms: int
    heal_at_ms: int
    kind: str
    target: str
    seed: int
    peer: str | None = None
    direction: str | None = None
    latency_ms: int | None = None
    jitter_ms: int | None = None
    loss: float | None = None
    truncate_bytes: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Fault":
        return cls(**d)

    def describe(self) -> str:
        what = f"{self.kind} {self.target}"
        if self.kind in NETWORK_KINDS:
            arrow = {"both": "<->", "to": "->", "from": "<-"}[self.direction or "both"]
            what = f"{self.kind} {self.target} {arrow} {self.peer}"
            if self.kind == "latency":
                what += f" {self.latency_ms}±{self.jitter_ms} ms"
            elif self.kind == "loss":
                what += f" {self.loss:.0%}"
        elif self.kind == "truncate":
            what += f" (-{self.truncate_bytes} bytes)"
        return what


def _draw(rng: ScheduleRng, r: Range) -> int:
    return r.lo if r.lo == r.hi else rng.randint(r.lo, r.hi)


def make_schedule(scenario: Scenario, rng: ScheduleRng, duration_s: float | None = None) -> list[Fault]:
    """The run's faults, drawn from ``rng`` (``random.Random(schedule_rng_seed(seed))``), or the scenario's
    ``faults.schedule`` as given (cut at the duration)."""
    end_ms = int((duration_s if duration_s is not None else scenario.duration_s) * 1000)
    if scenario.schedule is not None:   # faults.schedule: given, not drawn
        return [Fault(**{**d, "heal_at_ms": min(d["heal_at_ms"], end_ms)}) for d in scenario.schedule
                if d["at_ms"] < end_ms]
    mix = scenario.faults
    if not mix:
        return []
    weights = [m.weight for m in mix]
    out: list[Fault] = []
    t = scenario.fault_start_ms
    while t < end_ms - scenario.quiet_end_ms:
        spec = rng.choices(mix, weights)[0]
        dur = _draw(rng, spec.duration_ms)
        heal = min(t + dur, end_ms)
        net = spec.kind in NETWORK_KINDS
        out.append(Fault(
            id=len(out), at_ms=t, heal_at_ms=heal, kind=spec.kind, target=spec.target,
            seed=rng.getrandbits(32),
            peer=spec.peer if net else None, direction=spec.direction if net else None,
            latency_ms=spec.latency_ms if spec.kind == "latency" else None,
            jitter_ms=spec.jitter_ms if spec.kind == "latency" else None,
            loss=spec.loss if spec.kind == "loss" else None,
            truncate_bytes=_draw(rng, spec.truncate_bytes) if spec.kind == "truncate" else None))
        t = heal + _draw(rng, scenario.fault_interval_ms)
    return out


def schedule_document(scenario: Scenario, seed: int, duration_s: float, faults: list[Fault]) -> dict[str, Any]:
    return {"scenario": scenario.name, "seed": seed, "duration_s": duration_s,
            "faults": [f.to_json() for f in faults]}


def write_schedule(path: Path, doc: dict[str, Any]) -> None:
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")


def format_schedule(faults: list[Fault]) -> str:
    if not faults:
        return "  (no faults)"
    return "\n".join(f"  #{f.id:<3} {f.at_ms / 1000:7.1f}s  heal {f.heal_at_ms / 1000:7.1f}s  {f.describe()}"
                     for f in faults)
