"""A full disk on a real cluster (issue 53): broker 2's log directory on a small tmpfs, acks=all records to a
topic with RF 3 and min.insync.replicas 2, and a librdkafka group member whose coordinator partition broker 2
leads in that directory.

* Two directories: the full one goes offline (``log_dir_failed``), broker 2 writes the ZooKeeper notification,
  the controller learns which replicas it lost (``replicas_offline``) and moves their leaderships, the group's
  coordinator loads elsewhere; broker 2 keeps serving its other directory; no acknowledged record or commit is
  lost; DescribeLogDirs reports the offline directory (kafka-python's admin, and Kafka 2.8.2's LogDirsCommand).
* One directory: broker 2 halts (exit status 1), its registration goes with its session, and it comes back
  once the disk is freed and it is started again.

And the pattern behind the issue: no thread of broker 2 died (no ``thread_died``, no traceback in its log),
its fetcher keeps its other replicas in sync and its HW checkpoints go on.  Mounts need root (the CI's and this
machine's user); every mount is undone, whatever happens.
"""
from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from chaos.disks import FILLER, Tmpfs, fill, free
from helpers import events, offsets_partitions
from kafkacommon.hashing import partition_for
from launcher.cluster import Cluster, process_state
from node.config import load_config
from tests.conftest import write_cluster_yaml
from tests.test_kafka_clients import controller_named
from util.waiting import wait_for
from zk import paths

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

TOPIC = "orders"
OFFSETS = "__consumer_offsets"
VALUE = b"x" * 1000


def start_cluster(zookeeper, d: Path, dirs_of_2: list[Path]) -> Cluster:
    d.mkdir(parents=True, exist_ok=True)
    path = write_cluster_yaml(d / "cluster.yaml", f"{zookeeper.connect_string}/t-{uuid.uuid4().hex[:12]}", 3, **{
        "group.initial.rebalance.delay.ms": 0, "replica.high.watermark.checkpoint.interval.ms": 500,
        "min.insync.replicas": 2, "replica.lag.time.max.ms": 3000})
    doc = yaml.safe_load(path.read_text())
    doc["brokers"][1]["log.dirs"] = ",".join(str(p) for p in dirs_of_2)
    path.write_text(yaml.safe_dump(doc))
    c = Cluster(load_config(path), path)
    c.up(timeout=90)
    # librdkafka's admin sends CreateTopics to the controller Metadata names, and does not soon ask again when
    # a listener names none yet (tests/test_kafka_clients.py)
    wait_for(lambda: all(controller_named(h, p) for h, p in (b.kafka_advertised for b in c.cfg.brokers)), 30,
             "every broker's Kafka listener to name the controller")
    return c


def bootstrap(c: Cluster) -> str:
    return ",".join(f"{h}:{p}" for h, p in (b.kafka_advertised for b in c.cfg.brokers))


def leave_room(fs: Path, room: int) -> None:
    """Fill the filesystem, then give back ``room`` bytes."""
    size = fill(fs)
    os.truncate(fs / FILLER, max(0, size - room))


def produce(c: Cluster, n: int, first: int = 0) -> list[int]:
    """``n`` records of 1 KB, acks=all, through librdkafka; the ids acknowledged."""
    from confluent_kafka import Producer
    acked: list[int] = []
    p = Producer({"bootstrap.servers": bootstrap(c), "acks": "all", "linger.ms": 5, "message.timeout.ms": 60000})

    def done(err, msg) -> None:
        if err is None:
            acked.append(int(msg.key()))
    for i in range(first, first + n):
        while True:
            try:
                p.produce(TOPIC, key=str(i).encode(), value=VALUE, on_delivery=done)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    assert p.flush(90) == 0
    return acked


