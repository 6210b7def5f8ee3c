"""Rebalance time of one consumer group of 1,000 members.

    python bench/rebalance.py [--members 1000] [--baseline 10] [--json]

A fresh cluster of 3 real brokers (one shared real ZooKeeper) and a topic of
100 partitions.  N members (the client library, one thread each, one shared
gRPC channel) start joining at once; the figure is the time from the first
JoinGroup to every member holding an assignment in one generation with no
rebalance pending.  Kafka's group.initial.rebalance.delay.ms (3000 ms) is in
it by design: the coordinator waits that long for more members.  Baseline,
same run and cluster: a group of 10 members.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import TICK_MS, make_cluster  # noqa: E402
from client.group import GroupMember  # noqa: E402
from client.metadata import ClusterClient  # noqa: E402
from node import topics  # noqa: E402
from node.waiting import wait_for  # noqa: E402
from zk.server import EmbeddedZooKeeper  # noqa: E402

DELAY_MS = 3000


def one_group(bootstrap: list[str], name: str, n: int) -> dict:
    cc = ClusterClient(bootstrap)
    joins: list[float] = []  # when each JoinGroup was sent (the second one carries the member id)

    def on_op(op: str, phase: str, fields: dict) -> None:
        if op == "join" and phase == "invoke":
            joins.append(time.monotonic())
    members = [GroupMember(cc, name, ["wide"], client_id=f"m{i:04d}", session_timeout_ms=30000,
                           rebalance_timeout_ms=60000, heartbeat_interval_ms=3000, on_op=on_op)
               for i in range(n)]
    stop = threading.Event()
    start = threading.Barrier(n + 1)

    def run(m: GroupMember) -> None:
        start.wait()
        while not stop.is_set():
            try:
                m.ensure_active()
            except Exception:
                pass
            stop.wait(0.05)  # a consumer's poll loop, without fetching

    threads = [threading.Thread(target=run, args=(m,), daemon=True) for m in members]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.monotonic()

    def stable():
        gens = {m.state.generation for m in members}
        return len(gens) == 1 and min(gens) >= 1 and not any(m._rejoin.is_set() or m._joining for m in members)
    wait_for(stable, 120, f"{n} members stable", interval=0.01)
    done = time.monotonic()
    took = (done - t0) * 1000
    last_join = max(j for j in joins if j <= done)
    assigned = sum(len(m.assignment) for m in members)
    generation = members[0].state.generation
    stop.set()
    for m in members:
        m.close(leave=False)
    cc.close()
    return {"members": n, "stable_ms": took, "generation": generation, "partitions_assigned": assigned,
            "joins_sent_over_ms": (last_join - t0) * 1000, "after_last_join_ms": (done - last_join) * 1000}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", type=int, default=1000)
    ap.add_argument("--baseline", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kafkasim-bench-") as tmp:
        zk = EmbeddedZooKeeper(Path(tmp) / "zk", tick_ms=TICK_MS)
        zk.start()
        try:
            c = make_cluster(zk, Path(tmp), partitions=50, **{"group.initial.rebalance.delay.ms": DELAY_MS,
                                                              "zookeeper.session.timeout.ms": 6000})
            try:
                topics.create_topic(c.zk(), "wide", 100, 3, {})
                bootstrap = [f"{b.host}:{b.port}" for b in c.cfg.brokers]
                base = one_group(bootstrap, "baseline", a.baseline)
                big = one_group(bootstrap, "big", a.members)
            finally:
                c.down()
        finally:
            zk.stop()
    res = {"baseline": base, "big": big, "goal_ms": DELAY_MS + 1000}
    if a.json:
        print(json.dumps(res, indent=2))
        return
    for r in (base, big):
        print(f"{r['members']:>5} members: stable {r['stable_ms']:.0f} ms after the first JoinGroup "
              f"(joins sent over {r['joins_sent_over_ms']:.0f} ms; stable {r['after_last_join_ms']:.0f} ms after the "
              f"last one; generation {r['generation']}, {r['partitions_assigned']} partitions assigned)")
    ok = big["after_last_join_ms"] <= DELAY_MS + 1000
    print(f"goal: stable within the initial delay + 1 s ({DELAY_MS + 1000} ms) of the last member's join: "
          f"{big['after_last_join_ms']:.0f} ms {'met' if ok else 'MISSED'}.  Kafka re-arms the initial delay once "
          f"more whenever members joined during it, so from the first join it takes at least 2 x the delay.")


if __name__ == "__main__":
    main()
