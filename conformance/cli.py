"""``kafkasim conformance [--out DIR] [--filter API[,API...]] [--list]``: the whole suite, its table, its exit
status (0 only when no difference is left that docs/deviations.md does not list)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_parsers(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("conformance", help="the same requests to Kafka 2.8.2 and to kafkasim, the answers compared "
                                           "field by field (docs/conformance.md)")
    c.add_argument("--out", default="run/conformance", help="where the clusters' files and conformance.json go")
    c.add_argument("--filter", default=None, metavar="API",
                   help="only these APIs (names, comma-separated: Metadata,JoinGroup) or case ids")
    c.add_argument("--list", action="store_true", help="list the cases and exit (starts nothing)")
    c.add_argument("--verbose", "-v", action="store_true", help="a line per case as it runs")
    c.set_defaults(func=cmd_conformance)


def cmd_conformance(args: argparse.Namespace) -> int:
    # imported here, not at the top: `kafkasim` builds every command's parser on each call (cli/data.py)
    from conformance.runner import run, select, write
    from conformance.tables import all_cases

    cases = select(all_cases(), args.filter)
    if not cases:
        print(f"error: no case matches {args.filter!r}", file=sys.stderr)
        return 2
    if args.list:
        for c in cases:
            print(f"{c.id:<56} -> {c.target}")
        print(f"{len(cases)} cases")
        return 0
    from conformance.clusters import Sides
    out = Path(args.out).resolve()
    print(f"conformance: {len(cases)} cases; starting Kafka 2.8.2 and kafkasim (2 brokers each) under {out}",
          flush=True)

    def progress(r) -> None:
        if args.verbose or r.status in ("differing", "error"):
            print(f"  {r.status:<9} {r.case.id}", flush=True)

    with Sides(out / "clusters") as sides:
        report = run(sides, args.filter, cases=cases, progress=progress)
    print()
    report.print(sys.stdout)
    print(f"\nanswers and differences: {write(report, out)}")
    return 0 if report.ok else 1
