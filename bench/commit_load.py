"""OffsetCommit load through the Kafka protocol, shared by bench/coordinator.py (the listener path) and
bench/vs_commits.py (kafkasim beside Kafka 2.8.2): librdkafka consumers committing synchronously, one group
each, for a fixed time."""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

from util.waiting import wait_for


def timed(fn: Callable[[int], None], threads: int, seconds: float, stop: threading.Event) -> float:
    """Run ``fn(i)`` on ``threads`` threads until ``stop`` is set after ``seconds``; the seconds it took."""
    ts = [threading.Thread(target=fn, args=(i,), daemon=True) for i in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    stop.wait(seconds)  # the measurement window
    stop.set()
    for t in ts:
        t.join(30)
    return time.perf_counter() - t0


def commit_rdkafka(bootstrap: str, seconds: float, threads: int, per_request: int, topic: str = "t",
                   group_prefix: str = "bench-rd", fetch_floor: bool = True) -> dict[str, Any]:
    """A confluent-kafka Consumer per thread (group ``{group_prefix}-{i}``, no subscription: generation -1, as a
    simple consumer's) committing ``per_request`` offsets of ``topic`` (partitions 0..per_request-1, which must
    exist) synchronously, for ``seconds``.  With ``fetch_floor``, then the floor of that path: the same consumers
    fetching the same offsets back (OffsetFetch: the same listener, door and core, no write and no
    replication), for as long."""
    from confluent_kafka import Consumer as CConsumer, TopicPartition
    consumers = [CConsumer({"bootstrap.servers": bootstrap, "group.id": f"{group_prefix}-{i}",
                            "enable.auto.commit": False, "client.id": f"{group_prefix}-{i}", "log_level": 0})
                 for i in range(threads)]
    tps = [TopicPartition(topic, p) for p in range(per_request)]
    codes: dict[str, int] = {}

    def loop(call: Callable[[Any, int], Any]) -> tuple[float, int, int]:
        counts, failed = [0] * threads, [0] * threads
        stop = threading.Event()

        def run(i: int) -> None:
            n = 0
            while not stop.is_set():
                n += 1
                try:
                    call(consumers[i], n)
                    counts[i] += 1
                except Exception as e:   # a failed call is counted with its error
                    failed[i] += 1
                    name = f"{type(e).__name__} {e}"[:100]
                    codes[name] = codes.get(name, 0) + 1
        took = timed(run, threads, seconds, stop)
        return took, sum(counts), sum(failed)

    try:
        for i, k in enumerate(consumers):   # every coordinator found and loaded before the clock starts
            wait_for(lambda k=k: k.committed([TopicPartition(topic, 0)], timeout=10) is not None, 30,
                     f"the coordinator of {group_prefix}-{i}")
        took, done, failed = loop(lambda k, n: k.commit(
            offsets=[TopicPartition(topic, p, n) for p in range(per_request)], asynchronous=False))
        out = {"requests_per_s": done / took, "offsets_per_s": done * per_request / took, "errors": failed,
               "error_codes": codes, "seconds": took}
        if fetch_floor:
            ftook, fdone, ffailed = loop(lambda k, n: k.committed(tps, timeout=10))
            out["errors"] += ffailed
            out["offset_fetch_requests_per_s"] = fdone / ftook
    finally:
        for k in consumers:
            k.close()
    return out
