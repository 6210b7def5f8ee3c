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


def counted(call: Callable[[int, int], Any], threads: int, seconds: float,
            codes: dict[str, int] | None = None) -> tuple[float, int, int]:
    """``call(i, n)`` over and over on ``threads`` threads (``i`` the thread, ``n`` its round from 1) for
    ``seconds``: (the seconds it took, the calls that succeeded, those that failed).  A call fails when it
    returns False or raises; what it raised is counted in ``codes``."""
    counts, failed = [0] * threads, [0] * threads
    stop = threading.Event()

    def run(i: int) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            try:
                ok = call(i, n) is not False
            except Exception as e:   # a failed call is counted with its error
                ok = False
                if codes is not None:
                    name = f"{type(e).__name__} {e}"[:100]
                    codes[name] = codes.get(name, 0) + 1
            if ok:
                counts[i] += 1
            else:
                failed[i] += 1
    took = timed(run, threads, seconds, stop)
    return took, sum(counts), sum(failed)


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
        return counted(lambda i, n: call(consumers[i], n), threads, seconds, codes)

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


def floor_keys(group: str, topic: str, per_request: int) -> list[bytes]:
    """The keys of the records a commit of ``topic``'s partitions 0..per_request-1 by ``group`` writes to
    ``__consumer_offsets``."""
    from coordinator.records import OffsetKey, encode_key
    return [encode_key(OffsetKey(group, topic, p)) for p in range(per_request)]


def floor_value(n: int, now_ms: int) -> bytes:
    """The value of a commit's record of offset ``n`` (no metadata, no leader epoch)."""
    from coordinator.records import OffsetValue, encode_value
    value = encode_value(OffsetValue(n, -1, "", now_ms, None))
    assert value is not None
    return value


class FloorProducer:
    """One thread's producer for the write floor of the commits :func:`commit_rdkafka` times: a confluent-kafka
    Producer (acks=all, no idempotence, no compression, no retries) whose :meth:`round` is one Produce of one
    batch of a commit's records (the keys and values that ``group``'s commit of ``topic``'s partitions
    0..per_request-1 writes to ``__consumer_offsets``, so the batch is the size of the commit's) to
    ``floor_topic``'s ``partition``, then ``flush()``: one request in flight, as a synchronous commit.
    ``linger.ms`` is long, so the records wait for the flush, which sends them at once (librdkafka ignores
    linger.ms during a flush), in one batch of one request; the caller checks that against the Produce
    requests the brokers log for ``client_id``.  The keys are encoded once, and delivery reports come only
    for errors, so that the client's Python work a round is about a commit's."""

    def __init__(self, bootstrap: str, client_id: str, floor_topic: str, partition: int, group: str, topic: str,
                 per_request: int) -> None:
        from confluent_kafka import Producer as CProducer
        self.producer = CProducer({"bootstrap.servers": bootstrap, "client.id": client_id, "acks": "all",
                                   "linger.ms": 1000, "batch.num.messages": max(per_request, 10_000),
                                   "enable.idempotence": False, "compression.type": "none", "retries": 0,
                                   "delivery.report.only.error": True, "log_level": 0})
        self.floor_topic, self.partition = floor_topic, partition
        self.keys = floor_keys(group, topic, per_request)   # made once: the client's work a round is the send
        self.errors: list[str] = []

    def _report(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err.name()))

    def round(self, n: int) -> bool:
        """One Produce of the records of a commit of offset ``n``, flushed; True when every one was acked."""
        import time as _time
        before = len(self.errors)
        value = floor_value(n, int(_time.time() * 1000))
        records = [{"key": k, "value": value} for k in self.keys]
        queued = self.producer.produce_batch(self.floor_topic, records, partition=self.partition,
                                             on_delivery=self._report)
        if queued != len(records):
            self.errors.append("not queued")
        if self.producer.flush(10):
            self.errors.append("not flushed")
        return len(self.errors) == before


def produce_rdkafka(bootstrap: str, seconds: float, threads: int, per_request: int, floor_topic: str,
                    partitions: int, topic: str = "t", group_prefix: str = "bench-rd",
                    client_prefix: str = "bench-floor",
                    requests: Callable[[], int] | None = None) -> dict[str, Any]:
    """The write floor of :func:`commit_rdkafka`'s commits, for ``seconds``: a :class:`FloorProducer` per thread
    (client id ``{client_prefix}-{i}``) on ``floor_topic``'s partition ``partition_for("{group_prefix}-{i}",
    partitions)``, the offsets partition of the commit's group, so that the threads spread over the
    partitions as the groups do.  Each producer's first round, untimed, learns the topic's metadata (its
    records, queued before the partition is known, go out in up to one request each).  ``requests``: the
    Produce requests the brokers have logged for ``client_prefix`` (:func:`produce_requests`); read after
    those first rounds and after the window, it gives ``produce_requests``, to be checked against the
    window's ``rounds``: one a round."""
    from kafkacommon.hashing import partition_for
    producers = [FloorProducer(bootstrap, f"{client_prefix}-{i}", floor_topic,
                               partition_for(f"{group_prefix}-{i}", partitions), f"{group_prefix}-{i}", topic,
                               per_request) for i in range(threads)]
    try:
        for i in range(threads):   # metadata and connections before the clock starts
            wait_for(lambda i=i: producers[i].round(0), 30, f"a first produce of {client_prefix}-{i}")
        for p in producers:
            p.errors.clear()
        logged = requests() if requests is not None else 0
        took, done, failed = counted(lambda i, n: producers[i].round(n), threads, seconds)
        logged = requests() - logged if requests is not None else -1
    finally:
        for p in producers:
            p.producer.flush(10)
    codes: dict[str, int] = {}
    for p in producers:
        for name in p.errors:
            codes[name] = codes.get(name, 0) + 1
    return {"requests_per_s": done / took, "records_per_s": done * per_request / took, "errors": failed,
            "error_codes": codes, "seconds": took, "rounds": done + failed, "produce_requests": logged,
            "partitions": len({p.partition for p in producers})}


def produce_requests(run_dir: Any, client_prefix: str) -> int:
    """The Produce requests the brokers' Kafka listeners logged (``kafka_request``) from clients named
    ``{client_prefix}-N``."""
    from node.events import read_run_events
    return sum(1 for e in read_run_events(run_dir) if e["type"] == "kafka_request" and e.get("api") == "Produce"
               and (e.get("client_id") or "").startswith(f"{client_prefix}-"))
