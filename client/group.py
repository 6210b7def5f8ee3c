"""A consumer-group member: Kafka's consumer coordinator protocol, over our gRPC.

    member = GroupMember(cluster, "orders", ["t"], assignors=["range"])
    records = member.poll(500)          # joins, syncs, then fetches
    member.commit()                     # commits the positions reached
    member.close()                      # LeaveGroup

* **Discovery.** FindCoordinator against any broker, retried while the answer
  is COORDINATOR_NOT_AVAILABLE or the broker is unreachable (:func:`backoff_s`).
* **Join and sync.** JoinGroup (first with no member id: MEMBER_ID_REQUIRED
  hands one back), the leader runs the chosen assignor over the members'
  subscriptions, SyncGroup gives everyone their assignment.  Eager protocols
  revoke everything before joining; cooperative-sticky revokes only what
  moves, and rejoins once when it gave something up.
* **Errors, as Kafka's client handles them.** NOT_COORDINATOR,
  COORDINATOR_NOT_AVAILABLE, or the coordinator's connection failing: forget
  the coordinator (Kafka's markCoordinatorUnknown) and look for the new one at
  once; COORDINATOR_LOAD_IN_PROGRESS: keep it and retry soon (it is loading the
  group).  REBALANCE_IN_PROGRESS: rejoin.  ILLEGAL_GENERATION,
  UNKNOWN_MEMBER_ID: reset (a new member id) and rejoin.  FENCED_INSTANCE_ID
  and protocol errors are fatal (:class:`GroupError`).
* **Liveness.** A background thread heartbeats every
  ``heartbeat_interval_ms`` while the member is in a generation; a heartbeat
  error flags a rejoin that the next ``poll`` carries out.

Every request and its outcome can be observed through ``on_op`` (used by the
chaos workloads to write their histories).
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Iterable, Protocol

import grpc
from tenacity import RetryCallState, RetryError, Retrying, retry_if_exception_type, stop_after_delay

from client.consumer import ConsumerRecord, PartitionFetcher
from client.metadata import ClientError, ClusterClient
from client import member_rules as rules
from client.assignors import get_assignor
from client.member_rules import COORDINATOR_ERRORS, RESET_ERRORS, MemberState
from client.protocol import Assignment, ProtocolError, Subscription
from kafkacommon import errors
from proto import groups_pb2 as gpb

log = logging.getLogger(__name__)
TP = tuple[str, int]



class GroupError(ClientError):
    def __init__(self, what: str, code: int) -> None:
        super().__init__(f"{what}: {errors.name(code)} ({code})")
        self.code = code


class CommitFailedError(GroupError):
    """The commit cannot succeed in this generation (a rebalance happened); rejoin and retry."""


class RetriableGroupError(Exception):
    """A retriable coordinator error (its code), retried inside the member's calls."""

    def __init__(self, code: int) -> None:
        super().__init__(errors.name(code))
        self.code = code


#: the longest wait between two attempts (Kafka's retry.backoff.ms, 100 ms)
MAX_BACKOFF_S = 0.1
#: while the coordinator moves or loads, the next attempt waits this share of the time spent so far, at least
#: ``MIN_POLL_S``: so the first attempt after the move or the load comes at most ~5% late (2 ms at first)
POLL_FRACTION = 0.05
MIN_POLL_S = 0.002


def backoff_s(state: RetryCallState) -> float:
    """The wait before the next attempt of a call that failed (tenacity's ``wait``).

    * The coordinator answered NOT_COORDINATOR, or its connection failed: the first retry goes at once (it
      starts with a FindCoordinator): the client learns of a move from the old coordinator's answer or the
      closed connection, as Kafka's clients do, not from a sleep.
    * Then, and for COORDINATOR_NOT_AVAILABLE (no coordinator yet) and COORDINATOR_LOAD_IN_PROGRESS (the new
      coordinator is loading the group): a short poll, a share of the time waited so far, so a load of 2 ms
      costs 2 ms and one of 2 s at most 100 ms more.
    * Anything else (REBALANCE_IN_PROGRESS, an unreachable broker again): exponential, 10 ms to 100 ms.
    """
    exc = state.outcome.exception() if state.outcome is not None else None
    code = exc.code if isinstance(exc, RetriableGroupError) else None
    if state.attempt_number == 1 and (isinstance(exc, grpc.RpcError) or code == errors.NOT_COORDINATOR):
        return 0.0
    if code in COORDINATOR_ERRORS:
        waited = (state.outcome_timestamp or time.monotonic()) - state.start_time
        return min(MAX_BACKOFF_S, max(MIN_POLL_S, waited * POLL_FRACTION))
    return min(MAX_BACKOFF_S, 0.01 * 2 ** (state.attempt_number - 1))


