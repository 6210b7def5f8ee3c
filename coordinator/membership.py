"""Group membership: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the rebalance protocol.

A mixin of :class:`coordinator.core.PartitionCoordinator`, kept apart for size.
It follows Kafka 2.8.2's GroupCoordinator (handleJoinGroup, doUnknownJoinGroup,
doJoinGroup, updateStaticMemberAndRebalance, prepareRebalance, onCompleteJoin,
DelayedSync, doSyncGroup, handleHeartbeat, handleLeaveGroup).
"""
from __future__ import annotations

from coordinator import records as rec
from coordinator.group import (
    COMPLETING_REBALANCE, DEAD, EMPTY, NO_HANDLE, PREPARING_REBALANCE, STABLE,
    GroupMetadata, IllegalStateTransition, JoinTimer, MemberMetadata, SyncTimer,
)
from coordinator.messages import (
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, JoinMember,
    LeaveGroupRequest, LeaveGroupResponse, SyncGroupRequest, SyncGroupResponse,
)
from kafkacommon import errors

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000   # GroupCoordinator.NewMemberJoinTimeoutMs
MAX_ID_DRAWS = 1000                          # new member ids drawn before a repeating id source is an error


def map_group_append_error(code: int) -> int:
    """storeGroup's mapping of an append error to the error SyncGroup/JoinGroup return."""
    if code in (errors.UNKNOWN_TOPIC_OR_PARTITION, errors.NOT_ENOUGH_REPLICAS,
                errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return errors.COORDINATOR_NOT_AVAILABLE
    if code in (errors.NOT_LEADER_OR_FOLLOWER, errors.KAFKA_STORAGE_ERROR):
        return errors.NOT_COORDINATOR
    if code == errors.REQUEST_TIMED_OUT:
        return errors.REBALANCE_IN_PROGRESS
    if code in (errors.MESSAGE_TOO_LARGE, errors.RECORD_LIST_TOO_LARGE, errors.INVALID_FETCH_SIZE):
        return errors.UNKNOWN_SERVER_ERROR
    return code


class MembershipMixin:
    # ------------------------------------------------------------------ small helpers

    @staticmethod
    def _join_error(code: int, member_id: str = "") -> JoinGroupResponse:
        return JoinGroupResponse(code, member_id=member_id)

    @staticmethod
    def _sync_error(code: int) -> SyncGroupResponse:
        return SyncGroupResponse(code)

    def _join_result(self, group: GroupMetadata, member_id: str, with_members: bool,
                     leader: str | None = None) -> JoinGroupResponse:
        members = []
        if with_members:
            members = [JoinMember(mid, inst, meta) for mid, inst, meta in group.current_member_metadata()]
        return JoinGroupResponse(errors.NONE, group.generation, group.protocol_type, group.protocol_name,
                                 (group.leader_id if leader is None else leader) or "", member_id, members)

    def _member_event(self, name: str, group: GroupMetadata, member: MemberMetadata, reason: str,
                      **extra: object) -> None:
        self._event(name, group=group.group_id, member_id=member.member_id,
                    group_instance_id=member.group_instance_id, reason=reason, **extra)

    def _answer_join(self, member: MemberMetadata, response: JoinGroupResponse) -> bool:
        """maybeInvokeJoinCallback."""
        if not member.is_awaiting_join:
            return False
        handle, member.join_handle = member.join_handle, NO_HANDLE
        self._respond(handle, response)
        return True

    def _answer_sync(self, member: MemberMetadata, response: SyncGroupResponse) -> bool:
        """maybeInvokeSyncCallback."""
        if not member.is_awaiting_sync:
            return False
        handle, member.sync_handle = member.sync_handle, NO_HANDLE
        self._respond(handle, response)
        return True

    def _leaving(self, member: MemberMetadata) -> None:
        """removeHeartbeatForLeavingMember: its heartbeat expectation is completed."""
        member.is_leaving = True
        member.heartbeat_deadline_ms = None

    def _store_group(self, group: GroupMetadata, value: rec.GroupValue, reason: str, on_done) -> None:
        """storeGroup: append the group record (acks=-1); ``on_done(mapped error)`` once it completes."""
        group_id = group.group_id

        def done(code: int) -> None:
            self._event("group_stored", group=group_id, generation=value.generation,
                        members=[m.member_id for m in value.members], reason=reason, error=code)
            on_done(errors.NONE if code == errors.NONE else map_group_append_error(code))

        self._append([(rec.GroupMetadataKey(group_id), value)], acks=-1, on_done=done)

    # ------------------------------------------------------------------ JoinGroup

    def join_group(self, handle: object, req: JoinGroupRequest, now_ms: int):
        self._start(now_ms)
        error = self._status_error(req.group_id, allow_empty=False)
        if error is not None:
            self._respond(handle, self._join_error(error, req.member_id))
        elif not (self.config.min_session_timeout_ms <= req.session_timeout_ms
                  <= self.config.max_session_timeout_ms):
            self._respond(handle, self._join_error(errors.INVALID_SESSION_TIMEOUT, req.member_id))
        else:
            unknown = req.member_id == ""
            group = self._groups.get(req.group_id)
            if group is None and not unknown:
                self._respond(handle, self._join_error(errors.UNKNOWN_MEMBER_ID, req.member_id))
            else:
                if group is None:
                    group = self._new_group(req.group_id, "join")
                if not self._accept_joining_member(group, req.member_id):
                    removed = group.remove(req.member_id)
                    if removed is not None:
                        self._drop_parked(removed)
                        self._member_event("member_removed", group, removed, "group_max_size")
                    self._respond(handle, self._join_error(errors.GROUP_MAX_SIZE_REACHED))
                elif unknown:
                    self._do_unknown_join(group, req, handle)
                else:
                    self._do_join(group, req, handle)
                if group.is_(PREPARING_REBALANCE):
                    self._check_complete_join(group)
        return self._done()

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        if group.state in (EMPTY, DEAD):
            return True
        if group.is_(PREPARING_REBALANCE):
            return ((group.has(member_id) and group.get(member_id).is_awaiting_join)
                    or group.num_awaiting_join < self.config.max_size)
        return group.has(member_id) or group.size < self.config.max_size

    def _do_unknown_join(self, group: GroupMetadata, req: JoinGroupRequest, handle: object) -> None:
        if group.is_(DEAD):
            self._respond(handle, self._join_error(errors.COORDINATOR_NOT_AVAILABLE))
        elif not group.supports_protocols(req.protocol_type, [p for p, _ in req.protocols]):
            self._respond(handle, self._join_error(errors.INCONSISTENT_GROUP_PROTOCOL))
        else:
            new_id = self._fresh_member_id(group, req.group_instance_id if req.group_instance_id is not None
                                           else req.client_id)
            if group.has_static_member(req.group_instance_id):
                self._update_static_member_and_rebalance(group, new_id, req, handle)
            elif req.require_known_member_id and req.group_instance_id is None:
                group.pending_members[new_id] = (self._now + max(req.session_timeout_ms, 0), self._next_seq())
                self._event("pending_member_added", group=group.group_id, member_id=new_id)
                self._respond(handle, self._join_error(errors.MEMBER_ID_REQUIRED, new_id))
            else:
                self._add_member_and_rebalance(group, new_id, req, handle)

    def _fresh_member_id(self, group: GroupMetadata, prefix: str) -> str:
        """``prefix-suffix``, drawn again while the group already has that id (a member or a pending one).
        Kafka counts on a random UUID never repeating; the injected suffix source may (a seeded one started
        again after a failover), and an id in use would otherwise replace that member unseen."""
        for _ in range(MAX_ID_DRAWS):
            new_id = f"{prefix}-{self._suffix()}"
            if not group.has(new_id) and not group.is_pending_member(new_id):
                return new_id
        raise RuntimeError(f"group {group.group_id}: the member id source gave {MAX_ID_DRAWS} ids in use in a row")

    def _do_join(self, group: GroupMetadata, req: JoinGroupRequest, handle: object) -> None:
        member_id, instance = req.member_id, req.group_instance_id
        if group.is_(DEAD):
            self._respond(handle, self._join_error(errors.COORDINATOR_NOT_AVAILABLE, member_id))
        elif not group.supports_protocols(req.protocol_type, [p for p, _ in req.protocols]):
            self._respond(handle, self._join_error(errors.INCONSISTENT_GROUP_PROTOCOL, member_id))
        elif group.is_pending_member(member_id):
            if instance is not None:   # Kafka throws IllegalStateException -> UNKNOWN_SERVER_ERROR
                self._respond(handle, self._join_error(errors.UNKNOWN_SERVER_ERROR, member_id))
            else:
                self._add_member_and_rebalance(group, member_id, req, handle)
        elif group.is_static_member_fenced(member_id, instance):
            self._respond(handle, self._join_error(errors.FENCED_INSTANCE_ID, member_id))
        elif not group.has(member_id) or (instance is not None and not group.has_static_member(instance)):
            self._respond(handle, self._join_error(errors.UNKNOWN_MEMBER_ID, member_id))
        else:
            member = group.get(member_id)
            if group.is_(PREPARING_REBALANCE):
                self._update_member_and_rebalance(group, member, req.protocols, handle,
                                                  f"member {member_id} joining group during PreparingRebalance")
            elif group.is_(COMPLETING_REBALANCE):
                if member.matches(req.protocols):
                    self._respond(handle, self._join_result(group, member_id, group.is_leader(member_id)))
                else:
                    self._update_member_and_rebalance(group, member, req.protocols, handle,
                                                      f"updating metadata for member {member_id}")
            elif group.is_(STABLE):
                if group.is_leader(member_id):
                    self._update_member_and_rebalance(group, member, req.protocols, handle,
                                                      f"leader {member_id} re-joining group during Stable")
                elif not member.matches(req.protocols):
                    self._update_member_and_rebalance(group, member, req.protocols, handle,
                                                      f"updating metadata for member {member_id}")
                else:
                    self._respond(handle, self._join_result(group, member_id, False))
            else:   # Empty (Dead handled above)
                self._respond(handle, self._join_error(errors.UNKNOWN_MEMBER_ID, member_id))

    def _add_member_and_rebalance(self, group: GroupMetadata, member_id: str, req: JoinGroupRequest,
                                  handle: object) -> None:
        member = MemberMetadata(member_id, req.group_instance_id, req.client_id, req.client_host,
                                req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
                                req.protocols)
        member.is_new = True
        if group.is_(PREPARING_REBALANCE) and group.generation == 0:
            group.new_member_added = True
        group.add(member, handle)
        self._member_event("member_added", group, member, "join")
        # new members cannot heartbeat yet: their join times out after 5 minutes instead
        self._schedule_heartbeat(member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        if member.is_static:
            group.static_members[member.group_instance_id] = member_id  # type: ignore[index]
        else:
            group.pending_members.pop(member_id, None)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id}")

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata,
                                     protocols: list[tuple[str, bytes]], handle: object, reason: str) -> None:
        displaced = group.update_member(member, protocols, handle)
        if displaced is not NO_HANDLE:
            self._event("request_superseded", group=group.group_id, member_id=member.member_id, api="join")
            self._respond(displaced, self._join_error(errors.REBALANCE_IN_PROGRESS, member.member_id))
        self._maybe_prepare_rebalance(group, reason)

    def _update_static_member_and_rebalance(self, group: GroupMetadata, new_id: str, req: JoinGroupRequest,
                                            handle: object) -> None:
        instance = req.group_instance_id
        assert instance is not None
        old_id = group.static_members[instance]
        current_leader = group.leader_id
        old_protocols = list(group.get(old_id).protocols)
        member, old_join, old_sync = group.replace_group_instance(old_id, new_id, instance)
        if old_join is not NO_HANDLE:
            self._respond(old_join, self._join_error(errors.FENCED_INSTANCE_ID, old_id))
        if old_sync is not NO_HANDLE:
            self._respond(old_sync, self._sync_error(errors.FENCED_INSTANCE_ID))
        self._event("member_removed", group=group.group_id, member_id=old_id, group_instance_id=instance,
                    reason="fenced", replaced_by=new_id)
        self._member_event("member_added", group, member, "static_replace")
        self._schedule_heartbeat(member, member.session_timeout_ms)
        group.update_member(member, req.protocols, handle)

        if group.is_(STABLE):
            if group.protocol_name == group.select_protocol():
                # the new member id must be stored before it is handed out (no rebalance)
                value = group.to_value({mid: m.assignment for mid, m in group.members.items()})

                def on_stored(code: int) -> None:
                    if code != errors.NONE:
                        if group.members.get(new_id) is member:   # revert the replacement
                            parked = member.join_handle is handle
                            group.update_member(member, old_protocols, NO_HANDLE if parked else member.join_handle)
                            group.replace_group_instance(new_id, old_id, instance)
                            self._schedule_heartbeat(member, member.session_timeout_ms)
                            self._event("member_removed", group=group.group_id, member_id=new_id,
                                        group_instance_id=instance, reason="fenced", replaced_by=old_id)
                            self._member_event("member_added", group, member, "static_replace")
                            if parked:
                                self._respond(handle, JoinGroupResponse(
                                    code, group.generation, group.protocol_type, group.protocol_name,
                                    current_leader or "", ""))
                    elif group.members.get(new_id) is member and member.join_handle is handle:
                        self._answer_join(member, self._join_result(group, new_id, False, current_leader))

                self._store_group(group, value, "static_replace", on_stored)
            else:
                self._maybe_prepare_rebalance(
                    group, f"static member {instance} rejoined with a protocol change")
        elif group.is_(COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"updating metadata for static member {instance}")
        elif group.state in (EMPTY, DEAD):
            raise IllegalStateTransition(
                f"group {group.group_id} cannot be {group.state} when static member {instance} rejoins")

    # ------------------------------------------------------------------ rebalance

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str | None = None) -> None:
        if reason is not None:
            self._reason = reason
        if group.is_(COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, errors.REBALANCE_IN_PROGRESS)
        group.pending_sync.clear()   # removeSyncExpiration
        group.sync_timer = None
        if group.is_(EMPTY):
            delay = self.config.initial_rebalance_delay_ms
            timer = JoinTimer(self._now + max(delay, 0), self._next_seq(), True, delay,
                              max(group.rebalance_timeout_ms() - delay, 0))
        else:
            timer = JoinTimer(self._now + max(group.rebalance_timeout_ms(), 1), self._next_seq())
        group.transition_to(PREPARING_REBALANCE, self._now)
        self._reason = None
        group.join_timer = timer
        self._check_complete_join(group)

    def _check_complete_join(self, group: GroupMetadata) -> None:
        """DelayedJoin.tryComplete: complete early once everyone has rejoined (never an InitialDelayedJoin)."""
        timer = group.join_timer
        if (group.is_(PREPARING_REBALANCE) and timer is not None and not timer.initial
                and group.has_all_members_joined()):
            group.join_timer = None
            self._on_complete_join(group)

    def _on_join_timer(self, group: GroupMetadata, timer: JoinTimer) -> None:
        if not group.is_(PREPARING_REBALANCE):
            return
        if timer.initial and group.new_member_added and timer.remaining_ms != 0:
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, timer.remaining_ms)
            remaining = max(timer.remaining_ms - timer.delay_ms, 0)
            group.join_timer = JoinTimer(self._now + max(delay, 0), self._next_seq(), True, delay, remaining)
            self._event("join_rearmed", group=group.group_id, generation=group.generation, timeout_ms=delay)
            return
        self._on_complete_join(group)

    def _on_complete_join(self, group: GroupMetadata) -> None:
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                self._leaving(member)
                group.remove(member.member_id)
                self._drop_parked(member)
                self._member_event("member_removed", group, member, "join_timeout")
        if group.is_(DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            timeout = group.rebalance_timeout_ms()
            group.join_timer = JoinTimer(self._now + max(timeout, 1), self._next_seq())
            self._event("join_rearmed", group=group.group_id, generation=group.generation, timeout_ms=timeout)
            self._check_complete_join(group)
            return
        group.init_next_generation(self._now)
        self._event("group_generation", group=group.group_id, generation=group.generation,
                    protocol_type=group.protocol_type, protocol=group.protocol_name,
                    leader=group.leader_id, members=list(group.members))
        if group.is_(EMPTY):
            # a failed write is only logged: the previous generation comes back on failover and times out
            self._store_group(group, group.to_value({}), "empty", lambda code: None)
            return
        for member_id, member in group.members.items():
            self._answer_join(member, self._join_result(group, member_id, group.is_leader(member_id)))
            self._schedule_heartbeat(member, member.session_timeout_ms)
            member.is_new = False
            group.pending_sync[member_id] = None
        group.sync_timer = SyncTimer(self._now + max(group.rebalance_timeout_ms(), 1), self._next_seq(),
                                     group.generation)

    def _on_expire_pending_sync(self, group: GroupMetadata, generation: int) -> None:
        """DelayedSync expired: members that did not sync are removed, then the group rebalances."""
        if generation != group.generation or group.state not in (COMPLETING_REBALANCE, STABLE):
            return
        if not group.pending_sync:
            return
        missing = list(group.pending_sync)
        for member_id in missing:
            member = group.get(member_id)
            self._leaving(member)
            group.remove(member_id)
            self._drop_parked(member)
            self._member_event("member_removed", group, member, "sync_timeout")
        self._prepare_rebalance(group, f"removing {missing} on pending sync request expiration")

    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_sync.pop(member_id, None)
        if not group.pending_sync:
            group.sync_timer = None

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, code: int) -> None:
        if not group.is_(COMPLETING_REBALANCE):
            raise IllegalStateTransition(f"group {group.group_id} is {group.state}, not CompletingRebalance")
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, code)

    def _propagate_assignment(self, group: GroupMetadata, code: int) -> None:
        ok = code == errors.NONE
        for member in group.members.values():
            response = SyncGroupResponse(code, group.protocol_type if ok else None,
                                         group.protocol_name if ok else None, member.assignment)
            if self._answer_sync(member, response):
                self._schedule_heartbeat(member, member.session_timeout_ms)

    # ------------------------------------------------------------------ member removal & expiry

    def _drop_parked(self, member: MemberMetadata) -> None:
        """Answer what a member that is gone still has parked (Kafka answers the join, drops the sync)."""
        self._answer_join(member, self._join_error(errors.UNKNOWN_MEMBER_ID))
        self._answer_sync(member, self._sync_error(errors.UNKNOWN_MEMBER_ID))

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        group.remove(member.member_id)
        self._drop_parked(member)
        self._member_event("member_removed", group, member, reason)
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"removing member {member.member_id} ({reason})")
        elif group.is_(PREPARING_REBALANCE):
            self._check_complete_join(group)

    def _on_expire_heartbeat(self, group: GroupMetadata, member: MemberMetadata) -> None:
        if group.is_(DEAD) or member.has_satisfied_heartbeat():
            return
        reason = "new_member_timeout" if member.is_new else "session_timeout"
        self._remove_member_and_update_group(group, member, reason)

    def _on_expire_pending_member(self, group: GroupMetadata, member_id: str) -> None:
        self._event("pending_member_removed", group=group.group_id, member_id=member_id, reason="session_timeout")
        if group.is_(PREPARING_REBALANCE):
            self._check_complete_join(group)

    # ------------------------------------------------------------------ SyncGroup

    def sync_group(self, handle: object, req: SyncGroupRequest, now_ms: int):
        self._start(now_ms)
        error = self._status_error(req.group_id, allow_empty=False)
        if error == errors.COORDINATOR_LOAD_IN_PROGRESS:
            self._respond(handle, self._sync_error(errors.REBALANCE_IN_PROGRESS))
        elif error is not None:
            self._respond(handle, self._sync_error(error))
        elif (group := self._groups.get(req.group_id)) is None:
            self._respond(handle, self._sync_error(errors.UNKNOWN_MEMBER_ID))
        else:
            self._do_sync(group, req, handle)
        return self._done()

    def _do_sync(self, group: GroupMetadata, req: SyncGroupRequest, handle: object) -> None:
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
            self._respond(handle, SyncGroupResponse(errors.NONE, group.protocol_type, group.protocol_name,
                                                    member.assignment))
            self._schedule_heartbeat(member, member.session_timeout_ms)
            return
        else:   # CompletingRebalance
            member = group.get(member_id)
            if member.is_awaiting_sync:
                self._event("request_superseded", group=group.group_id, member_id=member_id, api="sync")
                self._answer_sync(member, self._sync_error(errors.REBALANCE_IN_PROGRESS))
            member.sync_handle = handle
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                assignment = {mid: bytes(a) for mid, a in req.assignments}
                for mid in group.members:
                    assignment.setdefault(mid, b"")
                generation = group.generation

                def on_stored(code: int) -> None:
                    if group.is_(COMPLETING_REBALANCE) and group.generation == generation:
                        if code != errors.NONE:
                            self._reset_and_propagate_assignment_error(group, code)
                            self._maybe_prepare_rebalance(
                                group, f"error when storing group assignment during SyncGroup (member {member_id})")
                        else:
                            for mid, m in group.members.items():
                                m.assignment = assignment[mid]
                            self._propagate_assignment(group, errors.NONE)
                            group.transition_to(STABLE, self._now)

                self._store_group(group, group.to_value(assignment), "sync", on_stored)
            return
        self._respond(handle, self._sync_error(code))

    # ------------------------------------------------------------------ Heartbeat

    def heartbeat(self, handle: object, req: HeartbeatRequest, now_ms: int):
        self._start(now_ms)
        error = self._status_error(req.group_id, allow_empty=False)
        group = self._groups.get(req.group_id)
        if error is not None:
            code = errors.NONE if error == errors.COORDINATOR_LOAD_IN_PROGRESS else error
        elif group is None:
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
            self._schedule_heartbeat(member, member.session_timeout_ms)
            code = errors.REBALANCE_IN_PROGRESS if group.is_(PREPARING_REBALANCE) else errors.NONE
        self._respond(handle, HeartbeatResponse(code))
        return self._done()

    # ------------------------------------------------------------------ LeaveGroup

    def leave_group(self, handle: object, req: LeaveGroupRequest, now_ms: int):
        self._start(now_ms)
        error = self._status_error(req.group_id, allow_empty=False)
        group = self._groups.get(req.group_id)
        if error is not None:
            self._respond(handle, LeaveGroupResponse(error, []))
        elif group is None:
            self._respond(handle, LeaveGroupResponse(
                errors.NONE, [(mid, inst, errors.UNKNOWN_MEMBER_ID) for mid, inst in req.members]))
        elif group.is_(DEAD):
            self._respond(handle, LeaveGroupResponse(errors.COORDINATOR_NOT_AVAILABLE, []))
        else:
            results: list[tuple[str, str | None, int]] = []
            for member_id, instance in req.members:
                if member_id != "" and group.is_static_member_fenced(member_id, instance):
                    results.append((member_id, instance, errors.FENCED_INSTANCE_ID))
                elif group.is_pending_member(member_id):
                    if instance is not None:   # Kafka throws: the whole request fails
                        self._respond(handle, LeaveGroupResponse(errors.UNKNOWN_SERVER_ERROR, []))
                        return self._done()
                    del group.pending_members[member_id]
                    self._event("pending_member_removed", group=group.group_id, member_id=member_id,
                                reason="left")
                    if group.is_(PREPARING_REBALANCE):
                        self._check_complete_join(group)
                    results.append((member_id, instance, errors.NONE))
                elif not group.has(member_id) and not group.has_static_member(instance):
                    results.append((member_id, instance, errors.UNKNOWN_MEMBER_ID))
                else:
                    target = group.static_members[instance] if group.has_static_member(instance) else member_id
                    member = group.get(target)
                    self._leaving(member)
                    self._remove_member_and_update_group(group, member, "left")
                    results.append((member_id, instance, errors.NONE))
            self._respond(handle, LeaveGroupResponse(errors.NONE, results))
        return self._done()
