"""analysis.synthetic: synthetic chaos runs, judged by the Python checkers (judge.checkers) as the oracle,
and by the Spark pipeline (``analysed``, tests/conftest.py).

A clean run must be valid with no anomaly and no unknown; a run planted with one kind must show
exactly the planted anomalies of that kind (one per plant, none of any other kind), each with the
evidence planted.json names; generation is deterministic for a seed, whatever the chunking and the
number of writer processes; part files read back through analysis.load with Spark.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from analysis.synthetic import PLANT_KINDS, SyntheticError, generate, main
from judge.checkers import check
from judge.history import read_history
from judge.timeline import failover_timeline
from node.events import read_run_events

OPS = 4000


def judge(run: Path):
    return check(read_history(run / "history.jsonl"), read_run_events(run / "cluster"))


def digest(run: Path) -> dict[str, str]:
    """Every file of a run (part files concatenated into one history), by content."""
    out = {}
    hist = run / "history.jsonl"
    parts = sorted(hist.glob("part-*.jsonl")) if hist.is_dir() else [hist]
    out["history"] = hashlib.sha256(b"".join(p.read_bytes() for p in parts)).hexdigest()
    for p in sorted(run.rglob("*")):
        if p.is_file() and "history.jsonl" not in p.parts and p.name != "results.json":
            out[str(p.relative_to(run))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def covered(plant: dict, anomalies) -> bool:
    """Some anomaly of the plant's kind cites every history line and event the plant names."""
    want_ev = {(e["broker"], e["type"], e["mono_ns"]) for e in plant["events"]}
    for a in anomalies:
        if a.kind != plant["kind"]:
            continue
        ops = {o["index"] for o in a.ops}
        evs = {(e["broker"], e["type"], e["mono_ns"]) for e in a.events}
        if set(plant["ops"]) <= ops and want_ev <= evs:
            return True
    return False


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    run, = generate(tmp_path_factory.mktemp("clean"), OPS, seed=11)
    return run


def test_clean_run_is_valid(clean: Path) -> None:
    res = judge(clean)
    assert res.verdict == "valid", (res.anomaly_counts(), res.unknowns)
    assert res.anomalies == [] and res.unknowns == []
    st = res.stats
    assert st["history"]["open"] == 0 and st["history"]["operations"] == pytest.approx(OPS, rel=0.05)
    assert st["lost-write"]["judged"] > 500 and st["unseen-message"]["sends_judged"] > 1000
    assert st["split-coordinator"]["commits_judged"] > 300 and st["controllers"]["elections"] >= 2
    planted = json.loads((clean / "planted.json").read_text())
    assert planted["plants"] == [] and planted["expected_anomaly_counts"] == {}
    results = json.loads((clean / "results.json").read_text())
    assert results["verdict"] == "valid" and results["faults"] >= 3


def test_clean_run_looks_like_a_real_one(clean: Path) -> None:
    ops = read_history(clean / "history.jsonl")
    kinds = {(o["f"], o["type"]) for o in ops}
    for k in [("send", "ok"), ("send", "fail"), ("poll", "ok"), ("commit", "ok"), ("commit", "fail"),
              ("fetch-committed", "ok"), ("join", "ok"), ("join", "fail"), ("sync", "ok"), ("heartbeat", "ok"),
              ("leave", "ok"), ("kill", "info"), ("heal", "info")]:
        assert k in kinds, k
    assert [o["index"] for o in ops] == list(range(len(ops)))
    assert all(a["time"] < b["time"] for a, b in zip(ops, ops[1:]))
    finals = [o for o in ops if o.get("final")]
    assert {o["f"] for o in finals} == {"poll", "fetch-committed"}
    gens = {o["value"]["generation"] for o in ops if o["f"] == "sync" and o["type"] == "ok"}
    assert len(gens) >= 3, "generations move at rebalances"
    events = read_run_events(clean / "cluster")
    types = {e["type"] for e in events}
    for t in ("broker_starting", "controller_elected", "partition_state_written", "partition_states_written",
              "became_leader", "coordinator_load_started", "coordinator_loaded", "hw_changed", "broker_change",
              "group_generation", "topic_created"):
        assert t in types, t
    # commits move to the new coordinator after a kill: the failover timeline has every stage
    rows = [r for r in failover_timeline(ops, events) if r["group"] is not None]
    assert rows and all(r["moved"] and r["load_ms"] is not None and r["first_commit_ms"] is not None for r in rows)
    assert all(r["load_ms"] >= r["elect_ms"] >= r["detect_ms"] > 0 for r in rows)


