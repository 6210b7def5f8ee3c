"""Conversions between the cores' plain types and the generated protobuf types."""
from __future__ import annotations

from typing import Any, Iterable

from controller.core import Command, LeaderAndIsrCmd, PartitionView, StopReplicaCmd, UpdateMetadataCmd
from kafkacommon.metadata import BrokerRegistration
from proto import kafkasim_pb2 as pb
from replication.broker_state import Header, PartitionInfo
from replication.fetch_session import TP, PartitionFetch


def partition_to_pb(v: PartitionView) -> pb.PartitionState:
    return pb.PartitionState(topic=v.topic, partition=v.partition, controller_epoch=v.state.controller_epoch,
                             leader=v.state.leader, leader_epoch=v.state.leader_epoch, isr=list(v.state.isr),
                             zk_version=v.zk_version, replicas=list(v.replicas), is_new=v.is_new)


def broker_to_pb(b: BrokerRegistration) -> pb.BrokerEndpoint:
    return pb.BrokerEndpoint(id=b.broker_id, host=b.host, port=b.port, broker_epoch=b.epoch)


def partitions_to_pb(views: Iterable[PartitionView], cache: dict | None = None) -> list[pb.PartitionState]:
    """:func:`partition_to_pb` of each; with ``cache`` (view -> message), a view met before is not built again
    (a controller tells every broker the same states: the whole metadata to each, and LeaderAndIsr)."""
    if cache is None:
        return [partition_to_pb(v) for v in views]
    out = []
    for v in views:
        m = cache.get(v)
        if m is None:
            m = cache[v] = partition_to_pb(v)
        out.append(m)
    return out


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field_key(*messages, name: str = "partitions", wire_type: int = 2) -> bytes:
    """The key of the field ``name`` (number, wire type: 2 length-delimited, 0 varint) that ``messages`` all
    share."""
    numbers = {m.DESCRIPTOR.fields_by_name[name].number for m in messages}
    if len(numbers) != 1:
        raise AssertionError(f"the messages' {name} fields differ: {numbers}")
    return _varint(numbers.pop() << 3 | wire_type)


#: LeaderAndIsrRequest's and UpdateMetadataRequest's ``partitions`` key: a message's encoding is its fields'
#: encodings one after the other (a repeated field's elements each with its key), so a request's partitions
#: can be encoded once each and joined, for every request and broker they go to
_PARTITIONS_KEY = _field_key(pb.LeaderAndIsrRequest, pb.UpdateMetadataRequest)


def partition_field(v: PartitionView) -> bytes:
    """``v`` encoded as one element of either request's ``partitions``."""
    m = partition_to_pb(v).SerializeToString()
    return _PARTITIONS_KEY + _varint(len(m)) + m


def command_body(cmd: Command, cache: dict | None = None) -> bytes:
    """The encoding of ``cmd``'s request without its header (``cache``: view -> :func:`partition_field`, kept
    from one request to the next: a controller tells every broker the same states).  The request of one broker
    is :func:`header_bytes` + this, which parses as the message :func:`command_to_pb` builds."""
    if isinstance(cmd, (LeaderAndIsrCmd, UpdateMetadataCmd)):
        if isinstance(cmd, LeaderAndIsrCmd):
            head = pb.LeaderAndIsrRequest(live_leaders=[broker_to_pb(b) for b in cmd.live_leaders])
        else:
            head = pb.UpdateMetadataRequest(live_brokers=[broker_to_pb(b) for b in cmd.live_brokers])
        if cache is None:
            parts = [partition_field(v) for v in cmd.partitions]
        else:
            parts = []
            for v in cmd.partitions:
                f = cache.get(v)
                if f is None:
                    f = cache[v] = partition_field(v)
                parts.append(f)
        return head.SerializeToString() + b"".join(parts)
    return command_to_pb(cmd, None).SerializeToString()


def header_bytes(cmd: Command, header: pb.ControllerHeader) -> bytes:
    """``cmd``'s request with only its header, encoded (see :func:`command_body`)."""
    return type(COMMAND_KINDS[type(cmd)][1])(header=header).SerializeToString()


#: command type -> (the Broker service's method, an empty request message of it)
COMMAND_KINDS = {LeaderAndIsrCmd: ("LeaderAndIsr", pb.LeaderAndIsrRequest()),
                 UpdateMetadataCmd: ("UpdateMetadata", pb.UpdateMetadataRequest()),
                 StopReplicaCmd: ("StopReplica", pb.StopReplicaRequest())}


