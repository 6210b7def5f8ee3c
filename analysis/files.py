"""Where chaos runs' files are and how Spark reads them: one walk of each run directory (``scan_runs``), paths
escaped for Hadoop, and one scan per kind of file over every run, the run id taken from each file's path.

Shared by ``analysis.load`` (histories, raw event lines), ``analysis.events`` (parsed event lines),
``analysis.decode`` (offsets segments) and ``analysis.runs`` (each run's results.json and scenario), which
import no one another's readers.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from analysis.spark import spread

# an offsets-topic segment: cluster/data/broker-<id>/__consumer_offsets-<p>/<20 digits>.log (analysis.decode.SEGMENT_RE)
BROKER_DIR, OFFSETS_DIR, SEGMENT_NAME = (re.compile(r"broker-\d+$"), re.compile(r"__consumer_offsets-\d+$"),
                                         re.compile(r"\d{20}\.log$"))
META_FILES = ("results.json", "scenario.yaml", "cluster.yaml")


@dataclass
class RunFiles:
    """Every input file of the runs (run id -> its files, in order), found by ``scan_runs``: the only listing
    of the run directories; every reader takes its files from here."""
    dirs: dict[str, str]
    history: dict[str, list[str]] = field(default_factory=dict)
    events: dict[str, list[str]] = field(default_factory=dict)
    segments: dict[str, list[str]] = field(default_factory=dict)
    meta: dict[str, dict[str, str]] = field(default_factory=dict)   # run -> META_FILES name -> path
    event_bytes: int = 0
    segment_bytes: int = 0
    input_bytes: int = 0     # every history, event-log and segment file, in bytes (``analysis.spark.sized_to``)


def _entries(d: str) -> list[os.DirEntry]:
    try:
        with os.scandir(d) as it:
            return sorted(it, key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []


def scan_runs(dirs: dict[str, str]) -> RunFiles:
    """One walk of each run directory (run id -> directory): its history (the file, or a directory's
    ``*.jsonl`` parts), ``cluster/events/broker-*.jsonl``, the offsets segments, and ``META_FILES``."""
    out = RunFiles(dict(dirs))
    for rid, d in sorted(dirs.items()):
        top = {e.name: e for e in _entries(d)}
        h = top.get("history.jsonl")
        if h is not None:
            parts = [e for e in _entries(h.path) if e.name.endswith(".jsonl") and e.is_file()] if h.is_dir() else [h]
            out.history[rid] = [e.path for e in parts]
            out.input_bytes += sum(e.stat().st_size for e in parts)
        out.meta[rid] = {n: top[n].path for n in META_FILES if n in top and top[n].is_file()}
        if "cluster" not in top:
            continue
        cluster = {e.name: e for e in _entries(top["cluster"].path)}
        if "events" in cluster:
            evs = [e for e in _entries(cluster["events"].path)
                   if e.name.startswith("broker-") and e.name.endswith(".jsonl")]
            out.events[rid] = [e.path for e in evs]
            out.event_bytes += sum(e.stat().st_size for e in evs)
            out.input_bytes += sum(e.stat().st_size for e in evs)
        segs = []
        for b in _entries(cluster["data"].path) if "data" in cluster else ():
            if BROKER_DIR.match(b.name) and b.is_dir():
                for p in _entries(b.path):
                    if OFFSETS_DIR.match(p.name) and p.is_dir():
                        found = [e for e in _entries(p.path) if SEGMENT_NAME.match(e.name)]
                        segs += [e.path for e in found]
                        size = sum(e.stat().st_size for e in found)
                        out.input_bytes += size
                        out.segment_bytes += size
        if segs:
            out.segments[rid] = segs
    return out


def hadoop_path(path: str | Path) -> str:
    """A local path for Spark's readers, its glob characters escaped (Hadoop expands them otherwise)."""
    return re.sub(r"([\\*?\[\]{}])", r"\\\1", str(path))


def local_path(path_col: str | Column, encoded: bool = False) -> Column:
    """A Spark file URI as a local path: ``file:`` dropped and, for ``input_file_name()``'s URIs
    (``encoded``: ``%20`` for a space, ``%25`` for ``%``), percent-decoded (a literal ``+`` stays ``+``)."""
    col = F.col(path_col) if isinstance(path_col, str) else path_col
    path = F.regexp_replace(col, "^file:(//)?", "")
    if encoded:
        path = F.when(path.contains("%"), F.url_decode(F.regexp_replace(path, "\\+", "%2B"))).otherwise(path)
    return path


