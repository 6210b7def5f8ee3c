"""Reading chaos runs into Spark: histories, event logs and offsets-topic segments.

``load_runs(spark, paths)`` expands run directories and globs and returns the
raw DataFrames of docs/analysis.md ("Raw inputs"), each with ``run`` (the
run directory's name) first.  Torn last lines (a killed writer) and lines
that do not parse are dropped, as ``node.events.read_events`` does.
"""
from __future__ import annotations

import glob
import re
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

HISTORY_SCHEMA = T.StructType([
    T.StructField("index", T.LongType()),
    T.StructField("type", T.StringType()),
    T.StructField("process", T.StringType()),
    T.StructField("time", T.LongType()),
    T.StructField("f", T.StringType()),
    T.StructField("error", T.StringType()),
    T.StructField("node", T.IntegerType()),
    T.StructField("group", T.StringType()),
    T.StructField("final", T.BooleanType()),
])


class RunError(ValueError):
    pass


@dataclass
class Inputs:
    runs: list[str]
    paths: dict[str, str]          # run id -> directory
    ops: DataFrame
    events: DataFrame
    segments: DataFrame | None = None


def expand(paths: list[str]) -> dict[str, str]:
    """Run directories (a directory with a history.jsonl) from paths and globs; id = directory name."""
    out: dict[str, str] = {}
    for p in paths:
        matches = [p] if Path(p).is_dir() else (sorted(glob.glob(p)) or [p])  # an existing directory is literal
        for m in matches:
            d = Path(m)
            if not (d / "history.jsonl").exists():
                if glob.has_magic(p) and d.is_dir() and m != p:
                    continue
                raise RunError(f"{m}: not a chaos run directory (no history.jsonl)")
            if (d / "history.jsonl").is_dir() and not list((d / "history.jsonl").glob("*.jsonl")):
                raise RunError(f"{m}: history.jsonl is a directory without part files (*.jsonl)")
            rid = d.resolve().name
            if rid in out and out[rid] != str(d.resolve()):
                raise RunError(f"two runs named {rid!r}: {out[rid]} and {d.resolve()}")
            out[rid] = str(d.resolve())
    if not out:
        raise RunError(f"no chaos run directories in {' '.join(paths)}")
    return out


def hadoop_path(path: str | Path) -> str:
    """A local path for Spark's readers, its glob characters escaped (Hadoop expands them otherwise)."""
    return re.sub(r"([\\*?\[\]{}])", r"\\\1", str(path))


def local_path(path_col: str, encoded: bool = False):
    """A Spark file URI as a local path: ``file:`` dropped and, for ``input_file_name()``'s URIs
    (``encoded``: ``%20`` for a space, ``%25`` for ``%``), percent-decoded (a literal ``+`` stays ``+``)."""
    path = F.regexp_replace(F.col(path_col), "^file:(//)?", "")
    if encoded:
        path = F.url_decode(F.regexp_replace(path, "\\+", "%2B"))
    return path


def _run_of(path_col: str, paths: dict[str, str], encoded: bool = False):
    """The run id of an input file: the run directory that contains it."""
    path = local_path(path_col, encoded)
    expr = F.lit(None).cast("string")
    for rid, d in sorted(paths.items(), key=lambda kv: len(kv[1])):  # the longest (innermost) wins
        expr = F.when(path.startswith(d.rstrip("/") + "/"), F.lit(rid)).otherwise(expr)
    return expr


def read_history(spark: SparkSession, paths: dict[str, str]) -> DataFrame:
    files = []
    for d in paths.values():
        h = Path(d) / "history.jsonl"
        files.append(hadoop_path(h) + "/*.jsonl" if h.is_dir() else hadoop_path(h))
    raw = spark.read.text(files).withColumn("_file", F.input_file_name())
    parsed = raw.select(F.col("_file"), F.col("value").alias("_line"),
                        F.from_json("value", HISTORY_SCHEMA).alias("o"),
                        F.get_json_object("value", "$.value").alias("value"))
    ops = parsed.where(F.col("o.index").isNotNull() & F.col("o.type").isNotNull())
    return ops.select(_run_of("_file", paths, encoded=True).alias("run"), "o.index", "o.type", "o.process",
                      "o.time", "o.f", "value", "o.error", "o.node", "o.group",
                      F.coalesce(F.col("o.final"), F.lit(False)).alias("final"))


def read_events(spark: SparkSession, paths: dict[str, str]) -> DataFrame:
    files = [hadoop_path(Path(d) / "cluster" / "events") + "/broker-*.jsonl" for d in paths.values()
             if list((Path(d) / "cluster" / "events").glob("broker-*.jsonl"))]
    schema = "broker INT, mono_ns LONG, ts_ms DOUBLE, type STRING"
    if not files:
        return spark.createDataFrame([], f"run STRING, {schema}, fields STRING")
    raw = spark.read.text(files).withColumn("_file", F.input_file_name())
    parsed = raw.select("_file", F.col("value").alias("fields"), F.from_json("value", schema).alias("e"))
    return (parsed.where(F.col("e.type").isNotNull() & F.col("e.mono_ns").isNotNull())
            .select(_run_of("_file", paths, encoded=True).alias("run"), "e.broker", "e.mono_ns", "e.ts_ms",
                    "e.type", "fields"))


def load_runs(spark: SparkSession, paths: list[str], with_segments: bool = True) -> Inputs:
    runs = expand(paths)
    inputs = Inputs(sorted(runs), runs, read_history(spark, runs), read_events(spark, runs))
    if with_segments:
        from analysis.decode import read_segments
        inputs.segments = read_segments(spark, runs)
    return inputs
