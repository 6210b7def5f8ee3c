"""The Kafka listener under a connection flood: 1,000 idle connections and 100 that trickle bytes, while a group
commits and a producer sends with acks=all.

    python bench/listener_flood.py [--seconds 15] [--rounds 2] [--idle 1000] [--trickle 100]

A real 3-broker cluster (real ZooKeeper, brokers as processes), a topic of 6 partitions (RF 3,
min.insync.replicas 2), a librdkafka producer (acks=all, idempotent, numbered records) and a librdkafka
consumer in a group that commits synchronously after every few records.  Each round runs the same workload
twice, alternately quiet and under the flood (the order alternates between rounds): the idle connections are
spread over the three brokers' listeners, each after one ApiVersions; the trickling ones send a Metadata
request one byte every 250 ms, so each is dropped once ``request.timeout.ms`` passes (``kafka_connection_closed``,
``partial_frame``) and opens again.

Printed: each phase's commit latencies (p50, p99), acks=all latencies, the brokers' RSS, and the flood's p99 of
commits as a ratio of the quiet phase's in the same round (goal: at most 2x).  Then it checks that nothing
acknowledged was lost: every acknowledged record is read back, and the group's committed offsets are the last
ones it committed.
"""
from __future__ import annotations

import argparse
import asyncio
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import TICK_MS, make_cluster, pct  # noqa: E402
from node.events import read_run_events  # noqa: E402
from zk.server import EmbeddedZooKeeper  # noqa: E402

TOPIC, GROUP, PARTITIONS = "flood-t", "flood-g", 6
TRICKLE_EVERY_S = 0.25


def frame(api_key: int, version: int, corr: int, body: bytes) -> bytes:
    head = struct.pack(">hhih", api_key, version, corr, 5) + b"flood"
    return struct.pack(">i", len(head) + len(body)) + head + body


API_VERSIONS = frame(18, 0, 1, b"")
METADATA = frame(3, 1, 2, struct.pack(">i", -1))     # Metadata v1, all topics