def _component(path: Column, depth: int) -> tuple[Column, Column]:
    """(the path component ``depth`` places from the end, 1 for the last; whether the path has one there):
    string functions that scan from the end, no regular expression."""
    if depth == 1:
        return F.substring_index(path, "/", -1), F.lit(True)
    tail = F.substring_index(path, "/", -(depth - 1))
    before = path.substr(F.lit(1), F.length(path) - F.length(tail) - 1)
    return F.substring_index(before, "/", -1), F.length(path) > F.length(tail)


def run_from_path(path: Column, rel: tuple[tuple[str | None, ...], ...]) -> Column:
    """The run id of a file from its path: the name of the directory holding ``rel`` (the file's place inside
    the run directory: its layouts, deepest first, each its components with None for any name), as
    ``analysis.load.expand`` names runs; ``""`` when the path has none of them.  The same as the regular
    expression ``([^/]+)/<rel>$`` (its leftmost match is the deepest layout), computed from the end of the path
    with string functions: per line of every file, a regular expression's search along the whole path cost
    microseconds (1,000 runs: 20M history lines)."""
    out = F.lit("")
    for layout in reversed(rel):   # the deepest layout is tested first: it is the outermost ``when``
        run, present = _component(path, len(layout) + 1)
        ok = present & (run != "")
        for i, name in enumerate(layout):
            part, _ = _component(path, len(layout) - i)
            ok = ok & ((part == name) if name is not None else (part != ""))
        out = F.when(ok, run).otherwise(out)
    return out


def _decoded(name: Column) -> Column:
    """A path component of ``input_file_name()``'s URI percent-decoded, as ``local_path(encoded=True)`` decodes
    the whole path (the URI never encodes the ``/`` between components)."""
    return F.when(name.contains("%"), F.url_decode(F.regexp_replace(name, "\\+", "%2B"))).otherwise(name)


# each kind of input file's place inside its run directory (``run_from_path``): its layouts, deepest first
HISTORY_REL = (("history.jsonl", None), ("history.jsonl",))
EVENTS_REL = (("cluster", "events", None),)
SEGMENT_REL = (("cluster", "data", None, None, None),)
META_REL = ((None,),)


def read_many(spark: SparkSession, files: dict[str, list[str]], read, rel: tuple) -> DataFrame | None:
    """``read(paths)`` over every run's files at once (one scan: Spark packs small files into a few
    partitions), with ``run`` first: a literal for one run, else the run directory's name in each file's path.
    None when no run has a file."""
    paths = [hadoop_path(f) for _rid, fs in sorted(files.items()) for f in fs]
    if not paths:
        return None
    df = read(paths)
    if len(files) == 1:
        return df.select(F.lit(next(iter(files))).alias("run"), "*")
    # the path in a projection of its own: ``input_file_name()`` is not deterministic, so Spark computes each
    # of its uses apart (dozens in ``run_from_path``); from a column, the common parts are computed once a row
    cols = [F.col(f"`{c}`") for c in df.columns]
    with_file = df.select(F.input_file_name().alias("_file"), *cols)
    return with_file.select(_decoded(run_from_path(F.col("_file"), rel)).alias("run"), *cols)


def partitions_for(spark: SparkSession, size: int) -> int:
    """Partitions for ``size`` bytes of input read from many small files: one per 64 MiB, at least one per
    core."""
    return max(spread(spark, spark.sparkContext.defaultParallelism), -(-size // (64 << 20)))


EVENT_HEAD = "broker INT, mono_ns LONG, ts_ms DOUBLE, type STRING"


def read_event_files(spark: SparkSession, files: RunFiles, read) -> DataFrame | None:
    """``read(paths)`` of every run's event logs in one scan, ``run`` first, coalesced to a few partitions
    (many runs' small files: a few tasks, not one per file); None when no run has any."""
    raw = read_many(spark, files.events, read, EVENTS_REL)
    if raw is None:
        return None
    return raw.coalesce(partitions_for(spark, files.event_bytes))
