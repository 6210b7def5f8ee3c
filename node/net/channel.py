"""Controller-to-broker request channels (Kafka's ControllerChannelManager).

One sender thread per broker keeps requests in order and retries a request
whose broker is unreachable until it is delivered or the channel is
closed (the broker died or this controller resigned).  Closing drops what is
still queued and cuts the request under way short, as Kafka 2.8's
``ControllerChannelManager.removeExistingBroker`` stops its RequestSendThread
and clears its queue.
"""
from __future__ import annotations

import logging
import queue
import threading
from typing import Any, Callable, NamedTuple

import grpc

from node.net import wire
from node.net.peers import peer_channel
from proto import kafkasim_pb2 as pb
from proto import kafkasim_pb2_grpc as pbg

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.05


class SharedBuild:
    """The requests of one send's commands, each encoded once for every broker it goes to (the metadata resend:
    every partition's state to each broker), by the first channel thread that needs it, and prefixed with each
    broker's header (:func:`wire.command_body`); ``states``: partition states encoded, kept from one send to
    the next (view -> bytes)."""

    def __init__(self, states: dict) -> None:
        self.states = states
        self._built: dict[int, tuple[Any, bytes]] = {}   # id(command) -> (it, its request without a header)
        self._lock = threading.Lock()

    def build(self, cmd: Any, header: pb.ControllerHeader) -> bytes:
        with self._lock:
            done = self._built.get(id(cmd))
            if done is None or done[0] is not cmd:
                done = self._built[id(cmd)] = (cmd, wire.command_body(cmd, self.states))
        return wire.header_bytes(cmd, header) + done[1]


class Sent(NamedTuple):
    """What :class:`BrokerChannel`'s ``on_response`` is told of a command's request (sent encoded): its header
    and the command's partitions (PartitionView for LeaderAndIsr and UpdateMetadata, (topic, partition) for
    StopReplica)."""

    header: pb.ControllerHeader
    partitions: tuple


class BrokerChannel:
    def __init__(self, broker_id: int, target: str, timeout_s: float,
                 on_response: Callable[[int, str, Any, Any], None]):
        self.broker_id = broker_id
        self.target = target
        self.timeout_s = timeout_s
        self._on_response = on_response
        self._queue: "queue.Queue[Any]" = queue.Queue()
        self._closed = threading.Event()
        self._channel = peer_channel(target)
        self._stub = pbg.BrokerStub(self._channel)
        # the same methods taking requests already encoded (a command's request: see SharedBuild)
        service = pb.DESCRIPTOR.services_by_name["Broker"].full_name
        self._raw = {kind: self._channel.unary_unary(f"/{service}/{kind}", request_serializer=None,
                                                     response_deserializer=getattr(pb, kind + "Response").FromString)
                     for kind, _ in wire.COMMAND_KINDS.values()}
        self._thread = threading.Thread(target=self._run, name=f"controller-send-{broker_id}", daemon=True)
        self._thread.start()

    def send(self, request: Any) -> None:
        self._queue.put(request)

    def send_command(self, cmd: Any, header: pb.ControllerHeader, shared: "SharedBuild | None" = None) -> None:
        """A controller command (controller/plan.py's), turned into its request by this channel's thread, so
        the controller's event thread only queues it (a 1,000-partition LeaderAndIsr takes milliseconds to
        build, on a new controller's critical path between its ZooKeeper writes).  ``shared``: the same
        command sent to other brokers too is built once, by the first channel to need it."""
        self._queue.put((cmd, header, shared))

    def close(self) -> None:
        """Stop: the requests still queued are dropped, and the one under way is cancelled (its broker may have
        taken it already, and applies it; its answer is not waited for)."""
        self._closed.set()
        self._queue.put(None)
        self._channel.close()

    def join(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the sender thread to end (after :meth:`close`); True when it has: nothing
        more can be sent."""
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _run(self) -> None:
        try:
            while not self._closed.is_set():
                request = self._queue.get()
                if request is None:
                    break
                if isinstance(request, tuple):
                    cmd, header, shared = request
                    kind = wire.COMMAND_KINDS[type(cmd)][0]
                    data = (wire.header_bytes(cmd, header) + wire.command_body(cmd) if shared is None
                            else shared.build(cmd, header))
                    self._deliver(kind, self._raw[kind], data, Sent(header, cmd.partitions))
                else:
                    self._deliver(*self._method(request), request, request)
        finally:
            self._channel.close()

    def _method(self, request: Any) -> tuple[str, Any]:
        if isinstance(request, pb.LeaderAndIsrRequest):
            return "LeaderAndIsr", self._stub.LeaderAndIsr
        if isinstance(request, pb.UpdateMetadataRequest):
            return "UpdateMetadata", self._stub.UpdateMetadata
        return "StopReplica", self._stub.StopReplica

    def _deliver(self, kind: str, call: Any, request: Any, sent: Any) -> None:
        """``request`` (a message, or its encoding for a raw call) until delivered; ``sent``: what
        ``on_response`` is given of it (the message, or a :class:`Sent`)."""
        while not self._closed.is_set():
            try:
                response = call(request, timeout=self.timeout_s)
            except ValueError:   # the channel was closed before the call: closed by close(), nothing else
                if self._closed.is_set():
                    return
                raise
            except grpc.RpcError as e:
                if self._closed.is_set():   # cancelled by close()
                    return
                if e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    self._closed.wait(RETRY_BACKOFF_S)
                    continue
                log.warning("%s to broker %d failed: %s", kind, self.broker_id, e)
                return
            self._on_response(self.broker_id, kind, sent, response)
            return
