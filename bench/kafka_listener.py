"""The Kafka listener with real clients (librdkafka), each figure against a baseline from the same run.

    python bench/kafka_listener.py [--records 200000] [--requests 1000] [--fetch-mb 200] [--runs 3]
                                   [--quick] [--json]

One cluster of 3 real broker processes (one real ZooKeeper, tick 100 ms,
session timeout 1 s, controlled shutdown on), each with its Kafka listener:

  produce     100-byte records to a topic of 1 partition, RF 3,
              min.insync.replicas 2, acks=all: confluent-kafka (linger.ms 5,
              otherwise librdkafka's defaults) through the listener, against
              kafkasim's own gRPC producer (client/producer.py) at its best
              batch size of 100 / 1,000 / 5,000 / 8,000 records per request.  Goal >= 2x.
  latency     one 100-byte record at a time, acks=all, nothing else in flight:
              confluent-kafka produce + flush (linger.ms 0) against
              client/producer.py's send_batch of one record.  p50 goal <= 1.1x.
  fetch       a topic of --fetch-mb MB (1 partition, RF 1: only the leader's
              read path is measured; 1,000-byte records) read from offset 0 to
              the end by a confluent-kafka Consumer (consume() in batches of
              10,000; librdkafka's default fetch sizes), against reading the
              same segment files with plain Python file reads (1 MiB at a
              time, from the page cache).  Both are MB/s of segment bytes.
              Goal >= 0.3x.  Reported besides: a second consumer tuned for
              throughput (max.partition.fetch.bytes 16 MiB, TUNED_FETCH).
  failover    two groups whose offsets land on the same __consumer_offsets
              partition (so one coordinator): one confluent-kafka Consumer
              member committing synchronously after every poll, and one
              kafkasim GroupMember (client/group.py) doing the same.  The
              coordinator gets SIGTERM; the figure per client is the time from
              the signal to its first commit accepted by the new coordinator
              (librdkafka's: the first OffsetCommit without error on another
              broker in the kafka_request events; GroupMember's: the first
              acknowledged commit whose coordinator is another broker).  The
              old broker is restarted between runs.
"""
from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer as CConsumer, KafkaException, Producer as CProducer, TopicPartition  # noqa: E402

from bench.common import TICK_MS, make_cluster, pct  # noqa: E402
from client.admin import GroupAdmin  # noqa: E402
from client.group import GroupMember  # noqa: E402
from client.metadata import ClusterClient  # noqa: E402
from client.producer import Producer  # noqa: E402
from kafkacommon.hashing import partition_for  # noqa: E402
from node.events import read_run_events  # noqa: E402
from zk.admin import create_topic  # noqa: E402
from util.waiting import wait_for  # noqa: E402
from zk.server import EmbeddedZooKeeper  # noqa: E402

OFFSETS_PARTITIONS = 10
# the fetch figure's second consumer: a user tuning librdkafka for throughput (16 fetches of 1 MiB in one)
TUNED_FETCH = {"max.partition.fetch.bytes": 16 << 20}
VALUE = b"x" * 100


def ms(ns: int) -> float:
    return ns / 1e6


def wait_isr(cc: ClusterClient, topic: str, partitions: int, rf: int) -> None:
    def whole() -> bool:
        md = cc.refresh()
        return all(len(md.partitions[(topic, p)].isr) == rf for p in range(partitions) if (topic, p) in md.partitions)
    wait_for(whole, 60, f"{topic}'s ISR whole", interval=0.1)


def cproduce(p: CProducer, topic: str, n: int, value: bytes) -> int:
    """Produce ``n`` records to partition 0 and flush; returns how many failed."""
    failed = [0]

    def cb(err, _msg) -> None:
        if err is not None:
            failed[0] += 1
    for i in range(n):
        while True:
            try:
                p.produce(topic, value, partition=0, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.005)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(120)
    return failed[0]


# ---------------------------------------------------------------------- produce throughput

