"""``kafkasim sim sweep --spark``: a sweep's seeds as tasks on a Spark standalone cluster (a master and two workers,
real JVM processes on 127.0.0.1), the executors running the code shipped to them; a failing seed replays here to
the bytes the executor saw (docs/simulation.md, "Sweeps on Spark")."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from cli.main import main
from sim.run import SimOptions, SimRun
from sim.spark_sweep import code_zip, ranges
from tests import spark_standalone

pytestmark = [pytest.mark.spark, pytest.mark.cluster]
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory):
    """Two workers of one core each: the seeds' tasks are spread over both."""
    with spark_standalone.standalone(tmp_path_factory.mktemp("spark-sweep"), workers=2, cores=1, memory="1g") as c:
        yield c


def test_seeds_are_cut_into_tasks_and_the_code_shipped_is_every_package_but_the_tests(tmp_path: Path) -> None:
    assert ranges(range(1, 11), 4) == [(1, 4), (4, 7), (7, 10), (10, 11)]
    assert ranges(range(5, 6), 8) == [(5, 6)]
    assert len(ranges(range(0, 1000), 2)) == 5          # at most 200 seeds a task
    path, digest = code_zip(tmp_path)
    import zipfile
    names = zipfile.ZipFile(path).namelist()
    assert "sim/run.py" in names and "replication/partition.py" in names and "proto/kafkasim_pb2.py" in names
    assert not [n for n in names if n.startswith(("tests/", "bench/"))]
    assert code_zip(tmp_path)[1] == digest               # the same files, the same digest


@pytest.mark.timeout(1200)
def test_a_sweep_on_a_standalone_cluster_and_a_failing_seed_replayed_here_to_the_same_bytes(standalone, tmp_path,
                                                                                             capsys) -> None:
    out = tmp_path / "sweep"
    env = {k: v for k, v in standalone["env"].items() if k != "PYTHONPATH"}   # the executors get the code shipped
    env["COLUMNS"] = "200"
    # a planted bug whose violation heals before the end: seeds 1 and 5 fail (an invariant stops each), the
    # others pass
    p = subprocess.run([sys.executable, "-m", "cli.main", "sim", "sweep", "--seeds", "1..6", "--duration", "8",
                        "--plant-bug", "hw-ignores-lagging-isr", "--spark", standalone["url"], "--tasks", "3",
                        "--no-progress", "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=1100)
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]      # 1: a seed failed
    assert f"on {standalone['url']}, 3 tasks" in p.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"] == 6 and summary["verdicts"] == {"invalid": 2, "valid": 4}
    spark = summary["spark"]
    assert spark["tasks"] == 3 and spark["imported_from"] and all(w.endswith("kafkasim_code.zip")
                                                                   for w in spark["imported_from"])
    assert spark["code_sha256"] == code_zip(tmp_path)[1]           # what ran there is this checkout
    apps = standalone["state"]()["completedapps"]
    assert [(a["name"], a["state"], a["cores"]) for a in apps] == [("kafkasim-sim-sweep", "FINISHED", 2)]
    invalid = {b["seed"]: b for b in summary["invalid"]}
    assert sorted(invalid) == [1, 5] and invalid[5]["anomalies"] == ["hw-above-isr-leo"]
    bad = invalid[1]
    assert bad["anomalies"] == ["hw-above-isr-leo"]
    assert "hw-above-isr-leo" in bad["first_violation"] and ": SimBroker.handle_fetch)" in bad["first_violation"]
    lines = {o["seed"]: o for o in map(json.loads, (out / "outcomes.jsonl").read_text().splitlines())}
    assert sorted(lines) == [1, 2, 3, 4, 5, 6]
    # the failing seed, run here: the same verdict, first violation and digest of its history and event logs
    here = SimRun(SimOptions(seed=1, duration_s=8.0, bugs=("hw-ignores-lagging-isr",))).run()
    assert (here.verdict, here.digest) == ("invalid", lines[1]["digest"])
    assert main(["sim", "replay", "1", "--duration", "8", "--plant-bug", "hw-ignores-lagging-isr",
                 "--digest", lines[1]["digest"]]) == 1                   # exit 1: the seed is invalid...
    assert "IDENTICAL" in capsys.readouterr().out                        # ...and the same bytes
    # a passing seed too
    other = SimRun(replace(SimOptions(seed=4, duration_s=8.0, bugs=("hw-ignores-lagging-isr",)))).run()
    assert other.digest == lines[4]["digest"] and other.verdict == lines[4]["verdict"] == "valid"
    assert os.environ.get("SPARK_LOCAL_IP") in (None, "127.0.0.1")
