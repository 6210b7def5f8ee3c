"""The ``kafkasim`` command as a user runs it: real subprocesses, an embedded ZooKeeper, real brokers.

Each command is run as ``python -m cli.main ...`` from the repository root, as
the README tells users to, and only what it prints and its exit code are
trusted (plus /proc, to check that ``cluster down`` leaves nothing behind).

The tests of the shared module cluster run in file order; each one leaves
every broker running, so any of them can also be run alone.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers import _cmdline, processes_mentioning, write_embedded_cluster_yaml

from launcher.cluster import process_state
from node.config import KAFKA_PORT_OFFSET
from node.events import read_events
from util.waiting import wait_for
from zk.server import free_port

pytestmark = pytest.mark.cluster  # `kafkasim` subprocesses (some tests without the cli fixture)

REPO = Path(__file__).resolve().parent.parent
OFFSETS = "__consumer_offsets"
SESSION_MS = 3000
FAILOVER_S = SESSION_MS / 1000 + 15.0  # detection is bounded by the session timeout; the rest is CLI start-up


# ---------------------------------------------------------------------- helpers

def kafkasim(*args: Any, timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli.main", *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def ok(*args: Any, timeout: float = 90) -> subprocess.CompletedProcess:
    r = kafkasim(*args, timeout=timeout)
    assert r.returncode == 0, f"kafkasim {' '.join(map(str, args))} exited {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def write_embedded_yaml(d: Path, brokers: int = 3, **settings: Any) -> Path:
    """A cluster.yaml for an embedded ZooKeeper, everything under ``d``."""
    return write_embedded_cluster_yaml(d, [free_port(paired=KAFKA_PORT_OFFSET) for _ in range(brokers)], SESSION_MS, **settings)


class CliCluster:
    """A cluster.yaml in its own directory, driven only through the CLI."""

    def __init__(self, d: Path, brokers: int = 3, **settings: Any):
        self.dir = d
        self.config = write_embedded_yaml(d, brokers, **settings)
        self.cfg = yaml.safe_load(self.config.read_text())
        self.run_dir = Path(self.cfg["run.dir"])
        self.pids: set[int] = set()      # every broker and ZooKeeper pid we ever saw

    def run(self, *args: Any, timeout: float = 90) -> subprocess.CompletedProcess:
        return kafkasim(*args, "--config", self.config, timeout=timeout)

    def ok(self, *args: Any, timeout: float = 90) -> subprocess.CompletedProcess:
        return ok(*args, "--config", self.config, timeout=timeout)

    def status(self) -> dict[str, Any]:
        doc = json.loads(self.ok("cluster", "status", "--json").stdout)
        self.pids |= {b["process"]["pid"] for b in doc["brokers"] if b.get("process") and b["process"]["pid"]}
        return doc

    def port(self, broker_id: int) -> int:
        return next(b["port"] for b in self.cfg["brokers"] if b["id"] == broker_id)

    def recorded_pids(self) -> dict[str, Any]:
        """What `cluster up` recorded in <run.dir>/cluster.json: ZooKeeper's and the brokers' pids."""
        state = json.loads((self.run_dir / "cluster.json").read_text())
        zk = [s["pid"] for s in state["zookeeper"]["servers"]["servers"]]
        brokers = {int(b): v["pid"] for b, v in state["brokers"].items()}
        self.pids |= set(zk) | set(brokers.values())
        return {"zookeeper": zk, "brokers": brokers}

    def cleanup(self) -> None:
        """`cluster down`, then SIGKILL whatever of ours it left behind (so one failure cannot leak)."""
        self.run("cluster", "down", timeout=120)
        for pid in self.pids | set(processes_mentioning(str(self.dir))):
            if process_state(pid) != "dead" and str(self.dir) in _cmdline(pid):
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)


def broker(doc: dict[str, Any], broker_id: int) -> dict[str, Any]:
    return next(b for b in doc["brokers"] if b["id"] == broker_id)


def offsets(doc: dict[str, Any]) -> dict[int, dict[str, Any]]:
    topic = next(t for t in doc["topics"] if t["topic"] == OFFSETS)
    return {p["partition"]: p for p in topic["partitions"]}


# ---------------------------------------------------------------------- cluster.yaml errors

@pytest.mark.parametrize("body, key, what", [
    ("zookeeper.sesion.timeout.ms: 6000\n", "zookeeper.sesion.timeout.ms", "did you mean 'zookeeper.session.timeout.ms'"),
    ('offsets.topic.num.partitions: "fifty"\n', "offsets.topic.num.partitions", "expected int"),
    ("offsets.topic.replication.factor: 3\n", "offsets.topic.replication.factor", "exceeds the number of brokers"),
], ids=["unknown-key", "bad-value", "rf-above-broker-count"])
def test_a_bad_cluster_yaml_exits_2_and_names_the_key(tmp_path, body, key, what):
    bad = tmp_path / "cluster.yaml"
    bad.write_text(f"run.dir: {tmp_path / 'run'}\n{body}brokers:\n"
                   "  - {id: 1, port: 19091}\n  - {id: 2, port: 19092}\n")
    r = kafkasim("cluster", "status", "--config", bad)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stdout == ""
    assert f"{bad}: {key}:" in r.stderr and what in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "run").exists(), "a rejected config must not start anything"


def test_a_missing_cluster_yaml_exits_2(tmp_path):
    r = kafkasim("cluster", "up", "--config", tmp_path / "nope.yaml")
    assert r.returncode == 2 and "config file not found" in r.stderr, (r.stdout, r.stderr)


# ---------------------------------------------------------------------- the embedded path, end to end

@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory):
    c = CliCluster(tmp_path_factory.mktemp("cli"))
    try:
        c.up = kafkasim("cluster", "up", "--config", c.config, timeout=120)  # type: ignore[attr-defined]
        assert c.up.returncode == 0, c.up.stdout + c.up.stderr  # type: ignore[attr-defined]
        c.recorded_pids()
        yield c
    finally:
        c.cleanup()


def test_cluster_up_prints_the_controller(cli):
    m = re.search(r"^controller: broker (\d+), epoch 1; 3 brokers; 50 partitions with a leader$",
                  cli.up.stdout, re.M)
    assert m, cli.up.stdout
    assert re.search(r"^cluster up: ZooKeeper 127\.0\.0\.1:\d+; run dir " + re.escape(str(cli.run_dir)) + "$",
                     cli.up.stdout, re.M), cli.up.stdout
    assert int(m.group(1)) == cli.status()["controller"]["broker_id"]


def test_cluster_status_json_has_the_documented_shape(cli):
    doc = cli.status()
    recorded = cli.recorded_pids()["brokers"]
    assert set(doc) == {"controller", "brokers", "topics"}
    assert set(doc["controller"]) == {"broker_id", "epoch"}
    assert doc["controller"]["broker_id"] in (1, 2, 3) and doc["controller"]["epoch"] == 1
    assert [b["id"] for b in doc["brokers"]] == [1, 2, 3]
    for b in doc["brokers"]:
        assert {"id", "host", "port", "epoch", "alive", "process", "kafka_listeners"} <= set(b), b
        assert (b["host"], b["port"]) == ("127.0.0.1", cli.port(b["id"]))
        kafka = cli.port(b["id"]) + 10000 if cli.port(b["id"]) + 10000 <= 65535 else cli.port(b["id"]) - 10000
        assert b["kafka_listeners"] == [f"PLAINTEXT://127.0.0.1:{kafka}"], b   # the default listener: gRPC port ± 10000
        assert b["alive"] is True and isinstance(b["epoch"], int) and b["epoch"] > 0
        assert b["process"] == {"pid": recorded[b["id"]], "state": "running"}
        assert process_state(b["process"]["pid"]) == "running"
    assert [t["topic"] for t in doc["topics"]] == [OFFSETS]
    topic = doc["topics"][0]
    assert set(topic) == {"topic", "config", "partitions"}
    # Kafka's offsets topic configs, at /config/topics/__consumer_offsets
    assert topic["config"] == {"cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": "104857600"}
    assert [p["partition"] for p in topic["partitions"]] == list(range(50))
    for p in topic["partitions"]:
        assert {"partition", "leader", "leader_epoch", "replicas", "isr"} <= set(p), p
        assert sorted(p["replicas"]) == [1, 2, 3] and sorted(p["isr"]) == [1, 2, 3]
        assert p["leader"] == p["replicas"][0] and p["leader_epoch"] == 0


def test_controller_names_the_same_broker_in_epoch_1(cli):
    c = cli.status()["controller"]["broker_id"]
    assert cli.ok("controller").stdout == f"controller: broker {c}, epoch 1\n"
    assert json.loads(cli.ok("controller", "--json").stdout) == {"broker_id": c, "epoch": 1}


def test_zk_ls_and_get_read_zookeeper(cli):
    assert cli.ok("zk", "ls", "/brokers/ids").stdout == "[1, 2, 3]\n"
    lines = cli.ok("zk", "get", "/controller_epoch").stdout.splitlines()
    assert lines[0] == "1"
    stat = dict(line.split(" = ") for line in lines[1:])
    assert list(stat) == ["czxid", "mzxid", "ctime", "mtime", "version", "cversion", "ephemeralOwner",
                          "dataLength", "numChildren"]
    assert stat["ephemeralOwner"] == "0x0" and stat["dataLength"] == "1" and stat["numChildren"] == "0"
    assert stat["czxid"].startswith("0x") and int(stat["mzxid"], 16) >= int(stat["czxid"], 16)
    # /controller is ephemeral and names the controller
    lines = cli.ok("zk", "get", "/controller").stdout.splitlines()
    assert json.loads(lines[0])["brokerid"] == cli.status()["controller"]["broker_id"]
    assert "ephemeralOwner = 0x0" not in lines
    r = cli.run("zk", "get", "/nope")
    assert r.returncode == 1 and "Node does not exist" in r.stderr and "/nope" in r.stderr, (r.stdout, r.stderr)
    r = cli.run("zk", "ls", "/nope")
    assert r.returncode == 1 and "Node does not exist" in r.stderr, (r.stdout, r.stderr)


PARTITION_LINE = re.compile(r"^\tTopic: __consumer_offsets\tPartition: (\d+)\tLeader: (\d+|none)\t"
                            r"LeaderEpoch: (\d+)\tReplicas: ([\d,]+)\tIsr: ([\d,]*)\tHw: (\d+|-)\tLeo: ([\d=,-]+)$")


def test_topics_describe_prints_kafka_topics_format(cli):
    out = cli.ok("topics", "--describe").stdout.splitlines()
    assert out[0] == f"Topic: {OFFSETS}\tPartitionCount: 50\tReplicationFactor: 3\tConfigs: cleanup.policy=compact,compression.type=producer,segment.bytes=104857600"
    assert len(out) == 51
    parts = offsets(cli.status())
    for line in out[1:]:
        m = PARTITION_LINE.match(line)
        assert m, repr(line)
        p = parts[int(m.group(1))]
        assert (int(m.group(2)), int(m.group(3))) == (p["leader"], p["leader_epoch"])
        assert m.group(4) == ",".join(map(str, p["replicas"])) and m.group(5) == ",".join(map(str, p["isr"]))
        # an idle cluster: the leader reports HW 0 and every replica an empty log
        assert m.group(6) == "0" and m.group(7) == ",".join(f"{b}=0" for b in p["replicas"]), line
    assert sorted(int(PARTITION_LINE.match(line).group(1)) for line in out[1:]) == list(range(50))
    assert cli.ok("topics", "--describe", "--topic", OFFSETS).stdout.splitlines() == out
    r = cli.run("topics", "--describe", "--topic", "nope")
    assert r.returncode == 1 and "nope" in r.stderr and r.stdout == "", (r.stdout, r.stderr)


def test_broker_health_answers_for_a_running_broker_only(cli):
    r = ok("broker-health", "--port", cli.port(1))
    assert r.stdout.startswith("broker 1 healthy: epoch "), r.stdout
    r = kafkasim("broker-health", "--port", free_port())
    assert r.returncode == 1 and "unhealthy" in r.stderr, (r.stdout, r.stderr)


def test_broker_pause_and_resume_show_in_status(cli):
    doc = cli.status()
    victim = next(b for b in (1, 2, 3) if b != doc["controller"]["broker_id"])
    pid = broker(doc, victim)["process"]["pid"]
    try:
        assert "SIGSTOP" in cli.ok("broker", "pause", victim).stdout
        assert broker(cli.status(), victim)["process"] == {"pid": pid, "state": "paused"}
        assert process_state(pid) == "paused"
    finally:
        r = cli.ok("broker", "resume", victim)
    assert "SIGCONT" in r.stdout
    assert broker(cli.status(), victim)["process"] == {"pid": pid, "state": "running"}
    assert process_state(pid) == "running"


def test_broker_start_refuses_a_running_broker(cli):
    r = cli.run("broker", "start", 1)
    assert r.returncode == 1 and "already running" in r.stderr, (r.stdout, r.stderr)
    r = cli.run("broker", "start", 9)
    assert r.returncode == 2 and "no broker with id 9" in r.stderr, (r.stdout, r.stderr)


def test_killing_the_controller_elects_another_and_start_brings_it_back(cli):
    before = cli.status()
    old = before["controller"]["broker_id"]
    assert before["controller"]["epoch"] == 1
    old_epoch = broker(before, old)["epoch"]
    old_pid = broker(before, old)["process"]["pid"]
    assert cli.ok("broker", "kill", old).stdout == f"broker {old} (pid {old_pid}): sent SIGKILL\n"

    after = wait_for(lambda: (d := cli.status())["controller"]["broker_id"] not in (None, old) and d,
                     FAILOVER_S, "a new controller after SIGKILL")
    assert after["controller"]["epoch"] == 2
    new = after["controller"]["broker_id"]
    assert cli.ok("controller").stdout == f"controller: broker {new}, epoch 2\n"
    gone = wait_for(lambda: not (b := broker(cli.status(), old))["alive"] and b, FAILOVER_S,
                    f"broker {old} to leave /brokers/ids")
    assert gone["process"] == {"pid": old_pid, "state": "dead"}

    m = re.fullmatch(rf"broker {old} started \(pid (\d+)\)\n", cli.ok("broker", "start", old).stdout)
    assert m
    pid = int(m.group(1))
    cli.pids.add(pid)
    back = wait_for(lambda: (b := broker(cli.status(), old))["alive"] and b, 30, f"broker {old} to register again")
    assert back["epoch"] > old_epoch
    assert back["process"] == {"pid": pid, "state": "running"}
    assert cli.status()["controller"] == {"broker_id": new, "epoch": 2}, "a restarted broker does not take over"


def test_preferred_leader_election_after_a_broker_bounce(cli):
    """A restarted broker catches up, rejoins its ISRs, and a preferred election hands it its partitions back."""
    before = cli.status()
    ctrl = before["controller"]["broker_id"]
    # the non-controller that leads the most (a broker bounced by an earlier test leads nothing)
    victim = max((b for b in (1, 2, 3) if b != ctrl),
                 key=lambda b: (sum(s["leader"] == b for s in offsets(before).values()), -b))
    assert any(s["leader"] == victim for s in offsets(before).values())
    preferred_of_victim = [p for p, s in offsets(before).items() if s["replicas"][0] == victim]
    assert preferred_of_victim, "round-robin placement makes every broker a preferred replica"
    old_epoch = broker(before, victim)["epoch"]
    cli.ok("broker", "kill", victim)
    wait_for(lambda: (d := cli.status()) and not broker(d, victim)["alive"]
             and all(s["leader"] != victim and victim not in s["isr"] for s in offsets(d).values()),
             FAILOVER_S, f"broker {victim}'s leaderships to move")
    cli.pids.add(int(re.search(r"pid (\d+)", cli.ok("broker", "start", victim).stdout).group(1)))
    wait_for(lambda: (b := broker(cli.status(), victim))["alive"] and b["epoch"] > old_epoch,
             30, f"broker {victim} to register again")

    # replication: the restarted broker fetches, catches up and the leaders expand their ISRs (AlterIsr)
    wait_for(lambda: all(victim in offsets(cli.status())[p]["isr"] for p in preferred_of_victim),
             30, f"broker {victim} to rejoin the ISRs of its preferred partitions")
    mid = cli.status()
    not_led = [p for p in preferred_of_victim if offsets(mid)[p]["leader"] != victim]
    r = cli.ok("leader-election", "--preferred", "--all")
    m = re.fullmatch(r"preferred leader election: (\d+) partition\(s\) moved\n", r.stdout)
    assert m, r.stdout  # --all also returns partitions to any other broker that rejoined its ISRs
    after = cli.status()
    for p in preferred_of_victim:
        assert offsets(after)[p]["leader"] == victim, (p, offsets(after)[p])
    for p in not_led:
        assert offsets(after)[p]["leader_epoch"] > offsets(mid)[p]["leader_epoch"]
    moved = [e for e in read_events(cli.run_dir / "events" / f"broker-{ctrl}.jsonl")[seen_before(cli, ctrl, mid):]
             if e["type"] == "partition_state_written" and e["reason"] in ("preferred_admin", "auto_rebalance")]
    assert set(not_led) <= {e["partition"] for e in moved}
    # nothing is left to do
    r = cli.ok("leader-election", "--preferred", "--all")
    assert r.stdout == "preferred leader election: 0 partition(s) moved\n"


def seen_before(cli: CliCluster, ctrl: int, view) -> int:
    """Index of the first controller event written after ``view`` was taken (by its states' writes)."""
    evs = read_events(cli.run_dir / "events" / f"broker-{ctrl}.jsonl")
    last = max((i for i, e in enumerate(evs) if e["type"] == "partition_state_written"
                and any(e["partition"] == p and e["zk_version"] == s["zk_version"]
                        for p, s in offsets(view).items() if e["topic"] == OFFSETS)), default=-1)
    return last + 1


def _controller_events_count(cli: CliCluster, ctrl: int) -> int:
    return len(read_events(cli.run_dir / "events" / f"broker-{ctrl}.jsonl"))


def test_commands_before_cluster_up_fail_with_a_clear_error(tmp_path):
    c = CliCluster(tmp_path)   # a config nobody started: no ZooKeeper, no brokers
    for args in (("cluster", "status"), ("controller",), ("zk", "ls", "/"), ("topics", "--describe")):
        r = c.run(*args)
        assert r.returncode == 1 and "cluster up" in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
    r = c.run("leader-election", "--preferred", "--all")
    assert r.returncode == 1 and "cluster up" in r.stderr, (r.stdout, r.stderr)
    r = c.run("broker", "kill", 1)
    assert r.returncode == 1 and "not running" in r.stderr, (r.stdout, r.stderr)


def test_cluster_down_stops_every_process(cli):
    cli.status()
    recorded = cli.recorded_pids()
    zk_pids, broker_pids = recorded["zookeeper"], set(recorded["brokers"].values())
    assert all(process_state(p) == "running" for p in zk_pids + sorted(broker_pids))
    assert cli.ok("cluster", "down", timeout=120).stdout == "cluster down\n"
    for pid in sorted(cli.pids | set(zk_pids) | broker_pids):
        assert process_state(pid) == "dead", f"pid {pid} still alive after cluster down: {_cmdline(pid)}"
    assert processes_mentioning(str(cli.dir)) == {}
    assert not (cli.run_dir / "cluster.json").exists()
    r = cli.run("cluster", "status")
    assert r.returncode != 0 and "cluster up" in r.stderr and "Traceback" not in r.stderr, (r.stdout, r.stderr)
    r = cli.run("controller")
    assert r.returncode != 0 and "cluster up" in r.stderr, (r.stdout, r.stderr)
    assert cli.ok("cluster", "down").stdout == "cluster down\n", "down is idempotent"


# ---------------------------------------------------------------------- cluster up --brokers N

def test_cluster_up_with_fewer_brokers_lowers_the_offsets_replication_factor(tmp_path):
    c = CliCluster(tmp_path / "one")   # its config says 3 brokers and RF 3
    try:
        r = c.ok("cluster", "up", "--brokers", 1, timeout=120)
        assert "controller: broker 1, epoch 1; 1 brokers; 50 partitions with a leader" in r.stdout, r.stdout
        c.recorded_pids()
        doc = c.status()   # later commands use the effective config that `up --brokers 1` recorded
        assert [(b["id"], b["alive"], b["process"]["state"]) for b in doc["brokers"]] == [(1, True, "running")]
        parts = offsets(doc)
        assert sorted(parts) == list(range(50))
        assert all(s["replicas"] == [1] and s["leader"] == 1 and s["isr"] == [1] for s in parts.values())
        header = c.ok("topics", "--describe").stdout.splitlines()[0]
        assert header == f"Topic: {OFFSETS}\tPartitionCount: 50\tReplicationFactor: 1\tConfigs: cleanup.policy=compact,compression.type=producer,segment.bytes=104857600"
        assert c.ok("zk", "ls", "/brokers/ids").stdout == "[1]\n"
        c.ok("cluster", "down", timeout=120)
        assert all(process_state(p) == "dead" for p in c.pids)
        assert processes_mentioning(str(c.dir)) == {}
    finally:
        c.cleanup()


def test_failover_done_reports_the_write_time_of_its_own_failover(tmp_path):
    """controller_failover_done's write_ms is the time of this failover's ZooKeeper writes (docs/events.md).

    A lone broker is controller in epoch 1 and creates __consumer_offsets (50
    writes).  Paused past its session timeout, it resumes, registers again and
    wins epoch 2, whose failover has nothing to write: its write_ms must be 0,
    and in any case within total_ms.
    """
    c = CliCluster(tmp_path / "lone")
    try:
        c.ok("cluster", "up", "--brokers", 1, timeout=120)
        c.recorded_pids()
        c.ok("broker", "pause", 1)
        try:
            wait_for(lambda: c.ok("zk", "ls", "/brokers/ids").stdout == "[]\n", FAILOVER_S,
                     "the paused broker's session to expire")
        finally:
            c.ok("broker", "resume", 1)
        wait_for(lambda: json.loads(c.ok("controller", "--json").stdout) == {"broker_id": 1, "epoch": 2},
                 30, "broker 1 to win epoch 2")
        log = c.run_dir / "events" / "broker-1.jsonl"
        done = wait_for(lambda: len(d := {e["epoch"]: e for e in read_events(log)
                                          if e["type"] == "controller_failover_done"}) == 2 and d,
                        10, "both failovers to be logged")
        first, second = done[1], done[2]
        assert first["states_written"] == 50 and first["write_ms"] > 0, first
        assert second["states_written"] == 0, second
        assert second["write_ms"] == 0 and second["write_ms"] <= second["total_ms"], \
            f"epoch 2 wrote nothing, yet reports write_ms={second['write_ms']} (epoch 1's was {first['write_ms']})"
    finally:
        c.cleanup()
