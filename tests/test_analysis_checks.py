"""The Spark checkers (analysis.checks) against the Python ones (judge.checkers), on the same runs.

All runs are analysed together by one ``kafkasim analyze`` (the ``analysed``
fixture of tests/conftest.py; the checkers work per ``run``): the two real
chaos runs of ``short_chaos_runs``, one of them doctored, and the small
synthetic runs of tests/analysis_cases.py, one per anomaly kind (and
reason), the unknown verdicts, the near misses, and a clean one.  For every run both checkers must find the same anomalies: the same
count per kind, and the same evidence (sorted op indexes; the event lines for
the kinds that have no ops).  Python lists at most 100 per kind: those listed
must be among Spark's.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from analysis_cases import CASES
from test_chaos_checkers import N_OFFSETS, PROBE

from judge.checkers import check
from judge.history import read_history
from kafkacommon.hashing import partition_for
from node.events import read_run_events


def test_the_spark_checkers_implement_exactly_the_registry() -> None:
    """judge.registry names each checker once, with its Python implementation; analysis.checks puts a Spark
    implementation, named as the Python one, in each place: no more, in the same order, with the same kinds."""
    import analysis.checks as spark_checks
    from judge.registry import CHECKERS, KINDS

    assert list(spark_checks.CHECKERS) == list(CHECKERS)
    assert len(spark_checks.SPARK_CHECKS) == len(CHECKERS)
    for name, c in CHECKERS.items():
        spark_fn, kinds = spark_checks.CHECKERS[name]
        assert spark_fn.__name__ == c.check.__name__ and spark_fn.__module__.startswith("analysis.")
        assert kinds == c.kinds and c.description
    assert spark_checks.KINDS == KINDS and len(set(KINDS)) == len(KINDS)


@pytest.fixture(scope="module")
def checked(analysed) -> dict:
    """The shared analysis's anomalies and verdicts, by run."""
    rows: dict[str, list] = {name: [] for name in analysed["dirs"]}
    for r in analysed["tables"]["anomalies"].collect():
        rows[r.run].append(r)
    verdicts = {r.run: r for r in analysed["tables"]["verdicts"].collect()}
    return {"dirs": analysed["dirs"], "rows": rows, "verdicts": verdicts, "tables": analysed["tables"]}


def python_check(d: Path):
    return check(read_history(d / "history.jsonl"), read_run_events(d / "cluster"))


def identity(kind: str, ops: list[int], events: list[tuple]) -> tuple:
    """An anomaly's identity: its kind and sorted op indexes (the event lines when it has no ops)."""
    return kind, tuple(sorted(ops)), (tuple(sorted(events)) if not ops else ())


def py_identities(result) -> Counter:
    return Counter(identity(a.kind, [op["index"] for op in a.ops],
                            [(e["broker"], e["mono_ns"], e["type"]) for e in a.events]) for a in result.anomalies)


def spark_identities(rows: list) -> Counter:
    return Counter(identity(r.kind, list(r.op_indexes),
                            [(e["broker"], e["mono_ns"], e["type"]) for e in json.loads(r.details)["events"]])
                   for r in rows)


def assert_same(result, rows: list, verdict_row) -> None:
    py_counts = result.anomaly_counts()
    sp_counts = dict(Counter(r.kind for r in rows))
    assert sp_counts == py_counts, (sp_counts, py_counts)
    py, sp = py_identities(result), spark_identities(rows)
    capped = {k for k, n in py_counts.items() if n > 100}
    assert {i: n for i, n in py.items() if i[0] not in capped} == {i: n for i, n in sp.items() if i[0] not in capped}
    assert not (Counter({i: n for i, n in py.items() if i[0] in capped}) - sp)
    assert verdict_row.verdict == result.verdict
    assert verdict_row.anomalies == sum(py_counts.values())
    assert bool(verdict_row.unknowns) == bool(result.unknowns)
    if not any(u.startswith("malformed") for u in result.unknowns):
        assert list(verdict_row.unknowns) == result.unknowns


# ---------------------------------------------------------------------- the comparisons

@pytest.mark.parametrize("name", ["clean", "planted", "doctored"])
def test_real_chaos_runs(checked, name):
    d = checked["dirs"][name]
    result = python_check(d)
    rows = checked["rows"][name]
    assert_same(result, rows, checked["verdicts"][name])
    for r in rows:   # the anomalies table's columns
        assert r.message and isinstance(json.loads(r.details), dict) and r.op_indexes
    if name == "doctored":
        assert {"lost-write", "lost-commit"} <= {r.kind for r in rows}
    if name == "planted":
        assert "fenced-generation-commit" in {r.kind for r in rows}


@pytest.mark.parametrize("name", sorted(CASES))
def test_synthetic_runs(checked, name):
    _build, kinds, verdict = CASES[name]
    result = python_check(checked["dirs"][name])
    rows = checked["rows"][name]
    assert result.kinds() == kinds and result.verdict == verdict, result.to_json()["anomaly_counts"]
    assert_same(result, rows, checked["verdicts"][name])


