"""``kafkasim analyze RUN_DIR_OR_GLOB... [--master local[*]] [--out DIR]``: chaos runs -> Parquet tables.

Also ``spark-submit [--master URL] analysis/main.py RUN_DIR...`` (same arguments; spark-submit's master
unless ``--master`` is given after the script).  It loads
the runs (``analysis.load``), builds every table (``analysis.ops_tables``,
``analysis.tables``, ``analysis.failovers``, the checkers of
``analysis.checks``), writes each as Parquet to ``<out>/tables/<name>/``
(replacing what was there), writes the HTML report (``analysis.report``),
and prints a summary.  Exit code 0, or 2
with one line for input that is not a chaos run (never a Spark trace).

Nothing here imports pyspark at import time: ``kafkasim --help`` stays fast.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

ROOT = Path(__file__).resolve().parent.parent
if __name__ == "__main__" and str(ROOT) not in sys.path:  # spark-submit analysis/main.py
    sys.path.insert(0, str(ROOT))

DEFAULT_OUT = "analysis-out"
DEFAULT_MASTER = None   # analysis.spark.session: spark-submit's master under spark-submit, else local[*]
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def _ship_package(spark) -> None:
    """Make ``analysis`` importable in the Python workers, whatever their working directory: on the
    PYTHONPATH Spark gives local workers, and as a zip (once per context) for a cluster's."""
    sc = spark.sparkContext
    if sc.master.startswith("local"):
        paths = [p for p in sc.environment.get("PYTHONPATH", "").split(os.pathsep) if p]
        if str(ROOT) not in paths:
            sc.environment["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + paths)
        return
    if getattr(sc, "_kafkasim_shipped", False):
        return
    import tempfile
    import zipfile
    path = Path(tempfile.mkdtemp(prefix="kafkasim-analyze-")) / "kafkasim_analysis.zip"
    with zipfile.ZipFile(path, "w") as z:
        for f in sorted((ROOT / "analysis").glob("*.py")):
            z.write(f, f"analysis/{f.name}")
    sc.addPyFile(str(path))
    sc._kafkasim_shipped = True


def _unclean_elections(files) -> bool | None:
    """Whether the runs' clusters allow unclean elections (as the chaos runner tells its checkers); None: mixed.
    ``files``: ``analysis.files.RunFiles`` (a run without a cluster.yaml does not allow them)."""
    import yaml
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)   # libyaml's, when built: thousands of runs
    seen = set()
    for rid in files.dirs:
        path = files.meta.get(rid, {}).get("cluster.yaml")
        try:
            cfg = yaml.load(Path(path).read_text(), Loader=loader) or {} if path else {}
        except (OSError, yaml.YAMLError):
            cfg = {}
        seen.add(bool(cfg.get("unclean.leader.election.enable")) if isinstance(cfg, dict) else False)
    return seen.pop() if len(seen) == 1 else None


def _import_plots() -> None:
    """Import the report's plotting module (and matplotlib) now, for its side effect: the report finds it loaded."""
    try:
        importlib.import_module("analysis.plots")
    except ImportError:   # the report's own import says what is missing
        pass


def write_table(spark, df, path: Path):
    """Write ``df`` as Parquet at ``path``; the table read back, with ``df``'s schema (as Spark reads any
    Parquet: every field nullable).  Named, the schema is not inferred again from the files' footers (a pool
    of footer readers on the driver per table: about 0.2 s each on a small run, bench/RESULTS.md)."""
    from analysis.spark import gathered
    gathered(df).write.mode("overwrite").parquet(str(path))
    return spark.read.schema(df.schema).parquet(str(path))


