"""The README's main job: a consumer group's coordinator is killed, and what the group went through.

1. ``cluster up``: an embedded ZooKeeper and the brokers, as real processes.
2. A topic, a producer (acks=all), and three consumer groups of two members
   each that consume and commit after every poll: two of kafkasim's own
   client (billing, audit) and one of real Kafka clients, confluent-kafka
   (librdkafka) consumers on the brokers' Kafka listeners, whose id
   (shipping, or shipping-N) puts its offsets on billing's offsets partition.
3. SIGKILL of the broker coordinating the first group (and the librdkafka group).
4. A timeline, from the brokers' event logs and the clients' own records
   (librdkafka's commit callbacks): the offsets partition's new leader, the
   coordinator load (records and ms), the groups' rebalances, and the first
   commit the new coordinator accepted from each; then a check that every
   acknowledged commit is still there.
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

from confluent_kafka import Consumer as RdKafkaConsumer, TopicPartition

from chaos.rdkafka_close import close_group_consumer
from client.admin import GroupAdmin
from client.group import GroupMember
from client.metadata import ClientError, ClusterClient
from client.producer import Producer, ProduceError
from kafkacommon.hashing import partition_for
from zk.admin import create_topic
from cli.common import open_cluster
from node.events import read_run_events
from util.waiting import wait_for
from zk.paths import OFFSETS_TOPIC

TOPIC = "orders"
GROUPS = ("billing", "shipping", "audit")   # billing and audit: kafkasim's client; shipping: confluent-kafka
RDKAFKA = "shipping"


def rdkafka_group_id(n_partitions: int) -> str:
    """The librdkafka group's id: "shipping", else the first "shipping-N" whose offsets partition is
    billing's, so that one SIGKILL moves both groups' coordinator."""
    target = partition_for(GROUPS[0], n_partitions)
    return next(g for g in (RDKAFKA, *(f"{RDKAFKA}-{i}" for i in range(2, 10_000)))
                if partition_for(g, n_partitions) == target)


@dataclass
class Acked:
    """Commits the coordinators acknowledged: (monotonic ns, coordinator, offsets) per group; and per group and
    partition every commit's outcome, for the check: [offset, acknowledged at (None while open), failed]."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    commits: dict[str, list[tuple[int, int, dict]]] = field(default_factory=dict)
    outcomes: dict[str, dict[Any, list[list]]] = field(default_factory=dict)

    def add(self, group: str, coordinator: int, offsets: dict, sent: bool = False) -> None:
        """An acknowledged commit; ``sent``: its outcomes were recorded by :meth:`send` (they are settled here)."""
        now = time.monotonic_ns()
        with self.lock:
            self.commits.setdefault(group, []).append((now, coordinator, dict(offsets)))
            for tp, o in offsets.items():
                self._settle(group, tp, o, now, False, sent)

    def send(self, group: str, offsets: dict) -> None:
        """An asynchronous commit sent, its outcome open until :meth:`add` or :meth:`fail`."""
        with self.lock:
            for tp, o in offsets.items():
                self.outcomes.setdefault(group, {}).setdefault(tp, []).append([o, None, False])

    def fail(self, group: str, offsets: dict) -> None:
        """An asynchronous commit the client reported failed: it cannot have landed."""
        with self.lock:
            for tp, o in offsets.items():
                self._settle(group, tp, o, None, True, True)

    def _settle(self, group: str, tp: Any, offset: int, at: int | None, failed: bool, sent: bool) -> None:
        entries = self.outcomes.setdefault(group, {}).setdefault(tp, [])
        if sent:
            for e in entries:
                if e[0] == offset and e[1] is None and not e[2]:
                    e[1], e[2] = at, failed
                    return
        entries.append([offset, at, failed])

    def latest(self, group: str) -> dict:
        out: dict = {}
        with self.lock:
            for _, _, offsets in self.commits.get(group, []):
                for tp, o in offsets.items():
                    out[tp] = max(out.get(tp, -1), o)
        return out

    def lost(self, group: str, committed: dict) -> tuple[list[tuple[Any, int, int]], int]:
        """The partitions whose committed offset is below an acknowledged commit's, with the highest such commit
        and the committed offset; and how many acknowledged commits above the committed offset were overwritten
        instead: a lower commit of the same partition, not failed, acknowledged after it or never answered, may
        have landed after it (the coordinator applies commits in arrival order, as Kafka's does, and librdkafka
        sends a commit that failed on NOT_COORDINATOR again, late), as judge's lost-commit checker reasons."""
        lost: list[tuple[Any, int, int]] = []
        overwritten = 0
        with self.lock:
            for tp, entries in sorted(self.outcomes.get(group, {}).items()):
                c = committed.get(tp, -1)
                worst = -1
                for o, at, failed in entries:
                    if failed or at is None or o <= c:
                        continue
                    if any(x < o and not xf and (xa is None or xa > at) for x, xa, xf in entries):
                        overwritten += 1
                    else:
                        worst = max(worst, o)
                if worst >= 0:
                    lost.append((tp, worst, c))
        return lost, overwritten

    def first_after(self, group: str, t_ns: int, not_by: int) -> tuple[int, int] | None:
        with self.lock:
            for t, coordinator, _ in self.commits.get(group, []):
                if t > t_ns and coordinator != not_by:
                    return t, coordinator
        return None


