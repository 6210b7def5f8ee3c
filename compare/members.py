"""Consumer-group members of a differential run: librdkafka (confluent-kafka) consumers, one thread each, and
Kafka 2.8.2's Java consumer.

A member records what it sees as a client: each generation it joins (librdkafka's ``JoinGroup response:
GenerationId N`` debug line, the only place its Python API shows the generation), each assignment and
revocation its rebalance callbacks get, and each error.  Its client id is ``m<i>`` (so Kafka's member id,
``m<i>-<uuid>``, sorts the same way on both sides, and the range and round-robin assignors give the same
member the same partitions), and a static member's instance id is ``<group>-m<i>``.

The member's thread owns its consumer: commands (commit, close) are queued to it and run between polls.

A Java member (:class:`JavaGroupMember`: Kafka 2.8.2's own ``KafkaConsumer``, run by
``reference/javaclient.py``'s ``JavaMember`` from the jar cache) records the same events from its rebalance
listener: the generation with each assignment (the Java client shows it there, not the protocol), each
assignment, revocation, loss and commit.
"""
from __future__ import annotations

import logging
import queue
import re
import threading
import time
from typing import Any, Callable, Iterable

from util.waiting import wait_for

_JOIN = re.compile(r"JoinGroup response: GenerationId (-?\d+), Protocol ([^,]*),.*: (.*)$")


#: the librdkafka assignor names a scenario uses -> the Java client's classes
JAVA_ASSIGNORS = {"range": "org.apache.kafka.clients.consumer.RangeAssignor",
                  "roundrobin": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
                  "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"}


class _MemberThread:
    """What both kinds of member share: the identity, the recorded events, and a thread that owns the consumer
    and runs the queued commands (commit, close) between polls.  A kind supplies ``_poll_once``, ``_commit``
    and ``_crashed`` (after its crash is recorded)."""

    COMMAND_TIMEOUT_S = 60.0

    def _setup(self, group: str, topic: str, index: int, static: bool,
               record: Callable[[str, str, Any], None]) -> None:
        self.group, self.topic, self.index, self.static = group, topic, index, static
        self.name = f"{group}/{index}"
        self.record = record                      # record(member, event, value)
        self.last_event = time.monotonic()
        self.assignment: set[tuple[str, int]] = set()
        self.generation: int | None = None
        self.commands: queue.Queue[tuple[str, threading.Event, list]] = queue.Queue()
        self.closed = threading.Event()

    def _start(self, thread_name: str) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True, name=thread_name)
        self.thread.start()

    def _event(self, event: str, value: Any) -> None:
        self.last_event = time.monotonic()
        self.record(self.name, event, value)

    def _poll_once(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _commit(self) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def _crashed(self) -> None:
        pass

    def _run(self) -> None:
        try:
            while True:
                try:
                    cmd, done, out = self.commands.get_nowait()
                except queue.Empty:
                    cmd = None
                if cmd == "close":
                    self.consumer.close()
                    done.set()
                    return
                if cmd == "commit":
                    out.append(self._commit())
                    done.set()
                self._poll_once()
        except Exception as e:   # a member that breaks says so in its stream
            self._event("crashed", f"{type(e).__name__}: {e}")
            self._crashed()
        finally:
            self.closed.set()

    def command(self, cmd: str, timeout_s: float | None = None) -> Any:
        done, out = threading.Event(), []
        self.commands.put((cmd, done, out))
        wait_for(lambda: done.is_set() or self.closed.is_set(), timeout_s or self.COMMAND_TIMEOUT_S,
                 f"member {self.name} to {cmd}")
        return out[0] if out else None

    def close(self) -> None:
        if not self.closed.is_set():
            self.command("close")
        self.thread.join(10)


class Member(_MemberThread):
    """One librdkafka consumer in ``group``, subscribed to ``topic``."""

    def __init__(self, bootstrap: str, group: str, topic: str, index: int, assignor: str, static: bool,
                 record: Callable[[str, str, Any], None], session_timeout_ms: int = 6000) -> None:
        from confluent_kafka import Consumer

        self._setup(group, topic, index, static, record)
        self.consumed: dict[tuple[str, int], int] = {}   # the next offset to read
        self.log = logging.getLogger(f"compare.member.{self.name}")
        self.log.propagate = False
        self.log.setLevel(logging.DEBUG)
        self.log.addHandler(_Lines(self._log_line))
        conf = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"m{index}",
                "partition.assignment.strategy": assignor, "enable.auto.commit": False,
                "auto.offset.reset": "earliest", "session.timeout.ms": session_timeout_ms,
                "heartbeat.interval.ms": min(1000, session_timeout_ms // 3), "debug": "cgrp", "logger": self.log,
                "topic.metadata.refresh.interval.ms": 1000, "reconnect.backoff.max.ms": 1000}
        if static:
            conf["group.instance.id"] = f"{group}-m{index}"
        self.consumer = Consumer(conf)
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost)
        self._start(f"member-{self.name}")

    # ------------------------------------------------------------------ what it sees

    def _log_line(self, line: str) -> None:
        m = _JOIN.search(line)
        if not m:
            return
        generation, error = int(m.group(1)), m.group(3).strip()
        if error == "(no error)":
            self.generation = generation
            self._event("joined", {"generation": generation, "protocol": m.group(2)})
        else:
            self._event("join_error", error.split(": ")[-1] if ": " in error else error)

    def _on_assign(self, consumer: Any, partitions: list) -> None:
        tps = sorted((p.topic, p.partition) for p in partitions)
        self.assignment |= set(tps)
        self._event("assigned", [f"{t}/{p}" for t, p in tps])

    def _on_revoke(self, consumer: Any, partitions: list) -> None:
        tps = sorted((p.topic, p.partition) for p in partitions)
        self.assignment -= set(tps)
        self._event("revoked", [f"{t}/{p}" for t, p in tps])

    def _on_lost(self, consumer: Any, partitions: list) -> None:
        tps = sorted((p.topic, p.partition) for p in partitions)
        self.assignment -= set(tps)
        self._event("lost", [f"{t}/{p}" for t, p in tps])

    # ------------------------------------------------------------------ its thread

    def _poll_once(self) -> None:
        msg = self.consumer.poll(0.1)
        if msg is not None and msg.error() is None:
            self.consumed[(msg.topic(), msg.partition())] = msg.offset() + 1

    def _commit(self) -> Any:
        """Read every assigned partition up to its high watermark, then commit what was read (sync)."""
        from confluent_kafka import KafkaException, TopicPartition

        deadline = time.monotonic() + 30
        for t, p in sorted(self.assignment):
            _, high = self.consumer.get_watermark_offsets(TopicPartition(t, p), timeout=10, cached=False)
            while self.consumed.get((t, p), 0) < high and time.monotonic() < deadline:
                msg = self.consumer.poll(0.1)
                if msg is not None and msg.error() is None:
                    self.consumed[(msg.topic(), msg.partition())] = msg.offset() + 1
        offsets = [TopicPartition(t, p, o) for (t, p), o in sorted(self.consumed.items()) if (t, p) in self.assignment]
        if not offsets:
            return "nothing to commit"
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as e:
            self._event("commit_error", e.args[0].name())
            return e.args[0].name()
        self._event("committed", {f"{tp.topic}/{tp.partition}": tp.offset for tp in offsets})
        return None