def produce_throughput(bs: str, cc: ClusterClient, topic: str, n: int) -> dict:
    # delivery reports for failures only: the callback still counts every failed record, and the
    # bench's Python loop is not charged a callback per delivered one
    p = CProducer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5, "client.id": "bench-tput",
                   "delivery.report.only.error": True})
    cproduce(p, topic, 2000, VALUE)  # warm-up: connections, metadata
    t0 = time.perf_counter()
    failed = cproduce(p, topic, n, VALUE)
    ck = n / (time.perf_counter() - t0)
    grpc_by_batch = {}
    producer = Producer(cc, acks=-1)
    for batch in (100, 1000, 5000, 8000):  # 10,000 is past message.max.bytes
        records = [(None, VALUE, -1)] * batch
        producer.send_batch(topic, 0, records)
        requests = max(3, n // batch)
        t0 = time.perf_counter()
        for _ in range(requests):
            producer.send_batch(topic, 0, records)
        grpc_by_batch[batch] = requests * batch / (time.perf_counter() - t0)
    best = max(grpc_by_batch, key=grpc_by_batch.get)
    return {"records": n, "confluent_records_per_s": ck, "confluent_failed": failed,
            "grpc_records_per_s_by_batch": grpc_by_batch, "grpc_best_batch": best,
            "grpc_records_per_s": grpc_by_batch[best], "ratio": ck / grpc_by_batch[best]}


# ---------------------------------------------------------------------- single-record latency

def produce_latency(bs: str, cc: ClusterClient, topic: str, n: int) -> dict:
    p = CProducer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 0, "client.id": "bench-latency"})
    errs: list = []

    def cb(err, _msg) -> None:
        if err is not None:
            errs.append(err)

    def one() -> float:
        s = time.perf_counter_ns()
        p.produce(topic, VALUE, partition=0, on_delivery=cb)
        p.flush(10)
        return ms(time.perf_counter_ns() - s)
    for _ in range(50):
        one()
    ck = [one() for _ in range(n)]
    producer = Producer(cc, acks=-1)
    records = [(None, VALUE, -1)]

    def one_grpc() -> float:
        s = time.perf_counter_ns()
        producer.send_batch(topic, 0, records)
        return ms(time.perf_counter_ns() - s)
    for _ in range(50):
        one_grpc()
    gr = [one_grpc() for _ in range(n)]
    return {"requests": n, "confluent_p50_ms": statistics.median(ck), "confluent_p99_ms": pct(ck, 0.99),
            "confluent_errors": len(errs), "grpc_p50_ms": statistics.median(gr), "grpc_p99_ms": pct(gr, 0.99),
            "ratio": statistics.median(ck) / statistics.median(gr)}


# ---------------------------------------------------------------------- fetch throughput

def fetch_throughput(bs: str, c, cc: ClusterClient, topic: str, mb: int, record_bytes: int = 1000) -> dict:
    n = mb * 1_000_000 // record_bytes
    p = CProducer({"bootstrap.servers": bs, "acks": 1, "linger.ms": 20, "batch.size": 1_000_000,
                   "client.id": "bench-fill"})
    t0 = time.perf_counter()
    failed = cproduce(p, topic, n, b"y" * record_bytes)
    fill_s = time.perf_counter() - t0
    leader = cc.refresh().partitions[(topic, 0)].leader
    seg_dir = next(b.log_dir for b in c.cfg.brokers if b.id == leader) / f"{topic}-0"
    segments = sorted(seg_dir.glob("*.log"))
    seg_bytes = sum(s.stat().st_size for s in segments)

    def file_read() -> float:
        buf = bytearray(1 << 20)
        total = 0
        t0 = time.perf_counter()
        for s in segments:
            with open(s, "rb", buffering=0) as f:
                while (k := f.readinto(buf)):
                    total += k
        assert total == seg_bytes
        return time.perf_counter() - t0

    file_read()  # the page cache holds the files (just written) for both sides
    base_s = file_read()

    def consume(**conf) -> tuple[float, int, int]:
        cons = CConsumer({"bootstrap.servers": bs, "group.id": "bench-fetch", "enable.auto.commit": False,
                          "client.id": "bench-fetch", **conf})
        cons.assign([TopicPartition(topic, 0, 0)])
        got = 0
        payload = 0
        t0 = time.perf_counter()
        while got < n - failed:
            for m in cons.consume(min(10_000, n - failed - got), timeout=1):
                if m.error() is None:
                    got += 1
                    payload += len(m.value())
            if time.perf_counter() - t0 > 600:
                break
        fetch_s = time.perf_counter() - t0
        cons.close()
        return fetch_s, got, payload

    fetch_s, got, payload = consume()   # librdkafka's defaults: max.partition.fetch.bytes 1 MiB
    tuned_s, tuned_got, _ = consume(**TUNED_FETCH)
    return {"mb_requested": mb, "records": n, "record_bytes": record_bytes, "fill_failed": failed,
            "fill_s": fill_s, "segments": len(segments), "segment_mb": seg_bytes / 1e6, "consumed": got,
            "payload_mb": payload / 1e6, "confluent_mb_per_s": seg_bytes / 1e6 / fetch_s, "confluent_s": fetch_s,
            "file_read_mb_per_s": seg_bytes / 1e6 / base_s, "file_read_s": base_s,
            "ratio": base_s / fetch_s, "tuned": TUNED_FETCH, "tuned_consumed": tuned_got,
            "tuned_mb_per_s": seg_bytes / 1e6 / tuned_s, "tuned_ratio": base_s / tuned_s}


