"""Chaos runs end to end: every shipped scenario in a short form, and planted bugs.

Each run is real: ZooKeeper, broker processes, the fault proxy process, the
client library over gRPC.  A scenario must come out valid on the current code;
a run with a planted bug (node/server/bugs.py) must come out invalid, naming the
anomaly the bug causes.  A checker that cannot fail does not count.
"""
from __future__ import annotations

import copy
import io
import json
import subprocess
import sys

import pytest
import yaml

from chaos.runner import ChaosRun
from chaos.scenario import SCENARIO_DIR, load_scenario, parse_scenario

pytestmark = [pytest.mark.chaos, pytest.mark.cluster]  # chaos runs and `kafkasim` subprocesses, started by the tests

SHORT_S = 10.0
SCENARIOS = sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))
# the real-client scenarios run in tests/test_chaos_real_clients.py, longer (their clients need it); fidelity
# runs in full in tests/test_sim_fidelity.py (its faults are scripted past a 10 s form); the user-application
# pair (app-consumer-buggy must come out invalid) in tests/test_chaos_app.py; controller-reassign below, with
# its own checks; disk-full-coordinator runs below with one fault of each of its kinds
# (test_disk_faults_move_the_coordinator_...); the transactional ones in tests/test_chaos_txn_runs.py, longer
# (a zombie needs one), with these checks too
SHORT_FORM = [n for n in SCENARIOS if not n.startswith(("coordinator-failover-", "app-consumer-", "txn-"))
              and n not in ("fidelity", "controller-reassign", "disk-full-coordinator")]


def run(scenario, tmp_path, seed=1, duration=SHORT_S, bugs=()):
    out = io.StringIO()
    r = ChaosRun(scenario, seed, tmp_path / "run", duration_s=duration, planted_bugs=bugs, stream=out,
                 progress=False).run()
    return r, out.getvalue()


