"""The group coordinator's door for the broker's two front ends, and the Groups gRPC service.

:class:`GroupsDoor` has one coroutine per group API, taking and answering
:mod:`coordinator.messages` types: the gRPC servicer below maps its wire
messages onto it, and the Kafka listener (listener/groups.py) maps Kafka's
structs onto it, so both doors share one way to the coordinator cores: the
same NOT_COORDINATOR answers, waits and client host; a librdkafka member and a
kafkasim member can share a group.

FindCoordinator is answered from this broker's metadata cache: the leader of
the group's __consumer_offsets partition, or COORDINATOR_NOT_AVAILABLE.  With
``kafkasim.offsets.topic.eager.create: false`` a FindCoordinator that finds no
offsets topic in the cache also has the broker create it, as Kafka does.
Requests for a group whose partition this broker does not lead (or has not
started loading) get NOT_COORDINATOR, so clients rediscover the coordinator.
"""
from __future__ import annotations

import asyncio
import collections
import threading
from concurrent.futures import Executor
from typing import Any, Callable

from coordinator import messages as m
from kafkacommon import errors
from node.shells.coordinator_shell import Answer, CoordinatorShell
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


_NO_ANSWER = object()   # what a request's waiter holds when the shell did not answer in time


def _pass_on(answered: Any, waiter: asyncio.Future) -> None:
    """On the door's loop: the shell's answer (an :class:`Answer`, or ``_NO_ANSWER`` when none came in time) to
    the request's waiter, unless the waiter is settled already (answered, timed out, or cancelled with its
    request)."""
    if waiter.done():
        return
    if answered is _NO_ANSWER:
        waiter.set_result(_NO_ANSWER)
        return
    try:
        waiter.set_result(answered.result())
    except Exception as e:   # a shell's failure is the request's, as wrap_future passed it on
        waiter.set_exception(e)


class _Relay:
    """Hands the shell's answers (set on whichever thread learnt them: normally a follower's Fetch that moved the
    HW) to their waiters on one loop: answers that come while a hand-off is already on its way to the loop ride
    on it, so a replication round that completes several commits wakes the loop once (issue 49), not once per
    answer.  Nothing is handed to a closed loop (the broker is stopping), as before."""

    __slots__ = ("loop", "lock", "items", "scheduled")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.lock = threading.Lock()
        self.items: list[tuple[Answer, asyncio.Future]] = []
        self.scheduled = False

    def put(self, answered: Answer, waiter: asyncio.Future) -> None:
        with self.lock:
            self.items.append((answered, waiter))
            if self.scheduled:
                return
            self.scheduled = True
        if self.loop.is_closed():
            return
        try:
            self.loop.call_soon_threadsafe(self._run)
        except RuntimeError:   # closed meanwhile
            pass

    def _run(self) -> None:
        with self.lock:
            items, self.items, self.scheduled = self.items, [], False
        for answered, waiter in items:
            _pass_on(answered, waiter)


class _FetchWake:
    """Group commit (issue 49): the requests a loop hands to the shell without blocking leave the wake-up of the
    followers' parked fetches for their appends to one call of the shell's ``wake_fetches``, made by the loop
    after the callbacks already ready when the first of them came.  So the commits of every group handled in one
    turn of the loop, on one offsets partition or many, reach the followers in one replication round (one fetch
    answer each), as appends from many request threads share a follower's fetch in Kafka.  Each request still
    waits for the HW to pass its own records."""

    __slots__ = ("loop", "wake", "scheduled")

    def __init__(self, loop: asyncio.AbstractEventLoop, wake: Callable[[], None]) -> None:
        self.loop = loop
        self.wake = wake
        self.scheduled = False

    def soon(self) -> None:
        if not self.scheduled:
            self.scheduled = True
            self.loop.call_soon(self._run)

    def _run(self) -> None:
        self.scheduled = False
        self.wake()


