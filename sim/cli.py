"""``kafkasim sim run | replay | sweep | shrink``: seeded simulated runs of the whole cluster (docs/simulation.md).

Exit codes of ``run`` and ``replay``: 0 valid, 1 invalid, 2 unknown, 3 bad
arguments (as ``chaos run``'s).  ``sweep`` exits 1 when a seed failed (invalid, or crashed: its run raised);
``shrink`` 1 when it found a smaller failing schedule, 0 when the seed does
not fail.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import replace
from pathlib import Path

EXIT_ERROR = 3
SWEEP_TRACEBACKS = 3   # crashed seeds whose whole traceback a sweep prints (--out keeps all)


TXN_ZOMBIES_MS = (4000, 8000)
TXN_CRASHES_MS = (2000, 6000)

def _options(args: argparse.Namespace, seed: int):
    from sim import bugs, scenario
    from sim.faults import FaultError, check_kinds
    from sim.run import SimOptions

    if getattr(args, "scenario", None):
        opts = scenario.load(args.scenario, seed=seed)
        if args.plant_bug:
            try:
                opts = replace(opts, bugs=bugs.check(tuple(args.plant_bug)))
            except ValueError as e:
                raise SystemExit(f"error: {e}")
        return _invariant_options(args, opts)
    seed = 1 if seed is None else seed
    kinds = tuple(k for k in (args.faults or "").split(",") if k) if args.faults is not None else None
    try:
        if args.log_dirs < 1:
            raise ValueError(f"--log-dirs {args.log_dirs}: at least 1")
        opts = SimOptions(seed=seed, brokers=args.brokers, groups=args.groups, duration_s=args.duration,
                          bugs=bugs.check(tuple(args.plant_bug or ())), transactions=args.transactions,
                          zombie_every_ms=TXN_ZOMBIES_MS if args.txn_zombies else None,
                          txn_crash_every_ms=TXN_CRASHES_MS if args.txn_crashes else None,
                          config={"log_dirs": args.log_dirs} if args.log_dirs != 1 else {})
        if args.transactions < 0 or ((args.txn_zombies or args.txn_crashes) and not args.transactions):
            raise ValueError("--transactions N (N >= 1) with --txn-zombies or --txn-crashes")
        if kinds is not None:
            opts = replace(opts, faults=check_kinds(kinds))
    except (ValueError, FaultError) as e:
        raise SystemExit(f"error: {e}")
    return _invariant_options(args, opts)


def _invariant_options(args: argparse.Namespace, opts):
    if getattr(args, "invariants_every", 1) < 1:
        raise SystemExit("error: --invariants-every takes a whole number of steps, 1 or more")
    return replace(opts, invariants=not getattr(args, "no_invariants", False),
                   invariants_every=getattr(args, "invariants_every", 1))


def _say_run(opts, result, out: Path | None) -> None:
    from chaos.schedule import format_schedule
    from judge.timeline_summary import format_table

    print(f"sim run  seed {opts.seed}  {opts.brokers} brokers  {opts.groups} groups  {opts.duration_s:g}s simulated"
          + (f"  -> {out}" if out else ""))
    if opts.bugs:
        print(f"PLANTED BUGS: {', '.join(opts.bugs)}")
    print("faults:\n" + format_schedule(result.faults))
    print()
    print(format_table(result.results["timeline"]))
    inv = result.results.get("invariants")
    if inv is not None:
        print(f"invariants: checked after every {'' if inv['every'] == 1 else str(inv['every']) + ' '}"
              f"simulated event{'s' if inv['every'] > 1 else ''} ({inv['checks']} checks)")
    if "txn_timeline" in result.results:
        from judge.txn_timeline import format_txn_table
        t = result.results["transactions"]
        print("\ntransaction coordinators:\n" + format_txn_table(result.results["txn_timeline"]))
        print(f"transactions: {t['commits']} committed, drained: {t['drained']}, zombies: {t['zombies']}, "
              f"crashes: {t['crashes']}")
    for a in result.results["checks"]["anomalies"]:
        print(f"ANOMALY {a['kind']}: {a['message']}")
        stop = a.get("details", {}).get("stopped_at")
        if stop is not None:
            print(f"  the run stopped at step {stop['step_index']} ({stop['time_ms']:.3f} ms): {stop['step']}")
            for e in stop["events"]:
                fields = {k: v for k, v in e.items() if k not in ("mono_ns", "broker", "type")}
                print(f"    broker {e.get('broker')}: {e.get('type')} {json.dumps(fields, default=str)}")
    for u in result.results["checks"]["unknowns"]:
        print(f"unknown: {u}")
    for n in result.results["workload_errors"]:
        print(f"workload error: {n}")
    print(f"digest: {result.digest}")
    print(f"verdict: {result.verdict.upper()}  (seed {opts.seed}; replay: kafkasim sim replay {opts.seed})")


def cmd_run(args: argparse.Namespace) -> int:
    from sim.run import SimRun
    from sim.scenario import SimScenarioError

    try:
        opts = _options(args, args.seed)
    except SimScenarioError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_ERROR
    out = Path(args.out) if args.out else None
    if out is not None and out.exists() and any(out.iterdir()):
        print(f"error: {out} already exists and is not empty; choose another --out", file=sys.stderr)
        return EXIT_ERROR
    result = SimRun(opts, out).run()
    _say_run(opts, result, out)
    return result.exit_code


def _file_digest(run: Path) -> str:
    h = hashlib.sha256()
    for p in [run / "history.jsonl"] + sorted((run / "cluster" / "events").glob("broker-*.jsonl")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def cmd_replay(args: argparse.Namespace) -> int:
    """The same run again; with --check DIR, its history and event logs compared byte for byte to DIR's."""
    import tempfile

    from sim.run import SimRun

    opts = _options(args, args.seed)
    with tempfile.TemporaryDirectory(prefix="kafkasim-replay-") as tmp:
        out = Path(args.out) if args.out else Path(tmp) / "run"
        result = SimRun(opts, out).run()
        _say_run(opts, result, out if args.out else None)
        if args.check:
            mine, theirs = _file_digest(out), _file_digest(Path(args.check))
            same = mine == theirs
            print(f"files: {mine[:16]} vs {theirs[:16]} in {args.check}: {'IDENTICAL' if same else 'DIFFERENT'}")
            if not same:
                return 1
        if args.digest:
            same = result.digest == args.digest
            print(f"digest: {result.digest} here, {args.digest} given: {'IDENTICAL' if same else 'DIFFERENT'}")
            if not same:
                return 1
    return result.exit_code


