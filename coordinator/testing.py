"""A fake shell for driving a PartitionCoordinator in tests: fake clock, in-memory log.

``Driver`` plays the I/O shell: it hands requests to the core with fresh
handles, keeps every response by handle, keeps the events, and applies the
core's appends.  By default an acks=-1 append completes at once with error 0
(or the next code queued in ``fail_next``); with ``auto_complete=False`` they
wait in ``pending`` until :meth:`complete` resolves them.  acks=0 appends are
always written.  ``log()`` is what the partition's log holds: the records of
every successful append, in the order the core emitted them.  Appends get log
offsets in emission order (``AppendCmd.base_offset``, as the shell sets them);
:meth:`Driver.marker` writes a transaction marker to the log and tells the
core, as the broker's WriteTxnMarkers does.  ``entries()`` is the log with each
record's producer (None: not transactional) and the markers.
"""
from __future__ import annotations

import itertools
from typing import Callable, Iterable

from coordinator.core import AppendCmd, GroupConfig, Output, PartitionCoordinator
from coordinator.group import DEAD, STABLE
from coordinator.messages import (
    CommitOffset, DeleteGroupsRequest, DescribeGroupsRequest, HeartbeatRequest, JoinGroupRequest,
    LeaveGroupRequest, ListGroupsRequest, OffsetCommitRequest, OffsetFetchRequest, SyncGroupRequest,
    TxnOffsetCommitRequest,
)
from kafkacommon.event import Event

CONSUMER = "consumer"


