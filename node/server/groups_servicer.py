"""The Groups gRPC service: converts wire messages to the coordinator core's
dataclasses and back, and routes each request to the group's coordinator.

FindCoordinator is answered from this broker's metadata cache: the leader of
the group's __consumer_offsets partition, or COORDINATOR_NOT_AVAILABLE.  With
``kafkasim.offsets.topic.eager.create: false`` a FindCoordinator that finds no
offsets topic in the cache also has the broker create it, as Kafka does.
Requests for a group whose partition this broker does not lead (or has not
started loading) get NOT_COORDINATOR, so clients rediscover the coordinator.
"""
from __future__ import annotations

import asyncio
from concurrent.futures import Executor, Future
from typing import Callable

from coordinator import messages as m
from coordinator.messages import CommitOffset
from kafkacommon import errors
from node.shells.coordinator_shell import CoordinatorShell
from proto import groups_pb2 as gpb
from proto import groups_pb2_grpc as gpbg
from zk.paths import OFFSETS_TOPIC

_EXTRA_WAIT_S = 30.0  # beyond the request's own timeouts: a core always answers; this is a safety net


def _opt(s: str) -> str | None:
    return s or None


def client_host(peer: str) -> str:
    """gRPC's peer ("ipv4:127.0.0.1:5555", "ipv6:[::1]:5555") as Kafka shows a client host ("/127.0.0.1")."""
    kind, _, rest = peer.partition(":")
    if kind not in ("ipv4", "ipv6"):
        return peer
    host = rest.rsplit(":", 1)[0].strip("[]")
    return "/" + host