def history(r) -> list[dict]:
    return [json.loads(line) for line in (r.out / "history.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("name", SHORT_FORM)
def test_every_scenario_comes_out_valid_in_a_short_form(name, tmp_path, request):
    scenario = load_scenario(SCENARIO_DIR / f"{name}.yaml")
    if name == "coordinator-kill":   # the same run (seed 1, SHORT_S) is shared with the analysis tests
        r, printed = request.getfixturevalue("short_chaos_results")["clean"]
    else:
        r, printed = run(scenario, tmp_path)
    assert r.verdict == "valid", printed + json.dumps(r.results["checks"], default=str)[:4000]
    assert r.exit_code == 0
    for f in ("history.jsonl", "history.edn", "schedule.json", "results.json", "cluster.yaml", "scenario.yaml"):
        assert (r.out / f).exists(), f
    ops = history(r)
    faults = [op for op in ops if op["process"] == "nemesis"]
    starts = [op for op in faults if op["value"]["phase"] == "start"]
    heals = [op for op in faults if op["value"]["phase"] == "heal"]
    assert starts and len(starts) == len(heals), "the short form must fire and heal at least one fault"
    marks = [op for op in faults if op["value"]["phase"] in ("end", "stop")]   # the end phase, marked
    assert [(op["f"], op["value"]) for op in marks] == [("end", {"phase": "end"}), ("stop", {"phase": "stop"})]
    assert max(op["index"] for op in starts + heals) < marks[0]["index"]
    assert all(op["value"]["nodes"] or op["value"].get("skipped") for op in starts)
    oks = {op["f"] for op in ops if op["type"] == "ok"}
    if scenario.producers.count:
        assert "send" in oks
    if scenario.groups:
        assert {"join", "sync", "commit", "poll"} <= oks
    assert any(op.get("final") for op in ops)
    assert (r.out / "history.edn").read_text().startswith("{:")
    assert "verdict: VALID" in printed
    assert json.loads((r.out / "results.json").read_text())["verdict"] == "valid"


def tailored(name: str, **changes) -> object:
    """A shipped scenario with some of its sections replaced."""
    doc = copy.deepcopy(yaml.safe_load((SCENARIO_DIR / f"{name}.yaml").read_text()))
    doc.update(changes)
    return parse_scenario(doc, f"{name} (tailored)")


def test_a_coordinator_that_acks_commits_before_the_hw_is_caught(tmp_path):
    """Cut the coordinator off the other brokers and ZooKeeper while its clients still reach it:
    a correct coordinator cannot complete a commit (the HW cannot move); the planted one acks
    commits that only it has, after another broker has taken over the group."""
    scenario = load_scenario(SCENARIO_DIR / "coordinator-isolated.yaml")
    r, printed = run(scenario, tmp_path, bugs=("commit-before-hw",))
    kinds = set(r.results["checks"]["stats"]["anomalies"])
    assert r.verdict == "invalid" and r.exit_code == 1, printed
    assert kinds and kinds <= {"split-coordinator", "lost-commit", "commit-went-backwards"}, kinds
    anomaly = r.results["checks"]["anomalies"][0]
    assert anomaly["ops"] and anomaly["ops"][0]["f"] == "commit"


def test_a_zombie_controller_is_caught(tmp_path):
    """Pause the controller past its session: a correct one resigns when it wakes; the planted
    one carries on with its old epoch, unfenced, and its changes land."""
    scenario = tailored("pauses", faults={"start.after.ms": 3000, "mix": [
        {"kind": "pause", "target": "controller", "duration.ms": [4000, 4000]}]})
    r, printed = run(scenario, tmp_path, bugs=("zombie-controller",), duration=12.0)
    kinds = set(r.results["checks"]["stats"]["anomalies"])
    assert r.verdict == "invalid", printed
    found = r.results["checks"]["anomalies"]
    written = {(a["details"]["topic"], a["details"]["partition"]) for a in found
               if a["kind"] == "zombie-controller-write"}
    assert written, kinds
    # What the zombie's writes can cost, when one lands at the wrong moment: an ISR it shrank to its own
    # broker lets that broker, still leading in its own view, acknowledge sends alone that the real leader
    # then truncates.  Data anomalies, then, and only on partitions the zombie wrote.
    others = [a for a in found if a["kind"] != "zombie-controller-write"]
    assert all(a["kind"] in ("lost-write", "inconsistent-offset", "duplicate-value", "unseen-message")
               and (a["details"].get("topic"), a["details"].get("partition")) in written for a in others), others


def test_a_coordinator_that_accepts_fenced_generations_is_caught(short_chaos_results):
    """Members stall past their session and then commit in their old generation: a correct
    coordinator refuses (UNKNOWN_MEMBER_ID); the planted one accepts.  The run (consumer-stalls without
    faults or crashes, seed 59 so that one stall is alone, 12 s, the bug planted) is shared with the
    analysis tests (tests/conftest.py)."""
    r, printed = short_chaos_results["planted"]
    assert r.results["planted_bugs"] == ["fenced-generation-commit"]
    kinds = set(r.results["checks"]["stats"]["anomalies"])
    assert r.verdict == "invalid", printed
    assert "fenced-generation-commit" in kinds, kinds
    assert kinds <= {"fenced-generation-commit", "commit-went-backwards"}, kinds


def test_a_controller_killed_mid_reassignment_loses_no_write_and_the_new_one_completes_it(tmp_path):
    """scenarios/controller-reassign.yaml: a partition's reassignment (AlterPartitionReassignments) while the new
    replica's broker is paused, then a SIGKILL of the controller once it has answered, twice.  No acknowledged
    write is lost (the run is valid), and each reassignment is completed on its target replicas by the next
    controller (a newer controller epoch), which found it in the topic znode's adding and removing replicas."""
    from node.events import read_events
    r, printed = run(load_scenario(SCENARIO_DIR / "controller-reassign.yaml"), tmp_path, duration=24.0)
    assert r.verdict == "valid", printed + json.dumps(r.results["checks"], default=str)[:4000]
    starts = [op["value"] for op in history(r) if op["process"] == "nemesis" and op["value"].get("phase") == "start"]
    assert [v["kind"] for v in starts] == ["reassign-failover"] * 2, starts
    assert all(v["error"] is None and v["nodes"] == [v["controller"]] for v in starts), starts   # it was killed
    events = [e for f in sorted((r.out / "cluster" / "events").glob("broker-*.jsonl")) for e in read_events(f)
              if e.get("topic") == "events" and e["type"] in ("reassignment_started", "reassignment_completed")]
    for v in starts:
        mine = [e for e in events if e["partition"] == v["partition"]]
        started = [e for e in mine if e["type"] == "reassignment_started"]
        completed = [e for e in mine if e["type"] == "reassignment_completed"]
        assert len(started) == 1 and started[0]["broker"] == v["controller"], mine
        assert started[0]["replicas"][:len(v["to"])] == v["to"], mine
        assert len(completed) == 1 and completed[0]["replicas"] == v["to"], mine
        assert completed[0]["broker"] != v["controller"], mine
        assert completed[0]["controller_epoch"] > started[0]["controller_epoch"], mine


def kafkasim(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], capture_output=True, text=True, timeout=60)


def test_chaos_list_and_the_schedule_a_seed_gives():
    listed = kafkasim("chaos", "list")
    assert listed.returncode == 0
    for name in SCENARIOS:
        assert name in listed.stdout
    a = kafkasim("chaos", "run", "mixed", "--seed", "42", "--schedule-only")
    b = kafkasim("chaos", "run", "mixed", "--seed", "42", "--schedule-only")
    c = kafkasim("chaos", "run", "mixed", "--seed", "43", "--schedule-only")
    assert a.returncode == 0 and a.stdout == b.stdout and a.stdout != c.stdout
    assert "#0" in a.stdout


def test_chaos_run_refuses_bad_input_with_exit_3(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nworkload: {producers: {count: 1, topik: t}}\n")
    r = kafkasim("chaos", "run", str(bad))
    assert r.returncode == 3 and "workload.producers.topik: unknown key" in r.stderr
    r = kafkasim("chaos", "run", "mixed", "--plant-bug", "everything")
    assert r.returncode == 3 and "unknown planted bug 'everything'" in r.stderr
    r = kafkasim("chaos", "run", "no-such-scenario")
    assert r.returncode == 3 and "no scenario 'no-such-scenario'" in r.stderr


def test_disk_faults_move_the_coordinator_and_every_mount_is_undone(tmp_path):
    """disk-full and disk-error on the log directory holding g1's coordinator partition: each row of the failover
    timeline has the disk fault as its cause, detected by the replicas it took offline, the coordinator moved and
    loaded elsewhere; nothing acknowledged is lost (the verdict); the run's filesystems are all unmounted."""
    scenario = tailored("disk-full-coordinator", **{"duration.s": 14, "faults": {"schedule": [
        {"at.ms": 3000, "heal.at.ms": 6000, "kind": "disk-full", "target": "coordinator:g1"},
        {"at.ms": 8000, "heal.at.ms": 11000, "kind": "disk-error", "target": "coordinator:g1"}]}})
    r, printed = run(scenario, tmp_path, duration=14)
    assert r.verdict == "valid" and r.exit_code == 0, printed
    assert "verdict: VALID" in printed and json.loads((r.out / "results.json").read_text())["verdict"] == "valid"
    rows = [row for row in r.results["timeline"] if row["cause"] == "fault" and row["group"] == "g1"]
    assert [row["kind"] for row in rows] == ["disk-full", "disk-error"], printed
    for row in rows:
        assert row["moved"] and row["detect_by"] == "replicas_offline" and row["load_ms"] is not None, row
        assert row["new_leader"] != row["old_leader"] and row["first_commit_ms"] is not None, row
    starts = [op for op in history(r) if op["process"] == "nemesis" and op["value"]["phase"] == "start"]
    assert all(len(op["value"]["dirs"]) == 1 for op in starts), starts   # the one directory holding the partition
    with open("/proc/self/mounts") as f:
        assert str(r.out.resolve()) not in f.read()
    events = [json.loads(line) for p in (r.out / "cluster" / "events").glob("*.jsonl")
              for line in p.read_text().splitlines()]
    assert not [e for e in events if e["type"] in ("thread_died", "fetcher_error")]
    assert len([e for e in events if e["type"] == "log_dir_failed"]) == 2