def _write_paired(spark, rows, out: Path):
    """Write the paired rows (``ops_tables.paired_rows``, or ``paired``) once, split by ``_line``, and pair
    the edge rows of a bounded pairing window (``ops_tables.repair_edges``): the operations become
    ``<out>/tables/ops`` as they are written (no second pass over them), the few other rows (nemesis lines,
    lines that make the history malformed) stay in ``<out>/work/paired`` (removed at the end).  Returns
    (ops, the other rows with ``_line``), read back.

    Staged as Parquet, not cached: Spark's in-memory cache of the paired rows (arrays of records) cost about
    20 s more at 10M operations, and writing them to a stage and then ``ops`` from it cost a second pass over
    the operations (about 15 s at 10M).  The split is a partitioned write with one open file per ``_line`` value
    in each task (``analysis.spark`` turns off the planned sort by ``_line``, which made the write about a
    quarter slower on 1 GB of history)."""
    from pyspark.sql import functions as F

    from analysis.local_rows import local_rows
    from analysis.ops_tables import EDGE, repair_edges

    stage = out / "work" / "paired"
    rows.write.mode("overwrite").partitionBy("_line").parquet(str(stage))
    schema = rows.drop("_line").schema
    edges = stage / f"_line={EDGE}"
    if edges.is_dir():   # ``ops_tables.paired_rows``: the bounded pairing window's edge lines, a few thousand
        repaired = repair_edges(spark.read.schema(schema).parquet(str(edges)))
        repaired.write.mode("append").partitionBy("_line").parquet(str(stage))
        shutil.rmtree(edges)
    target = out / "tables" / "ops"
    shutil.rmtree(target, ignore_errors=True)
    made = stage / "_line=invoke"
    if made.is_dir():
        made.rename(target)
        (target / "_SUCCESS").touch()   # the job that wrote it succeeded, as Spark marks a table
    else:  # a history without operations: an empty table, with the columns
        local_rows(spark, [], schema).write.mode("overwrite").parquet(str(target))
    ops = spark.read.schema(schema).parquet(str(target))
    if list(stage.glob("_line=*")):
        rest = spark.read.schema(schema).option("basePath", str(stage)).parquet(*[
            str(p) for p in sorted(stage.glob("_line=*"))])
        rest = rest.select(*schema.names, F.col("_line").cast("string"))
    else:
        rest = local_rows(spark, [], schema).withColumn("_line", F.lit(None).cast("string"))
    return ops, rest


def _counts(spark, written: dict[str, Any], tables: Path) -> tuple[dict[str, int], dict[str, int]]:
    """Rows per table and anomalies per kind, in one Spark job: every written table's files (``tables/<name>``)
    read in one scan with no columns, their rows counted per file and summed per table directory, and the
    anomalies grouped by kind.  Three small plans (seven DataFrames), not an aggregate per table unioned one by one
    (49 DataFrames, each analysed by the JVM with the whole union so far: bench/RESULTS.md, issue 49)."""
    from urllib.parse import unquote, urlparse

    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    from analysis.spark import gathered

    files = (spark.read.schema(StructType()).parquet(*[str(tables / name) for name in written])
             .groupBy(F.input_file_name().alias("file")).agg(F.count(F.lit(1)).alias("n"))
             .select("file", F.lit(None).cast("string").alias("kind"), "n"))
    kinds = (written["anomalies"].groupBy("kind").agg(F.count(F.lit(1)).alias("n"))
             .select(F.lit(None).cast("string").alias("file"), "kind", "n"))
    rows = dict.fromkeys(written, 0)
    anomalies: dict[str, int] = {}
    for r in gathered(files.unionByName(kinds)).collect():
        if r["file"] is not None:
            rows[Path(unquote(urlparse(r["file"]).path)).parent.name] += r["n"]
        else:
            anomalies[r["kind"]] = r["n"]
    return rows, anomalies


def run(paths: list[str], master: str | None = DEFAULT_MASTER, out: str | Path = DEFAULT_OUT,
        stream: TextIO | None = None) -> dict[str, Any]:
    """Analyse the runs in ``paths`` (directories or globs); return the summary (also in ``<out>/summary.json``).

    ``master`` None: spark-submit's under spark-submit, else ``local[*]``.  Raises ``analysis.load.RunError``
    for a path that is not a chaos run directory.  ``stream`` gets the
    progress and the summary (with ``KAFKASIM_TIMES=1``, each line stamped with the seconds since start)."""
    started = time.monotonic()
    stamp = bool(os.environ.get("KAFKASIM_TIMES"))

    def say(line: str) -> None:
        if stream is not None:
            print(f"[{time.monotonic() - started:7.1f}] {line}" if stamp else line, file=stream, flush=True)

    from contextlib import ExitStack

    from analysis.load import expand
    from analysis.spark import adaptive_off, session

    from analysis.files import scan_runs

    runs = expand(list(paths))  # a bad path fails here, before Spark starts
    # the report's plotting library imported in another thread while the JVM starts (about 0.3 s of a core
    # that would otherwise wait for the session)
    threading.Thread(target=_import_plots, name="kafkasim-import-plots", daemon=True).start()
    listed = time.monotonic()
    files = scan_runs(runs)   # the one listing of the run directories; their size picks settings (analysis.spark)
    listed = time.monotonic() - listed
    spark = session(master, input_bytes=files.input_bytes)
    _ship_package(spark)
    # Adaptive query execution off for the whole analysis: the checkers' many small stages lost more to its
    # re-planning than they gained, no other step gained from it (1M operations: within 1 s), and the checkers
    # are planned in a second thread (below) while other steps run, so the setting cannot be switched per step.
    with adaptive_off(spark), ExitStack() as stack:
        try:
            return _run(spark, runs, files, listed, Path(out), say, started, stack)
        finally:   # the steps name their jobs (Spark's event log); a session that lives on is left unnamed
            spark.sparkContext.setJobDescription(None)