@pytest.mark.parametrize("kind", PLANT_KINDS)
def test_each_planted_kind_is_found(tmp_path: Path, kind: str) -> None:
    run, = generate(tmp_path, OPS, plant=[kind], seed=5)
    planted = json.loads((run / "planted.json").read_text())
    assert planted["kinds"] == [kind] and len(planted["plants"]) >= 2
    res = judge(run)
    assert res.unknowns == []
    assert res.anomaly_counts() == {kind: len(planted["plants"])}, "exactly the planted anomalies"
    for p in planted["plants"]:
        assert p["ops"] or p["events"], p
        assert covered(p, res.anomalies), p


def test_all_kinds_at_once(tmp_path: Path) -> None:
    run, = generate(tmp_path, 3 * OPS, plant=["all"], seed=2, instances=2)
    planted = json.loads((run / "planted.json").read_text())
    assert set(planted["kinds"]) == set(PLANT_KINDS)
    res = judge(run)
    assert res.unknowns == []
    assert res.anomaly_counts() == planted["expected_anomaly_counts"]
    assert all(covered(p, res.anomalies) for p in planted["plants"])


def test_deterministic_for_a_seed(tmp_path: Path) -> None:
    a, = generate(tmp_path / "a", 2500, plant=["lost-write", "hw-regression", "multiple-controllers"], seed=4)
    b, = generate(tmp_path / "b", 2500, plant=["lost-write", "hw-regression", "multiple-controllers"], seed=4)
    c, = generate(tmp_path / "c", 2500, plant=["lost-write", "hw-regression", "multiple-controllers"], seed=5)
    assert digest(a) == digest(b)
    assert digest(a)["history"] != digest(c)["history"]


@pytest.mark.cluster  # jobs=2: parallel writer processes
def test_part_files_are_the_same_run(tmp_path: Path) -> None:
    """Written as part files, in parallel, the run is byte for byte the single-file one."""
    single, = generate(tmp_path / "single", 3000, plant=["unseen-message"], seed=9, jobs=1)
    parts, = generate(tmp_path / "parts", 3000, plant=["unseen-message"], seed=9, jobs=2, single_file_lines=1000,
                      part_lines=1500)
    files = sorted((parts / "history.jsonl").glob("part-*.jsonl"))
    assert (parts / "history.jsonl").is_dir() and len(files) >= 4
    assert [f.name for f in files] == [f"part-{i:05d}.jsonl" for i in range(len(files))]
    assert digest(single) == digest(parts)
    assert json.loads((single / "planted.json").read_text()) == json.loads((parts / "planted.json").read_text())


