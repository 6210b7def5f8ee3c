"""The history's tables: client operations paired Jepsen-style, what was observed, and group offsets.

The history is parsed once (``analysis.load``) and shuffled once, by
:func:`paired`: one window per (run, process) pairs each invoke with the next
line of its process (``analysis.main`` bounds the window's partitions by ranges
of indexes, :func:`paired_rows`, and pairs the lines at their edges after the
write, :func:`repair_edges`), and the result keeps one row per client operation, per
line that makes the history malformed, and per nemesis line, with the
operation's columns and the few parts of its parsed values that a later table
or checker reads (``STAGING_COLUMNS``): nothing later parses a value again,
and no later step sees a whole value.  ``analysis.main`` writes these rows
once as Parquet, split by ``_line``: the operations are the ``ops`` table as
written, the other rows stay in ``<out>/work/paired`` (removed at the end);
it writes ``observations``, ``group_offsets`` and ``pairing_errors`` from
them and keeps ``extras``; every later step reads those Parquet tables,
column by column.

``build_ops_tables(inputs, paired_rows=None)`` derives from them:

* ``ops``: one row per client operation.  Per run and process, lines are
  taken in ``index`` order and an invoke is completed by the next line of the
  same process when that line is a completion (``ok``/``fail``/``info``);
  otherwise it stays ``open`` (as ``judge.check_model.pair_ops``).  Nemesis lines
  are left out.
* ``observations``: every ok send, and every record of every ok poll
  (``source`` ``poll``, or ``final`` for the end-of-run reads).
* ``group_offsets``: every ``"topic/partition": offset`` entry (also the
  client's ``"topic-partition"`` form) of a commit, whatever its outcome
  (ok, fail, info, open), and of a fetch-committed's answer.
* ``pairing_errors``: the lines that make a history malformed for
  ``pair_ops`` (a completion with no open invoke, an invoke while one is open,
  an unknown type); ``judge.checkers.check`` calls such a history unknown.
* ``nemesis``: the nemesis lines, for ``analysis.tables.faults``.

Columns: docs/analysis.md ("Tables").  Numbers in values are kept as their
JSON text and checked to be integers (``^-?[0-9]+$``), as the Python
checkers' ``is_int``.
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from analysis.load import CLIENT_VALUE_DDL, NEMESIS_VALUE_DDL
from analysis.spark import spread

COMPLETIONS = ("ok", "fail", "info")
NEMESIS = "nemesis"
MALFORMED = "malformed"


OPS_COLUMNS = ["run", "index", "process", "f", "type", "invoke_ns", "complete_ns", "latency_ms", "group", "node",
               "error", "final", "topic", "partition", "offset", "value", "member", "generation", "records",
               "complete_index"]
# The rest of the ``ops`` table (docs/analysis.md): why pair_ops rejects the line, and the parts of the values
# later steps read.  ``v`` is the completion's value, else the invoke's (``iv``), as
# ``judge.check_model.Op.value``.
#   pairing_error     why the invoke makes the history malformed (invoked while its process has one open)
#   acks              iv.acks of a send (lost-write judges acks=all sends only)
#   high_watermark    v.high_watermark of a poll, as an integer (final reads)
#   poll_topic, poll_partition   iv.topic, iv.partition of a poll (the partition a final read asked for)
#   poll_records      v.records of an ok poll (observations)
#   offsets           v.offsets of a commit or fetch-committed (group offsets, fetches)
#   fetch_partitions  iv.partitions of a fetch-committed (the partitions it asked for)
#   assignment        v.assignment of a sync (the topics a group consumes)
EXTRA_COLUMNS = ["pairing_error", "acks", "high_watermark", "poll_topic", "poll_partition", "poll_records",
                 "offsets", "fetch_partitions", "assignment"]
# The paired rows: ``ops``'s columns and ``_line`` (``invoke`` for an operation, ``nemesis``, or ``malformed``
# for a completion or unknown line that makes the history malformed; a nemesis line's value is its JSON text in
# ``value``).
STAGING_COLUMNS = OPS_COLUMNS + EXTRA_COLUMNS + ["_line"]
OBSERVATION_COLUMNS = ["run", "source", "op_index", "process", "group", "time_ns", "topic", "partition", "offset",
                       "value", "complete_index", "position"]
GROUP_OFFSET_COLUMNS = ["run", "f", "op_index", "process", "group", "generation", "member", "invoke_ns",
                        "complete_ns", "type", "node", "final", "topic", "partition", "offset", "complete_index"]


def as_int(c: Column, cast: str = "long") -> Column:
    """A JSON number's text as an integer; null unless it is one (``is_int``: no floats, no booleans)."""
    return F.when(c.rlike(r"^-?[0-9]+$"), c.cast(cast))


