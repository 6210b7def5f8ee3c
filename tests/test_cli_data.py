"""produce, consume, consumer-groups and console-consumer, as a user runs them (real subprocesses)."""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time

import pytest

from kafkacommon.hashing import murmur2, to_positive
from util.waiting import wait_for
from test_cli import REPO, CliCluster, kafkasim

pytestmark = pytest.mark.cluster  # `kafkasim` subprocesses and a cluster

TOPIC = "lab"
CLEAR = "\x1b[H\x1b[2J"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory):
    c = CliCluster(tmp_path_factory.mktemp("lab"), **{"group.initial.rebalance.delay.ms": 200})
    try:
        r = kafkasim("cluster", "up", "--config", c.config, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        c.ok("topics", "--create", "--topic", TOPIC, "--partitions", 3, "--replication-factor", 3,
             "--config", "min.insync.replicas=2")
        yield c
    finally:
        c.cleanup()


def produce(lab, *args, stdin: str | None = None):
    r = subprocess.run([sys.executable, "-m", "cli.main", "produce", "--config", str(lab.config), *map(str, args)],
                       cwd=REPO, input=stdin, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_keyed_records_go_to_murmur2_partitions_and_consume_reads_them_back(lab):
    lines = "".join(f"user-{i}:event-{i}\n" for i in range(30))
    r = produce(lab, "--topic", TOPIC, "--key-separator", ":", "--acks", "all", "--verbose", stdin=lines)
    placed = [line.split("@")[0].rsplit("-", 1)[1] for line in r.stdout.splitlines()]
    assert [int(p) for p in placed] == [to_positive(murmur2(f"user-{i}".encode())) % 3 for i in range(30)]
    got = lab.ok("consume", "--topic", TOPIC, "--from-beginning", "--max-messages", 30, "--print-key",
                 "--key-separator", ":").stdout.splitlines()
    assert sorted(got) == sorted(f"user-{i}:event-{i}" for i in range(30))
    # one partition from an offset
    p0 = [f"event-{i}" for i in range(30) if to_positive(murmur2(f"user-{i}".encode())) % 3 == 0]
    tail = lab.ok("consume", "--topic", TOPIC, "--partition", 0, "--offset", 2, "--max-messages", len(p0) - 2,
                  "--json").stdout.splitlines()
    assert [json.loads(x)["value"] for x in tail] == p0[2:]
    assert [json.loads(x)["offset"] for x in tail] == list(range(2, len(p0)))


def test_topics_describe_shows_each_replicas_leo_and_the_hw(lab):
    produce(lab, "--topic", TOPIC, "--partition", 1, "a", "b", "c")

    def settled():
        doc = json.loads(lab.ok("topics", "--describe", "--topic", TOPIC, "--json").stdout)[0]
        p = doc["partitions"][1]
        leos = set(p["leo"].values())
        return p if len(p["leo"]) == 3 and len(leos) == 1 and p["high_watermark"] == leos.pop() else None
    p = wait_for(settled, 30, "every replica of lab-1 at the HW")
    assert p["high_watermark"] >= 3
    line = next(x for x in lab.ok("topics", "--describe", "--topic", TOPIC).stdout.splitlines()
                if "\tPartition: 1\t" in x)
    hw = p["high_watermark"]
    assert f"\tHw: {hw}\tLeo: " + ",".join(f"{b}={hw}" for b in p["replicas"]) in line, line


def test_consumer_groups_list_describe_reset_and_delete(lab):
    produce(lab, "--topic", TOPIC, "--partition", 2, *[f"g{i}" for i in range(5)])
    ends = json.loads(lab.ok("topics", "--describe", "--topic", TOPIC, "--json").stdout)[0]["partitions"]
    total = sum(p["high_watermark"] for p in ends)
    r = lab.ok("console-consumer", "--group", "lab-group", "--topic", TOPIC, "--from-beginning",
               "--max-messages", total, "--timeout-ms", 60000)
    assert len(r.stdout.splitlines()) == total and "# assigned" in r.stderr, r.stderr
    assert "lab-group" in lab.ok("consumer-groups", "--list").stdout.split()
    d = json.loads(lab.ok("consumer-groups", "--describe", "--group", "lab-group", "--json").stdout)
    assert d["state"] == "Empty" and d["members"] == []  # the consumer left when it stopped
    assert d["coordinator"] in (1, 2, 3)
    offsets = {o["partition"]: o for o in d["offsets"]}
    assert sorted(offsets) == [0, 1, 2]
    for p, o in offsets.items():
        assert o["current_offset"] == o["log_end_offset"] == ends[p]["high_watermark"] and o["lag"] == 0, o
    text = lab.ok("consumer-groups", "--describe", "--group", "lab-group").stdout
    assert "CURRENT-OFFSET" in text and "LOG-END-OFFSET" in text and "LAG" in text

    dry = lab.ok("consumer-groups", "--reset-offsets", "--group", "lab-group", "--topic", TOPIC, "--to-earliest")
    assert "dry run" in dry.stdout
    assert json.loads(lab.ok("consumer-groups", "--describe", "--group", "lab-group", "--json").stdout)["offsets"] \
        == d["offsets"], "a dry run changes nothing"
    lab.ok("consumer-groups", "--reset-offsets", "--group", "lab-group", "--topic", TOPIC, "--to-earliest",
           "--execute")
    after = json.loads(lab.ok("consumer-groups", "--describe", "--group", "lab-group", "--json").stdout)
    assert all(o["current_offset"] == 0 and o["lag"] == o["log_end_offset"] for o in after["offsets"]), after
    lab.ok("consumer-groups", "--reset-offsets", "--group", "lab-group", "--topic", TOPIC, "--shift-by", 1,
           "--execute")
    shifted = json.loads(lab.ok("consumer-groups", "--describe", "--group", "lab-group", "--json").stdout)
    assert all(o["current_offset"] == 1 for o in shifted["offsets"]), shifted

    lab.ok("consumer-groups", "--delete", "--group", "lab-group")
    assert "lab-group" not in lab.ok("consumer-groups", "--list").stdout.split()
    gone = json.loads(lab.ok("consumer-groups", "--describe", "--group", "lab-group", "--json").stdout)
    assert gone["state"] == "Dead" and gone["offsets"] == []
    assert lab.ok("consumer-groups", "--describe", "--group", "lab-group").stdout.strip() == \
        "Consumer group 'lab-group' does not exist."


def test_consumer_groups_refuses_bad_requests_clearly(lab):
    r = lab.run("consumer-groups", "--describe")
    assert r.returncode == 2 and "--group is required" in r.stderr
    r = lab.run("consumer-groups", "--reset-offsets", "--group", "x", "--topic", TOPIC)
    assert r.returncode == 2 and "--to-earliest" in r.stderr
    r = lab.run("consumer-groups", "--delete", "--group", "never-existed")
    assert r.returncode == 1 and "GROUP_ID_NOT_FOUND" in r.stderr, r.stderr
    r = lab.run("produce", "--topic", "nope", "x")
    assert r.returncode == 1 and "unknown topic 'nope'" in r.stderr, r.stderr


def test_topics_describe_watch_redraws_in_place(lab):
    p = subprocess.Popen([sys.executable, "-m", "cli.main", "topics", "--describe", "--topic", TOPIC, "--watch",
                          "--interval", "0.2", "--config", str(lab.config)], cwd=REPO, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    out = ""
    fd = p.stdout.fileno()
    try:
        os.set_blocking(fd, False)
        deadline = time.monotonic() + 30
        while out.count(CLEAR) < 3 and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.5)[0]:
                out += os.read(fd, 65536).decode()
    finally:
        p.send_signal(signal.SIGINT)  # Ctrl-C ends it cleanly
        # both pipes read to the end meanwhile: a full pipe would stop the command mid-write
        os.set_blocking(fd, True)
        try:
            rest, err = p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
            raise AssertionError(f"--watch did not end 20 s after Ctrl-C; the end of its stderr: {err[-2000:]}")
        out += rest
        rc = p.returncode
    frames = [f for f in out.split(CLEAR) if f.strip()]
    assert len(frames) >= 2, out
    assert all("Hw: " in f and f"Topic: {TOPIC}" in f for f in frames[:2]), frames[:2]
    assert rc == 0
