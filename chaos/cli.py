"""``kafkasim chaos list | run | check``.

Exit codes of ``run`` and ``check``: 0 valid, 1 invalid (anomalies found),
2 unknown (the checkers lacked data), 3 the run could not be carried out
(a bad scenario, a cluster that would not start).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

EXIT_ERROR = 3


def cmd_list(args: argparse.Namespace) -> int:
    from chaos.scenario import SCENARIO_DIR, ScenarioError, load_scenario

    for p in sorted(SCENARIO_DIR.glob("*.yaml")):
        try:
            s = load_scenario(p)
        except ScenarioError as e:
            print(f"{p.stem:<28} INVALID: {e}")
            continue
        kinds = sorted({f"{f.kind} {f.target}" for f in s.faults})
        print(f"{p.stem:<28} {s.duration_s:>5.0f}s  {s.brokers} brokers, {s.zookeeper_servers} zk  {s.description}")
        for k in kinds:
            print(f"{'':<30}- {k}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from chaos.runner import ChaosRun, default_out
    from chaos.scenario import ScenarioError, find_scenario, load_scenario
    from zk.client import quiet_client_logs

    quiet_client_logs()  # the runner's own ZooKeeper client: faults are expected

    try:
        scenario = load_scenario(find_scenario(args.scenario))
        out = Path(args.out) if args.out else default_out(scenario, args.seed)
        run = ChaosRun(scenario, args.seed, out, duration_s=args.duration, planted_bugs=tuple(args.plant_bug or ()),
                       progress=not args.no_progress, target=args.target)
    except (ScenarioError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_ERROR
    if args.schedule_only:
        from chaos.schedule import format_schedule
        print(format_schedule(run.faults))
        return 0
    try:
        return run.run().exit_code
    except FileExistsError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except (RuntimeError, TimeoutError, OSError) as e:
        print(f"error: the run could not be carried out: {e}", file=sys.stderr)
        return EXIT_ERROR


def cmd_check(args: argparse.Namespace) -> int:
    """Run the checkers and the timeline again on a finished run directory."""
    from judge.checkers import check
    from judge.history import read_history
    from judge.timeline import failover_timeline
    from judge.timeline_summary import format_table
    from node.events import read_run_events

    run = Path(args.run)
    if not (run / "history.jsonl").exists():
        print(f"error: {run} has no history.jsonl (not a chaos run directory)", file=sys.stderr)
        return EXIT_ERROR
    from chaos.apps import load_app
    ops = read_history(run / "history.jsonl")
    events = read_run_events(run / "cluster")
    app = load_app(run)   # a run of the user's application (workload.command)
    from chaos.txn_run import load_txn
    txn = load_txn(run)   # a run of a transactional workload (workload.transactions)
    result = check(ops, events, app=app, txn=txn)
    print(format_table(failover_timeline(ops, events, observed_groups=[app["group"]] if app else ())))
    if txn is not None:
        import yaml
        from judge.txn_timeline import format_txn_table, txn_failover_timeline
        cfg = yaml.safe_load((run / "cluster.yaml").read_text()) if (run / "cluster.yaml").exists() else {}
        print(format_txn_table(txn_failover_timeline(ops, events, cfg.get("transaction.state.log.num.partitions", 50))))
    if args.json:
        print(json.dumps(result.to_json(), indent=2, default=str))
    for a in result.anomalies:
        print(f"ANOMALY {a.kind}: {a.message}")
    for u in result.unknowns:
        print(f"unknown: {u}")
    print(f"verdict: {result.verdict.upper()}")
    return result.exit_code


def add_parsers(sub) -> None:
    c = sub.add_parser("chaos", help="chaos runs: faults aimed by role, histories, checkers")
    cs = c.add_subparsers(dest="chaos_command", required=True)
    ls = cs.add_parser("list", help="the scenarios in scenarios/")
    ls.set_defaults(func=cmd_list)
    r = cs.add_parser("run", help="run a scenario; exit 0 valid, 1 invalid, 2 unknown, 3 error")
    r.add_argument("scenario", help="a scenario file, or a name from `kafkasim chaos list`")
    r.add_argument("--seed", type=int, default=1, help="seeds the fault schedule and every random choice")
    r.add_argument("--duration", type=float, default=None, help="seconds (default: the scenario's duration.s)")
    r.add_argument("--out", default=None, help="run directory (default: runs/<scenario>-<seed>-<time>)")
    r.add_argument("--plant-bug", action="append", metavar="NAME",
                   help="break the brokers on purpose (see docs/chaos.md): commit-before-hw, zombie-controller, "
                        "fenced-generation-commit")
    r.add_argument("--no-progress", action="store_true", help="no progress line")
    r.add_argument("--target", choices=["processes", "compose"], default="processes",
                   help="processes: brokers as local processes (default); compose: the docker-compose lab's "
                        "containers on the host's network, faults through Docker (README, 'docker-compose')")
    r.add_argument("--schedule-only", action="store_true", help="print the schedule the seed gives, and stop")
    r.set_defaults(func=cmd_run)
    k = cs.add_parser("check", help="check a finished run directory again")
    k.add_argument("run")
    k.add_argument("--json", action="store_true", help="also print the checkers' full result")
    k.set_defaults(func=cmd_check)
