"""Produce throughput and latency, and partition unavailability after the leader dies.

    python bench/produce.py [--requests 2000] [--runs 5] [--quick] [--json]

A fresh cluster of 3 real broker processes (one shared real ZooKeeper, tick
100 ms, session timeout 1 s) with a topic of 1 partition, RF 3 and
min.insync.replicas 2.  One client sends Produce requests back to back over
gRPC on loopback:

  latency / throughput  acks=1 and acks=all, batches of 1 and of 100 records
                        (p50/p99 per request, records/s and MB/s)
  baseline              an empty Produce request to the same leader (the gRPC
                        round trip with no append and no replication), same run
  unavailability        a producer sends acks=all single records in a loop; the
                        leader gets SIGKILL (failover after the ZooKeeper session
                        expires) or SIGTERM (controlled shutdown moves the
                        leadership first); the figure is the gap between the last
                        acknowledged record before the signal and the first after
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

from bench.common import TICK_MS, make_cluster, pct  # noqa: E402
from client.metadata import ClusterClient  # noqa: E402
from client.producer import Producer, ProduceError  # noqa: E402
from zk.admin import create_topic  # noqa: E402
from proto import kafkasim_pb2 as pb  # noqa: E402
from zk.server import EmbeddedZooKeeper  # noqa: E402

TOPIC = "bench"


def ms(ns: int) -> float:
    return ns / 1e6


def setup(zk, workdir: Path, controlled: bool):
    c = make_cluster(zk, workdir, partitions=3, controlled=controlled,
                     **{"replica.fetch.wait.max.ms": 500, "controlled.shutdown.retry.backoff.ms": 50})
    create_topic(c.zk(), TOPIC, 1, 3, {"min.insync.replicas": 2})
    cc = ClusterClient([f"{b.host}:{b.port}" for b in c.cfg.brokers])
    cc.refresh()
    # wait until every follower is in the ISR, so acks=all really waits for 3 replicas
    deadline = time.monotonic() + 30
    while len(cc.refresh().partitions[(TOPIC, 0)].isr) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    return c, cc


def latency_series(cc: ClusterClient, acks: int, batch: int, requests: int) -> dict:
    producer = Producer(cc, acks=acks)
    value = b"x" * 100
    records = [(None, value, -1)] * batch
    for _ in range(50):  # warm-up
        producer.send_batch(TOPIC, 0, records)
    lat = []
    t0 = time.perf_counter_ns()
    for _ in range(requests):
        s = time.perf_counter_ns()
        producer.send_batch(TOPIC, 0, records)
        lat.append(ms(time.perf_counter_ns() - s))
    wall_s = (time.perf_counter_ns() - t0) / 1e9
    return {"acks": "all" if acks == -1 else acks, "batch": batch, "requests": requests,
            "p50_ms": statistics.median(lat), "p99_ms": pct(lat, 0.99),
            "records_per_s": requests * batch / wall_s, "mb_per_s": requests * batch * len(value) / wall_s / 1e6}


def empty_rtt(cc: ClusterClient, requests: int) -> dict:
    _, endpoint = cc.leader_endpoint(TOPIC, 0)
    stub = cc.broker_stub(endpoint)
    req = pb.ProduceRequest(topic=TOPIC, partition=0, acks=-1, timeout_ms=1000)
    for _ in range(50):
        stub.Produce(req, timeout=5)
    lat = []
    for _ in range(requests):
        s = time.perf_counter_ns()
        stub.Produce(req, timeout=5)
        lat.append(ms(time.perf_counter_ns() - s))
    return {"p50_ms": statistics.median(lat), "p99_ms": pct(lat, 0.99)}


def unavailability(zk, workdir: Path, sig: signal.Signals) -> dict:
    c, cc = setup(zk, workdir, controlled=(sig == signal.SIGTERM))
    try:
        producer = Producer(cc, acks=-1, request_timeout_ms=2000, delivery_timeout_ms=30000, retry_backoff_ms=5)
        acks: list[int] = []
        stop = threading.Event()

        def loop():
            while not stop.is_set():
                try:
                    producer.send_batch(TOPIC, 0, [(None, b"v", -1)])
                    acks.append(time.monotonic_ns())
                except ProduceError:
                    pass

        t = threading.Thread(target=loop, daemon=True)
        t.start()
        deadline = time.monotonic() + 10
        while len(acks) < 200 and time.monotonic() < deadline:
            time.sleep(0.01)
        leader = cc.refresh().partitions[(TOPIC, 0)].leader
        steady = [ms(b - a) for a, b in zip(acks[-150:], acks[-149:])]
        fired = time.monotonic_ns()
        c.signal_broker(leader, sig)
        deadline = time.monotonic() + 30
        while not any(a > fired for a in acks) and time.monotonic() < deadline:
            time.sleep(0.005)
        after = next((a for a in list(acks) if a > fired), None)
        stop.set()
        t.join(10)
        before = max(a for a in acks if a <= fired)
        return {"gap_ms": ms(after - before) if after else float("nan"), "steady_p99_ms": pct(steady, 0.99)}
    finally:
        cc.close()
        c.down()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=5, help="unavailability runs per signal")
    ap.add_argument("--quick", action="store_true", help="300 requests, 2 runs")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.requests, a.runs = 300, 2
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="kafkasim-bench-") as tmp, \
            EmbeddedZooKeeper(Path(tmp) / "zk", tick_ms=TICK_MS) as zk:
        work = Path(tmp)
        c, cc = setup(zk, work, controlled=False)
        try:
            results["baseline"] = empty_rtt(cc, a.requests)
            results["series"] = [latency_series(cc, acks, batch, a.requests)
                                 for acks in (1, -1) for batch in (1, 100)]
        finally:
            cc.close()
            c.down()
        for sig in (signal.SIGKILL, signal.SIGTERM):
            runs = [unavailability(zk, work, sig) for _ in range(a.runs)]
            results[f"unavailability {sig.name}"] = runs
    if a.json:
        print(json.dumps(results, indent=2))
        return
    b = results["baseline"]
    print(f"baseline: empty Produce round trip  p50 {b['p50_ms']:.2f} ms  p99 {b['p99_ms']:.2f} ms")
    print(f"{'acks':>5} {'batch':>6} {'p50 ms':>8} {'p99 ms':>8} {'x base p50':>10} {'records/s':>11} {'MB/s':>7}")
    for s in results["series"]:
        print(f"{s['acks']:>5} {s['batch']:>6} {s['p50_ms']:8.2f} {s['p99_ms']:8.2f} "
              f"{s['p50_ms'] / b['p50_ms']:10.2f} {s['records_per_s']:11.0f} {s['mb_per_s']:7.2f}")
    single_all = next(s for s in results["series"] if s["acks"] == "all" and s["batch"] == 1)
    print(f"goal acks=all p50 <= 3 ms (batch 1): {single_all['p50_ms']:.2f} ms "
          f"{'met' if single_all['p50_ms'] <= 3 else 'MISSED'}")
    for sig in ("SIGKILL", "SIGTERM"):
        runs = results[f"unavailability {sig}"]
        gaps = [r["gap_ms"] for r in runs]
        steady = statistics.median(r["steady_p99_ms"] for r in runs)
        print(f"partition unavailable after {sig} of its leader: median {statistics.median(gaps):.1f} ms, "
              f"max {max(gaps):.1f} ms (n={len(gaps)}); steady-state p99 gap between acks {steady:.2f} ms")


if __name__ == "__main__":
    main()
