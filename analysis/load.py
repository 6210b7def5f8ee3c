"""Reading chaos runs into Spark: histories, event logs and offsets-topic segments.

``load_runs(spark, paths)`` expands run directories and globs and returns the
raw DataFrames of docs/analysis-internals.md ("Raw inputs"), each with ``run`` (the
run directory's name) first.  Torn last lines (a killed writer) and lines
that do not parse are dropped, as ``node.events.read_events`` does.
"""
from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analysis.files import EVENT_HEAD, HISTORY_REL, RunFiles, read_event_files, read_many, scan_runs
from analysis.local_rows import local_rows

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
    files: RunFiles | None = None     # every input file (analysis.files.scan_runs: the one listing)

    def parsed_events(self) -> DataFrame:
        """The event lines with their fields parsed (``analysis.events``): made once per ``Inputs``."""
        if self.parsed is None:
            from analysis.events import parse_events
            self.parsed = parse_events(self.events.sparkSession, self.run_files())
        return self.parsed

    def run_files(self) -> RunFiles:
        if self.files is None:
            self.files = scan_runs(self.paths)
        return self.files


def as_files(paths: dict[str, str] | RunFiles) -> RunFiles:
    return paths if isinstance(paths, RunFiles) else scan_runs(paths)


def _runs_under(d: Path) -> list[Path]:
    """The run directories directly under ``d`` (a directory of runs), by name."""
    with os.scandir(d) as it:
        return sorted(Path(e.path) for e in it if e.is_dir() and os.path.exists(os.path.join(e.path, "history.jsonl")))


def expand(paths: list[str]) -> dict[str, str]:
    """Run directories (a directory with a history.jsonl) from paths and globs; id = directory name.

    A path given as is must be a run directory, or a directory of runs (its subdirectories that are runs);
    a glob may match other things too (they are passed over) but must match at least one run.  RunError
    says what is wrong."""
    out: dict[str, str] = {}
    for p in paths:
        literal = Path(p).exists() or not glob.has_magic(p)  # an existing path is never a pattern
        matches = [p] if literal else sorted(glob.glob(p))
        if literal and Path(p).is_dir() and not (Path(p) / "history.jsonl").exists():
            matches = [str(d) for d in _runs_under(Path(p))]
            if not matches:
                raise RunError(f"{p}: not a chaos run directory (no history.jsonl), nor a directory of runs")
            literal = False
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


def read_history(spark: SparkSession, paths: dict[str, str] | RunFiles) -> DataFrame:
    """Every line of every run's history, parsed once by Spark's JSON reader (``HISTORY_DDL``), in one
    scan of every run's files; lines that do not parse, or have no ``index`` or ``type`` (a torn last line),
    are dropped."""
    files = as_files(paths)
    lines = read_many(spark, files.history, lambda fs: spark.read.schema(HISTORY_DDL).json(fs), HISTORY_REL)
    if lines is None:
        lines = local_rows(spark, [], f"run STRING, {HISTORY_DDL}")
    lines = lines.where(F.col("index").isNotNull() & F.col("type").isNotNull())
    return lines.select("run", "index", "type", "process", "time", "f", "value", "error", "node", "group",
                        F.coalesce(F.col("final"), F.lit(False)).alias("final"))


def read_events(spark: SparkSession, paths: dict[str, str] | RunFiles) -> DataFrame:
    """Every line of every run's event logs: broker, mono_ns, ts_ms, type and the whole line (``fields``)."""
    raw = read_event_files(spark, as_files(paths), lambda fs: spark.read.text(fs))
    if raw is None:
        return local_rows(spark, [], f"run STRING, {EVENT_HEAD}, fields STRING")
    parsed = raw.select("run", F.col("value").alias("fields"), F.from_json("value", EVENT_HEAD).alias("e"))
    return (parsed.where(F.col("e.type").isNotNull() & F.col("e.mono_ns").isNotNull())
            .select("run", "e.broker", "e.mono_ns", "e.ts_ms", "e.type", "fields"))


def load_runs(spark: SparkSession, paths: list[str], with_segments: bool = True,
              files: RunFiles | None = None) -> Inputs:
    """The runs of ``paths`` (``expand``); ``files``: their files when already listed (``scan_runs``)."""
    runs = files.dirs if files is not None else expand(paths)
    files = files if files is not None else scan_runs(runs)
    inputs = Inputs(sorted(runs), runs, read_history(spark, files), read_events(spark, files), files=files)
    if with_segments:
        from analysis.decode import read_segments
        inputs.segments = read_segments(spark, files)
    return inputs
