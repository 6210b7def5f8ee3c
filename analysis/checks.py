"""The chaos checkers in Spark, with the semantics of ``judge/checkers.py``, over many runs at once.

    tables = build_ops_tables(inputs)                 # analysis.ops_tables
    anomalies = check_all(inputs, tables)             # the anomalies table (materialized: it is small)
    verdicts(inputs, anomalies).show()                # run, verdict, anomalies, unknowns

One function per checker of ``judge.registry.CHECKERS`` (a kind, or a pair of kinds),
each keyed by ``run``; rules: docs/chaos.md ("Checkers"); how each is laid out
in Spark and where it differs: docs/analysis-internals.md ("Checkers in Spark").  The
evidence ``op_indexes`` of an anomaly are the ``index`` values of the history
lines the Python checker puts in ``Anomaly.ops``, so the two compare by
``(run, kind, sorted op indexes)``.  The Python checker lists at most 100
anomalies per kind; Spark lists them all.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analysis.checks_base import ANOMALY_COLUMNS, Ctx, empty_anomalies
from analysis.checks_cluster import (
    check_hw,
    check_multiple_controllers,
    check_unclean_elections,
    check_zombie_writes,
    unknown_no_events,
)
from analysis.checks_groups import (
    check_commit_order,
    check_fenced_generations,
    check_lost_commits,
    check_split_coordinator,
    unknown_lost_commits,
    unknown_split_coordinator,
)
from analysis.checks_log import check_lost_writes, check_offsets, check_unseen, unknown_lost_writes, unknown_unseen
from analysis.local_rows import local_rows
from analysis.ops_tables import build_ops_tables
from analysis.spark import Background, adaptive_off, gathered, local, local_leaves, small_input, union_by_name
from judge.registry import CHECKERS as REGISTRY
from judge.registry import KINDS

__all__ = ["CHECKERS", "KINDS", "SPARK_CHECKS", "PlannedChecks", "check_all", "context", "plan_checks", "run_checks",
           "unknowns", "verdicts"]


def check_controllers(ctx: Ctx) -> DataFrame:
    """``controllers``: multiple-controllers and zombie-controller-write, as ``judge.checks_cluster``'s."""
    return check_multiple_controllers(ctx).unionByName(check_zombie_writes(ctx))


# the Spark implementation of every checker of judge.registry.CHECKERS, each named as its Python one
SPARK_CHECKS: tuple[Callable[[Ctx], DataFrame], ...] = (
    check_lost_writes, check_offsets, check_commit_order, check_lost_commits, check_fenced_generations,
    check_split_coordinator, check_controllers, check_unclean_elections, check_hw, check_unseen)
_SPARK_BY_NAME = {fn.__name__: fn for fn in SPARK_CHECKS}
# name -> (Spark checker, the kinds it reports), in the registry's order
CHECKERS: dict[str, tuple[Callable[[Ctx], DataFrame], tuple[str, ...]]] = {
    name: (_SPARK_BY_NAME[c.check.__name__], c.kinds) for name, c in REGISTRY.items()}

# unknown reasons, in the order judge.checkers.check lists them
UNKNOWNS: tuple[Callable[[Ctx], DataFrame], ...] = (unknown_lost_writes, unknown_lost_commits,
                                                    unknown_split_coordinator, unknown_no_events, unknown_unseen)

_STASH: dict[int, tuple[Any, tuple, DataFrame]] = {}   # id(inputs) -> (inputs, options, unknowns): for verdicts


def context(inputs, tables: dict[str, DataFrame] | None = None, *, unclean_election: bool = False,
            final_reads_required: bool = True, offsets_partitions: int | None = None) -> Ctx:
    """The checkers' context: the ops tables (built when not given) and the parsed event lines."""
    built = build_ops_tables(inputs) if tables is None or any(
        tables.get(k) is None for k in ("ops", "observations", "group_offsets", "pairing_errors", "extras")) else {}
    t = {k: (tables or {}).get(k) if (tables or {}).get(k) is not None else built[k]
         for k in ("ops", "observations", "group_offsets", "pairing_errors", "extras")}
    return Ctx(spark=inputs.ops.sparkSession, runs=list(inputs.runs), ops=t["ops"], observations=t["observations"],
               group_offsets=t["group_offsets"], pairing_errors=t["pairing_errors"], events=inputs.parsed_events(),
               extras=t["extras"], unclean_election=unclean_election, final_reads_required=final_reads_required,
               offsets_partitions=offsets_partitions)


