"""The simulator: one seed is one run, byte for byte; a run touches no clock, global random, thread or socket;
its run directory is a chaos run's, judged by judge/'s checkers (docs/simulation.md)."""
from __future__ import annotations

import hashlib
import json
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from judge.checkers import check
from judge.history import read_history
from judge.timeline import failover_timeline
from node.events import read_run_events
from replication.partition import PartitionReplication
from sim.run import SimOptions, SimRun

ROOT = Path(__file__).resolve().parent.parent
# a short run with faults of every kind the default mix has, overlapping ones included
OPTS = dict(duration_s=10.0, offsets_partitions=3, faults=("kill", "pause", "partition", "expire-session"))


def files_digest(run: Path) -> str:
    h = hashlib.sha256()
    paths = [run / "history.jsonl"] + sorted((run / "cluster" / "events").glob("broker-*.jsonl"))
    assert len(paths) == 4
    for p in paths:
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def test_one_seed_twice_in_one_process_gives_the_same_bytes(tmp_path: Path) -> None:
    a = SimRun(SimOptions(seed=3, **OPTS), tmp_path / "a").run()
    b = SimRun(SimOptions(seed=3, **OPTS), tmp_path / "b").run()
    assert a.faults and a.results["ops"]["invoked"] > 100
    assert files_digest(tmp_path / "a") == files_digest(tmp_path / "b")
    assert a.digest == b.digest
    c = SimRun(SimOptions(seed=4, **OPTS)).run()       # another seed is another run
    assert c.digest != a.digest


@pytest.mark.cluster
def test_one_seed_in_two_processes_gives_the_same_bytes(tmp_path: Path) -> None:
    """Two fresh interpreters, with different string-hash seeds (set iteration orders differ)."""
    code = ("import sys; from pathlib import Path; from sim.run import SimOptions, SimRun; "
            f"SimRun(SimOptions(seed=3, **{OPTS!r}), Path(sys.argv[1])).run()")
    digests = []
    for name, hashseed in (("a", "1"), ("b", "2")):
        out = tmp_path / name
        subprocess.run([sys.executable, "-c", code, str(out)], cwd=ROOT, check=True, capture_output=True,
                       timeout=120, env={"PYTHONHASHSEED": hashseed, "PATH": "/usr/bin:/bin"})
        digests.append(files_digest(out))
    assert digests[0] == digests[1]
    assert digests[0] == files_digest(SimRun(SimOptions(seed=3, **OPTS), tmp_path / "c").run() and tmp_path / "c")


def test_the_run_directory_is_a_chaos_runs_and_chaos_judges_it(tmp_path: Path) -> None:
    r = SimRun(SimOptions(seed=3, **OPTS), tmp_path).run()
    ops, events = read_history(tmp_path / "history.jsonl"), read_run_events(tmp_path / "cluster")
    assert check(ops, events).to_json()["anomaly_counts"] == r.results["checks"]["anomaly_counts"]
    assert failover_timeline(ops, events) == json.loads(json.dumps(r.results["timeline"]))
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["seed"] == 3 and saved["verdict"] == r.verdict
    assert {e["type"] for e in events} >= {"broker_starting", "controller_elected", "partition_state_written",
                                           "became_leader", "hw_changed", "coordinator_loaded"}


# ---------------------------------------------------------------- nothing but the seed

