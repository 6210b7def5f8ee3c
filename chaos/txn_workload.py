"""The transactional workload's clients (``workload.transactions``), recorded as history operations.

* :class:`ConfluentPipeline`: librdkafka's exactly-once consume-transform-produce (confluent-kafka): a
  read_committed consumer in the group, a transactional producer; per batch of input records one
  transaction with one output record each (judge/checks_txn.py's value format) and the consumer's offsets
  (``send_offsets_to_transaction``).  Ops: ``init-txn``, ``txn`` (begin, produce, send offsets), ``end-txn``
  (commit; after an abortable error an abort, and the consumer rewinds to the committed offsets).  It can be
  frozen before a commit (a zombie: chaos/txn_run.py starts a newer process with its transactional id
  meanwhile); a fatal error (fenced) ends the process.  A transactional call still running
  :data:`HUNG_AFTER_S` past its own timeout is hung (:meth:`ConfluentPipeline.hung`): librdkafka 2.16's
  ``send_offsets_to_transaction`` can wait far past its timeout for a group coordinator whose broker handle
  it dropped (issues #5456, #5511).  chaos/txn_run.py then gives up on the process, as an application's watchdog
  restarting it would (:meth:`ConfluentPipeline.abandon`): once its call returns it records the outcome and
  makes no other client call.
* :class:`JavaPipeline`: the same with Kafka 2.8.2's Java client (reference/java/JavaEosPipeline.java, one
  JVM), its reports turned into the same operations as they come.
* :class:`OutputReader`: a read_committed consumer of the whole output (assigned, from the beginning),
  each poll a ``poll`` operation with ``isolation`` ``read_committed``.
* :func:`final_output_read`: the end's read_committed read of each output partition up to its last stable
  offset, a final ``poll`` each.

What they record is what judge/checks_txn.py reads (its docstring has the operations' fields).
"""
from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Any

from chaos.rdkafka_close import close_group_consumer
from chaos.txn_scenario import TxnSpec
from chaos.workload import Processes, Worker
from judge.checks_txn import output_value

log = logging.getLogger(__name__)

#: how long past its own timeout a client call runs before its pipeline counts as hung
HUNG_AFTER_S = 10.0


def _error(e: Exception) -> tuple[str, bool, bool, bool]:
    """(name, retriable, requires abort, fatal) of a librdkafka error."""
    err = e.args[0] if e.args else None
    if hasattr(err, "name"):
        return err.name(), err.retriable(), err.txn_requires_abort(), err.fatal()
    return type(e).__name__, False, False, True


