"""Coordinator failover for bench/vs_kafka.py: the same clients against either side, until the first commit
the new coordinator accepts.

Groups whose offsets land on the same ``__consumer_offsets`` partition (so one coordinator): a librdkafka
Consumer (confluent-kafka), a Java ``KafkaConsumer`` (reference/javaclient.py's JavaMember) and, on kafkasim
only, kafkasim's own GroupMember (client/group.py, over gRPC) twice: one polling and committing as the others
do, one only committing once it has its assignment (:class:`GroupMemberCommitter`).  Each commits
synchronously in a loop, every commit a new offset (a counter), so each acknowledged commit names one record
in the log.
The coordinator's broker gets SIGTERM (controlled shutdown) or SIGKILL.

Which coordinator accepted a commit is read from the log itself, the same way on both sides: the new leader's
segment files of that offsets partition, where every batch carries the leader epoch of the leader that
appended it.  A client's first commit on the new coordinator is its first acknowledgement after the signal
whose record sits in a batch of a later leader epoch than the partition had at the signal.  The stages beside
it come from each side's own logs (kafkasim's event logs; Kafka's state-change.log and server.log, to the
millisecond): the old broker following (its coordinator resigned), the new one leading, its load done.
"""
from __future__ import annotations

import json
import os
import signal
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from bench.vs_sides import OFFSETS, KafkasimSide, Side, isr_whole
from coordinator.records import OffsetKey, RecordFormatError, decode_key, decode_value
from kafkacommon.batch_scan import iter_batches
from kafkacommon.hashing import partition_for
from util.waiting import wait_for
from zk import paths
from zk.batch import GET_DATA

TOPIC = "ft"
TOPIC_PARTITIONS = 4
SESSION_MS = 6000
HEARTBEAT_MS = 500