def _tp_split(key: Column) -> tuple[Column, Column]:
    """``"t/p"`` or ``"t-p"`` -> (the text before the last ``/``, else before the last ``-``; the text after it), as
    Python's ``key.rpartition(sep)`` (without a separator: ``""`` and the whole key).  String functions, not
    regular expressions: at 10M operations ``group_offsets`` splits about 1.8M keys."""
    tail = F.when(key.contains("/"), F.substring_index(key, "/", -1)).otherwise(F.substring_index(key, "-", -1))
    return key.substr(F.lit(1), F.length(key) - F.length(tail) - 1), tail


def tp_topic(key: Column) -> Column:
    """``"t/p"`` or ``"t-p"`` (split at the last ``/``, else the last ``-``) -> the topic, or null."""
    t = _tp_split(key)[0]
    return F.when((t != "") & tp_partition(key).isNotNull(), t)


def tp_partition(key: Column) -> Column:
    """The partition of a ``"t/p"``/``"t-p"`` key (Python's ``int()`` of the text after the separator)."""
    p = F.trim(_tp_split(key)[1])
    return F.when((key.contains("/") | key.contains("-")) & p.rlike(r"^[+-]?[0-9]+$"), p.cast("int"))


_NEXT = ("type", "index", "time", "value", "node", "error", "final")
# the value fields a client operation's columns are made from (the rest of load.VALUE_DDL is the nemesis')
CLIENT_VALUE_FIELDS = ("topic", "partition", "offset", "value", "member", "generation", "records", "offsets",
                       "high_watermark", "acks", "assignment", "partitions")
# History lines (by index) per pairing window partition on the written path (``paired_rows``): a window
# buffers each of its partitions whole, and a process's lines are millions at 10M operations.
PAIR_BUCKET = 1 << 17
EDGE = "edge"
# An edge line (``paired_rows``) as the JSON text its row carries in ``value``: the line, the next line of its
# process within its bucket (``_n_*``), the type of the line before it there (``_prev_type``) and that line's
# index (``_p_index``: null for a bucket's first line of the process).
EDGE_DDL = (f"process STRING, f STRING, type STRING, time LONG, `group` STRING, final BOOLEAN, node INT, "
            f"error STRING, value STRUCT<{CLIENT_VALUE_DDL}>, _n_type STRING, _n_index LONG, _n_time LONG, "
            f"_n_value STRUCT<{CLIENT_VALUE_DDL}>, _n_node INT, _n_error STRING, _n_final BOOLEAN, "
            f"_prev_type STRING, _p_index LONG")
EDGE_FIELDS = ("process", "f", "type", "time", "group", "final", "node", "error", "value", "_n_type", "_n_index",
               "_n_time", "_n_value", "_n_node", "_n_error", "_n_final", "_prev_type", "_p_index")


def _is_nemesis() -> Column:
    return F.coalesce(F.col("process") == NEMESIS, F.lit(False))


def _pairing_error() -> Column:
    """Why ``pair_ops`` rejects the line (``type``, and ``_prev_type``: the type of its process's line before
    it), or null; never for a nemesis line."""
    t, prev = F.col("type"), F.col("_prev_type")
    err = (F.when(~t.isin("invoke", *COMPLETIONS), F.concat(F.lit("unknown type "), F.coalesce(t, F.lit("null"))))
           .when((t == "invoke") & (prev == "invoke"), F.lit("invoked while an operation of its process is open"))
           .when(t.isin(*COMPLETIONS) & (prev.isNull() | (prev != "invoke")),
                 F.concat(t, F.lit(" with no open invoke"))))
    return F.when(F.col("process").isNull() | (F.col("process") != NEMESIS), err)


