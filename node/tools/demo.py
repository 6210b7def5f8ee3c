"""The README's main job: a consumer group's coordinator is killed, and what the group went through.

1. ``cluster up``: an embedded ZooKeeper and the brokers, as real processes.
2. A topic, a producer (acks=all), and three consumer groups of two members
   each that consume and commit after every poll (the client library).
3. SIGKILL of the broker coordinating the first group.
4. A timeline, from the brokers' event logs and the clients' own records:
   the offsets partition's new leader, the coordinator load (records and ms),
   the group's rebalance, and the first commit the new coordinator accepted;
   then a check that every acknowledged commit is still there.
5. The killed broker restarts; the report goes to <run.dir>/report.txt and
   its figures to <run.dir>/report.json.
"""
from __future__ import annotations

import argparse
import json
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from client.admin import GroupAdmin
from client.group import GroupMember
from client.metadata import ClientError, ClusterClient
from client.producer import Producer, ProduceError
from kafkacommon.hashing import partition_for
from node.tools import topics
from node.tools.cli_common import open_cluster
from node.events import read_run_events
from node.tools.waiting import wait_for
from zk.paths import OFFSETS_TOPIC

TOPIC = "orders"
GROUPS = ("billing", "shipping", "audit")


@dataclass
class Acked:
    """Commits the coordinators acknowledged: (monotonic ns, coordinator, offsets) per group."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    commits: dict[str, list[tuple[int, int, dict]]] = field(default_factory=dict)

    def add(self, group: str, coordinator: int, offsets: dict) -> None:
        with self.lock:
            self.commits.setdefault(group, []).append((time.monotonic_ns(), coordinator, dict(offsets)))

    def latest(self, group: str) -> dict:
        out: dict = {}
        with self.lock:
            for _, _, offsets in self.commits.get(group, []):
                for tp, o in offsets.items():
                    out[tp] = max(out.get(tp, -1), o)
        return out

    def first_after(self, group: str, t_ns: int, not_by: int) -> tuple[int, int] | None:
        with self.lock:
            for t, coordinator, _ in self.commits.get(group, []):
                if t > t_ns and coordinator != not_by:
                    return t, coordinator
        return None


class Workload:
    def __init__(self, bootstrap: list[str], session_timeout_ms: int) -> None:
        self.bootstrap = bootstrap
        self.stop = threading.Event()
        self.acked = Acked()
        self.produced = 0
        self.members: list[GroupMember] = []
        self.threads: list[threading.Thread] = []
        self.session_timeout_ms = session_timeout_ms

    def start(self) -> None:
        self.threads.append(threading.Thread(target=self._produce, daemon=True, name="producer"))
        for g in GROUPS:
            for i in range(2):
                m = GroupMember(ClusterClient(self.bootstrap), g, [TOPIC], client_id=f"{g}-{i}",
                                session_timeout_ms=self.session_timeout_ms,
                                heartbeat_interval_ms=max(100, self.session_timeout_ms // 5))
                self.members.append(m)
                self.threads.append(threading.Thread(target=self._consume, args=(m,), daemon=True, name=m.client_id))
        for t in self.threads:
            t.start()

    def _produce(self) -> None:
        with ClusterClient(self.bootstrap) as cc:
            producer = Producer(cc, acks=-1, delivery_timeout_ms=5000)
            i = 0
            while not self.stop.is_set():
                try:
                    producer.send(TOPIC, b"order-%d" % i, key=b"customer-%d" % (i % 97))
                    self.produced += 1
                    i += 1
                except (ProduceError, ClientError):
                    pass
                self.stop.wait(0.005)  # ~200 records/s: a steady trickle, not a load test

    def _consume(self, m: GroupMember) -> None:
        while not self.stop.is_set():
            try:
                m.poll(100)
                offsets = m.positions()
                if offsets:
                    m.commit(offsets)
                    self.acked.add(m.group_id, m.coordinator[0] if m.coordinator else -1, offsets)
            except ClientError:
                self.stop.wait(0.05)  # the member rejoins or rediscovers on its next poll

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(15)
        for m in self.members:
            m.close()
            m.cluster.close()


def _first(events: list[dict], after_ns: int, type_: str, **match: Any) -> dict | None:
    for e in events:
        if e["mono_ns"] >= after_ns and e["type"] == type_ and all(e.get(k) == v for k, v in match.items()):
            return e
    return None


def run(args: argparse.Namespace) -> int:
    if getattr(args, "controller", False):
        from node.tools.controller_demo import run as controller_run
        return controller_run(args)
    cluster = open_cluster(args)
    lines: list[str] = []
    results: dict[str, Any] = {}
    workload = None
    try:
        t = time.monotonic()
        view = cluster.up(timeout=90)
        n_brokers = len(view.brokers)
        lines.append(f"cluster up in {time.monotonic() - t:.1f}s: ZooKeeper {cluster.connect}, {n_brokers} brokers, "
                     f"controller broker {view.controller_id}")
        if TOPIC not in view.topics:
            topics.create_topic(cluster.zk(), TOPIC, 6, min(3, n_brokers), {"min.insync.replicas": min(2, n_brokers)})
        bootstrap = [f"{b.host}:{b.port}" for b in cluster.cfg.brokers]
        session_ms = max(cluster.cfg.get("group.min.session.timeout.ms"), 6000)
        workload = Workload(bootstrap, session_ms)
        workload.start()
        admin = GroupAdmin(ClusterClient(bootstrap))
        wait_for(lambda: all(workload.acked.latest(g) for g in GROUPS), 90, "every group to commit")
        target = GROUPS[0]
        n_parts = len(cluster.view().topics[OFFSETS_TOPIC]["partitions"])
        p = partition_for(target, n_parts)
        old = admin.coordinator(target)[0]
        d = admin.describe(target, with_offsets=False)
        lines.append(f"workload: a producer on '{TOPIC}' (6 partitions), groups {', '.join(GROUPS)} "
                     f"(2 members each, commit after every poll)")
        lines.append(f"group '{target}': {OFFSETS_TOPIC}-{p}, coordinator broker {old}, state {d.state}, "
                     f"generation {d.generation}, {len(d.members)} members")
        others = [g for g in GROUPS[1:] if admin.coordinator(g)[0] == old]

        lines.append(f"\n== SIGKILL of broker {old}, the coordinator of '{target}'"
                     + (f" (and of {', '.join(others)})" if others else ""))
        t0 = time.monotonic_ns()
        cluster.signal_broker(old, signal.SIGKILL)
        wait_for(lambda: workload.acked.first_after(target, t0, old), session_ms / 1000 * 3 + 60,
                 f"a commit of '{target}' accepted by a new coordinator")
        cluster.wait_exit(old, timeout=10)
        first_t, new = workload.acked.first_after(target, t0, old)
        events = read_run_events(cluster.run_dir)

        written = _first(events, t0, "partition_state_written", topic=OFFSETS_TOPIC, partition=p)
        leader = _first(events, t0, "became_leader", topic=OFFSETS_TOPIC, partition=p)
        load_start = _first(events, t0, "coordinator_load_started", partition=p)
        loaded = _first(events, t0, "coordinator_loaded", partition=p)
        generation = _first(events, t0, "group_generation", group=target)
        timeline: list[tuple[float, str]] = [(0.0, "SIGKILL sent")]
        if written:
            timeline.append(((written["mono_ns"] - t0) / 1e6,
                             f"controller elected broker {written['leader']} leader of {OFFSETS_TOPIC}-{p} (leader "
                             f"epoch {written['leader_epoch']}, ISR {written['isr']}), after the ZooKeeper session "
                             f"timeout ({cluster.cfg.session_timeout_ms} ms)"))
        if leader:
            timeline.append(((leader["mono_ns"] - t0) / 1e6, f"broker {leader['broker']} became leader"))
        if load_start and loaded:
            timeline.append(((loaded["mono_ns"] - t0) / 1e6,
                             f"coordinator moved from broker {old} to broker {loaded['broker']}: load took "
                             f"{loaded['duration_ms']:.1f} ms over {loaded['records']} records"))
        if generation:
            timeline.append(((generation["mono_ns"] - t0) / 1e6,
                             f"'{target}' rebalanced to generation {generation['generation']} with "
                             f"{len(generation['members'])} members"))
        timeline.append(((first_t - t0) / 1e6, f"first commit accepted by broker {new}"))
        for t_ms, what in sorted(timeline):
            lines.append(f"   t={t_ms:8.1f} ms  {what}")
        time.sleep(1.0)  # let the workload run on the new coordinator for a moment before checking
        workload.stop.set()
        for th in workload.threads:
            th.join(15)
        lost: dict[str, list] = {}
        for g in GROUPS:
            committed = admin.committed(g)
            lost[g] = [(tp, o, committed.get(tp, -1)) for tp, o in sorted(workload.acked.latest(g).items())
                       if committed.get(tp, -1) < o]
        total = sum(len(v) for v in lost.values())
        n_commits = sum(len(v) for v in workload.acked.commits.values())
        lines.append(f"\n== check: {n_commits} acknowledged commits, {workload.produced} records produced")
        for g in GROUPS:
            lines.append(f"   {g}: " + ("no committed offset was lost" if not lost[g] else
                                        f"LOST {len(lost[g])}: " + ", ".join(
                                            f"{t}-{pp} acked {o} now {c}" for (t, pp), o, c in lost[g])))
        lines.append(f"\n== restarting broker {old}")
        cluster.start_broker(old)
        wait_for(lambda: old in cluster.view().brokers, 60, f"broker {old} registered again")
        lines.append(f"   broker {old} registered again with broker epoch {cluster.view().brokers[old]['epoch']}")
        lines.append(f"\nevent logs: {cluster.run_dir / 'events'}")
        results = {
            "group": target, "offsets_partition": p, "old_coordinator": old, "new_coordinator": new,
            "leader_elected_ms": (written["mono_ns"] - t0) / 1e6 if written else None,
            "load_ms": loaded["duration_ms"] if loaded else None, "load_records": loaded["records"] if loaded else None,
            "loaded_at_ms": (loaded["mono_ns"] - t0) / 1e6 if loaded else None,
            "first_commit_ms": (first_t - t0) / 1e6, "acknowledged_commits": n_commits,
            "lost_offsets": total, "valid": total == 0}
        report = "\n".join(lines)
        print(report)
        (cluster.run_dir / "report.txt").write_text(report + "\n")
        (cluster.run_dir / "report.json").write_text(json.dumps(results, indent=2) + "\n")
        return 0 if total == 0 else 1
    finally:
        if workload is not None:
            workload.close()
        if not args.keep:
            cluster.down()
        cluster.close()
