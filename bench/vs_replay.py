"""Coordinator load (replay) for bench/vs_kafka.py: how fast a new coordinator loads an offsets partition
holding many commit records, on either side.

``threads`` librdkafka consumers, each with its own group, all the groups on one ``__consumer_offsets``
partition, commit ``per_request`` offsets per request (one batch of that many records; a topic of that many
partitions, RF 1) synchronously until the partition holds ``records`` commit records (no segment rolls below
``offsets.topic.segment.bytes``, 100 MB, so the cleaner keeps them all).  Then, ``moves`` times, the
partition's leader gets SIGTERM (controlled shutdown: an ISR member leads the partition and loads it) and is
started again.  The load's own time comes from each side's logs: Kafka's server.log line
"Finished loading offsets and group metadata from __consumer_offsets-N in T milliseconds for epoch E, of which
S milliseconds was spent in the scheduler" (T - S: the load itself, not its wait for the loader thread), and
kafkasim's ``coordinator_loaded`` event (``duration_ms``, ``records``; docs/events.md).  The records the load
read are counted in the new leader's segments with one decoder for both sides (kafkacommon/fastscan.py).
"""
from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from bench.vs_coordinator import create_topic, same_partition_groups
from bench.vs_sides import OFFSETS, KafkaSide, KafkasimSide, Side, isr_whole
from kafkacommon.fastscan import iter_batch_records
from kafkacommon.hashing import partition_for
from util.waiting import wait_for

TOPIC = "vs-replay"
def count_records(segments: list[Path]) -> int:
    n = 0
    for seg in segments:
        for _next, recs in iter_batch_records(seg.read_bytes()):
            n += len(recs)
    return n


def fill(side: Side, groups: list[str], records: int, per_request: int) -> dict[str, Any]:
    """Commit until ``records`` commit records are acknowledged; the commit rate on the way."""
    from confluent_kafka import Consumer, TopicPartition
    consumers = [Consumer({"bootstrap.servers": side.bootstrap, "group.id": g, "enable.auto.commit": False,
                           "client.id": "vs-replay", "log_level": 0}) for g in groups]
    requests = -(-records // per_request)
    lock = threading.Lock()
    state = {"left": requests, "failed": 0}

    def run(k: Any) -> None:
        n = 0
        while True:
            with lock:
                if state["left"] <= 0:
                    return
                state["left"] -= 1
            n += 1
            try:
                k.commit(offsets=[TopicPartition(TOPIC, p, n) for p in range(per_request)], asynchronous=False)
            except Exception:   # noqa: BLE001 (counted; a failed request is tried again)
                with lock:
                    state["failed"] += 1
                    state["left"] += 1
                    if state["failed"] > 1000:
                        return
    try:
        for k in consumers:   # each coordinator found and loaded before the clock starts
            wait_for(lambda k=k: k.committed([TopicPartition(TOPIC, 0)], timeout=10) is not None, 60,
                     "the replay groups' coordinator")
        t0 = time.perf_counter()
        ts = [threading.Thread(target=run, args=(k,), daemon=True) for k in consumers]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        took = time.perf_counter() - t0
    finally:
        for k in consumers:
            k.close()
    if state["left"] > 0:
        raise RuntimeError(f"{side.name}: {state['failed']} commits failed while filling the offsets partition")
    return {"fill_s": took, "fill_records_per_s": requests * per_request / took, "fill_failed": state["failed"]}


def loaded(side: Side, new: int, partition: int, mono0_ns: int, wall0_ms: float) -> dict[str, Any] | None:
    """The new leader's load of ``partition`` after the signal: its ms (the load itself) and records read."""
    if isinstance(side, KafkasimSide):
        e = next((e for e in side.events() if e["type"] == "coordinator_loaded" and e["broker"] == new
                  and e["partition"] == partition and e["mono_ns"] > mono0_ns), None)
        return None if e is None else {"load_ms": e["duration_ms"], "event_records": e["records"]}
    assert isinstance(side, KafkaSide)
    for r in side.offsets_loads(new):
        # log4j stamps whole milliseconds: a line of the signal's own millisecond shows as up to 1 ms early
        if r["partition"] == f"{OFFSETS}-{partition}" and r["wall_ms"] >= wall0_ms - 1.0:
            return {"load_ms": r["load_ms"], "scheduler_ms": r["scheduler_ms"]}
    return None


def offsets_replay(side: Side, records: int, moves: int, per_request: int = 100, threads: int = 8
                   ) -> list[dict[str, Any]]:
    """``moves`` loads of one offsets partition holding ``records`` commit records on ``side`` (a running, ready
    cluster with controlled shutdown on); each a dict with the load's ms, the records and records/s."""
    n = side.cfg.get("offsets.topic.num.partitions")
    groups = list(same_partition_groups([f"replay{i}" for i in range(threads)], n).values())
    p = partition_for(groups[0], n)
    create_topic(side, TOPIC, per_request, 1)
    la = os.getloadavg()[0]
    filled = {**fill(side, groups, records, per_request), "fill_load": (la + os.getloadavg()[0]) / 2}
    wait_for(lambda: isr_whole(side, (OFFSETS,)), 120, "every ISR whole after the fill", interval=0.2)
    out: list[dict[str, Any]] = []
    for _ in range(moves):
        old = side.zk().read_states([(OFFSETS, p)])[(OFFSETS, p)][0].leader
        la = os.getloadavg()[0]
        mono0, wall0 = time.monotonic_ns(), time.time() * 1000.0
        side.signal(old, signal.SIGTERM)

        def moved() -> int | None:
            leader = side.zk().read_states([(OFFSETS, p)])[(OFFSETS, p)][0].leader
            return leader if leader not in (old, -1) else None
        new = wait_for(moved, 60, f"offsets partition {p} to get a new leader", interval=0.05)
        got = wait_for(lambda: loaded(side, new, p, mono0, wall0), 120, f"broker {new} to load partition {p}",
                       interval=0.1)
        count = count_records(side.offsets_segments(new, p))
        out.append({**filled, **got, "old": old, "new": new, "records": count, "load": la,
                    "records_per_s": count / got["load_ms"] * 1000 if got["load_ms"] else None})
        side.wait_exit(old, 60)
        side.start(old)
        wait_for(lambda: isr_whole(side, (OFFSETS,)), 120, "every ISR whole again", interval=0.2)
    return out
