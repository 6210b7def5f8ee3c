"""The events-derived tables and the failover timeline in Spark (analysis/tables.py, analysis/failovers.py,
analysis/main.py) against the raw files of two short real chaos runs and the runner's own results.json."""
from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from judge.history import read_history
from judge.timeline import ROW_FIELDS
from node.events import read_run_events

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def table(analysed):
    """``table(name, run="clean")``: the rows of a table of the shared analysis (tests/conftest.py), which
    loaded both real runs (and others) together, so the ``run`` column has to keep them apart."""
    from pyspark.sql import functions as F

    from analysis.tables import TABLE_COLUMNS

    tables = analysed["tables"]
    assert {n: tuple(tables[n].columns) for n in TABLE_COLUMNS} == TABLE_COLUMNS
    assert tuple(tables["failovers"].columns) == ("run",) + ROW_FIELDS
    collected: dict[str, list[dict]] = {}

    def rows(name: str, run: str = "clean") -> list[dict]:
        if name not in collected:
            got = tables[name].where(F.col("run").isin("clean", "planted")).collect()
            collected[name] = [r.asDict(recursive=True) for r in got]
            if name == "failovers":   # the table's order (Parquet read back keeps no order across files)
                collected[name].sort(key=lambda r: (r["run"], r["time_ns"], r["fault"], r["group"] is not None,
                                                    r["group"] or ""))
        return [r for r in collected[name] if r["run"] == run]

    return rows


def events_of(run: Path) -> list[dict]:
    return read_run_events(run / "cluster")


def timeline_rows(rows: list[dict]) -> list[dict]:
    """Pipeline rows in results.json's form: ROW_FIELDS only, broker ids in ``nodes`` as ints again."""
    out = []
    for r in rows:
        row = {k: r[k] for k in ROW_FIELDS}
        row["nodes"] = [int(n) if n.lstrip("-").isdigit() else n for n in r["nodes"]]
        out.append(row)
    return out


@pytest.mark.parametrize("name", ["clean", "planted"])
def test_failovers_are_the_runners_timeline(table, short_chaos_runs, name):
    """Same rows, same order, same stage times to the microsecond as judge/timeline.py in results.json."""
    expected = json.loads((short_chaos_runs[name] / "results.json").read_text())["timeline"]
    got = timeline_rows(table("failovers", name))
    assert got == expected
    if name == "clean":  # a coordinator kill: at least the group row of the killed coordinator
        assert any(r["group"] is not None and r["moved"] for r in got), got


@pytest.mark.parametrize("name", ["clean", "planted"])
def test_faults_are_the_nemesis_starts(table, short_chaos_runs, name):
    ops = read_history(short_chaos_runs[name] / "history.jsonl")
    nemesis = [op for op in ops if op["process"] == "nemesis"]
    starts = [op for op in nemesis if op["value"]["phase"] == "start"]
    got = sorted(table("faults", name), key=lambda r: r["start_ns"])
    assert len(got) == len(starts) and (starts or name == "planted")
    for row, op in zip(got, starts):
        v = op["value"]
        heal = next(h for h in nemesis if h["index"] > op["index"] and h["value"]["phase"] == "heal"
                    and h["value"]["fault"] == v["fault"])
        assert (row["fault"], row["kind"], row["target"], row["start_ns"], row["heal_ns"], row["skipped"]) == \
            (v["fault"], v["kind"], v["target"], op["time"], heal["time"], v.get("skipped"))
        assert row["nodes"] == [str(n) for n in v["nodes"]]
        assert row["duration_ms"] == pytest.approx((heal["time"] - op["time"]) / 1e6)


def landed_states(events: list[dict]) -> list[dict]:
    """partition_state_written lines with the landing time of docs/chaos.md ("Failover timeline")."""
    pending: dict[int, list[dict]] = {}
    out = []
    for e in events:
        if e["type"] == "partition_state_written":
            s = dict(e, landed=e["mono_ns"])
            pending.setdefault(e["broker"], []).append(s)
            out.append(s)
        elif e["type"] == "partition_states_written":
            for s in pending.pop(e["broker"], []):
                if e.get("mono_ns_written") is not None:
                    s["landed"] = e["mono_ns_written"]
    return out