def _malformed(ctx: Ctx) -> DataFrame:
    """(run, reason) for histories ``pair_ops`` rejects: the first offending line."""
    first = ctx.pairing_errors.groupBy("run").agg(F.min(F.struct("index", "reason")).alias("e"))
    return first.select("run", F.format_string("malformed history: index %s: %s", "e.index", "e.reason")
                        .alias("reason"))


def unknowns(ctx: Ctx) -> DataFrame:
    """(run, order, reason): why a run's verdict would be unknown, as ``CheckResult.unknowns``.  A malformed
    history has that reason only (the Python checker stops there)."""
    parts = []
    for i, fn in enumerate(UNKNOWNS, start=1):
        df = fn(ctx)
        sub = F.col("sub") if "sub" in df.columns else F.lit(0)
        parts.append(df.select("run", (F.lit(i * 100) + sub).alias("order"), "reason"))
    malformed = _malformed(ctx)
    rest = union_by_name(parts).join(F.broadcast(malformed.select("run")), "run", "left_anti")
    return malformed.select("run", F.lit(0).alias("order"), "reason").unionByName(rest)


def check_all(inputs, tables: dict[str, DataFrame] | None = None, *, unclean_election: bool = False,
              final_reads_required: bool = True, offsets_partitions: int | None = None,
              kinds: tuple[str, ...] | None = None) -> DataFrame:
    """Every checker over every run: the ``anomalies`` table (``ANOMALY_COLUMNS``), computed and cached
    (it is small).  Options as ``judge.checkers.check``; ``kinds`` limits the checkers run.  A run whose
    history is malformed gets no anomalies (the Python checker stops with an unknown verdict)."""
    with adaptive_off(inputs.ops.sparkSession):   # many small stages: AQE's re-planning costs more
        return run_checks(plan_checks(inputs, tables, unclean_election=unclean_election,
                                      final_reads_required=final_reads_required,
                                      offsets_partitions=offsets_partitions, kinds=kinds))


@dataclass
class PlannedChecks:
    """The checkers' two results, built and planned but not computed (``plan_checks``), and their context."""
    inputs: Any
    options: tuple
    ctx: Ctx
    anomalies: DataFrame
    unknowns: DataFrame


def plan_checks(inputs, tables: dict[str, DataFrame] | None = None, *, unclean_election: bool = False,
                final_reads_required: bool = True, offsets_partitions: int | None = None,
                kinds: tuple[str, ...] | None = None) -> PlannedChecks:
    """The driver's part of ``check_all``: every checker's DataFrame built (a few thousand calls into the
    JVM, seconds of the driver's time) and the two results' physical plans made, nothing computed but
    the small list of the groups that polled (``checks_log.poll_groups``) and the broadcasts beneath the
    rows ``Ctx.cut`` cuts (started as their plans are made).  ``analysis.main`` does it in another thread
    while the faults and the failover timeline are written; ``run_checks`` then computes the results."""
    options = (unclean_election, final_reads_required, offsets_partitions)
    ctx = context(inputs, tables, unclean_election=unclean_election, final_reads_required=final_reads_required,
                  offsets_partitions=offsets_partitions)
    try:
        chosen = [fn for fn, ks in CHECKERS.values() if kinds is None or set(ks) & set(kinds)]
        # each frame built and planned (the results' plans are what run_checks computes); the unknown
        # reasons and the heaviest checkers first
        tasks = [lambda: _planned(unknowns(ctx))] + [lambda fn=fn: fn(ctx) for fn in chosen]
        names = ["unknowns"] + [fn.__name__ for fn in chosen]
        order = sorted(range(len(tasks)), key=lambda i: _BUILD_RANK.get(names[i], len(_BUILD_RANK)))
        built = _build(tasks, order, two=small_input(ctx.spark))
        unk, parts = built[0], built[1:]
        found = union_by_name(parts) if parts else empty_anomalies(ctx.spark)
        if kinds is not None:
            found = found.where(F.col("kind").isin(*kinds))
        result = _planned(gathered(found.join(_malformed(ctx).select("run"), "run", "left_anti")
                                   .select(*ANOMALY_COLUMNS)))
    except BaseException:
        ctx.release()
        raise
    return PlannedChecks(inputs, options, ctx, result, unk)


# the checkers that take the driver longest to build on a 30-s run (bench/RESULTS.md, issue 49), taken first
_BUILD_RANK = {name: i for i, name in enumerate((check_unseen.__name__, check_lost_writes.__name__, "unknowns",
                                                 check_lost_commits.__name__, check_controllers.__name__))}