class Driver:
    def __init__(self, config: GroupConfig | None = None, partition: int = 0, auto_complete: bool = True,
                 now_ms: int = 0, load: bool = True) -> None:
        self._ids = itertools.count(1)
        self.core = PartitionCoordinator(partition, config or GroupConfig(), self._suffix)
        self.now = now_ms
        self.auto_complete = auto_complete
        self.fail_next: list[int] = []
        self.emitted: list[AppendCmd] = []
        self.outcome: dict[int, int] = {}        # append id -> error code, once resolved
        self.pending: dict[int, AppendCmd] = {}
        self.base_log: list[tuple[bytes, bytes | None]] = []   # records loaded from a previous leader
        self.base_entries: list[tuple] = []                    # the same, with producers and markers
        self.markers: dict[int, tuple[int, bool]] = {}         # log offset -> (producer id, commit)
        self.next_offset = 0
        self.responses: dict[int, list[object]] = {}
        self.events: list[Event] = []   # as the core returned them
        self._handles = itertools.count(1)
        if load:
            self.apply(self.core.begin_load(self.now))
            self.apply(self.core.finish_load(self.now))

    def _suffix(self) -> str:
        return f"uuid{next(self._ids)}"

    # ------------------------------------------------------------------ plumbing

    def apply(self, out: Output) -> Output:
        for handle, response in out.responses:
            self.responses.setdefault(handle, []).append(response)
        self.events.extend(out.events)
        for cmd in out.appends:
            self.emitted.append(cmd)
            cmd.base_offset = self.next_offset
            self.next_offset += len(cmd.records)
            if cmd.acks == 0:
                self.outcome[cmd.append_id] = 0
                self.apply(self.core.on_append_done(cmd.append_id, 0, self.now))
            elif self.auto_complete:
                code = self.fail_next.pop(0) if self.fail_next else 0
                self.outcome[cmd.append_id] = code
                self.apply(self.core.on_append_done(cmd.append_id, code, self.now))
            else:
                self.pending[cmd.append_id] = cmd
        return out

    def complete(self, append_id: int | None = None, code: int = 0) -> None:
        """Resolve one pending append (the oldest by default)."""
        if append_id is None:
            append_id = min(self.pending)
        del self.pending[append_id]
        self.outcome[append_id] = code
        self.apply(self.core.on_append_done(append_id, code, self.now))

    def complete_all(self, code: int = 0) -> None:
        while self.pending:
            self.complete(None, code)

    def marker(self, producer_id: int, commit: bool) -> None:
        """A transaction marker for ``producer_id`` written to the partition (WriteTxnMarkers)."""
        offset = self.next_offset
        self.next_offset += 1
        self.markers[offset] = (producer_id, commit)
        self.apply(self.core.complete_txn(producer_id, commit, offset, self.now))

    def entries(self) -> list[tuple]:
        """The log in offset order: ("record", offset, key, value, producer id or None) for every record of a
        successful append, ("marker", offset, producer id, commit) for every marker."""
        out = list(self.base_entries)
        for cmd in self.emitted:
            if self.outcome.get(cmd.append_id) == 0:
                pid = cmd.producer[0] if cmd.producer else None
                out += [("record", cmd.base_offset + i, k, v, pid) for i, (k, v) in enumerate(cmd.records)]
        out += [("marker", off, pid, commit) for off, (pid, commit) in self.markers.items()]
        return sorted(out, key=lambda e: e[1])

    def applied_entries(self) -> list[tuple]:
        """:meth:`entries` up to the first append still pending: what the core has replayed so far."""
        first = min((cmd.base_offset for cmd in self.emitted if self.outcome.get(cmd.append_id) is None),
                    default=None)
        return [e for e in self.entries() if first is None or e[1] < first]

    def log(self) -> list[tuple[bytes, bytes | None]]:
        return self.base_log + [r for cmd in self.emitted if self.outcome.get(cmd.append_id) == 0
                                for r in cmd.records]

    def applied_log(self) -> list[tuple[bytes, bytes | None]]:
        """The log up to the first append still pending: what the core has replayed so far."""
        records = list(self.base_log)
        for cmd in self.emitted:
            code = self.outcome.get(cmd.append_id)
            if code is None:
                break
            if code == 0:
                records.extend(cmd.records)
        return records

    def advance(self, ms: int) -> None:
        """Move the clock, firing every timer on the way at its own deadline."""
        target = self.now + ms
        while True:
            deadline = self.core.next_deadline_ms()
            if deadline is None or deadline > target:
                break
            self.now = max(self.now, deadline)
            self.apply(self.core.on_tick(self.now))
        self.now = target
        self.apply(self.core.on_tick(self.now))

    def call(self, handler: Callable[[PartitionCoordinator, object, object, int], Output], request: object) -> int:
        """``handler`` (an API of the core: ``PartitionCoordinator.join_group``, ...) takes ``request`` with a
        fresh handle; returns the handle."""
        handle = next(self._handles)
        self.apply(handler(self.core, handle, request, self.now))
        return handle

    def response(self, handle: int) -> object | None:
        """The single response for ``handle`` (None if not answered yet)."""
        got = self.responses.get(handle, [])
        assert len(got) <= 1, f"handle {handle} answered {len(got)} times: {got}"
        return got[0] if got else None

    def events_named(self, name: str) -> list[dict]:
        """The fields of every event ``name`` so far, in order."""
        return [e.fields for e in self.events if e.name == name]

    # ------------------------------------------------------------------ requests

    def join(self, group: str, member_id: str = "", *, protocols: Iterable[tuple[str, bytes]] = (("range", b"m"),),
             protocol_type: str = CONSUMER, session_ms: int = 10000, rebalance_ms: int = 30000,
             instance: str | None = None, client_id: str = "client", require_known: bool = False) -> int:
        return self.call(PartitionCoordinator.join_group, JoinGroupRequest(
            group, member_id, session_ms, rebalance_ms, protocol_type, list(protocols), instance, client_id,
            "/127.0.0.1", require_known))

    def sync(self, group: str, generation: int, member_id: str, assignments=(), *, instance: str | None = None,
             protocol_type: str | None = None, protocol_name: str | None = None) -> int:
        return self.call(PartitionCoordinator.sync_group, SyncGroupRequest(
            group, generation, member_id, instance, protocol_type, protocol_name, list(assignments)))

    def heartbeat(self, group: str, generation: int, member_id: str, instance: str | None = None) -> int:
        return self.call(PartitionCoordinator.heartbeat, HeartbeatRequest(group, generation, member_id, instance))

    def leave(self, group: str, *members: tuple[str, str | None]) -> int:
        return self.call(PartitionCoordinator.leave_group, LeaveGroupRequest(group, list(members)))

    def txn_commit(self, group: str, producer_id: int, offsets: dict[tuple[str, int], int], epoch: int = 0,
                   generation: int = -1, member_id: str = "", txn_id: str = "t") -> int:
        return self.call(PartitionCoordinator.txn_offset_commit, TxnOffsetCommitRequest(
            txn_id, group, producer_id, epoch, generation, member_id, None,
            [CommitOffset(t, p, o) for (t, p), o in offsets.items()]))

    def commit(self, group: str, offsets: dict[tuple[str, int], int] | list[CommitOffset], generation: int = -1,
               member_id: str = "", *, instance: str | None = None, retention_ms: int = -1) -> int:
        if isinstance(offsets, dict):
            offsets = [CommitOffset(t, p, o) for (t, p), o in offsets.items()]
        return self.call(PartitionCoordinator.offset_commit, OffsetCommitRequest(
            group, generation, member_id, instance, retention_ms, list(offsets)))

    def fetch(self, group: str, partitions: list[tuple[str, int]] | None = None, require_stable: bool = False) -> int:
        return self.call(PartitionCoordinator.offset_fetch, OffsetFetchRequest(group, partitions, require_stable))

    def describe(self, *groups: str) -> int:
        return self.call(PartitionCoordinator.describe_groups, DescribeGroupsRequest(list(groups)))

    def list(self, *states: str) -> int:
        return self.call(PartitionCoordinator.list_groups, ListGroupsRequest(list(states)))

    def delete(self, *groups: str) -> int:
        return self.call(PartitionCoordinator.delete_groups, DeleteGroupsRequest(list(groups)))

    # ------------------------------------------------------------------ a reloaded copy

    def reloaded(self, now_ms: int | None = None, config: GroupConfig | None = None,
                 log: list[tuple[bytes, bytes | None]] | None = None, entries: list[tuple] | None = None) -> "Driver":
        """A new coordinator (driver) that loads this one's log (or ``log``), as after a failover."""
        other = Driver(config or self.core.config, self.core.partition, self.auto_complete,
                       self.now if now_ms is None else now_ms, load=False)
        other.apply(other.core.begin_load(other.now))
        if log is None:
            other.base_entries = self.entries() if entries is None else list(entries)
            other.base_log = [(e[2], e[3]) for e in other.base_entries if e[0] == "record"]
            other.next_offset = self.next_offset
            for e in other.base_entries:
                if e[0] == "record":
                    other.core.replay(e[2], e[3], e[1], e[4])
                else:
                    other.core.replay_marker(e[2], e[3], e[1])
        else:
            other.base_log = list(log)
            other.base_entries = [("record", i, k, v, None) for i, (k, v) in enumerate(log)]
            other.next_offset = len(log)
            for offset, (key, value) in enumerate(other.base_log):
                other.core.replay(key, value, offset)
        other.apply(other.core.finish_load(other.now, other.next_offset))
        return other