class ConfluentPipeline(Worker):
    def __init__(self, history, procs: Processes, bootstrap: str, spec: TxnSpec, index: int, instance: int,
                 partitions_out: int, stop: threading.Event) -> None:
        super().__init__(f"txn-pipeline-{index}.{instance}", stop)
        self.history, self.bootstrap, self.spec = history, bootstrap, spec
        self.index, self.instance = index, instance
        self.tid = spec.transactional_ids()[index]
        self.partitions_out = partitions_out
        self.process = procs.new()
        self.freeze = threading.Event()      # set: stop before the next commit until released
        self.frozen = threading.Event()      # set by the pipeline once it waits there
        self.release = threading.Event()
        self.initialized = threading.Event()  # set once init_transactions succeeded
        self.abandoned = threading.Event()    # set: hung, replaced; no more client calls once the call returns
        self.fenced = False
        self._overdue_at: float | None = None  # time.monotonic() past which the call in progress is hung
        self.commits = 0
        self.last_commit = -1.0               # time.monotonic() of its last commit (-1: none yet)

    def _op(self, f: str, value: dict) -> dict:
        return self.history.invoke(self.process, f, value)

    def _call(self, timeout_s: float, fn, *args):
        """``fn(*args)``, a client call bounded by ``timeout_s``, watched: see :meth:`hung`."""
        self._overdue_at = time.monotonic() + timeout_s + HUNG_AFTER_S
        try:
            return fn(*args)
        finally:
            self._overdue_at = None

    def hung(self, now: float) -> bool:
        """Whether a client call of this pipeline is still running :data:`HUNG_AFTER_S` past its timeout at ``now``
        (``time.monotonic()``)."""
        at = self._overdue_at
        return at is not None and now > at

    def abandon(self) -> None:
        """Give up on this process (hung): when its call returns it records the outcome and ends, leaving its open
        transaction to the successor's InitProducerId and its partitions to the group."""
        self.abandoned.set()

    def body(self) -> None:
        from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
        s = self.spec
        client_id = f"{self.tid}#{self.instance}"
        producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.tid,
                             "transaction.timeout.ms": s.transaction_timeout_ms, "linger.ms": 5,
                             "client.id": client_id})
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": s.group, "client.id": client_id,
                             "isolation.level": "read_committed", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                             "max.poll.interval.ms": 8000})
        try:
            if not self._init(producer):
                return
            consumer.subscribe([s.input])
            seq = 0
            while not self.stop_event.is_set() and not self.fenced and not self.abandoned.is_set():
                msgs = [m for m in consumer.consume(s.max_records, 0.5) if m.error() is None]
                if not msgs:
                    continue
                self._transaction(producer, consumer, msgs, seq, KafkaException, TopicPartition)
                seq += 1
        finally:
            try:
                close_group_consumer(consumer)   # not consumer.close() alone: librdkafka's close hang
            except Exception:
                pass
            try:
                producer.flush(5)
            except Exception:   # a fenced producer's flush raises its fatal error again
                pass

    def _init(self, producer) -> bool:
        from confluent_kafka import KafkaException
        while not self.stop_event.is_set() and not self.abandoned.is_set():
            op = self._op("init-txn", {"transactional_id": self.tid, "instance": self.instance})
            try:
                self._call(30, producer.init_transactions, 30)
                self.history.complete(op, "ok")
                self.initialized.set()
                return True
            except KafkaException as e:
                name, retriable, _abort, fatal = _error(e)
                self.history.complete(op, "info" if retriable else "fail", error=name)
                if fatal:
                    self.fenced = True
                    return False
        return False

    def _transaction(self, producer, consumer, msgs, seq: int, KafkaException, TopicPartition) -> None:
        s, base = self.spec, {"transactional_id": self.tid, "instance": self.instance, "seq": seq}
        inputs = [[m.topic(), m.partition(), m.offset(), (m.value() or b"").decode("utf-8", "replace")] for m in msgs]
        ends: dict[tuple[str, int], int] = {}
        for m in msgs:
            ends[(m.topic(), m.partition())] = max(ends.get((m.topic(), m.partition()), 0), m.offset() + 1)
        offsets = {f"{t}/{p}": o for (t, p), o in sorted(ends.items())}
        op = self._op("txn", {**base, "inputs": inputs, "offsets": offsets})
        try:
            producer.begin_transaction()
            for m, rec in zip(msgs, inputs):
                producer.produce(s.output, key=m.key(), value=output_value(rec[3], self.tid, self.instance, seq),
                                 partition=m.partition() % self.partitions_out)
            self._call(30, producer.send_offsets_to_transaction,
                       [TopicPartition(t, p, o) for (t, p), o in sorted(ends.items())],
                       consumer.consumer_group_metadata(), 30)
            self.history.complete(op, "ok")
        except KafkaException as e:
            name, _retriable, _abort, fatal = _error(e)
            self.history.complete(op, "fail", error=name)
            self._after_failure(producer, consumer, base, fatal)
            return
        if self.abandoned.is_set():      # replaced while it hung: the successor aborts this transaction
            return
        if self.freeze.is_set():         # a zombie: stop here until a newer process has our transactional id
            self.frozen.set()
            self.release.wait()
        end = self._op("end-txn", {**base, "commit": True})
        while True:
            try:
                self._call(30, producer.commit_transaction, 30)
                self.history.complete(end, "ok")
                self.commits += 1
                self.last_commit = time.monotonic()
                return
            except KafkaException as e:
                name, retriable, _abort, fatal = _error(e)
                if retriable and not self.stop_event.is_set() and not self.abandoned.is_set():
                    continue
                self.history.complete(end, "info" if retriable else "fail", error=name)
                self._after_failure(producer, consumer, base, fatal)
                return

    def _after_failure(self, producer, consumer, base: dict, fatal: bool) -> None:
        from confluent_kafka import KafkaException
        if fatal:
            self.fenced = True
            return
        if self.abandoned.is_set():
            return
        op = self._op("end-txn", {**base, "commit": False})
        try:
            self._call(30, producer.abort_transaction, 30)
            self.history.complete(op, "ok")
        except KafkaException as e:
            name, retriable, _abort, fatal = _error(e)
            self.history.complete(op, "info" if retriable else "fail", error=name)
            if fatal:
                self.fenced = True
                return
        try:       # start over from the group's committed offsets
            for tp in self._call(30, consumer.committed, consumer.assignment(), 30):
                if tp.offset >= 0:
                    consumer.seek(tp)
        except KafkaException as e:
            log.info("%s: rewinding failed: %s", self.name, e)


