"""The history's tables: client operations paired Jepsen-style, what was observed, and group offsets.

``build_ops_tables(inputs)`` turns the raw ``inputs.ops`` (one row per
history line, docs/analysis.md "Raw inputs") into:

* ``ops``: one row per client operation.  Per run and process, lines are
  taken in ``index`` order and an invoke is completed by the next line of the
  same process when that line is a completion (``ok``/``fail``/``info``);
  otherwise it stays ``open`` (as ``chaos.history.pair_ops``).  Nemesis lines
  are left out.
* ``observations``: every ok send, and every record of every ok poll
  (``source`` ``poll``, or ``final`` for the end-of-run reads).
* ``group_offsets``: every ``"topic/partition": offset`` entry (also the
  client's ``"topic-partition"`` form) of a commit, whatever its outcome
  (ok, fail, info, open), and of a fetch-committed's answer.
* ``pairing_errors``: the lines that make a history malformed for
  ``pair_ops`` (a completion with no open invoke, an invoke while one is open,
  an unknown type); ``chaos.checkers.check`` calls such a history unknown.

Columns: docs/analysis.md ("Tables").  Values come parsed from
``analysis.load`` (``VALUE_DDL``; no Python UDF): numbers are kept as their
JSON text and checked to be integers (``^-?[0-9]+$``), as the Python
checkers' ``is_int``.
The paired operations, the observations and the group offsets are persisted
(MEMORY_AND_DISK): every checker reads them.
"""
from __future__ import annotations

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

COMPLETIONS = ("ok", "fail", "info")
NEMESIS = "nemesis"


OPS_COLUMNS = ["run", "index", "process", "f", "type", "invoke_ns", "complete_ns", "latency_ms", "group", "node",
               "error", "final", "topic", "partition", "offset", "value", "member", "generation", "records",
               "complete_index"]
# Not written, kept on the in-memory ops the checkers read: the completion's (else the invoke's) parsed
# value, and the invoke's (``analysis.load.VALUE_DDL``).
VALUE_COLUMNS = ["v", "iv"]
OBSERVATION_COLUMNS = ["run", "source", "op_index", "process", "group", "time_ns", "topic", "partition", "offset",
                       "value", "complete_index", "position"]
GROUP_OFFSET_COLUMNS = ["run", "f", "op_index", "process", "group", "generation", "member", "invoke_ns",
                        "complete_ns", "type", "node", "final", "topic", "partition", "offset", "complete_index"]


def as_int(c: Column, cast: str = "long") -> Column:
    """A JSON number's text as an integer; null unless it is one (``is_int``: no floats, no booleans)."""
    return F.when(c.rlike(r"^-?[0-9]+$"), c.cast(cast))


def tp_topic(key: Column) -> Column:
    """``"t/p"`` or ``"t-p"`` (split at the last ``/``, else the last ``-``) -> the topic, or null."""
    t = F.when(key.contains("/"), F.regexp_extract(key, r"^(.*)/([^/]*)$", 1)).otherwise(
        F.regexp_extract(key, r"^(.*)-([^-]*)$", 1))
    return F.when((t != "") & tp_partition(key).isNotNull(), t)


def tp_partition(key: Column) -> Column:
    """The partition of a ``"t/p"``/``"t-p"`` key (Python's ``int()`` of the text after the separator)."""
    p = F.trim(F.when(key.contains("/"), F.regexp_extract(key, r"/([^/]*)$", 1)).otherwise(
        F.regexp_extract(key, r"-([^-]*)$", 1)))
    return F.when(key.rlike(r"[/-]") & p.rlike(r"^[+-]?[0-9]+$"), F.regexp_replace(p, r"^\+", "").cast("int"))


def _persist(df: DataFrame) -> DataFrame:
    return df.persist(StorageLevel.MEMORY_AND_DISK)


def pair_lines(raw: DataFrame) -> DataFrame:
    """Each line with the next line of its process and, when ``pair_ops`` would reject the history because
    of it, ``_err`` (why).  Nemesis lines are kept (their process is its own window partition; never an
    error): the faults table reads them from here, so the history is parsed and shuffled once."""
    w = Window.partitionBy("run", "process").orderBy("index")
    nxt = F.lead(F.struct("type", "index", "time", "value", "node", "error", "final")).over(w)
    lines = raw.select("*", nxt.alias("_next"), F.lag("type").over(w).alias("_prev_type"))
    t, prev = F.col("type"), F.col("_prev_type")
    err = (F.when(~t.isin("invoke", *COMPLETIONS), F.concat(F.lit("unknown type "), F.coalesce(t, F.lit("null"))))
           .when((t == "invoke") & (prev == "invoke"), F.lit("invoked while an operation of its process is open"))
           .when(t.isin(*COMPLETIONS) & (prev.isNull() | (prev != "invoke")),
                 F.concat(t, F.lit(" with no open invoke"))))
    return lines.withColumn("_err", F.when(F.col("process").isNull() | (F.col("process") != NEMESIS), err))


