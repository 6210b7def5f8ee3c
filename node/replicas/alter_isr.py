"""The leader's AlterIsr sender (Kafka's AlterIsrManager): ISR proposals to the controller, batched.

Whatever is proposed while a request is in flight goes in the next one, up to
``ALTER_ISR_BATCH`` partitions, so an ISR storm over 1,000 partitions costs the
controller a few requests, not 1,000 (each its own ZooKeeper write and
UpdateMetadata round).  It only moves bytes: what an answer means for the
partition is the replication core's rule (``PartitionReplication.on_alter_isr_result``).
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable

import grpc

from kafkacommon import errors
from node.clock import now_ms
from node.replicas.hosted import Hosted
from node.net.peers import peer_channel
from proto import kafkasim_pb2 as pb
from proto import kafkasim_pb2_grpc as pbg
from replication.partition_types import AlterIsrProposal

log = logging.getLogger(__name__)

ALTER_ISR_BATCH = 1000  # proposals per AlterIsr request at most


class AlterIsrSender:
    """One sender thread per broker, started on the first proposal.

    ``broker_epoch`` and ``controller_endpoint`` are read at each request; ``log_events`` logs the
    core's events; ``wake(h)`` (with ``h``'s lock held) completes what a new ISR lets complete;
    ``notify()`` wakes the long polls; ``stopping`` ends the thread."""

    def __init__(self, broker_id: int, broker_epoch: Callable[[], int], controller_endpoint: Callable[[], str | None],
                 emit: Callable[..., None], log_events: Callable[[Any], None], wake: Callable[[Hosted], None],
                 notify: Callable[[], None], stopping: threading.Event) -> None:
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._controller_endpoint = controller_endpoint
        self._emit = emit
        self._log_events = log_events
        self._wake = wake
        self._notify = notify
        self._stopping = stopping
        self._queue: list[tuple[Hosted, AlterIsrProposal]] = []  # proposals not yet sent
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        # the sender thread's channel to the controller, kept while the controller's address stays and no call
        # fails (Kafka's AlterIsrManager keeps its connection to the controller too)
        self._channel: tuple[str, grpc.Channel] | None = None

    def send(self, h: Hosted, proposal: AlterIsrProposal) -> None:
        """Queue a proposal; the sender thread sends it with whatever else is queued."""
        self._emit("isr_change_proposed", **proposal.fields())
        with self._cond:
            self._queue.append((h, proposal))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, daemon=True, name="alter-isr")
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                with self._cond:
                    while not self._queue and not self._stopping.is_set():
                        self._cond.wait(0.5)
                    batch, self._queue = self._queue[:ALTER_ISR_BATCH], self._queue[ALTER_ISR_BATCH:]
                if batch:
                    self._request(batch)
        finally:
            self._close_channel()

    def _channel_to(self, target: str) -> grpc.Channel:
        kept = self._channel
        if kept is not None and kept[0] == target:
            return kept[1]
        self._close_channel()
        channel = peer_channel(target)
        self._channel = (target, channel)
        return channel

    def _close_channel(self) -> None:
        kept, self._channel = self._channel, None
        if kept is not None:
            kept[1].close()

    def _request(self, batch: list[tuple[Hosted, AlterIsrProposal]]) -> None:
        """One AlterIsr request for ``batch``; each proposal gets its partition's answer, or the
        request's error (NOT_CONTROLLER when there is no controller or the call failed)."""
        top, answers = errors.NOT_CONTROLLER, {}
        target = self._controller_endpoint()
        if target is not None:
            try:
                r = pbg.BrokerStub(self._channel_to(target)).AlterIsr(pb.AlterIsrRequest(
                    broker_id=self.broker_id, broker_epoch=self._broker_epoch(), partitions=[pb.AlterIsrPartition(
                        topic=p.topic, partition=p.partition, leader_epoch=p.leader_epoch,
                        new_isr=list(p.new_isr), current_isr_version=p.zk_version) for _, p in batch]),
                    timeout=10)
                top = r.error_code
                answers = {(a.topic, a.partition): a for a in r.partitions}
            except grpc.RpcError as e:
                log.warning("AlterIsr failed: %s", e)
                self._close_channel()   # the next request dials afresh
        for h, proposal in batch:
            code, isr, version, epoch = top, None, None, None
            res = answers.get((proposal.topic, proposal.partition)) if top == errors.NONE else None
            if res is not None:
                code, isr, version, epoch = res.error_code, list(res.isr), res.current_isr_version, res.leader_epoch
            with h.cond:
                outcome = h.repl.on_alter_isr_result(code, isr, version, epoch, proposal=proposal, log=h.log,
                                                     now_ms=now_ms())
                self._log_events(outcome.events)
                self._wake(h)
        self._notify()