class JavaPipeline(Worker):
    """The same pipeline in a JVM (reference/javaclient.py's JavaEosPipeline), its reports recorded."""

    def __init__(self, history, procs: Processes, bootstrap: str, spec: TxnSpec, index: int, instance: int,
                 partitions_out: int, stop: threading.Event) -> None:
        super().__init__(f"txn-java-pipeline-{index}.{instance}", stop)
        self.history, self.bootstrap, self.spec = history, bootstrap, spec
        self.index, self.instance = index, instance
        self.tid = spec.transactional_ids()[index]
        self.partitions_out = partitions_out
        self.process = procs.new()
        self.fenced = False
        self.commits = 0
        self._open: dict | None = None
        self._lock = threading.Lock()

    def _start(self, f: str, value: dict, client_ns: int | None = None) -> None:
        # the reader thread may take a line late (a loaded machine): the JVM's own stamp of the moment it asked
        # (System.nanoTime, the history's monotonic clock) goes with the invoke as ``client_time``
        extra = {"client_time": client_ns} if isinstance(client_ns, int) else {}
        self._open = self.history.invoke(self.process, f, value, **extra)

    def _end(self, type_: str, value: dict | None = None, error: str | None = None) -> None:
        if self._open is not None:
            self.history.complete(self._open, type_, value, error=error)
            self._open = None

    def _line(self, m: dict) -> None:
        with self._lock:
            base = {"transactional_id": self.tid, "instance": self.instance, "seq": m.get("seq")}
            if "begin" in m:
                self._start("txn", {**base, "seq": m["begin"]})
            elif "produced" in m:
                self._end("ok", {**base, "seq": m["produced"], "inputs": m.get("inputs"), "offsets": m.get("offsets")})
            elif "committing" in m:
                self._start("end-txn", {**base, "seq": m["committing"], "commit": True}, m.get("ns"))
            elif "committed" in m:
                self.commits += 1
                self._end("ok")
            elif "aborted" in m:   # a commit that timed out may have happened: unknown
                unknown = m.get("stage") == "commit" and m["aborted"] == "TimeoutException"
                self._end("info" if unknown else "fail", error=m["aborted"])
            elif "aborting" in m:
                self._start("end-txn", {**base, "seq": m["aborting"], "commit": False}, m.get("ns"))
            elif "abort_done" in m:
                self._end("ok")
            elif "fatal" in m:
                self.fenced = True
                self._end("fail", error=m["fatal"])    # fenced: refused

    def body(self) -> None:
        from reference.javaclient import JavaEosPipeline
        s = self.spec
        init = self.history.invoke(self.process, "init-txn", {"transactional_id": self.tid, "instance": self.instance})
        configs = {"tag": f"{self.tid}#{self.instance}", "sink.partitions": self.partitions_out,
                   "producer.transaction.timeout.ms": s.transaction_timeout_ms, "consumer.max.poll.records": s.max_records,
                   "consumer.session.timeout.ms": 6000, "consumer.max.poll.interval.ms": 8000,
                   "client.id": f"{self.tid}#{self.instance}"}
        try:
            pipe = JavaEosPipeline(self.bootstrap, self.tid, s.group, s.input, s.output, configs, on_line=self._line)
        except Exception as e:
            self.history.complete(init, "fail", error=type(e).__name__)
            self.fenced = True
            return
        self.history.complete(init, "ok")
        try:
            while not self.stop_event.wait(0.2):
                if not pipe.running():
                    self.fenced = True
                    break
        finally:
            pipe.stop(60)
            with self._lock:
                self._end("info", error="stopped")


