"""Real Kafka clients through a coordinator failover: confluent-kafka, kafka-python, aiokafka and kafkajs
members commit while their groups' coordinator is SIGKILLed, then SIGTERMed (docs/kafka-listener.md's
compatibility matrix).  Its own 3-broker cluster: the faults leave nothing behind for
tests/test_kafka_clients.py's tests.
"""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from launcher.cluster import Cluster
from util.waiting import wait_for
from tests.helpers import events
from tests.test_kafka_clients import bootstrap, create_topic, kafka_cluster, kafka_events

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from kafka_cluster(zookeeper, tmp_path_factory, "kafka-failover")


FAILOVER_CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka", "kafkajs")


def same_coordinator_groups(n: int, partitions: int = 10) -> list[str]:
    """``n`` group ids whose offsets live on one __consumer_offsets partition (one coordinator)."""
    from kafkacommon.hashing import partition_for
    target = partition_for("fo-0", partitions)
    return [g for g in (f"fo-{i}" for i in range(1000)) if partition_for(g, partitions) == target][:n]


class Member:
    """One client's group member in a thread: consumes, commits its position after every poll, and
    keeps the commits its client acknowledged (the commit callback, or the awaited commit) as
    (mono_ns, partition, offset)."""

    def __init__(self, kind: str, group: str, bs: str) -> None:
        import threading
        self.kind, self.group, self.bs = kind, group, bs
        self.client_id = f"fo-{kind}"
        self.acks: list[tuple[int, int, int]] = []
        self.consumed = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=getattr(self, "run_" + kind.replace("-", "_")), daemon=True)
        self.thread.start()

    def acked(self, partition: int, offset: int) -> None:
        import time
        self.acks.append((time.monotonic_ns(), partition, offset))

    def run_confluent_kafka(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        def on_commit(err, tps) -> None:
            for tp in tps if err is None else ():
                if tp.error is None:
                    self.acked(tp.partition, tp.offset)
        c = Consumer({"bootstrap.servers": self.bs, "group.id": self.group, "client.id": self.client_id,
                      "enable.auto.commit": False, "auto.offset.reset": "earliest", "on_commit": on_commit,
                      "session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
        c.subscribe(["fo-t"])
        pos: dict[int, int] = {}
        try:
            while not self.stop.is_set():
                m = c.poll(0.05)
                if m is not None and m.error() is None:
                    self.consumed += 1
                    pos[m.partition()] = m.offset() + 1
                    c.commit(offsets=[TopicPartition("fo-t", p, o) for p, o in pos.items()], asynchronous=True)
        finally:
            c.close()

    def run_kafka_python(self) -> None:
        from kafka import KafkaConsumer, OffsetAndMetadata

        def on_commit(offsets, result) -> None:
            if not isinstance(result, BaseException):
                for tp, om in offsets.items():
                    self.acked(tp.partition, om.offset)
        c = KafkaConsumer("fo-t", bootstrap_servers=self.bs, group_id=self.group, client_id=self.client_id,
                          enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=6000,
                          heartbeat_interval_ms=300, request_timeout_ms=5000)
        c.partitions_for_topic("fo-t")   # the topic's metadata before the first join: docs/kafka-listener.md
        try:
            while not self.stop.is_set():
                got = c.poll(timeout_ms=50)
                pos = {tp: recs[-1].offset + 1 for tp, recs in got.items() if recs}
                self.consumed += sum(len(r) for r in got.values())
                if pos:
                    c.commit_async({tp: OffsetAndMetadata(o, "", -1) for tp, o in pos.items()}, callback=on_commit)
        finally:
            c.close()

    def run_aiokafka(self) -> None:
        import asyncio
        from aiokafka import AIOKafkaConsumer

        async def run() -> None:
            c = AIOKafkaConsumer("fo-t", bootstrap_servers=self.bs, group_id=self.group, client_id=self.client_id,
                                 enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=6000,
                                 heartbeat_interval_ms=300, request_timeout_ms=5000)
            await c.start()
            try:
                while not self.stop.is_set():
                    got = await c.getmany(timeout_ms=50)
                    pos = {tp: recs[-1].offset + 1 for tp, recs in got.items() if recs}
                    self.consumed += sum(len(r) for r in got.values())
                    if pos:
                        try:
                            await c.commit(pos)
                        except Exception:
                            await asyncio.sleep(0.05)   # not acknowledged: not recorded; the next poll retries
                            continue
                        for tp, o in pos.items():
                            self.acked(tp.partition, o)
            finally:
                await c.stop()
        asyncio.run(run())

    def run_kafkajs(self) -> None:
        """tests/js/failover.js: its "ack PARTITION OFFSET" lines are the commits kafkajs resolved."""
        import threading
        js = Path(__file__).parent / "js"
        proc = subprocess.Popen(["node", str(js / "failover.js"), self.bs, "fo-t", self.group, self.client_id],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=js,
                                text=True)

        def close() -> None:
            self.stop.wait()
            proc.stdin.close()   # the script leaves the group and exits
        threading.Thread(target=close, daemon=True).start()
        try:
            for line in proc.stdout:
                what, partition, offset = line.split()
                if what == "ack":
                    self.consumed += 1
                    self.acked(int(partition), int(offset))
        finally:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)

    def last_acked(self, before_ns: int | None = None) -> dict[int, int]:
        out: dict[int, int] = {}
        for t, p, o in list(self.acks):
            if before_ns is None or t < before_ns:
                out[p] = max(out.get(p, -1), o)
        return out


def test_coordinator_sigkill_then_sigterm_loses_no_acknowledged_commit(cluster: Cluster) -> None:
    """confluent-kafka, kafka-python, aiokafka and kafkajs members, one group each on one coordinator,
    consume and commit while the coordinator is SIGKILLed, then (the broker back) SIGTERMed: each
    client's commits are accepted by the new coordinator, its consumption goes on, and the group's
    committed offsets never fall below a commit its client acknowledged before the fault.  (kcat
    cannot be a committing member that reports its commits: docs/kafka-listener.md.)"""
    import signal
    import threading
    import time
    from confluent_kafka import Producer
    from client.admin import GroupAdmin
    from client.metadata import ClusterClient
    create_topic(cluster, "fo-t", partitions=2)
    groups = dict(zip(FAILOVER_CLIENTS, same_coordinator_groups(len(FAILOVER_CLIENTS))))
    stop = threading.Event()
    p = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all", "enable.idempotence": True,
                  "client.id": "fo-producer", "linger.ms": 5})

    def produce() -> None:
        i = 0
        while not stop.is_set():
            p.produce("fo-t", key=b"k%d" % i, value=b"v%d" % i)
            p.poll(0.02)
            i += 1
        p.flush(30)
    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    cc = ClusterClient([f"{b.host}:{b.port}" for b in cluster.cfg.brokers])
    admin = GroupAdmin(cc)
    admin.coordinator(groups["confluent-kafka"])   # __consumer_offsets created and its partition loaded
    members = [Member(kind, g, bootstrap(cluster)) for kind, g in groups.items()]

    def committed(group: str) -> dict[int, int]:
        """The group's committed offsets through OffsetFetch at its (new) coordinator."""
        return {p: o for (t, p), o in admin.committed(group).items() if t == "fo-t"}

    try:
        try:
            wait_for(lambda: all(len(m.acks) >= 3 for m in members), 60, "every member committing")
        except Exception:
            raise AssertionError(f"acknowledged commits per client: {[(m.kind, len(m.acks)) for m in members]}")
        for sig in (signal.SIGKILL, signal.SIGTERM):
            old = admin.coordinator(groups["confluent-kafka"])[0]
            t0 = time.monotonic_ns()
            before = {m.kind: m.last_acked(t0) for m in members}
            cluster.signal_broker(old, sig)

            def resumed(m: Member) -> bool:
                """A commit past the fault's positions, accepted by another broker and acknowledged."""
                first = next((e["mono_ns"] for e in kafka_events(cluster) if e["api"] == "OffsetCommit"
                              and e["client_id"] == m.client_id and e["error"] is None and e["broker"] != old
                              and e["mono_ns"] > t0), None)
                return first is not None and any(
                    t > first and o > before[m.kind].get(p, -1) for t, p, o in list(m.acks))
            for m in members:
                wait_for(lambda: resumed(m), 60, f"{m.kind}'s commits on the new coordinator after {sig.name}")
            for m in members:
                got = committed(m.group)
                lost = {p: (o, got.get(p)) for p, o in before[m.kind].items() if got.get(p, -1) < o}
                assert not lost, f"{m.kind} after {sig.name}: acknowledged commits lost: {lost}"
            cluster.wait_exit(old, timeout=30)
            cluster.start_broker(old)
            cluster.wait_ready(90)
    finally:
        stop.set()
        for m in members:
            m.stop.set()
        for t in [producer] + [m.thread for m in members]:
            t.join(20)
        cc.close()
    assert all(m.consumed > 0 for m in members)


