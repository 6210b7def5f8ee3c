"""The worked example: ``kafkasim chaos run`` drives the user's own application (a ``command:`` workload).

The shipped pair, scenarios/app-consumer-buggy.yaml and app-consumer-correct.yaml, as ``kafkasim chaos run``
runs them (20 s each): our producer writes numbered records to ``orders``, the app (a real confluent-kafka
program under examples/) consumes them in group ``orders-app`` and writes each to ``processed``; the schedule
kills the group's coordinator at 4 s and the app itself at 10 s.  examples/buggy_consumer.py commits each batch
before writing it (it writes a batch when the next one arrives), so whenever it stops the batch in hand is lost:
at the app kill and at the run's end, with no chance involved.  The correct one writes, then commits; so does
examples/correct_consumer_kafka_python.py, run with the same scenario.
"""
from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
import yaml

from chaos.runner import ChaosRun
from chaos.scenario import SCENARIO_DIR, parse_scenario

REPO = Path(__file__).resolve().parents[1]


def _scenario(name: str, program: str | None = None):
    doc = yaml.safe_load((SCENARIO_DIR / f"{name}.yaml").read_text())
    cmd = doc["workload"]["command"]
    # this interpreter (its packages) rather than the PATH's python3, from the repository root
    cmd["run"] = cmd["run"].replace("python3", sys.executable, 1)
    if program is not None:
        cmd["run"] = f"{sys.executable} {program}"
    cmd["cwd"] = str(REPO)
    return parse_scenario(doc, name)


@pytest.fixture(scope="module")
def app_runs(tmp_path_factory) -> dict:
    out = {}
    for kind, scenario in (("buggy", _scenario("app-consumer-buggy")), ("correct", _scenario("app-consumer-correct")),
                           ("kafka-python", _scenario("app-consumer-correct",
                                                      "examples/correct_consumer_kafka_python.py"))):
        printed = io.StringIO()
        r = ChaosRun(scenario, 1, tmp_path_factory.mktemp("app") / kind, stream=printed, progress=False).run()
        out[kind] = (r, printed.getvalue())
    return out


def test_the_buggy_consumer_is_caught_losing_records(app_runs):
    r, printed = app_runs["buggy"]
    assert r.verdict == "invalid" and r.exit_code == 1, printed
    counts = r.results["checks"]["anomaly_counts"]
    assert set(counts) == {"app-record-lost"}, printed          # the cluster itself lost nothing
    app = r.results["app"]
    assert app["records_lost"] == counts["app-record-lost"] > 0
    assert app["starts"] == {"1": 2} and app["drained"] is True   # killed once, restarted once
    lost = [a for a in r.results["checks"]["anomalies"] if a["kind"] == "app-record-lost"]
    for a in lost:   # each one: a record the group had committed past, absent from the output
        d = a["details"]
        assert d["offset"] < d["committed"] and d["topic"] == "orders"
        assert a["ops"][0]["f"] == "send" and a["ops"][0]["type"] == "ok"
    written = set(json.loads((r.out / "app.json").read_text())["output_records"])
    assert not written & {a["details"]["value"] for a in lost}
    assert "ANOMALY app-record-lost" in printed and "verdict: INVALID" in printed


@pytest.mark.parametrize("kind", ["correct", "kafka-python"])
def test_the_correct_consumer_passes(app_runs, kind):
    r, printed = app_runs[kind]
    assert r.verdict == "valid" and r.exit_code == 0, printed
    app = r.results["app"]
    sends = r.results["ops"]["by_outcome"]["send:ok"]
    assert app["records_lost"] == 0 and app["records_judged"] == sends > 200
    assert app["output_records"] >= sends and app["commits_lost"] == app["commits_went_backwards"] == 0
    assert app["starts"] == {"1": 2} and app["observed_fetches"] > 50


def test_the_timeline_measures_the_users_group(app_runs):
    for kind in ("buggy", "correct", "kafka-python"):
        r, _ = app_runs[kind]
        row, = [x for x in r.results["timeline"] if x["fault"] == 0 and x["group"] == "orders-app"]
        # the controller saw the coordinator's broker go (or, when that broker was the controller too, the
        # next controller's election is the detection)
        assert row["group"] == "orders-app" and row["moved"]
        assert row["detect_by"] in ("broker_change", "controller_elected")
        assert row["detect_ms"] <= row["elect_ms"] <= row["load_ms"] <= row["first_commit_ms"]
        assert not [x for x in r.results["timeline"] if x["fault"] == 1]   # the app kill hit no broker
