"""Group membership: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the rebalance protocol.

:class:`MembershipManager` follows Kafka 2.8.2's GroupCoordinator (handleJoinGroup, doUnknownJoinGroup,
doJoinGroup, updateStaticMemberAndRebalance, prepareRebalance, onCompleteJoin, DelayedSync, doSyncGroup,
handleHeartbeat, handleLeaveGroup) on a partition the coordinator owns (it answers while loading).  The
groups are the :class:`~coordinator.registry.GroupRegistry`'s; the delayed operations are keyed timers
(:mod:`coordinator.timers`): a join and a sync phase per group, a session per member, an expiry per pending
member id.  Each handler returns a :class:`~coordinator.result.Result`; the helpers, the continuations of
its writes and the timers' operations add to the result of the call they run in (``out``).  Its only
record is a group's GroupMetadataValue (storeGroup, acks=-1); it reads no durable state.
"""
from __future__ import annotations

from typing import Callable

from coordinator import records as rec
from coordinator.commit_checks import commit_error
from coordinator.config import GroupConfig
from coordinator.group import (
    COMPLETING_REBALANCE, DEAD, EMPTY, NO_HANDLE, PREPARING_REBALANCE, STABLE,
    DelayedJoin, GroupMetadata, IllegalStateTransition, MemberMetadata,
)
from coordinator.messages import (
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, LeaveGroupResponse, OffsetCommitRequest, SyncGroupRequest, SyncGroupResponse,
)
from coordinator.registry import GroupRegistry
from coordinator.result import Result, map_group_append_error
from coordinator.timers import Timers, heartbeat_key, join_key, pending_key, sync_key
from kafkacommon import errors

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000   # GroupCoordinator.NewMemberJoinTimeoutMs