def command_to_pb(cmd: Command, header: pb.ControllerHeader | None, cache: dict | None = None):
    """The request message of ``cmd``; ``cache``: see :func:`partitions_to_pb`."""
    if isinstance(cmd, LeaderAndIsrCmd):
        r = pb.LeaderAndIsrRequest(header=header, live_leaders=[broker_to_pb(b) for b in cmd.live_leaders])
        r.partitions.extend(partitions_to_pb(cmd.partitions, cache))
        return r
    if isinstance(cmd, UpdateMetadataCmd):
        r = pb.UpdateMetadataRequest(header=header, live_brokers=[broker_to_pb(b) for b in cmd.live_brokers])
        r.partitions.extend(partitions_to_pb(cmd.partitions, cache))
        return r
    if isinstance(cmd, StopReplicaCmd):
        return pb.StopReplicaRequest(header=header, delete_partitions=cmd.delete, leader_epoch=-1,
                                     partitions=[pb.TopicPartition(topic=t, partition=p) for t, p in cmd.partitions])
    raise TypeError(f"unknown command {cmd!r}")


def header_from_pb(h: pb.ControllerHeader) -> Header:
    return Header(h.controller_id, h.controller_epoch, h.broker_epoch)


def partitions_from_pb(parts: Iterable[pb.PartitionState]) -> list[PartitionInfo]:
    return [PartitionInfo(p.topic, p.partition, p.leader, p.leader_epoch, tuple(p.isr), tuple(p.replicas),
                          p.zk_version, p.controller_epoch, p.is_new) for p in parts]


#: the ``header`` field's number in LeaderAndIsrRequest and UpdateMetadataRequest
_HEADER_NUMBER = pb.LeaderAndIsrRequest.DESCRIPTOR.fields_by_name["header"].number
assert _HEADER_NUMBER == pb.UpdateMetadataRequest.DESCRIPTOR.fields_by_name["header"].number
_PARTITIONS_TAG = _PARTITIONS_KEY[0]
assert len(_PARTITIONS_KEY) == 1


def _varint_at(data: bytes, i: int) -> tuple[int, int]:
    """The varint starting at ``data[i]`` -> (its value, the index after it); ValueError if the data ends in it."""
    value = shift = 0
    while True:
        if i >= len(data):
            raise ValueError("truncated request")
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def split_request(data: bytes) -> tuple[list[bytes], bytes]:
    """A LeaderAndIsrRequest's or UpdateMetadataRequest's encoding -> (the encoding of each of its
    ``partitions``, in order; the request's encoding without its header).  Each element parses as the
    PartitionState it encodes: a message's encoding is its fields' encodings one after the other."""
    elements, cut = [], []
    append = elements.append
    i, n = 0, len(data)
    while i < n:
        start = i
        key = data[i]   # a key or a length under 128 is one byte: read here, without a call
        if key < 0x80:
            i += 1
        else:
            key, i = _varint_at(data, i)
        kind = key & 7
        if kind == 2 or kind == 0:   # a length then as many bytes; a varint (read into ln, not used)
            ln = data[i] if i < n else 0x80
            if ln < 0x80:
                i += 1
            else:
                ln, i = _varint_at(data, i)
            if kind == 2:
                if key == _PARTITIONS_TAG:
                    append(data[i:i + ln])
                i += ln
        elif kind == 1:
            i += 8
        elif kind == 5:
            i += 4
        else:
            raise ValueError(f"wire type {kind} at {start}")
        if key >> 3 == _HEADER_NUMBER:
            cut.append((start, i))
    if i != n:
        raise ValueError("truncated request")
    if not cut:
        return elements, data
    rest, at = [], 0
    for a, b in cut:
        rest.append(data[at:a])
        at = b
    rest.append(data[at:])
    return elements, b"".join(rest)


_HEADER_KEY = _varint(_HEADER_NUMBER << 3 | 2)


def without_header(request) -> bytes:
    """A LeaderAndIsrRequest's or UpdateMetadataRequest's encoding without its header (what
    :func:`split_request` gives, most often without a scan: the header is encoded first)."""
    data = request.SerializeToString()
    if request.HasField("header"):
        h = request.header.SerializeToString()
        head = _HEADER_KEY + _varint(len(h)) + h
        if data.startswith(head):
            return data[len(head):]
    return split_request(data)[1]