def pair_lines(raw: DataFrame, bucket: int | None = None) -> DataFrame:
    """Each line with the next line of its process (``_n_type``, ``_n_index``, ... one column each: a struct
    of them would be built before the shuffle and double what it moves) and, when ``pair_ops`` would reject
    the history because of it, ``_err`` (why).  Nemesis lines are kept (their process is its own window
    partition; never an error).

    With ``bucket``, a window partition is a process's lines within one range of ``bucket`` indexes (``_b``),
    and ``_p_index`` is the index of the line before in it: the first and the last line of each such
    partition (``paired_rows``'s edges) do not know their true neighbours yet."""
    keys = ["run", "process"] + (["_b"] if bucket else [])
    w = Window.partitionBy(*keys).orderBy("index")
    # more partitions than the default: without buckets a process's lines are one window partition, and a run
    # has few processes of very different sizes; with 4 hash partitions one task got 2.5 times the others' lines
    parts = spread(raw.sparkSession, max(16, 8 * raw.sparkSession.sparkContext.defaultParallelism))
    # Narrowed before the shuffle: client lines carry only the client fields of their value (a null struct
    # field still takes 8 bytes in every row), and nemesis lines their whole value as ``_nv``; at 10M
    # operations the shuffle and the window took about 8 % less.
    value = F.col("value")   # null stays null: a completion without a value takes its invoke's (paired)
    narrow = raw.select(*[F.when(value.isNotNull(), F.struct(*[value[c].alias(c) for c in CLIENT_VALUE_FIELDS]))
                          .alias("value") if c == "value" else c for c in raw.columns],
                        F.when(_is_nemesis(), F.col("value")).alias("_nv"),
                        *([F.expr(f"`index` div {int(bucket)}").alias("_b")] if bucket else []))
    lines = narrow.repartition(parts, *keys).select(
        "*", *[F.lead(c).over(w).alias(f"_n_{c}") for c in _NEXT], F.lag("type").over(w).alias("_prev_type"),
        *([F.lag("index").over(w).alias("_p_index")] if bucket else []))
    return lines.withColumn("_err", _pairing_error())


def _project(lines: DataFrame, edges: bool = False) -> DataFrame:
    """``pair_lines``'s rows -> the paired rows (``STAGING_COLUMNS``); with ``edges``, a bucket's first and
    last line of a process (not the nemesis') are kept whatever they are, as ``_line`` ``edge`` with the
    line as JSON in ``value`` (``EDGE_DDL``)."""
    nemesis = _is_nemesis()
    edge = (~nemesis & (F.col("_p_index").isNull() | F.col("_n_index").isNull())) if edges else F.lit(False)
    keep = lines.where(((F.col("type") == "invoke") & ~nemesis) | F.col("_err").isNotNull() | nemesis | edge)
    done = (F.col("type") == "invoke") & ~nemesis & F.col("_n_type").isin(*COMPLETIONS)

    def d(c: str) -> Column:   # the completion's column (null when the operation is open)
        return F.when(done, F.col(f"_n_{c}"))

    iv = F.col("value")
    v = F.coalesce(d("value"), iv)
    f = F.col("f")
    is_send, is_poll = f == "send", f == "poll"
    ctype = F.coalesce(d("type"), F.lit("open"))
    line = F.when(nemesis, F.lit(NEMESIS)).when(F.col("type") == "invoke", F.lit("invoke")).otherwise(F.lit(MALFORMED))
    value = F.when(is_send, v.value)
    if "_nv" in lines.columns:   # (repaired edges are never the nemesis')
        value = F.when(nemesis, F.to_json(F.col("_nv"))).otherwise(value)
    if edges:
        edge_line = F.to_json(F.struct(*[F.col(c) for c in EDGE_FIELDS]))
        line, value = F.when(edge, F.lit(EDGE)).otherwise(line), F.when(edge, edge_line).otherwise(value)
    return keep.select(
        "run", "index", "process", "f", ctype.alias("type"), F.col("time").alias("invoke_ns"),
        d("time").alias("complete_ns"), ((d("time") - F.col("time")) / 1e6).alias("latency_ms"),
        "group", d("node").alias("node"), d("error").alias("error"),
        (F.col("final") | F.coalesce(d("final"), F.lit(False))).alias("final"),
        v.topic.alias("topic"), as_int(v.partition, "int").alias("partition"),
        F.when(is_send, as_int(v.offset)).alias("offset"),
        value.alias("value"),
        v.member.alias("member"),
        F.coalesce(as_int(v.generation, "int"), as_int(iv.generation, "int")).alias("generation"),
        F.when(is_poll, F.size(v.records)).cast("int").alias("records"),
        d("index").alias("complete_index"),
        F.col("_err").alias("pairing_error"),
        F.when(is_send, iv.acks).alias("acks"),
        F.when(is_poll, as_int(v.high_watermark)).alias("high_watermark"),
        F.when(is_poll, iv.topic).alias("poll_topic"),
        F.when(is_poll, as_int(iv.partition, "int")).alias("poll_partition"),
        F.when(is_poll & (ctype == "ok"), v.records).alias("poll_records"),
        F.when(f.isin("commit", "fetch-committed"), v.offsets).alias("offsets"),
        F.when(f == "fetch-committed", iv.partitions).alias("fetch_partitions"),
        F.when(f == "sync", v.assignment).alias("assignment"),
        line.alias("_line"))


