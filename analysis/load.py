"""Reading chaos runs into Spark: histories, event logs and offsets-topic segments.

``load_runs(spark, paths)`` expands run directories and globs and returns the
raw DataFrames of docs/analysis-internals.md ("Raw inputs"), each with ``run`` (the
run directory's name) first.  Torn last lines (a killed writer) and lines
that do not parse are dropped, as ``node.events.read_events`` does.
"""
from __future__ import annotations

import glob
import re
from dataclasses import dataclass
from functools import reduce
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

# The nemesis' fields of a value (also how analysis.ops_tables reads back a nemesis line's value).
NEMESIS_VALUE_DDL = ("fault INT, phase STRING, kind STRING, target STRING, nodes ARRAY<STRING>, peers ARRAY<STRING>, "
                     "skipped STRING")
# A history line, parsed once.  ``value`` is read as a struct of every field a table or a checker uses
# (client ops' and the nemesis'); numbers are kept as their JSON text (checked later by
# ``ops_tables.as_int``, as the Python checkers' ``is_int``), and a field holding a list or an object
# where a string is expected as its JSON text.  A value that is not an object is null; a field of the
# wrong shape (``records`` that is not a list of lists) is null, the rest of the line is kept.
CLIENT_VALUE_DDL = ("topic STRING, partition STRING, offset STRING, value STRING, member STRING, generation STRING, "
                    "records ARRAY<ARRAY<STRING>>, offsets MAP<STRING,STRING>, high_watermark STRING, acks STRING, "
                    "assignment ARRAY<STRING>, partitions ARRAY<STRING>")
VALUE_DDL = CLIENT_VALUE_DDL + ", " + NEMESIS_VALUE_DDL
HISTORY_DDL = (f"`index` LONG, type STRING, process STRING, time LONG, f STRING, value STRUCT<{VALUE_DDL}>, "
               "error STRING, node INT, `group` STRING, final BOOLEAN")


class RunError(ValueError):
    pass


@dataclass
class Inputs:
    runs: list[str]
    paths: dict[str, str]          # run id -> directory
    ops: DataFrame
    events: DataFrame
    segments: DataFrame | None = None
    parsed: DataFrame | None = None   # analysis.events.parse_events(events), made once (analysis.main persists it)

    def parsed_events(self) -> DataFrame:
        """The event lines with their fields parsed (``analysis.events``): made once per ``Inputs``."""
        if self.parsed is None:
            from analysis.events import parse_events
            self.parsed = parse_events(self.events.sparkSession, self.paths)
        return self.parsed


def expand(paths: list[str]) -> dict[str, str]:
    """Run directories (a directory with a history.jsonl) from paths and globs; id = directory name.

    A path given as is must be a run directory; a glob may match other things too (they are passed over)
    but must match at least one run.  RunError says what is wrong."""
    out: dict[str, str] = {}
    for p in paths:
        literal = Path(p).exists() or not glob.has_magic(p)  # an existing path is never a pattern
        matches = [p] if literal else sorted(glob.glob(p))
        found = 0
        for m in matches:
            d = Path(m)
            h = d / "history.jsonl"
            if not h.exists():
                if literal:
                    raise RunError(f"{m}: not a chaos run directory (no history.jsonl)")
                continue
            if h.is_dir() and not list(h.glob("*.jsonl")):
                raise RunError(f"{m}: history.jsonl is a directory without part files (*.jsonl)")
            rid = d.resolve().name
            if rid in out and out[rid] != str(d.resolve()):
                raise RunError(f"two runs named {rid!r}: {out[rid]} and {d.resolve()}")
            out[rid] = str(d.resolve())
            found += 1
        if not found:
            raise RunError(f"{p}: matches no chaos run directory")
    if not out:
        raise RunError("no chaos run directories given")
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


def _union_per_run(spark: SparkSession, paths: dict[str, str], read) -> DataFrame | None:
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


def read_history(spark: SparkSession, paths: dict[str, str]) -> DataFrame:
    """Every line of every run's history, parsed once by Spark's JSON reader (``HISTORY_DDL``); lines
    that do not parse, or have no ``index`` or ``type`` (a torn last line), are dropped."""
    files = {}
    for rid, d in paths.items():
        h = Path(d) / "history.jsonl"
        files[rid] = [hadoop_path(h) + "/*.jsonl" if h.is_dir() else hadoop_path(h)]
    lines = _union_per_run(spark, files, lambda fs: spark.read.schema(HISTORY_DDL).json(fs))
    lines = lines.where(F.col("index").isNotNull() & F.col("type").isNotNull())
    return lines.select("run", "index", "type", "process", "time", "f", "value", "error", "node", "group",
                        F.coalesce(F.col("final"), F.lit(False)).alias("final"))


EVENT_HEAD = "broker INT, mono_ns LONG, ts_ms DOUBLE, type STRING"


def read_event_files(spark: SparkSession, paths: dict[str, str], read) -> DataFrame | None:
    """``read(files)`` of each run's event logs, ``run`` first, coalesced to a few partitions (many runs'
    small files: a few tasks, not one per file); None when no run has any."""
    files = {rid: [hadoop_path(Path(d) / "cluster" / "events") + "/broker-*.jsonl"]
             for rid, d in paths.items() if list((Path(d) / "cluster" / "events").glob("broker-*.jsonl"))}
    raw = _union_per_run(spark, files, read)
    if raw is None:
        return None
    size = sum(p.stat().st_size for d in paths.values() for p in (Path(d) / "cluster" / "events").glob("broker-*"))
    return raw.coalesce(partitions_for(spark, size))


def read_events(spark: SparkSession, paths: dict[str, str]) -> DataFrame:
    """Every line of every run's event logs: broker, mono_ns, ts_ms, type and the whole line (``fields``)."""
    raw = read_event_files(spark, paths, lambda fs: spark.read.text(fs))
    if raw is None:
        return spark.createDataFrame([], f"run STRING, {EVENT_HEAD}, fields STRING")
    parsed = raw.select("run", F.col("value").alias("fields"), F.from_json("value", EVENT_HEAD).alias("e"))
    return (parsed.where(F.col("e.type").isNotNull() & F.col("e.mono_ns").isNotNull())
            .select("run", "e.broker", "e.mono_ns", "e.ts_ms", "e.type", "fields"))


def load_runs(spark: SparkSession, paths: list[str], with_segments: bool = True) -> Inputs:
    runs = expand(paths)
    inputs = Inputs(sorted(runs), runs, read_history(spark, runs), read_events(spark, runs))
    if with_segments:
        from analysis.decode import read_segments
        inputs.segments = read_segments(spark, runs)
    return inputs