def test_leader_changes_are_the_partition_state_written_lines(table, short_chaos_runs):
    for name, run in short_chaos_runs.items():
        states = landed_states(events_of(run))
        got = table("leader_changes", name)
        assert len(got) == len(states) > 0
        key = ("controller", "topic", "partition", "reason", "leader", "leader_epoch", "zk_version", "time_ns")
        assert Counter(tuple(r[k] for k in key) for r in got) == Counter(
            (s["broker"], s["topic"], s["partition"], s["reason"], s["leader"], s["leader_epoch"], s["zk_version"],
             s["landed"]) for s in states)


def test_isr_changes_come_from_brokers_and_controllers(table, short_chaos_runs):
    events = events_of(short_chaos_runs["clean"])
    got = table("isr_changes")
    seen = [e for e in events if e["type"] == "replica_isr_changed"]
    assert Counter((r["time_ns"], r["broker"], r["topic"], r["partition"], tuple(r["isr"]))
                   for r in got if r["source"] == "broker") == \
        Counter((e["mono_ns"], e["broker"], e["topic"], e["partition"], tuple(e["isr"])) for e in seen)
    written = [s for s in landed_states(events)
               if s["previous_isr"] is None or sorted(s["previous_isr"]) != sorted(s["isr"])]
    assert Counter((r["time_ns"], r["broker"], r["topic"], r["partition"]) for r in got
                   if r["source"] == "controller") == \
        Counter((s["landed"], s["broker"], s["topic"], s["partition"]) for s in written)


def test_hw_samples_are_per_broker_process(table, short_chaos_runs):
    events = events_of(short_chaos_runs["clean"])
    started: dict[int, int] = {}
    expected = []
    for e in events:
        if e["type"] == "broker_starting":
            started[e["broker"]] = e["mono_ns"]
        elif e["type"] == "hw_changed":
            expected.append((e["mono_ns"], e["broker"], started.get(e["broker"]), e["topic"], e["partition"],
                             e["old"], e["new"], e["decreased"]))
    got = table("hw_samples")
    assert Counter((r["time_ns"], r["broker"], r["process_start_ns"], r["topic"], r["partition"], r["old"], r["new"],
                    r["decreased"]) for r in got) == Counter(expected)
    assert len({r["process_start_ns"] for r in got}) > 3  # the killed coordinator came back: a new process


def test_controller_epochs_and_coordinator_loads(table, short_chaos_runs):
    events = events_of(short_chaos_runs["clean"])
    elected = [e for e in events if e["type"] == "controller_elected"]
    got = {(r["broker"], r["epoch"]): r for r in table("controller_epochs")}
    assert sorted(got) == sorted((e["broker"], e["epoch"]) for e in elected)
    for e in elected:
        resigned = next((r for r in events if r["type"] == "controller_resigned" and r["broker"] == e["broker"]
                         and r["epoch"] == e["epoch"] and r["mono_ns"] >= e["mono_ns"]), None)
        row = got[(e["broker"], e["epoch"])]
        assert (row["elected_ns"], row["resigned_ns"], row["resign_reason"]) == \
            (e["mono_ns"], resigned and resigned["mono_ns"], resigned and resigned["reason"])

    loads = table("coordinator_loads")
    starts = [e for e in events if e["type"] == "coordinator_load_started"]
    assert len(loads) == len(starts) > 0
    by_start = {(r["broker"], r["partition"], r["started_ns"]): r for r in loads}
    for s in starts:
        row = by_start[(s["broker"], s["partition"], s["mono_ns"])]
        done = next(e for e in events if e["type"] == "coordinator_loaded" and e["broker"] == s["broker"]
                    and e["partition"] == s["partition"] and e["mono_ns"] >= s["mono_ns"])
        assert (row["leader_epoch"], row["loaded_ns"], row["records"], row["replayed"], row["duration_ms"]) == \
            (s["leader_epoch"], done["mono_ns"], done["records"], done["replayed"], done["duration_ms"])


