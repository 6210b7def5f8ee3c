"""A simulated run as a file: the options and an explicit fault schedule (what ``sim shrink`` prints).

    seed: 12
    brokers: 3
    groups: 1
    duration.s: 30
    planted_bugs: [hw-ignores-lagging-isr]
    faults:
      - {at_ms: 3000, heal_at_ms: 5200, kind: kill, target: "coordinator:g1", seed: 3141}

``kafkasim sim run --scenario FILE`` runs it.  Every key is checked; an unknown one is an error
naming it.  A fault's ``id`` defaults to its position, its ``seed`` to 0.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from chaos.schedule import Fault
from chaos.targets import TargetError, parse_target
from sim import bugs
from sim.faults import KINDS
from sim.run import SimOptions

KEYS = {"seed", "brokers", "groups", "members", "duration.s", "planted_bugs", "partitions", "producers", "rate",
        "faults"}
FAULT_KEYS = {"id", "at_ms", "heal_at_ms", "kind", "target", "seed", "peer", "direction", "latency_ms",
              "truncate_bytes"}


class SimScenarioError(ValueError):
    pass


def _fault(i: int, d: Any) -> Fault:
    where = f"faults[{i}]"
    if not isinstance(d, dict):
        raise SimScenarioError(f"{where}: a mapping, got {d!r}")
    unknown = sorted(set(d) - FAULT_KEYS)
    if unknown:
        raise SimScenarioError(f"{where}.{unknown[0]}: unknown key (known: {', '.join(sorted(FAULT_KEYS))})")
    for k in ("at_ms", "heal_at_ms", "kind", "target"):
        if k not in d:
            raise SimScenarioError(f"{where}.{k}: missing")
    if d["kind"] not in KINDS:
        raise SimScenarioError(f"{where}.kind: {d['kind']!r} is not one of {', '.join(KINDS)}")
    try:
        parse_target(str(d["target"]))
        if d.get("peer") is not None:
            parse_target(str(d["peer"]), allow_sets=True)
    except TargetError as e:
        raise SimScenarioError(f"{where}: {e}") from None
    if not (isinstance(d["at_ms"], int) and isinstance(d["heal_at_ms"], int) and 0 <= d["at_ms"] <= d["heal_at_ms"]):
        raise SimScenarioError(f"{where}: at_ms and heal_at_ms are ints with 0 <= at_ms <= heal_at_ms")
    return Fault(id=d.get("id", i), at_ms=d["at_ms"], heal_at_ms=d["heal_at_ms"], kind=d["kind"],
                 target=str(d["target"]), seed=int(d.get("seed", 0)), peer=d.get("peer"),
                 direction=d.get("direction"), latency_ms=d.get("latency_ms"), truncate_bytes=d.get("truncate_bytes"))


def parse(doc: Any, seed: int | None = None) -> SimOptions:
    if not isinstance(doc, dict):
        raise SimScenarioError("a simulation scenario is a mapping")
    unknown = sorted(set(doc) - KEYS)
    if unknown:
        raise SimScenarioError(f"{unknown[0]}: unknown key (known: {', '.join(sorted(KEYS))})")
    try:
        planted = bugs.check(tuple(doc.get("planted_bugs") or ()))
    except ValueError as e:
        raise SimScenarioError(f"planted_bugs: {e}") from None
    faults = [_fault(i, d) for i, d in enumerate(doc.get("faults") or [])]
    opts = SimOptions(seed=int(doc.get("seed", 0) if seed is None else seed), brokers=int(doc.get("brokers", 3)),
                      groups=int(doc.get("groups", 1)), members=int(doc.get("members", 2)),
                      duration_s=float(doc.get("duration.s", 30)), bugs=planted,
                      partitions=int(doc.get("partitions", 3)), producers=int(doc.get("producers", 1)),
                      rate=float(doc.get("rate", 20.0)), schedule=faults)
    if opts.brokers < 1 or opts.groups < 0 or opts.duration_s <= 0:
        raise SimScenarioError("brokers >= 1, groups >= 0 and duration.s > 0")
    return opts


def load(path: Path | str, seed: int | None = None) -> SimOptions:
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as e:
        raise SimScenarioError(f"{path}: {e}") from None
    return parse(doc, seed)


def dump(opts: SimOptions, faults: list[Fault], comment: str = "") -> str:
    doc: dict[str, Any] = {"seed": opts.seed, "brokers": opts.brokers, "groups": opts.groups,
                           "members": opts.members, "duration.s": opts.duration_s,
                           "planted_bugs": list(opts.bugs), "partitions": opts.partitions,
                           "producers": opts.producers, "rate": opts.rate,
                           "faults": [f.to_json() for f in faults]}
    head = "".join(f"# {line}\n" for line in comment.splitlines()) if comment else ""
    return head + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None)