class GroupsServicer(gpbg.GroupsServicer):
    """Coroutine handlers (``node.server.rpc_server``): a request is handed to its core on the event loop when
    the core's lock and its partition's are free, else on a pool thread (a load or the log cleaner's
    pass over the partition may hold them a while); its answer is awaited on the loop, so a parked
    JoinGroup or SyncGroup holds no thread."""

    def __init__(self, state, shell: CoordinatorShell, pool: Executor | None = None,
                 create_offsets_topic: Callable[[], None] | None = None) -> None:
        self.state = state          # BrokerState: metadata cache and live brokers
        self.shell = shell
        self.pool = pool            # None: the event loop's default executor
        self.create_offsets_topic = create_offsets_topic  # lazy creation (returns at once), or None

    async def _call(self, group_id: str, handler: str, req, timeout_s: float):
        """The group's core's answer to ``req``, or None: no coordinator here, or no answer in time.
        The core takes it on the loop when that cannot block, else on a pool thread."""
        fut = self.shell.try_call(group_id, handler, req)
        if fut is False:
            fut = await asyncio.get_running_loop().run_in_executor(self.pool, self.shell.call, group_id, handler, req)
        return await self._wait(fut, timeout_s)

    @staticmethod
    async def _wait(fut: Future | None, timeout_s: float):
        """The core's answer, awaited on the server's event loop (a parked request holds no thread)."""
        if fut is None:
            return None
        try:
            return await asyncio.wait_for(asyncio.wrap_future(fut), timeout_s + _EXTRA_WAIT_S)
        except asyncio.TimeoutError:
            return None

    def _commit_wait_s(self) -> float:
        return self.shell.config.commit_timeout_ms / 1000

    # ------------------------------------------------------------------ discovery

    async def FindCoordinator(self, request, context):
        if not request.key:
            return gpb.FindCoordinatorResponse(error_code=errors.INVALID_GROUP_ID, node_id=-1)
        n = self.shell.num_partitions()
        p = self.shell.partition_of(request.key)
        info = self.state.metadata.get((OFFSETS_TOPIC, p))
        if info is None and self.create_offsets_topic is not None and OFFSETS_TOPIC not in self.state.topic_partitions:
            self.create_offsets_topic()
        if info is None or info.leader < 0 or info.leader not in self.state.live_brokers:
            return gpb.FindCoordinatorResponse(error_code=errors.COORDINATOR_NOT_AVAILABLE, node_id=-1,
                                               partition=p if n else -1)
        host, port, _ = self.state.live_brokers[info.leader]
        return gpb.FindCoordinatorResponse(error_code=errors.NONE, node_id=info.leader, host=host, port=port,
                                           partition=p)

    # ------------------------------------------------------------------ membership

    async def JoinGroup(self, request, context):
        req = m.JoinGroupRequest(
            group_id=request.group_id, member_id=request.member_id, session_timeout_ms=request.session_timeout_ms,
            rebalance_timeout_ms=request.rebalance_timeout_ms or request.session_timeout_ms,
            protocol_type=request.protocol_type, protocols=[(p.name, p.metadata) for p in request.protocols],
            group_instance_id=_opt(request.group_instance_id), client_id=request.client_id,
            client_host=client_host(context.peer()) if context is not None else "",
            require_known_member_id=request.require_known_member_id)
        r = await self._call(request.group_id, "join_group", req,
                             max(req.rebalance_timeout_ms, req.session_timeout_ms) / 1000)
        if r is None:
            return gpb.JoinGroupResponse(error_code=errors.NOT_COORDINATOR, generation_id=-1,
                                         member_id=request.member_id)
        return gpb.JoinGroupResponse(
            error_code=r.error_code, generation_id=r.generation_id, protocol_type=r.protocol_type or "",
            protocol_name=r.protocol_name or "", leader=r.leader or "", member_id=r.member_id or "",
            members=[gpb.JoinGroupMember(member_id=x.member_id, group_instance_id=x.group_instance_id or "",
                                         metadata=x.metadata) for x in r.members])

    async def SyncGroup(self, request, context):
        req = m.SyncGroupRequest(
            group_id=request.group_id, generation_id=request.generation_id, member_id=request.member_id,
            group_instance_id=_opt(request.group_instance_id), protocol_type=_opt(request.protocol_type),
            protocol_name=_opt(request.protocol_name),
            assignments=[(a.member_id, a.assignment) for a in request.assignments])
        # a follower waits for the leader's sync: up to the rebalance timeout (the core's DelayedSync)
        r = await self._call(request.group_id, "sync_group", req, 300 + self._commit_wait_s())
        if r is None:
            return gpb.SyncGroupResponse(error_code=errors.NOT_COORDINATOR)
        return gpb.SyncGroupResponse(error_code=r.error_code, protocol_type=r.protocol_type or "",
                                     protocol_name=r.protocol_name or "", assignment=r.assignment or b"")

    async def Heartbeat(self, request, context):
        req = m.HeartbeatRequest(group_id=request.group_id, generation_id=request.generation_id,
                                 member_id=request.member_id, group_instance_id=_opt(request.group_instance_id))
        r = await self._call(request.group_id, "heartbeat", req, 5)
        return gpb.HeartbeatResponse(error_code=errors.NOT_COORDINATOR if r is None else r.error_code)

    async def LeaveGroup(self, request, context):
        req = m.LeaveGroupRequest(group_id=request.group_id,
                                  members=[(x.member_id, _opt(x.group_instance_id)) for x in request.members])
        r = await self._call(request.group_id, "leave_group", req, self._commit_wait_s())
        if r is None:
            return gpb.LeaveGroupResponse(error_code=errors.NOT_COORDINATOR)
        return gpb.LeaveGroupResponse(error_code=r.error_code, members=[
            gpb.MemberIdentity(member_id=mid, group_instance_id=iid or "", error_code=code)
            for mid, iid, code in r.members])

    # ------------------------------------------------------------------ offsets

    async def OffsetCommit(self, request, context):
        req = m.OffsetCommitRequest(
            group_id=request.group_id, generation_id=request.generation_id, member_id=request.member_id,
            group_instance_id=_opt(request.group_instance_id), retention_time_ms=request.retention_time_ms,
            offsets=[CommitOffset(x.topic, x.partition, x.offset, x.leader_epoch, x.metadata)
                     for x in request.partitions])
        r = await self._call(request.group_id, "offset_commit", req, self._commit_wait_s())
        if r is None:
            return gpb.OffsetCommitResponse(partitions=[
                gpb.OffsetCommitPartition(topic=x.topic, partition=x.partition, error_code=errors.NOT_COORDINATOR)
                for x in request.partitions])
        part = gpb.OffsetCommitPartition
        return gpb.OffsetCommitResponse(partitions=[part(topic=t, partition=p, error_code=code)
                                                    for t, p, code in r.partitions])

    async def OffsetFetch(self, request, context):
        req = m.OffsetFetchRequest(
            group_id=request.group_id, require_stable=request.require_stable,
            partitions=None if request.all_partitions else [(x.topic, x.partition) for x in request.partitions])
        r = await self._call(request.group_id, "offset_fetch", req, 5)
        if r is None:
            return gpb.OffsetFetchResponse(error_code=errors.NOT_COORDINATOR)
        return gpb.OffsetFetchResponse(error_code=r.error_code, partitions=[
            gpb.OffsetCommitPartition(topic=x.topic, partition=x.partition, offset=x.offset,
                                      leader_epoch=x.leader_epoch if x.leader_epoch is not None else -1,
                                      metadata=x.metadata or "", error_code=x.error_code) for x in r.partitions])

    # ------------------------------------------------------------------ admin

    async def DescribeGroups(self, request, context):
        out = []
        for gid in request.group_ids:
            r = await self._call(gid, "describe_groups", m.DescribeGroupsRequest(group_ids=[gid]), 5)
            if r is None:
                out.append(gpb.DescribedGroup(error_code=errors.NOT_COORDINATOR, group_id=gid))
                continue
            for g in r.groups:
                out.append(gpb.DescribedGroup(
                    error_code=g.error_code, group_id=g.group_id, state=g.state, protocol_type=g.protocol_type or "",
                    protocol=g.protocol or "", coordinator=self.shell.broker_id,
                    generation_id=g.generation_id, members=[
                        gpb.DescribedMember(member_id=x.member_id, group_instance_id=x.group_instance_id or "",
                                            client_id=x.client_id, client_host=x.client_host,
                                            metadata=x.metadata or b"", assignment=x.assignment or b"")
                        for x in g.members]))
        return gpb.DescribeGroupsResponse(groups=out)

    async def ListGroups(self, request, context):
        code, groups = errors.NONE, []
        futs = await asyncio.get_running_loop().run_in_executor(self.pool, self.shell.call_all, "list_groups",
                                                                lambda: m.ListGroupsRequest(
                                                                    states_filter=list(request.states_filter)))
        for fut in futs:
            r = await self._wait(fut, 5)
            if r is None:
                continue
            if r.error_code != errors.NONE:
                code = r.error_code
            groups.extend(gpb.ListedGroup(group_id=g, protocol_type=pt or "", state=st) for g, pt, st in r.groups)
        if self.shell.loading_partitions():
            code = errors.COORDINATOR_LOAD_IN_PROGRESS
        return gpb.ListGroupsResponse(error_code=code, groups=sorted(groups, key=lambda g: g.group_id))

    async def DeleteGroups(self, request, context):
        out = []
        for gid in request.group_ids:
            r = await self._call(gid, "delete_groups", m.DeleteGroupsRequest(group_ids=[gid]),
                                 self._commit_wait_s())
            if r is None:
                out.append(gpb.DeleteGroupResult(group_id=gid, error_code=errors.NOT_COORDINATOR))
            else:
                out.extend(gpb.DeleteGroupResult(group_id=g, error_code=c) for g, c in r.results)
        return gpb.DeleteGroupsResponse(results=out)