class RebalanceListener(Protocol):
    """May also have ``on_partitions_lost(partitions)``: called instead of on_partitions_revoked when
    the generation was reset (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID) and the partitions are gone."""
    def on_partitions_revoked(self, partitions: list[TP]) -> None: ...
    def on_partitions_assigned(self, partitions: list[TP]) -> None: ...


class GroupMember:
    def __init__(self, cluster: ClusterClient, group_id: str, topics: Iterable[str], *,
                 client_id: str = "kafkasim", assignors: Iterable[str] = ("range",),
                 session_timeout_ms: int = 10000, rebalance_timeout_ms: int = 30000,
                 heartbeat_interval_ms: int = 3000, group_instance_id: str | None = None,
                 listener: RebalanceListener | None = None, auto_offset_reset: str = "earliest",
                 retry_timeout_s: float = 60.0, on_op: Callable[[str, str, dict], None] | None = None) -> None:
        self.cluster = cluster
        self.group_id = group_id
        self.topics = sorted(set(topics))
        self.client_id = client_id
        self.assignors = [get_assignor(a) for a in assignors]
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.group_instance_id = group_instance_id
        self.listener = listener
        self.retry_timeout_s = retry_timeout_s
        self.on_op = on_op or (lambda op, phase, fields: None)
        self.fetcher = PartitionFetcher(cluster, auto_offset_reset=auto_offset_reset)
        self.state = MemberState()
        self._last_assignment: list[TP] | None = None  # what the assignors last got (Kafka's onAssignment)
        self._last_generation = -1
        self.coordinator: tuple[int, str] | None = None
        self._lock = threading.RLock()         # one protocol exchange at a time
        self._rejoin = threading.Event()
        self._rejoin.set()
        self._joining = False  # heartbeats go on until the member actually starts to rejoin (as Kafka's)
        self._closed = threading.Event()
        self._hb_paused = threading.Event()  # a stalled member (chaos: a long GC pause) sends none
        self._answered = threading.local()  # .node: the coordinator this thread's last call went to
        self._hb_thread = threading.Thread(target=self._heartbeat_loop, daemon=True,
                                           name=f"heartbeat-{group_id}")
        self._hb_thread.start()

    # ------------------------------------------------------------------ coordinator

    def _retrying(self) -> Retrying:
        return Retrying(retry=retry_if_exception_type((RetriableGroupError, grpc.RpcError)), wait=backoff_s,
                        stop=stop_after_delay(self.retry_timeout_s), reraise=True)

    def find_coordinator(self) -> tuple[int, str]:
        """Ask the brokers in turn until one names a coordinator (tenacity backoff in between)."""
        def once() -> tuple[int, str]:
            last: Exception | None = None
            for endpoint in self.cluster.endpoints():
                try:
                    r = self.cluster.groups_stub(endpoint).FindCoordinator(
                        gpb.FindCoordinatorRequest(key=self.group_id), timeout=2)
                except grpc.RpcError as e:
                    last = e
                    continue
                if r.error_code == errors.NONE:
                    return r.node_id, self.cluster.address(r.node_id, f"{r.host}:{r.port}")
                if r.error_code == errors.INVALID_GROUP_ID:
                    raise GroupError("FindCoordinator", r.error_code)
                last = RetriableGroupError(r.error_code)
            try:
                self.cluster.refresh()
            except ClientError:
                pass
            raise last if last is not None else RetriableGroupError(errors.COORDINATOR_NOT_AVAILABLE)

        self.coordinator = self._retrying()(once)
        self.on_op("find_coordinator", "ok", {"coordinator": self.coordinator[0]})
        return self.coordinator

    def _stub(self):
        if self.coordinator is None:
            self.find_coordinator()
        assert self.coordinator is not None
        return self.cluster.groups_stub(self.coordinator[1])

    def _call(self, name: str, request, error_of: Callable, timeout_s: float):
        """One RPC to the coordinator; coordinator errors raise RetriableGroupError, and forget it unless it is loading."""
        stub = self._stub()
        self._answered.node = self.coordinator[0] if self.coordinator else None
        try:
            r = getattr(stub, name)(request, timeout=timeout_s)
        except grpc.RpcError:
            self.coordinator = None
            raise
        code = error_of(r)
        if code in COORDINATOR_ERRORS:
            if code != errors.COORDINATOR_LOAD_IN_PROGRESS:   # Kafka's clients keep a loading coordinator
                self.coordinator = None
            raise RetriableGroupError(code)
        return r

    # ------------------------------------------------------------------ join / sync

    def _subscription(self, assignor) -> bytes:
        # the user data comes from the last assignment and its generation (Kafka's onAssignment), which a
        # generation reset or an eager revoke does not forget
        user_data = assignor.user_data(self._last_assignment, self._last_generation)
        return Subscription(self.topics, user_data, list(self.state.assignment), self.state.generation).encode()

    def _eager(self) -> bool:
        return all(a.rebalance_protocol == "EAGER" for a in self.assignors)

    def ensure_active(self) -> None:
        """Join (and sync) if a rebalance is needed; returns once the member has an assignment."""
        with self._lock:
            while self._rejoin.is_set() and not self._closed.is_set():
                kind, tps = rules.join_prepare(self.state, self._eager())
                self._revoke(tps, lost=kind == rules.LOST)
                self._joining = True
                try:
                    self._join_and_sync()
                except RetryError as e:  # pragma: no cover - reraise=True makes this rare
                    raise ClientError(f"group {self.group_id}: gave up rejoining: {e}") from None
                finally:
                    self._joining = False

    def _revoke(self, tps: list[TP], lost: bool = False) -> None:
        """Give up ``tps``; ``lost``: the generation was reset, so they may already be someone else's
        (the listener's ``on_partitions_lost`` when it has one, else ``on_partitions_revoked``, as Kafka's
        default onPartitionsLost does)."""
        if not tps:
            return
        if self.listener is not None:
            hook = getattr(self.listener, "on_partitions_lost", None) if lost else None
            (hook or self.listener.on_partitions_revoked)(sorted(tps))
        self.state.assignment = [tp for tp in self.state.assignment if tp not in set(tps)]
        self.fetcher.assign(self.state.assignment)

    def _join_and_sync(self) -> None:
        join = self._retrying()(self._join)
        if join is None:
            return  # a reset or MEMBER_ID_REQUIRED: loop again
        assignments = []
        if join.leader == join.member_id:
            assignments = self._assign(join)
        sync_req = gpb.SyncGroupRequest(group_id=self.group_id, generation_id=join.generation_id,
                                        member_id=join.member_id, group_instance_id=self.group_instance_id or "",
                                        protocol_type="consumer", protocol_name=join.protocol_name,
                                        assignments=assignments)
        self.on_op("sync", "invoke", {"generation": join.generation_id, "member": join.member_id})
        try:
            r = self._call("SyncGroup", sync_req, lambda r: r.error_code, self.rebalance_timeout_ms / 1000 + 30)
        except (RetriableGroupError, grpc.RpcError) as e:
            self.on_op("sync", "fail", {"error": str(e)})
            return  # rejoin (the coordinator moved)
        self.on_op("sync", "ok" if r.error_code == errors.NONE else "fail",
                   {"error": errors.name(r.error_code), "generation": join.generation_id, "member": join.member_id,
                    "node": self._answered.node,
                    "assignment": _assigned(r.assignment) if r.error_code == errors.NONE else []})
        if r.error_code != errors.NONE:
            self._handle_group_error("SyncGroup", r.error_code)
            return
        try:
            new = rules.assignment_of(r.assignment)
        except ProtocolError as e:
            raise ClientError(f"group {self.group_id}: bad assignment from the leader: {e}") from None
        self._last_assignment, self._last_generation = list(new), join.generation_id
        before = list(self.state.assignment)
        revoked, added, rejoin = rules.sync_result(self.state, join.generation_id, join.member_id, join.leader,
                                                   join.protocol_name, new, self._eager())
        if revoked:
            self.state.assignment = before   # the listener hears of the revocation first
            self._revoke(revoked)
            self.state.assignment = new
        self._rejoin.clear()
        if rejoin:
            self._rejoin.set()  # cooperative: rejoin so the revoked partitions can be handed on
        self._start_fetching(added)
        if self.listener is not None:
            self.listener.on_partitions_assigned(added)

    def _join(self):
        req = gpb.JoinGroupRequest(
            group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.state.member_id,
            group_instance_id=self.group_instance_id or "", protocol_type="consumer", client_id=self.client_id,
            require_known_member_id=True,
            protocols=[gpb.Protocol(name=a.name, metadata=self._subscription(a)) for a in self.assignors])
        self.on_op("join", "invoke", {"member": self.state.member_id})
        try:
            r = self._call("JoinGroup", req, lambda r: r.error_code, self.rebalance_timeout_ms / 1000 + 30)
        except (RetriableGroupError, grpc.RpcError) as e:
            self.on_op("join", "fail", {"error": str(e)})
            raise
        self.on_op("join", "ok" if r.error_code == errors.NONE else "fail",
                   {"error": errors.name(r.error_code), "generation": r.generation_id, "member": r.member_id,
                    "leader": r.leader == r.member_id and r.error_code == errors.NONE, "protocol": r.protocol_name,
                    "node": self._answered.node})
        if r.error_code == errors.MEMBER_ID_REQUIRED:
            self.state.member_id = r.member_id
            return None
        if r.error_code == errors.REBALANCE_IN_PROGRESS:
            raise RetriableGroupError(r.error_code)
        if r.error_code != errors.NONE:
            self._handle_group_error("JoinGroup", r.error_code)
            return None
        return r

    def _assign(self, join) -> list[gpb.SyncGroupAssignment]:
        topics: set[str] = set()
        members = [(mem.member_id, mem.group_instance_id or None, mem.metadata) for mem in join.members]
        try:
            for _mid, _inst, metadata in members:
                topics.update(Subscription.decode(metadata).topics)
        except ProtocolError as e:
            raise ClientError(f"group {self.group_id}: a member sent a bad subscription: {e}") from None
        self.cluster.refresh()
        counts = {t: len(self.cluster.metadata.topic_partitions(t)) for t in sorted(topics)}
        plan = rules.leader_assignment(join.protocol_name, members, counts)
        return [gpb.SyncGroupAssignment(member_id=mid, assignment=data) for mid, data in plan]

    def _handle_group_error(self, what: str, code: int) -> None:
        if rules.group_error(self.state, code) == rules.FATAL:
            raise GroupError(f"{what} for group {self.group_id}", code)
        self._rejoin.set()

    def _start_fetching(self, added: list[TP]) -> None:
        self.fetcher.assign(self.state.assignment)
        if added:
            committed = self.committed(added)
            for tp in added:
                if committed.get(tp, -1) >= 0:
                    self.fetcher.seek(tp, committed[tp])

    # ------------------------------------------------------------------ heartbeats

    def _heartbeat_loop(self) -> None:
        while not self._closed.wait(self.heartbeat_interval_ms / 1000):
            if self._joining or self.state.generation < 0 or self._hb_paused.is_set():
                continue
            try:
                self.heartbeat()
            except Exception as e:  # the next poll rejoins / rediscovers
                log.debug("heartbeat failed: %s", e)

    def pause_heartbeats(self) -> None:
        """Stop heartbeating (a stalled process, as in a long GC pause) until resume_heartbeats."""
        self._hb_paused.set()

    def resume_heartbeats(self) -> None:
        self._hb_paused.clear()

    def heartbeat(self) -> int:
        gen, mid = self.state.generation, self.state.member_id
        self.on_op("heartbeat", "invoke", {"generation": gen, "member": mid})
        try:
            r = self._call("Heartbeat", gpb.HeartbeatRequest(group_id=self.group_id, generation_id=gen, member_id=mid,
                                                             group_instance_id=self.group_instance_id or ""),
                           lambda r: r.error_code, 5)
            code = r.error_code
        except RetriableGroupError as e:
            code = e.code
        except grpc.RpcError:
            code = errors.NOT_COORDINATOR
        self.on_op("heartbeat", "ok" if code == errors.NONE else "fail",
                   {"error": errors.name(code), "node": getattr(self._answered, "node", None)})
        # a coordinator error only means "find the coordinator again" (done by _call): the member
        # keeps its generation, as the loaded group does, and goes on (Kafka's markCoordinatorUnknown)
        if rules.heartbeat_result(self.state, code, gen):
            self._rejoin.set()
        return code

    # ------------------------------------------------------------------ consuming and offsets

    def poll(self, max_wait_ms: int = 500) -> list[ConsumerRecord]:
        self.ensure_active()
        return self.fetcher.poll(max_wait_ms)

    @property
    def assignment(self) -> list[TP]:
        return list(self.state.assignment)

    def positions(self) -> dict[TP, int]:
        return {tp: pos for tp, pos in self.fetcher.positions.items() if pos >= 0}

    def commit(self, offsets: dict[TP, int] | None = None, metadata: str = "") -> dict[TP, int]:
        """Commit ``offsets`` (default: the positions reached) in the current generation.

        Retries coordinator moves; raises :class:`CommitFailedError` when the
        generation is gone (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
        REBALANCE_IN_PROGRESS), after flagging a rejoin."""
        offsets = dict(self.positions() if offsets is None else offsets)
        if not offsets:
            return {}
        req = gpb.OffsetCommitRequest(
            group_id=self.group_id, generation_id=self.state.generation, member_id=self.state.member_id,
            group_instance_id=self.group_instance_id or "", retention_time_ms=-1,
            partitions=[gpb.OffsetCommitPartition(topic=t, partition=p, offset=o, leader_epoch=-1, metadata=metadata)
                        for (t, p), o in sorted(offsets.items())])
        return self._commit(req, offsets)

    def commit_simple(self, offsets: dict[TP, int]) -> dict[TP, int]:
        """A commit outside any generation (generation -1), as kafka-consumer-groups --reset-offsets does."""
        req = gpb.OffsetCommitRequest(
            group_id=self.group_id, generation_id=-1, member_id="", retention_time_ms=-1,
            partitions=[gpb.OffsetCommitPartition(topic=t, partition=p, offset=o, leader_epoch=-1)
                        for (t, p), o in sorted(offsets.items())])
        return self._commit(req, offsets)

    def _commit(self, req, offsets: dict[TP, int]) -> dict[TP, int]:
        self.on_op("commit", "invoke", {"offsets": _fmt(offsets), "generation": req.generation_id,
                                        "member": req.member_id})

        def first_error(r) -> int:
            return next((x.error_code for x in r.partitions if x.error_code != errors.NONE), errors.NONE)

        try:
            r = self._retrying()(lambda: self._call("OffsetCommit", req, first_error, 30))
        except (RetriableGroupError, grpc.RpcError) as e:
            self.on_op("commit", "info", {"error": str(e)})
            raise ClientError(f"commit for group {self.group_id} failed: {e}") from None
        result = {(x.topic, x.partition): x.error_code for x in r.partitions}
        code = first_error(r)
        phase = rules.commit_outcome(code)
        self.on_op("commit", phase, {"error": errors.name(code), "offsets": _fmt(offsets),
                                     "node": self._answered.node})
        if code in RESET_ERRORS or code == errors.REBALANCE_IN_PROGRESS:
            self._handle_group_error("OffsetCommit", code)
            raise CommitFailedError(f"commit for group {self.group_id}", code)
        if code != errors.NONE:
            raise GroupError(f"commit for group {self.group_id}", code)
        return result

    def committed(self, tps: Iterable[TP] | None = None) -> dict[TP, int]:
        """The group's committed offsets (-1 for none) from its coordinator."""
        tps = None if tps is None else list(tps)
        req = gpb.OffsetFetchRequest(group_id=self.group_id, all_partitions=tps is None, partitions=[
            gpb.TopicPartitionRef(topic=t, partition=p) for t, p in tps or []])
        asked = {} if tps is None else {"partitions": sorted(f"{t}/{p}" for t, p in tps)}
        self.on_op("fetch_committed", "invoke", asked)
        try:
            r = self._retrying()(lambda: self._call("OffsetFetch", req, lambda r: r.error_code, 10))
        except (RetriableGroupError, grpc.RpcError) as e:
            self.on_op("fetch_committed", "fail", {"error": str(e)})
            raise ClientError(f"OffsetFetch for group {self.group_id} failed: {e}") from None
        if r.error_code != errors.NONE:
            self.on_op("fetch_committed", "fail", {"error": errors.name(r.error_code)})
            raise GroupError(f"OffsetFetch for group {self.group_id}", r.error_code)
        out = {(x.topic, x.partition): x.offset for x in r.partitions}
        self.on_op("fetch_committed", "ok", {"offsets": _fmt(out), "node": self._answered.node})
        return out

    def close(self, leave: bool = True) -> None:
        self._closed.set()
        with self._lock:
            if leave and self.state.member_id:
                try:
                    self._stub().LeaveGroup(gpb.LeaveGroupRequest(group_id=self.group_id, members=[
                        gpb.MemberIdentity(member_id=self.state.member_id,
                                           group_instance_id=self.group_instance_id or "")]), timeout=5)
                    self.on_op("leave", "ok", {"member": self.state.member_id})
                except (grpc.RpcError, ClientError) as e:
                    self.on_op("leave", "info", {"error": str(e)})
        self._hb_thread.join(timeout=self.heartbeat_interval_ms / 1000 + 1)


def _assigned(data: bytes) -> list[str]:
    try:
        return [f"{t}/{p}" for t, p in sorted(Assignment.decode(data).partitions)] if data else []
    except ProtocolError:
        return []


def _fmt(offsets: dict[TP, int]) -> dict[str, int]:
    return {f"{t}/{p}": o for (t, p), o in sorted(offsets.items())}