def paired_ops(lines: DataFrame) -> DataFrame:
    """One row per client operation: its invoke and, when the next line of its process completes it,
    that; plus the rows of lines that make the history malformed, and the nemesis lines (``_line`` says
    which is which: ``invoke``, the malformed line's type, or ``nemesis``)."""
    nemesis = F.coalesce(F.col("process") == NEMESIS, F.lit(False))
    keep = lines.where(((F.col("type") == "invoke") & ~nemesis) | F.col("_err").isNotNull() | nemesis)
    nx = F.col("_next")
    done = F.when((F.col("type") == "invoke") & ~nemesis & nx.type.isin(*COMPLETIONS), nx)
    ops = keep.select("run", "index", "process", "f", "group", F.col("time").alias("invoke_ns"),
                      F.col("value").alias("iv"), F.col("final").alias("_inv_final"), done.alias("d"),
                      F.when(nemesis, F.lit(NEMESIS)).otherwise(F.col("type")).alias("_line"), "_err")
    ops = ops.select("*", F.coalesce(F.col("d.value"), F.col("iv")).alias("v"))
    v, iv = F.col("v"), F.col("iv")
    is_send = F.col("f") == "send"
    return ops.select(
        "run", "index", "process", "f",
        F.coalesce(F.col("d.type"), F.lit("open")).alias("type"),
        "invoke_ns", F.col("d.time").alias("complete_ns"),
        ((F.col("d.time") - F.col("invoke_ns")) / 1e6).alias("latency_ms"),
        "group", F.col("d.node").alias("node"), F.col("d.error").alias("error"),
        (F.col("_inv_final") | F.coalesce(F.col("d.final"), F.lit(False))).alias("final"),
        v.topic.alias("topic"), as_int(v.partition, "int").alias("partition"),
        F.when(is_send, as_int(v.offset)).alias("offset"), F.when(is_send, v.value).alias("value"),
        v.member.alias("member"),
        F.coalesce(as_int(v.generation, "int"), as_int(iv.generation, "int")).alias("generation"),
        F.when(F.col("f") == "poll", F.size(v.records)).cast("int").alias("records"),
        F.col("d.index").alias("complete_index"), "v", "iv", "_line", "_err")


def observations_of(ops: DataFrame) -> DataFrame:
    """Ok sends (with a topic, an integer partition and offset) and the records of ok polls."""
    ok = ops.where(F.col("type") == "ok")
    sends = (ok.where((F.col("f") == "send") & F.col("topic").isNotNull() & F.col("partition").isNotNull()
                      & F.col("offset").isNotNull())
             .select("run", F.lit("send").alias("source"), F.col("index").alias("op_index"), "process", "group",
                     F.col("complete_ns").alias("time_ns"), "topic", "partition", "offset", "value",
                     "complete_index", F.lit(0).alias("position")))
    polls = ok.where(F.col("f") == "poll").select(
        "run", F.when(F.col("final"), "final").otherwise("poll").alias("source"), F.col("index").alias("op_index"),
        "process", "group", F.col("complete_ns").alias("time_ns"), "complete_index",
        F.posexplode(F.col("v.records")).alias("position", "r"))
    r = F.col("r")
    polls = (polls.where((F.size(r) >= 4) & r[0].isNotNull() & as_int(r[1]).isNotNull() & as_int(r[2]).isNotNull())
             .select("run", "source", "op_index", "process", "group", "time_ns", r[0].alias("topic"),
                     as_int(r[1], "int").alias("partition"), as_int(r[2]).alias("offset"), r[3].alias("value"),
                     "complete_index", F.col("position").cast("int").alias("position")))
    return sends.unionByName(polls).select(*OBSERVATION_COLUMNS)


def group_offsets_of(ops: DataFrame) -> DataFrame:
    """Every offset entry of a commit (any outcome) or of a fetch-committed's value, one row each."""
    g = (ops.where(F.col("f").isin("commit", "fetch-committed"))
         .select("run", "f", F.col("index").alias("op_index"), "process", "group", "generation", "member",
                 "invoke_ns", "complete_ns", "type", "node", "final", "complete_index",
                 F.explode(F.col("v.offsets")).alias("key", "o")))
    return (g.where(tp_topic(F.col("key")).isNotNull())
            .select("*", tp_topic(F.col("key")).alias("topic"), tp_partition(F.col("key")).alias("partition"),
                    as_int(F.col("o")).alias("offset"))
            .select(*GROUP_OFFSET_COLUMNS))


def build_ops_tables(inputs, persist: bool = True) -> dict[str, DataFrame]:
    """``ops``, ``observations``, ``group_offsets`` (docs/analysis.md), ``pairing_errors`` (``run, index,
    reason``: the lines that make the history malformed) and ``nemesis`` (``run, index, time, f, value``:
    the nemesis lines, for ``analysis.tables.faults``; not a table of its own).  ``ops`` also carries
    ``VALUE_COLUMNS`` (dropped when written)."""
    both = paired_ops(pair_lines(inputs.ops))
    if persist:
        both = _persist(both)
    ops = both.where(F.col("_line") == "invoke").select(*OPS_COLUMNS, *VALUE_COLUMNS)
    nemesis = both.where(F.col("_line") == NEMESIS).select(
        "run", "index", F.col("invoke_ns").alias("time"), "f", F.col("iv").alias("value"))
    errors = both.where(F.col("_err").isNotNull()).select("run", "index", F.col("_err").alias("reason"))
    obs, offsets = observations_of(ops), group_offsets_of(ops)
    if persist:
        obs, offsets = _persist(obs), _persist(offsets)
        _PERSISTED[id(ops)] = [both, obs, offsets]
    return {"ops": ops, "observations": obs, "group_offsets": offsets, "pairing_errors": errors,
            "nemesis": nemesis}


_PERSISTED: dict[int, list[DataFrame]] = {}


def release_ops_tables(tables: dict[str, DataFrame]) -> None:
    """Unpersist what ``build_ops_tables`` persisted (e.g. once the tables are written as Parquet)."""
    for df in _PERSISTED.pop(id(tables.get("ops")), []):
        df.unpersist()