class _Deadlines:
    """The safety-net deadlines of one loop's waiting requests: a waiter not settled by its deadline gets
    ``_NO_ANSWER`` there, as a ``call_later`` per request would give it, but with one timer per timeout value
    instead of a timer made and cancelled for every request (issue 49: ~5% of the Kafka listener's samples under
    commits).  Waiters of one timeout value are queued in the order they came, so their deadlines are in order;
    the timer is set for the first waiter still unsettled, and settled waiters (answered, or cancelled with their
    request) leave the queue's head as new ones arrive and when the timer fires."""

    __slots__ = ("loop", "queues", "timers")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queues: dict[float, collections.deque] = {}
        self.timers: dict[float, asyncio.TimerHandle] = {}

    def add(self, timeout_s: float, waiter: asyncio.Future) -> None:
        q = self.queues.get(timeout_s)
        if q is None:
            q = self.queues[timeout_s] = collections.deque()
        while q and q[0][1].done():
            q.popleft()
        q.append((self.loop.time() + timeout_s, waiter))
        if timeout_s not in self.timers:
            self._arm(timeout_s, q)

    def _arm(self, timeout_s: float, q: collections.deque) -> None:
        while q and q[0][1].done():
            q.popleft()
        if q:
            self.timers[timeout_s] = self.loop.call_at(q[0][0], self._fire, timeout_s)
        else:
            self.timers.pop(timeout_s, None)
            del self.queues[timeout_s]

    def _fire(self, timeout_s: float) -> None:
        q = self.queues[timeout_s]
        now = self.loop.time()
        while q and (q[0][1].done() or q[0][0] <= now):
            _, waiter = q.popleft()
            _pass_on(_NO_ANSWER, waiter)
        self._arm(timeout_s, q)


class GroupsDoor:
    """Coroutines on a front end's event loop: a request is handed to its core on the loop when the core's
    lock and its partition's are free, else on a pool thread (a load or the log cleaner's pass over the
    partition may hold them a while); its answer is awaited on the loop, so a parked JoinGroup or SyncGroup
    holds no thread.  No answer in time (the request's own timeout, plus a margin) is NOT_COORDINATOR."""

    def __init__(self, state, shell: CoordinatorShell, pool: Executor | None = None,
                 create_offsets_topic: Callable[[], bool] | None = None) -> None:
        self.state = state          # BrokerState: metadata cache and live brokers
        self.shell = shell
        self.pool = pool            # None: the event loop's default executor
        self.create_offsets_topic = create_offsets_topic  # lazy creation (returns at once), or None
        # each front end's loop: its answers' relay and its waiters' deadlines
        self._on_loop: dict[asyncio.AbstractEventLoop, tuple[_Relay, _Deadlines, _FetchWake]] = {}

    @property
    def broker_id(self) -> int:
        return self.shell.broker_id

    async def _ask(self, submit: Callable[..., Answer | None], req: Any, timeout_s: float) -> Any:
        """``submit(req, block)`` (one of the shell's APIs) and its answer, or the request's NOT_COORDINATOR
        answer when none comes in time.  An answer given at once (a fetch, an error) is returned without a
        wait; else the loop waits on one future of its own, set from the answering thread, and its deadline (``_Deadlines``)."""
        loop = asyncio.get_running_loop()
        on_loop = self._on_loop.get(loop)
        if on_loop is None:
            on_loop = self._on_loop[loop] = (_Relay(loop), _Deadlines(loop), _FetchWake(loop, self.shell.wake_fetches))
        relay, deadlines, fetch_wake = on_loop
        fut = submit(req, False)
        if fut is None:
            fut = await loop.run_in_executor(self.pool, submit, req, True)
        else:   # its appends (if any) wake the followers' parked fetches once this turn of the loop is done
            fetch_wake.soon()
        if fut.done():
            return fut.result()
        waiter = loop.create_future()
        fut.add_done_callback(lambda f: relay.put(f, waiter))
        deadlines.add(timeout_s + _EXTRA_WAIT_S, waiter)
        answer = await waiter
        return req.error_response(errors.NOT_COORDINATOR) if answer is _NO_ANSWER else answer

    def _commit_wait_s(self) -> float:
        return self.shell.config.commit_timeout_ms / 1000

    # ------------------------------------------------------------------ discovery

    def find_coordinator(self, req: m.FindCoordinatorRequest) -> m.FindCoordinatorResponse:
        if not req.key:
            return req.error_response(errors.INVALID_GROUP_ID)
        n = self.shell.num_partitions()
        p = self.shell.partition_of(req.key)
        info = self.state.metadata.get((OFFSETS_TOPIC, p))
        if info is None and self.create_offsets_topic is not None and OFFSETS_TOPIC not in self.state.topic_partitions:
            self.create_offsets_topic()
        if info is None or info.leader < 0 or info.leader not in self.state.live_brokers:
            return m.FindCoordinatorResponse(errors.COORDINATOR_NOT_AVAILABLE, partition=p if n else -1)
        host, port, _ = self.state.live_brokers[info.leader]
        return m.FindCoordinatorResponse(errors.NONE, info.leader, host, port, p)

    # ------------------------------------------------------------------ membership

    async def join_group(self, req: m.JoinGroupRequest) -> m.JoinGroupResponse:
        return await self._ask(self.shell.join_group, req, max(req.rebalance_timeout_ms, req.session_timeout_ms) / 1000)

    async def sync_group(self, req: m.SyncGroupRequest) -> m.SyncGroupResponse:
        # a follower waits for the leader's sync: up to the rebalance timeout (the core's DelayedSync)
        return await self._ask(self.shell.sync_group, req, 300 + self._commit_wait_s())

    async def heartbeat(self, req: m.HeartbeatRequest) -> m.HeartbeatResponse:
        return await self._ask(self.shell.heartbeat, req, 5)

    async def leave_group(self, req: m.LeaveGroupRequest) -> m.LeaveGroupResponse:
        return await self._ask(self.shell.leave_group, req, self._commit_wait_s())

    # ------------------------------------------------------------------ offsets

    async def offset_commit(self, req: m.OffsetCommitRequest) -> m.OffsetCommitResponse:
        return await self._ask(self.shell.offset_commit, req, self._commit_wait_s())

    async def txn_offset_commit(self, req: m.TxnOffsetCommitRequest) -> m.OffsetCommitResponse:
        return await self._ask(self.shell.txn_offset_commit, req, self._commit_wait_s())

    async def offset_fetch(self, req: m.OffsetFetchRequest) -> m.OffsetFetchResponse:
        return await self._ask(self.shell.offset_fetch, req, 5)

    # ------------------------------------------------------------------ admin (each group on its own)

    async def describe_groups(self, req: m.DescribeGroupsRequest) -> m.DescribeGroupsResponse:
        groups = []
        for gid in req.group_ids:
            r = await self._ask(self.shell.describe_groups, m.DescribeGroupsRequest([gid]), 5)
            groups.extend(r.groups)
        return m.DescribeGroupsResponse(groups)

    async def list_groups(self, req: m.ListGroupsRequest) -> m.ListGroupsResponse:
        return await asyncio.get_running_loop().run_in_executor(self.pool, self.shell.list_groups, req)

    async def delete_groups(self, req: m.DeleteGroupsRequest) -> m.DeleteGroupsResponse:
        results = []
        for gid in req.group_ids:
            r = await self._ask(self.shell.delete_groups, m.DeleteGroupsRequest([gid]), self._commit_wait_s())
            results.extend(r.results)
        return m.DeleteGroupsResponse(results)


    async def offset_delete(self, req: m.OffsetDeleteRequest) -> m.OffsetDeleteResponse:
        return await self._ask(self.shell.offset_delete, req, self._commit_wait_s())


