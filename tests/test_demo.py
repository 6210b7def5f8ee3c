"""`kafkasim demo`: the README's main job, run as a user runs it (a subprocess, an embedded ZooKeeper)."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import earliest_expiry_ms, processes_mentioning, write_embedded_cluster_yaml

from launcher.cluster import process_state
from node.events import read_events
from zk.server import free_port

pytestmark = pytest.mark.cluster  # the demo's cluster, through `kafkasim demo` subprocesses

REPO = Path(__file__).resolve().parent.parent
SESSION_MS = 3000
DEMO_TIMEOUT_S = 180


def write_config(d: Path, ports: list[int]) -> Path:
    """Each broker's Kafka listener on a port found free too: the default, the gRPC port + 10,000, lies in the
    ephemeral range, where another test's client connection can hold it (a CI run's broker 2 once found 46134
    taken, had no listener, and the demo's librdkafka member never reached its new coordinator)."""
    import yaml

    path = write_embedded_cluster_yaml(d, ports, SESSION_MS)
    doc = yaml.safe_load(path.read_text())
    for b in doc["brokers"]:
        b["listeners"] = f"PLAINTEXT://127.0.0.1:{free_port()}"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def broker_starts(run_dir: Path) -> list[dict]:
    """Every broker_starting event of the run, broker by broker."""
    return [e for p in sorted((run_dir / "events").glob("broker-*.jsonl")) for e in read_events(p)
            if e["type"] == "broker_starting"]


def started_pids(run_dir: Path) -> dict[int, list[int]]:
    """Broker id -> pids of every broker process started."""
    out: dict[int, list[int]] = {}
    for e in broker_starts(run_dir):
        out.setdefault(e["broker"], []).append(e["pid"])
    return out


@pytest.fixture
def demo_dir(tmp_path: Path):
    """A directory for one demo run; anything of ours still running afterwards is SIGKILLed."""
    yield tmp_path
    for pid in processes_mentioning(str(tmp_path)):
        os.kill(pid, signal.SIGCONT)
        os.kill(pid, signal.SIGKILL)


def run_demo(config: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli.main", "demo", "--config", str(config), *extra], cwd=REPO,
                          capture_output=True, text=True, timeout=DEMO_TIMEOUT_S)


def scattered_ports() -> list[int]:
    """Three free ports, the second and third not next to the first: a demo that ran ids 1..3 on ports next to
    the first broker's instead of the config's brokers is caught."""
    first = free_port()
    return [first] + [p for p in (free_port() for _ in range(10)) if p not in (first + 1, first + 2)][:2]


def assert_the_configs_brokers_ran(demo_dir: Path, config: Path, ports: list[int]) -> None:
    """`demo --config F` runs F's brokers, on F's ports, in every start of each (a stopped broker comes back)."""
    started: dict[int, set[int]] = {}
    for e in broker_starts(demo_dir / "run"):
        started.setdefault(e["broker"], set()).add(e["port"])
    wanted = {i: {port} for i, port in enumerate(ports, start=1)}
    assert started == wanted, f"the demo ignored the brokers of {config} (wanted {wanted}, ran {started})"


