"""Kafka 2.8's group coordinator for one __consumer_offsets partition, as a sans-IO core.

The shell owns the network, the log and the clock.  It hands the core requests
(with an opaque ``handle``), append completions and ticks, each with
``now_ms``, and gets back an :class:`Output`: responses to send (possibly for
earlier handles: a JoinGroup is parked until the rebalance completes), records
to append, and events to log.  Randomness comes only from the injected
``new_member_suffix`` (a UUID string in production); a suffix that gives an id
the group already has is drawn again (a seeded source may repeat after a
failover).

Durable state is what the records define — the offsets cache and each group's
last stored GroupMetadataValue — and it changes only in :meth:`replay`, which
the write path calls once an append succeeds and the failover load calls for
every record of the log.  Successful appends are replayed in the order they
were emitted (the shell appends them to the log in that order), so the cache
always equals the replay of the log's committed records.  acks=0 appends (the
expiry/deletion tombstones, which Kafka removes from its cache at once) count
as done when emitted; their completions are ignored.  Transient rebalance
state (members, parked requests, timers, a generation not yet stored) lives in
:class:`~coordinator.group.GroupMetadata` objects, as in Kafka.

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
* Timers: :meth:`on_tick` fires due timers earliest first; one armed during
  the call for a time <= now waits for the next call, and DelayedJoin and
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
from coordinator.group import (
    COMPLETING_REBALANCE, DEAD, EMPTY, NO_HANDLE, PREPARING_REBALANCE, STABLE, GroupMetadata,
)
from coordinator.membership import NEW_MEMBER_JOIN_TIMEOUT_MS, MembershipMixin
from coordinator.offsets import OffsetsMixin
from kafkacommon import errors
from kafkacommon.event import Event

__all__ = ["GroupConfig", "AppendCmd", "Output", "PartitionCoordinator", "NEW_MEMBER_JOIN_TIMEOUT_MS"]

@dataclass
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600000
    commit_timeout_ms: int = 5000      # offsets.commit.timeout.ms; goes into AppendCmd.timeout_ms
    commit_required_acks: int = -1     # offsets.commit.required.acks: -1 waits for the HW, 1 for our own log
    # Chaos only (a planted bug, see chaos/runner.py PLANTABLE_BUGS): False accepts a commit from any
    # member and generation.  Always True in a real broker.
    check_commit_generation: bool = True


@dataclass
class AppendCmd:
    append_id: int                     # unique per coordinator
    records: list[tuple[bytes, bytes | None]]   # (key bytes, value bytes or None = tombstone)
    acks: int                          # -1 (all) for commits/group records, 0 for expiry tombstones
    timeout_ms: int


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
    on_done: Callable[[int], None] | None     # called with the replication error (0 = success)
    on_orphan: Callable[[], None] | None      # answers its requests NOT_COORDINATOR after an unload
    decoded: list = field(default_factory=list)  # the records as emitted: what their bytes decode to
    state: str = "pending"                    # pending | ok | failed


class PartitionCoordinator(MembershipMixin, OffsetsMixin):
    """The group coordinator of one __consumer_offsets partition (see the module docstring)."""

    def __init__(self, partition: int, config: GroupConfig, new_member_suffix: Callable[[], str]) -> None:
        self.partition = partition
        self.config = config
        self._suffix = new_member_suffix
        self.status = "unloaded"
        self._next_append_id = 1
        self._seq = 0
        self._orphans: dict[int, Callable[[], None] | None] = {}
        self._out: Output | None = None
        self._now = 0
        self._reason: str | None = None
        self._draining = False
        self.last_replayed_offset: int | None = None
        self._reset()

    def _reset(self) -> None:
        self._groups: dict[str, GroupMetadata] = {}
        self._offsets: dict[str, dict[tuple[str, int], rec.OffsetValue]] = {}   # durable
        self._stored_groups: dict[str, rec.GroupValue] = {}                     # durable
        self._pending_commits: dict[tuple[str, str, int], set[int]] = {}
        self._tombstoned: dict[tuple[str, str, int], int] = {}   # key -> the queued acks=0 append deleting it
        self._appends: dict[int, _Append] = {}                   # emitted, not yet replayed (in order)
        self._next_expiry_ms: int | None = None

    # ------------------------------------------------------------------ plumbing

    def _start(self, now_ms: int) -> Output:
        self._out = Output()
        self._now = now_ms
        self._reason = None
        return self._out

    def _done(self) -> Output:
        out, self._out = self._out, None
        assert out is not None
        return out

    def _respond(self, handle: object, response: object) -> None:
        assert self._out is not None
        self._out.responses.append((handle, response))

    def _event(self, name: str, **fields: object) -> None:
        assert self._out is not None
        self._out.events.append(Event(name, {"partition": self.partition, **fields}))

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _on_transition(self, group: GroupMetadata, previous: str, state: str) -> None:
        self._event("group_state_changed", group=group.group_id, **{"from": previous, "to": state},
                    generation=group.generation, reason=self._reason)

    def _new_group(self, group_id: str, reason: str) -> GroupMetadata:
        group = GroupMetadata(group_id, self._now, EMPTY, self._on_transition)
        self._groups[group_id] = group
        self._event("group_created", group=group_id, reason=reason)
        return group

    def _status_error(self, group_id: str | None, allow_empty: bool) -> int | None:
        """validateGroupStatus: INVALID_GROUP_ID, then loading, then ownership."""
        if group_id is None or (group_id == "" and not allow_empty):
            return errors.INVALID_GROUP_ID
        if self.status == "loading":
            return errors.COORDINATOR_LOAD_IN_PROGRESS
        if self.status != "active":
            return errors.NOT_COORDINATOR
        return None

    # ------------------------------------------------------------------ appends

    def _append(self, records: list[tuple[rec.Key, rec.Value | None]], acks: int,
                on_done: Callable[[int], None] | None = None,
                on_orphan: Callable[[], None] | None = None) -> int:
        append_id = self._next_append_id
        self._next_append_id += 1
        encoded = rec.encode_records(records)
        cmd = AppendCmd(append_id, encoded, acks, self.config.commit_timeout_ms)
        assert self._out is not None
        self._out.appends.append(cmd)
        entry = _Append(cmd, on_done, on_orphan, list(records))
        self._appends[append_id] = entry
        if acks == 0:
            entry.state = "ok"   # fire and forget, like partition.appendRecordsToLeader(requiredAcks = 0)
            for k, v in records:
                if v is None and isinstance(k, rec.OffsetKey):
                    self._tombstoned[(k.group, k.topic, k.partition)] = append_id
            self._drain()
        return append_id

    def _drain(self) -> None:
        """Replay the leading resolved appends, in emission order, and run their success callbacks."""
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
                    for key, value in entry.decoded:
                        self._apply_decoded(key, value, append_id)
                    if entry.on_done is not None:
                        entry.on_done(errors.NONE)
        finally:
            self._draining = False

    def on_append_done(self, append_id: int, error_code: int, now_ms: int) -> Output:
        """The replication layer's answer for an append (0 = the HW covers its records)."""
        self._start(now_ms)
        if append_id in self._orphans:
            on_orphan = self._orphans.pop(append_id)
            if on_orphan is not None:
                on_orphan()
            return self._done()
        entry = self._appends.get(append_id)
        if entry is None or entry.state != "pending":
            if entry is not None and error_code != errors.NONE:
                self._event("append_failed", append_id=append_id, error=error_code, acks=entry.cmd.acks)
            return self._done()
        if error_code == errors.NONE:
            entry.state = "ok"
        else:
            entry.state = "failed"
            self._event("append_failed", append_id=append_id, error=error_code, acks=entry.cmd.acks)
            if entry.on_done is not None:
                entry.on_done(error_code)
        self._drain()
        return self._done()

    # ------------------------------------------------------------------ replay & durable view

    def replay(self, key: bytes, value: bytes | None, offset: int | None = None) -> None:
        """Apply one __consumer_offsets record to the durable state (the last record per key wins).

        Used for every record of the log during a load, and by the write path
        for its own records once they are committed.  Raises RecordFormatError
        for bytes that are not a valid record.
        """
        self._apply(key, value, None)   # the write path runs the same code (with its append id)
        if offset is not None:
            self.last_replayed_offset = offset

    def _apply(self, key: bytes, value: bytes | None, append_id: int | None) -> None:
        k, v = rec.decode_record(key, value)
        self._apply_decoded(k, v, append_id)

    def _apply_decoded(self, k: rec.Key, v: rec.Value | None, append_id: int | None) -> None:
        if isinstance(k, rec.OffsetKey):
            tp = (k.topic, k.partition)
            if v is None:
                group_offsets = self._offsets.get(k.group)
                if group_offsets is not None:
                    group_offsets.pop(tp, None)
                    if not group_offsets:
                        del self._offsets[k.group]
                gkey = (k.group, k.topic, k.partition)
                if append_id is not None and self._tombstoned.get(gkey) == append_id:
                    del self._tombstoned[gkey]
            else:
                assert isinstance(v, rec.OffsetValue)
                self._offsets.setdefault(k.group, {})[tp] = v
        else:
            if v is None:
                self._stored_groups.pop(k.group, None)
            else:
                assert isinstance(v, rec.GroupValue)
                self._stored_groups[k.group] = v

    def durable_view(self) -> dict:
        """Everything the records define, canonically ordered: {"offsets": {(group, topic, partition):
        OffsetValue}, "groups": {group: GroupValue}}."""
        offsets = {(g, t, p): v for g, tps in self._offsets.items() for (t, p), v in tps.items()}
        return {"offsets": dict(sorted(offsets.items())), "groups": dict(sorted(self._stored_groups.items()))}

    def group_ids(self) -> list[str]:
        return sorted(self._groups)

    def get_group(self, group_id: str) -> GroupMetadata | None:
        """The live group object (for tests and diagnostics; do not mutate)."""
        return self._groups.get(group_id)

    # ------------------------------------------------------------------ load / unload

    def begin_load(self, now_ms: int) -> Output:
        """Start loading (the partition's leadership was gained): state cleared, requests get 14."""
        self._start(now_ms)
        if self.status != "unloaded":
            self._unload()
        self._reset()
        self.status = "loading"
        self._event("partition_loading")
        return self._done()

    def finish_load(self, now_ms: int) -> Output:
        """Every record replayed: build the groups (Stable with members, else Empty) and own the partition."""
        self._start(now_ms)
        self.status = "active"
        loaded = []
        for group_id in sorted(self._stored_groups):
            group = GroupMetadata.from_value(group_id, self._stored_groups[group_id], now_ms, self._on_transition)
            self._groups[group_id] = group
            loaded.append(group)
        for group_id in sorted(self._offsets):
            if group_id not in self._groups:
                group = GroupMetadata(group_id, now_ms, EMPTY, self._on_transition)
                self._groups[group_id] = group
                loaded.append(group)
        for group in loaded:
            self._event("group_loaded", group=group.group_id, state=group.state, generation=group.generation,
                        protocol_type=group.protocol_type, protocol=group.protocol_name, leader=group.leader_id,
                        members=list(group.members), offsets=len(self._offsets.get(group.group_id, {})))
            if group.size > self.config.max_size:
                self._reason = "freshly-loaded group is over capacity"
                self._prepare_rebalance(group)
                self._reason = None
            for member in group.members.values():
                self._schedule_heartbeat(member, member.session_timeout_ms)
        self._next_expiry_ms = now_ms + self.config.offsets_retention_check_interval_ms
        self._event("partition_loaded", groups=len(self._groups),
                    offsets=sum(len(v) for v in self._offsets.values()))
        return self._done()

    def unload(self, now_ms: int) -> Output:
        """Leadership lost: parked joins/syncs get NOT_COORDINATOR, groups die, state is dropped."""
        self._start(now_ms)
        if self.status != "unloaded":
            self._unload()
        return self._done()

    def _unload(self) -> None:
        groups, offsets = len(self._groups), sum(len(v) for v in self._offsets.values())
        for group in self._groups.values():
            previous = group.state
            if previous != DEAD:
                group.transition_to(DEAD, self._now)
            for member in group.members.values():
                if member.is_awaiting_join:
                    handle, member.join_handle = member.join_handle, NO_HANDLE
                    self._respond(handle, self._join_error(errors.NOT_COORDINATOR, member.member_id))
                if member.is_awaiting_sync:
                    handle, member.sync_handle = member.sync_handle, NO_HANDLE
                    self._respond(handle, self._sync_error(errors.NOT_COORDINATOR))
                member.heartbeat_deadline_ms = None
            group.join_timer = group.sync_timer = None
            group.pending_members.clear()
        orphaned = 0
        for append_id, entry in self._appends.items():
            if entry.state == "pending":      # answered NOT_COORDINATOR when its completion arrives
                self._orphans[append_id] = entry.on_orphan
                orphaned += 1
            elif entry.state == "ok" and entry.on_done is not None and entry.on_orphan is not None:
                entry.on_orphan()             # completed, but never replayed (an earlier append was pending)
        self._reset()
        self.status = "unloaded"
        self._event("partition_unloaded", groups=groups, offsets=offsets, orphaned_appends=orphaned)

    # ------------------------------------------------------------------ timers

    def _schedule_heartbeat(self, member, timeout_ms: int) -> None:
        """completeAndScheduleNextExpiration: the previous expectation is met, a new one starts."""
        member.heartbeat_satisfied = False
        member.heartbeat_deadline_ms = self._now + max(timeout_ms, 0)
        member.heartbeat_seq = self._next_seq()

    def _timers(self):
        """Every scheduled timer as (deadline, seq, kind, group, member id or None)."""
        for group in self._groups.values():
            if group.join_timer is not None:
                yield group.join_timer.deadline_ms, group.join_timer.seq, "join", group, None
            if group.sync_timer is not None:
                yield group.sync_timer.deadline_ms, group.sync_timer.seq, "sync", group, None
            for member_id, (deadline, seq) in group.pending_members.items():
                yield deadline, seq, "pending", group, member_id
            for member in group.members.values():
                if member.heartbeat_deadline_ms is not None:
                    yield member.heartbeat_deadline_ms, member.heartbeat_seq, "heartbeat", group, member.member_id

    def _still_armed(self, seq: int, kind: str, group: GroupMetadata, member_id: str | None) -> bool:
        """Whether the timer ``seq`` found by a scan is still the one scheduled (not fired, cancelled or
        replaced since)."""
        if self._groups.get(group.group_id) is not group:
            return False
        if kind == "join":
            return group.join_timer is not None and group.join_timer.seq == seq
        if kind == "sync":
            return group.sync_timer is not None and group.sync_timer.seq == seq
        if kind == "pending":
            entry = group.pending_members.get(member_id)
            return entry is not None and entry[1] == seq
        member = group.members.get(member_id)
        return member is not None and member.heartbeat_deadline_ms is not None and member.heartbeat_seq == seq

    def next_deadline_ms(self) -> int | None:
        """The earliest timer (may be <= now: call on_tick at once); None when nothing is scheduled."""
        if self.status != "active":
            return None
        deadlines = [t[0] for t in self._timers()]
        if self._next_expiry_ms is not None:
            deadlines.append(self._next_expiry_ms)
        return min(deadlines, default=None)

    def on_tick(self, now_ms: int) -> Output:
        """Fire every due timer, earliest first.  Timers armed during this call for <= now wait for the next call."""
        self._start(now_ms)
        if self.status != "active":
            return self._done()
        # the timers due now, earliest first, from one scan: firing one may cancel others (checked before
        # each fires) or arm new ones (they have later sequence numbers, and wait for the next call)
        due = sorted((t for t in self._timers() if t[0] <= now_ms), key=lambda t: (t[0], t[1]))
        for _, seq, kind, group, member_id in due:
            if not self._still_armed(seq, kind, group, member_id):
                continue
            self._reason = None
            if kind == "join":
                timer, group.join_timer = group.join_timer, None
                self._on_join_timer(group, timer)
            elif kind == "sync":
                timer, group.sync_timer = group.sync_timer, None
                self._on_expire_pending_sync(group, timer.generation)
            elif kind == "pending":
                del group.pending_members[member_id]
                self._on_expire_pending_member(group, member_id)
            else:
                member = group.members[member_id]
                member.heartbeat_deadline_ms = None
                self._on_expire_heartbeat(group, member)
        if self._next_expiry_ms is not None and self._next_expiry_ms <= now_ms:
            while self._next_expiry_ms <= now_ms:
                self._next_expiry_ms += max(self.config.offsets_retention_check_interval_ms, 1)
            self._cleanup_expired_offsets()
        return self._done()


# states re-exported for the shell and tests
STATES = (EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, DEAD)