def test_rebalances_are_the_generations(table, short_chaos_runs):
    events = events_of(short_chaos_runs["clean"])
    gens = [e for e in events if e["type"] == "group_generation"]
    got = table("rebalances")
    assert Counter((r["group"], r["generation"], r["broker"], r["completed_ns"], r["members"]) for r in got) == \
        Counter((e["group"], e["generation"], e["broker"], e["mono_ns"], len(e["members"])) for e in gens)
    for r in got:
        assert r["started_ns"] is None or r["started_ns"] < r["completed_ns"]
        assert r["stable_ns"] is None or r["stable_ns"] > r["completed_ns"]
    first = [r for r in got if r["generation"] == 1]
    assert first and all(r["started_ns"] is not None and r["stable_ns"] is not None for r in first)
    assert all(r["duration_ms"] == pytest.approx((r["stable_ns"] - r["started_ns"]) / 1e6) for r in first)


def test_commits_hold_each_groups_final_offsets(table, short_chaos_runs):
    for name, run in short_chaos_runs.items():
        commits = table("commits", name)
        keys = Counter((r["partition"], r["offset"], r["group"], r["topic"], r["tpartition"]) for r in commits)
        assert commits and max(keys.values()) == 1  # one row per record, whichever brokers hold it
        assert all(1 <= r["replicas"] <= 3 for r in commits) and any(r["replicas"] > 1 for r in commits)
        held = {(r["group"], r["topic"], r["tpartition"], r["committed_offset"]) for r in commits if not r["tombstone"]}
        finals = [op for op in read_history(run / "history.jsonl")
                  if op.get("final") and op["f"] == "fetch-committed" and op["type"] == "ok"]
        assert finals
        for op in finals:
            for tp, offset in op["value"]["offsets"].items():
                topic, _, p = tp.rpartition("/")
                assert (op["group"], topic, int(p), offset) in held, (name, op["group"], tp, offset)


def test_the_command_writes_parquet_tables(analysed, short_chaos_runs):
    """``kafkasim analyze RUN...`` (``analysis.main.run``, as the shared analysis ran it): every table, the
    verdicts, the report, the summary it printed and wrote."""
    out, summary = analysed["out"], analysed["summary"]
    printed = analysed["printed"]
    assert f"runs: {len(analysed['dirs'])} (" in printed and "failovers" in printed and "anomalies: " in printed
    for name in ("ops", "faults", "controller_epochs", "leader_changes", "isr_changes", "hw_samples",
                 "coordinator_loads", "rebalances", "commits", "failovers", "observations", "group_offsets",
                 "pairing_errors", "anomalies", "verdicts", "runs"):
        assert (out / "tables" / name / "_SUCCESS").exists(), name
        assert summary["tables"][name] == analysed["tables"][name].count(), name
    assert json.loads((out / "summary.json").read_text()) == summary
    assert sorted(summary["runs"]) == sorted(analysed["dirs"])
    verdicts = {r.run: r.verdict for r in analysed["tables"]["verdicts"].collect()}
    for name, run in short_chaos_runs.items():
        assert verdicts[name] == json.loads((run / "results.json").read_text())["verdict"], name
    assert (out / "report" / "report.html").stat().st_size > 0 and summary["report"] == str(
        out / "report" / "report.html")


def test_the_analysis_names_its_spark_jobs(spark, analysed):
    """Every Spark job of ``kafkasim analyze`` carries the step that ran it as its description (Spark's event
    log, ``KAFKASIM_SPARK_EVENT_LOG``), and the session is left without one."""
    named = analysed["jobs"]
    assert len(named) > 20 and None not in named, named
    for step in ("table ops", "table observations", "table controller_epochs", "table failovers", "table anomalies",
                 "plan-checks", "keep-event-lines", "table runs", "counts", "report"):
        assert step in named, (step, sorted(set(named)))
    assert spark.sparkContext.getLocalProperty("spark.job.description") is None