class StateDecoder:
    """PartitionState encodings -> their PartitionInfo, each encoding decoded once while it keeps coming: a
    controller sends a broker the same states again and again (the metadata resend, a new controller's
    LeaderAndIsr of every replica), and equal encodings are equal states, so the value kept is the very value a
    decode gives (PartitionInfo is immutable).  Keeps what it met in the last ``size`` to ``2 * size`` new
    encodings: the one before last's are dropped when the last ``size`` are full."""

    def __init__(self, size: int = 1 << 16) -> None:
        self.size = size
        self._new: dict[bytes, PartitionInfo] = {}
        self._old: dict[bytes, PartitionInfo] = {}

    def decode(self, elements: list[bytes], messages: Any = None) -> list[PartitionInfo]:
        """Each of ``elements`` decoded; ``messages``: the same states parsed already (``partitions`` of the
        request split into ``elements``), read for those not met lately instead of parsing them again."""
        new, old = self._new, self._old
        out = []
        append = out.append
        missed = []
        for e in elements:
            p = new.get(e)
            if p is None:
                p = old.get(e)
                if p is None:
                    missed.append((len(out), e))
                else:
                    new[e] = p
            append(p)
        if missed:
            decoded = partitions_from_pb([pb.PartitionState.FromString(e) if messages is None else messages[i]
                                          for i, e in missed])
            for (i, e), p in zip(missed, decoded):
                out[i] = new[e] = p
        if len(new) >= self.size:
            self._old, self._new = new, {}
        return out

    def request(self, request) -> tuple[list[PartitionInfo], list[bytes], bytes]:
        """A LeaderAndIsrRequest's or UpdateMetadataRequest's partitions, decoded; their encodings; the request's
        encoding without its header (see :func:`split_request`)."""
        elements, rest = split_request(request.SerializeToString())
        return self.decode(elements, request.partitions), elements, rest


class ErrorAnswers:
    """The ``partition_errors`` of LeaderAndIsr and StopReplica answers, each PartitionError encoded once per
    (partition, error): an answer lists every partition of its request that has an error (a new controller's
    LeaderAndIsr of every replica: STALE_CONTROLLER_EPOCH for each one unchanged), in (topic, partition)
    order.  Keeps the last ``size`` to ``2 * size`` (see :class:`StateDecoder`); threads may share it (an
    encoding lost in a race is made again, the same)."""

    _KEY = _field_key(pb.LeaderAndIsrResponse, pb.StopReplicaResponse, name="partition_errors")
    _ERROR_KEY = _field_key(pb.LeaderAndIsrResponse, pb.StopReplicaResponse, name="error_code", wire_type=0)

    def __init__(self, size: int = 1 << 16) -> None:
        self.size = size
        self._new: dict[tuple[tuple[str, int], int], bytes] = {}
        self._old: dict[tuple[tuple[str, int], int], bytes] = {}

    @staticmethod
    def _field(tp: tuple[str, int], code: int) -> bytes:
        m = pb.PartitionError(topic=tp[0], partition=tp[1], error_code=code).SerializeToString()
        return ErrorAnswers._KEY + _varint(len(m)) + m

    def encode(self, error: int, partition_errors: dict[tuple[str, int], int], none: int) -> bytes:
        """The answer's encoding: ``error`` and, sorted, each of ``partition_errors`` whose code is not ``none``."""
        new, old = self._new, self._old
        out = [self._ERROR_KEY + _varint(error & 0xFFFFFFFFFFFFFFFF)] if error else []   # int32: two's complement
        append = out.append
        for item in sorted(partition_errors.items()):
            if item[1] == none:
                continue
            f = new.get(item)
            if f is None:
                f = old.get(item)
                if f is None:
                    f = self._field(*item)
                new[item] = f
            append(f)
        if len(new) >= self.size:
            self._old, self._new = new, {}
        return b"".join(out)


def info_to_pb(p: PartitionInfo) -> pb.PartitionState:
    return pb.PartitionState(topic=p.topic, partition=p.partition, controller_epoch=p.controller_epoch,
                             leader=p.leader, leader_epoch=p.leader_epoch, isr=list(p.isr),
                             zk_version=p.zk_version, replicas=list(p.replicas))


def partition_fetch(fp) -> PartitionFetch:
    """From a ``FetchPartition`` message."""
    return PartitionFetch(fp.fetch_offset, fp.last_fetched_epoch, fp.current_leader_epoch, fp.max_bytes,
                          fp.follower_high_watermark, fp.log_start_offset)


def fetch_message(tp: TP, pf: PartitionFetch) -> pb.FetchPartition:
    """The ``FetchPartition`` message of ``pf`` (the inverse of :func:`partition_fetch`)."""
    return pb.FetchPartition(topic=tp[0], partition=tp[1], fetch_offset=pf.fetch_offset,
                             last_fetched_epoch=pf.last_fetched_epoch, current_leader_epoch=pf.current_leader_epoch,
                             max_bytes=pf.max_bytes, follower_high_watermark=pf.follower_high_watermark,
                             log_start_offset=pf.log_start_offset)
