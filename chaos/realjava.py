"""Chaos workloads run by Kafka 2.8.2's Java client (``workload.client: java``).

The producers and group members of chaos/realclients.py, with a Java ``KafkaProducer`` or ``KafkaConsumer`` in a
JVM of its own behind each (reference/javaclient.py, from the jar cache), driven one operation at a time over
its stdin and stdout, so the history is written as for the other real clients:

* **send**: invoked before the record is handed to the JVM, completed from the producer's callback (``ok`` with
  partition and offset).  Idempotent, acks=all, ``delivery.timeout.ms`` 5 s.  LeaderNotAvailable,
  NotEnoughReplicas and UnknownTopicOrPartition, or a ``send()`` that threw (not handed over), are ``fail``;
  anything else (a TimeoutException: the batch may be written) ``info``.
* **poll**: invoked before the JVM is told to poll (100 ms), completed with the records it returned.
* **commit**: ``commitSync`` of the positions reached (``default.api.timeout.ms`` 5 s), invoked before the
  JVM is told, ``ok`` when it returned; CommitFailed, RebalanceInProgress and the other group errors are
  ``fail``, anything else (a TimeoutException) ``info``.  The Java client says which generation it is in, so
  its commits and syncs carry it (the fenced-generation checker judges them).
* **sync**: one ``ok`` per assignment its rebalance listener reports, with the generation.
* **fetch-committed**: the final one, by a fresh Java consumer of the group once the members have left.
"""
from __future__ import annotations

import logging
from typing import Any

from chaos.realclients import COMMIT_REFUSED, NOT_WRITTEN, RealMemberWorker, RealProducerWorker
from reference.javaclient import JavaExited, JavaMember, JavaProducer, tp_name, unb64

log = logging.getLogger(__name__)

JAVA_NOT_WRITTEN = NOT_WRITTEN | {"LeaderNotAvailableException", "NotEnoughReplicasException",
                                  "UnknownTopicOrPartitionException"}
JAVA_COMMIT_REFUSED = COMMIT_REFUSED | {"CommitFailedException", "RebalanceInProgressException",
                                        "IllegalGenerationException", "UnknownMemberIdException",
                                        "NotCoordinatorException", "CoordinatorNotAvailableException",
                                        "CoordinatorLoadInProgressException", "FencedInstanceIdException"}
ASSIGNORS = {"range": "org.apache.kafka.clients.consumer.RangeAssignor",
             "roundrobin": "org.apache.kafka.clients.consumer.RoundRobinAssignor"}
HEAP_MB = 128


class JavaProducerWorker(RealProducerWorker):
    """One Java producer: sends paced as the other clients', one in flight."""

    def body(self) -> None:
        p = JavaProducer(self.bootstrap, {"acks": "all", "enable.idempotence": True, "linger.ms": 0,
                                          "delivery.timeout.ms": 5000, "request.timeout.ms": 4000,
                                          "max.block.ms": 2000, "client.id": f"chaos-producer-{self.index}"},
                         on_line=self._outcome, heap_mb=HEAP_MB)
        try:
            for seq in self._paced():
                value, partition = self._invoke(seq)
                try:
                    p.send(value, self.spec.topic, value.encode(), partition=partition)
                except JavaExited as e:
                    self._done(value, "info", {}, error="the JVM is gone")
                    raise RuntimeError(f"the Java producer exited: {e}") from None
                self._await(value)
        finally:
            p.close(timeout=15)
            self._abandon()

    def _outcome(self, m: dict) -> None:
        """The producer's callback (from the reader thread): complete the send it names."""
        if "id" not in m:
            return
        if m["ok"]:
            self._done(m["id"], "ok", {"partition": m["partition"], "offset": m["offset"]})
        elif not m.get("handed", True):
            self._done(m["id"], "fail", {}, error=f"send: {m['error']}")
        else:
            self._done(m["id"], _kind(m["error"], JAVA_NOT_WRITTEN), {}, error=m["error"])