def paired(raw: DataFrame, bucket: int | None = None) -> DataFrame:
    """The paired rows (``STAGING_COLUMNS``): one per client operation (its invoke and, when the next line of
    its process completes it, that), one per line that makes the history malformed, and one per nemesis
    line; ``_line`` says which (``invoke``, ``malformed`` or ``nemesis``).  With ``bucket``, the same rows
    made as ``analysis.main`` makes them (``paired_rows``, then ``repair_edges``), lazily: the window is
    computed twice, once for the edges."""
    if not bucket:
        return _project(pair_lines(raw))
    rows = paired_rows(raw, bucket)
    return rows.where(F.col("_line") != EDGE).unionByName(repair_edges(rows.where(F.col("_line") == EDGE)))


def paired_rows(raw: DataFrame, bucket: int = PAIR_BUCKET) -> DataFrame:
    """``paired``'s rows with the pairing window bounded: one partition per process and range of ``bucket``
    indexes, so that no task buffers a whole process (millions of lines at 10M operations) and the window's
    tasks are about even.  A range's first and last line of a process do not know their neighbours in the
    ranges around: they are kept as ``_line`` ``edge`` rows (a few per range and process; the line as JSON in
    ``value``), which ``repair_edges`` pairs once they are written."""
    return _project(pair_lines(raw, bucket), edges=True)


def repair_edges(edges: DataFrame) -> DataFrame:
    """``paired_rows``'s ``edge`` rows -> their paired rows (``STAGING_COLUMNS``).  A process's edge lines, in
    index order, are each range's first and last: the line before a range's first is the edge before it
    (the previous range's last), the line after a range's last is the edge after it (the next range's first);
    the other neighbours were already right."""
    e = edges.select("run", "index", F.from_json("value", EDGE_DDL).alias("_e")).select("run", "index", "_e.*")
    w = Window.partitionBy("run", "process").orderBy("index")
    first, last = F.col("_p_index").isNull(), F.col("_n_index").isNull()
    cols = [F.when(last, F.lead(c[3:]).over(w)).otherwise(F.col(c)).alias(c) if c.startswith("_n_")
            else F.when(first, F.lag("type").over(w)).otherwise(F.col(c)).alias(c) if c == "_prev_type"
            else F.col(c) for c in e.columns]
    return _project(e.select(*cols).withColumn("_err", _pairing_error()))


def observations_of(ops: DataFrame) -> DataFrame:
    """Ok sends (with a topic, an integer partition and offset) and the records of ok polls."""
    ok = ops.where(F.col("type") == "ok")
    sends = (ok.where((F.col("f") == "send") & F.col("topic").isNotNull() & F.col("partition").isNotNull()
                      & F.col("offset").isNotNull())
             .select("run", F.lit("send").alias("source"), F.col("index").alias("op_index"), "process", "group",
                     F.col("complete_ns").alias("time_ns"), "topic", "partition", "offset", "value",
                     "complete_index", F.lit(0).alias("position")))
    polls = ok.where((F.col("f") == "poll") & F.col("poll_records").isNotNull()).select(
        "run", F.when(F.col("final"), "final").otherwise("poll").alias("source"), F.col("index").alias("op_index"),
        "process", "group", F.col("complete_ns").alias("time_ns"), "complete_index",
        F.posexplode(F.col("poll_records")).alias("position", "r"))
    r = F.col("r")
    polls = (polls.where((F.size(r) >= 4) & r[0].isNotNull() & as_int(r[1]).isNotNull() & as_int(r[2]).isNotNull())
             .select("run", "source", "op_index", "process", "group", "time_ns", r[0].alias("topic"),
                     as_int(r[1], "int").alias("partition"), as_int(r[2]).alias("offset"), r[3].alias("value"),
                     "complete_index", F.col("position").cast("int").alias("position")))
    return sends.unionByName(polls).select(*OBSERVATION_COLUMNS)