def test_details_follow_the_python_anomalies(checked):
    """The reasons and a few details the Python checker gives, per anomaly."""
    def details(name: str) -> list[dict]:
        return [json.loads(r.details) for r in checked["rows"][name]]
    assert [d["reason"] for d in details("syn-split-deposed")] == ["deposed"]
    assert details("syn-split-deposed")[0]["deposer"] == 2
    assert [d["reason"] for d in details("syn-split-never-loaded")] == ["no-load"]
    assert [d["reason"] for d in details("syn-split-unloaded")] == ["unloaded"]
    assert [d["reason"] for d in details("syn-not-drained")] == ["not-drained"]
    assert details("syn-not-drained")[0]["count"] == 1
    assert [d["side"] for d in details("syn-zombie-broker")] == ["broker"]
    assert [d["side"] for d in details("syn-zombie-zookeeper")] == ["zookeeper"]
    assert details("syn-commit-went-backwards")[0]["previous"] == 5
    assert details("syn-lost-commit-client-keys")[0]["topic"] == "my-topic"
    (lost,) = [r for r in checked["rows"]["syn-lost-write-beyond-hw"]]
    assert "high watermark" in lost.message and lost.topic == "t" and lost.partition == 1


# ---------------------------------------------------------------------- the tables

def test_ops_tables_pair_and_explode_like_the_python_model(checked):
    from pyspark.sql import functions as F

    from judge.check_model import History, offsets_of, poll_records, sent_record

    t = checked["tables"]
    for name in ("clean", "syn-open-lower-commit", "syn-lost-commit-client-keys"):
        h = History(read_history(checked["dirs"][name] / "history.jsonl"))
        ops = {r["index"]: r for r in t["ops"].where(F.col("run") == name).collect()}
        assert set(ops) == {op.inv_index for op in h.ops}
        for op in h.ops:
            r = ops[op.inv_index]
            assert (r.type, r.f, r.group, r.node, r.final) == (op.type, op.f, op.group, op.node, op.final)
            assert r.complete_index == (None if op.done is None else op.done["index"])
        n_obs = sum(1 for op in h.ops if op.type == "ok" and op.f == "send" and sent_record(op)) + sum(
            len(poll_records(op)) for op in h.ops if op.type == "ok" and op.f == "poll")
        assert t["observations"].where(F.col("run") == name).count() == n_obs
        n_offsets = sum(len(offsets_of(op.value)) for op in h.ops if op.f in ("commit", "fetch-committed"))
        assert t["group_offsets"].where(F.col("run") == name).count() == n_offsets
    keys = t["group_offsets"].where(F.col("run") == "syn-lost-commit-client-keys").select("topic", "partition")
    assert {tuple(r) for r in keys.collect()} == {("my-topic", 3)}
    assert t["pairing_errors"].where(F.col("run") == "syn-malformed").count() == 1
    assert t["pairing_errors"].where(F.col("run") != "syn-malformed").count() == 0


def test_partition_for_is_kafkas(spark):
    from pyspark.sql import functions as F

    from analysis.checks_base import partition_for as spark_partition_for

    names = ["g1", "", "chaos-probe-0", "polygenelubricants", "é-grüße", "😀abc", "x" * 50, PROBE]
    rows = (spark.createDataFrame([(n,) for n in names], "g string")
            .select("g", spark_partition_for(F.col("g"), F.lit(N_OFFSETS * 13)).alias("p")).collect())
    assert {r.g: r.p for r in rows} == {n: partition_for(n, N_OFFSETS * 13) for n in names}


@pytest.mark.parametrize("rank", [0, 1, 2])
def test_asof_lookup_is_the_windowed_asof(spark, rank):
    """``asof_lookup`` (broadcast joins over time buckets) gives what ``asof`` (one window) gives, for
    random facts and queries: ties of time within the facts and with the queries, facts of rank 0 and 2
    around queries of rank 1 (``rank`` 1), queries before the first fact and after the last, keys without
    facts, null keys and null query times."""
    import random

    from pyspark.sql import functions as F

    from analysis.checks_base import UNBOUNDED, asof, asof_lookup, asof_steps

    rng = random.Random(rank)
    keys = [("r1", 1), ("r1", 2), ("r2", 1), ("r2", None), ("r3", 7)]   # ("r3", 7) has no facts
    facts = [(run, k, rng.choice([rng.randrange(0, 50), rng.randrange(0, 10_000)]), rng.choice([0, 2]) if rank == 1
              else 1, rng.randrange(-5, 100), rng.choice([None, rng.randrange(0, 9)]))
             for run, k in keys[:4] for _ in range(rng.randrange(1, 60))]
    queries = [(i, run, k, rng.choice([None, -3, rng.randrange(0, 50), rng.randrange(0, 10_100), 20_000]))
               for i, (run, k) in enumerate(rng.choice(keys) for _ in range(400))]
    fdf = spark.createDataFrame(facts, "run string, k int, _t long, _k int, v int, w int")
    qdf = spark.createDataFrame(queries, "id int, run string, k int, t long")
    got = {r.id: (r.mv, r.mw) for r in asof_lookup(
        qdf, asof_steps(fdf, ["run", "k"], {"mv": F.col("v"), "mw": F.col("w")}), ["run", "k"], "t", rank,
        ["mv", "mw"]).collect()}
    if rank == 1:   # asof takes one rank for every fact: the window itself, with the facts' own ranks
        from pyspark.sql import Window
        u = qdf.select("id", "run", "k", F.col("t").alias("_t"), F.lit(1).alias("_k"), F.lit(None).cast("int")
                       .alias("v"), F.lit(None).cast("int").alias("w")).unionByName(
            fdf.select(F.lit(None).cast("int").alias("id"), "run", "k", "_t", "_k", "v", "w"))
        win = Window.partitionBy("run", "k").orderBy("_t", "_k").rowsBetween(UNBOUNDED, 0)
        want_df = (u.select("id", F.max("v").over(win).alias("mv"), F.max("w").over(win).alias("mw"))
                   .where("id is not null"))
    else:
        want_df = asof(qdf, fdf.select("run", "k", F.col("_t").alias("ft"), "v", "w"), ["run", "k"], "t", "ft",
                       {"mv": F.max("v"), "mw": F.max("w")}, strict=rank == 0)
    want = {r.id: (r.mv, r.mw) for r in want_df.collect()}
    assert len(got) == len(queries) and got == want
    assert sum(v != (None, None) for v in want.values()) > 100   # most queries see facts