# the tables in the order they are listed (summary, report), whichever thread wrote them; a table not named
# here follows them, in the order it was written
TABLES = ("ops", "observations", "group_offsets", "pairing_errors", "faults", "controller_epochs", "leader_changes",
          "isr_changes", "hw_samples", "coordinator_loads", "rebalances", "commits", "failovers", "anomalies",
          "verdicts", "runs")


def _ordered(tables: dict[str, Any]) -> dict[str, Any]:
    """``tables`` in ``TABLES``' order, then the others in theirs."""
    rank = {name: i for i, name in enumerate(TABLES)}
    return dict(sorted(tables.items(), key=lambda kv: rank.get(kv[0], len(rank))))


def _run(spark, runs: dict[str, str], files, listed: float, out: Path, say, started: float,
         stack) -> dict[str, Any]:
    """The analysis proper, of ``files`` (``analysis.files.scan_runs``, which took ``listed`` s); ``stack`` (an
    ``ExitStack``) holds the session settings it changes until the end."""
    from pyspark.sql import functions as F

    from analysis.checks import plan_checks, run_checks, verdicts
    from analysis.failovers import failovers
    from analysis.load import load_runs
    from analysis.ops_tables import build_ops_tables, nemesis_lines, paired, paired_rows
    from analysis.report import prepare_report, write_report
    from analysis.runs import read_meta, runs_table
    from analysis.spark import Background, kept, local, release, sized_to, small_input
    from analysis.tables import event_log_tables
    from analysis.tables import faults as faults_table

    (out / "tables").mkdir(parents=True, exist_ok=True)
    say(f"analysing {len(runs)} run(s) on {spark.sparkContext.master} -> {out}")
    seconds: dict[str, float] = {"start": round(time.monotonic() - started - listed, 1), "listing": round(listed, 1)}
    mark = time.monotonic()

    def lap(name: str) -> None:
        nonlocal mark
        now = time.monotonic()
        seconds[name] = round(seconds.get(name, 0.0) + now - mark, 1)
        mark = now

    written: dict[str, Any] = {}
    prepared = None   # the report's collects made ahead (analysis.report.prepare_report)

    def write(name: str, df, into: dict[str, Any] = written, concurrent: bool = False) -> None:
        """Write table ``name`` into ``into``; its seconds are a lap of this thread's, or its own when it runs
        ``concurrent``ly in another thread."""
        t = time.monotonic()
        spark.sparkContext.setJobDescription(f"table {name}")   # this thread's next jobs, in Spark's event log
        into[name] = write_table(spark, df, out / "tables" / name)
        if concurrent:
            seconds[name] = round(time.monotonic() - t, 1)
        else:
            lap(name)
        say(f"  {name:<20} {seconds[name]:>7.1f} s" + ("  (concurrent)" if concurrent else ""))

    # The history is parsed once (load.HISTORY_DDL) and shuffled once (ops_tables.paired_rows); the paired rows are
    # written once, and their operations are the ``ops`` table: every later step reads the tables (Parquet,
    # column by column) and the small ``extras`` (the few rows whose value parts a checker reads).
    found = {k: sum(map(len, getattr(files, k).values())) for k in ("history", "events", "segments")}
    # a small input (a 30-s chaos run: a few MB) gets as few shuffle partitions as it needs (one per 32 MiB)
    parts = stack.enter_context(sized_to(spark, files.input_bytes))
    say(f"  {'listing':<20} {seconds['listing']:>7.1f} s  ({found['history']} history, {found['events']} "
        f"event-log and {found['segments']} segment files; {files.input_bytes / 1e6:,.1f} MB, {parts} shuffle "
        f"partition{'s' if parts > 1 else ''})")
    inputs = load_runs(spark, list(runs.values()), files=files)
    lap("plan")

    def keep_event_lines() -> None:
        # parsed once and kept (a small input's as a leaf of every plan built on it: analysis.spark.kept)
        t = time.monotonic()
        inputs.parsed = kept(inputs.parsed_events(), many=True)
        inputs.segments = kept(inputs.segments, many=True)
        seconds["event_lines"] = round(time.monotonic() - t, 1)
        say(f"  {'event_lines':<20} {seconds['event_lines']:>7.1f} s  (parsed and kept; concurrent)")

    def write_event_log_tables() -> tuple[dict[str, Any], Any]:
        keeping.result()
        done: dict[str, Any] = {}
        for name, df in event_log_tables(inputs).items():
            write(name, df, done, concurrent=True)
        # what each run says of itself (a row per run), for the runs table and the report (which so need not
        # wait for the runs table)
        spark.sparkContext.setJobDescription("meta")
        return done, local(read_meta(spark, inputs.run_files()))

    # The event lines are parsed and kept, and the tables made from them alone written, in other driver threads
    # while this one pairs the history and writes the operations' tables: on a small run each step is mostly
    # the driver's planning, one core's work, and the two sides share nothing.
    keeping = Background(keep_event_lines, "keep-event-lines")
    event_side = Background(write_event_log_tables, "event-log-tables")
    extras = planning = meta = judging = judged = None
    try:
        spark.sparkContext.setJobDescription("table ops")
        # a small input's window over whole processes (a few MB at most): no edge rows to pair again after the
        # write, one job and one plan fewer (the same rows: ``ops_tables.paired``)
        rows = paired(inputs.ops) if small_input(spark) else paired_rows(inputs.ops)
        ops, rest = _write_paired(spark, rows, out)
        written["ops"] = ops
        lap("ops")
        say(f"  {'ops':<20} {seconds['ops']:>7.1f} s  (the history parsed, paired and written)")
        ops_tables = build_ops_tables(inputs, ops.withColumn("_line", F.lit("invoke")).unionByName(rest))
        for name in ("observations", "group_offsets", "pairing_errors"):
            write(name, ops_tables[name])
        spark.sparkContext.setJobDescription("extras")
        extras = kept(ops_tables["extras"])
        if not small_input(spark):   # persisted, not yet computed: now, before the checkers' thread reads it
            extras.count()
        lap("extras")
        unclean = _unclean_elections(files)
        if unclean is None:
            say("note: unclean.leader.election.enable differs between the runs: unclean elections are judged")
        options = {"unclean_election": bool(unclean)}
        checked = {**{k: written[k] for k in ("ops", "observations", "group_offsets", "pairing_errors")},
                   "extras": extras}
        keeping.result()   # the checkers and the failovers read the kept event lines
        lap("wait_event_lines")
        # The checkers' DataFrames are built and planned in another driver thread while the faults and the
        # failovers are computed: thousands of calls into the JVM, during which the executors would otherwise
        # wait, and the broadcasts beneath the checkers' cut rows (checks_base.Ctx.cut), which start as they
        # are planned.  They need only the tables above.
        # A small input's checkers are also run and their anomalies written in that thread, while this one is
        # still on the failovers: each side is mostly one core's planning.  A large input's run after the
        # failovers, as before (their tasks would share the cores, and their caches the memory).
        small = small_input(spark)

        def check() -> tuple[Any, dict[str, Any] | None]:
            planned = plan_checks(inputs, checked, **options)
            if not small:
                return planned, None
            done: dict[str, Any] = {}
            spark.sparkContext.setJobDescription("table anomalies")   # its jobs, named as before
            write("anomalies", run_checks(planned), done, concurrent=True)   # releases the checkers' caches
            return planned, done

        planning = Background(check, "plan-checks")
        nemesis = nemesis_lines(extras)
        write("faults", faults_table(inputs, nemesis))
        # the timeline's rows are computed on the driver from a few collected rows: a local relation, written
        spark.sparkContext.setJobDescription("table failovers")
        write("failovers", failovers(inputs, {**written, "nemesis": nemesis}))
        # what the report needs of the tables written so far, collected while the checkers still run (a small
        # input's checkers end after the failovers: this thread would wait for them)
        event_tables, meta = event_side.result()
        written.update(event_tables)
        lap("wait_event_tables")
        spark.sparkContext.setJobDescription("report")
        prepared = prepare_report(written, out, meta)
        lap("report_prepare")
        (planned, checked_rows), planning = planning.result(), None
        if checked_rows is None:
            spark.sparkContext.setJobDescription("table anomalies")
            write("anomalies", run_checks(planned))
        else:
            written.update(checked_rows)
            lap("wait_anomalies")
        # The verdicts and the runs table written, each in a driver thread of its own, and then the summary's
        # counts made, while this thread makes the report: the three read the verdicts' frame (the same rows as
        # the table), so none waits for another's write, and each is mostly one core's planning.
        judged = kept(verdicts(inputs, written["anomalies"], **options))   # one verdict per run, computed once
        before = dict(written)

        def write_judged() -> tuple[dict[str, Any], tuple[dict[str, int], dict[str, int]]]:
            done = dict(before)
            runs_done: dict[str, Any] = {}
            runs_side = Background(lambda: write("runs", runs_table(meta, {**before, "verdicts": judged}),
                                                 runs_done, concurrent=True), "table runs")
            try:
                write("verdicts", judged, done, concurrent=True)
            finally:
                runs_side.wait()
            runs_side.result()
            done.update(runs_done)
            t = time.monotonic()
            spark.sparkContext.setJobDescription("counts")
            done = _ordered(done)
            counts = _counts(spark, done, out / "tables")
            seconds["count"] = round(time.monotonic() - t, 1)
            return done, counts

        judging = Background(write_judged, "verdicts")
    except BaseException:
        if prepared is not None:   # (write_report releases it)
            prepared.release()
        release(meta)
        release(judged)
        raise
    finally:  # also when a step fails: the staged rows are gigabytes at 10M operations, and the session may live on
        if planning is not None:   # a step failed while the checkers were being planned
            left = planning.wait()
            if left is not None:
                left[0].ctx.release()   # (released already when its checks ran: a second release frees nothing)
        side = event_side.wait()   # a step failed: the other threads end before what they read is freed
        if meta is None and side is not None:   # a step failed before this thread took the meta
            release(side[1])
        keeping.wait()
        for df in (extras, inputs.parsed, inputs.segments):
            release(df)
        shutil.rmtree(out / "work", ignore_errors=True)

    try:
        spark.sparkContext.setJobDescription("report")
        report_path = write_report(written, out, judged, prepared=prepared)
    finally:
        judging.wait()   # a failed report: the tables and counts end before the caller stops the session
        release(meta)
        release(judged)
    lap("report")
    tables, (rows, anomalies) = judging.result()
    written.clear()
    written.update(tables)
    summary = {"runs": sorted(runs), "out": str(out), "tables": rows, "anomalies": anomalies,
               "report": str(report_path), "seconds": seconds, "wall_s": round(time.monotonic() - started, 1)}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    say(format_summary(summary))
    return summary


