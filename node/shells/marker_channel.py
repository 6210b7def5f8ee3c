"""The transaction coordinator's marker channel (Kafka's TransactionMarkerChannelManager's sending side).

Markers for a partition go to its leader as this broker's metadata cache has it, over the brokers' gRPC
(``Broker.WriteTxnMarkers``).  One sender thread per destination broker, with one request in flight at a
time (Kafka's marker sender keeps one per connection); what was queued meanwhile goes in the next request.
A partition the cache no longer has is answered ``PARTITION_GONE`` at once (Kafka skips a deleted
partition); one without a live leader NOT_LEADER_OR_FOLLOWER (the core retries after its backoff, and
the leader is looked up again); a request that fails on the wire answers its partitions NETWORK_EXCEPTION.
What to do with each outcome is the core's (transactions/markers.py): this is plumbing.
"""
from __future__ import annotations

import logging
import queue
import threading
from typing import Any, Callable

import grpc

from kafkacommon import errors
from node.net.peers import peer_channel
from proto import kafkasim_pb2 as pb
from proto import kafkasim_pb2_grpc as pbg
from transactions.entries import PARTITION_GONE
from transactions.messages import MarkerCmd

log = logging.getLogger(__name__)

# (marker command, [(partition, error)]) -> the core
Deliver = Callable[[Any, MarkerCmd, list[tuple[tuple[str, int], int]]], None]


class MarkerChannel:
    def __init__(self, state: Any, endpoint_of: Callable[[int], str | None], deliver: Deliver,
                 request_timeout_ms: int) -> None:
        self.state = state                      # BrokerState: the metadata cache and the live brokers
        self.endpoint_of = endpoint_of
        self.deliver = deliver                  # deliver(token, cmd, results): the outcome, to the core
        self.timeout_s = request_timeout_ms / 1000 + 5
        self._queues: dict[int, queue.Queue] = {}
        self._threads: dict[int, threading.Thread] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    def send(self, token: Any, cmd: MarkerCmd) -> None:
        """Route ``cmd``'s partitions to their leaders; ``token`` comes back with the outcome."""
        by_leader: dict[int, list[tuple[str, int]]] = {}
        now: list[tuple[tuple[str, int], int]] = []
        for tp in cmd.partitions:
            info = self.state.metadata.get(tuple(tp))
            if info is None:
                now.append((tuple(tp), PARTITION_GONE))
            elif info.leader < 0 or info.leader not in self.state.live_brokers:
                now.append((tuple(tp), errors.NOT_LEADER_OR_FOLLOWER))
            else:
                by_leader.setdefault(info.leader, []).append(tuple(tp))
        if now:
            self.deliver(token, cmd, now)
        for leader, parts in by_leader.items():
            self._queue(leader).put((token, cmd, parts))

    def _queue(self, broker: int) -> queue.Queue:
        with self._lock:
            q = self._queues.get(broker)
            if q is None:
                q = self._queues[broker] = queue.Queue()
                t = self._threads[broker] = threading.Thread(target=self._run, args=(broker, q), daemon=True,
                                                             name=f"txn-markers-{broker}")
                t.start()
            return q

    def _run(self, broker: int, q: queue.Queue) -> None:
        channel, target = None, None
        while not self._stopping.is_set():
            try:
                first = q.get(timeout=0.5)
            except queue.Empty:
                continue
            items = [first]
            while True:
                try:
                    items.append(q.get_nowait())
                except queue.Empty:
                    break
            address = self.endpoint_of(broker)
            results: list[list[tuple[tuple[str, int], int]]]
            if address is None:
                results = [[(tp, errors.NOT_LEADER_OR_FOLLOWER) for tp in parts] for _t, _c, parts in items]
            else:
                if address != target:
                    if channel is not None:
                        channel.close()
                    channel, target = peer_channel(address), address
                req = pb.WriteTxnMarkersRequest(markers=[
                    pb.TxnMarker(producer_id=c.producer_id, producer_epoch=c.producer_epoch,
                                 coordinator_epoch=c.coordinator_epoch, commit=c.commit,
                                 partitions=[pb.TopicPartition(topic=t, partition=p) for t, p in parts])
                    for _t, c, parts in items])
                try:
                    resp = pbg.BrokerStub(channel).WriteTxnMarkers(req, timeout=self.timeout_s)
                    results = [[((e.topic, e.partition), e.error_code) for e in r.partitions] for r in resp.markers]
                    if len(results) != len(items):
                        raise ValueError("a WriteTxnMarkers answer for another request")
                except (grpc.RpcError, ValueError):
                    results = [[(tp, errors.NETWORK_EXCEPTION) for tp in parts] for _t, _c, parts in items]
            for (token, cmd, _parts), res in zip(items, results):
                try:
                    self.deliver(token, cmd, res)
                except Exception:   # a core's failure must not stop the channel
                    log.exception("delivering marker results failed")
        if channel is not None:
            channel.close()

    def close(self) -> None:
        self._stopping.set()