def quick_config(**kw) -> GroupConfig:
    """A GroupConfig with no initial rebalance delay (unless given), for quick tests."""
    kw.setdefault("initial_rebalance_delay_ms", 0)
    return GroupConfig(**kw)


def form_group(d: Driver, group: str = "g", n: int = 2, *, instances=None, protocols=None, session_ms=10000,
               rebalance_ms=30000, assign=True):
    """Join n members (delay 0), complete the join; the leader syncs (if ``assign``). -> (generation, ids)."""
    handles = []
    for i in range(n):
        handles.append(d.join(group, client_id=f"c{i}", instance=instances[i] if instances else None,
                              protocols=protocols[i] if protocols else (("range", b"m"),),
                              session_ms=session_ms, rebalance_ms=rebalance_ms))
    d.advance(0)
    responses = [d.response(h) for h in handles]
    assert all(r is not None and r.error_code == 0 for r in responses), responses
    ids = [r.member_id for r in responses]
    gen = responses[0].generation_id
    if assign:
        leader = responses[0].leader
        syncs = [d.sync(group, gen, mid, [(m, m.encode()) for m in ids] if mid == leader else ())
                 for mid in ids]
        assert [d.response(s).error_code for s in syncs] == [0] * n
        assert d.core.get_group(group).state == STABLE
    return gen, ids


def group_state(d: Driver, group: str = "g") -> str:
    g = d.core.get_group(group)
    return DEAD if g is None else g.state
