"""Group administration, as kafka-consumer-groups.sh does it: list, describe, delete, reset offsets."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import grpc
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

from client.consumer import EARLIEST, LATEST, PartitionFetcher
from client.metadata import ClientError, ClusterClient
from client.protocol import Assignment, ProtocolError
from kafkacommon import errors
from proto import groups_pb2 as gpb

TP = tuple[str, int]
_COORD = {errors.NOT_COORDINATOR, errors.COORDINATOR_NOT_AVAILABLE, errors.COORDINATOR_LOAD_IN_PROGRESS}


class _Again(Exception):
    pass


@dataclass
class GroupDescription:
    group_id: str
    coordinator: int
    state: str
    protocol_type: str
    protocol: str
    generation: int
    members: list[dict[str, Any]] = field(default_factory=list)
    offsets: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"group": self.group_id, "coordinator": self.coordinator, "state": self.state,
                "protocol_type": self.protocol_type, "assignment_strategy": self.protocol,
                "generation": self.generation, "members": self.members, "offsets": self.offsets}


class GroupAdmin:
    def __init__(self, cluster: ClusterClient, timeout_s: float = 30.0) -> None:
        self.cluster = cluster
        self.timeout_s = timeout_s

    def _retry(self, fn):
        return Retrying(retry=retry_if_exception_type((_Again, grpc.RpcError)),
                        wait=wait_exponential(multiplier=0.02, max=0.5),
                        stop=stop_after_delay(self.timeout_s), reraise=True)(fn)

    def coordinator(self, group: str) -> tuple[int, str]:
        def once():
            for endpoint in self.cluster.endpoints():
                try:
                    r = self.cluster.groups_stub(endpoint).FindCoordinator(gpb.FindCoordinatorRequest(key=group),
                                                                          timeout=2)
                except grpc.RpcError:
                    continue
                if r.error_code == errors.NONE:
                    return r.node_id, self.cluster.address(r.node_id, f"{r.host}:{r.port}")
                if r.error_code not in _COORD:
                    raise ClientError(f"FindCoordinator({group!r}): {errors.name(r.error_code)}")
            self.cluster.refresh()
            raise _Again()
        try:
            return self._retry(once)
        except _Again:
            raise ClientError(f"no coordinator for group {group!r} within {self.timeout_s:.0f} s") from None

    def _at_coordinator(self, group: str, rpc: str, request, error_of):
        def once():
            node, endpoint = self.coordinator(group)
            r = getattr(self.cluster.groups_stub(endpoint), rpc)(request, timeout=10)
            if error_of(r) in _COORD:
                raise _Again()
            return node, r
        try:
            return self._retry(once)
        except _Again:
            raise ClientError(f"{rpc} for group {group!r}: the coordinator kept moving") from None

    # ------------------------------------------------------------------ operations

    def list_groups(self) -> list[dict[str, str]]:
        self.cluster.refresh()
        seen: dict[str, dict[str, str]] = {}
        for b, endpoint in sorted(self.cluster.metadata.brokers.items()):
            try:
                r = self.cluster.groups_stub(endpoint).ListGroups(gpb.ListGroupsRequest(), timeout=5)
            except grpc.RpcError:
                continue
            for g in r.groups:
                seen[g.group_id] = {"group": g.group_id, "protocol_type": g.protocol_type, "state": g.state,
                                    "coordinator": b}
        return [seen[g] for g in sorted(seen)]

    def describe(self, group: str, with_offsets: bool = True) -> GroupDescription:
        node, r = self._at_coordinator(group, "DescribeGroups", gpb.DescribeGroupsRequest(group_ids=[group]),
                                       lambda r: r.groups[0].error_code if r.groups else errors.NONE)
        g = r.groups[0]
        if g.error_code != errors.NONE:
            raise ClientError(f"DescribeGroups({group!r}): {errors.name(g.error_code)}")
        d = GroupDescription(group, node, g.state, g.protocol_type, g.protocol, g.generation_id)
        owner: dict[TP, dict[str, Any]] = {}
        for mem in g.members:
            parts: list[TP] = []
            if g.protocol_type == "consumer" and mem.assignment:
                try:
                    parts = sorted(tuple(tp) for tp in Assignment.decode(mem.assignment).partitions)
                except ProtocolError:
                    parts = []
            info = {"member_id": mem.member_id, "group_instance_id": mem.group_instance_id or None,
                    "client_id": mem.client_id, "host": mem.client_host,
                    "assignment": [f"{t}-{p}" for t, p in parts]}
            d.members.append(info)
            for tp in parts:
                owner[tp] = info
        if with_offsets:
            committed = self.committed(group)
            tps = sorted(set(committed) | set(owner))
            ends = PartitionFetcher(self.cluster).list_offsets(tps, LATEST) if tps else {}
            for tp in tps:
                cur = committed.get(tp, -1)
                end = ends.get(tp, -1)
                m = owner.get(tp)
                d.offsets.append({"topic": tp[0], "partition": tp[1], "current_offset": cur if cur >= 0 else None,
                                  "log_end_offset": end, "lag": end - cur if cur >= 0 and end >= 0 else None,
                                  "member_id": m["member_id"] if m else None,
                                  "client_id": m["client_id"] if m else None})
        return d

    def committed(self, group: str) -> dict[TP, int]:
        _, r = self._at_coordinator(group, "OffsetFetch",
                                    gpb.OffsetFetchRequest(group_id=group, all_partitions=True),
                                    lambda r: r.error_code)
        if r.error_code != errors.NONE:
            raise ClientError(f"OffsetFetch({group!r}): {errors.name(r.error_code)}")
        return {(x.topic, x.partition): x.offset for x in r.partitions if x.offset >= 0}

    def delete(self, group: str) -> int:
        _, r = self._at_coordinator(group, "DeleteGroups", gpb.DeleteGroupsRequest(group_ids=[group]),
                                    lambda r: r.results[0].error_code if r.results else errors.NONE)
        return r.results[0].error_code if r.results else errors.UNKNOWN_SERVER_ERROR

    def plan_reset(self, group: str, topic: str, how: str, value: int | None = None) -> dict[TP, int]:
        """New offsets for every partition of ``topic``: to-earliest, to-latest, to-offset N, shift-by N."""
        parts = [(topic, p) for p in self.cluster.partitions_for(topic)]
        fetcher = PartitionFetcher(self.cluster)
        earliest = fetcher.list_offsets(parts, EARLIEST)
        latest = fetcher.list_offsets(parts, LATEST)
        if how == "to-earliest":
            target = dict(earliest)
        elif how == "to-latest":
            target = dict(latest)
        elif how == "to-offset":
            target = {tp: int(value) for tp in parts}
        elif how == "shift-by":
            cur = self.committed(group)
            target = {tp: cur.get(tp, latest[tp]) + int(value) for tp in parts}
        else:
            raise ValueError(f"unknown reset {how!r}")
        # Kafka clamps to the partition's [earliest, latest]
        return {tp: max(earliest[tp], min(latest[tp], o)) for tp, o in target.items()}

    def reset(self, group: str, offsets: dict[TP, int]) -> dict[TP, int]:
        """Commit ``offsets`` outside any generation; the group must have no active members."""
        d = self.describe(group, with_offsets=False)
        if d.state not in ("Empty", "Dead"):
            raise ClientError(f"group {group!r} is {d.state}: reset offsets only when it has no active members")
        return self.commit_simple(group, offsets)

    def commit_simple(self, group: str, offsets: dict[TP, int]) -> dict[TP, int]:
        """A commit with generation -1 (a "simple" group, or an Empty one); per-partition error codes."""
        req = gpb.OffsetCommitRequest(group_id=group, generation_id=-1, retention_time_ms=-1, partitions=[
            gpb.OffsetCommitPartition(topic=t, partition=p, offset=o, leader_epoch=-1)
            for (t, p), o in sorted(offsets.items())])
        _, r = self._at_coordinator(group, "OffsetCommit", req, lambda r: next(
            (x.error_code for x in r.partitions if x.error_code != errors.NONE), errors.NONE))
        return {(x.topic, x.partition): x.error_code for x in r.partitions}
