"""A follower's fetcher: one thread per leader broker, long-polling it for every partition followed there."""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import grpc

from node import errors
from node.storage.batch import CorruptBatchError
from node.storage.log import InvalidAppendError
from proto import kafkasim_pb2 as pb
from proto import kafkasim_pb2_grpc as pbg

if TYPE_CHECKING:
    from node.replica_manager import Hosted, ReplicaManager

TP = tuple[str, int]


class LeaderFetcher(threading.Thread):
    """A follower's fetch loop towards one leader broker, for every partition it follows there."""

    def __init__(self, rm: "ReplicaManager", leader: int):
        super().__init__(name=f"fetcher-from-{leader}", daemon=True)
        self.rm, self.leader = rm, leader
        self._parts: dict[TP, tuple["Hosted", int]] = {}
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._in_flight: grpc.Future | None = None  # the long poll now parked at the leader
        self._in_flight_parts: set[TP] = set()

    def assign(self, tp: TP, h: "Hosted", leader_epoch: int) -> None:
        with self._lock:
            self._parts[tp] = (h, leader_epoch)
            # A partition the parked long poll does not carry would wait up to replica.fetch.wait.max.ms
            # for its first fetch, and a new leader's HW (its acks=all writes, a coordinator's first
            # commit) with it: cut the poll short so the next request includes it at once.
            if self._in_flight is not None and tp not in self._in_flight_parts:
                self._in_flight.cancel()

    def unassign(self, tp: TP) -> None:
        with self._lock:
            self._parts.pop(tp, None)

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        channel, target = None, None
        try:
            while not self._stop_event.is_set():
                with self._lock:
                    parts = dict(self._parts)
                endpoint = self.rm._endpoint_of(self.leader)
                if not parts or endpoint is None:
                    self._stop_event.wait(0.05)
                    continue
                if endpoint != target:
                    if channel is not None:
                        channel.close()
                    channel, target = grpc.insecure_channel(endpoint), endpoint
                if not self._fetch_once(pbg.BrokerStub(channel), parts):
                    self._stop_event.wait(0.05)  # back off after an error
        finally:
            if channel is not None:
                channel.close()

    def _fetch_once(self, stub: pbg.BrokerStub, parts: dict[TP, tuple["Hosted", int]]) -> bool:
        wanted: list[pb.FetchPartition] = []
        sent: dict[TP, tuple["Hosted", int]] = {}
        for tp, (h, epoch) in parts.items():
            with h.cond:
                if h.log.closed or h.fetching_from != (self.leader, epoch):
                    continue
                wanted.append(pb.FetchPartition(topic=tp[0], partition=tp[1], fetch_offset=h.log.log_end_offset,
                                                last_fetched_epoch=h.log.epoch_cache.latest_epoch,
                                                current_leader_epoch=epoch, max_bytes=1 << 20))
                sent[tp] = (h, epoch)
        if not wanted:
            return False
        with self._lock:
            call = stub.Fetch.future(pb.FetchRequest(replica_id=self.rm.broker_id,
                                                     replica_epoch=self.rm._broker_epoch(),
                                                     max_wait_ms=self.rm.fetch_wait_ms, partitions=wanted),
                                     timeout=self.rm.fetch_wait_ms / 1000 + 5)
            self._in_flight, self._in_flight_parts = call, set(sent)
        try:
            r = call.result()
        except grpc.FutureCancelledError:
            return True  # cut short by a new partition: fetch again now, no backoff
        except grpc.RpcError as e:
            return e.code() == grpc.StatusCode.CANCELLED
        finally:
            with self._lock:
                self._in_flight = None
        ok = True
        for a in r.partitions:
            tp = (a.topic, a.partition)
            if tp not in sent:
                continue
            h, epoch = sent[tp]
            with h.cond:
                # a role change since the request was sent makes this answer stale
                if self._stop_event.is_set() or h.log.closed or h.fetching_from != (self.leader, epoch):
                    continue
                ok = self._apply(tp, h, epoch, a) and ok
        return ok

    def _apply(self, tp: TP, h: "Hosted", epoch: int, a: pb.FetchPartitionResponse) -> bool:
        rm = self.rm
        if a.error_code != errors.NONE:
            return False
        if a.diverging_epoch >= 0:
            cut = min(a.diverging_end_offset, h.log.log_end_offset)
            dropped = h.log.truncate_to(cut)
            rm.events.emit("log_truncated", topic=tp[0], partition=tp[1], to_offset=cut, records_dropped=dropped,
                           diverging_epoch=a.diverging_epoch, leader=self.leader, leader_epoch=epoch)
            rm._log_events(h.repl.on_truncate(h.log.log_end_offset))
            return True
        if a.records:
            try:
                h.log.append_as_follower(a.records, allow_gaps=True)  # a compacted leader log has gaps
            except (InvalidAppendError, CorruptBatchError) as e:
                rm.events.emit("follower_append_failed", topic=tp[0], partition=tp[1], error=str(e))
                return False
        rm._log_events(h.repl.on_fetch_response(a.high_watermark, h.log))
        return True