def test_the_main_job_kills_a_groups_coordinator_and_reports_its_failover(demo_dir):
    ports = scattered_ports()
    config = write_config(demo_dir, ports)
    r = run_demo(config)
    assert_the_configs_brokers_ran(demo_dir, config, ports)   # the killed coordinator comes back too
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
    out = r.stdout
    m = re.search(r"group 'billing': __consumer_offsets-(\d+), coordinator broker (\d)", out)
    assert m, out
    partition, old = int(m.group(1)), int(m.group(2))
    assert f"SIGKILL of broker {old}, the coordinator of 'billing'" in out, out
    moved = re.search(r"coordinator moved from broker (\d) to broker (\d): load took ([\d.]+) ms over (\d+) records", out)
    assert moved and int(moved.group(1)) == old and int(moved.group(2)) != old, out
    assert int(moved.group(4)) > 0, "the new coordinator replayed the group's records"
    first = re.search(r"t=\s*([\d.]+) ms  first commit accepted by broker (\d)", out)
    assert first and int(first.group(2)) == int(moved.group(2)), out
    # detection waits for the killed broker's ZooKeeper session to expire (counted from its last packet)
    assert float(first.group(1)) >= earliest_expiry_ms(SESSION_MS), out
    # the timeline is in time order
    times = [float(t) for t in re.findall(r"^   t=\s*([\d.]+) ms  ", out, re.M)]
    assert len(times) >= 4 and times == sorted(times), out
    # the librdkafka group shares billing's coordinator: its first commit there is in the timeline too
    rdk = re.search(r"t=\s*([\d.]+) ms  first commit of '(shipping[-\d]*)' \(confluent-kafka\) accepted by broker (\d)",
                    out)
    assert rdk and int(rdk.group(3)) != old, out
    for g in ("billing", rdk.group(2), "audit"):
        assert f"   {g}: no committed offset was lost" in out, out
    run_dir = demo_dir / "run"
    assert (run_dir / "report.txt").read_text() == out
    report = json.loads((run_dir / "report.json").read_text())
    assert report["valid"] and report["lost_offsets"] == 0 and report["offsets_partition"] == partition
    assert report["old_coordinator"] == old and report["new_coordinator"] == int(moved.group(2))
    assert report["leader_elected_ms"] <= report["loaded_at_ms"] <= report["first_commit_ms"]
    assert report["rdkafka_group"] == rdk.group(2) and report["rdkafka_acknowledged_commits"] > 0
    assert report["loaded_at_ms"] <= report["rdkafka_first_commit_ms"]
    assert processes_mentioning(str(demo_dir)) == {}
    assert not (run_dir / "cluster.json").exists()


def test_demo_reports_both_controller_failovers_and_cleans_up(demo_dir):
    ports = scattered_ports()
    config = write_config(demo_dir, ports)
    r = run_demo(config, "--controller")
    assert_the_configs_brokers_ran(demo_dir, config, ports)   # the two stopped controllers come back too
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
    out = r.stdout
    for text in ("SIGTERM of the controller", "SIGKILL of the controller", "won the election (epoch 2)",
                 "won the election (epoch 3)", "final: controller broker"):
        assert text in out, f"{text!r} missing from the report:\n{out}"
    # the stages come in order
    order = [out.index(t) for t in ("SIGTERM of the controller", "won the election (epoch 2)",
                                    "SIGKILL of the controller", "won the election (epoch 3)", "restarting brokers")]
    assert order == sorted(order), out
    sigterm, sigkill = out.split("SIGKILL of the controller", 1)
    # a SIGTERMed controller closes its session; a SIGKILLed one cannot, so detection waits for the timeout
    closed = re.compile(r"old controller \w+ its session")
    assert closed.search(sigterm) and not closed.search(sigkill), out
    won = re.search(r"won the election \(epoch 3\)\s+t=\s*([\d.]+) ms", sigkill)
    assert won and float(won.group(1)) >= earliest_expiry_ms(SESSION_MS), sigkill
    assert re.search(r"^final: controller broker \d, epoch 3$", out, re.M), out
    # both stopped brokers came back with new broker epochs
    first = int(re.search(r"SIGTERM of the controller, broker (\d)", out).group(1))
    second = int(re.search(r"SIGKILL of the controller, broker (\d)", out).group(1))
    assert first != second
    for b in (first, second):
        assert re.search(rf"^   broker {b} registered again with broker epoch \d+$", out, re.M), out

    run_dir = demo_dir / "run"
    assert (run_dir / "report.txt").read_text() == out, "report.txt holds the printed report"

    # afterwards nothing it started is alive: brokers (every pid it ever started) and ZooKeeper
    pids = started_pids(run_dir)
    assert sorted(pids) == [1, 2, 3] and len(pids[first]) == 2 and len(pids[second]) == 2, pids
    for b, ps in pids.items():
        for pid in ps:
            assert process_state(pid) == "dead", f"broker {b} pid {pid} is still alive"
    assert processes_mentioning(str(demo_dir)) == {}
    assert not (run_dir / "cluster.json").exists()
