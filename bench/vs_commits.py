"""Commit throughput for bench/vs_kafka.py: librdkafka's synchronous OffsetCommits on either side.

``threads`` confluent-kafka Consumers (one group each, no subscription: generation -1, as a simple consumer's)
commit ``per_request`` offsets of one topic per request (10 by default: issue 49's small commits), RF 3 for
``__consumer_offsets`` and the topic, acks=all as every commit is appended, synchronously, for ``seconds``; the
loop is bench/commit_load.py's, the one bench/coordinator.py times kafkasim's listener with.  Beside it, the
floor of the same path on the same side: the same consumers fetching the same offsets back (OffsetFetch: no
write, no replication), a commit's mean time (threads / requests/s), and an acks=all produce of one record to
the same topic (p50 of 200, librdkafka: the same replicas' append without the coordinator).  Each commit
loop is run once unmeasured first (up to 5 s).
"""
from __future__ import annotations

import os
from typing import Any

from bench.commit_load import commit_rdkafka
from bench.vs_coordinator import create_topic
from bench.vs_sides import Side
from bench.vs_throughput import produce_latency

TOPIC = "vs-commits"


def commit_throughput(side: Side, seconds: float, threads: list[int], per_request: int) -> list[dict[str, Any]]:
    """Offsets/s and requests/s committed on ``side`` (a running, ready cluster) at each thread count, with the
    load average."""
    create_topic(side, TOPIC, per_request, 3)
    out = []
    for n in threads:
        # once unmeasured first, as vs_throughput's workloads: Kafka's JVM compiles the commit path, kafkasim's
        # brokers find their groups' coordinators, as a long-running broker has
        commit_rdkafka(side.bootstrap, min(seconds, 5.0), n, per_request, topic=TOPIC, group_prefix=f"vs-commits-{n}",
                       fetch_floor=False)
        la = os.getloadavg()[0]
        r = commit_rdkafka(side.bootstrap, seconds, n, per_request, topic=TOPIC, group_prefix=f"vs-commits-{n}")
        out.append({**r, "threads": n, "per_request": per_request, "load": (la + os.getloadavg()[0]) / 2,
                    "commit_ms": 1000 * n / r["requests_per_s"] if r["requests_per_s"] else None})
    # what an acks=all append of the same replicas costs outside the coordinator, on the same cluster
    lat = produce_latency(side, TOPIC, 200)
    for x in out:
        x["produce_p50_ms"] = lat["p50_ms"]
    return out