class OutputReader(Worker):
    """A read_committed consumer of every output partition, from the beginning; each poll an operation."""

    def __init__(self, history, procs: Processes, bootstrap: str, spec: TxnSpec, partitions_out: int, index: int,
                 stop: threading.Event) -> None:
        super().__init__(f"txn-reader-{index}", stop)
        self.history, self.bootstrap, self.spec = history, bootstrap, spec
        self.partitions_out = partitions_out
        self.process = procs.new()
        self.records = 0

    def body(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"txn-reader-{uuid.uuid4().hex[:8]}",
                      "isolation.level": "read_committed", "enable.auto.commit": False,
                      "client.id": f"txn-reader-{self.name}"})
        c.assign([TopicPartition(self.spec.output, p, OFFSET_BEGINNING) for p in range(self.partitions_out)])
        try:
            while not self.stop_event.is_set():
                op = self.history.invoke(self.process, "poll", {"topic": self.spec.output,
                                                                "isolation": "read_committed"})
                msgs = [m for m in c.consume(500, 1.0) if m.error() is None]
                recs = [[m.topic(), m.partition(), m.offset(), (m.value() or b"").decode("utf-8", "replace")]
                        for m in msgs]
                self.records += len(recs)
                self.history.complete(op, "ok", {"topic": self.spec.output, "isolation": "read_committed",
                                                 "records": recs})
        finally:
            c.close()


def final_output_read(history, procs: Processes, bootstrap: str, spec: TxnSpec, partition: int,
                      timeout_s: float = 60.0) -> bool:
    """A read_committed read of one output partition, from its start up to its last stable offset now, as a
    final ``poll``; False when it did not get there in ``timeout_s``."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition
    process = procs.new()
    value = {"topic": spec.output, "partition": partition, "isolation": "read_committed"}
    op = history.invoke(process, "poll", value, final=True)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"txn-final-{uuid.uuid4().hex[:8]}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    recs: list[list[Any]] = []
    try:
        tp = TopicPartition(spec.output, partition, OFFSET_BEGINNING)
        _lo, end = c.get_watermark_offsets(tp, timeout=10, cached=False)   # read_committed: the LSO
        c.assign([tp])
        deadline = time.monotonic() + timeout_s
        position = 0
        while position < end and time.monotonic() < deadline:
            for m in c.consume(500, 1.0):
                if m.error() is None:
                    recs.append([m.topic(), m.partition(), m.offset(), (m.value() or b"").decode("utf-8", "replace")])
                    position = m.offset() + 1
            got = c.position([TopicPartition(spec.output, partition)])
            if got and got[0].offset >= 0:
                position = max(position, got[0].offset)
        if position < end:
            history.complete(op, "info", dict(value, records=recs, end=end), error="timed out")
            return False
        history.complete(op, "ok", dict(value, records=recs, end=end))
        return True
    except KafkaException as e:
        history.complete(op, "info", dict(value, records=recs), error=str(e))
        return False
    finally:
        c.close()
