"""Chaos workloads run by real Kafka clients (``workload.client``): confluent-kafka (librdkafka) and kafka-python.

They talk to the brokers' Kafka listeners through the fault proxy (links ``client->b<j>:kafka``; the
brokers advertise the proxy's ports) and write the same history as chaos/workload.py:

* **send**: invoked when the record is handed to the client, completed from its delivery callback
  (``ok`` with partition and offset).  acks=all; kafka-python with ``retries=0``, librdkafka idempotent
  (it re-sends after NOT_LEADER_OR_FOLLOWER whatever ``retries`` says), so a value at two offsets
  is a bug.  Errors that mean "not written" (LEADER_NOT_AVAILABLE, NOT_ENOUGH_REPLICAS,
  UNKNOWN_TOPIC_OR_PARTITION) are ``fail``; anything else (NOT_LEADER_OR_FOLLOWER, timeouts, lost
  connections) is ``info``.
* **poll**: every record the client handed over, as ``[topic, partition, offset, value]``.
* **commit**: a synchronous commit of the positions reached (confluent-kafka ``asynchronous=False``,
  kafka-python ``commit(offsets)``): ``ok`` when the client returns, ``fail`` on a group error
  (rebalance, generation, member, coordinator), ``info`` otherwise.
* **sync**: one ``ok`` per assignment the client reports (its rebalance callback), with the
  assignment (and, for kafka-python, the generation).  Joins, heartbeats and syncs happen inside
  the clients and are not seen one by one.
* **fetch-committed**: the final one, by a short-lived client of the group once the members stopped.

What they lack: commits carry no ``node`` (the clients do not say which broker answered), so the
split-coordinator checker skips them; librdkafka does not expose its generation, so its commits
and syncs carry none and the fenced-generation checker does not judge them.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any

from chaos.rdkafka_close import close_group_consumer
from chaos.scenario import GroupSpec, ProducerSpec
from chaos.workload import GroupRecorder, Processes, Worker

log = logging.getLogger(__name__)

# NOT_LEADER_OR_FOLLOWER is not among them: an acks=all produce the leader appended and then lost the
# leadership over is answered with it (as in Kafka's DelayedProduce), and its record may well be committed
NOT_WRITTEN = {"LEADER_NOT_AVAILABLE", "NOT_ENOUGH_REPLICAS", "UNKNOWN_TOPIC_OR_PART", "UNKNOWN_TOPIC_OR_PARTITION",
               "LeaderNotAvailableError", "NotEnoughReplicasError", "UnknownTopicOrPartitionError"}
COMMIT_REFUSED = {"REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID", "NOT_COORDINATOR",
                  "NOT_COORDINATOR_FOR_GROUP", "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS",
                  "_ASSIGNMENT_LOST", "_STATE", "CommitFailedError", "RebalanceInProgressError",
                  "IllegalGenerationError", "UnknownMemberIdError", "NotCoordinatorError",
                  "CoordinatorNotAvailableError", "CoordinatorLoadInProgressError", "IllegalStateError"}


def _tp(topic: str, partition: int) -> str:
    return f"{topic}/{partition}"


def _kind(name: str, refused: set[str]) -> str:
    return "fail" if name in refused else "info"


# ------------------------------------------------------------------------------------ producers

class RealProducerWorker(Worker):
    """Sends unique values round-robin over the partitions, ``rate`` per second; each send's
    outcome comes from the client's delivery callback."""
    opens_client = True

    def __init__(self, history, procs: Processes, client: str, bootstrap: str, spec: ProducerSpec,
                 partitions: int, index: int, stop: threading.Event):
        super().__init__(f"{client}-producer-{index}", stop)
        self.history, self.client, self.bootstrap = history, client, bootstrap
        self.spec, self.partitions, self.index = spec, partitions, index
        self.process = procs.new()
        self._open: dict[str, dict] = {}
        self._lock = threading.Condition()

    def _done(self, value: str, type_: str, extra: dict, error: str | None = None) -> None:
        with self._lock:
            op = self._open.pop(value, None)
            if op is not None:
                self.history.complete(op, type_, dict(op["value"], **extra), error=error)
            self._lock.notify_all()

    def _await(self, value: str, serve=None, timeout_s: float = 8.0) -> None:
        """One operation at a time per process (Jepsen's rule): wait for the delivery report."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if serve is not None:
                serve(0.05)   # librdkafka calls delivery callbacks from poll()
            with self._lock:
                if value not in self._open:
                    return
                if serve is None:
                    self._lock.wait(0.05)   # kafka-python calls them from its sender thread
        with self._lock:
            left = self._open.pop(value, None)
            if left is not None:
                self.history.complete(left, "info", left["value"], error="no delivery report in time")

    def body(self) -> None:
        if self.client == "confluent-kafka":
            self._run_confluent()
        else:
            self._run_kafka_python()

    def _paced(self):
        self.ready.set()   # every producer here builds its client, then paces its sends from here
        period, next_at, seq = 1.0 / self.spec.rate, time.monotonic(), 0
        while not self.stop_event.wait(max(0.0, next_at - time.monotonic())):
            next_at += period
            yield seq
            seq += 1

    def _invoke(self, seq: int) -> tuple[str, int]:
        value, partition = f"p{self.index}-{seq}", seq % self.partitions
        op = self.history.invoke(self.process, "send", {"topic": self.spec.topic, "value": value,
                                                        "partition": partition})
        with self._lock:
            self._open[value] = op
        return value, partition

    def _run_confluent(self) -> None:
        from confluent_kafka import Producer
        # librdkafka re-sends a batch refused with NOT_LEADER_OR_FOLLOWER whatever ``retries`` says (it does
        # not count that as a retry), so without idempotence a batch appended by a leader on its way out is
        # written twice; idempotence makes the new leader recognise the re-send
        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 0, "message.timeout.ms": 5000,
                      "request.timeout.ms": 4000, "log_level": 3, "client.id": f"chaos-producer-{self.index}"})

        def delivered(err, msg) -> None:
            value = msg.value().decode()
            if err is None:
                self._done(value, "ok", {"partition": msg.partition(), "offset": msg.offset()})
            else:
                self._done(value, _kind(err.name(), NOT_WRITTEN), {}, error=err.name())

        try:
            for seq in self._paced():
                value, partition = self._invoke(seq)
                try:
                    p.produce(self.spec.topic, value=value.encode(), partition=partition, on_delivery=delivered)
                except Exception as e:  # BufferError, KafkaException: not handed over
                    self._done(value, "fail", {}, error=f"produce: {e}"[:200])
                    continue
                self._await(value, p.poll)
        finally:
            p.flush(8)
            self._abandon()

    def _run_kafka_python(self) -> None:
        from kafka import KafkaProducer
        p = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", retries=0, linger_ms=0,
                          request_timeout_ms=4000, delivery_timeout_ms=5000, max_block_ms=2000,
                          client_id=f"chaos-producer-{self.index}")
        try:
            for seq in self._paced():
                value, partition = self._invoke(seq)
                try:
                    fut = p.send(self.spec.topic, value=value.encode(), partition=partition)
                except Exception as e:  # KafkaTimeoutError while blocked on metadata: not handed over
                    self._done(value, "fail", {}, error=f"send: {type(e).__name__}")
                    continue
                fut.add_callback(lambda md, v=value: self._done(v, "ok", {"partition": md.partition,
                                                                          "offset": md.offset}))
                fut.add_errback(lambda e, v=value: self._done(v, _kind(type(e).__name__, NOT_WRITTEN), {},
                                                              error=type(e).__name__))
                self._await(value)
        finally:
            try:
                p.close(timeout=8)
            except Exception as e:
                log.info("closing the producer: %s", e)
            self._abandon()

    def _abandon(self) -> None:
        """Sends still open when the client closed: their outcome is unknown."""
        with self._lock:
            left, self._open = list(self._open.values()), {}
        for op in left:
            self.history.complete(op, "info", op["value"], error="no delivery report before close")


# ------------------------------------------------------------------------------------ group members

class RealMemberWorker(Worker):
    """One consumer-group member, a real client: it polls, records, and commits its positions
    every ``commit.interval.ms`` synchronously.  No crashes or stalls (the scenario refuses them)."""
    opens_client = True

    crashes = 0
    stalls = 0

    def __init__(self, history, procs: Processes, client: str, bootstrap: str, spec: GroupSpec,
                 partitions: int, slot: int, stop: threading.Event):
        super().__init__(f"{client}-member-{spec.id}-{slot}", stop)
        self.history, self.procs, self.client, self.bootstrap = history, procs, client, bootstrap
        self.spec, self.partitions, self.slot = spec, partitions, slot
        self.process = procs.new()
        self.rebalance_process = procs.new()
        self.recorder = GroupRecorder(history, spec.id, self.process, procs.new())
        self.member: Any = None
        self.draining = threading.Event()
        self.positions: dict[tuple[str, int], int] = {}
        self.generation: int | None = None
        self.assignments = 0

    # the rebalance callbacks: one ok sync per assignment (the rebalance process)
    def _assigned(self, tps: list[tuple[str, int]], generation: int | None) -> None:
        self.assignments += 1
        for tp in list(self.positions):
            if tp not in tps:
                del self.positions[tp]
        value: dict[str, Any] = {"member": self._member_id(), "assignment": sorted(_tp(*tp) for tp in tps)}
        if generation is not None:
            value["generation"] = generation
        op = self.history.invoke(self.rebalance_process, "sync", value, group=self.spec.id)
        self.history.complete(op, "ok", value)

    def _revoked(self) -> None:
        self.positions.clear()

    def _member_id(self) -> str:
        try:
            if self.client == "confluent-kafka":
                return self.member.memberid() or ""
            return self.member._coordinator._generation.member_id   # kafka-python keeps it there
        except Exception:
            return ""

    def _kp_generation(self) -> int | None:
        try:
            g = self.member._coordinator.generation_if_stable()
            return g.generation_id if g is not None else None
        except Exception:
            return None

    def body(self) -> None:
        self.member = self._open()
        self.ready.set()
        commit_at = time.monotonic() + self.spec.commit_interval_ms / 1000
        try:
            while not self.stop_event.is_set():
                self._poll()
                if time.monotonic() >= commit_at:
                    self._commit()
                    commit_at = time.monotonic() + self.spec.commit_interval_ms / 1000
        finally:
            try:
                if self.client == "confluent-kafka":
                    close_group_consumer(self.member)   # not close() alone: librdkafka's close hang
                else:
                    self.member.close()
            except Exception as e:
                log.debug("close failed: %s", e)

    def _open(self) -> Any:
        s = self.spec
        common_ms = {"session": s.session_timeout_ms, "heartbeat": s.heartbeat_interval_ms}
        if self.client == "confluent-kafka":
            from confluent_kafka import Consumer
            c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": s.id, "enable.auto.commit": False,
                          "auto.offset.reset": "earliest", "session.timeout.ms": common_ms["session"],
                          "heartbeat.interval.ms": common_ms["heartbeat"], "partition.assignment.strategy": s.assignor,
                          "max.poll.interval.ms": max(10000, s.session_timeout_ms), "socket.timeout.ms": 4000, "log_level": 3,
                          "client.id": f"chaos-{s.id}-{self.slot}"})
            c.subscribe([s.topic], on_assign=lambda c_, parts: self._assigned(
                [(p.topic, p.partition) for p in parts], None),
                on_revoke=lambda c_, parts: self._revoked(), on_lost=lambda c_, parts: self._revoked())
            return c
        from kafka import ConsumerRebalanceListener, KafkaConsumer
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        worker = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                worker._revoked()

            def on_partitions_assigned(self, assigned):
                worker._assigned([(p.topic, p.partition) for p in assigned], worker._kp_generation())

        assignor = RangePartitionAssignor if s.assignor == "range" else RoundRobinPartitionAssignor
        c = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=s.id, enable_auto_commit=False,
                          auto_offset_reset="earliest", session_timeout_ms=common_ms["session"],
                          heartbeat_interval_ms=common_ms["heartbeat"], partition_assignment_strategy=[assignor],
                          max_poll_interval_ms=max(10000, s.session_timeout_ms), request_timeout_ms=5000,
                          client_id=f"chaos-{s.id}-{self.slot}")
        c.subscribe([s.topic], listener=Listener())
        c.partitions_for_topic(s.topic)   # its metadata before the first join (kafka-python's join race: docs/kafka-listener.md)
        return c

    def _poll(self) -> None:
        value: dict[str, Any] = {"member": self._member_id()}
        op = self.history.invoke(self.process, "poll", value, group=self.spec.id)
        records: list[list[Any]] = []
        try:
            if self.client == "confluent-kafka":
                for m in self.member.consume(num_messages=100, timeout=0.1):
                    if m.error() is None:
                        records.append([m.topic(), m.partition(), m.offset(), (m.value() or b"").decode()])
            else:
                for batch in self.member.poll(timeout_ms=100, max_records=100).values():
                    for m in batch:
                        records.append([m.topic, m.partition, m.offset, (m.value or b"").decode()])
        except Exception as e:
            self.history.complete(op, "fail", value, error=f"{type(e).__name__}: {e}"[:200])
            self.stop_event.wait(0.05)
            return
        self.history.complete(op, "ok", dict(value, records=records))
        for t, p, o, _ in records:
            self.positions[(t, p)] = o + 1

    def _commit(self) -> None:
        if not self.positions:
            return
        offsets = {_tp(*tp): o for tp, o in sorted(self.positions.items())}
        value: dict[str, Any] = {"member": self._member_id(), "offsets": offsets}
        gen = self._kp_generation() if self.client == "kafka-python" else None
        if gen is not None:
            value["generation"] = gen
        op = self.history.invoke(self.process, "commit", value, group=self.spec.id)
        try:
            if self.client == "confluent-kafka":
                from confluent_kafka import TopicPartition
                res = self.member.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in self.positions.items()],
                                         asynchronous=False)
                errs = [tp.error.name() for tp in res or [] if tp.error is not None]
                if errs:
                    self.history.complete(op, _kind(errs[0], COMMIT_REFUSED), value, error=errs[0])
                    return
            else:
                from kafka.structs import OffsetAndMetadata, TopicPartition
                self.member.commit({TopicPartition(t, p): OffsetAndMetadata(o, "", -1)
                                    for (t, p), o in self.positions.items()}, timeout_ms=5000)
        except Exception as e:
            name = _error_name(e)
            self.history.complete(op, _kind(name, COMMIT_REFUSED), value, error=name)
            return
        self.history.complete(op, "ok", value)

    def final_committed(self) -> dict:
        """The group's committed offsets, read by a new client of the group (not a member) once the
        members have left: the ``final`` fetch-committed."""
        topic, tps = self.spec.topic, list(range(self.partitions))
        self.recorder.final = True
        asked = {"partitions": [_tp(topic, p) for p in tps]}
        self.recorder.invoke("fetch-committed", asked)
        out: dict[str, int] = {}
        try:
            if self.client == "confluent-kafka":
                from confluent_kafka import Consumer, TopicPartition
                c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.spec.id,
                              "enable.auto.commit": False})
                try:
                    for tp in c.committed([TopicPartition(topic, p) for p in tps], timeout=10):
                        out[_tp(tp.topic, tp.partition)] = tp.offset if tp.offset >= 0 else -1
                finally:
                    c.close()
            else:
                from kafka import KafkaConsumer
                from kafka.structs import TopicPartition
                c = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=self.spec.id, enable_auto_commit=False)
                try:
                    for p in tps:
                        o = c.committed(TopicPartition(topic, p), timeout_ms=10000)
                        out[_tp(topic, p)] = o if o is not None else -1
                finally:
                    c.close()
        except Exception as e:
            self.recorder.complete("fetch-committed", "fail", {}, error=_error_name(e))
            raise
        self.recorder.complete("fetch-committed", "ok", {"offsets": out})
        return out


def _error_name(e: BaseException) -> str:
    """A client exception as the name of its Kafka error (librdkafka's KafkaError name, or
    kafka-python's exception class)."""
    args = getattr(e, "args", ())
    if args and hasattr(args[0], "name") and callable(args[0].name):
        return args[0].name()
    return type(e).__name__