def read_all(c: Cluster, partitions: int) -> set[int]:
    """Every record of the topic, up to each partition's high watermark."""
    from confluent_kafka import Consumer, TopicPartition
    cons = Consumer({"bootstrap.servers": bootstrap(c), "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                     "enable.auto.commit": False})
    got: set[int] = set()
    try:
        for p in range(partitions):
            _lo, hi = cons.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=20)
            cons.assign([TopicPartition(TOPIC, p, 0)])
            pos = 0
            deadline = time.monotonic() + 60
            while pos < hi and time.monotonic() < deadline:
                for m in cons.consume(500, 1.0):
                    if m.error() is None:
                        got.add(int(m.key()))
                        pos = m.offset() + 1
            assert pos >= hi, f"{TOPIC}-{p}: read up to {pos} of {hi}"
    finally:
        cons.close()
    return got


def group_on(c: Cluster, broker: int, in_dir: Path) -> tuple[str, int]:
    """A group whose coordinator partition ``broker`` leads, with its log in ``in_dir``."""
    parts = offsets_partitions(c.view())
    n = len(parts)
    led = sorted(p for p, s in parts.items() if s["leader"] == broker and (in_dir / f"{OFFSETS}-{p}").is_dir())
    assert led, f"broker {broker} leads no offsets partition in {in_dir}"
    group = next(f"g{i}" for i in range(100_000) if partition_for(f"g{i}", n) in led)
    return group, partition_for(group, n)


def broker_log(c: Cluster, b: int) -> str:
    return (c.run_dir / "logs" / f"broker-{b}.log").read_text(errors="replace")


def no_thread_died(c: Cluster, b: int) -> None:
    text = broker_log(c, b)
    assert "Traceback" not in text and "Exception in thread" not in text, text[-3000:]
    assert "checkpoint_hws failed" not in text, text[-3000:]
    assert not events(c, b, "thread_died") and not events(c, b, "fetcher_error")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    fs = Tmpfs(tmp_path / "small", 12 << 20).mount()
    try:
        yield fs.target
    finally:
        fs.unmount()


@pytest.fixture(scope="module")
def two_dirs(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Path, Path]]:
    """Broker 2 with a 12 MB tmpfs and a plain directory, the topic created (4 partitions, RF 3, min ISR 2)."""
    from confluent_kafka.admin import AdminClient, NewTopic
    d = tmp_path_factory.mktemp("two-dirs")
    fs = Tmpfs(d / "small", 12 << 20).mount()
    small, big = fs.target, d / "big"
    c = None
    try:
        c = start_cluster(zookeeper, d / "c", [small, big])
        admin = AdminClient({"bootstrap.servers": bootstrap(c)})
        admin.create_topics([NewTopic(TOPIC, 4, 3, config={"min.insync.replicas": "2"})],
                            operation_timeout=15)[TOPIC].result(timeout=30)
        wait_for(lambda: all((small / f"{TOPIC}-{p}").is_dir() or (big / f"{TOPIC}-{p}").is_dir()
                             for p in range(4)), 30, "broker 2's replicas of the topic")
        yield c, small, big
    finally:
        if c is not None:
            c.down()
        fs.unmount()