def cmd_sweep(args: argparse.Namespace) -> int:
    import time

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from sim.sweep import CRASHED, parse_seeds, sweep, verdict_counts, write_outcomes

    try:
        seeds = parse_seeds(args.seeds)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_ERROR
    out = Path(args.out) if args.out else None
    if out is not None and out.exists() and any(out.iterdir()):
        print(f"error: {out} already exists and is not empty; choose another --out", file=sys.stderr)
        return EXIT_ERROR
    base = _options(args, seeds[0])
    console = Console(stderr=False)
    failing: list = []
    crashed: list = []
    t0 = time.perf_counter()
    with Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[found]}"), console=console, disable=args.no_progress) as bar:
        task = bar.add_task("seeds", total=len(seeds), found="")

        def done(o) -> None:
            if o.verdict == "invalid":
                failing.append(o)
            elif o.verdict == CRASHED:
                crashed.append(o)
            bar.update(task, advance=1, found=f"invalid: {len(failing)}  crashed: {len(crashed)}")
        spark_info = None
        if args.spark:
            from sim.spark_sweep import spark_sweep, stop
            try:
                outcomes, spark_info = spark_sweep(args.spark, base, seeds, tasks=args.tasks, on_done=done)
            finally:
                stop()
        else:
            outcomes = sweep(base, seeds, jobs=args.jobs, on_done=done, stop_on_failure=args.stop_on_failure)
    wall = time.perf_counter() - t0
    counts = verdict_counts(outcomes)
    how = f"on {args.spark}, {spark_info.tasks} tasks" if spark_info else f"--jobs {args.jobs}"
    print(f"sweep of seeds {args.seeds}: {len(outcomes)} run, {wall:.1f} s wall, {how}, "
          f"{len(outcomes) / wall * 60:.1f} seeds per minute")
    t = Table(title="verdicts")
    for col in ("verdict", "seeds", "coordinator moves", "simulated s", "wall s"):
        t.add_column(col, justify="right" if col != "verdict" else "left")
    for v in counts:
        mine = [o for o in outcomes if o.verdict == v]
        t.add_row(v, str(len(mine)), str(sum(o.failovers for o in mine)),
                  f"{sum(o.simulated_ms for o in mine) / 1000:.0f}", f"{sum(o.wall_s for o in mine):.1f}")
    console.print(t)
    if failing:
        f = Table(title="failing seeds")
        for col in ("seed", "anomalies", "faults", "first violation"):
            f.add_column(col)
        for o in sorted(failing, key=lambda o: o.seed):
            f.add_row(str(o.seed), ", ".join(o.kinds), str(o.faults), o.violation)
        console.print(f)
    if crashed:
        crashed.sort(key=lambda o: o.seed)
        c = Table(title="crashed seeds (the run raised)")
        for col in ("seed", "error"):
            c.add_column(col)
        for o in crashed:
            c.add_row(str(o.seed), o.error)
        console.print(c)
        for o in crashed[:SWEEP_TRACEBACKS]:   # plain prints: a traceback is copied, not read in a table
            print(f"seed {o.seed} crashed:\n{o.traceback}", end="" if o.traceback.endswith("\n") else "\n")
        if len(crashed) > SWEEP_TRACEBACKS:
            print(f"... {len(crashed) - SWEEP_TRACEBACKS} more tracebacks"
                  + (f" in {out / 'crashed'}" if out else " (--out DIR keeps every one)"))
    first = min(failing + crashed, key=lambda o: o.seed, default=None)
    if first is not None:
        console.print(f"replay one: kafkasim sim run --seed {first.seed}{_flags(args)}")
        if first.digest:
            console.print(f"same bytes here as where it ran: kafkasim sim replay {first.seed} --digest {first.digest}"
                          f"{_flags(args)}")
    if spark_info is not None:
        console.print(f"spark: application {spark_info.app_id}, {spark_info.tasks} tasks of up to "
                      f"{spark_info.seeds_per_task} seeds, code {spark_info.code[:16]}, executors imported it from "
                      f"{', '.join(spark_info.imported_from)}")
    if out is not None:
        write_outcomes(out, outcomes, {
            "seeds": args.seeds, "jobs": None if spark_info else args.jobs, "run": len(outcomes),
            "wall_s": round(wall, 3), "seeds_per_minute": round(len(outcomes) / wall * 60, 1),
            "spark": None if spark_info is None else {
                "master": spark_info.master, "application": spark_info.app_id, "tasks": spark_info.tasks,
                "seeds_per_task": spark_info.seeds_per_task, "code_sha256": spark_info.code,
                "imported_from": list(spark_info.imported_from)},
            "options": _flags(args).strip(), "verdicts": counts,
            "invalid": [{"seed": o.seed, "anomalies": list(o.kinds), "first_violation": o.violation}
                        for o in sorted(failing, key=lambda o: o.seed)],
            "crashed": [{"seed": o.seed, "error": o.error} for o in crashed]})
        print(f"outcomes: {out / 'outcomes.jsonl'}, summary: {out / 'summary.json'}")
    return 1 if failing or crashed else 0


