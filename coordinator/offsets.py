"""Offsets and group administration: OffsetCommit, OffsetFetch, Describe/List/DeleteGroups, expiry.

A mixin of :class:`coordinator.core.PartitionCoordinator`, kept apart for size.
It follows Kafka 2.8.2's GroupCoordinator (handleCommitOffsets,
doCommitOffsets, handleFetchOffsets, handleDescribeGroup, handleListGroups,
handleDeleteGroups) and GroupMetadataManager (storeOffsets, getOffsets,
cleanupGroupMetadata) with GroupMetadata.removeExpiredOffsets.

The offsets cache (``self._offsets``) is changed only by replaying records.
Commits in flight are tracked per key (``self._pending_commits``: for
requireStable and expiry); offsets whose acks=0 tombstone is queued behind a
pending append (``self._tombstoned``) are already gone, as in Kafka's cache.
"""
from __future__ import annotations

from coordinator import records as rec
from coordinator.group import CONSUMER_PROTOCOL_TYPE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE, GroupMetadata
from coordinator.messages import (
    DeleteGroupsRequest, DeleteGroupsResponse, DescribedGroup, DescribedMember, DescribeGroupsRequest,
    DescribeGroupsResponse, FetchedOffset, ListGroupsRequest, ListGroupsResponse, OffsetCommitRequest,
    OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
)
from kafkacommon import errors