def _planned(df: DataFrame) -> DataFrame:
    df._jdf.queryExecution().executedPlan()
    return df


def _build(tasks: list[Callable[[], DataFrame]], order: list[int], two: bool) -> list[DataFrame]:
    """Each task's frame, in the tasks' order; the tasks taken in ``order``.  With ``two``, by this thread and
    another at once, each taking the next task not yet taken: a small input's checkers are the driver's
    planning (the JVM's analyzer and optimizer on the calling thread), one core's work per thread, and
    ``Ctx.once`` lets the two share what they share."""
    out: list[DataFrame | None] = [None] * len(tasks)
    queue = iter(order)
    lock = threading.Lock()
    failed: list[BaseException] = []

    def work() -> None:
        while not failed:
            with lock:
                i = next(queue, None)
            if i is None:
                return
            try:
                out[i] = tasks[i]()
            except BaseException as e:
                failed.append(e)
                raise

    other = Background(work, "plan-checks-2") if two and len(tasks) > 1 else None
    try:
        work()
    finally:
        if other is not None:
            other.wait()
    if failed:
        raise failed[0]
    return out   # type: ignore[return-value]


def run_checks(planned: PlannedChecks) -> DataFrame:
    """Compute ``plan_checks``'s results: the ``anomalies`` table (cached; it is small); the unknown
    reasons are kept for ``verdicts``.  Releases the checkers' shared caches."""
    other = None
    try:
        # Checkpointed, not persisted: releasing the context's caches below would make Spark drop and recompute
        # any cache built on them (a non-cascading uncache re-caches the plans that depend on it).  A small
        # input's two jobs run together, the unknown reasons' in another driver thread (each is one task per
        # stage: one core's work)
        spark = planned.anomalies.sparkSession
        # a small input's as local relations (its anomalies, most often none, empty what is built on them)
        keep = local if local_leaves(spark) else (lambda df: df.localCheckpoint(eager=True))
        if small_input(spark):
            other = Background(lambda: keep(planned.unknowns),
                               spark.sparkContext.getLocalProperty("spark.job.description") or "unknown reasons")
        result = keep(planned.anomalies)
        unk = other.result() if other is not None else keep(planned.unknowns)
    finally:
        if other is not None:
            other.wait()   # before the caches it reads are released
        planned.ctx.release()
    _STASH.clear()
    _STASH[id(planned.inputs)] = (planned.inputs, planned.options, unk)
    return result


def verdicts(inputs, anomalies: DataFrame, tables: dict[str, DataFrame] | None = None, *,
             unknown_reasons: DataFrame | None = None, unclean_election: bool = False,
             final_reads_required: bool = True, offsets_partitions: int | None = None) -> DataFrame:
    """(run, verdict, anomalies, unknowns) for every run of ``inputs``: ``invalid`` with any anomaly, else
    ``unknown`` with any unknown reason (``unknowns``: array<string>, in the Python checker's order), else
    ``valid``.  The reasons come from the last ``check_all`` on the same inputs and options, else they are
    computed (from ``tables``, built when not given)."""
    options = (unclean_election, final_reads_required, offsets_partitions)
    if unknown_reasons is None:
        stashed = _STASH.get(id(inputs))
        if stashed is not None and stashed[0] is inputs and stashed[1] == options:
            unknown_reasons = stashed[2]
        else:
            unknown_reasons = unknowns(context(inputs, tables, unclean_election=unclean_election,
                                               final_reads_required=final_reads_required,
                                               offsets_partitions=offsets_partitions))
    spark = inputs.ops.sparkSession
    runs = local_rows(spark, [(r,) for r in inputs.runs], "run string")
    counts = anomalies.groupBy("run").agg(F.count(F.lit(1)).alias("anomalies"))
    unk = (unknown_reasons.groupBy("run")
           .agg(F.array_sort(F.collect_list(F.struct("order", "reason"))).alias("u"))
           .select("run", F.transform("u", lambda x: x["reason"]).alias("unknowns")))
    v = runs.join(counts, "run", "left").join(unk, "run", "left")
    n = F.coalesce(F.col("anomalies"), F.lit(0)).cast("long")
    u = F.coalesce(F.col("unknowns"), F.array().cast("array<string>"))
    verdict = F.when(n > 0, "invalid").when(F.size(u) > 0, "unknown").otherwise("valid")
    return v.select("run", verdict.alias("verdict"), n.alias("anomalies"), u.alias("unknowns")).orderBy("run")
