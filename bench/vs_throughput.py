"""Produce and consume through librdkafka for bench/vs_kafka.py: the same client, settings and payloads on both
sides (bench/kafka_listener.py's workloads, without its gRPC baselines).

  produce     ``records`` records of 100 bytes to a topic of 1 partition, RF 3, min.insync.replicas 2,
              acks=all, linger.ms 5 (librdkafka's defaults otherwise): records/s.
  latency     one 100-byte record at a time, acks=all, linger.ms 0, produce + flush, nothing else in
              flight: p50 and p99 over ``requests``.
  consume     a topic of 1 partition, RF 1, filled with ``mb`` MB of 1,000-byte records (acks=1,
              linger.ms 20, batch.size 1 MB), read from offset 0 to the end by a Consumer with librdkafka's
              default fetch sizes (consume() in batches of 10,000): MB/s of record values and records/s.

Each workload runs once unmeasured first, the same size (the latency: a fifth of its requests), on both sides:
a Kafka broker is a long-running JVM whose hot paths are compiled, a fresh one is not (kafkasim has no JIT;
the warm-up only fills its caches).
"""
from __future__ import annotations

import os
import statistics
import time
from typing import Any

from bench.common import pct
from bench.kafka_listener import cproduce
from bench.vs_coordinator import create_topic
from bench.vs_sides import Side

VALUE = b"x" * 100
BIG_VALUE = b"y" * 1000


def produce_throughput(side: Side, topic: str, n: int) -> dict[str, Any]:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": side.bootstrap, "acks": "all", "linger.ms": 5, "client.id": "vs-tput",
                  "delivery.report.only.error": True, "log_level": 0})
    cproduce(p, topic, n, VALUE)   # warm-up: connections, metadata, the JIT
    la = os.getloadavg()[0]
    t0 = time.perf_counter()
    failed = cproduce(p, topic, n, VALUE)
    return {"records": n, "records_per_s": n / (time.perf_counter() - t0), "failed": failed, "load": la}


def produce_latency(side: Side, topic: str, n: int) -> dict[str, Any]:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": side.bootstrap, "acks": "all", "linger.ms": 0, "client.id": "vs-latency",
                  "log_level": 0})
    errs: list = []

    def cb(err, _msg) -> None:
        if err is not None:
            errs.append(err)

    def one() -> float:
        s = time.perf_counter_ns()
        p.produce(topic, VALUE, partition=0, on_delivery=cb)
        p.flush(10)
        return (time.perf_counter_ns() - s) / 1e6
    for _ in range(max(50, n // 5)):
        one()
    la = os.getloadavg()[0]
    xs = [one() for _ in range(n)]
    return {"requests": n, "p50_ms": statistics.median(xs), "p99_ms": pct(xs, 0.99), "errors": len(errs), "load": la}


def consume_throughput(side: Side, topic: str, mb: int) -> dict[str, Any]:
    from confluent_kafka import Consumer, Producer, TopicPartition
    n = mb * 1_000_000 // len(BIG_VALUE)
    p = Producer({"bootstrap.servers": side.bootstrap, "acks": 1, "linger.ms": 20, "batch.size": 1_000_000,
                  "client.id": "vs-fill", "log_level": 0})
    failed = cproduce(p, topic, n, BIG_VALUE)
    want = n - failed

    def read_all() -> tuple[int, int, float]:
        cons = Consumer({"bootstrap.servers": side.bootstrap, "group.id": "vs-consume", "enable.auto.commit": False,
                         "client.id": "vs-consume", "log_level": 0})
        cons.assign([TopicPartition(topic, 0, 0)])
        got = payload = 0
        t0 = time.perf_counter()
        while got < want and time.perf_counter() - t0 < 600:
            for m in cons.consume(min(10_000, want - got), timeout=1):
                if m.error() is None:
                    got += 1
                    payload += len(m.value())
        s = time.perf_counter() - t0
        cons.close()
        return got, payload, s

    read_all()   # warm-up
    la = os.getloadavg()[0]
    got, payload, s = read_all()
    return {"records": got, "fill_failed": failed, "mb": payload / 1e6, "mb_per_s": payload / 1e6 / s,
            "records_per_s": got / s, "seconds": s, "load": la}


def workloads(side: Side, records: int, requests: int, mb: int, profile: bool = False) -> dict[str, Any]:
    """Create the topics, then run the three workloads in order; with ``profile``, each one's partition leader is
    sampled by py-spy meanwhile (bench/vs_profile.py; kafkasim's brokers only: they are Python processes)."""
    create_topic(side, "vs-p", 1, 3, {"min.insync.replicas": "2"})
    create_topic(side, "vs-big", 1, 1)
    out: dict[str, Any] = {}
    for name, topic, fn, arg in (("produce", "vs-p", produce_throughput, records),
                                 ("latency", "vs-p", produce_latency, requests),
                                 ("consume", "vs-big", consume_throughput, mb)):
        if not profile:
            out[name] = fn(side, topic, arg)
            continue
        from bench.vs_profile import PySpy, top
        leader = side.zk().read_states([(topic, 0)])[(topic, 0)][0].leader
        with PySpy(side.pid(leader)) as spy:
            out[name] = fn(side, topic, arg)
        out[name]["profile"] = {"broker": leader, **top(spy.samples)}
    return out