def group_offsets_of(ops: DataFrame) -> DataFrame:
    """Every offset entry of a commit (any outcome) or of a fetch-committed's value, one row each."""
    g = (ops.where(F.col("f").isin("commit", "fetch-committed") & F.col("offsets").isNotNull())
         .select("run", "f", F.col("index").alias("op_index"), "process", "group", "generation", "member",
                 "invoke_ns", "complete_ns", "type", "node", "final", "complete_index",
                 F.explode(F.col("offsets")).alias("key", "o")))
    # the key is split once, in one projection (its common parts computed once), then filtered
    return (g.select("*", tp_topic(F.col("key")).alias("topic"), tp_partition(F.col("key")).alias("partition"),
                     as_int(F.col("o")).alias("offset"))
            .where(F.col("topic").isNotNull())
            .select(*GROUP_OFFSET_COLUMNS))


EXTRAS_COLUMNS = ["run", "index", "f", "type", "final", "group", "complete_index", "_line", "pairing_error",
                  "invoke_ns", "value", "acks", "high_watermark", "poll_topic", "poll_partition", "fetch_partitions",
                  "offsets", "assignment"]


def extras_of(both: DataFrame) -> DataFrame:
    """The few paired rows whose value parts a table or a checker reads (``EXTRAS_COLUMNS``): nemesis and
    malformed lines, sends whose invoke names its acks, ok final polls, ok fetch-committed and syncs of a
    group.  Every other question is answered by the written tables."""
    f, ok, grouped = F.col("f"), F.col("type") == "ok", F.col("group").isNotNull()
    keep = ((F.col("_line") != "invoke") | F.col("pairing_error").isNotNull()
            | ((f == "send") & F.col("acks").isNotNull())
            | ((f == "poll") & ok & F.col("final"))
            | (f.isin("fetch-committed", "sync") & ok & grouped))
    return both.where(keep).select(
        *[F.when(f == "fetch-committed", F.col(c)).alias(c) if c == "offsets"
          else F.when(F.col("_line") == NEMESIS, F.col(c)).alias(c) if c == "value" else c for c in EXTRAS_COLUMNS])


def nemesis_lines(both: DataFrame) -> DataFrame:
    """The nemesis lines of the paired rows (or of ``extras``): ``run, index, time, f, value`` (the value's
    fields, ``NEMESIS_VALUE_DDL``, parsed back from its JSON text), for ``analysis.tables.faults``."""
    return both.where(F.col("_line") == NEMESIS).select(
        "run", "index", F.col("invoke_ns").alias("time"), "f", F.from_json("value", NEMESIS_VALUE_DDL).alias("value"))


def pairing_errors_of(both: DataFrame) -> DataFrame:
    """(run, index, reason): the paired rows that make the history malformed."""
    return both.where(F.col("pairing_error").isNotNull()).select("run", "index", F.col("pairing_error").alias("reason"))


def build_ops_tables(inputs, paired_rows: DataFrame | None = None) -> dict[str, DataFrame]:
    """``ops``, ``observations``, ``group_offsets`` (docs/analysis.md), ``pairing_errors`` (``run, index,
    reason``: the lines that make the history malformed) and ``nemesis`` (``run, index, time, f, value``:
    the nemesis lines, for ``analysis.tables.faults``; not a table of its own), lazily, from ``paired_rows``
    (``paired(inputs.ops)`` when not given; ``analysis.main`` passes them read back from Parquet).  ``ops``
    has ``OPS_COLUMNS`` then ``EXTRA_COLUMNS``, as written."""
    both = paired(inputs.ops) if paired_rows is None else paired_rows
    ops = both.where(F.col("_line") == "invoke").select(*OPS_COLUMNS, *EXTRA_COLUMNS)
    return {"ops": ops, "observations": observations_of(ops), "group_offsets": group_offsets_of(ops),
            "pairing_errors": pairing_errors_of(both), "nemesis": nemesis_lines(both), "extras": extras_of(both)}