def map_offset_append_error(code: int) -> int:
    """storeOffsets' mapping of an append error to the OffsetCommit error (others pass through)."""
    if code in (errors.UNKNOWN_TOPIC_OR_PARTITION, errors.NOT_ENOUGH_REPLICAS,
                errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return errors.COORDINATOR_NOT_AVAILABLE
    if code in (errors.NOT_LEADER_OR_FOLLOWER, errors.KAFKA_STORAGE_ERROR):
        return errors.NOT_COORDINATOR
    if code in (errors.MESSAGE_TOO_LARGE, errors.RECORD_LIST_TOO_LARGE, errors.INVALID_FETCH_SIZE):
        return errors.INVALID_COMMIT_OFFSET_SIZE
    return code


def java_length(s: str | None) -> int:
    """String.length(): UTF-16 code units (what Kafka compares with offset.metadata.max.bytes)."""
    if not s:
        return 0
    if s.isascii():  # one code unit per character: the usual metadata, checked without encoding
        return len(s)
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


class OffsetsMixin:
    # ------------------------------------------------------------------ cache views

    def _effective_offsets(self, group_id: str) -> dict[tuple[str, int], rec.OffsetValue]:
        cached = self._offsets.get(group_id, {})
        return {tp: v for tp, v in cached.items() if (group_id, tp[0], tp[1]) not in self._tombstoned}

    def _is_pending(self, group_id: str, topic: str, partition: int) -> bool:
        return bool(self._pending_commits.get((group_id, topic, partition)))

    def _has_offsets(self, group_id: str) -> bool:
        return bool(self._effective_offsets(group_id)) or any(
            ids and key[0] == group_id for key, ids in self._pending_commits.items())

    # ------------------------------------------------------------------ OffsetCommit

    def offset_commit(self, handle: object, req: OffsetCommitRequest, now_ms: int):
        self._start(now_ms)
        error = self._status_error(req.group_id, allow_empty=True)
        group = self._groups.get(req.group_id) if error is None else None
        if error is not None:
            self._commit_answer(handle, req, error)
        elif group is None:
            if req.generation_id < 0:   # a simple consumer: Kafka stores offsets only
                self._do_commit(self._new_group(req.group_id, "commit"), req, handle)
            else:
                self._commit_answer(handle, req, errors.ILLEGAL_GENERATION)
        else:
            self._do_commit(group, req, handle)
        return self._done()

    def _commit_answer(self, handle: object, req: OffsetCommitRequest, code: int) -> None:
        self._respond(handle, OffsetCommitResponse([(o.topic, o.partition, code) for o in req.offsets]))

    def _do_commit(self, group: GroupMetadata, req: OffsetCommitRequest, handle: object) -> None:
        if group.is_(DEAD):
            self._commit_answer(handle, req, errors.COORDINATOR_NOT_AVAILABLE)
        elif group.is_static_member_fenced(req.member_id, req.group_instance_id):
            self._commit_answer(handle, req, errors.FENCED_INSTANCE_ID)
        elif req.generation_id < 0 and group.is_(EMPTY):
            self._store_offsets(group, req, handle)
        elif not self.config.check_commit_generation:   # a planted bug (chaos checkers' tests)
            self._store_offsets(group, req, handle)
        elif not group.has(req.member_id):
            self._commit_answer(handle, req, errors.UNKNOWN_MEMBER_ID)
        elif req.generation_id != group.generation:
            self._commit_answer(handle, req, errors.ILLEGAL_GENERATION)
        elif group.state in (STABLE, PREPARING_REBALANCE):
            member = group.get(req.member_id)
            self._schedule_heartbeat(member, member.session_timeout_ms)
            self._store_offsets(group, req, handle)
        else:   # CompletingRebalance: the member has the new generation but no assignment yet
            self._commit_answer(handle, req, errors.REBALANCE_IN_PROGRESS)

    def _store_offsets(self, group: GroupMetadata, req: OffsetCommitRequest, handle: object) -> None:
        limit = self.config.offset_metadata_max_bytes
        fits = [java_length(o.metadata) <= limit for o in req.offsets]
        valid = [o for o, ok in zip(req.offsets, fits) if ok]
        if not valid:
            self._commit_answer(handle, req, errors.OFFSET_METADATA_TOO_LARGE)
            return
        now = self._now
        expire = None if req.retention_time_ms == -1 else now + req.retention_time_ms
        group_id = group.group_id
        key, value = rec.OffsetKey, rec.OffsetValue
        records = [(key(group_id, o.topic, o.partition), value(o.offset, o.leader_epoch, o.metadata or "", now, expire))
                   for o in valid]
        keys = [k for k, _ in records]   # an OffsetKey is the (group, topic, partition) tuple itself

        def answer(code: int) -> None:
            self._respond(handle, OffsetCommitResponse([
                (o.topic, o.partition, code if ok else errors.OFFSET_METADATA_TOO_LARGE)
                for o, ok in zip(req.offsets, fits)]))

        def on_done(code: int) -> None:
            for key in keys:
                ids = self._pending_commits.get(key)
                if ids is not None:
                    ids.discard(append_id)
                    if not ids:
                        del self._pending_commits[key]
            answer(errors.NONE if code == errors.NONE else map_offset_append_error(code))

        append_id = self._append(records, acks=self.config.commit_required_acks, on_done=on_done,
                                 on_orphan=lambda: answer(errors.NOT_COORDINATOR))
        for key in keys:
            self._pending_commits.setdefault(key, set()).add(append_id)

    # ------------------------------------------------------------------ OffsetFetch

    def offset_fetch(self, handle: object, req: OffsetFetchRequest, now_ms: int):
        self._start(now_ms)
        error = self._status_error(req.group_id, allow_empty=True)
        if error is not None:
            self._respond(handle, OffsetFetchResponse(error, []))
            return self._done()
        group = self._groups.get(req.group_id)
        if group is None or group.is_(DEAD):
            result = [FetchedOffset(t, p, -1, -1, "", errors.NONE) for t, p in (req.partitions or [])]
        else:
            offsets = self._effective_offsets(req.group_id)
            wanted = sorted(offsets) if req.partitions is None else list(req.partitions)
            result = []
            for topic, partition in wanted:
                value = offsets.get((topic, partition))
                if req.require_stable and self._is_pending(req.group_id, topic, partition):
                    result.append(FetchedOffset(topic, partition, -1, -1, "", errors.UNSTABLE_OFFSET_COMMIT))
                elif value is None:
                    result.append(FetchedOffset(topic, partition, -1, -1, "", errors.NONE))
                else:
                    result.append(FetchedOffset(topic, partition, value.offset, value.leader_epoch,
                                                value.metadata, errors.NONE))
        self._respond(handle, OffsetFetchResponse(errors.NONE, result))
        return self._done()

    # ------------------------------------------------------------------ DescribeGroups / ListGroups

    def describe_groups(self, handle: object, req: DescribeGroupsRequest, now_ms: int):
        self._start(now_ms)
        described = []
        for group_id in req.group_ids:
            error = self._status_error(group_id, allow_empty=True)
            group = self._groups.get(group_id)
            if error is not None:
                described.append(DescribedGroup(error, group_id, "", "", "", []))
            elif group is None:
                described.append(DescribedGroup(errors.NONE, group_id, DEAD, "", "", []))
            elif group.is_(STABLE):
                members = [DescribedMember(mid, m.group_instance_id, m.client_id, m.client_host,
                                           m.metadata(group.protocol_name), m.assignment)
                           for mid, m in group.members.items()]
                described.append(DescribedGroup(errors.NONE, group_id, group.state, group.protocol_type or "",
                                                group.protocol_name or "", members, group.generation))
            else:
                members = [DescribedMember(mid, m.group_instance_id, m.client_id, m.client_host, b"", b"")
                           for mid, m in group.members.items()]
                described.append(DescribedGroup(errors.NONE, group_id, group.state, group.protocol_type or "",
                                                "", members, group.generation))
        self._respond(handle, DescribeGroupsResponse(described))
        return self._done()

    def list_groups(self, handle: object, req: ListGroupsRequest, now_ms: int):
        self._start(now_ms)
        if self.status == "unloaded":
            self._respond(handle, ListGroupsResponse(errors.NOT_COORDINATOR, []))
        else:
            code = errors.COORDINATOR_LOAD_IN_PROGRESS if self.status == "loading" else errors.NONE
            states = set(req.states_filter)
            groups = [(gid, g.protocol_type or "", g.state) for gid, g in sorted(self._groups.items())
                      if not states or g.state in states]
            self._respond(handle, ListGroupsResponse(code, groups))
        return self._done()

    # ------------------------------------------------------------------ DeleteGroups

    def delete_groups(self, handle: object, req: DeleteGroupsRequest, now_ms: int):
        self._start(now_ms)
        results: dict[str, int] = {}
        eligible: list[GroupMetadata] = []
        for group_id in dict.fromkeys(req.group_ids):   # a set, in request order
            error = self._status_error(group_id, allow_empty=True)
            group = self._groups.get(group_id)
            if error is not None:
                results[group_id] = error
            elif group is None or group.is_(DEAD):
                results[group_id] = errors.GROUP_ID_NOT_FOUND
            elif group.is_(EMPTY):
                group.transition_to(DEAD, now_ms)
                eligible.append(group)
                results[group_id] = errors.NONE
            else:
                results[group_id] = errors.NON_EMPTY_GROUP
        for group in eligible:
            removed = sorted(self._effective_offsets(group.group_id))
            for key in [k for k in self._pending_commits if k[0] == group.group_id]:
                del self._pending_commits[key]   # removeAllOffsets drops pending commits too
            self._cleanup_group(group, removed, "deleted")
        self._respond(handle, DeleteGroupsResponse(list(results.items())))
        return self._done()

    # ------------------------------------------------------------------ expiry

    def _cleanup_expired_offsets(self) -> None:
        """The offsets.retention.check.interval.ms task: removeExpiredOffsets then cleanupGroupMetadata."""
        for group in list(self._groups.values()):
            expired = self._expired_offsets(group)
            if expired:
                self._event("offsets_expired", group=group.group_id, count=len(expired))
            self._cleanup_group(group, expired, "expired")

    def _expired_offsets(self, group: GroupMetadata) -> list[tuple[str, int]]:
        now, retention = self._now, self.config.offsets_retention_ms
        offsets = self._effective_offsets(group.group_id)
        subscribed: frozenset[str] = frozenset()
        if group.protocol_type is not None and group.is_(EMPTY):
            # retention counts from when the group became Empty (or the commit, with no timestamp)
            def base(v: rec.OffsetValue) -> int:
                return v.commit_timestamp if group.state_timestamp_ms is None else group.state_timestamp_ms
        elif (group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.subscribed_topics is not None
              and group.is_(STABLE)):
            subscribed = group.subscribed_topics

            def base(v: rec.OffsetValue) -> int:
                return v.commit_timestamp
        elif group.protocol_type is None:   # a simple group: by commit time

            def base(v: rec.OffsetValue) -> int:
                return v.commit_timestamp
        else:
            return []
        expired = []
        for (topic, partition), value in sorted(offsets.items()):
            if topic in subscribed or self._is_pending(group.group_id, topic, partition):
                continue
            if value.expire_timestamp is None:
                if now - base(value) >= retention:
                    expired.append((topic, partition))
            elif now >= value.expire_timestamp:
                expired.append((topic, partition))
        return expired

    def _cleanup_group(self, group: GroupMetadata, removed: list[tuple[str, int]], reason: str) -> None:
        """cleanupGroupMetadata: tombstones (acks=0) for ``removed``; an Empty group left with no offsets dies."""
        group_id = group.group_id
        removed_set = set(removed)
        if group.is_(EMPTY):
            left = any(tp not in removed_set for tp in self._effective_offsets(group_id))
            pending = any(ids and k[0] == group_id for k, ids in self._pending_commits.items())
            if not left and not pending:
                group.transition_to(DEAD, self._now)
        tombstones: list[tuple[rec.Key, None]] = [(rec.OffsetKey(group_id, t, p), None) for t, p in removed]
        if group.is_(DEAD) and self._groups.get(group_id) is group:
            del self._groups[group_id]
            if group.generation > 0:   # generation 0: the group only ever stored offsets
                tombstones.append((rec.GroupMetadataKey(group_id), None))
            self._event("group_deleted", group=group_id, reason=reason, generation=group.generation,
                        offsets=len(removed))
        if tombstones:
            self._append(tombstones, acks=0)
