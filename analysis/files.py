"""Where a chaos run's files are and how Spark reads them: paths escaped for Hadoop, the run of an input
file, a union over runs, and the brokers' event-log files.

Shared by ``analysis.load`` (histories, raw event lines), ``analysis.events`` (parsed event lines) and
``analysis.decode`` (offsets segments), which import no one another's readers.
"""
from __future__ import annotations

import re
from functools import reduce
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

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


def run_of(path_col: str, paths: dict[str, str], encoded: bool = False):
    """The run id of an input file: the run directory that contains it."""
    path = local_path(path_col, encoded)
    expr = F.lit(None).cast("string")
    for rid, d in sorted(paths.items(), key=lambda kv: len(kv[1])):  # the longest (innermost) wins
        expr = F.when(path.startswith(d.rstrip("/") + "/"), F.lit(rid)).otherwise(expr)
    return expr


def union_per_run(spark: SparkSession, paths: dict[str, str], read) -> DataFrame | None:
    """``read(files)`` for each run's files, with ``run`` (a literal: no per-row work) first; the union.
    ``paths``: run id -> its files (runs without files are left out); None when no run has any."""
    parts = [read(files).select(F.lit(rid).alias("run"), "*") for rid, files in sorted(paths.items()) if files]
    if not parts:
        return None
    return reduce(DataFrame.unionByName, parts)


def partitions_for(spark: SparkSession, size: int) -> int:
    """Partitions for ``size`` bytes of input read from many small files: one per 64 MiB, at least one per
    core; the union of many runs' scans would otherwise make a task (or several) of every file."""
    return max(spark.sparkContext.defaultParallelism, -(-size // (64 << 20)))


EVENT_HEAD = "broker INT, mono_ns LONG, ts_ms DOUBLE, type STRING"


def read_event_files(spark: SparkSession, paths: dict[str, str], read) -> DataFrame | None:
    """``read(files)`` of each run's event logs, ``run`` first, coalesced to a few partitions (many runs'
    small files: a few tasks, not one per file); None when no run has any."""
    files = {rid: [hadoop_path(Path(d) / "cluster" / "events") + "/broker-*.jsonl"]
             for rid, d in paths.items() if list((Path(d) / "cluster" / "events").glob("broker-*.jsonl"))}
    raw = union_per_run(spark, files, read)
    if raw is None:
        return None
    size = sum(p.stat().st_size for d in paths.values() for p in (Path(d) / "cluster" / "events").glob("broker-*"))
    return raw.coalesce(partitions_for(spark, size))
