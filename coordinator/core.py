"""Kafka 2.8's group coordinator for one __consumer_offsets partition, as a sans-IO core.

The shell owns the network, the log and the clock.  It hands the core requests
(with an opaque ``handle``), append completions and ticks, each with
``now_ms``, and gets back an :class:`Output`: responses to send (possibly for
earlier handles: a JoinGroup is parked until the rebalance completes), records
to append, and events to log.  Each API has its own method (``join_group``,
``offset_commit``, ...), taking and answering :mod:`coordinator.messages` types.

:class:`PartitionCoordinator` is the runtime around two managers that own
their state (Kafka's GroupCoordinatorShard around GroupMetadataManager and
OffsetMetadataManager): :class:`~coordinator.membership.MembershipManager`
(JoinGroup, SyncGroup, Heartbeat, LeaveGroup, the rebalance) and
:class:`~coordinator.offsets.OffsetsManager` (the offsets cache, OffsetCommit,
OffsetFetch, expiry), sharing the groups of a
:class:`~coordinator.registry.GroupRegistry`.  The runtime answers while the
partition is loading or not its own, routes each request to its manager, and
carries out what a manager's :class:`~coordinator.result.Result` asks: the
records are appended (in the order they were emitted) and replayed once done,
and timers are keyed (:mod:`coordinator.timers`).  Randomness comes only from
the injected ``new_member_suffix`` (a UUID string in production); a suffix
that gives an id the group already has is drawn again (a seeded source may
repeat after a failover).

Durable state is what the records define — the offsets cache and each group's
last stored GroupMetadataValue — and it changes only in :meth:`replay`, which
the write path calls once an append succeeds and the failover load calls for
every record of the log.  Successful appends are replayed in the order they
were emitted (the shell appends them to the log in that order), so the cache
always equals the replay of the log's committed records.  acks=0 appends (the
expiry/deletion tombstones, which Kafka removes from its cache at once) count
as done when emitted; their completions are ignored.  Transient rebalance
state (members, parked requests, a generation not yet stored) lives in
:class:`~coordinator.group.GroupMetadata` objects, as in Kafka, and the
delayed operations in the keyed timers.

After :meth:`unload`, an append still pending is answered NOT_COORDINATOR
when its completion arrives (an append that completed but was still waiting
for an earlier one is answered NOT_COORDINATOR at the unload).

Every handle gets exactly one response.  Where Kafka silently drops a parked
request (a member re-sending JoinGroup or SyncGroup while its previous one is
parked; a member leaving while its SyncGroup is parked) the core answers the
displaced request: REBALANCE_IN_PROGRESS for a superseded join/sync,
UNKNOWN_MEMBER_ID for the sync of a member that left.

Events (each a ``kafkacommon.event.Event``: its name, and ``partition`` plus the fields below):

======================  ==============================================================================
event                   fields
======================  ==============================================================================
partition_loading       (none)
partition_loaded        groups, offsets
partition_unloaded      groups, offsets, orphaned_appends
group_loaded            group, state, generation, protocol_type, protocol, leader, members, offsets
group_created           group, reason ("join" | "commit")
group_state_changed     group, from, to, generation, reason (why a rebalance started, else None)
group_generation        group, generation, protocol_type, protocol, leader, members (ids)
join_rearmed            group, generation, timeout_ms (the initial delay extended, or nobody rejoined: armed again)
member_added            group, member_id, group_instance_id, reason ("join" | "static_replace")
member_removed          group, member_id, group_instance_id, reason ("left" | "session_timeout" |
                        "new_member_timeout" | "join_timeout" | "sync_timeout" | "fenced" |
                        "group_max_size"), and replaced_by for "fenced"
pending_member_added    group, member_id (MEMBER_ID_REQUIRED was returned)
pending_member_removed  group, member_id, reason ("left" | "session_timeout")
request_superseded      group, member_id, api ("join" | "sync")
group_stored            group, generation, members, reason ("sync" | "empty" | "static_replace"), error
offsets_expired         group, count
group_deleted           group, reason ("deleted" | "expired"), generation, offsets
append_failed           append_id, error, acks
======================  ==============================================================================

``group_stored`` is logged when the append of a group record completes (error
0 = stored).  ``member_id`` "" never appears in events.

Choices where Kafka 2.8 leaves room, or where the core differs on purpose:

* Ties in the protocol vote go to the smallest protocol name; a new leader is
  the oldest member (Kafka: HashMap order).
* Timers: :meth:`on_tick` fires due timers earliest first (the offsets expiry
  task after the others due with it); one armed during the call for a time
  <= now waits for the next call, and DelayedJoin and
  DelayedSync last at least 1 ms (Kafka's timing-wheel tick), so a 0 ms
  rebalance timeout cannot spin.  The offsets expiry task first runs one check
  interval after :meth:`finish_load` (Kafka's runs broker-wide since start-up).
* Cases where Kafka throws IllegalStateException on client input (a pending
  member id sent with a group.instance.id to JoinGroup or LeaveGroup) are
  answered UNKNOWN_SERVER_ERROR, as Kafka's request handler would.
* Offset metadata is measured like Java's ``String.length()`` (UTF-16 units);
  partitions refused as too large are not marked as pending commits.
* A failed store after a static member replacement restores the old member
  id and the old protocols (2.8 restores the new protocols by mistake).
* ListGroups on an unloaded partition answers NOT_COORDINATOR.
* :meth:`replay` raises :class:`~coordinator.records.RecordFormatError` for a
  record that cannot be decoded; the shell decides what a load does then.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from coordinator import records as rec
from coordinator.commit_checks import txn_commit_error
from coordinator.config import GroupConfig
from coordinator.group import (
    COMPLETING_REBALANCE, CONSUMER_PROTOCOL_TYPE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE, GroupMetadata,
)
from coordinator.membership import NEW_MEMBER_JOIN_TIMEOUT_MS, MembershipManager
from coordinator.messages import (
    DeleteGroupsRequest, DeleteGroupsResponse, DescribedGroup, DescribeGroupsRequest, DescribeGroupsResponse,
    HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, ListGroupsRequest, ListGroupsResponse,
    OffsetCommitRequest, OffsetDeleteRequest, OffsetDeleteResponse, OffsetFetchRequest, SyncGroupRequest,
    TxnOffsetCommitRequest,
)
from coordinator.offsets import OffsetsManager
from coordinator.registry import GroupRegistry
from coordinator.result import Result, Write
from coordinator.timers import EXPIRY_KEY, Timers
from kafkacommon import errors
from kafkacommon.event import Event

__all__ = ["GroupConfig", "AppendCmd", "Output", "PartitionCoordinator", "NEW_MEMBER_JOIN_TIMEOUT_MS"]


@dataclass
class AppendCmd:
    append_id: int                     # unique per coordinator
    records: list[tuple[bytes, bytes | None]]   # (key bytes, value bytes or None = tombstone)
    acks: int                          # -1 (all) for commits/group records, 0 for expiry tombstones
    timeout_ms: int
    producer: tuple[int, int] | None = None   # (id, epoch): a transactional batch (TxnOffsetCommit)
    base_offset: int | None = None            # where the shell appended it (it sets this once it knows)


@dataclass
class Output:
    responses: list[tuple[object, object]] = field(default_factory=list)   # (handle, response)
    appends: list[AppendCmd] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)

    def extend(self, other: "Output") -> "Output":
        self.responses.extend(other.responses)
        self.appends.extend(other.appends)
        self.events.extend(other.events)
        return self


@dataclass
class _Append:
    cmd: AppendCmd
    write: Write                              # the records as emitted (what their bytes decode to), continuations
    state: str = "pending"                    # pending | ok | failed


class PartitionCoordinator:
    """The group coordinator of one __consumer_offsets partition (see the module docstring)."""

    def __init__(self, partition: int, config: GroupConfig, new_member_suffix: Callable[[], str]) -> None:
        self.partition = partition
        self.config = config
        self.status = "unloaded"
        self.timers = Timers()
        self.groups = GroupRegistry()
        self.membership = MembershipManager(partition, config, self.groups, self.timers, new_member_suffix)
        self.offsets = OffsetsManager(partition, config)
        self._next_append_id = 1
        self._appends: dict[int, _Append] = {}                   # emitted, not yet replayed (in order)
        self._orphans: dict[int, Callable[[Result], None] | None] = {}
        self._draining = False
        self.last_replayed_offset: int | None = None
        self._early_markers: list[tuple[int, bool, int]] = []      # markers written while loading

    def _reset(self) -> None:
        self.groups.clear()
        self.offsets.clear()
        self.timers.clear()
        self._appends = {}
        self._early_markers = []

    # ------------------------------------------------------------------ the API

    def join_group(self, handle: object, req: JoinGroupRequest, now_ms: int) -> Output:
        error = self._status_error(req.group_id, allow_empty=False)
        if error is not None:
            return self._answer(handle, req.error_response(error))
        return self._run(self.membership.join_group(handle, req, now_ms))

    def sync_group(self, handle: object, req: SyncGroupRequest, now_ms: int) -> Output:
        error = self._status_error(req.group_id, allow_empty=False)
        if error is not None:
            loading = error == errors.COORDINATOR_LOAD_IN_PROGRESS
            return self._answer(handle, req.error_response(errors.REBALANCE_IN_PROGRESS if loading else error))
        return self._run(self.membership.sync_group(handle, req, now_ms))

    def heartbeat(self, handle: object, req: HeartbeatRequest, now_ms: int) -> Output:
        error = self._status_error(req.group_id, allow_empty=False)
        if error is not None:
            loading = error == errors.COORDINATOR_LOAD_IN_PROGRESS
            return self._answer(handle, req.error_response(errors.NONE if loading else error))
        return self._run(self.membership.heartbeat(handle, req, now_ms))

    def leave_group(self, handle: object, req: LeaveGroupRequest, now_ms: int) -> Output:
        error = self._status_error(req.group_id, allow_empty=False)
        if error is not None:
            return self._answer(handle, req.error_response(error))
        return self._run(self.membership.leave_group(handle, req, now_ms))

    def offset_commit(self, handle: object, req: OffsetCommitRequest, now_ms: int) -> Output:
        error = self._status_error(req.group_id, allow_empty=True)
        if error is not None:
            return self._answer(handle, req.error_response(error))
        out = Result(self.partition, now_ms)
        group = self.groups.get(req.group_id)
        if group is None and req.generation_id < 0:   # a simple consumer: Kafka stores offsets only
            group = self.groups.create(out, req.group_id, "commit")
        code = self.membership.validate_commit(group, req, now_ms)
        if code is None:
            out.extend(self.offsets.commit(handle, req, now_ms))
        else:
            out.respond(handle, req.error_response(code))
        return self._run(out)

    def txn_offset_commit(self, handle: object, req: TxnOffsetCommitRequest, now_ms: int) -> Output:
        """handleTxnCommitOffsets: the group is created if need be; doTxnCommitOffsets' checks; the offsets are
        written as the producer's transactional batch, pending until its marker."""
        error = self._status_error(req.group_id, allow_empty=True)
        if error is not None:
            return self._answer(handle, req.error_response(error))
        out = Result(self.partition, now_ms)
        group = self.groups.get(req.group_id) or self.groups.create(out, req.group_id, "txn_commit")
        code = txn_commit_error(group, req)
        if code is None:
            out.extend(self.offsets.commit(handle, req, now_ms))
        else:
            out.respond(handle, req.error_response(code))
        return self._run(out)

    def complete_txn(self, producer_id: int, commit: bool, offset: int, now_ms: int) -> Output:
        """The marker ending ``producer_id``'s transaction was written to this partition at ``offset``
        (GroupMetadataManager.handleTxnCompletion): its pending offsets are committed or discarded.  While
        loading it waits for the load's end (the load may have read it, or not)."""
        out = Result(self.partition, now_ms)
        if self.status == "loading":
            self._early_markers.append((producer_id, commit, offset))
        elif self.status == "active":
            self._complete_txn(out, producer_id, commit, offset)
        return self._run(out)

    def _complete_txn(self, out: Result, producer_id: int, commit: bool, offset: int | None) -> None:
        groups = self.offsets.open_producers_groups(producer_id)
        done = self.offsets.replay_marker(producer_id, commit, offset)
        if groups:
            out.event("txn_offsets_completed", producer_id=producer_id, commit=commit, groups=groups, offsets=done)

    def replay_marker(self, producer_id: int, commit: bool, offset: int | None = None) -> None:
        """A marker read from the log during a load (the same rule as the live path's)."""
        self.offsets.replay_marker(producer_id, commit, offset)

    def offset_fetch(self, handle: object, req: OffsetFetchRequest, now_ms: int) -> Output:
        error = self._status_error(req.group_id, allow_empty=True)
        if error is not None:
            return self._answer(handle, req.error_response(error))
        return self._answer(handle, self.offsets.fetch(self.groups.get(req.group_id), req))

    def describe_groups(self, handle: object, req: DescribeGroupsRequest, now_ms: int) -> Output:
        described = []
        for group_id in req.group_ids:
            error = self._status_error(group_id, allow_empty=True)
            described.append(self.groups.describe(group_id) if error is None
                             else DescribedGroup(error, group_id, "", "", "", []))
        return self._answer(handle, DescribeGroupsResponse(described))

    def list_groups(self, handle: object, req: ListGroupsRequest, now_ms: int) -> Output:
        if self.status == "unloaded":
            return self._answer(handle, req.error_response(errors.NOT_COORDINATOR))
        code = errors.COORDINATOR_LOAD_IN_PROGRESS if self.status == "loading" else errors.NONE
        return self._answer(handle, ListGroupsResponse(code, self.groups.listed(req.states_filter)))

    def delete_groups(self, handle: object, req: DeleteGroupsRequest, now_ms: int) -> Output:
        """handleDeleteGroups: an Empty group dies, its offsets and its metadata are tombstoned."""
        out = Result(self.partition, now_ms)
        results: dict[str, int] = {}
        eligible: list[GroupMetadata] = []
        for group_id in dict.fromkeys(req.group_ids):   # a set, in request order
            error = self._status_error(group_id, allow_empty=True)
            group = self.groups.get(group_id)
            if error is not None:
                results[group_id] = error
            elif group is None or group.is_(DEAD):
                results[group_id] = errors.GROUP_ID_NOT_FOUND
            elif group.is_(EMPTY):
                self.groups.transition(out, group, DEAD)
                eligible.append(group)
                results[group_id] = errors.NONE
            else:
                results[group_id] = errors.NON_EMPTY_GROUP
        for group in eligible:
            self._cleanup_group(out, group, self.offsets.remove_all(group.group_id), "deleted")
        out.respond(handle, DeleteGroupsResponse(list(results.items())))
        return self._run(out)

    def offset_delete(self, handle: object, req: OffsetDeleteRequest, now_ms: int) -> Output:
        """handleDeleteOffsets: an Empty group's offsets go; a consumer group that is rebalancing or Stable loses
        only those of topics it is not subscribed to (GROUP_SUBSCRIBED_TO_TOPIC; an unknown subscription counts
        as every topic); any other group answers NON_EMPTY_GROUP.  Tombstones are written (acks=0) and replay
        removes the offsets; an Empty group left with none dies."""
        error = self._status_error(req.group_id, allow_empty=False)
        if error is not None:
            return self._answer(handle, req.error_response(error))
        out = Result(self.partition, now_ms)
        group = self.groups.get(req.group_id)
        results: dict[tuple[str, int], int] = {}
        if group is None or group.is_(DEAD):
            return self._answer(handle, req.error_response(errors.GROUP_ID_NOT_FOUND))
        if group.is_(EMPTY):
            eligible = list(req.partitions)
        elif group.state in (PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE) \
                and group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            topics = group.subscribed_topics
            subscribed = [tp for tp in req.partitions if topics is None or tp[0] in topics]
            results = {tp: errors.GROUP_SUBSCRIBED_TO_TOPIC for tp in subscribed}
            eligible = [tp for tp in req.partitions if tp not in results]
        else:
            return self._answer(handle, req.error_response(errors.NON_EMPTY_GROUP))
        if eligible:
            removed = self.offsets.remove(group.group_id, eligible)
            out.event("offsets_deleted", group=group.group_id, partitions=[f"{t}-{p}" for t, p in removed],
                      requested=len(eligible), generation=group.generation)
            self._cleanup_group(out, group, removed, "offsets_deleted")
            results.update({tp: errors.NONE for tp in eligible})
        out.respond(handle, OffsetDeleteResponse(errors.NONE, [(t, p, results[(t, p)]) for t, p in req.partitions
                                                               if (t, p) in results]))
        return self._run(out)

    def _status_error(self, group_id: str | None, allow_empty: bool) -> int | None:
        """validateGroupStatus: INVALID_GROUP_ID, then loading, then ownership."""
        if group_id is None or (group_id == "" and not allow_empty):
            return errors.INVALID_GROUP_ID
        if self.status == "loading":
            return errors.COORDINATOR_LOAD_IN_PROGRESS
        if self.status != "active":
            return errors.NOT_COORDINATOR
        return None

    def _answer(self, handle: object, response: object) -> Output:
        return Output(responses=[(handle, response)])

    # ------------------------------------------------------------------ group cleanup and offsets expiry

    def _cleanup_group(self, out: Result, group: GroupMetadata, removed: list[tuple[str, int]], reason: str) -> None:
        """cleanupGroupMetadata: tombstones (acks=0) for ``removed``; an Empty group left with no offsets dies."""
        group_id = group.group_id
        if group.is_(EMPTY) and not self.offsets.has_offsets(group_id, besides=removed):
            self.groups.transition(out, group, DEAD)
        tombstones: list[tuple[rec.Key, None]] = [(rec.OffsetKey(group_id, t, p), None) for t, p in removed]
        if group.is_(DEAD) and self.groups.remove(group):
            self.membership.forget(group)
            if group.generation > 0:   # generation 0: the group only ever stored offsets
                tombstones.append((rec.GroupMetadataKey(group_id), None))
            out.event("group_deleted", group=group_id, reason=reason, generation=group.generation,
                      offsets=len(removed))
        if tombstones:
            self.offsets.hide(out.write(tombstones, acks=0))

    def _expire_offsets(self, out: Result, deadline_ms: int) -> None:
        """The offsets.retention.check.interval.ms task: removeExpiredOffsets then cleanupGroupMetadata."""
        while deadline_ms <= out.now_ms:
            deadline_ms += max(self.config.offsets_retention_check_interval_ms, 1)
        self._arm_expiry(deadline_ms)
        for group in self.groups.groups():
            expired = self.offsets.expired(group, out.now_ms)
            if expired:
                out.event("offsets_expired", group=group.group_id, count=len(expired))
            self._cleanup_group(out, group, expired, "expired")

    def _arm_expiry(self, deadline_ms: int) -> None:
        self.timers.schedule(EXPIRY_KEY, deadline_ms, lambda o: self._expire_offsets(o, deadline_ms))

    # ------------------------------------------------------------------ appends

    def _run(self, out: Result) -> Output:
        """Carry out a result: its writes go to the log (acks=0 ones are done at once)."""
        appends: list[AppendCmd] = []
        self._flush(out, appends)
        return Output(out.responses, appends, out.events)

    def _flush(self, out: Result, appends: list[AppendCmd]) -> None:
        """Hand ``out``'s new writes to the log, in order: each gets an append id and an AppendCmd."""
        while out.writes:
            write = out.writes.pop(0)
            append_id = self._next_append_id
            self._next_append_id += 1
            cmd = AppendCmd(append_id, rec.encode_records(write.records), write.acks, self.config.commit_timeout_ms,
                            write.producer)
            appends.append(cmd)
            entry = _Append(cmd, write)
            self._appends[append_id] = entry
            if write.acks == 0:
                entry.state = "ok"   # fire and forget, like partition.appendRecordsToLeader(requiredAcks = 0)
                self._drain(out, appends)

    def _drain(self, out: Result, appends: list[AppendCmd]) -> None:
        """Replay the leading resolved appends, in emission order, and run their continuations."""
        if self._draining:
            return
        self._draining = True
        try:
            while self._appends:
                append_id, entry = next(iter(self._appends.items()))
                if entry.state == "pending":
                    break
                del self._appends[append_id]
                if entry.state == "ok":
                    # the records' own objects: decoding their bytes gives the same (records'
                    # round-trip tests), and the replay path (the load) decodes the bytes
                    write = entry.write
                    base = entry.cmd.base_offset
                    for i, (key, value) in enumerate(write.records):
                        self._apply(key, value, write, None if base is None else base + i)
                    if write.on_done is not None:
                        write.on_done(out, errors.NONE)
                        self._flush(out, appends)
        finally:
            self._draining = False

    def on_append_done(self, append_id: int, error_code: int, now_ms: int) -> Output:
        """The replication layer's answer for an append (0 = the HW covers its records)."""
        out = Result(self.partition, now_ms)
        appends: list[AppendCmd] = []
        if append_id in self._orphans:
            on_orphan = self._orphans.pop(append_id)
            if on_orphan is not None:
                on_orphan(out)
            return Output(out.responses, appends, out.events)
        entry = self._appends.get(append_id)
        if entry is None or entry.state != "pending":
            if entry is not None and error_code != errors.NONE:
                out.event("append_failed", append_id=append_id, error=error_code, acks=entry.cmd.acks)
            return Output(out.responses, appends, out.events)
        if error_code == errors.NONE:
            entry.state = "ok"
        else:
            entry.state = "failed"
            out.event("append_failed", append_id=append_id, error=error_code, acks=entry.cmd.acks)
            if entry.write.on_done is not None:
                entry.write.on_done(out, error_code)
                self._flush(out, appends)
        self._drain(out, appends)
        return Output(out.responses, appends, out.events)

    # ------------------------------------------------------------------ replay & durable view

    def replay(self, key: bytes, value: bytes | None, offset: int | None = None,
               producer_id: int | None = None) -> None:
        """Apply one __consumer_offsets record to the durable state (the last record per key wins).

        Used for every record of the log during a load, and by the write path
        for its own records once they are committed.  ``producer_id``: a record
        of that producer's transactional batch (pending until its marker).
        Raises RecordFormatError for bytes that are not a valid record.
        """
        k, v = rec.decode_record(key, value)
        # the write path runs the same code (_apply, with its write)
        if type(k) is rec.OffsetKey:
            self.offsets.replay(k, v, None, offset, producer_id)  # type: ignore[arg-type]
        else:
            self.groups.replay(k, v)  # type: ignore[arg-type]
        if offset is not None:
            self.last_replayed_offset = offset

    def _apply(self, k: rec.Key, v: rec.Value | None, write: Write | None, offset: int | None = None) -> None:
        if isinstance(k, rec.OffsetKey):
            producer = write.producer if write is not None else None
            self.offsets.replay(k, v, write, offset, producer[0] if producer else None)  # type: ignore[arg-type]
        else:
            self.groups.replay(k, v)  # type: ignore[arg-type]

    def durable_view(self) -> dict:
        """Everything the records define, canonically ordered: {"offsets": {(group, topic, partition):
        OffsetValue}, "groups": {group: GroupValue}}."""
        return {"offsets": self.offsets.view(), "groups": self.groups.stored(), "txn_offsets": self.offsets.txn_view()}

    def group_ids(self) -> list[str]:
        return self.groups.ids()

    def get_group(self, group_id: str) -> GroupMetadata | None:
        """The live group object (for tests and diagnostics; do not mutate)."""
        return self.groups.get(group_id)

    # ------------------------------------------------------------------ load / unload

    def begin_load(self, now_ms: int) -> Output:
        """Start loading (the partition's leadership was gained): state cleared, requests get 14."""
        out = Result(self.partition, now_ms)
        if self.status != "unloaded":
            self._unload(out)
        self._reset()
        self.status = "loading"
        out.event("partition_loading")
        return self._run(out)

    def finish_load(self, now_ms: int, end_offset: int | None = None) -> Output:
        """Every record replayed (the log up to ``end_offset``): build the groups (Stable with members, else
        Empty) and own the partition; markers written meanwhile past what the load read apply now."""
        out = Result(self.partition, now_ms)
        self.status = "active"
        early, self._early_markers = self._early_markers, []
        for producer_id, commit, offset in early:
            if end_offset is None or offset >= end_offset:
                self._complete_txn(out, producer_id, commit, offset)
        for group in self.groups.load(now_ms, self.offsets.group_ids()):
            out.event("group_loaded", group=group.group_id, state=group.state, generation=group.generation,
                      protocol_type=group.protocol_type, protocol=group.protocol_name, leader=group.leader_id,
                      members=list(group.members), offsets=self.offsets.count(group.group_id))
            self.membership.on_loaded(out, group)
        self._arm_expiry(now_ms + self.config.offsets_retention_check_interval_ms)
        out.event("partition_loaded", groups=len(self.groups), offsets=self.offsets.count())
        return self._run(out)

    def unload(self, now_ms: int) -> Output:
        """Leadership lost: parked joins/syncs get NOT_COORDINATOR, groups die, state is dropped."""
        out = Result(self.partition, now_ms)
        if self.status != "unloaded":
            self._unload(out)
        return self._run(out)

    def _unload(self, out: Result) -> None:
        groups, offsets = len(self.groups), self.offsets.count()
        self.membership.unload(out)
        orphaned = 0
        for append_id, entry in self._appends.items():
            if entry.state == "pending":      # answered NOT_COORDINATOR when its completion arrives
                self._orphans[append_id] = entry.write.on_orphan
                orphaned += 1
            elif entry.state == "ok" and entry.write.on_done is not None and entry.write.on_orphan is not None:
                entry.write.on_orphan(out)    # completed, but never replayed (an earlier append was pending)
        self._reset()
        self.status = "unloaded"
        out.event("partition_unloaded", groups=groups, offsets=offsets, orphaned_appends=orphaned)

    # ------------------------------------------------------------------ timers

    def next_deadline_ms(self) -> int | None:
        """The earliest timer (may be <= now: call on_tick at once); None when nothing is scheduled."""
        if self.status != "active":
            return None
        return self.timers.next_deadline_ms()

    def on_tick(self, now_ms: int) -> Output:
        """Fire every due timer, earliest first.  Timers armed during this call for <= now wait for the next call."""
        out = Result(self.partition, now_ms)
        appends: list[AppendCmd] = []
        if self.status == "active":
            # firing one may cancel or replace others (fire() skips them); the offsets expiry task runs after
            # the membership timers due with it
            due = sorted(self.timers.due(now_ms), key=lambda t: t.key == EXPIRY_KEY)
            for timer in due:
                if self.timers.fire(timer, out):
                    self._flush(out, appends)
        return Output(out.responses, appends, out.events)


# states re-exported for the shell and tests
STATES = (EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, DEAD)