class JavaMemberWorker(RealMemberWorker):
    """One Java group member: poll, then commit every ``commit.interval.ms``, as the other clients' members."""

    def _open(self) -> Any:
        s = self.spec
        return JavaMember(self.bootstrap, s.id, s.topic, {
            "auto.offset.reset": "earliest", "session.timeout.ms": s.session_timeout_ms,
            "heartbeat.interval.ms": s.heartbeat_interval_ms, "partition.assignment.strategy": ASSIGNORS[s.assignor],
            "max.poll.interval.ms": max(10000, s.session_timeout_ms), "request.timeout.ms": 5000,
            "default.api.timeout.ms": 5000, "client.id": f"chaos-{s.id}-{self.slot}"}, heap_mb=HEAP_MB)

    def _member_id(self) -> str:
        return getattr(self.member, "member_id", "") or ""

    def _events(self, events: list[dict]) -> None:
        for e in events:
            if "assigned" in e:
                self._assigned([_split(name) for name in e["assigned"]], e.get("generation"))
            elif "revoked" in e or "lost" in e:
                self._revoked()

    def _poll(self) -> None:
        value: dict[str, Any] = {"member": self._member_id()}
        op = self.history.invoke(self.process, "poll", value, group=self.spec.id)
        try:
            msg, events = self.member.poll(100)
        except JavaExited as e:
            self.history.complete(op, "info", value, error="the JVM is gone")
            raise RuntimeError(f"the Java member exited: {e}") from None
        self._events(events)
        if "poll_failed" in msg:
            self.history.complete(op, "fail", value, error=f"{msg['poll_failed']}: {msg.get('message')}"[:200])
            self.stop_event.wait(0.05)
            return
        records = [[t, p, o, (unb64(v) or b"").decode("utf-8", "replace")] for t, p, o, _k, v, _h in msg["polled"]]
        self.history.complete(op, "ok", dict(value, records=records))
        for t, p, o, _ in records:
            self.positions[(t, p)] = o + 1

    def _commit(self) -> None:
        if not self.positions:
            return
        offsets = {tp_name(*tp): o for tp, o in sorted(self.positions.items())}
        value: dict[str, Any] = {"member": self._member_id(), "offsets": offsets}
        if self.member.generation is not None and self.member.generation >= 0:
            value["generation"] = self.member.generation
        op = self.history.invoke(self.process, "commit", value, group=self.spec.id)
        try:
            done = self.member.commit(dict(self.positions))
        except JavaExited as e:
            self.history.complete(op, "info", value, error="the JVM is gone")
            raise RuntimeError(f"the Java member exited: {e}") from None
        if "commit_failed" in done:
            name = done["commit_failed"]
            self.history.complete(op, _kind(name, JAVA_COMMIT_REFUSED), value, error=name)
            return
        self.history.complete(op, "ok", value)

    def final_committed(self) -> dict:
        topic, tps = self.spec.topic, list(range(self.partitions))
        self.recorder.final = True
        self.recorder.invoke("fetch-committed", {"partitions": [tp_name(topic, p) for p in tps]})
        try:
            reader = JavaMember(self.bootstrap, self.spec.id, topic, {"default.api.timeout.ms": 10000,
                                                                      "client.id": f"chaos-{self.spec.id}-final"},
                                heap_mb=HEAP_MB)
            try:
                got = reader.committed([(topic, p) for p in tps])
            finally:
                reader.close()
        except JavaExited as e:
            self.recorder.complete("fetch-committed", "fail", {}, error="the JVM is gone")
            raise RuntimeError(f"the Java reader exited: {e}") from None
        if "fetch_failed" in got:
            self.recorder.complete("fetch-committed", "fail", {}, error=got["fetch_failed"])
            raise RuntimeError(f"fetching {self.spec.id}'s committed offsets: {got}")
        out = {name: int(o) for name, o in got["fetched"].items()}
        self.recorder.complete("fetch-committed", "ok", {"offsets": out})
        return out


def _split(name: str) -> tuple[str, int]:
    topic, _, partition = name.rpartition("/")
    return topic, int(partition)


def _kind(name: str, refused: set[str]) -> str:
    return "fail" if name in refused else "info"