def _flags(args: argparse.Namespace) -> str:
    """The options that made the runs (to replay or shrink one of them)."""
    out = f" --brokers {args.brokers} --groups {args.groups} --duration {args.duration:g}"
    if args.faults is not None:
        out += f" --faults '{args.faults}'"
    if getattr(args, "no_invariants", False):
        out += " --no-invariants"
    elif getattr(args, "invariants_every", 1) != 1:
        out += f" --invariants-every {args.invariants_every}"
    if args.log_dirs != 1:
        out += f" --log-dirs {args.log_dirs}"
    if args.transactions:
        out += f" --transactions {args.transactions}"
    out += " --txn-zombies" * bool(args.txn_zombies) + " --txn-crashes" * bool(args.txn_crashes)
    return out + "".join(f" --plant-bug {b}" for b in args.plant_bug or ())


def cmd_shrink(args: argparse.Namespace) -> int:
    from sim import scenario
    from sim.faults import CHAOS_KINDS
    from sim.shrink import shrink

    opts = _options(args, args.seed)

    def tried(n: int, faults, ok: bool) -> None:
        print(f"  attempt {n}: {len(faults)} faults, {sum(f.heal_at_ms - f.at_ms for f in faults)} ms of faults "
              f"-> {'still fails' if ok else 'passes'}", file=sys.stderr)
    s = shrink(opts, budget=args.budget, on_attempt=None if args.quiet else tried)
    if s is None:
        print(f"seed {args.seed} does not fail: nothing to shrink")
        return 0
    chaos_ok = all(f.kind in CHAOS_KINDS for f in s.faults)
    text = scenario.dump(s.opts, s.faults, comment=(
        f"kafkasim sim shrink {args.seed}: {s.original_faults} faults -> {len(s.faults)}, still failing "
        f"the {s.checker} checker ({', '.join(s.result.kinds)}) after {s.attempts} attempts\n"
        f"run it: kafkasim sim run --scenario FILE\n"
        + ("its fault kinds all exist in chaos runs too" if chaos_ok else
           "some of its fault kinds exist only in the simulator")))
    if args.out:
        Path(args.out).write_text(text)
    print(text, end="")
    return 1


