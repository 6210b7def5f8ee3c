"""The brokers' event lines, parsed once: every field any table, the failover timeline or a checker reads.

``parse_events(spark, files)`` reads the runs' event logs (``analysis.files.RunFiles``, in one scan
by ``analysis.files.read_event_files``) with Spark's JSON reader into one
row per line with the typed fields of ``EVENT_DDL`` (absent fields are null)
and:

* ``seq``: the line's place in its file (``monotonically_increasing_id`` of
  the read, which follows the file for a file read as one split), to break
  ``mono_ns`` ties as ``node.events.read_run_events``' stable sort does;
* ``proc``: which process of its broker wrote the line, 0 before any
  ``broker_starting``, then 1, 2, ... (``judge.check_model.Events.process``).

A field of the wrong JSON type on some line is null on that line only (Spark's
partial results), so one schema for every type reads each type's fields as a
schema of its own would.  ``analysis.main`` persists the result; tables,
failovers and checkers filter it by ``type`` and never parse a line again.

The group coordinator's ``group_generation`` and ``group_state_changed`` lines
have a ``leader`` that is a member id, not a broker: ``group_events`` parses
those (few) lines with ``GROUP_DDL``.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from analysis.files import EVENT_HEAD, RunFiles, read_event_files
from analysis.local_rows import local_rows

# Each field with the type every event type that has it gives it (docs/events.md); ``new`` (a broker
# change's list) and ``leader`` (a generation's member id) are read only where they are numbers.
EVENT_DDL = ("topic STRING, partition INT, reason STRING, leader INT, leader_epoch INT, isr ARRAY<INT>, "
             "controller_epoch INT, zk_version INT, previous_leader INT, previous_isr ARRAY<INT>, "
             "mono_ns_written BIGINT, epoch INT, request_controller_epoch INT, write_ms DOUBLE, old_isr ARRAY<INT>, "
             "old BIGINT, new BIGINT, decreased BOOLEAN, records BIGINT, replayed BIGINT, duration_ms DOUBLE, "
             "groups INT, partitions INT, dead ARRAY<INT>, bounced ARRAY<INT>, broker_id INT, log_start_offset BIGINT, "
             "replicas ARRAY<STRING>")
# group_generation / group_state_changed: ``members`` as its JSON text (the member ids, or a count)
GROUP_DDL = ("`group` STRING, generation INT, `to` STRING, reason STRING, leader STRING, protocol STRING, "
             "members STRING")
GROUP_TYPES = ("group_generation", "group_state_changed")


def parse_events(spark: SparkSession, files: RunFiles) -> DataFrame:
    """``run, broker, mono_ns, ts_ms, type, seq, proc`` and the fields of ``EVENT_DDL``, one row per line
    with a ``type`` and a ``mono_ns``."""
    schema = f"{EVENT_HEAD}, {EVENT_DDL}"
    ev = read_event_files(spark, files, lambda fs: spark.read.schema(schema).json(fs))
    if ev is None:
        return local_rows(spark, [], f"run STRING, {EVENT_HEAD}, seq BIGINT, proc BIGINT, {EVENT_DDL}")
    ev = (ev.where(F.col("type").isNotNull() & F.col("mono_ns").isNotNull())
          .select("*", F.monotonically_increasing_id().alias("seq")))
    w = Window.partitionBy("run", "broker").orderBy("mono_ns", "seq").rowsBetween(Window.unboundedPreceding,
                                                                                 Window.currentRow)
    proc = F.sum(F.when(F.col("type") == "broker_starting", 1).otherwise(0)).over(w)
    fields = [f.strip().split(" ")[0] for f in EVENT_DDL.split(", ")]
    return ev.select("run", "broker", "mono_ns", "ts_ms", "type", "seq", proc.alias("proc"), *fields)


def group_events(spark: SparkSession, files: RunFiles) -> DataFrame:
    """The ``GROUP_TYPES`` lines: ``run, broker, mono_ns, type`` and the fields of ``GROUP_DDL``.  Only the
    lines that can be one are parsed: those naming a group type, or with an escape (a backslash and ``u``) that could
    spell one."""
    schema = f"{EVENT_HEAD}, {GROUP_DDL}"
    raw = read_event_files(spark, files, lambda fs: spark.read.text(fs))
    if raw is None:
        return local_rows(spark, [], f"run STRING, broker INT, mono_ns BIGINT, type STRING, {GROUP_DDL}")
    line = F.col("value")
    maybe = line.contains("\\u")
    for t in GROUP_TYPES:
        maybe = maybe | line.contains(t)
    e = raw.where(maybe).select("run", F.from_json("value", schema).alias("e"))
    return (e.where(F.col("e.type").isin(*GROUP_TYPES) & F.col("e.mono_ns").isNotNull())
            .select("run", "e.broker", "e.mono_ns", "e.type", *[f"e.{c.strip().split(' ')[0].strip('`')}"
                                                                 for c in GROUP_DDL.split(", ")]))