class GroupsServicer(gpbg.GroupsServicer):
    """The ``Groups`` gRPC service: its wire messages to and from :class:`GroupsDoor`'s (coroutine handlers,
    ``node.server.rpc_server``)."""

    def __init__(self, state, shell: CoordinatorShell, pool: Executor | None = None,
                 create_offsets_topic: Callable[[], bool] | None = None) -> None:
        self.door = GroupsDoor(state, shell, pool, create_offsets_topic)

    async def FindCoordinator(self, request, context):
        r = self.door.find_coordinator(m.FindCoordinatorRequest(request.key))
        return gpb.FindCoordinatorResponse(error_code=r.error_code, node_id=r.node_id, host=r.host, port=r.port,
                                           partition=r.partition)

    async def JoinGroup(self, request, context):
        r = await self.door.join_group(m.JoinGroupRequest(
            group_id=request.group_id, member_id=request.member_id, session_timeout_ms=request.session_timeout_ms,
            rebalance_timeout_ms=request.rebalance_timeout_ms or request.session_timeout_ms,
            protocol_type=request.protocol_type, protocols=[(p.name, p.metadata) for p in request.protocols],
            group_instance_id=_opt(request.group_instance_id), client_id=request.client_id,
            client_host=client_host(context.peer()) if context is not None else "",
            require_known_member_id=request.require_known_member_id))
        return gpb.JoinGroupResponse(
            error_code=r.error_code, generation_id=r.generation_id, protocol_type=r.protocol_type or "",
            protocol_name=r.protocol_name or "", leader=r.leader or "", member_id=r.member_id or "",
            members=[gpb.JoinGroupMember(member_id=x.member_id, group_instance_id=x.group_instance_id or "",
                                         metadata=x.metadata) for x in r.members])

    async def SyncGroup(self, request, context):
        r = await self.door.sync_group(m.SyncGroupRequest(
            group_id=request.group_id, generation_id=request.generation_id, member_id=request.member_id,
            group_instance_id=_opt(request.group_instance_id), protocol_type=_opt(request.protocol_type),
            protocol_name=_opt(request.protocol_name),
            assignments=[(a.member_id, a.assignment) for a in request.assignments]))
        return gpb.SyncGroupResponse(error_code=r.error_code, protocol_type=r.protocol_type or "",
                                     protocol_name=r.protocol_name or "", assignment=r.assignment or b"")

    async def Heartbeat(self, request, context):
        r = await self.door.heartbeat(m.HeartbeatRequest(group_id=request.group_id, generation_id=request.generation_id,
                                                         member_id=request.member_id,
                                                         group_instance_id=_opt(request.group_instance_id)))
        return gpb.HeartbeatResponse(error_code=r.error_code)

    async def LeaveGroup(self, request, context):
        r = await self.door.leave_group(m.LeaveGroupRequest(
            group_id=request.group_id, members=[(x.member_id, _opt(x.group_instance_id)) for x in request.members]))
        return gpb.LeaveGroupResponse(error_code=r.error_code, members=[
            gpb.MemberIdentity(member_id=mid, group_instance_id=iid or "", error_code=code)
            for mid, iid, code in r.members])

    async def OffsetCommit(self, request, context):
        r = await self.door.offset_commit(m.OffsetCommitRequest(
            group_id=request.group_id, generation_id=request.generation_id, member_id=request.member_id,
            group_instance_id=_opt(request.group_instance_id), retention_time_ms=request.retention_time_ms,
            offsets=[m.CommitOffset(x.topic, x.partition, x.offset, x.leader_epoch, x.metadata)
                     for x in request.partitions]))
        part = gpb.OffsetCommitPartition
        return gpb.OffsetCommitResponse(partitions=[part(topic=t, partition=p, error_code=code)
                                                    for t, p, code in r.partitions])

    async def OffsetFetch(self, request, context):
        r = await self.door.offset_fetch(m.OffsetFetchRequest(
            group_id=request.group_id, require_stable=request.require_stable,
            partitions=None if request.all_partitions else [(x.topic, x.partition) for x in request.partitions]))
        return gpb.OffsetFetchResponse(error_code=r.error_code, partitions=[
            gpb.OffsetCommitPartition(topic=x.topic, partition=x.partition, offset=x.offset,
                                      leader_epoch=x.leader_epoch if x.leader_epoch is not None else -1,
                                      metadata=x.metadata or "", error_code=x.error_code) for x in r.partitions])

    async def DescribeGroups(self, request, context):
        r = await self.door.describe_groups(m.DescribeGroupsRequest(group_ids=list(request.group_ids)))
        return gpb.DescribeGroupsResponse(groups=[gpb.DescribedGroup(
            error_code=g.error_code, group_id=g.group_id, state=g.state, protocol_type=g.protocol_type or "",
            protocol=g.protocol or "", coordinator=self.door.broker_id, generation_id=g.generation_id, members=[
                gpb.DescribedMember(member_id=x.member_id, group_instance_id=x.group_instance_id or "",
                                    client_id=x.client_id, client_host=x.client_host,
                                    metadata=x.metadata or b"", assignment=x.assignment or b"")
                for x in g.members]) for g in r.groups])

    async def ListGroups(self, request, context):
        r = await self.door.list_groups(m.ListGroupsRequest(states_filter=list(request.states_filter)))
        return gpb.ListGroupsResponse(error_code=r.error_code, groups=[
            gpb.ListedGroup(group_id=g, protocol_type=pt or "", state=st) for g, pt, st in r.groups])

    async def DeleteGroups(self, request, context):
        r = await self.door.delete_groups(m.DeleteGroupsRequest(group_ids=list(request.group_ids)))
        return gpb.DeleteGroupsResponse(results=[gpb.DeleteGroupResult(group_id=g, error_code=c)
                                                 for g, c in r.results])
