"""The full disk of issue 53 on Kafka 2.8.2 and on kafkasim, side by side (the differential check).

On each: three brokers, broker 2 with two log directories, the first a 12 MB tmpfs; a topic with RF 3 and
min.insync.replicas 2; a librdkafka group member whose coordinator partition broker 2 leads in the tmpfs.  The
controller is paused (SIGSTOP) while the tmpfs fills, so that the log directory event notification can be read
before the controller deletes it; then the member drains the topic, committing.  Compared:

* the notification: its path's form and its JSON, byte for byte;
* every partition's state change in ZooKeeper (leader, leader epoch, ISR) across the failure;
* the coordinator's move, broker 2 staying registered, DescribeLogDirs' errors per directory;
* nothing acknowledged lost, on either.

``python tests/test_disk_failure_reference.py`` runs it and prints both sides' observations.
"""
from __future__ import annotations

import json
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
if __name__ == "__main__":
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from chaos.disks import FILLER, Tmpfs, fill   # noqa: E402
from kafkacommon.hashing import partition_for   # noqa: E402
from node.config import load_config   # noqa: E402
from util.waiting import wait_for   # noqa: E402
from zk import paths   # noqa: E402

pytestmark = [pytest.mark.kafka, pytest.mark.cluster, pytest.mark.timeout(600)]

TOPIC, OFFSETS, N_OFFSETS = "orders", "__consumer_offsets", 10


def cluster_yaml(path: Path, zk_connect: str, dirs_of_2: list[Path]) -> Path:
    from tests.conftest import write_cluster_yaml
    path.parent.mkdir(parents=True, exist_ok=True)
    write_cluster_yaml(path, zk_connect, 3, **{
        "group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": N_OFFSETS,
        "min.insync.replicas": 2, "zookeeper.session.timeout.ms": 30000})
    doc = yaml.safe_load(path.read_text())
    doc.pop("kafkasim.offsets.topic.create.grace.ms", None)
    doc["brokers"][1]["log.dirs"] = ",".join(str(d) for d in dirs_of_2)
    path.write_text(yaml.safe_dump(doc))
    return path


class Side:
    """What the check does to a cluster: kafkasim's (launcher.cluster.Cluster) or Kafka 2.8.2's
    (reference.kafka.ReferenceCluster), broker 2's directories given."""

    def __init__(self, name: str, cluster: Any, small: Path, big: Path, bootstrap: str) -> None:
        self.name, self.c, self.small, self.big, self.bootstrap = name, cluster, small, big, bootstrap

    def zk(self):
        return self.c.zk()

    def pause(self, b: int) -> None:
        if self.name == "kafka":
            self.c.pause(b)   # SIGSTOP, and wait until every thread of the JVM has stopped
        else:
            self.c.signal_broker(b, signal.SIGSTOP)

    def resume(self, b: int) -> None:
        if self.name == "kafka":
            self.c.resume(b)
        else:
            self.c.signal_broker(b, signal.SIGCONT)

    def states(self) -> dict[str, tuple[int, int, list[int]]]:
        snap = self.zk().read_snapshot()
        return {f"{t}-{p}": (s.leader, s.leader_epoch, list(s.isr)) for (t, p), (s, _v) in snap.states.items()
                if t in (TOPIC, OFFSETS)}

    def registered(self) -> list[int]:
        return sorted(self.zk().read_brokers())