@pytest.mark.cluster  # `kafkasim analyze` subprocesses
def test_a_path_that_is_not_a_run_is_a_clear_error(tmp_path):
    (tmp_path / "empty").mkdir()
    for bad in (tmp_path / "empty", tmp_path / "missing"):
        p = subprocess.run([sys.executable, "-m", "cli.main", "analyze", str(bad), "--out", str(tmp_path / "o")],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert p.returncode == 2, p.stderr
        why = ", nor a directory of runs" if bad.exists() else ""
        assert p.stderr.strip() == f"error: {bad}: not a chaos run directory (no history.jsonl){why}"
        assert "Traceback" not in p.stderr + p.stdout


def test_runs_under_paths_with_spaces_and_glob_characters(spark, short_chaos_runs, tmp_path):
    """Spark's readers expand globs and input_file_name() percent-encodes: every line still finds its run."""
    import glob
    import shutil

    from pyspark.sql import functions as F

    from analysis.load import load_runs

    src = short_chaos_runs["clean"]
    weird = tmp_path / "a [b] {c} 100%+" / "clean run"
    shutil.copytree(src, weird)
    # with a second run the run id comes from each file's (percent-encoded) path, not a literal
    inputs = load_runs(spark, [glob.escape(str(weird.parent)) + "/clean ru*", str(short_chaos_runs["planted"])])
    assert inputs.runs == ["clean run", "planted"]
    history_lines = len(read_history(src / "history.jsonl"))
    # (the run's rows, rows of no run)
    counts = {name: (df.where(F.col("run") == "clean run").count(), df.where(~F.col("run").isin(*inputs.runs)).count())
              for name, df in (("ops", inputs.ops), ("events", inputs.events), ("segments", inputs.segments))}
    assert counts["ops"] == (history_lines, 0)
    assert counts["events"] == (len(events_of(src)), 0)
    assert counts["segments"][0] > 0 and counts["segments"][1] == 0


def test_the_runs_table_has_each_run_with_its_figures(analysed):
    """The ``runs`` table: one row per run of the directory, what its results.json and scenario.yaml say, and
    its figures as the other tables give them."""
    from pyspark.sql import functions as F

    from analysis.runs import RUNS_COLUMNS

    t = analysed["tables"]
    assert tuple(t["runs"].columns) == RUNS_COLUMNS
    runs = {r["run"]: r.asDict(recursive=True) for r in t["runs"].collect()}
    assert sorted(runs) == sorted(analysed["dirs"])
    for name, d in analysed["dirs"].items():
        res = json.loads((d / "results.json").read_text()) if (d / "results.json").exists() else {}
        got = runs[name]
        assert (got["scenario"], got["seed"], got["runner_verdict"]) == (
            res.get("scenario"), res.get("seed"), res.get("verdict")), name
        assert got["client"] == "kafkasim", name   # none of these runs names another client
    assert runs["gen-clean"]["scenario"] == "synthetic" and runs["clean"]["scenario"] == "coordinator-kill"
    verdicts = {r["run"]: (r["verdict"], r["anomalies"], r["unknowns"]) for r in t["verdicts"].collect()}
    assert {n: (r["verdict"], r["anomalies"], r["unknowns"]) for n, r in runs.items()} == verdicts
    kinds: dict[str, dict[str, int]] = {}
    for r in t["anomalies"].groupBy("run", "kind").count().collect():
        kinds.setdefault(r["run"], {})[r["kind"]] = r["count"]
    assert {n: r["anomalies_by_kind"] or {} for n, r in runs.items() if r["anomalies_by_kind"]} == kinds
    ops = {r["run"]: (r["ops"], r["ok"]) for r in t["ops"].groupBy("run").agg(
        F.count(F.lit(1)).alias("ops"), F.sum((F.col("type") == "ok").cast("long")).alias("ok")).collect()}
    assert {n: (r["ops"], r["ok"]) for n, r in runs.items() if r["ops"]} == ops
    unavailable = sorted(r[0] for r in t["failovers"].where((F.col("run") == "clean") & F.col("fault").isNotNull()
                                                           & F.col("unavailable_ms").isNotNull())
                         .select("unavailable_ms").collect())
    assert unavailable and runs["clean"]["unavailable_p50_ms"] in unavailable   # a median of the run's rows


def test_stage_times_round_as_python(spark):
    """``failovers.round3`` (a Spark expression) rounds ``(t - t0) / 1e6`` to 3 places exactly as Python's
    ``round``: on random spans, and on the ties (a half µs), where the binary value decides the side."""
    import random

    from analysis.failovers import _ms, ms_between

    rng = random.Random(7)
    spans = [rng.randrange(0, 10**13) for _ in range(3000)] + [rng.randrange(10**6) * 1000 + 500 for _ in range(3000)]
    spans += [62500, 500, 1500, 2500, 1234500, 0, 1, 999, 1000, -1500, -62500, -rng.randrange(10**12)]
    rows = spark.createDataFrame([(d, 0) for d in spans], "t long, t0 long").select("t", _ms("t", "t0").alias("ms"))
    got = {r.t: r.ms for r in rows.collect()}
    wrong = {d: (got[d], ms_between(d, 0)) for d in spans if got[d] != ms_between(d, 0)}
    assert not wrong, list(wrong.items())[:10]
    ties = [d for d in spans if abs(d) % 1000 == 500]
    assert {round(d / 1e6, 3) * 1e6 > d for d in ties} == {True, False}   # ties rounded both ways


def test_a_failed_analysis_leaves_no_staged_rows(spark, short_chaos_runs, tmp_path, monkeypatch):
    """The paired rows staged under <out>/work are removed when a later step fails, not only on success."""
    import analysis.checks
    from analysis.main import run

    reached = []

    def failing_checkers(*args, **kwargs):
        reached.append((tmp_path / "out" / "work" / "paired").is_dir())
        raise RuntimeError("a checker failed")

    monkeypatch.setattr(analysis.checks, "plan_checks", failing_checkers)
    with pytest.raises(RuntimeError, match="a checker failed"):
        run([str(short_chaos_runs["clean"])], "local[2]", tmp_path / "out")
    assert reached == [True]   # the rows were staged when the step failed
    assert not (tmp_path / "out" / "work").exists()
    assert (tmp_path / "out" / "tables" / "ops").is_dir()   # what was written before the failure stays


def test_a_history_without_operations_gives_an_empty_ops_table(spark, tmp_path):
    """The paired rows are written once, split by kind: with no invoke at all there is no ``ops`` part to
    move, and ``ops`` is still written (empty, every column) beside the lines the pairing rejects."""
    from analysis.load import read_history as spark_history
    from analysis.main import _write_paired
    from analysis.ops_tables import EXTRA_COLUMNS, OPS_COLUMNS, pairing_errors_of, paired

    d = tmp_path / "no-ops"
    d.mkdir()
    lines = [{"index": 0, "type": "ok", "process": 0, "time": 2000, "f": "send",
              "value": {"topic": "t", "partition": 0, "offset": 0, "value": "a"}, "node": 1},
             {"index": 1, "type": "odd/type", "process": 0, "time": 3000, "f": "send", "value": None}]
    (d / "history.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "out"
    (out / "tables").mkdir(parents=True)
    ops, rest = _write_paired(spark, paired(spark_history(spark, {"no-ops": str(d)})), out)
    assert ops.columns == OPS_COLUMNS + EXTRA_COLUMNS and ops.count() == 0
    assert (out / "tables" / "ops").is_dir() and spark.read.parquet(str(out / "tables" / "ops")).count() == 0
    errors = pairing_errors_of(rest).collect()
    assert sorted((r["index"], r["reason"]) for r in errors) == [(0, "ok with no open invoke"),
                                                                (1, "unknown type odd/type")]
    assert {r["_line"] for r in rest.collect()} == {"malformed"}


def _random_history(rng, n: int) -> list[dict]:
    """History lines of a few processes, mostly well paired, with the ways a history goes wrong mixed in (an
    invoke while one is open, a completion with none open, an unknown type), nemesis lines and a line without
    a process; each line's time, node and value differ, so that a line paired with the wrong one shows."""
    lines, open_f = [], {}
    for i in range(n):
        p = rng.choice([0, 1, 2, 3, 3, 3, "nemesis", None])
        if p == "nemesis":
            lines.append({"index": i, "type": "info", "process": "nemesis", "time": 1000 * i, "f": "start",
                          "value": {"fault": i, "kind": "kill", "nodes": [str(i % 3)]}})
            continue
        roll = rng.random()
        if p in open_f and roll < 0.85:
            kind = rng.choice(["ok", "ok", "fail", "info"])
            f = open_f.pop(p)
        elif roll < 0.9:
            kind, f = "invoke", rng.choice(["send", "poll", "commit", "fetch-committed", "sync"])
            open_f[p] = f
        else:
            kind, f = rng.choice(["ok", "invoke", "odd"]), "send"
        value = {"send": {"topic": "t", "partition": i % 2, "offset": i, "value": f"v{i}", "acks": "all"},
                 "poll": {"topic": "t", "partition": 1, "records": [["t", 1, i, f"r{i}"]], "high_watermark": i},
                 "commit": {"offsets": {f"t/{i % 2}": i}, "generation": i % 5, "member": f"m{i}"},
                 "fetch-committed": {"partitions": ["t/0"], "offsets": {"t/0": i}},
                 "sync": {"assignment": [f"t/{i % 2}"], "generation": i % 7}}[f]
        lines.append({"index": i, "type": kind, "process": p, "time": 1000 * i + 7, "f": f, "node": i % 5,
                      "error": None if kind == "ok" else f"e{i}", "group": "g" if i % 4 else None,
                      "final": i % 11 == 0, "value": value})
    return lines


def test_the_bounded_pairing_window_pairs_as_the_whole_process_window(spark, tmp_path):
    """``paired_rows`` bounds the pairing window by ranges of indexes and pairs each range's first and last
    lines of a process after the write (``repair_edges``): every row must be the one the window over the whole
    process gives, for ranges from 1 line up, lazily and through the write ``analysis.main`` does."""
    import random

    from analysis.load import read_history as spark_history
    from analysis.main import _write_paired
    from analysis.ops_tables import EDGE, paired, paired_rows

    rng = random.Random(7)
    runs = {}
    for name, n in (("a", 120), ("b", 90)):
        d = tmp_path / name
        d.mkdir()
        (d / "history.jsonl").write_text("".join(json.dumps(x) + "\n" for x in _random_history(rng, n)))
        runs[name] = str(d)
    raw = spark_history(spark, runs)

    def rows(df) -> list[str]:
        return sorted(json.dumps(r.asDict(recursive=True), sort_keys=True, default=str) for r in df.collect())

    whole = rows(paired(raw))
    kinds = Counter(json.loads(r)["_line"] for r in whole)
    assert kinds["invoke"] > 50 and kinds["malformed"] > 5 and kinds["nemesis"] > 5   # the cases are there
    for bucket in (1, 2, 3, 16):
        assert paired_rows(raw, bucket).where(f"_line = '{EDGE}'").count() > 0
        assert rows(paired(raw, bucket)) == whole, bucket
    out = tmp_path / "out"
    (out / "tables").mkdir(parents=True)
    ops, rest = _write_paired(spark, paired_rows(raw, 5), out)
    from pyspark.sql import functions as F
    assert rows(ops.withColumn("_line", F.lit("invoke")).unionByName(rest)) == whole
    assert not list((out / "work" / "paired").glob(f"_line={EDGE}"))