def _forbid(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make every wall clock, the global generator, sockets and threads raise (and say who was called) on
    this thread, the one the simulation runs on; other threads of the test process (a previous test's
    client or server threads, in the same xdist worker) keep the real functions."""
    called: list[str] = []
    me = threading.get_ident()

    def banned(name: str, real):
        def fn(*a, **k):
            if threading.get_ident() != me:
                return real(*a, **k)
            called.append(name)
            raise AssertionError(f"{name} called during a simulated run")
        return fn

    for name in ("time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "sleep"):
        monkeypatch.setattr(time, name, banned(f"time.{name}", getattr(time, name)))
    for name in ("random", "randint", "randrange", "choice", "choices", "getrandbits", "shuffle", "uniform",
                 "sample", "seed"):
        monkeypatch.setattr(random, name, banned(f"random.{name}", getattr(random, name)))
    monkeypatch.setattr(socket, "socket", banned("socket.socket", socket.socket))
    monkeypatch.setattr(socket, "create_connection", banned("socket.create_connection", socket.create_connection))
    monkeypatch.setattr(threading.Thread, "start", banned("threading.Thread.start", threading.Thread.start))
    return called


def test_a_run_reads_no_clock_no_global_random_no_socket_and_starts_no_thread(monkeypatch) -> None:
    called = _forbid(monkeypatch)
    r = SimRun(SimOptions(seed=5, **OPTS)).run()
    assert called == []
    assert r.results["ops"]["invoked"] > 100 and r.results["simulated_ms"] > 10_000


def test_the_guard_catches_a_core_that_reads_the_clock(monkeypatch) -> None:
    """The previous test can fail: a core reading the wall clock mid-run is caught."""
    real = PartitionReplication.on_leader_append

    def sneaky(self, log, now_ms):
        time.monotonic()
        return real(self, log, now_ms)

    monkeypatch.setattr(PartitionReplication, "on_leader_append", sneaky)
    called = _forbid(monkeypatch)
    with pytest.raises(AssertionError, match="time.monotonic called"):
        SimRun(SimOptions(seed=5, **OPTS)).run()
    assert called and called[0] == "time.monotonic"


def test_the_sim_command_runs_replays_and_refuses_bad_arguments(tmp_path: Path, capsys) -> None:
    from cli.main import main
    out = tmp_path / "run"
    code = main(["sim", "run", "--seed", "2", "--duration", "6", "--faults", "kill,pause", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code in (0, 2) and "seed 2" in printed and "verdict:" in printed
    assert main(["sim", "replay", "2", "--duration", "6", "--faults", "kill,pause", "--check", str(out)]) == code
    assert "IDENTICAL" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="unknown fault kind 'kil'"):
        main(["sim", "run", "--faults", "kil"])
    with pytest.raises(SystemExit, match="unknown planted bug"):
        main(["sim", "run", "--plant-bug", "nope"])
    bad = tmp_path / "bad.yaml"
    bad.write_text("seed: 1\nfaults: [{at_ms: 1, heal_at_ms: 2, kind: kill, target: controller, colour: red}]\n")
    assert main(["sim", "run", "--scenario", str(bad)]) == 3
    assert "faults[0].colour: unknown key" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["disk-full", "disk-error"])
def test_a_disk_fault_on_the_coordinators_directory_moves_it_or_halts_a_broker_with_one(tmp_path: Path,
                                                                                        kind: str) -> None:
    """The simulator runs the log directory rules and the controller's events through the same cores: with two
    directories per broker the failed one's replicas go offline and the controller moves their leaderships (the
    timeline's ``replicas_offline`` detection); with one, the broker halts and its session takes it away."""
    from chaos.schedule import Fault
    for dirs, detected_by in ((2, "replicas_offline"), (1, "broker_change")):
        opts = SimOptions(seed=3, duration_s=14.0, offsets_partitions=3, config={"log_dirs": dirs},
                          schedule=[Fault(0, 3000, 8000, kind, "coordinator:g1", 7)])
        r = SimRun(opts, tmp_path / f"{kind}-{dirs}").run()
        assert r.verdict == "valid", r.results["checks"]
        (row,) = [row for row in r.results["timeline"] if row["cause"] == "fault" and row["group"] == "g1"]
        assert row["moved"] and row["detect_by"] == detected_by and row["load_ms"] is not None, row
        failed = [e for e in r.events if e["type"] == "log_dir_failed"]
        assert len(failed) == 1 and failed[0]["halting"] == (dirs == 1)
        assert bool([e for e in r.events if e["type"] == "broker_halted"]) == (dirs == 1)
        assert bool([e for e in r.events if e["type"] == "log_dir_event_handled"]) == (dirs == 2)