# ---------------------------------------------------------------------- coordinator failover

def same_partition_groups() -> tuple[str, str]:
    target = partition_for("lk-0", OFFSETS_PARTITIONS)
    other = next(f"ks-{i}" for i in range(1000) if partition_for(f"ks-{i}", OFFSETS_PARTITIONS) == target)
    return "lk-0", other


def failovers(bs: str, c, bootstrap: list[str], runs: int) -> list[dict]:
    lk, ks = same_partition_groups()
    offsets_p = partition_for(lk, OFFSETS_PARTITIONS)
    create_topic(c.zk(), "ft", 4, 3, {})
    cc = ClusterClient(bootstrap)
    wait_isr(cc, "ft", 4, 3)
    Producer(cc).send_batch("ft", 0, [(None, b"x", -1)] * 10)
    stop = threading.Event()
    ck_acks: list[int] = []
    ks_acks: list[tuple[int, int]] = []
    ck_errors: list[tuple[int, str]] = []
    cons = CConsumer({"bootstrap.servers": bs, "group.id": lk, "client.id": "ck-failover",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    cons.subscribe(["ft"])
    member = GroupMember(ClusterClient(bootstrap), ks, ["ft"], client_id="ks-failover",
                         session_timeout_ms=6000, heartbeat_interval_ms=500)

    def ck_loop() -> None:
        while not stop.is_set():
            cons.poll(0.02)
            tps = cons.assignment()
            if not tps:
                continue
            try:
                cons.commit(offsets=[TopicPartition(t.topic, t.partition, 1) for t in tps], asynchronous=False)
                ck_acks.append(time.monotonic_ns())
            except KafkaException as e:
                ck_errors.append((time.monotonic_ns(), e.args[0].name()))

    def ks_loop() -> None:
        while not stop.is_set():
            try:
                member.poll(20)
                member.commit({tp: max(0, pos) for tp, pos in member.fetcher.positions.items()} or {("ft", 0): 0})
                ks_acks.append((time.monotonic_ns(), member.coordinator[0] if member.coordinator else -1))
            except Exception:
                stop.wait(0.005)
    threads = [threading.Thread(target=f, daemon=True) for f in (ck_loop, ks_loop)]
    for t in threads:
        t.start()
    admin = GroupAdmin(cc)
    out = []
    try:
        for _ in range(runs):
            since = time.monotonic_ns()
            wait_for(lambda: sum(a > since for a in ck_acks) > 20 and sum(a > since for a, _ in ks_acks) > 20,
                     90, "both groups committing before the fault")
            old = admin.coordinator(lk)[0]
            assert admin.coordinator(ks)[0] == old
            t0 = time.monotonic_ns()
            c.signal_broker(old, signal.SIGTERM)

            def ck_event():
                return next((e for e in read_run_events(c.run_dir)
                             if e["mono_ns"] > t0 and e["type"] == "kafka_request" and e["api"] == "OffsetCommit"
                             and e["client_id"] == "ck-failover" and e["error"] is None and e["broker"] != old),
                            None)
            def ck_done() -> bool:
                e = ck_event()
                return e is not None and any(a > e["mono_ns"] for a in list(ck_acks))
            wait_for(ck_done, 90, "librdkafka's commit on the new coordinator", interval=0.2)
            wait_for(lambda: any(t > t0 and b not in (old, -1) for t, b in ks_acks), 90,
                     "GroupMember's commit on the new coordinator")
            ev = ck_event()
            ck_first = next(a for a in list(ck_acks) if a > ev["mono_ns"])
            ks_first = next(t for t, b in list(ks_acks) if t > t0 and b not in (old, -1))
            events = [e for e in read_run_events(c.run_dir) if e["mono_ns"] > t0]
            exited = next((e for e in events if e["type"] == "zk_session_closing" and e["broker"] == old), None)
            loaded = next((e for e in events if e["type"] == "coordinator_loaded" and e["partition"] == offsets_p),
                          None)
            timeline = [(round(ms(e["mono_ns"] - t0), 1), e["broker"], e["api"], e["error"], e["duration_ms"])
                        for e in events if e["type"] == "kafka_request" and e["client_id"] == "ck-failover"
                        and e["api"] != "Fetch" and e["mono_ns"] <= ev["mono_ns"]]
            errs = [(round(ms(t - t0), 1), name) for t, name in ck_errors if t0 < t <= ck_first]
            out.append({"old": old, "new": ev["broker"],
                        "confluent_ms": ms(ck_first - t0), "grpc_ms": ms(ks_first - t0),
                        "ratio": (ck_first - t0) / (ks_first - t0),
                        "old_exit_ms": ms(exited["mono_ns"] - t0) if exited else None,
                        "loaded_ms": ms(loaded["mono_ns"] - t0) if loaded else None,
                        "confluent_requests": timeline, "confluent_commit_errors": errs[:20]})
            c.wait_exit(old, timeout=30)
            c.start_broker(old)
            wait_for(lambda: all(sorted(s["isr"]) == sorted(s["replicas"])
                                 for s in c.view().topics["__consumer_offsets"]["partitions"].values()),
                     90, "the offsets partitions' ISR whole again")
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        cons.close()
        member.close(leave=False)
        cc.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000, help="records for the produce throughput")
    ap.add_argument("--requests", type=int, default=1000, help="single-record requests per client")
    ap.add_argument("--fetch-mb", type=int, default=200, help="size of the fetched topic (the issue's is 1000)")
    ap.add_argument("--runs", type=int, default=3, help="coordinator failovers")
    ap.add_argument("--quick", action="store_true", help="50,000 records, 300 requests, 50 MB, 1 failover")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.records, a.requests, a.fetch_mb, a.runs = 50_000, 300, 50, 1
    res: dict = {}
    with tempfile.TemporaryDirectory(prefix="kafkasim-bench-") as tmp, \
            EmbeddedZooKeeper(Path(tmp) / "zk", tick_ms=TICK_MS) as zk:
        c = make_cluster(zk, Path(tmp), partitions=OFFSETS_PARTITIONS, controlled=True,
                         **{"replica.fetch.wait.max.ms": 500, "controlled.shutdown.retry.backoff.ms": 50,
                            "group.initial.rebalance.delay.ms": 100, "group.min.session.timeout.ms": 1000})
        bootstrap = [f"{b.host}:{b.port}" for b in c.cfg.brokers]
        bs = ",".join(f"{h}:{p}" for h, p in (b.kafka_advertised for b in c.cfg.brokers))
        cc = ClusterClient(bootstrap)
        try:
            create_topic(c.zk(), "p", 1, 3, {"min.insync.replicas": 2})
            create_topic(c.zk(), "big", 1, 1, {})
            wait_isr(cc, "p", 1, 3)
            wait_isr(cc, "big", 1, 1)
            res["produce"] = produce_throughput(bs, cc, "p", a.records)
            res["latency"] = produce_latency(bs, cc, "p", a.requests)
            res["fetch"] = fetch_throughput(bs, c, cc, "big", a.fetch_mb)
            res["failover"] = failovers(bs, c, bootstrap, a.runs)
        finally:
            cc.close()
            c.down()
    if a.json:
        print(json.dumps(res, indent=2))
        return
    report(res)


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def report(res: dict) -> None:
    p = res["produce"]
    by = ", ".join(f"{b}: {r:.0f}" for b, r in p["grpc_records_per_s_by_batch"].items())
    print(f"produce, 100-byte records, RF 3, acks=all, {p['records']} records:")
    print(f"  confluent-kafka via the listener (linger.ms 5): {p['confluent_records_per_s']:.0f} records/s "
          f"({p['confluent_failed']} failed)")
    print(f"  gRPC producer, records/s by batch size: {by}; best {p['grpc_best_batch']}: "
          f"{p['grpc_records_per_s']:.0f} records/s")
    print(f"  ratio {p['ratio']:.2f}x (goal >= 2x: {verdict(p['ratio'] >= 2)})")
    lt = res["latency"]
    print(f"single record, acks=all, one in flight, {lt['requests']} requests each:")
    print(f"  confluent-kafka produce+flush (linger.ms 0): p50 {lt['confluent_p50_ms']:.2f} ms, "
          f"p99 {lt['confluent_p99_ms']:.2f} ms ({lt['confluent_errors']} errors)")
    print(f"  gRPC producer send_batch(1):                 p50 {lt['grpc_p50_ms']:.2f} ms, "
          f"p99 {lt['grpc_p99_ms']:.2f} ms")
    print(f"  p50 ratio {lt['ratio']:.2f}x (goal <= 1.1x: {verdict(lt['ratio'] <= 1.1)})")
    f = res["fetch"]
    print(f"fetch: a {f['mb_requested']} MB topic (the issue's is 1 GB; --fetch-mb), {f['records']} records of "
          f"{f['record_bytes']} bytes, {f['segment_mb']:.1f} MB in {f['segments']} segments "
          f"(filled in {f['fill_s']:.1f} s):")
    print(f"  confluent-kafka Consumer: {f['confluent_mb_per_s']:.1f} MB/s ({f['consumed']} records in "
          f"{f['confluent_s']:.2f} s)")
    print(f"  plain file reads of the segments: {f['file_read_mb_per_s']:.1f} MB/s ({f['file_read_s']:.2f} s)")
    print(f"  ratio {f['ratio']:.2f}x (goal >= 0.3x: {verdict(f['ratio'] >= 0.3)})")
    print(f"  tuned consumer ({', '.join(f'{k} {v}' for k, v in f['tuned'].items())}): {f['tuned_mb_per_s']:.1f} MB/s, "
          f"ratio {f['tuned_ratio']:.2f}x")
    runs = res["failover"]
    print(f"coordinator failover after SIGTERM, first commit on the new coordinator ({len(runs)} runs):")
    for r in runs:
        print(f"  broker {r['old']} -> {r['new']}: librdkafka {r['confluent_ms']:.1f} ms, GroupMember "
              f"{r['grpc_ms']:.1f} ms ({r['ratio']:.2f}x); old broker's session closing at {r['old_exit_ms']} ms, "
              f"new coordinator loaded at {r['loaded_ms']} ms")
        print(f"    librdkafka's requests but Fetch until then, answered at (ms, broker, api, error, "
              f"duration ms): {r['confluent_requests']}")
        print(f"    librdkafka's failed commits (ms, error): {r['confluent_commit_errors']}")
    ck = statistics.median(r["confluent_ms"] for r in runs)
    ks = statistics.median(r["grpc_ms"] for r in runs)
    print(f"  median: librdkafka {ck:.1f} ms, GroupMember {ks:.1f} ms, ratio {ck / ks:.2f}x")


if __name__ == "__main__":
    main()
