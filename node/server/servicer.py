"""The broker's gRPC service: controller requests (fenced) and admin calls."""
from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from kafkacommon import errors

from node.net import wire
from replication.broker_state import BrokerState, Outcome
from node.events import EventLog
from node.server.txn_markers import write_txn_markers
from proto import kafkasim_pb2 as pb
from proto import kafkasim_pb2_grpc as pbg

if TYPE_CHECKING:
    from node.shells.controller_shell import ControllerShell
    from node.replicas.replica_manager import ReplicaManager


class BrokerServicer(pbg.BrokerServicer):
    def __init__(self, state: BrokerState, events: EventLog, controller: "ControllerShell",
                 replicas: "ReplicaManager | None" = None, pool: Any = None,
                 on_offsets_marker: Any = None, marker_timeout_ms: int = 30_000):
        self.on_offsets_marker = on_offsets_marker     # the group coordinator, for markers on offsets partitions
        self.marker_timeout_ms = marker_timeout_ms
        self.state = state
        self.pool = pool   # where a fetch waits for a busy partition lock (None: the loop's default executor)
        self.replicas = replicas
        self.events = events
        self.controller = controller
        self._lock = threading.Lock()  # requests from the controller apply one at a time
        # tp -> (the PartitionState bytes an UpdateMetadata last applied, the PartitionInfo it cached): see
        # UpdateMetadata
        self._applied: dict[tuple[str, int], tuple[bytes, Any]] = {}
        self._cache_changes = 0   # requests that changed the metadata cache (LeaderAndIsr, UpdateMetadata with news)
        self._last_update = (b"", -1)   # the last UpdateMetadata applied, without its header; _cache_changes then
        self._states = wire.StateDecoder()    # the partition states met lately, decoded once each
        self._answers = wire.ErrorAnswers()   # the PartitionErrors answered lately, encoded once each

    def applying(self) -> bool:
        """Whether a controller request (LeaderAndIsr, UpdateMetadata, StopReplica) is being applied now."""
        return self._lock.locked()

    def wait_applied(self, timeout_s: float) -> bool:
        """Wait until no controller request is being applied (at most ``timeout_s``) -> whether none is."""
        if not self._lock.acquire(timeout=timeout_s):
            return False
        self._lock.release()
        return True

    def _log(self, out: Outcome) -> None:
        self.events.log(*out.events)

    def _answer(self, response: Any, out: Outcome) -> Any:
        """``response`` (LeaderAndIsrResponse or StopReplicaResponse): ``out``'s error and, in (topic, partition)
        order, each partition's error that is not NONE."""
        return response.FromString(self._answers.encode(out.error, out.partition_errors, errors.NONE))

    def LeaderAndIsr(self, request, context):
        received = time.monotonic()
        with self._lock:
            locked = time.monotonic()
            self._cache_changes += 1
            parts = self._states.request(request)[0]
            offline = self.replicas.dirs.leader_and_isr_errors([(p.topic, p.partition) for p in parts]) \
                if self.replicas is not None else None
            out = self.state.leader_and_isr(wire.header_from_pb(request.header), parts, offline)
            if self.replicas is not None:
                # a replica whose log could not be opened or written is offline now (Kafka's makeLeaders)
                out.partition_errors.update(self.replicas.apply_leader_and_isrs(out.became_leader + out.became_follower))
            self._log(out)  # under the lock: the log's order is the order the requests applied in
            if out.error == errors.NONE:
                self.events.emit("leader_and_isr_applied", controller_epoch=request.header.controller_epoch,
                                 partitions=len(parts), leaders=len(out.became_leader),
                                 followers=len(out.became_follower), waited_ms=round((locked - received) * 1000, 3),
                                 duration_ms=round((time.monotonic() - received) * 1000, 3))
        return self._answer(pb.LeaderAndIsrResponse, out)

    def UpdateMetadata(self, request, context):
        """Apply the partition states that are news.  A state this broker applied already, byte for byte, from
        an UpdateMetadata, and whose cache entry nothing replaced since, would change nothing (the same entry
        cached again, an ISR no newer than the replica's): the controller's periodic resend of every state
        then costs a comparison per partition, not a decode and an apply; and the very request applied last
        again, with no LeaderAndIsr or news between, one comparison of its bytes."""
        live = [(b.id, b.host, b.port, b.broker_epoch) for b in request.live_brokers]
        with self._lock:
            cached, applied = self.state.metadata, self._applied
            whole = wire.without_header(request)
            # the very request applied last, with nothing changed since: every state in it is applied already
            same = whole == self._last_update[0] and self._last_update[1] == self._cache_changes
            parts, raw = [], []
            if not same:
                elements = wire.split_request(whole)[0]
                for data, p in zip(elements, self._states.decode(elements, request.partitions)):
                    tp = (p.topic, p.partition)
                    seen = applied.get(tp)
                    if seen is None or seen[0] != data or cached.get(tp) is not seen[1]:
                        parts.append(p)
                        raw.append(data)
            out = self.state.update_metadata(wire.header_from_pb(request.header), parts, live)
            if out.error == errors.NONE:
                self._cache_changes += bool(parts)
                self._last_update = (whole, self._cache_changes)
                for p, data in zip(parts, raw):
                    tp = (p.topic, p.partition)
                    info = cached.get(tp)
                    if info is None:
                        applied.pop(tp, None)
                    else:
                        applied[tp] = (data, info)
            if self.replicas is not None and out.error == errors.NONE:
                for p in parts:
                    self.replicas.update_isr_if_newer(p)
                self.replicas.set_live_brokers({b for b, *_ in live})
            self._log(out)
        return pb.UpdateMetadataResponse(error_code=out.error)

    def StopReplica(self, request, context):
        tps = [(tp.topic, tp.partition) for tp in request.partitions]
        with self._lock:
            out = self.state.stop_replica(wire.header_from_pb(request.header), tps, request.leader_epoch,
                                          request.delete_partitions)
            if self.replicas is not None:
                for tp in out.stopped:
                    code = self.replicas.stop_replica(tp, request.delete_partitions)
                    if code != errors.NONE:
                        out.partition_errors[tp] = code
        self._log(out)
        return self._answer(pb.StopReplicaResponse, out)

    def DescribeBroker(self, request, context):
        s = self.state
        with self._lock:
            parts = [wire.info_to_pb(p) for _, p in sorted(s.metadata.items())]
            live = [pb.BrokerEndpoint(id=b, host=h, port=port, broker_epoch=e)
                    for b, (h, port, e) in sorted(s.live_brokers.items())]
        return pb.DescribeBrokerResponse(
            broker_id=s.broker_id, broker_epoch=s.broker_epoch, is_controller=self.controller.is_active,
            controller_epoch=self.controller.epoch, latest_controller_epoch=s.controller_epoch,
            known_controller_id=self.controller.active_controller_id, partitions=parts, live_brokers=live,
            replicas=self.replicas.replica_statuses() if self.replicas is not None else [],
            parked_fetches=self.replicas.parked_fetches() if self.replicas is not None else {})

    def Produce(self, request, context):
        if self.replicas is None:
            return pb.ProduceResponse(error_code=errors.NOT_LEADER_OR_FOLLOWER, base_offset=-1, last_offset=-1)
        return self.replicas.produce(request)

    async def Fetch(self, request, context):
        # on the server's event loop, not a pool thread: a follower's fetch is the most frequent call
        # between brokers (one per append and follower), and its long poll parks as a coroutine
        if self.replicas is None:
            return pb.FetchResponse(error_code=errors.NOT_LEADER_OR_FOLLOWER)
        return await self.replicas.fetch_async(request, self.pool)

    def ListOffsets(self, request, context):
        if self.replicas is None:
            return pb.ListOffsetsResponse()
        return self.replicas.list_offsets(request)

    def WriteTxnMarkers(self, request, context):
        """A transaction coordinator's markers, written here as the partitions' leader (node/server/txn_markers.py)."""
        if self.replicas is None:
            return pb.WriteTxnMarkersResponse()
        return write_txn_markers(request, self.replicas, self.events.emit, self.on_offsets_marker,
                                 self.marker_timeout_ms)

    def ControlledShutdown(self, request, context):
        if not self.controller.is_active:
            return pb.ControlledShutdownResponse(error_code=errors.NOT_CONTROLLER)
        code, remaining = self.controller.controlled_shutdown(request.broker_id, request.broker_epoch)
        return pb.ControlledShutdownResponse(error_code=code, remaining_partitions=[
            pb.TopicPartition(topic=t, partition=p) for t, p in remaining])

    def AlterIsr(self, request, context):
        if not self.controller.is_active:
            return pb.AlterIsrResponse(error_code=errors.NOT_CONTROLLER)
        items = [((p.topic, p.partition), p.leader_epoch, tuple(p.new_isr), p.current_isr_version)
                 for p in request.partitions]
        code, answer = self.controller.alter_isr(request.broker_id, request.broker_epoch, items)
        out = []
        for (t, p), (c, state, version) in sorted(answer.items()):
            r = pb.AlterIsrPartitionResult(topic=t, partition=p, error_code=c, current_isr_version=version)
            if state is not None:
                r.leader, r.leader_epoch = state.leader, state.leader_epoch
                r.isr.extend(state.isr)
            out.append(r)
        return pb.AlterIsrResponse(error_code=code, partitions=out)

    def ElectLeaders(self, request, context):
        tps = [(tp.topic, tp.partition) for tp in request.partitions] or None
        if not self.controller.is_active:
            return pb.ElectLeadersResponse(error_code=errors.NOT_CONTROLLER)
        result = self.controller.elect_leaders(tps)
        if any(c == errors.NOT_CONTROLLER for c in result.values()):
            return pb.ElectLeadersResponse(error_code=errors.NOT_CONTROLLER)
        return pb.ElectLeadersResponse(error_code=errors.NONE, partition_errors=[
            pb.PartitionError(topic=t, partition=p, error_code=c) for (t, p), c in sorted(result.items())])