class Workload:
    def __init__(self, bootstrap: list[str], session_timeout_ms: int, kafka_bootstrap: str = "",
                 rdkafka_group: str = RDKAFKA) -> None:
        self.bootstrap = bootstrap
        self.kafka_bootstrap = kafka_bootstrap
        self.rdkafka_group = rdkafka_group
        self.groups = [rdkafka_group if g == RDKAFKA else g for g in GROUPS]
        self.stop = threading.Event()
        self.acked = Acked()
        self.produced = 0
        self.members: list[GroupMember] = []
        self.threads: list[threading.Thread] = []
        self.session_timeout_ms = session_timeout_ms

    def start(self) -> None:
        self.threads.append(threading.Thread(target=self._produce, daemon=True, name="producer"))
        for i in range(2):
            self.threads.append(threading.Thread(target=self._rdkafka, args=(f"{self.rdkafka_group}-rdkafka-{i}",),
                                                 daemon=True, name=f"rdkafka-{i}"))
        for g in GROUPS:
            if g == RDKAFKA:
                continue
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

    def _rdkafka(self, client_id: str) -> None:
        """A confluent-kafka member: commits asynchronously after every record; what its commit
        callback acknowledges is recorded (the coordinator unknown to the client: -1)."""
        group = self.rdkafka_group

        def on_commit(err, tps) -> None:
            done = {(tp.topic, tp.partition): tp.offset for tp in tps or () if err is None and tp.error is None}
            failed = {(tp.topic, tp.partition): tp.offset for tp in tps or ()
                      if err is not None or tp.error is not None}
            if done:
                self.acked.add(group, -1, done, sent=True)
            if failed:
                self.acked.fail(group, failed)
        c = RdKafkaConsumer({"bootstrap.servers": self.kafka_bootstrap, "group.id": group, "client.id": client_id,
                             "enable.auto.commit": False, "auto.offset.reset": "earliest", "on_commit": on_commit,
                             "log_level": 0,   # its connection errors during the failover are the report's subject
                             "session.timeout.ms": self.session_timeout_ms,
                             "heartbeat.interval.ms": max(100, self.session_timeout_ms // 5)})
        c.subscribe([TOPIC])
        try:
            while not self.stop.is_set():
                m = c.poll(0.1)
                if m is None or m.error() is not None:
                    continue
                # the record's own partition only: a position kept from an earlier assignment would
                # commit an old offset over the partition's next owner's
                offsets = {(m.topic(), m.partition()): m.offset() + 1}
                self.acked.send(group, offsets)
                try:
                    c.commit(offsets=[TopicPartition(m.topic(), m.partition(), m.offset() + 1)], asynchronous=True)
                except Exception:
                    self.acked.fail(group, offsets)   # refused before it was sent: it cannot land
                    raise
        finally:
            close_group_consumer(c)

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
        from cli.controller_demo import run as controller_run
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
            create_topic(cluster.zk(), TOPIC, 6, min(3, n_brokers), {"min.insync.replicas": min(2, n_brokers)})
        bootstrap = [f"{b.host}:{b.port}" for b in cluster.cfg.brokers]
        session_ms = max(cluster.cfg.get("group.min.session.timeout.ms"), 6000)
        n_parts = cluster.cfg.get("offsets.topic.num.partitions")
        rdk = rdkafka_group_id(n_parts)
        kafka_bootstrap = ",".join(f"{h}:{port}" for h, port in (b.kafka_advertised for b in cluster.cfg.brokers))
        workload = Workload(bootstrap, session_ms, kafka_bootstrap, rdk)
        groups = workload.groups
        workload.start()
        admin = GroupAdmin(ClusterClient(bootstrap))
        wait_for(lambda: all(workload.acked.latest(g) for g in groups), 90, "every group to commit")
        target = GROUPS[0]
        p = partition_for(target, n_parts)
        old = admin.coordinator(target)[0]
        d = admin.describe(target, with_offsets=False)
        lines.append(f"workload: a producer on '{TOPIC}' (6 partitions), groups {', '.join(groups)} "
                     f"(2 members each, commit after every poll; {rdk}: confluent-kafka consumers on the "
                     f"Kafka listeners)")
        lines.append(f"group '{target}': {OFFSETS_TOPIC}-{p}, coordinator broker {old}, state {d.state}, "
                     f"generation {d.generation}, {len(d.members)} members")
        others = [g for g in groups[1:] if admin.coordinator(g)[0] == old]

        lines.append(f"\n== SIGKILL of broker {old}, the coordinator of '{target}'"
                     + (f" (and of {', '.join(others)})" if others else ""))
        t0 = time.monotonic_ns()
        cluster.signal_broker(old, signal.SIGKILL)
        wait_for(lambda: workload.acked.first_after(target, t0, old), session_ms / 1000 * 3 + 60,
                 f"a commit of '{target}' accepted by a new coordinator")

        def rdkafka_first() -> tuple[int, int] | None:
            """librdkafka's first commit the new coordinator accepted (its kafka_request event) and its
            callback acknowledged: (when acknowledged, the broker)."""
            e = next((e for e in read_run_events(cluster.run_dir) if e["mono_ns"] > t0 and e["type"] == "kafka_request"
                      and e["api"] == "OffsetCommit" and e["error"] is None and e["broker"] != old
                      and str(e.get("client_id")).startswith(f"{rdk}-rdkafka-")), None)
            acked = e and workload.acked.first_after(rdk, e["mono_ns"], old)
            return (acked[0], e["broker"]) if acked else None
        wait_for(rdkafka_first, session_ms / 1000 * 3 + 60, f"a commit of '{rdk}' (librdkafka) accepted by a new "
                                                            f"coordinator")
        cluster.wait_exit(old, timeout=10)
        first_t, new = workload.acked.first_after(target, t0, old)
        rdk_t, rdk_new = rdkafka_first()
        events = read_run_events(cluster.run_dir)

        # the write that elected a leader: when the killed broker was also the controller, the new one first takes
        # the dead replica out of the ISR with no leader (Kafka's ReplicaStateMachine.startup), then elects
        written = next((e for e in events if e["mono_ns"] >= t0 and e["type"] == "partition_state_written"
                        and e.get("topic") == OFFSETS_TOPIC and e.get("partition") == p and e["leader"] >= 0), None)
        leader = _first(events, t0, "became_leader", topic=OFFSETS_TOPIC, partition=p)
        load_start = _first(events, t0, "coordinator_load_started", partition=p)
        loaded = _first(events, t0, "coordinator_loaded", partition=p)
        generation = _first(events, t0, "group_generation", group=target)
        rdk_generation = _first(events, t0, "group_generation", group=rdk)
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
        if rdk_generation:
            timeline.append(((rdk_generation["mono_ns"] - t0) / 1e6,
                             f"'{rdk}' (confluent-kafka) rebalanced to generation {rdk_generation['generation']} "
                             f"with {len(rdk_generation['members'])} members"))
        timeline.append(((first_t - t0) / 1e6, f"first commit accepted by broker {new}"))
        timeline.append(((rdk_t - t0) / 1e6, f"first commit of '{rdk}' (confluent-kafka) accepted by broker {rdk_new}"))
        for t_ms, what in sorted(timeline):
            lines.append(f"   t={t_ms:8.1f} ms  {what}")
        time.sleep(1.0)  # let the workload run on the new coordinator for a moment before checking
        workload.stop.set()
        for th in workload.threads:
            th.join(15)
        lost: dict[str, list] = {}
        overwritten: dict[str, int] = {}
        for g in groups:
            lost[g], overwritten[g] = workload.acked.lost(g, admin.committed(g))
        total = sum(len(v) for v in lost.values())
        n_commits = sum(len(v) for v in workload.acked.commits.values())
        lines.append(f"\n== check: {n_commits} acknowledged commits, {workload.produced} records produced")
        for g in groups:
            lines.append(f"   {g}: " + ("no committed offset was lost" if not lost[g] else
                                        f"LOST {len(lost[g])}: " + ", ".join(
                                            f"{t}-{pp} acked {o} now {c}" for (t, pp), o, c in lost[g]))
                         + (f" ({overwritten[g]} acknowledged commits overwritten by the group's own later or "
                            f"re-sent commits of lower offsets)" if overwritten[g] else ""))
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
            "rdkafka_group": rdk, "rdkafka_first_commit_ms": (rdk_t - t0) / 1e6,
            "rdkafka_acknowledged_commits": len(workload.acked.commits.get(rdk, [])),
            "lost_offsets": total, "overwritten_commits": sum(overwritten.values()), "valid": total == 0}
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