def format_summary(s: dict[str, Any]) -> str:
    lines = [f"runs: {len(s['runs'])} ({', '.join(s['runs'][:5])}{', ...' if len(s['runs']) > 5 else ''})",
             "tables (rows):"]
    lines += [f"  {name:<20} {n:>12,}" for name, n in s["tables"].items()]
    lines.append("anomalies: " + (", ".join(f"{k} {v}" for k, v in sorted(s["anomalies"].items())) or "none"))
    lines.append(f"report: {s['report']}")
    lines.append(f"written to {s['out']}/tables/ in {s['wall_s']} s")
    return "\n".join(lines)


def cmd_analyze(args: argparse.Namespace) -> int:
    from analysis.load import RunError
    try:
        run(args.runs, args.master, args.out, stream=sys.stdout)
    except RunError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as e:  # a Spark failure: one line, the trace only on request
        if os.environ.get("KAFKASIM_DEBUG"):
            raise
        first = (str(e).strip().splitlines() or [""])[0]
        print(f"error: the analysis failed: {type(e).__name__}: {first[:500]} "
              f"(KAFKASIM_DEBUG=1 shows the trace)", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("runs", nargs="+", metavar="RUN_DIR_OR_GLOB", help="chaos run directories, directories of runs, or globs of them")
    p.add_argument("--master", default=DEFAULT_MASTER,
                   help="Spark master: local[N], local[*] or spark://HOST:PORT (default: spark-submit's --master under "
                        "spark-submit, else local[*])")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT}/)")
    p.set_defaults(func=cmd_analyze)
    return p


def add_parsers(sub) -> None:
    """Register ``analyze`` on the ``kafkasim`` subparsers (no pyspark import)."""
    _arguments(sub.add_parser("analyze", help="chaos runs -> Parquet tables, Spark checkers, an HTML report "
                                              "(docs/analysis.md)"))


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argparse.ArgumentParser(prog="analysis/main.py", description=__doc__.splitlines()[0])) \
        .parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