def create_topic(side: Side, topic: str, partitions: int, rf: int, config: dict[str, str] | None = None,
                 timeout: float = 60, request_timeout: float = 30) -> None:
    """CreateTopics through the Kafka protocol (confluent-kafka's AdminClient), then wait until every
    partition's ISR is whole in ZooKeeper."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": side.bootstrap, "log_level": 0})
    fut = admin.create_topics([NewTopic(topic, partitions, rf, config=config or {})],
                              request_timeout=request_timeout)[topic]
    fut.result(timeout)
    wait_for(lambda: isr_whole(side, (topic,)), timeout, f"{topic}'s ISR whole", interval=0.1)


def same_partition_groups(names: list[str], partitions: int) -> dict[str, str]:
    """A group id per name, all on the offsets partition of the first."""
    target = partition_for(f"vs-{names[0]}", partitions)
    out = {names[0]: f"vs-{names[0]}"}
    for n in names[1:]:
        out[n] = next(g for g in (f"vs-{n}-{i}" for i in range(100_000)) if partition_for(g, partitions) == target)
    return out


class Committer:
    """A client committing in a loop on its own thread: ``acks`` are (monotonic ns, offset committed)."""

    def __init__(self, name: str, group: str) -> None:
        self.name, self.group = name, group
        self.acks: list[tuple[int, int]] = []
        self.failures: list[tuple[int, str]] = []
        self.counter = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"committer-{name}")

    def start(self) -> "Committer":
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self.once()
            except Exception as e:   # a failed poll or commit is recorded; the loop goes on
                self.failures.append((time.monotonic_ns(), f"{type(e).__name__}: {e}"[:200]))
                self.stop.wait(0.005)

    def once(self) -> None:
        raise NotImplementedError

    def acked(self, value: int) -> None:
        self.acks.append((time.monotonic_ns(), value))

    def acks_since(self, t_ns: int) -> int:
        return sum(1 for t, _ in list(self.acks) if t > t_ns)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)


class RdkafkaCommitter(Committer):
    def __init__(self, bootstrap: str, group: str) -> None:
        from confluent_kafka import Consumer
        super().__init__("librdkafka", group)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "vs-rdkafka",
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": HEARTBEAT_MS,
                                  "log_level": 0})
        self.consumer.subscribe([TOPIC])

    def once(self) -> None:
        from confluent_kafka import TopicPartition
        self.consumer.poll(0.02)
        tps = self.consumer.assignment()
        if not tps:
            return
        self.counter += 1
        value = self.counter
        self.consumer.commit(offsets=[TopicPartition(t.topic, t.partition, value) for t in tps], asynchronous=False)
        self.acked(value)

    def close(self) -> None:
        super().close()
        self.consumer.close()


class JavaCommitter(Committer):
    def __init__(self, bootstrap: str, group: str) -> None:
        from reference.javaclient import JavaMember
        super().__init__("Java", group)
        self.member = JavaMember(bootstrap, group, TOPIC, {
            "client.id": "vs-java", "auto.offset.reset": "earliest", "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS})
        self.assigned: list[tuple[str, int]] = []

    def once(self) -> None:
        _msg, events = self.member.poll(20)
        for ev in events:
            if "assigned" in ev:
                self.assigned = [(tp.rsplit("/", 1)[0], int(tp.rsplit("/", 1)[1])) for tp in ev["assigned"]]
        if not self.assigned:
            return
        self.counter += 1
        value = self.counter
        r = self.member.commit({tp: value for tp in self.assigned})
        if "committed" not in r:
            raise RuntimeError(f"commit failed: {r}")
        self.acked(value)

    def close(self) -> None:
        super().close()
        self.member.close(timeout=20)


class GroupMemberCommitter(Committer):
    """kafkasim's own client (gRPC): kafkasim only.  With ``fetching`` False it polls only until it has its
    assignment, then only commits (back to back): its first commit then times the coordinator's path alone,
    not the fetches from the partitions' moved leaders that come first in a poll-then-commit loop."""

    def __init__(self, grpc_bootstrap: list[str], group: str, fetching: bool = True) -> None:
        from client.group import GroupMember
        from client.metadata import ClusterClient
        super().__init__("kafkasim client" if fetching else "kafkasim client, commits only", group)
        self.fetching = fetching
        self.ops: list[tuple[int, str, str, dict]] = []   # (monotonic ns, op, phase, fields): where its time goes
        self.member = GroupMember(ClusterClient(grpc_bootstrap), group, [TOPIC], client_id="vs-groupmember",
                                  session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
                                  on_op=lambda op, phase, f: self.ops.append((time.monotonic_ns(), op, phase, f)))
        call = self.member._call   # noqa: SLF001 (the benchmark also notes each failed call, to show the retries)

        def noted(name: str, *args: Any, **kwargs: Any) -> Any:
            try:
                return call(name, *args, **kwargs)
            except Exception as e:
                what = (f"{e.code().name}: {e.details()}"[:160] if hasattr(e, "code") and callable(e.code)
                        else str(e))
                self.ops.append((time.monotonic_ns(), name, "retry", {"error": what}))
                raise
        self.member._call = noted   # type: ignore[method-assign]

    def once(self) -> None:
        if self.fetching or not self.member.assignment:
            self.member.poll(20)
        if not self.member.assignment:
            return
        self.counter += 1
        value = self.counter
        self.member.commit({tp: value for tp in self.member.assignment})
        self.acked(value)

    def close(self) -> None:
        super().close()
        self.member.close(leave=False)
        self.member.cluster.close()


def elected_at(side: Side, partition: int, not_leaders: tuple[int, ...]) -> float | None:
    """The wall-clock ms at which ZooKeeper took the offsets partition's state naming a leader not in
    ``not_leaders`` (the znode's mtime), or None while it names one of them."""
    data, stat = side.zk().read_many([(GET_DATA, paths.partition_state(OFFSETS, partition))])[0]
    return float(stat.mtime) if json.loads(data)["leader"] not in not_leaders else None


def new_epoch_commits(segments: list[Path], partition_epoch: int) -> dict[str, set[int]]:
    """Per group, the offsets committed in batches appended in a leader epoch after ``partition_epoch``."""
    out: dict[str, set[int]] = {}
    for seg in segments:
        data = seg.read_bytes()
        for _pos, batch in iter_batches(data):
            if batch.leader_epoch <= partition_epoch:
                continue
            for r in batch.records:
                if r.key is None:
                    continue
                try:
                    key = decode_key(r.key)
                    if not isinstance(key, OffsetKey) or r.value is None:
                        continue
                    value = decode_value(key, r.value)
                except RecordFormatError:
                    continue
                out.setdefault(key.group, set()).add(value.offset)   # type: ignore[union-attr]
    return out


