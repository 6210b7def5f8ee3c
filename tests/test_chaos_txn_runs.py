"""Chaos runs of the transactional workload (``workload.transactions``): exactly-once pipelines through
SIGKILLs of their transaction coordinators, judged by judge/checks_txn.py's checkers and the txn timeline.
These are the shipped txn-coordinator-kill scenarios' runs (tests/test_chaos_runs.py's short form leaves them
to this module and its checks are made here too), and the issue's acceptance runs: exactly once (each input
record once in the committed output), the group's offsets moving only with their transactions and reaching
the input's end, coordinators that moved and took EndTxns again after each kill.

librdkafka's run also freezes a pipeline before a commit while a new process takes its transactional id
(a zombie): its commit must be refused.  The Java client's run is in the ``kafka`` tier (a JVM per pipeline).
"""
from __future__ import annotations

import io
import json

import pytest

from chaos.runner import ChaosRun
from chaos.scenario import SCENARIO_DIR, load_scenario
from judge.registry import TXN_CHECKERS, TXN_KINDS

pytestmark = [pytest.mark.chaos, pytest.mark.cluster]
RUN_S = 30.0    # kills from 5-6 s every 4-6 s, and (librdkafka) zombies from 12-18 s: some of each


def run(name: str, tmp_path, duration_s: float, **workload) -> tuple:
    scenario = load_scenario(SCENARIO_DIR / f"{name}.yaml")
    if workload:
        from dataclasses import replace
        scenario = replace(scenario, transactions=replace(scenario.transactions, **workload))
    out = io.StringIO()
    r = ChaosRun(scenario, 1, tmp_path / "run", duration_s=duration_s, stream=out, progress=False).run()
    return r, out.getvalue()


def assert_a_whole_run(r, printed: str) -> None:
    """What tests/test_chaos_runs.py checks of every shipped scenario's run."""
    for f in ("history.jsonl", "history.edn", "schedule.json", "results.json", "cluster.yaml", "scenario.yaml",
              "txn.json"):
        assert (r.out / f).exists(), f
    ops = [json.loads(line) for line in (r.out / "history.jsonl").read_text().splitlines()]
    faults = [op for op in ops if op["process"] == "nemesis"]
    starts = [op for op in faults if op["value"]["phase"] == "start"]
    heals = [op for op in faults if op["value"]["phase"] == "heal"]
    assert starts and len(starts) == len(heals), "the run must fire and heal its faults"
    marks = [op for op in faults if op["value"]["phase"] in ("end", "stop")]   # the end phase, marked
    assert [(op["f"], op["value"]) for op in marks] == [("end", {"phase": "end"}), ("stop", {"phase": "stop"})]
    assert max(op["index"] for op in starts + heals) < marks[0]["index"]
    assert all(op["value"]["nodes"] for op in starts)
    oks = {op["f"] for op in ops if op["type"] == "ok"}
    assert {"send", "init-txn", "txn", "end-txn", "poll"} <= oks, oks
    assert any(op.get("final") for op in ops)
    assert (r.out / "history.edn").read_text().startswith("{:")
    assert "verdict: VALID" in printed
    assert json.loads((r.out / "results.json").read_text())["verdict"] == "valid"


def assert_exactly_once_through_kills(r, printed: str) -> None:
    checks = r.results["checks"]
    assert r.verdict == "valid" and r.exit_code == 0, printed + json.dumps(checks, default=str)[:4000]
    assert_a_whole_run(r, printed)
    assert set(TXN_CHECKERS) <= set(checks["stats"]), checks["stats"]      # they ran ...
    assert not set(TXN_KINDS) & set(checks["anomaly_counts"]), checks["anomaly_counts"]   # ... and found nothing
    t = r.results["transactions"]
    assert t["drained"] is True and t["commits"] > 0, t
    rows = r.results["txn_timeline"]
    # at least one kill moved a pipeline's coordinator, and that pipeline committed again afterwards
    assert any(row["moved"] and row["load_ms"] is not None and row["first_end_txn_ms"] is not None
               for row in rows), printed
    # the group's committed offsets: exactly the input's end (no more than its transactions consumed)
    ends = json.loads((r.out / "txn.json").read_text())["input_ends"]
    assert t["final_committed"] == ends, (t, ends)


def test_librdkafka_pipelines_and_a_zombie_through_txn_coordinator_kills(tmp_path):
    r, printed = run("txn-coordinator-kill-librdkafka", tmp_path, RUN_S)
    assert_exactly_once_through_kills(r, printed)
    t = r.results["transactions"]
    assert t["zombies"] >= 1 and t["zombie"]["zombie_transactions"] >= 1, t   # a zombie tried to commit: refused


@pytest.mark.kafka
def test_java_pipelines_through_txn_coordinator_kills(tmp_path):
    r, printed = run("txn-coordinator-kill-java", tmp_path, RUN_S)
    assert_exactly_once_through_kills(r, printed)
    t = r.results["transactions"]
    assert t["instances"] == [1, 1], t     # no Java pipeline ended on a fatal error (fenced): none was replaced
