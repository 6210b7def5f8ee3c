"""``kafkasim compare SCENARIO... [--kafkasim-only|--kafka-only] [--out DIR]`` (docs/compare.md).

Each scenario runs on kafkasim, then on Kafka 2.8.2 (one after the other: never both clusters at once),
into ``DIR/<scenario>/{kafkasim,kafka}/observations.json``; the comparison goes to ``report.txt`` and
``result.json`` there.  With ``--kafkasim-only`` (``--kafka-only``) only that side runs, and the other side's
last observations in the directory, if any, are compared with it; ``--compare-only`` runs nothing and compares
the directory's last runs again.  ``all`` runs every scenario of
scenarios/compare/ and ends with a table of outcomes.

Exit status: 0 when no scenario has an unlisted difference; 1 when one has; 2 for a bad scenario.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from chaos.scenario import ScenarioError


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("compare", help="run a scenario on Kafka 2.8.2 and on kafkasim and compare what both "
                                       "expose (docs/compare.md)")
    p.add_argument("scenarios", nargs="+", metavar="SCENARIO",
                   help="a file, a name in scenarios/compare/, or 'all'")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--kafkasim-only", action="store_true", help="run kafkasim only (compare with DIR's Kafka run)")
    g.add_argument("--kafka-only", action="store_true", help="run Kafka 2.8.2 only (compare with DIR's kafkasim run)")
    g.add_argument("--compare-only", action="store_true", help="run nothing: compare DIR's last runs again")
    p.add_argument("--out", default="compare-runs", help="directory for the runs (default: compare-runs)")
    p.add_argument("--quiet", action="store_true", help="print only each scenario's summary line")
    p.set_defaults(func=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    from compare.scenario import find_compare, list_compare, load_compare

    try:
        paths = [p for name in args.scenarios for p in (list_compare() if name == "all" else [find_compare(name)])]
        scenarios = [load_compare(p) for p in paths]
    except ScenarioError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    sides = (["kafkasim"] if args.kafkasim_only else ["kafka"] if args.kafka_only else []
             if args.compare_only else ["kafkasim", "kafka"])
    rows = []
    for s in scenarios:
        rows.append(run_one(s, Path(args.out) / s.name, sides, quiet=args.quiet))
    if len(rows) > 1:
        print()
        print(table(rows))
    return 1 if any(r.get("unlisted") for r in rows) or any(r.get("missing") for r in rows) else 0


def run_one(scenario: Any, out: Path, sides: list[str], quiet: bool = False) -> dict[str, Any]:
    from compare.diff import KNOWN, compare, merge_phases, outcome, report, scenario_known, streams, summary_line
    from compare.normalize import entries
    from compare.runner import OBSERVATIONS, run_side
    from compare.sides import pick_ports

    say = (lambda _text: None) if quiet else (lambda text: print(text, flush=True))
    out.mkdir(parents=True, exist_ok=True)
    ports = pick_ports(scenario.base.brokers)
    t0 = time.monotonic()
    for side in sides:
        run_side(scenario, side, out, ports, say)
    obs = {}
    for side in ("kafka", "kafkasim"):
        f = out / side / OBSERVATIONS
        if f.exists():
            obs[side] = json.loads(f.read_text())
    row: dict[str, Any] = {"scenario": scenario.name, "seconds": round(time.monotonic() - t0)}
    if len(obs) < 2:
        missing = [s for s in ("kafka", "kafkasim") if s not in obs]
        print(f"{scenario.name}: nothing to compare with (no {', '.join(missing)} run in {out})")
        return {**row, "missing": missing}
    a, b = (merge_phases(entries(obs[side]), scenario.merged) for side in ("kafka", "kafkasim"))
    diffs = compare(a, b, KNOWN + scenario_known(scenario))
    text = report(diffs, a, b, title=f"== {scenario.name}: Kafka 2.8.2 vs kafkasim")
    (out / "report.txt").write_text(text + "\n")
    row.update(outcome(diffs), streams=len(set(streams(a)) | set(streams(b))),
               errors={s: o["error"] for s, o in obs.items() if o.get("error")})
    (out / "result.json").write_text(json.dumps(row, indent=2))
    print(summary_line(diffs, row["streams"]) if quiet else text, flush=True)
    return row


def table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'scenario':<34} {'streams':>7} {'equal':>6} {'listed':>6} {'unlisted':>8} {'s':>5}"]
    for r in rows:
        if r.get("missing"):
            lines.append(f"{r['scenario']:<34} (no {', '.join(r['missing'])} run)")
            continue
        equal = r["streams"] - r["differences"]
        lines.append(f"{r['scenario']:<34} {r['streams']:>7} {equal:>6} {r['listed']:>6} {r['unlisted']:>8} "
                     f"{r['seconds']:>5}" + (f"  aborted: {r['errors']}" if r.get("errors") else ""))
    return "\n".join(lines)