def run_side(side: Side) -> dict[str, Any]:
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    obs: dict[str, Any] = {}
    admin = AdminClient({"bootstrap.servers": side.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 4, 3, config={"min.insync.replicas": "2"})],
                        operation_timeout=15)[TOPIC].result(timeout=30)
    wait_for(lambda: all((side.small / f"{TOPIC}-{p}").is_dir() or (side.big / f"{TOPIC}-{p}").is_dir()
                         for p in range(4)), 60, f"{side.name}: broker 2's replicas")
    wait_for(lambda: len([k for k in side.states() if k.startswith(TOPIC)]) == 4, 30, "the topic's states")
    obs["orders_in_small"] = sorted(p for p in range(4) if (side.small / f"{TOPIC}-{p}").is_dir())
    states = side.states()
    led = sorted(p for p in range(N_OFFSETS) if states[f"{OFFSETS}-{p}"][0] == 2
                 and (side.small / f"{OFFSETS}-{p}").is_dir())
    assert led, f"{side.name}: broker 2 leads no offsets partition in its small directory: {states}"
    group = next(f"g{i}" for i in range(100_000) if partition_for(f"g{i}", N_OFFSETS) in led)
    coordinator = partition_for(group, N_OFFSETS)
    obs["coordinator_partition"] = coordinator

    acked: set[int] = set()
    # one producer, connected to every broker before the controller is paused (a bootstrap through a paused
    # broker would stall it)
    producer = Producer({"bootstrap.servers": side.bootstrap, "acks": "all", "linger.ms": 5,
                         "message.timeout.ms": 60000})

    def produce(n: int, first: int, partitions: list[int] | None = None, flush: bool = True) -> None:
        for i in range(first, first + n):
            where = {} if partitions is None else {"partition": partitions[i % len(partitions)]}
            while True:
                try:
                    producer.produce(TOPIC, key=str(i).encode(), value=b"x" * 1000, **where,
                                     on_delivery=lambda err, msg: err is None and acked.add(int(msg.key())))
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
        if flush:
            assert producer.flush(90) == 0

    produce(20, 0)
    member = Consumer({"bootstrap.servers": side.bootstrap, "group.id": group, "enable.auto.commit": False,
                       "auto.offset.reset": "earliest", "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000})
    member.subscribe([TOPIC])
    seen: set[int] = set()

    def drain(want: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while len(seen) < want and time.monotonic() < deadline:
            msgs = [m for m in member.consume(200, 0.5) if m.error() is None]
            seen.update(int(m.key()) for m in msgs)
            if msgs:
                try:
                    member.commit(asynchronous=False)
                except KafkaException:
                    pass
        assert len(seen) >= want, f"{side.name}: consumed {len(seen)} of {want}"

    drain(20, 60)
    before = side.states()
    controller = side.zk().read_controller()
    obs["controller"] = controller
    assert controller == 1, controller
    size = fill(side.small)
    (side.small / FILLER).open("r+b").truncate(max(0, size - (64 << 10)))
    # while the controller is paused: records to broker 2's replicas in the tmpfs that broker 1 does not lead
    into = [p for p in obs["orders_in_small"] if before[f"{TOPIC}-{p}"][0] != 1] or obs["orders_in_small"]
    side.pause(controller)
    note: dict[str, Any] = {}
    try:
        produce(200, 20, into, flush=False)

        def notified() -> bool:
            producer.poll(0)
            for child in side.zk().get_children(paths.LOG_DIR_EVENT_NOTIFICATION):
                data, _stat = side.zk().get(f"{paths.LOG_DIR_EVENT_NOTIFICATION}/{child}")
                note.update(name=child, data=data.decode())
                return True
            return False
        # inside the paused controller's session (30 s): a loaded machine once took Kafka 2.8.2 over 15 s
        wait_for(notified, 25, f"{side.name}: the log dir event notification", interval=0.01)
    finally:
        side.resume(controller)
    produce(800, 220)
    obs["notification"] = note
    wait_for(lambda: side.states()[f"{OFFSETS}-{coordinator}"][0] not in (-1, 2), 60, f"{side.name}: the move")
    wait_for(lambda: not side.zk().get_children(paths.LOG_DIR_EVENT_NOTIFICATION), 30,
             f"{side.name}: the notification deleted")
    drain(1020, 120)

    def committed_all() -> bool:
        try:
            member.commit(asynchronous=False)
        except KafkaException as e:
            if e.args[0].code() != KafkaError._NO_OFFSET:
                return False
        got = member.committed([TopicPartition(TOPIC, p) for p in range(4)], timeout=10)
        return sum(tp.offset for tp in got) >= len(acked)
    wait_for(committed_all, 60, f"{side.name}: the member's commits on the new coordinator")
    member.close()
    after = side.states()
    obs["acked"] = len(acked)
    obs["consumed_all_acked"] = acked <= seen
    obs["new_coordinator"] = after[f"{OFFSETS}-{coordinator}"][0]
    obs["changes"] = {k: {"before": before[k], "after": after[k], "epoch_delta": after[k][1] - before[k][1]}
                      for k in sorted(after) if k in before and after[k] != before[k]}
    obs["registered"] = side.registered()
    from kafka.admin import KafkaAdminClient
    ka = KafkaAdminClient(bootstrap_servers=side.bootstrap)
    try:
        described = ka.describe_log_dirs(brokers=[2])
    finally:
        ka.close()
    obs["describe_log_dirs"] = {("small" if r["log_dir"] == str(side.small) else "big"): {
        "error": r["error_code"], "partitions": sorted(f"{t['name']}-{p['partition_index']}"
                                                       for t in r["topics"] for p in t["partitions"])}
        for resp in described for r in resp["log_dirs"]}
    return obs


def kafkasim_side(zk_connect: str, d: Path, small: Path):
    from launcher.cluster import Cluster
    path = cluster_yaml(d / "cluster.yaml", f"{zk_connect}/t-{uuid.uuid4().hex[:8]}", [small, d / "big"])
    c = Cluster(load_config(path), path)
    c.start_broker(1)   # the controller: not broker 2, so that it can be paused while broker 2's disk fills
    wait_for(lambda: c.view().controller_id == 1, 60, "broker 1 to be the controller")
    c.up(timeout=120)
    from tests.test_kafka_clients import controller_named   # librdkafka's admin asks the controller Metadata names
    wait_for(lambda: all(controller_named(h, p) for h, p in (b.kafka_advertised for b in c.cfg.brokers)), 30,
             "every broker's Kafka listener to name the controller")
    return c, Side("kafkasim", c, small, d / "big", ",".join("%s:%d" % b.kafka_advertised for b in c.cfg.brokers))


def kafka_side(zk_connect: str, d: Path, small: Path):
    from reference.kafka import ReferenceCluster

    class TwoDirs(ReferenceCluster):
        def properties(self, broker_id: int) -> dict[str, str]:
            props = super().properties(broker_id)
            if broker_id == 2:
                props["log.dirs"] = f"{small},{d / 'big'}"
            return props

    path = cluster_yaml(d / "cluster.yaml", f"{zk_connect}/t-{uuid.uuid4().hex[:8]}", [small, d / "big"])
    r = TwoDirs(load_config(path), config_path=path)
    r.start(1)   # the controller: not broker 2 (see kafkasim_side)
    wait_for(lambda: r.controller() == 1, 60, "reference broker 1 to be the controller")
    r.up(timeout=180)
    return r, Side("kafka", r, small, d / "big", r.bootstrap_servers)


def both(zk_connect: str, base: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for name, make in (("kafka", kafka_side), ("kafkasim", kafkasim_side)):
        d = base / name
        fs = Tmpfs(d / "small", 12 << 20).mount()
        c = None
        try:
            c, side = make(zk_connect, d, fs.target)
            out[name] = run_side(side)
        finally:
            if c is not None:
                c.down()
                c.close()
            fs.unmount()
    return out


def compare(obs: dict[str, dict[str, Any]]) -> list[str]:
    """What differs between the two sides, in words (empty: they agree on everything compared)."""
    k, s = obs["kafka"], obs["kafkasim"]
    out = []
    if k["notification"]["data"] != s["notification"]["data"]:
        out.append(f"notification JSON: kafka {k['notification']['data']} vs kafkasim {s['notification']['data']}")
    for side in (k, s):
        if not side["notification"]["name"].startswith("log_dir_event_"):
            out.append(f"notification name {side['notification']['name']}")
    for name, side in obs.items():
        if side["new_coordinator"] in (-1, 2) or 2 not in side["registered"] or not side["consumed_all_acked"]:
            out.append(f"{name}: coordinator {side['new_coordinator']}, registered {side['registered']}, "
                       f"every acknowledged record consumed: {side['consumed_all_acked']}")
        dld = side["describe_log_dirs"]
        if dld["small"]["error"] != 56 or dld["small"]["partitions"] or dld["big"]["error"] != 0:
            out.append(f"{name}: DescribeLogDirs {dld}")

    def shape(side: dict[str, Any]) -> dict[str, tuple]:
        """Each changed partition as (was 2 the leader, does 2 leave the ISR, leader epoch delta, new leader is 2)."""
        return {p: (c["before"][0] == 2, 2 in c["before"][2] and 2 not in c["after"][2], c["epoch_delta"],
                    c["after"][0] == 2) for p, c in side["changes"].items()}
    # the placements differ between the runs (which partitions broker 2 leads, and where its logs are), so
    # the changes are compared by kind: a partition broker 2 led in the tmpfs, or followed there
    kinds_k = sorted(set(shape(k).values()))
    kinds_s = sorted(set(shape(s).values()))
    if kinds_k != kinds_s:
        out.append(f"state changes by kind (led by 2, 2 leaves the ISR, epoch delta, 2 leads after): "
                   f"kafka {kinds_k} vs kafkasim {kinds_s}")
    return out


def test_a_full_disk_on_kafka_and_on_kafkasim(zookeeper, tmp_path: Path) -> None:
    obs = both(zookeeper.connect_string, tmp_path)
    print(json.dumps(obs, indent=1, default=str))
    diffs = compare(obs)
    assert not diffs, "\n".join(diffs)


if __name__ == "__main__":
    import tempfile
    from zk.server import EmbeddedZooKeeper
    base = Path(tempfile.mkdtemp(prefix="kafkasim-disk-diff-"))
    zk = EmbeddedZooKeeper(base / "zk", servers=1, tick_ms=100)
    zk.start(timeout=60)
    try:
        t0 = time.monotonic()
        observed = both(zk.connect_string, base)
        print(json.dumps(observed, indent=1, default=str))
        print("differences:", json.dumps(compare(observed), indent=1) if compare(observed) else "none")
        print(f"took {time.monotonic() - t0:.0f} s")
    finally:
        zk.stop()
