"""The ``runs`` table: one row per run, for comparing runs with each other (docs/analysis.md).

``read_meta(spark, files)`` reads what each run says about itself, in one scan per kind of file over every
run (never a file at a time on the driver): ``results.json`` (the scenario's name, the seed, the planned
duration, the runner's own verdict) and ``scenario.yaml`` (the workload's client: ``kafkasim``, the chaos
runner's default, when the file or the key is absent).  ``runs_table(meta, tables)`` adds each run's ops,
faults, verdict, anomalies by kind and failover stage medians from the written tables.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analysis.files import META_REL, RunFiles, read_many
from analysis.local_rows import local_rows

RESULTS_DDL = "scenario STRING, seed LONG, duration_s DOUBLE, verdict STRING"
DEFAULT_CLIENT = "kafkasim"
# the stages whose per-run median the table holds (the failovers table's columns), over the rows of faults
MEDIAN_STAGES = ("detect_ms", "elect_ms", "load_ms", "first_commit_ms", "unavailable_ms", "controller_failover_ms")
RUNS_COLUMNS = ("run", "scenario", "seed", "client", "duration_s", "runner_verdict", "ops", "ok", "fail", "info",
                "open", "faults", "fault_kinds", "verdict", "anomalies", "anomalies_by_kind", "unknowns",
                *(f"{s[:-3]}_p50_ms" for s in MEDIAN_STAGES))


def _of(files: RunFiles, name: str) -> dict[str, list[str]]:
    return {rid: [m[name]] for rid, m in files.meta.items() if name in m}


def read_meta(spark: SparkSession, files: RunFiles) -> DataFrame:
    """``run, scenario, seed, duration_s, runner_verdict, client`` of every run (nulls where a run says nothing)."""
    runs = local_rows(spark, [(r,) for r in sorted(files.dirs)], "run string")
    results = read_many(spark, _of(files, "results.json"),
                        lambda fs: spark.read.schema(RESULTS_DDL).option("multiLine", True).json(fs), META_REL)
    if results is not None:
        runs = runs.join(results.withColumnRenamed("verdict", "runner_verdict"), "run", "left")
    else:
        runs = runs.select("run", *[F.lit(None).cast(t).alias(n) for n, t in
                                    (("scenario", "string"), ("seed", "long"), ("duration_s", "double"),
                                     ("runner_verdict", "string"))])
    scen = read_many(spark, _of(files, "scenario.yaml"), lambda fs: spark.read.text(fs, wholetext=True), META_REL)
    if scen is not None:
        client = F.regexp_extract("value", r"(?m)^\s+client:\s*['\"]?([A-Za-z0-9_.-]+)", 1)
        runs = runs.join(scen.select("run", F.when(client != "", client).alias("_client")), "run", "left")
    else:
        runs = runs.withColumn("_client", F.lit(None).cast("string"))
    return runs.select("run", "scenario", "seed", "duration_s", "runner_verdict",
                       F.coalesce("_client", F.lit(DEFAULT_CLIENT)).alias("client"))


def of_faults(failovers: DataFrame) -> DataFrame:
    """The failover rows of faults, not of moves no fault explains (docs/chaos.md): figures leave those out."""
    return failovers.where(F.col("cause").isNull() | (F.col("cause") == "fault"))


def anomalies_by_kind(anomalies: DataFrame) -> DataFrame:
    """(run, anomalies_by_kind): each run with an anomaly, its anomalies counted by kind (a map, keys sorted)."""
    return (anomalies.groupBy("run", "kind").agg(F.count(F.lit(1)).alias("n")).groupBy("run")
            .agg(F.map_from_entries(F.array_sort(F.collect_list(F.struct("kind", "n")))).alias("anomalies_by_kind")))


def runs_table(meta: DataFrame, tables: dict[str, DataFrame]) -> DataFrame:
    """One row per run (``RUNS_COLUMNS``): ``meta`` (``read_meta``) with the run's figures from the tables."""
    t = F.col("type")
    ops = tables["ops"].groupBy("run").agg(F.count(F.lit(1)).alias("ops"),
                                           *[F.sum((t == k).cast("long")).alias(k)
                                             for k in ("ok", "fail", "info", "open")])
    faults = tables["faults"].groupBy("run").agg(F.count(F.lit(1)).alias("faults"),
                                                 F.array_sort(F.collect_set("kind")).alias("fault_kinds"))
    kinds = anomalies_by_kind(tables["anomalies"])
    stages = of_faults(tables["failovers"]).groupBy("run").agg(
        *[F.percentile_approx(F.col(s).cast("double"), F.lit(0.5)).alias(f"{s[:-3]}_p50_ms") for s in MEDIAN_STAGES])
    out = meta
    for df in (ops, faults, tables["verdicts"].select("run", "verdict", "anomalies", "unknowns"), kinds, stages):
        out = out.join(df, "run", "left")
    zero = {c: F.coalesce(F.col(c), F.lit(0).cast("long")).alias(c)
            for c in ("ops", "ok", "fail", "info", "open", "faults", "anomalies")}
    return out.select(*[zero.get(c, F.col(c)) for c in RUNS_COLUMNS])