def test_part_files_load_in_spark(tmp_path: Path, spark) -> None:
    from pyspark.sql import functions as F

    from analysis.load import load_runs

    runs = generate(tmp_path, 6000, runs=2, seed=3, jobs=2, single_file_lines=1000, part_lines=1000)
    inputs = load_runs(spark, [str(tmp_path / "synth-*")], with_segments=False)
    assert sorted(inputs.runs) == [r.name for r in runs]
    bad = F.col("index").isNull() | F.col("time").isNull() | F.col("f").isNull() | F.col("value").isNull()
    by_run = {r["run"]: (r["n"], r["bad"], r["top"]) for r in inputs.ops.groupBy("run").agg(
        F.count("*").alias("n"), F.sum(bad.cast("int")).alias("bad"), F.max("index").alias("top")).collect()}
    ev_by_run = {r["run"]: r["count"] for r in inputs.events.groupBy("run").count().collect()}
    for run in runs:
        lines = sum(len(f.read_text().splitlines()) for f in (run / "history.jsonl").glob("*.jsonl"))
        ev_lines = sum(len(f.read_text().splitlines()) for f in (run / "cluster" / "events").glob("*.jsonl"))
        res = json.loads((run / "results.json").read_text())
        assert by_run[run.name] == (lines, 0, lines - 1) and lines == res["synthetic"]["history_lines"]
        assert ev_by_run[run.name] == ev_lines


def test_offsets_segments_hold_the_final_commits(clean: Path) -> None:
    from coordinator.records import OffsetKey, decode_record
    from kafkacommon.batch_scan import iter_batches

    ops = read_history(clean / "history.jsonl")
    final = {o["group"]: o["value"]["offsets"] for o in ops if o.get("final") and o["f"] == "fetch-committed"
             and o["type"] == "ok"}
    found: dict[str, dict[str, int]] = {}
    logs = sorted((clean / "cluster" / "data").glob("broker-*/__consumer_offsets-*/*.log"))
    assert logs
    for log in logs:
        for _pos, batch in iter_batches(log.read_bytes()):
            for rec in batch.records:
                key, value = decode_record(rec.key, rec.value)
                if isinstance(key, OffsetKey):
                    found.setdefault(key.group, {})[f"{key.topic}/{key.partition}"] = value.offset
    assert found == final


def test_cli(tmp_path: Path, capsys) -> None:
    assert main([str(tmp_path), "--ops", "1500", "--plant", "lost-commit", "--seed", "1", "--check"]) == 0
    out = capsys.readouterr().out
    assert "checked: invalid {'lost-commit':" in out
    run = tmp_path / "synth-1-000"
    res = json.loads((run / "results.json").read_text())
    assert res["verdict"] == "invalid" and res["checks"]["anomaly_counts"] == res["expected"]["anomaly_counts"]
    assert main([str(tmp_path / "x"), "--ops", "100", "--plant", "no-such-kind"]) == 2
    with pytest.raises(SyntheticError):
        generate(tmp_path, 1000, plant=["nope"])


@pytest.mark.parametrize("name", ["gen-clean", "gen-planted"])
def test_the_spark_pipeline_finds_every_planted_anomaly(analysed, name):
    """Through ``kafkasim analyze`` (the shared analysis of tests/conftest.py): a clean synthetic run gives no
    anomaly and a valid verdict; a run planted with every kind gives exactly the planted anomalies, each
    citing the evidence planted.json names (the Spark checkers' ``op_indexes`` and evidence events)."""
    from types import SimpleNamespace

    from pyspark.sql import functions as F

    run = analysed["dirs"][name]
    expected = json.loads((run / "results.json").read_text())["expected"]
    tables = analysed["tables"]
    rows = tables["anomalies"].where(F.col("run") == name).collect()
    (verdict,) = tables["verdicts"].where(F.col("run") == name).collect()
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.kind] = counts.get(r.kind, 0) + 1
    assert counts == expected["anomaly_counts"] and verdict.verdict == expected["verdict"]
    assert list(verdict.unknowns) == []
    if name == "gen-clean":
        assert not rows and verdict.verdict == "valid"
        return
    planted = json.loads((run / "planted.json").read_text())
    assert set(planted["kinds"]) == set(PLANT_KINDS) and set(counts) == set(PLANT_KINDS)
    as_python = [SimpleNamespace(kind=r.kind, ops=[{"index": i} for i in r.op_indexes],
                                 events=json.loads(r.details)["events"]) for r in rows]
    for p in planted["plants"]:
        assert covered(p, as_python), p
