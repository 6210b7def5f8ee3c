"""The group APIs on the Kafka listener, through the gRPC path's own front door.

Each Kafka request becomes the ``Groups`` service's message and goes to the
same ``GroupsServicer`` method (node/server/groups_servicer.py), so both doors share
one mapping onto the coordinator cores: the same NOT_COORDINATOR answers,
waits and client host; a librdkafka member and a kafkasim member can share a
group.  Only the field shapes are translated here.
"""
from __future__ import annotations

from typing import Any

from listener.context import ListenerContext
from listener.protocol import Request
from listener.server import Connection
from kafkacommon import errors
from proto import groups_pb2 as gpb

NO_AUTHORIZED_OPERATIONS = None  # encoded as Kafka's -2147483648: not asked for


def _s(value: str | None) -> str:
    return value or ""


def _n(value: str) -> str | None:
    return value or None


def handlers(ctx: ListenerContext) -> dict[int, Any]:
    g = ctx.groups

    async def join_group(req: Request, conn: Connection) -> dict[str, Any]:
        b, v = req.body, req.api_version
        r = await g.JoinGroup(gpb.JoinGroupRequest(
            group_id=b.group_id, session_timeout_ms=b.session_timeout_ms,
            rebalance_timeout_ms=b.rebalance_timeout_ms if v >= 1 else 0, member_id=_s(b.member_id),
            group_instance_id=_s(b.group_instance_id) if v >= 5 else "", protocol_type=b.protocol_type,
            protocols=[gpb.Protocol(name=p.name, metadata=bytes(p.metadata)) for p in b.protocols],
            client_id=_s(req.client_id), require_known_member_id=v >= 4), conn)
        return dict(throttle_time_ms=0, error_code=r.error_code, generation_id=r.generation_id,
                    protocol_type=_n(r.protocol_type), protocol_name=r.protocol_name if v < 7 else _n(r.protocol_name),
                    leader=r.leader, member_id=r.member_id,
                    members=[dict(member_id=m.member_id, group_instance_id=_n(m.group_instance_id),
                                  metadata=m.metadata) for m in r.members])

    async def sync_group(req: Request, conn: Connection) -> dict[str, Any]:
        b, v = req.body, req.api_version
        r = await g.SyncGroup(gpb.SyncGroupRequest(
            group_id=b.group_id, generation_id=b.generation_id, member_id=b.member_id,
            group_instance_id=_s(b.group_instance_id) if v >= 3 else "",
            protocol_type=_s(b.protocol_type) if v >= 5 else "", protocol_name=_s(b.protocol_name) if v >= 5 else "",
            assignments=[gpb.SyncGroupAssignment(member_id=a.member_id, assignment=bytes(a.assignment))
                         for a in b.assignments]), conn)
        return dict(throttle_time_ms=0, error_code=r.error_code, protocol_type=_n(r.protocol_type),
                    protocol_name=_n(r.protocol_name), assignment=r.assignment)

    async def heartbeat(req: Request, conn: Connection) -> dict[str, Any]:
        b, v = req.body, req.api_version
        r = await g.Heartbeat(gpb.HeartbeatRequest(group_id=b.group_id, generation_id=b.generation_id,
                                                   member_id=b.member_id,
                                                   group_instance_id=_s(b.group_instance_id) if v >= 3 else ""), conn)
        return dict(throttle_time_ms=0, error_code=r.error_code)

    async def leave_group(req: Request, conn: Connection) -> dict[str, Any]:
        b, v = req.body, req.api_version
        if v <= 2:
            members = [gpb.MemberIdentity(member_id=b.member_id)]
        else:
            members = [gpb.MemberIdentity(member_id=m.member_id, group_instance_id=_s(m.group_instance_id))
                       for m in b.members]
        r = await g.LeaveGroup(gpb.LeaveGroupRequest(group_id=b.group_id, members=members), conn)
        code = r.error_code
        if v <= 2 and code == errors.NONE and r.members:
            code = r.members[0].error_code  # v0-2 have one member and only the top-level error
        return dict(throttle_time_ms=0, error_code=code, members=[
            dict(member_id=m.member_id, group_instance_id=_n(m.group_instance_id), error_code=m.error_code)
            for m in r.members])

    async def offset_commit(req: Request, conn: Connection) -> dict[str, Any]:
        b, v = req.body, req.api_version
        parts = [gpb.OffsetCommitPartition(topic=t.name, partition=p.partition_index, offset=p.committed_offset,
                                           leader_epoch=p.committed_leader_epoch if v >= 6 else -1,
                                           metadata=_s(p.committed_metadata))
                 for t in b.topics for p in t.partitions]
        r = await g.OffsetCommit(gpb.OffsetCommitRequest(
            group_id=b.group_id, generation_id=b.generation_id_or_member_epoch, member_id=_s(b.member_id),
            group_instance_id=_s(b.group_instance_id) if v >= 7 else "",
            retention_time_ms=b.retention_time_ms if v <= 4 else -1, partitions=parts), conn)
        topics: dict[str, list] = {}
        for x in r.partitions:
            topics.setdefault(x.topic, []).append(dict(partition_index=x.partition, error_code=x.error_code))
        return dict(throttle_time_ms=0, topics=[dict(name=t, partitions=ps) for t, ps in topics.items()])

    async def offset_fetch(req: Request, conn: Connection) -> dict[str, Any]:
        b, v = req.body, req.api_version
        every = b.topics is None
        wanted = [] if every else [gpb.TopicPartitionRef(topic=t.name, partition=p)
                                   for t in b.topics for p in t.partition_indexes]
        r = await g.OffsetFetch(gpb.OffsetFetchRequest(group_id=b.group_id, partitions=wanted, all_partitions=every,
                                                       require_stable=bool(b.require_stable) if v >= 7 else False),
                                conn)
        topics: dict[str, list] = {}
        if v < 2 and r.error_code != errors.NONE:  # v0-1 have no top-level error: each partition carries it
            for w in wanted:
                topics.setdefault(w.topic, []).append(dict(partition_index=w.partition, committed_offset=-1,
                                                           committed_leader_epoch=-1, metadata="",
                                                           error_code=r.error_code))
        for x in r.partitions:
            topics.setdefault(x.topic, []).append(dict(
                partition_index=x.partition, committed_offset=x.offset, committed_leader_epoch=x.leader_epoch,
                metadata=x.metadata, error_code=x.error_code))
        return dict(throttle_time_ms=0, error_code=r.error_code,
                    topics=[dict(name=t, partitions=ps) for t, ps in topics.items()])

    async def describe_groups(req: Request, conn: Connection) -> dict[str, Any]:
        r = await g.DescribeGroups(gpb.DescribeGroupsRequest(group_ids=list(req.body.groups)), conn)
        return dict(throttle_time_ms=0, groups=[dict(
            error_code=x.error_code, error_message=None, group_id=x.group_id, group_state=x.state,
            protocol_type=x.protocol_type, protocol_data=x.protocol, authorized_operations=NO_AUTHORIZED_OPERATIONS,
            members=[dict(member_id=m.member_id, group_instance_id=_n(m.group_instance_id), client_id=m.client_id,
                          client_host=m.client_host, member_metadata=m.metadata, member_assignment=m.assignment)
                     for m in x.members]) for x in r.groups])

    async def list_groups(req: Request, conn: Connection) -> dict[str, Any]:
        states = list(req.body.states_filter or []) if req.api_version >= 4 else []
        r = await g.ListGroups(gpb.ListGroupsRequest(states_filter=states), conn)
        return dict(throttle_time_ms=0, error_code=r.error_code, groups=[
            dict(group_id=x.group_id, protocol_type=x.protocol_type, group_state=x.state) for x in r.groups])

    async def delete_groups(req: Request, conn: Connection) -> dict[str, Any]:
        r = await g.DeleteGroups(gpb.DeleteGroupsRequest(group_ids=list(req.body.groups_names)), conn)
        return dict(throttle_time_ms=0, results=[dict(group_id=x.group_id, error_code=x.error_code)
                                                 for x in r.results])

    return {11: join_group, 14: sync_group, 12: heartbeat, 13: leave_group, 8: offset_commit, 9: offset_fetch,
            15: describe_groups, 16: list_groups, 42: delete_groups}