def test_a_full_directory_goes_offline_the_coordinator_moves_and_nothing_acknowledged_is_lost(two_dirs) -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
    c, small_disk, big = two_dirs
    # Kafka's placement: a new log goes to the directory with the fewest, so both hold some of each topic
    wait_for(lambda: all((small_disk / f"{TOPIC}-{p}").is_dir() or (big / f"{TOPIC}-{p}").is_dir()
                         for p in range(4)), 30, "broker 2's replicas of the topic")
    on = {d: sorted(p for p in range(4) if (d / f"{TOPIC}-{p}").is_dir()) for d in (small_disk, big)}
    assert on[small_disk] and on[big] and sorted(on[small_disk] + on[big]) == [0, 1, 2, 3], on
    group, coordinator = group_on(c, 2, small_disk)

    acked = set(produce(c, 20))
    member = Consumer({"bootstrap.servers": bootstrap(c), "group.id": group, "enable.auto.commit": False,
                       "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                       "heartbeat.interval.ms": 1000})
    member.subscribe([TOPIC])
    consumed: set[int] = set()
    committed: dict[int, int] = {}

    def poll_and_commit() -> list:
        msgs = [m for m in member.consume(200, 0.5) if m.error() is None]
        consumed.update(int(m.key()) for m in msgs)
        if msgs:
            try:   # a commit the coordinator acknowledged: it must survive the coordinator's move
                for tp in member.commit(asynchronous=False):
                    if tp.error is None and tp.offset >= 0:
                        committed[tp.partition] = tp.offset
            except KafkaException:
                pass   # NOT_COORDINATOR while it moves: commit again after the next poll
        return msgs

    def drained(ends: dict[int, int]) -> bool:
        poll_and_commit()
        pos = {tp.partition: tp.offset for tp in member.position([TopicPartition(TOPIC, p) for p in range(4)])}
        return all(pos.get(p, -1) >= end for p, end in ends.items())

    def high_watermarks() -> dict[int, int]:
        return {p: member.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=20)[1] for p in range(4)}

    wait_for(lambda: drained(high_watermarks()) and committed, 60, "the member's first records and commit")
    leave_room(small_disk, 256 << 10)
    acked |= set(produce(c, 1000, first=20))
    assert len(acked) == 1020   # RF 3, min.insync.replicas 2: brokers 1 and 3 take every write

    wait_for(lambda: events(c, 2, "log_dir_failed"), 30, "broker 2's full directory to go offline")
    (failed,) = events(c, 2, "log_dir_failed")
    assert failed["dir"] == str(small_disk) and not failed["halting"] and failed["online_dirs"] == [str(big)]
    assert "No space left on device" in failed["error"], failed
    assert f"{OFFSETS}-{coordinator}" in failed["replicas"]
    wait_for(lambda: events(c, 2, "log_dir_event_notified"), 30, "the ZooKeeper notification")
    wait_for(lambda: offsets_partitions(c.view())[coordinator]["leader"] not in (-1, 2), 30,
             "the group's coordinator partition to move")
    offline = [e for e in events(c, None, "replicas_offline") if e["broker_id"] == 2]
    assert offline and f"{OFFSETS}-{coordinator}" in offline[0]["replicas"]
    zk = c.zk()
    wait_for(lambda: not zk.get_children(paths.LOG_DIR_EVENT_NOTIFICATION), 30,
             "the controller to delete the notification")
    new_coordinator = offsets_partitions(c.view())[coordinator]["leader"]
    wait_for(lambda: events(c, new_coordinator, "coordinator_loaded", partition=coordinator), 30,
             "the new coordinator's load")

    # the member drains the topic, committing on the new coordinator.  Up to each high watermark: a batch
    # acknowledged KAFKA_STORAGE_ERROR by a leader whose directory failed after appending it may have been
    # replicated, and is then in the log twice once the producer retried it (at least once, as in Kafka)
    # (KAFKA_STORAGE_ERROR, retriable, until the client's metadata names the partitions' new leaders)
    ends = wait_for(high_watermarks, 30, "every partition's high watermark from its live leader")
    wait_for(lambda: drained(ends), 90, "the member to drain the topic")

    def commit_positions() -> bool:
        try:
            return all(tp.error is None for tp in member.commit(asynchronous=False))
        except KafkaException as e:   # _NO_OFFSET: nothing new since the last commit, which succeeded
            return e.args[0].code() == KafkaError._NO_OFFSET
    wait_for(commit_positions, 30, "the member's last commit")
    final = {tp.partition: tp.offset for tp in member.committed([TopicPartition(TOPIC, p) for p in range(4)],
                                                                timeout=20)}
    assert all(final[p] >= committed.get(p, -1) for p in range(4)), (final, committed)   # no commit lost
    assert final == ends, (final, ends)
    member.close()
    assert acked <= consumed and acked <= read_all(c, 4)   # no acknowledged record lost

    # broker 2 runs on, serving its other directory: its replicas there stay in their ISRs
    assert c.processes()[2]["state"] != "dead" and 2 in c.view().brokers
    for p in on[big]:
        assert 2 in c.view().partition(TOPIC, p)["isr"], (p, c.view().partition(TOPIC, p))
    for p in on[small_disk]:
        assert 2 not in c.view().partition(TOPIC, p)["isr"]
    after = (big / "replication-offset-checkpoint").stat().st_mtime_ns
    wait_for(lambda: (big / "replication-offset-checkpoint").stat().st_mtime_ns > after, 10,
             "the other directory's HW checkpoint to go on")
    no_thread_died(c, 2)

    # DescribeLogDirs: the offline directory with KAFKA_STORAGE_ERROR, the other with its replicas
    from kafka.admin import KafkaAdminClient
    ka = KafkaAdminClient(bootstrap_servers=bootstrap(c))
    try:
        described = ka.describe_log_dirs(brokers=[2])
    finally:
        ka.close()
    assert [r["broker"] for r in described] == [2]
    dirs = _log_dirs(described)
    assert dirs[str(small_disk)][0] == 56 and dirs[str(small_disk)][1] == {}
    assert dirs[str(big)][0] == 0 and set(dirs[str(big)][1][TOPIC]) == set(on[big])


@pytest.mark.kafka
def test_kafkas_log_dirs_command_shows_the_offline_directory(two_dirs) -> None:
    """Kafka 2.8.2's kafka-log-dirs (LogDirsCommand, from the jar cache) on DescribeLogDirs."""
    import json as json_
    from reference.javaclient import run_alone
    c, small, big = two_dirs
    if not events(c, 2, "log_dir_failed"):   # run alone: fail the small directory first
        leave_room(small, 64 << 10)
        produce(c, 300)
        wait_for(lambda: events(c, 2, "log_dir_failed"), 30, "broker 2's full directory to go offline")
    r = run_alone("kafka-log-dirs", ["--bootstrap-server", bootstrap(c), "--describe", "--broker-list", "2"])
    assert r.rc == 0, r
    doc = json_.loads(next(line for line in r.out.splitlines() if line.startswith("{")))
    (broker,) = doc["brokers"]
    dirs = {d["logDir"]: d for d in broker["logDirs"]}
    assert broker["broker"] == 2 and set(dirs) == {str(small), str(big)}, doc
    assert dirs[str(small)]["error"] == "org.apache.kafka.common.errors.KafkaStorageException" and dirs[str(small)]["partitions"] == [], doc
    assert dirs[str(big)]["error"] is None and dirs[str(big)]["partitions"], doc
    assert all(p["size"] >= 0 and not p["isFuture"] for p in dirs[str(big)]["partitions"]), doc


def _log_dirs(described: list[dict]) -> dict[str, tuple[int, dict[str, dict[int, int]]]]:
    """kafka-python's answer (``[{"broker", "log_dirs": [result.to_dict()]}]``) as {dir: (error, {topic:
    {partition: size}})}."""
    return {r["log_dir"]: (r["error_code"], {t["name"]: {p["partition_index"]: p["partition_size"]
                                                         for p in t["partitions"]} for t in r["topics"]})
            for resp in described for r in resp["log_dirs"]}


def test_the_last_directory_failing_halts_the_broker_and_its_session_takes_its_registration(
        zookeeper, tmp_path: Path, small_disk: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    c = start_cluster(zookeeper, tmp_path / "c", [small_disk])
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(c)})   # kept: its futures die with it
        admin.create_topics([NewTopic(TOPIC, 2, 3, config={"min.insync.replicas": "2"})],
                            operation_timeout=15)[TOPIC].result(timeout=30)
        wait_for(lambda: len(c.view().topics.get(TOPIC, {}).get("partitions", {})) == 2
                 and all(s["leader"] >= 0 for s in c.view().topics[TOPIC]["partitions"].values()), 30, "the topic")
        led = [p for p, s in offsets_partitions(c.view()).items() if s["leader"] == 2]
        pid = c.processes()[2]["pid"]
        leave_room(small_disk, 256 << 10)
        acked = set(produce(c, 600))
        assert len(acked) == 600
        wait_for(lambda: process_state(pid) == "dead", 30, "broker 2 to halt")
        assert os.waitpid(pid, 0)[1] >> 8 == 1   # Kafka's Exit.halt(1)
        (failed,) = events(c, 2, "log_dir_failed")
        assert failed["halting"] and failed["online_dirs"] == []
        assert events(c, 2, "broker_halted") and not events(c, 2, "log_dir_event_notified")
        assert not events(c, 2, "broker_stopping")   # no controlled shutdown: a halt
        wait_for(lambda: 2 not in c.view().brokers, 30, "broker 2's session to expire")
        wait_for(lambda: all(offsets_partitions(c.view())[p]["leader"] not in (-1, 2) for p in led), 30,
                 "its coordinator partitions to move")
        assert acked <= read_all(c, 2)
        assert "Traceback" not in broker_log(c, 2) and not events(c, 2, "thread_died")
        free(small_disk)   # the heal: free the space, start it again
        c.start_broker(2)
        wait_for(lambda: 2 in c.view().brokers and all(
            2 in s["isr"] for s in c.view().topics[TOPIC]["partitions"].values()), 60, "broker 2 back in the ISRs")
    finally:
        c.down()