def test_a_cut_is_a_leaf_with_the_same_rows_computed_once_and_released(spark):
    """``Ctx.cut``: the DataFrame returned has ``df``'s rows, its plan is one leaf (so that DataFrames built on
    it are analysed without ``df``'s lineage), its rows are computed by the first job only (a Python UDF after
    the shuffle counts the rows it makes), and ``release`` frees them."""
    from pyspark.sql import functions as F

    from analysis.checks_base import Ctx

    made = spark.sparkContext.accumulator(0)

    def touch(x):
        made.add(1)
        return x

    def make():
        return (spark.range(0, 300, numPartitions=3).groupBy((F.col("id") % 7).alias("k"))
                .agg(F.sum("id").alias("s")).select("k", F.udf(touch, "long")(F.col("s")).alias("s")))

    want = sorted(tuple(r) for r in make().collect())
    assert len(want) == 7 and made.value == 7
    ctx = Ctx(spark, [], *([None] * 6))
    df = make()
    cut = ctx.cut(df)
    assert cut._jdf.queryExecution().analyzed().children().isEmpty()
    assert not df._jdf.queryExecution().analyzed().children().isEmpty()
    both = cut.join(cut.withColumnRenamed("s", "s2"), "k")   # read twice in one plan, and in a second job
    assert sorted((r.k, r.s) for r in both.collect()) == want and sorted(tuple(r) for r in cut.collect()) == want
    assert made.value == 14   # computed once more, for the first job only
    (_df, rdd), = ctx.cuts
    assert rdd.getStorageLevel().useMemory()
    ctx.release()
    assert ctx.cuts == [] and not rdd.getStorageLevel().useMemory()


def test_a_checker_whose_candidates_are_none_stops_there_with_the_same_rows(spark, short_chaos_runs, monkeypatch):
    """``Ctx.none``: a small input's checker whose cut candidates are a local relation with no rows returns the
    empty anomalies without building the frames above them; a large input's (its cuts are not counted) builds
    them all.  On the clean real run alone both give the same rows (none: the Python checker finds none), and
    the small path did stop early."""
    import analysis.checks_base
    import analysis.checks_groups
    import analysis.checks_log
    import analysis.spark
    from analysis.checks import CHECKERS, context
    from analysis.load import load_runs
    from analysis.spark import sized_to

    d = short_chaos_runs["clean"]
    assert not python_check(d).anomalies
    stopped = []

    def counted(spark_):
        stopped.append(1)
        return analysis.checks_base.empty_anomalies(spark_)

    names = ("lost-write", "lost-commit", "split-coordinator", "unseen-message")
    rows = {}
    with sized_to(spark, 3 << 20):
        inputs = load_runs(spark, [str(d)])
        for large in (False, True):
            with monkeypatch.context() as m:
                for mod in (analysis.checks_groups, analysis.checks_log):
                    m.setattr(mod, "empty_anomalies", counted)
                if large:   # kept frames and cuts as a large input's (caches, lazy local checkpoints): never
                    # known empty
                    m.setattr(analysis.checks_base, "local_leaves", lambda _s: False)
                    m.setattr(analysis.spark, "local_leaves", lambda _s: False)
                ctx = context(inputs)
                try:
                    rows[large] = {n: sorted(map(tuple, CHECKERS[n][0](ctx).collect())) for n in names}
                finally:
                    ctx.release()
            if not large:
                assert len(stopped) == len(names)   # each of the four stopped at its empty candidates
                stopped.clear()
    assert stopped == []
    assert rows[False] == rows[True] == {n: [] for n in names}