class Flood:
    """The idle and trickling connections, on an event loop of their own."""

    def __init__(self, addresses: list[tuple[str, int]], idle: int, trickle: int) -> None:
        self.addresses, self.idle, self.trickle = addresses, idle, trickle
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.writers: list[asyncio.StreamWriter] = []
        self.tasks: list[asyncio.Task] = []
        self.reopened = 0
        self.idle_open = 0

    def start(self) -> None:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._open_idle(), self.loop).result(120)
        for i in range(self.trickle):
            self.tasks.append(asyncio.run_coroutine_threadsafe(self._trickle(i), self.loop))

    async def _open_idle(self) -> None:
        async def one(i: int) -> None:
            host, port = self.addresses[i % len(self.addresses)]
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(API_VERSIONS)
            await writer.drain()
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            await reader.readexactly(size)
            self.writers.append(writer)
            self.idle_open += 1
        for start in range(0, self.idle, 100):      # in waves: the listeners' backlogs are 50 deep
            await asyncio.gather(*(one(i) for i in range(start, min(self.idle, start + 100))))

    async def _trickle(self, i: int) -> None:
        host, port = self.addresses[i % len(self.addresses)]
        while True:
            try:
                reader, writer = await asyncio.open_connection(host, port)
                for b in METADATA:
                    writer.write(bytes([b]))
                    await writer.drain()
                    await asyncio.sleep(TRICKLE_EVERY_S)
                    if reader.at_eof():
                        break
                writer.close()
            except (ConnectionError, OSError):
                pass
            self.reopened += 1
            await asyncio.sleep(TRICKLE_EVERY_S)

    def stop(self) -> None:
        for t in self.tasks:
            t.cancel()

        async def close() -> None:
            for w in self.writers:
                w.close()
        asyncio.run_coroutine_threadsafe(close(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def workload(bootstrap: str, seconds: float, acked: dict, committed: dict) -> tuple[list[float], list[float]]:
    """Produce numbered records (acks=all) and consume them in the group, committing synchronously every 5
    records; returns (commit latencies ms, ack latencies ms).  ``acked`` gets (partition, offset) -> value;
    ``committed`` partition -> the last offset a commit succeeded for."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 2,
                  "client.id": "flood-producer"})
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "client.id": "flood-consumer",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 10000})
    c.subscribe([TOPIC])
    commits: list[float] = []
    acks: list[float] = []
    n, seen = len(acked), 0
    deadline = time.monotonic() + seconds
    next_send = time.monotonic()
    try:
        while time.monotonic() < deadline:
            now = time.monotonic()
            while next_send <= now:       # 200 records a second
                value = b"r%d" % n
                sent = time.monotonic()

                def done(err, msg, value=value, sent=sent):
                    if err is None:
                        acked[(msg.partition(), msg.offset())] = value
                        acks.append((time.monotonic() - sent) * 1000)
                p.produce(TOPIC, value=value, on_delivery=done)
                n += 1
                next_send += 0.005
            p.poll(0)
            m = c.poll(0.01)
            if m is None or m.error() is not None:
                continue
            seen += 1
            if seen % 5 == 0:
                t0 = time.monotonic()
                if commit(c, committed):
                    commits.append((time.monotonic() - t0) * 1000)
        p.flush(30)
        commit(c, committed)
    finally:
        c.close()
    return commits, acks


def commit(consumer, committed: dict) -> bool:
    """A synchronous commit of the consumer's position; True when it was accepted."""
    from confluent_kafka import KafkaException
    try:
        tps = consumer.commit(asynchronous=False)
    except KafkaException:   # nothing new to commit, a rebalance: not a commit accepted
        return False
    for tp in tps or []:
        if tp.error is None and tp.offset >= 0:
            committed[tp.partition] = max(committed.get(tp.partition, -1), tp.offset)
    return True


def check_nothing_lost(bootstrap: str, acked: dict, committed: dict) -> tuple[int, int, dict]:
    """(acknowledged records read back, acknowledged records, the group's committed offsets now)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "flood-check", "enable.auto.commit": False})
    ends = {q: c.get_watermark_offsets(TopicPartition(TOPIC, q), timeout=10)[1] for q in range(PARTITIONS)}
    c.assign([TopicPartition(TOPIC, q, 0) for q in range(PARTITIONS)])
    got: dict = {}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and any(
            max([o for (q2, o) in got if q2 == q], default=-1) + 1 < ends[q] for q in range(PARTITIONS)):
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            got[(m.partition(), m.offset())] = m.value()
    g = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    now = {tp.partition: tp.offset for tp in g.committed([TopicPartition(TOPIC, q) for q in range(PARTITIONS)],
                                                          timeout=20)}
    g.close()
    c.close()
    found = sum(1 for k, v in acked.items() if got.get(k) == v)
    return found, len(acked), now


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=15.0, help="each phase's length")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--idle", type=int, default=1000)
    ap.add_argument("--trickle", type=int, default=100)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kafkasim-bench-") as tmp, \
            EmbeddedZooKeeper(Path(tmp) / "zk", tick_ms=TICK_MS) as zk:
        c = make_cluster(zk, Path(tmp), 10, **{"zookeeper.session.timeout.ms": 6000, "request.timeout.ms": 5000,
                                               "group.initial.rebalance.delay.ms": 0})
        try:
            from confluent_kafka.admin import AdminClient, NewTopic
            addresses = [b.kafka_advertised for b in c.cfg.brokers]
            bootstrap = ",".join(f"{h}:{p}" for h, p in addresses)
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})],
                                operation_timeout=30)[TOPIC].result(60)
            acked: dict = {}
            committed: dict = {}
            ratios = []
            print(f"flood: {args.idle} idle connections, {args.trickle} trickling (a byte every "
                  f"{TRICKLE_EVERY_S * 1000:.0f} ms, dropped after request.timeout.ms 5000); phases of {args.seconds:.0f} s")
            for r in range(args.rounds):
                order = ["quiet", "flood"] if r % 2 == 0 else ["flood", "quiet"]
                p99 = {}
                for phase in order:
                    flood = Flood(addresses, args.idle, args.trickle) if phase == "flood" else None
                    if flood:
                        flood.start()
                    rss0 = {b: rss_mb(pid) for b, pid in c.pids.items()}
                    commits, acks = workload(bootstrap, args.seconds, acked, committed)
                    rss1 = {b: rss_mb(pid) for b, pid in c.pids.items()}
                    extra = ""
                    if flood:
                        extra = f"; idle open {flood.idle_open}, trickling reopened {flood.reopened}"
                        flood.stop()
                    p99[phase] = pct(commits, 0.99)
                    print(f"round {r + 1} {phase:5s}: commits p50 {pct(commits, 0.5):6.1f} ms p99 {p99[phase]:6.1f} ms "
                          f"(n={len(commits)}); acks=all p50 {pct(acks, 0.5):6.1f} ms p99 {pct(acks, 0.99):6.1f} ms "
                          f"(n={len(acks)}); broker RSS {' '.join(f'{rss1[b]:.0f}' for b in sorted(rss1))} MB "
                          f"(+{max(rss1[b] - rss0[b] for b in rss1):.0f}){extra}")
                ratios.append(p99["flood"] / p99["quiet"])
                print(f"round {r + 1}: flood p99 / quiet p99 = {ratios[-1]:.2f}x (goal <= 2.0x)")
            closed = [e for e in read_run_events(c.run_dir) if e["type"] == "kafka_connection_closed"]
            reasons: dict[str, int] = {}
            for e in closed:
                reasons[e["reason"]] = reasons.get(e["reason"], 0) + 1
            print(f"connections closed by the listeners: {reasons}")
            found, total, now = check_nothing_lost(bootstrap, acked, committed)
            lost_commits = {q: (committed[q], now.get(q)) for q in committed if now.get(q, -1) < committed[q]}
            print(f"acknowledged records read back: {found} of {total}; committed offsets lost: "
                  f"{lost_commits or 'none'}")
            print(f"commit p99 under the flood: {', '.join(f'{x:.2f}x' for x in ratios)} the quiet phase's "
                  f"(goal <= 2.0x: {'met' if max(ratios) <= 2.0 else 'missed'})")
            return 0 if found == total and not lost_commits else 1
        finally:
            c.down()


if __name__ == "__main__":
    sys.exit(main())
