"""Chaos runs of the transactional workload (``workload.transactions``): exactly-once pipelines through
SIGKILLs of their transaction coordinators, judged by judge/checks_txn.py's checkers and the txn timeline.

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


def run(name: str, tmp_path, duration_s: float, **workload) -> tuple:
    scenario = load_scenario(SCENARIO_DIR / f"{name}.yaml")
    if workload:
        from dataclasses import replace
        scenario = replace(scenario, transactions=replace(scenario.transactions, **workload))
    out = io.StringIO()
    r = ChaosRun(scenario, 1, tmp_path / "run", duration_s=duration_s, stream=out, progress=False).run()
    return r, out.getvalue()


def assert_exactly_once_through_kills(r, printed: str) -> None:
    checks = r.results["checks"]
    assert r.verdict == "valid" and r.exit_code == 0, printed + json.dumps(checks, default=str)[:4000]
    assert set(TXN_CHECKERS) <= set(checks["stats"]), checks["stats"]      # they ran ...
    assert not set(TXN_KINDS) & set(checks["anomaly_counts"]), checks["anomaly_counts"]   # ... and found nothing
    t = r.results["transactions"]
    assert t["drained"] is True and t["commits"] > 0, t
    rows = r.results["txn_timeline"]
    # at least one kill moved a pipeline's coordinator, and that pipeline committed again afterwards
    assert any(row["moved"] and row["load_ms"] is not None and row["first_end_txn_ms"] is not None
               for row in rows), printed


def test_librdkafka_pipelines_and_a_zombie_through_txn_coordinator_kills(tmp_path):
    r, printed = run("txn-coordinator-kill-librdkafka", tmp_path, 40.0)
    assert_exactly_once_through_kills(r, printed)
    t = r.results["transactions"]
    assert t["zombies"] >= 1 and t["zombie"]["zombie_transactions"] >= 1, t   # a zombie tried to commit: refused


@pytest.mark.kafka
def test_java_pipelines_through_txn_coordinator_kills(tmp_path):
    r, printed = run("txn-coordinator-kill-java", tmp_path, 40.0)
    assert_exactly_once_through_kills(r, printed)