def cmd_fidelity(args: argparse.Namespace) -> int:
    """The scenario on real processes and in the simulator; exit 0 when their compared sequences are the
    same, 1 when they differ (the first difference printed), 3 on bad arguments."""
    from chaos.scenario import ScenarioError, find_scenario
    from sim.fidelity import compare, report, run_both
    from sim.scenario import SimScenarioError

    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        print(f"error: {out} already exists and is not empty; choose another --out", file=sys.stderr)
        return EXIT_ERROR
    if (args.scenario is None) == (args.compare is None):
        print("error: give a chaos scenario or --compare SCENARIO (one of them)", file=sys.stderr)
        return EXIT_ERROR
    if args.compare is not None:
        return _fidelity_compare(args, out)
    if args.from_dir or args.kafkasim:
        print("error: --from and --kafkasim go with --compare", file=sys.stderr)
        return EXIT_ERROR
    try:
        path = find_scenario(args.scenario)
        real, sim, verdicts = run_both(path, out, seed=args.seed, stream=sys.stdout,
                                       real_dir=Path(args.real) if args.real else None,
                                       sim_dir=Path(args.sim) if args.sim else None)
    except (ScenarioError, SimScenarioError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_ERROR
    for side, v in verdicts.items():
        print(f"{side} run: {v.upper()}  ({out / side})")
    diffs = compare(real, sim)
    print(report(real, sim, diffs))
    return 1 if diffs else 0


def _fidelity_compare(args: argparse.Namespace, out: Path) -> int:
    """A compare scenario on Kafka 2.8.2 (and kafkasim with --kafkasim) and in the simulator: exit 0 when the
    simulator's ZooKeeper streams have no unlisted difference from each real side's, 1 when one has, 3 on a
    scenario the simulator cannot run."""
    from chaos.scenario import ScenarioError
    from compare.scenario import find_compare, load_compare
    from sim.compare_fidelity import three_sides
    from sim.compare_run import SimCompareError

    if args.real or args.sim:
        print("error: --real and --sim go with a chaos scenario, not --compare", file=sys.stderr)
        return EXIT_ERROR
    try:
        scenario = load_compare(find_compare(args.compare))
        result = three_sides(scenario, out, seed=args.seed, from_dir=Path(args.from_dir) if args.from_dir else None,
                             kafkasim=args.kafkasim, say=lambda t: print(t, flush=True))
    except (ScenarioError, SimCompareError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_ERROR
    for side, o in result.observations.items():
        if o.get("error"):
            print(f"{side}: aborted: {o['error']}")
    print(result.text)
    return 1 if result.unlisted() or any(o.get("error") for o in result.observations.values()) else 0


def add_parsers(sub) -> None:
    from sim.faults import DEFAULT_KINDS, KINDS

    s = sub.add_parser("sim", help="seeded, deterministic simulated runs of the whole cluster (docs/simulation.md)")
    ss = s.add_subparsers(dest="sim_command", required=True)

    def common(p, seed: bool = True) -> None:
        if seed:
            p.add_argument("--seed", type=int, default=None, help="default 1 (with --scenario: the file's)")
        p.add_argument("--brokers", type=int, default=3)
        p.add_argument("--groups", type=int, default=1)
        p.add_argument("--duration", type=float, default=30.0, help="simulated seconds of workload and faults")
        p.add_argument("--faults", default=None,
                       help=f"comma-separated kinds ({', '.join(KINDS)}; default {','.join(DEFAULT_KINDS)}; "
                            "'' for none)")
        p.add_argument("--plant-bug", action="append", metavar="NAME", help="a planted bug (see docs/simulation.md)")
        p.add_argument("--no-invariants", action="store_true",
                       help="do not check the invariants while the run goes (only the checkers at its end)")
        p.add_argument("--invariants-every", type=int, default=1, metavar="N",
                       help="check the invariants after every N simulated events (default 1: every one)")
        p.add_argument("--log-dirs", type=int, default=1, help="log directories per broker, each a disk of its own "
                       "(a disk fault takes one offline; with 1, the broker halts)")
        p.add_argument("--transactions", type=int, default=0, metavar="N",
                       help="N exactly-once pipelines (transactional ids eos-0..) reading events, writing txn-out")
        p.add_argument("--txn-zombies", action="store_true",
                       help=f"now and then a pipeline freezes before a commit while its successor takes over "
                            f"(every {TXN_ZOMBIES_MS[0]}-{TXN_ZOMBIES_MS[1]} ms)")
        p.add_argument("--txn-crashes", action="store_true",
                       help=f"now and then a pipeline process dies (every {TXN_CRASHES_MS[0]}-{TXN_CRASHES_MS[1]} ms)")

    r = ss.add_parser("run", help="one simulated run; exit 0 valid, 1 invalid, 2 unknown")
    common(r)
    r.add_argument("--out", default=None, help="write the run directory (as a chaos run's) here")
    r.add_argument("--scenario", default=None, help="a scenario file (as `sim shrink` prints)")
    r.set_defaults(func=cmd_run)
    p = ss.add_parser("replay", help="run a seed again; --check DIR compares its files byte for byte")
    p.add_argument("seed", type=int)
    common(p, seed=False)
    p.add_argument("--scenario", default=None)
    p.add_argument("--out", default=None)
    p.add_argument("--check", default=None, metavar="RUN_DIR", help="an earlier `sim run --out` of the same seed")
    p.add_argument("--digest", default=None, metavar="HEX",
                   help="the digest a sweep recorded for this seed (where it ran): compared with this run's")
    p.set_defaults(func=cmd_replay)
    w = ss.add_parser("sweep", help="many seeds, a table of verdicts and the failing seeds")
    w.add_argument("--seeds", required=True, help="A..B (inclusive)")
    w.add_argument("--jobs", type=int, default=1)
    w.add_argument("--spark", default=None, metavar="MASTER",
                   help="run the seeds as tasks on a Spark cluster (spark://HOST:PORT, or local[N]) instead of --jobs")
    w.add_argument("--tasks", type=int, default=None,
                   help="with --spark: how many tasks to cut the seeds into (default 4 per executor core, at most "
                        "200 seeds a task)")
    w.add_argument("--no-progress", action="store_true")
    w.add_argument("--stop-on-failure", action="store_true", help="stop at the first failing (or crashed) seed")
    w.add_argument("--out", default=None, metavar="DIR",
                   help="write outcomes.jsonl, summary.json and crashed/seed-N.txt (tracebacks) here")
    common(w, seed=False)
    w.set_defaults(func=cmd_sweep)
    k = ss.add_parser("shrink", help="the fewest, shortest faults that still fail the same checker")
    k.add_argument("seed", type=int)
    common(k, seed=False)
    k.add_argument("--budget", type=int, default=150, help="at most this many attempts")
    k.add_argument("--out", default=None, help="also write the scenario file here")
    k.add_argument("--quiet", action="store_true")
    k.set_defaults(func=cmd_shrink)
    fd = ss.add_parser("fidelity", help="a scenario on real processes and in the simulator: the same controllers, "
                                        "leaders, ISRs and coordinator moves? (exit 0 same, 1 different)")
    fd.add_argument("scenario", nargs="?", default=None,
                    help="a chaos scenario file or a name in scenarios/ (e.g. fidelity); or use --compare")
    fd.add_argument("--compare", default=None, metavar="SCENARIO",
                    help="instead: a compare scenario (a file or a name in scenarios/compare/) on Kafka 2.8.2 and in "
                         "the simulator, their ZooKeeper streams compared (docs/simulation.md)")
    fd.add_argument("--from", dest="from_dir", default=None, metavar="DIR",
                    help="with --compare: read the real sides from this 'kafkasim compare --out DIR' run instead of "
                         "running them")
    fd.add_argument("--kafkasim", action="store_true",
                    help="with --compare: kafkasim's processes as well (a third side; doubles a run's cost)")
    fd.add_argument("--seed", type=int, default=1)
    fd.add_argument("--out", required=True, help="a new directory: real/ and sim/ run directories go there "
                                                 "(with --compare: kafka/, kafkasim/, sim/ and report.txt)")
    fd.add_argument("--real", default=None, metavar="RUN_DIR", help="compare this chaos run instead of running one")
    fd.add_argument("--sim", default=None, metavar="RUN_DIR", help="compare this simulated run instead of running one")
    fd.set_defaults(func=cmd_fidelity)
