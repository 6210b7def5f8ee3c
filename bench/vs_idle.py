"""Idle CPU for bench/vs_kafka.py: what a cluster costs doing nothing, at a partition count, on either side.

A topic of ``partitions`` partitions (RF 3) is created through the Kafka protocol (confluent-kafka's
AdminClient) on a ready cluster of 5 brokers (bench/scale.py's, issue 49's scale row); once every broker holds
a log directory for each replica ZooKeeper assigns it, every ISR of the topic is whole in ZooKeeper
(``create_s`` until then) and ``settle_s`` more seconds have passed (the creation's own work over: logs opened,
LeaderAndIsr applied, the JVM's compilation of it), no client runs and the broker processes' CPU seconds
(/proc/PID/stat utime + stime, every thread: Kafka's JIT and GC too) are read over ``window_s``: % of one
core, per broker and their sum (bench/scale.py measures kafkasim's 5-broker cluster the same way).
"""
from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.scale import cpu_seconds
from bench.vs_sides import KafkaSide, Side, isr_whole
from util.waiting import wait_for

TOPIC = "vs-idle"
BROKERS = 5


def data_dir(side: Side, broker_id: int) -> Path:
    return (side.ref.broker_dir(broker_id) / "data" if isinstance(side, KafkaSide)
            else side.cfg.broker(broker_id).log_dir)


def assigned_logs(side: Side, topic: str) -> dict[int, int] | None:
    """Per broker, how many of ``topic``'s replicas ZooKeeper assigns it (None before the topic's znode)."""
    found = side.zk().read_topic(topic)
    if found is None:
        return None
    counts = {b: 0 for b in side.ids}
    for replicas in found[0].partitions.values():
        for r in replicas:
            counts[r] = counts.get(r, 0) + 1
    return counts


def logs_made(side: Side, topic: str, want: dict[int, int]) -> bool:
    """Every broker holds a log directory for each replica of ``topic`` it is assigned (``want``)."""
    return all(sum(1 for d in data_dir(side, b).iterdir() if d.name.startswith(f"{topic}-")) >= n
               for b, n in want.items())


def create_topic_and_wait(side: Side, topic: str, partitions: int, timeout_s: float = 1200.0) -> float:
    """``topic`` (``partitions``, RF 3) created through the Kafka protocol, then waited for until every broker
    holds its replicas' logs and every ISR is whole; seconds from the request."""
    from confluent_kafka.admin import AdminClient, NewTopic
    t0 = time.monotonic()
    # answered once the topic's znode is written (operation_timeout 0): Kafka 2.8.2 otherwise holds the answer
    # until the creation has reached every broker, past librdkafka's 60 s socket timeout at 10,000 partitions
    admin = AdminClient({"bootstrap.servers": side.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(topic, partitions, 3)], operation_timeout=0, request_timeout=120)[topic].result(180)
    want = wait_for(lambda: assigned_logs(side, topic), 60, f"{side.name}: {topic}'s assignment in ZooKeeper",
                    interval=0.5)
    deadline = time.monotonic() + timeout_s
    while not (logs_made(side, topic, want) and isr_whole(side, (topic,))):
        gone = [b for b in side.ids if side.pid(b) is None]
        if gone:
            raise RuntimeError(f"{side.name} broker(s) {gone} exited while the topic was created:\n"
                               + "".join(side.log_tail(b, 600) for b in gone))
        if time.monotonic() > deadline:
            raise TimeoutError(f"{side.name}: {partitions} partitions' logs on every broker and every ISR whole "
                               f"not reached in {timeout_s:.0f} s")
        time.sleep(1.0)   # a poll of its own: util.waiting.wait_for would take a broker's exit for "not yet"
    return time.monotonic() - t0


def idle_cpu(side: Side, partitions: int, window_s: float, settle_s: float = 10.0) -> dict[str, Any]:
    created = create_topic_and_wait(side, TOPIC, partitions)
    time.sleep(settle_s)   # a fixed span after the creation, not a condition: the measured window comes after it
    pids = {b: side.pid(b) for b in side.ids}
    missing = [b for b, p in pids.items() if p is None]
    if missing:
        raise RuntimeError(f"{side.name} broker(s) {missing} exited after the topic's creation")
    la = os.getloadavg()[0]
    before = {b: cpu_seconds(p) for b, p in pids.items()}
    t = time.monotonic()
    time.sleep(window_s)   # the measurement window itself
    span = time.monotonic() - t
    pct = {b: 100 * (cpu_seconds(p) - before[b]) / span for b, p in pids.items()}
    return {"partitions": partitions, "create_s": created, "cpu_pct": pct, "total_pct": sum(pct.values()),
            "load": (la + os.getloadavg()[0]) / 2, "rss_mb": [(side.rss_kb(b) or 0) / 1024 for b in side.ids]}


def size_ratios(res: dict[str, list], key: str, partitions: list[int], names: dict[str, str],
                value: Callable[[dict], float]) -> Iterator[tuple[str, int, int, float, float]]:
    """Per side with figures at both ends: (its name, the largest count, the smallest, the median of ``value`` at
    the largest, at the smallest), from ``res``'s ``"<kind>|<key> <count>"`` rows."""
    if len(partitions) < 2:
        return
    lo, hi = min(partitions), max(partitions)
    for kind, name in names.items():
        a = [value(r) for r in res.get(f"{kind}|{key} {lo}", [])]
        b = [value(r) for r in res.get(f"{kind}|{key} {hi}", [])]
        if a and b:
            yield name, hi, lo, statistics.median(b), statistics.median(a)


def idle_scale(res: dict[str, list], partitions: list[int], names: dict[str, str]) -> None:
    """Each side's idle CPU at its largest partition count over its smallest (issue 49's scale row: <= 2x)."""
    for name, hi, lo, y, x in size_ratios(res, "idle", partitions, names, lambda r: r["total_pct"]):
        print(f"idle CPU on {name}, {hi:,} vs {lo:,} partitions: {y:.1f}% vs {x:.1f}% of a core = "
              f"{y / x:.2f}x" if x else f"idle CPU on {name}: {x:.1f}% at {lo:,} partitions")