class _Lines(logging.Handler):
    def __init__(self, fn: Callable[[str], None]) -> None:
        super().__init__(logging.DEBUG)
        self.fn = fn

    def emit(self, record: logging.LogRecord) -> None:
        self.fn(record.getMessage())


class JavaGroupMember(_MemberThread):
    """One Java consumer (Kafka 2.8.2's ``KafkaConsumer``) in ``group``, with :class:`Member`'s interface: a
    thread that polls it and runs the queued commands between polls."""

    COMMAND_TIMEOUT_S = 90.0

    def __init__(self, bootstrap: str, group: str, topic: str, index: int, assignor: str, static: bool,
                 record: Callable[[str, str, Any], None], session_timeout_ms: int = 6000) -> None:
        from reference.javaclient import JavaMember

        self._setup(group, topic, index, static, record)
        configs: dict[str, Any] = {
            "client.id": f"m{index}", "partition.assignment.strategy": JAVA_ASSIGNORS[assignor],
            "auto.offset.reset": "earliest", "session.timeout.ms": session_timeout_ms,
            "heartbeat.interval.ms": min(1000, session_timeout_ms // 3), "metadata.max.age.ms": 1000,
            "reconnect.backoff.max.ms": 1000, "default.api.timeout.ms": 30000}
        if static:
            configs["group.instance.id"] = f"{group}-m{index}"
        self.consumer = JavaMember(bootstrap, group, topic, configs)
        self._start(f"java-member-{self.name}")

    def _seen(self, msgs: Iterable[dict]) -> None:
        for m in msgs:
            if "assigned" in m:
                generation = m.get("generation", -1)
                if generation >= 0 and generation != self.generation:
                    self.generation = generation
                    self._event("joined", {"generation": generation})
                self.assignment |= {_tp(x) for x in m["assigned"]}
                self._event("assigned", m["assigned"])
            elif "revoked" in m or "lost" in m:
                kind = "revoked" if "revoked" in m else "lost"
                self.assignment -= {_tp(x) for x in m[kind]}
                self._event(kind, m[kind])
            elif "poll_failed" in m:
                self._event("poll_error", m["poll_failed"])
            elif m.get("generation", -1) >= 0 and m["generation"] != self.generation:   # a poll's or commit's
                self.generation = m["generation"]
                self._event("joined", {"generation": self.generation})

    def _poll(self, ms: int = 100) -> int:
        msg, events = self.consumer.poll(ms)
        self._seen(events + [msg])
        return len(msg.get("polled", []))

    def _poll_once(self) -> None:
        self._poll()

    def _crashed(self) -> None:
        self.consumer.kill()

    def _commit(self) -> Any:
        """Read what there is (until two polls in a row bring nothing), then commit the positions (sync)."""
        deadline, empty = time.monotonic() + 30, 0
        while empty < 2 and time.monotonic() < deadline:
            empty = empty + 1 if self._poll(200) == 0 else 0
        if not self.assignment:
            return "nothing to commit"
        msg = self.consumer.commit()
        self._seen([msg])
        if "commit_failed" in msg:
            self._event("commit_error", msg["commit_failed"])
            return msg["commit_failed"]
        self._event("committed", msg["committed"])
        return None



def _tp(name: str) -> tuple[str, int]:
    t, _, p = name.rpartition("/")
    return t, int(p)