class MembershipManager:
    def __init__(self, partition: int, config: GroupConfig, groups: GroupRegistry, timers: Timers,
                 new_member_suffix: Callable[[], str]) -> None:
        self.partition = partition
        self.config = config
        self.groups = groups
        self.timers = timers
        self._suffix = new_member_suffix

    # ------------------------------------------------------------------ small helpers

    @staticmethod
    def _join_error(code: int, member_id: str = "") -> JoinGroupResponse:
        return JoinGroupResponse(code, member_id=member_id)

    @staticmethod
    def _sync_error(code: int) -> SyncGroupResponse:
        return SyncGroupResponse(code)

    @staticmethod
    def _member_event(out: Result, name: str, group: GroupMetadata, member: MemberMetadata, reason: str,
                      **extra: object) -> None:
        out.event(name, group=group.group_id, member_id=member.member_id,
                  group_instance_id=member.group_instance_id, reason=reason, **extra)

    @staticmethod
    def _answer_join(out: Result, member: MemberMetadata, response: JoinGroupResponse) -> bool:
        """maybeInvokeJoinCallback."""
        if not member.is_awaiting_join:
            return False
        handle, member.join_handle = member.join_handle, NO_HANDLE
        out.respond(handle, response)
        return True

    @staticmethod
    def _answer_sync(out: Result, member: MemberMetadata, response: SyncGroupResponse) -> bool:
        """maybeInvokeSyncCallback."""
        if not member.is_awaiting_sync:
            return False
        handle, member.sync_handle = member.sync_handle, NO_HANDLE
        out.respond(handle, response)
        return True

    def _store_group(self, out: Result, group: GroupMetadata, value: rec.GroupValue, reason: str,
                     on_done: Callable[[Result, int], None]) -> None:
        """storeGroup: append the group record (acks=-1); ``on_done(result, mapped error)`` once it completes."""
        group_id = group.group_id

        def done(o: Result, code: int) -> None:
            o.event("group_stored", group=group_id, generation=value.generation,
                    members=[m.member_id for m in value.members], reason=reason, error=code)
            on_done(o, errors.NONE if code == errors.NONE else map_group_append_error(code))

        out.write([(rec.GroupMetadataKey(group_id), value)], acks=-1, on_done=done)

    # ------------------------------------------------------------------ timers and member removal

    def _schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int,
                            now_ms: int) -> None:
        """completeAndScheduleNextExpiration: the previous expectation is met, a new one starts."""
        member.heartbeat_satisfied = False
        self.timers.schedule(heartbeat_key(group.group_id, member.member_id), now_ms + max(timeout_ms, 0),
                             lambda o: self._on_expire_heartbeat(o, group, member))

    def _leaving(self, group: GroupMetadata, member: MemberMetadata) -> None:
        """removeHeartbeatForLeavingMember: its heartbeat expectation is completed."""
        member.is_leaving = True
        self.timers.cancel(heartbeat_key(group.group_id, member.member_id))

    def _remove(self, group: GroupMetadata, member_id: str) -> MemberMetadata | None:
        """The member leaves the group (and its heartbeat expectation with it)."""
        member = group.remove(member_id)
        if member is not None:
            self.timers.cancel(heartbeat_key(group.group_id, member_id))
        return member

    def _replace(self, group: GroupMetadata, old_id: str, new_id: str, instance: str):
        """replaceStaticMember: the member's new id; its heartbeat timer goes with the old one."""
        self.timers.cancel(heartbeat_key(group.group_id, old_id))
        return group.replace_group_instance(old_id, new_id, instance)

    def _drop_pending(self, group: GroupMetadata, member_id: str) -> None:
        del group.pending_members[member_id]
        self.timers.cancel(pending_key(group.group_id, member_id))

    def forget(self, group: GroupMetadata) -> None:
        """``group`` is gone from the registry: none of its timers may fire."""
        gid = group.group_id
        self.timers.cancel(join_key(gid))
        self.timers.cancel(sync_key(gid))
        for member_id in group.members:
            self.timers.cancel(heartbeat_key(gid, member_id))
        for member_id in group.pending_members:
            self.timers.cancel(pending_key(gid, member_id))

    def _arm_join(self, group: GroupMetadata, deadline_ms: int, delayed: DelayedJoin) -> None:
        self.timers.schedule(join_key(group.group_id), deadline_ms,
                             lambda o: self._on_join_timer(o, group, delayed), delayed)

    # ------------------------------------------------------------------ load / unload

    def on_loaded(self, out: Result, group: GroupMetadata) -> None:
        """A group just built by a load: over capacity it rebalances; each member's session starts."""
        if group.size > self.config.max_size:
            self._prepare_rebalance(out, group, "freshly-loaded group is over capacity")
        for member in group.members.values():
            self._schedule_heartbeat(group, member, member.session_timeout_ms, out.now_ms)

    def unload(self, out: Result) -> None:
        """Leadership lost: every group dies; its parked joins and syncs are answered NOT_COORDINATOR."""
        for group in self.groups.groups():
            if group.state != DEAD:
                self.groups.transition(out, group, DEAD)
            for member in group.members.values():
                self._answer_join(out, member, self._join_error(errors.NOT_COORDINATOR, member.member_id))
                self._answer_sync(out, member, self._sync_error(errors.NOT_COORDINATOR))
            group.pending_members.clear()

    # ------------------------------------------------------------------ JoinGroup

    def join_group(self, handle: object, req: JoinGroupRequest, now_ms: int) -> Result:
        out = Result(self.partition, now_ms)
        if not (self.config.min_session_timeout_ms <= req.session_timeout_ms <= self.config.max_session_timeout_ms):
            out.respond(handle, self._join_error(errors.INVALID_SESSION_TIMEOUT, req.member_id))
            return out
        unknown = req.member_id == ""
        group = self.groups.get(req.group_id)
        if group is None and not unknown:
            out.respond(handle, self._join_error(errors.UNKNOWN_MEMBER_ID, req.member_id))
            return out
        if group is None:
            group = self.groups.create(out, req.group_id, "join")
        if not group.accepts_joining(req.member_id, self.config.max_size):
            removed = self._remove(group, req.member_id)
            if removed is not None:
                self._drop_parked(out, removed)
                self._member_event(out, "member_removed", group, removed, "group_max_size")
            out.respond(handle, self._join_error(errors.GROUP_MAX_SIZE_REACHED))
        elif unknown:
            self._do_unknown_join(out, group, req, handle)
        else:
            self._do_join(out, group, req, handle)
        if group.is_(PREPARING_REBALANCE):
            self._check_complete_join(out, group)
        return out

    def _do_unknown_join(self, out: Result, group: GroupMetadata, req: JoinGroupRequest, handle: object) -> None:
        if group.is_(DEAD):
            out.respond(handle, self._join_error(errors.COORDINATOR_NOT_AVAILABLE))
        elif not group.supports_protocols(req.protocol_type, [p for p, _ in req.protocols]):
            out.respond(handle, self._join_error(errors.INCONSISTENT_GROUP_PROTOCOL))
        else:
            new_id = group.fresh_member_id(req.group_instance_id if req.group_instance_id is not None
                                           else req.client_id, self._suffix)
            if group.has_static_member(req.group_instance_id):
                self._update_static_member_and_rebalance(out, group, new_id, req, handle)
            elif req.require_known_member_id and req.group_instance_id is None:
                group.pending_members[new_id] = None
                self.timers.schedule(pending_key(group.group_id, new_id),
                                     out.now_ms + max(req.session_timeout_ms, 0),
                                     lambda o: self._on_expire_pending_member(o, group, new_id))
                out.event("pending_member_added", group=group.group_id, member_id=new_id)
                out.respond(handle, self._join_error(errors.MEMBER_ID_REQUIRED, new_id))
            else:
                self._add_member_and_rebalance(out, group, new_id, req, handle)

    def _do_join(self, out: Result, group: GroupMetadata, req: JoinGroupRequest, handle: object) -> None:
        member_id, instance = req.member_id, req.group_instance_id
        if group.is_(DEAD):
            out.respond(handle, self._join_error(errors.COORDINATOR_NOT_AVAILABLE, member_id))
        elif not group.supports_protocols(req.protocol_type, [p for p, _ in req.protocols]):
            out.respond(handle, self._join_error(errors.INCONSISTENT_GROUP_PROTOCOL, member_id))
        elif group.is_pending_member(member_id):
            if instance is not None:   # Kafka throws IllegalStateException -> UNKNOWN_SERVER_ERROR
                out.respond(handle, self._join_error(errors.UNKNOWN_SERVER_ERROR, member_id))
            else:
                self._add_member_and_rebalance(out, group, member_id, req, handle)
        elif group.is_static_member_fenced(member_id, instance):
            out.respond(handle, self._join_error(errors.FENCED_INSTANCE_ID, member_id))
        elif not group.has(member_id) or (instance is not None and not group.has_static_member(instance)):
            out.respond(handle, self._join_error(errors.UNKNOWN_MEMBER_ID, member_id))
        else:
            member = group.get(member_id)
            if group.is_(PREPARING_REBALANCE):
                self._update_member_and_rebalance(out, group, member, req.protocols, handle,
                                                  f"member {member_id} joining group during PreparingRebalance")
            elif group.is_(COMPLETING_REBALANCE):
                if member.matches(req.protocols):
                    out.respond(handle, group.join_response(member_id, group.is_leader(member_id)))
                else:
                    self._update_member_and_rebalance(out, group, member, req.protocols, handle,
                                                      f"updating metadata for member {member_id}")
            elif group.is_(STABLE):
                if group.is_leader(member_id):
                    self._update_member_and_rebalance(out, group, member, req.protocols, handle,
                                                      f"leader {member_id} re-joining group during Stable")
                elif not member.matches(req.protocols):
                    self._update_member_and_rebalance(out, group, member, req.protocols, handle,
                                                      f"updating metadata for member {member_id}")
                else:
                    out.respond(handle, group.join_response(member_id, False))
            else:   # Empty (Dead handled above)
                out.respond(handle, self._join_error(errors.UNKNOWN_MEMBER_ID, member_id))

    def _add_member_and_rebalance(self, out: Result, group: GroupMetadata, member_id: str, req: JoinGroupRequest,
                                  handle: object) -> None:
        member = MemberMetadata(member_id, req.group_instance_id, req.client_id, req.client_host,
                                req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
                                req.protocols)
        member.is_new = True
        if group.is_(PREPARING_REBALANCE) and group.generation == 0:
            group.new_member_added = True
        group.add(member, handle)
        self._member_event(out, "member_added", group, member, "join")
        # new members cannot heartbeat yet: their join times out after 5 minutes instead
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS, out.now_ms)
        if member.is_static:
            group.static_members[member.group_instance_id] = member_id  # type: ignore[index]
        elif member_id in group.pending_members:
            self._drop_pending(group, member_id)
        self._maybe_prepare_rebalance(out, group, f"adding new member {member_id}")

    def _update_member_and_rebalance(self, out: Result, group: GroupMetadata, member: MemberMetadata,
                                     protocols: list[tuple[str, bytes]], handle: object, reason: str) -> None:
        displaced = group.update_member(member, protocols, handle)
        if displaced is not NO_HANDLE:
            out.event("request_superseded", group=group.group_id, member_id=member.member_id, api="join")
            out.respond(displaced, self._join_error(errors.REBALANCE_IN_PROGRESS, member.member_id))
        self._maybe_prepare_rebalance(out, group, reason)

    def _update_static_member_and_rebalance(self, out: Result, group: GroupMetadata, new_id: str,
                                            req: JoinGroupRequest, handle: object) -> None:
        instance = req.group_instance_id
        assert instance is not None
        old_id = group.static_members[instance]
        current_leader = group.leader_id
        old_protocols = list(group.get(old_id).protocols)
        member, old_join, old_sync = self._replace(group, old_id, new_id, instance)
        if old_join is not NO_HANDLE:
            out.respond(old_join, self._join_error(errors.FENCED_INSTANCE_ID, old_id))
        if old_sync is not NO_HANDLE:
            out.respond(old_sync, self._sync_error(errors.FENCED_INSTANCE_ID))
        out.event("member_removed", group=group.group_id, member_id=old_id, group_instance_id=instance,
                  reason="fenced", replaced_by=new_id)
        self._member_event(out, "member_added", group, member, "static_replace")
        self._schedule_heartbeat(group, member, member.session_timeout_ms, out.now_ms)
        group.update_member(member, req.protocols, handle)

        if group.is_(STABLE):
            if group.protocol_name == group.select_protocol():
                # the new member id must be stored before it is handed out (no rebalance)
                value = group.to_value({mid: m.assignment for mid, m in group.members.items()})

                def on_stored(o: Result, code: int) -> None:
                    if code != errors.NONE:
                        if group.members.get(new_id) is member:   # revert the replacement
                            parked = member.join_handle is handle
                            group.update_member(member, old_protocols, NO_HANDLE if parked else member.join_handle)
                            self._replace(group, new_id, old_id, instance)
                            self._schedule_heartbeat(group, member, member.session_timeout_ms, o.now_ms)
                            o.event("member_removed", group=group.group_id, member_id=new_id,
                                    group_instance_id=instance, reason="fenced", replaced_by=old_id)
                            self._member_event(o, "member_added", group, member, "static_replace")
                            if parked:
                                o.respond(handle, JoinGroupResponse(
                                    code, group.generation, group.protocol_type, group.protocol_name,
                                    current_leader or "", ""))
                    elif group.members.get(new_id) is member and member.join_handle is handle:
                        self._answer_join(o, member, group.join_response(new_id, False, current_leader))

                self._store_group(out, group, value, "static_replace", on_stored)
            else:
                self._maybe_prepare_rebalance(
                    out, group, f"static member {instance} rejoined with a protocol change")
        elif group.is_(COMPLETING_REBALANCE):
            self._prepare_rebalance(out, group, f"updating metadata for static member {instance}")
        elif group.state in (EMPTY, DEAD):
            raise IllegalStateTransition(
                f"group {group.group_id} cannot be {group.state} when static member {instance} rejoins")

    # ------------------------------------------------------------------ rebalance

    def _maybe_prepare_rebalance(self, out: Result, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(out, group, reason)

    def _prepare_rebalance(self, out: Result, group: GroupMetadata, reason: str) -> None:
        if group.is_(COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(out, group, errors.REBALANCE_IN_PROGRESS)
        group.pending_sync.clear()   # removeSyncExpiration
        self.timers.cancel(sync_key(group.group_id))
        now = out.now_ms
        if group.is_(EMPTY):
            delay = self.config.initial_rebalance_delay_ms
            deadline = now + max(delay, 0)
            delayed = DelayedJoin(True, delay, max(group.rebalance_timeout_ms() - delay, 0))
        else:
            deadline = now + max(group.rebalance_timeout_ms(), 1)
            delayed = DelayedJoin()
        self.groups.transition(out, group, PREPARING_REBALANCE, reason)
        self._arm_join(group, deadline, delayed)
        self._check_complete_join(out, group)

    def _check_complete_join(self, out: Result, group: GroupMetadata) -> None:
        """DelayedJoin.tryComplete: complete early once everyone has rejoined (never an InitialDelayedJoin)."""
        timer = self.timers.get(join_key(group.group_id))
        if (group.is_(PREPARING_REBALANCE) and timer is not None and not timer.data.initial
                and group.has_all_members_joined()):
            self.timers.cancel(join_key(group.group_id))
            self._on_complete_join(out, group)

    def _on_join_timer(self, out: Result, group: GroupMetadata, delayed: DelayedJoin) -> None:
        if not group.is_(PREPARING_REBALANCE):
            return
        if delayed.initial and group.new_member_added and delayed.remaining_ms != 0:
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, delayed.remaining_ms)
            remaining = max(delayed.remaining_ms - delayed.delay_ms, 0)
            self._arm_join(group, out.now_ms + max(delay, 0), DelayedJoin(True, delay, remaining))
            out.event("join_rearmed", group=group.group_id, generation=group.generation, timeout_ms=delay)
            return
        self._on_complete_join(out, group)

    def _on_complete_join(self, out: Result, group: GroupMetadata) -> None:
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                self._leaving(group, member)
                self._remove(group, member.member_id)
                self._drop_parked(out, member)
                self._member_event(out, "member_removed", group, member, "join_timeout")
        if group.is_(DEAD):
            return
        now = out.now_ms
        if not group.maybe_elect_new_joined_leader() and group.members:
            timeout = group.rebalance_timeout_ms()
            self._arm_join(group, now + max(timeout, 1), DelayedJoin())
            out.event("join_rearmed", group=group.group_id, generation=group.generation, timeout_ms=timeout)
            self._check_complete_join(out, group)
            return
        self.groups.transition(out, group, group.init_next_generation())
        out.event("group_generation", group=group.group_id, generation=group.generation,
                  protocol_type=group.protocol_type, protocol=group.protocol_name,
                  leader=group.leader_id, members=list(group.members))
        if group.is_(EMPTY):
            # a failed write is only logged: the previous generation comes back on failover and times out
            self._store_group(out, group, group.to_value({}), "empty", lambda o, code: None)
            return
        for member_id, member in group.members.items():
            self._answer_join(out, member, group.join_response(member_id, group.is_leader(member_id)))
            self._schedule_heartbeat(group, member, member.session_timeout_ms, now)
            member.is_new = False
            group.pending_sync[member_id] = None
        generation = group.generation
        self.timers.schedule(sync_key(group.group_id), now + max(group.rebalance_timeout_ms(), 1),
                             lambda o: self._on_expire_pending_sync(o, group, generation))

    def _on_expire_pending_sync(self, out: Result, group: GroupMetadata, generation: int) -> None:
        """DelayedSync expired: members that did not sync are removed, then the group rebalances."""
        if generation != group.generation or group.state not in (COMPLETING_REBALANCE, STABLE):
            return
        if not group.pending_sync:
            return
        missing = list(group.pending_sync)
        for member_id in missing:
            member = group.get(member_id)
            self._leaving(group, member)
            self._remove(group, member_id)
            self._drop_parked(out, member)
            self._member_event(out, "member_removed", group, member, "sync_timeout")
        self._prepare_rebalance(out, group, f"removing {missing} on pending sync request expiration")

    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_sync.pop(member_id, None)
        if not group.pending_sync:
            self.timers.cancel(sync_key(group.group_id))

    def _reset_and_propagate_assignment_error(self, out: Result, group: GroupMetadata, code: int) -> None:
        if not group.is_(COMPLETING_REBALANCE):
            raise IllegalStateTransition(f"group {group.group_id} is {group.state}, not CompletingRebalance")
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(out, group, code)

    def _propagate_assignment(self, out: Result, group: GroupMetadata, code: int) -> None:
        ok = code == errors.NONE
        for member in group.members.values():
            response = SyncGroupResponse(code, group.protocol_type if ok else None,
                                         group.protocol_name if ok else None, member.assignment)
            if self._answer_sync(out, member, response):
                self._schedule_heartbeat(group, member, member.session_timeout_ms, out.now_ms)

    # ------------------------------------------------------------------ member removal & expiry

    def _drop_parked(self, out: Result, member: MemberMetadata) -> None:
        """Answer what a member that is gone still has parked (Kafka answers the join, drops the sync)."""
        self._answer_join(out, member, self._join_error(errors.UNKNOWN_MEMBER_ID))
        self._answer_sync(out, member, self._sync_error(errors.UNKNOWN_MEMBER_ID))

    def _remove_member_and_update_group(self, out: Result, group: GroupMetadata, member: MemberMetadata,
                                        reason: str) -> None:
        self._remove(group, member.member_id)
        self._drop_parked(out, member)
        self._member_event(out, "member_removed", group, member, reason)
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(out, group, f"removing member {member.member_id} ({reason})")
        elif group.is_(PREPARING_REBALANCE):
            self._check_complete_join(out, group)

    def _on_expire_heartbeat(self, out: Result, group: GroupMetadata, member: MemberMetadata) -> None:
        if group.is_(DEAD) or member.has_satisfied_heartbeat():
            return
        reason = "new_member_timeout" if member.is_new else "session_timeout"
        self._remove_member_and_update_group(out, group, member, reason)

    def _on_expire_pending_member(self, out: Result, group: GroupMetadata, member_id: str) -> None:
        del group.pending_members[member_id]
        out.event("pending_member_removed", group=group.group_id, member_id=member_id, reason="session_timeout")
        if group.is_(PREPARING_REBALANCE):
            self._check_complete_join(out, group)

    # ------------------------------------------------------------------ SyncGroup

    def sync_group(self, handle: object, req: SyncGroupRequest, now_ms: int) -> Result:
        out = Result(self.partition, now_ms)
        group = self.groups.get(req.group_id)
        if group is None:
            out.respond(handle, self._sync_error(errors.UNKNOWN_MEMBER_ID))
        else:
            self._do_sync(out, group, req, handle)
        return out

    def _do_sync(self, out: Result, group: GroupMetadata, req: SyncGroupRequest, handle: object) -> None:
        member_id = req.member_id
        if group.is_(DEAD):
            code = errors.COORDINATOR_NOT_AVAILABLE
        elif group.is_static_member_fenced(member_id, req.group_instance_id):
            code = errors.FENCED_INSTANCE_ID
        elif not group.has(member_id):
            code = errors.UNKNOWN_MEMBER_ID
        elif req.generation_id != group.generation:
            code = errors.ILLEGAL_GENERATION
        elif ((req.protocol_type is not None and req.protocol_type != group.protocol_type)
              or (req.protocol_name is not None and req.protocol_name != group.protocol_name)):
            code = errors.INCONSISTENT_GROUP_PROTOCOL
        elif group.is_(EMPTY):
            code = errors.UNKNOWN_MEMBER_ID
        elif group.is_(PREPARING_REBALANCE):
            code = errors.REBALANCE_IN_PROGRESS
        elif group.is_(STABLE):
            self._remove_pending_sync_member(group, member_id)
            member = group.get(member_id)
            out.respond(handle, SyncGroupResponse(errors.NONE, group.protocol_type, group.protocol_name,
                                                  member.assignment))
            self._schedule_heartbeat(group, member, member.session_timeout_ms, out.now_ms)
            return
        else:   # CompletingRebalance
            member = group.get(member_id)
            if member.is_awaiting_sync:
                out.event("request_superseded", group=group.group_id, member_id=member_id, api="sync")
                self._answer_sync(out, member, self._sync_error(errors.REBALANCE_IN_PROGRESS))
            member.sync_handle = handle
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                assignment = {mid: bytes(a) for mid, a in req.assignments}
                for mid in group.members:
                    assignment.setdefault(mid, b"")
                generation = group.generation

                def on_stored(o: Result, code: int) -> None:
                    if group.is_(COMPLETING_REBALANCE) and group.generation == generation:
                        if code != errors.NONE:
                            self._reset_and_propagate_assignment_error(o, group, code)
                            self._maybe_prepare_rebalance(
                                o, group, f"error when storing group assignment during SyncGroup (member {member_id})")
                        else:
                            for mid, m in group.members.items():
                                m.assignment = assignment[mid]
                            self._propagate_assignment(o, group, errors.NONE)
                            self.groups.transition(o, group, STABLE)

                self._store_group(out, group, group.to_value(assignment), "sync", on_stored)
            return
        out.respond(handle, self._sync_error(code))

    # ------------------------------------------------------------------ Heartbeat

    def heartbeat(self, handle: object, req: HeartbeatRequest, now_ms: int) -> Result:
        out = Result(self.partition, now_ms)
        group = self.groups.get(req.group_id)
        if group is None:
            code = errors.UNKNOWN_MEMBER_ID
        elif group.is_(DEAD):
            code = errors.COORDINATOR_NOT_AVAILABLE
        elif group.is_static_member_fenced(req.member_id, req.group_instance_id):
            code = errors.FENCED_INSTANCE_ID
        elif not group.has(req.member_id):
            code = errors.UNKNOWN_MEMBER_ID
        elif req.generation_id != group.generation:
            code = errors.ILLEGAL_GENERATION
        elif group.is_(EMPTY):
            code = errors.UNKNOWN_MEMBER_ID
        else:
            member = group.get(req.member_id)
            self._schedule_heartbeat(group, member, member.session_timeout_ms, now_ms)
            code = errors.REBALANCE_IN_PROGRESS if group.is_(PREPARING_REBALANCE) else errors.NONE
        out.respond(handle, HeartbeatResponse(code))
        return out

    # ------------------------------------------------------------------ LeaveGroup

    def leave_group(self, handle: object, req: LeaveGroupRequest, now_ms: int) -> Result:
        out = Result(self.partition, now_ms)
        group = self.groups.get(req.group_id)
        if group is None:
            out.respond(handle, LeaveGroupResponse(
                errors.NONE, [(mid, inst, errors.UNKNOWN_MEMBER_ID) for mid, inst in req.members]))
            return out
        if group.is_(DEAD):
            out.respond(handle, LeaveGroupResponse(errors.COORDINATOR_NOT_AVAILABLE, []))
            return out
        results: list[tuple[str, str | None, int]] = []
        for member_id, instance in req.members:
            if member_id != "" and group.is_static_member_fenced(member_id, instance):
                results.append((member_id, instance, errors.FENCED_INSTANCE_ID))
            elif group.is_pending_member(member_id):
                if instance is not None:   # Kafka throws: the whole request fails
                    out.respond(handle, LeaveGroupResponse(errors.UNKNOWN_SERVER_ERROR, []))
                    return out
                self._drop_pending(group, member_id)
                out.event("pending_member_removed", group=group.group_id, member_id=member_id, reason="left")
                if group.is_(PREPARING_REBALANCE):
                    self._check_complete_join(out, group)
                results.append((member_id, instance, errors.NONE))
            elif not group.has(member_id) and not group.has_static_member(instance):
                results.append((member_id, instance, errors.UNKNOWN_MEMBER_ID))
            else:
                target = group.static_members[instance] if group.has_static_member(instance) else member_id
                member = group.get(target)
                self._leaving(group, member)
                self._remove_member_and_update_group(out, group, member, "left")
                results.append((member_id, instance, errors.NONE))
        out.respond(handle, LeaveGroupResponse(errors.NONE, results))
        return out

    # ------------------------------------------------------------------ OffsetCommit's checks

    def validate_commit(self, group: GroupMetadata | None, req: OffsetCommitRequest, now_ms: int) -> int | None:
        """handleCommitOffsets' checks (:func:`coordinator.commit_checks.commit_error`): None when the offsets
        are to be stored, else the error for every partition.  A member's accepted commit completes its
        heartbeat expectation too."""
        check_generation = self.config.check_commit_generation
        code = commit_error(group, req, check_generation)
        if code is None and check_generation and group is not None and group.state in (STABLE, PREPARING_REBALANCE):
            member = group.get(req.member_id)
            self._schedule_heartbeat(group, member, member.session_timeout_ms, now_ms)
        return code
