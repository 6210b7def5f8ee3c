"""The group APIs on the Kafka listener: Kafka's structs to the coordinator's messages and back.

Each Kafka request becomes the :mod:`coordinator.messages` request and goes to
the same door as the gRPC path's (``GroupsDoor``, node/server/groups_servicer.py),
so both doors share one way onto the coordinator cores: the same
NOT_COORDINATOR answers and waits; a librdkafka member and a kafkasim member
can share a group.  Only the field shapes (and what each version carries) are
translated here.  The client host a member is described with is the
connection's peer, as Kafka shows it ("/127.0.0.1").
"""
from __future__ import annotations

from typing import Any

from coordinator import messages as m
from listener.context import ListenerContext
from listener.protocol import Request
from listener.server import Connection
from kafkacommon import errors

NO_AUTHORIZED_OPERATIONS = None  # encoded as Kafka's -2147483648: not asked for


def _by_topic(rows: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """(topic, partition fields) rows as Kafka's topics → partitions, topics in first-seen order."""
    topics: dict[str, list] = {}
    for topic, fields in rows:
        topics.setdefault(topic, []).append(fields)
    return [dict(name=t, partitions=ps) for t, ps in topics.items()]


def handlers(ctx: ListenerContext) -> dict[int, Any]:
    door = ctx.groups

    async def join_group(req: Request, conn: Connection) -> dict[str, Any]:
        b, v = req.body, req.api_version
        # v0 has no rebalance timeout: the session timeout stands in (as KafkaApis does)
        rebalance_timeout_ms = (b.rebalance_timeout_ms if v >= 1 else 0) or b.session_timeout_ms
        r = await door.join_group(m.JoinGroupRequest(
            group_id=b.group_id, member_id=b.member_id or "", session_timeout_ms=b.session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms, protocol_type=b.protocol_type,
            protocols=[(p.name, bytes(p.metadata)) for p in b.protocols],
            group_instance_id=(b.group_instance_id or None) if v >= 5 else None, client_id=req.client_id or "",
            client_host=conn.client_host, require_known_member_id=v >= 4))
        return dict(throttle_time_ms=0, error_code=r.error_code, generation_id=r.generation_id,
                    protocol_type=r.protocol_type or None,
                    protocol_name=(r.protocol_name or "") if v < 7 else (r.protocol_name or None),
                    leader=r.leader or "", member_id=r.member_id or "",
                    members=[dict(member_id=x.member_id, group_instance_id=x.group_instance_id or None,
                                  metadata=x.metadata) for x in r.members])

    async def sync_group(req: Request, conn: Connection) -> dict[str, Any]:
        b, v = req.body, req.api_version
        r = await door.sync_group(m.SyncGroupRequest(
            group_id=b.group_id, generation_id=b.generation_id, member_id=b.member_id,
            group_instance_id=(b.group_instance_id or None) if v >= 3 else None,
            protocol_type=(b.protocol_type or None) if v >= 5 else None,
            protocol_name=(b.protocol_name or None) if v >= 5 else None,
            assignments=[(a.member_id, bytes(a.assignment)) for a in b.assignments]))
        return dict(throttle_time_ms=0, error_code=r.error_code, protocol_type=r.protocol_type or None,
                    protocol_name=r.protocol_name or None, assignment=r.assignment or b"")

    async def heartbeat(req: Request, conn: Connection) -> dict[str, Any]:
        b, v = req.body, req.api_version
        r = await door.heartbeat(m.HeartbeatRequest(
            group_id=b.group_id, generation_id=b.generation_id, member_id=b.member_id,
            group_instance_id=(b.group_instance_id or None) if v >= 3 else None))
        return dict(throttle_time_ms=0, error_code=r.error_code)

    async def leave_group(req: Request, conn: Connection) -> dict[str, Any]:
        b, v = req.body, req.api_version
        if v <= 2:
            members: list[tuple[str, str | None]] = [(b.member_id, None)]
        else:
            members = [(x.member_id, x.group_instance_id or None) for x in b.members]
        r = await door.leave_group(m.LeaveGroupRequest(group_id=b.group_id, members=members))
        code = r.error_code
        if v <= 2 and code == errors.NONE and r.members:
            code = r.members[0][2]  # v0-2 have one member and only the top-level error
        return dict(throttle_time_ms=0, error_code=code, members=[
            dict(member_id=mid, group_instance_id=iid or None, error_code=c) for mid, iid, c in r.members])

    async def offset_commit(req: Request, conn: Connection) -> dict[str, Any]:
        b, v = req.body, req.api_version
        # Kafka 2.8's handleOffsetCommitRequest: a partition its metadata cache lacks gets
        # UNKNOWN_TOPIC_OR_PARTITION and is not committed; the group sees only the others (conformance
        # OffsetCommit.*.unknown_topic)
        known = ctx.state.metadata
        unknown: list[tuple[str, int]] = []
        offsets: list[m.CommitOffset] = []
        for t in b.topics:
            name = t.name
            for p in t.partitions:
                if (name, p.partition_index) in known:
                    offsets.append(m.CommitOffset(name, p.partition_index, p.committed_offset,
                                                  p.committed_leader_epoch if v >= 6 else -1,
                                                  p.committed_metadata or ""))
                else:
                    unknown.append((name, p.partition_index))
        rows = [(t, dict(partition_index=p, error_code=errors.UNKNOWN_TOPIC_OR_PARTITION)) for t, p in unknown]
        if offsets or not unknown:
            r = await door.offset_commit(m.OffsetCommitRequest(
                group_id=b.group_id, generation_id=b.generation_id_or_member_epoch, member_id=b.member_id or "",
                group_instance_id=(b.group_instance_id or None) if v >= 7 else None,
                retention_time_ms=b.retention_time_ms if v <= 4 else -1, offsets=offsets))
            rows = [(t, dict(partition_index=p, error_code=code)) for t, p, code in r.partitions] + rows
        return dict(throttle_time_ms=0, topics=_by_topic(rows))

    async def offset_fetch(req: Request, conn: Connection) -> dict[str, Any]:
        b, v = req.body, req.api_version
        wanted = None if b.topics is None else [(t.name, p) for t in b.topics for p in t.partition_indexes]
        r = await door.offset_fetch(m.OffsetFetchRequest(
            group_id=b.group_id, partitions=wanted, require_stable=bool(b.require_stable) if v >= 7 else False))
        rows = []
        if v < 2 and r.error_code != errors.NONE:  # v0-1 have no top-level error: each partition carries it
            rows = [(t, dict(partition_index=p, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                             error_code=r.error_code)) for t, p in wanted or []]
        rows += [(x.topic, dict(partition_index=x.partition, committed_offset=x.offset,
                                committed_leader_epoch=x.leader_epoch if x.leader_epoch is not None else -1,
                                metadata=x.metadata or "", error_code=x.error_code)) for x in r.partitions]
        return dict(throttle_time_ms=0, error_code=r.error_code, topics=_by_topic(rows))

    async def describe_groups(req: Request, conn: Connection) -> dict[str, Any]:
        r = await door.describe_groups(m.DescribeGroupsRequest(group_ids=list(req.body.groups)))
        return dict(throttle_time_ms=0, groups=[dict(
            error_code=g.error_code, error_message=None, group_id=g.group_id, group_state=g.state,
            protocol_type=g.protocol_type or "", protocol_data=g.protocol or "",
            authorized_operations=NO_AUTHORIZED_OPERATIONS,
            members=[dict(member_id=x.member_id, group_instance_id=x.group_instance_id or None,
                          client_id=x.client_id, client_host=x.client_host, member_metadata=x.metadata or b"",
                          member_assignment=x.assignment or b"") for x in g.members]) for g in r.groups])

    async def list_groups(req: Request, conn: Connection) -> dict[str, Any]:
        states = list(req.body.states_filter or []) if req.api_version >= 4 else []
        r = await door.list_groups(m.ListGroupsRequest(states_filter=states))
        return dict(throttle_time_ms=0, error_code=r.error_code, groups=[
            dict(group_id=g, protocol_type=pt or "", group_state=st) for g, pt, st in r.groups])

    async def delete_groups(req: Request, conn: Connection) -> dict[str, Any]:
        r = await door.delete_groups(m.DeleteGroupsRequest(group_ids=list(req.body.groups_names)))
        return dict(throttle_time_ms=0, results=[dict(group_id=g, error_code=c) for g, c in r.results])

    async def offset_delete(req: Request, conn: Connection) -> dict[str, Any]:
        """OffsetDelete: a partition the metadata cache does not know answers UNKNOWN_TOPIC_OR_PARTITION (as
        KafkaApis does before the coordinator); a group-level error answers no partitions."""
        b = req.body
        wanted = list(dict.fromkeys((t.name, p.partition_index) for t in b.topics or [] for p in t.partitions or []))
        known = [tp for tp in wanted if tp in ctx.state.metadata]
        r = await door.offset_delete(m.OffsetDeleteRequest(group_id=b.group_id, partitions=known))
        if r.error_code != errors.NONE:
            return dict(error_code=r.error_code, throttle_time_ms=0, topics=[])
        codes = {(t, p): c for t, p, c in r.partitions}
        rows = [(t, dict(partition_index=p, error_code=codes.get((t, p), errors.UNKNOWN_TOPIC_OR_PARTITION)))
                for t, p in wanted]
        return dict(error_code=errors.NONE, throttle_time_ms=0, topics=_by_topic(rows))

    return {11: join_group, 14: sync_group, 12: heartbeat, 13: leave_group, 8: offset_commit, 9: offset_fetch,
            15: describe_groups, 16: list_groups, 42: delete_groups, 47: offset_delete}