def coordinator_failovers(side: Side, sigs: list[signal.Signals], runs: int,
                          load: Callable[[], float] = lambda: os.getloadavg()[0]) -> list[dict[str, Any]]:
    """``runs`` failovers per signal on ``side`` (a running, ready cluster with controlled shutdown on); the old
    coordinator is started again between runs."""
    n = side.cfg.get("offsets.topic.num.partitions")
    names = ["librdkafka", "java"] + (["kafkasim", "kafkasim-commits"] if isinstance(side, KafkasimSide) else [])
    groups = same_partition_groups(names, n)
    p = partition_for(groups["librdkafka"], n)
    create_topic(side, TOPIC, TOPIC_PARTITIONS, 3)
    committers: list[Committer] = [RdkafkaCommitter(side.bootstrap, groups["librdkafka"]),
                                   JavaCommitter(side.bootstrap, groups["java"])]
    if isinstance(side, KafkasimSide):
        committers.append(GroupMemberCommitter(side.grpc_bootstrap(), groups["kafkasim"]))
        committers.append(GroupMemberCommitter(side.grpc_bootstrap(), groups["kafkasim-commits"], fetching=False))
    for c in committers:
        c.start()
    out: list[dict[str, Any]] = []

    def one(sig: signal.Signals) -> dict[str, Any]:
        since = time.monotonic_ns()
        wait_for(lambda: all(c.acks_since(since) >= 20 for c in committers), 120,
                 "every client committing before the fault", interval=0.05)
        state, _ = side.zk().read_states([(OFFSETS, p)])[(OFFSETS, p)]
        old, epoch0 = state.leader, state.leader_epoch
        la = load()
        mono0, wall0 = time.monotonic_ns(), time.time() * 1000.0
        side.signal(old, sig)
        elected_ms = wait_for(lambda: elected_at(side, p, (old, -1)), 60,
                              f"offsets partition {p} to get a new leader", interval=0.02) - wall0
        t_moved = time.monotonic_ns()
        # every client has gone on committing well past the move: its first commit on the new
        # coordinator is among the acknowledgements so far
        wait_for(lambda: all(c.acks_since(t_moved) >= 10 for c in committers), 120,
                 "every client committing on the new coordinator", interval=0.05)
        side.wait_exit(old, 60)
        new = side.zk().read_states([(OFFSETS, p)])[(OFFSETS, p)][0].leader
        appended = new_epoch_commits(side.offsets_segments(new, p), epoch0)
        run: dict[str, Any] = {"signal": sig.name, "old": old, "new": new, "load": la, "elected": elected_ms,
                               **side.coordinator_stages(old, new, p, wall0, mono0, elected_ms)}
        for c in committers:
            mine = appended.get(c.group, set())
            first = next((t for t, v in list(c.acks) if t > mono0 and v in mine), None)
            run[c.name] = None if first is None else (first - mono0) / 1e6
            run[f"{c.name} failures"] = [((t - mono0) / 1e6, f) for t, f in list(c.failures) if t > mono0][:5]
            if isinstance(c, GroupMemberCommitter) and first is not None:
                run[f"{c.name} ops"] = [
                    (round((t - mono0) / 1e6, 1), op, phase, {k: v for k, v in f.items() if k != "offsets"})
                    for t, op, phase, f in list(c.ops) if mono0 - 20e6 <= t <= first and op != "heartbeat"]
        return run

    try:
        for sig in sigs:
            for _ in range(runs):
                try:
                    out.append(one(sig))
                except (TimeoutError, RuntimeError, OSError) as e:   # recorded, and the next run goes on
                    out.append({"signal": sig.name, "error": f"{type(e).__name__}: {e}"[:300], "load": load()})
                    print(f"  {side.name}: a {sig.name} coordinator failover failed: {e}", file=sys.stderr,
                          flush=True)
                for b in side.ids:   # every broker back, every ISR whole, before the next run
                    if side.pid(b) is None:
                        side.wait_exit(b, 60)
                        side.start(b)
                wait_for(lambda: isr_whole(side, (OFFSETS, TOPIC)), 120, "every ISR whole again", interval=0.2)
    finally:
        for c in committers:
            c.close()
    return out


def summarize(runs: list[dict[str, Any]], key: str) -> float | None:
    xs = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(xs) if xs else None
