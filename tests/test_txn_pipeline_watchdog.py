"""The transactional workload's watchdog (chaos/txn_workload.py, chaos/txn_run.py): a confluent-kafka pipeline
whose transactional call runs past its own timeout is hung (librdkafka 2.16's ``send_offsets_to_transaction``
can wait for ever for a group coordinator whose broker handle it decommissioned: librdkafka issues #5456 and
#5511), and the run replaces it with a new instance of its transactional id, as a watchdog restarting the
application would; the abandoned process makes no client call once its call returns.  No cluster: fake
clients stand in for librdkafka's."""
from __future__ import annotations

import json
import threading
import time

from chaos.txn_run import TxnRun
from chaos.txn_scenario import TxnSpec
from chaos.txn_workload import HUNG_AFTER_S, ConfluentPipeline
from chaos.workload import Processes
from judge.history import HistoryWriter
from util.waiting import wait_for

SPEC = TxnSpec(input="tx-in", output="tx-out", group="eos", pipelines=1, readers=0)
PAST_TIMEOUT_S = 30 + HUNG_AFTER_S + 1     # the pipeline's calls time out after 30 s


class FakeKafkaException(Exception):
    pass


class FakeTopicPartition:
    def __init__(self, topic: str, partition: int, offset: int = -1) -> None:
        self.topic, self.partition, self.offset = topic, partition, offset


class FakeMessage:
    def __init__(self, offset: int) -> None:
        self._offset = offset

    def topic(self) -> str:
        return "tx-in"

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset

    def key(self) -> None:
        return None

    def value(self) -> bytes:
        return f"p0-{self._offset}".encode()


class HangingProducer:
    """send_offsets_to_transaction blocks until ``release`` is set, as librdkafka's does past its timeout."""

    def __init__(self) -> None:
        self.entered, self.release = threading.Event(), threading.Event()
        self.calls: list[str] = []

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def produce(self, topic, key=None, value=None, partition=0) -> None:
        self.calls.append("produce")

    def send_offsets_to_transaction(self, offsets, metadata, timeout) -> None:
        self.calls.append("send_offsets")
        self.entered.set()
        self.release.wait()

    def commit_transaction(self, timeout) -> None:
        self.calls.append("commit")

    def abort_transaction(self, timeout) -> None:
        self.calls.append("abort")


class FakeConsumer:
    def consumer_group_metadata(self) -> str:
        return "metadata"


def pipeline(history: HistoryWriter, procs: Processes, stop: threading.Event, instance: int = 0,
             cls: type = ConfluentPipeline) -> ConfluentPipeline:
    return cls(history, procs, "127.0.0.1:1", SPEC, 0, instance, 1, stop)


def test_a_call_past_its_timeout_is_hung_and_an_abandoned_pipeline_makes_no_further_call(tmp_path):
    history, stop = HistoryWriter(tmp_path / "history.jsonl"), threading.Event()
    p = pipeline(history, Processes(), stop)
    producer = HangingProducer()
    t = threading.Thread(target=p._transaction, daemon=True,
                         args=(producer, FakeConsumer(), [FakeMessage(0), FakeMessage(1)], 0, FakeKafkaException,
                               FakeTopicPartition))
    t.start()
    assert producer.entered.wait(10)
    now = time.monotonic()
    assert not p.hung(now)                       # within its timeout: waiting, not hung
    assert p.hung(now + PAST_TIMEOUT_S)          # still in the call past timeout + HUNG_AFTER_S: hung
    p.abandon()
    producer.release.set()                       # the call returns at last (with success) ...
    t.join(10)
    assert not t.is_alive()
    assert producer.calls == ["begin", "produce", "produce", "send_offsets"]   # ... and no commit follows
    assert not p.hung(now + PAST_TIMEOUT_S)      # no call in progress
    history.close()
    ops = [(op["f"], op["type"]) for op in map(json.loads, (tmp_path / "history.jsonl").read_text().splitlines())]
    assert ops == [("txn", "invoke"), ("txn", "ok")], ops


class Blocked(ConfluentPipeline):
    """A pipeline process inside a watched client call until ``gate`` is set."""

    gate = threading.Event()

    def body(self) -> None:
        self._call(30, self.gate.wait)


class Quiet(ConfluentPipeline):
    def body(self) -> None:
        self.stop_event.wait()


def test_the_run_replaces_a_pipeline_hung_in_a_call_and_does_not_wait_for_it_at_the_stop(tmp_path):
    history, procs = HistoryWriter(None), Processes()
    run = TxnRun(SPEC, tmp_path, "127.0.0.1:1", history, procs, partitions_in=1, partitions_out=1, seed=1)

    def new(index: int) -> ConfluentPipeline:
        w = pipeline(history, procs, run.stop_pipelines, run.instances[index], Quiet)
        run.instances[index] += 1
        w.start()
        return w
    run._new = new   # the pipelines' clients are fakes here
    Blocked.gate = threading.Event()
    hung = pipeline(history, procs, run.stop_pipelines, 0, Blocked)
    run.pipelines[0], run.instances[0] = hung, 1
    hung.start()
    try:
        wait_for(lambda: hung.hung(time.monotonic() + PAST_TIMEOUT_S), 10, "the pipeline to be in its call")
        run._replace_ended(time.monotonic())
        assert run.pipelines[0] is hung and not run.hung   # in its call, within its timeout: left alone
        run._replace_ended(time.monotonic() + PAST_TIMEOUT_S)
        successor = run.pipelines[0]
        assert successor is not hung and successor.instance == 1 and successor.is_alive()
        assert hung.abandoned.is_set() and hung in run.retired and run.hung == [hung.name]
        assert run.instances == [2]
        run.stop(timeout_s=600)                  # the abandoned one, still in its call, is named stuck
        assert run.stuck == [hung.name]
        assert not successor.is_alive()
    finally:
        Blocked.gate.set()
        hung.join(10)
    assert not hung.is_alive()