def test_coordinator_sigterm_answers_parked_join_not_coordinator_before_closing(cluster: Cluster) -> None:
    """A controlled shutdown of a group's coordinator, on the wire (conformance/unload_wire.py): the parked
    JoinGroup is answered NOT_COORDINATOR before its connection closes, as Kafka 2.8.2 answers it (its
    LeaderAndIsr unloads the partition before the socket server stops); the other connections get only
    their usual answers or NOT_COORDINATOR, then the close."""
    import signal
    from conformance.unload_wire import NOT_COORDINATOR, REBALANCE_IN_PROGRESS, probe
    listeners = {b.id: b.kafka_advertised for b in cluster.cfg.brokers}
    p = probe(listeners, cluster.signal_broker, signal.SIGTERM, cluster.cfg.get("offsets.topic.num.partitions"),
              prefix="unload-wire")
    try:
        assert [a.error for a in p.answers["B"]] == [NOT_COORDINATOR, "closed"], p.describe()
        for conn, usual in (("heartbeat", REBALANCE_IN_PROGRESS), ("commit", 0)):
            errs = [a.error for a in p.answers[conn]]
            assert errs[-1] == "closed" and set(errs[:-1]) <= {usual, NOT_COORDINATOR}, p.describe()
        assert p.answers["findcoordinator"][-1].error == "closed", p.describe()
        handover = events(cluster, p.coordinator, "controlled_shutdown_handover")
        assert handover and handover[-1]["settled"], handover
    finally:
        cluster.wait_exit(p.coordinator, timeout=30)
        cluster.start_broker(p.coordinator)
        cluster.wait_ready(90)

