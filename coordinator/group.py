"""A consumer group and its members: Kafka 2.8's GroupMetadata and MemberMetadata.

Plain objects, no I/O and no clock: every method that needs the time takes
``now_ms``.  The rebalance state here is transient — parked requests (the
handles the shell gave), pending members, a new generation not yet stored —
exactly as in Kafka; what a group looked like when it was last stored lives in
the coordinator's record-derived view (:mod:`coordinator.registry`), and its
timers are keyed in :mod:`coordinator.timers`, not here.

States and legal transitions (GroupMetadata.validPreviousStates)::

    Empty               <- PreparingRebalance
    PreparingRebalance  <- Stable, CompletingRebalance, Empty
    CompletingRebalance <- PreparingRebalance
    Stable              <- CompletingRebalance
    Dead                <- any state

An illegal transition raises :class:`IllegalStateTransition`: it is a bug in
the coordinator, never a client error.

Determinism where Kafka uses HashMap order: members are kept in insertion
order; a new leader (when the leader leaves, or fails to rejoin) is the oldest
member (resp. the oldest member that has rejoined); a protocol vote tie is won
by the lexicographically smallest protocol name.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable, Iterable

from coordinator.messages import JoinGroupResponse, JoinMember
from coordinator.records import GroupValue, MemberRecord
from kafkacommon import errors

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"
STATES = (EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, DEAD)

VALID_PREVIOUS_STATES: dict[str, frozenset[str]] = {
    EMPTY: frozenset({PREPARING_REBALANCE}),
    PREPARING_REBALANCE: frozenset({STABLE, COMPLETING_REBALANCE, EMPTY}),
    COMPLETING_REBALANCE: frozenset({PREPARING_REBALANCE}),
    STABLE: frozenset({COMPLETING_REBALANCE}),
    DEAD: frozenset(STATES),
}

CONSUMER_PROTOCOL_TYPE = "consumer"
MAX_ID_DRAWS = 1000   # new member ids drawn before a repeating id source is an error


class IllegalStateTransition(RuntimeError):
    """A transition Kafka's state machine forbids: a coordinator bug."""


class _NoHandle:
    def __repr__(self) -> str:
        return "NO_HANDLE"


NO_HANDLE = _NoHandle()   # "no parked request" (a handle may legitimately be None)


@dataclass
class DelayedJoin:
    """What a join timer keeps: an InitialDelayedJoin (``initial``, with Kafka's delay and remaining time)
    or a DelayedJoin."""
    initial: bool = False
    delay_ms: int = 0
    remaining_ms: int = 0


class MemberMetadata:
    def __init__(self, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
                 rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                 protocols: list[tuple[str, bytes]], assignment: bytes = b"") -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self._group: GroupMetadata | None = None   # the group that counts this member (GroupMetadata.add)
        self._protocols: list[tuple[str, bytes]] = [(n, bytes(m)) for n, m in protocols]
        self.assignment = bytes(assignment)
        self._join_handle: object = NO_HANDLE
        self.sync_handle: object = NO_HANDLE
        self.is_leaving = False
        self.is_new = False
        self.heartbeat_satisfied = False   # (the DelayedHeartbeat itself is a keyed timer: coordinator.timers)

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    # join_handle and protocols keep the group's counts (awaiting join, members per protocol) current,
    # so that a join costs O(1) rather than a scan of every member (Kafka's numMembersAwaitingJoin and
    # supportedProtocols)

    @property
    def join_handle(self) -> object:
        return self._join_handle

    @join_handle.setter
    def join_handle(self, handle: object) -> None:
        if self._group is not None:
            self._group._awaiting += (handle is not NO_HANDLE) - (self._join_handle is not NO_HANDLE)
        self._join_handle = handle

    @property
    def protocols(self) -> list[tuple[str, bytes]]:
        return self._protocols

    @protocols.setter
    def protocols(self, protocols: list[tuple[str, bytes]]) -> None:
        group = self._group
        if group is not None:
            group._count_protocols(self, -1)
        self._protocols = [(n, bytes(m)) for n, m in protocols]
        if group is not None:
            group._count_protocols(self, +1)

    def protocol_names(self) -> set[str | None]:
        return {name for name, _ in self._protocols}

    @property
    def is_awaiting_join(self) -> bool:
        return self._join_handle is not NO_HANDLE

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_handle is not NO_HANDLE

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise ValueError(f"member {self.member_id} does not support protocol {protocol!r}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return [(n, bytes(m)) for n, m in protocols] == self.protocols

    def has_satisfied_heartbeat(self) -> bool:
        if self.is_new:
            return self.heartbeat_satisfied   # new members may expire while awaiting join
        if self.is_awaiting_join or self.is_awaiting_sync:
            return True
        return self.heartbeat_satisfied

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def __repr__(self) -> str:
        return (f"MemberMetadata({self.member_id!r}, instance={self.group_instance_id!r}, "
                f"protocols={[n for n, _ in self.protocols]})")


class GroupMetadata:
    def __init__(self, group_id: str, now_ms: int, state: str = EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.state_timestamp_ms: int | None = now_ms
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation = 0
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}          # insertion order
        self.static_members: dict[str, str] = {}              # group.instance.id -> member id
        self.pending_members: dict[str, None] = {}             # MEMBER_ID_REQUIRED given (ordered set)
        self.pending_sync: dict[str, None] = {}                # members expected to SyncGroup (ordered set)
        self.new_member_added = False
        self.subscribed_topics: frozenset[str] | None = None
        self._awaiting = 0                                     # members with a parked JoinGroup
        self._protocol_counts: dict[str | None, int] = {}      # protocol name -> members supporting it

    # ------------------------------------------------------------ basics

    def is_(self, state: str) -> bool:
        return self.state == state

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    @property
    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    @property
    def num_awaiting_join(self) -> int:
        return self._awaiting

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[PREPARING_REBALANCE]

    def transition_to(self, state: str, now_ms: int) -> str:
        """Move to ``state`` (raises IllegalStateTransition unless it is legal); returns the previous state.
        The coordinator's :meth:`coordinator.registry.GroupRegistry.transition` calls it and logs the change."""
        if state not in VALID_PREVIOUS_STATES:
            raise IllegalStateTransition(f"group {self.group_id}: unknown state {state!r}")
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalStateTransition(
                f"group {self.group_id} should be in one of {sorted(VALID_PREVIOUS_STATES[state])} "
                f"before moving to {state}, but it is {self.state}")
        previous = self.state
        self.state = state
        self.state_timestamp_ms = now_ms
        return previous

    # ------------------------------------------------------------ membership

    def add(self, member: MemberMetadata, join_handle: object = NO_HANDLE) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self._attach(member)
        member.join_handle = join_handle

    def _attach(self, member: MemberMetadata) -> None:
        if member._group is not None:
            raise IllegalStateTransition(f"member {member.member_id} already belongs to a group")
        self.members[member.member_id] = member
        member._group = self
        self._awaiting += member.is_awaiting_join
        self._count_protocols(member, +1)

    def _count_protocols(self, member: MemberMetadata, sign: int) -> None:
        counts = self._protocol_counts
        for name in member.protocol_names():
            n = counts.get(name, 0) + sign
            if n:
                counts[name] = n
            else:
                del counts[name]

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._awaiting -= member.is_awaiting_join
            self._count_protocols(member, -1)
            member._group = None
        if member is not None and member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_sync.pop(member_id, None)
        return member

    def maybe_elect_new_joined_leader(self) -> bool:
        """False if there is no leader, or nobody has rejoined; else ensure the leader has rejoined."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    def replace_group_instance(self, old_member_id: str, new_member_id: str,
                               group_instance_id: str) -> tuple[MemberMetadata, object, object]:
        """Rename a static member; returns (member, its parked join handle, its parked sync handle).

        The parked handles (or NO_HANDLE) are detached: the caller fences them.
        """
        member = self.members.pop(old_member_id, None)
        if member is None:
            raise ValueError(f"cannot replace non-existing member id {old_member_id}")
        join_handle, sync_handle = member.join_handle, member.sync_handle
        member.join_handle = NO_HANDLE
        member.sync_handle = NO_HANDLE
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        if old_member_id in self.pending_sync:
            del self.pending_sync[old_member_id]
            self.pending_sync[new_member_id] = None
        self.static_members[group_instance_id] = new_member_id
        return member, join_handle, sync_handle

    def update_member(self, member: MemberMetadata, protocols: list[tuple[str, bytes]],
                      join_handle: object) -> object:
        """New protocols and parked join; returns the join handle it displaced (or NO_HANDLE)."""
        member.protocols = protocols
        displaced = member.join_handle
        member.join_handle = join_handle
        return displaced

    def accepts_joining(self, member_id: str, max_size: int) -> bool:
        """acceptJoiningMember: whether the group has room for ``member_id`` (group.max.size)."""
        if self.state in (EMPTY, DEAD):
            return True
        if self.is_(PREPARING_REBALANCE):
            return (self.has(member_id) and self.get(member_id).is_awaiting_join) or self.num_awaiting_join < max_size
        return self.has(member_id) or self.size < max_size

    def fresh_member_id(self, prefix: str, suffix: Callable[[], str]) -> str:
        """``prefix-suffix``, drawn again while the group already has that id (a member or a pending one).
        Kafka counts on a random UUID never repeating; the injected suffix source may (a seeded one started
        again after a failover), and an id in use would otherwise replace that member unseen."""
        for _ in range(MAX_ID_DRAWS):
            new_id = f"{prefix}-{suffix()}"
            if not self.has(new_id) and not self.is_pending_member(new_id):
                return new_id
        raise RuntimeError(f"group {self.group_id}: the member id source gave {MAX_ID_DRAWS} ids in use in a row")

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members and member_id not in self.members

    def has_static_member(self, group_instance_id: str | None) -> bool:
        return group_instance_id is not None and group_instance_id in self.static_members

    def is_static_member_fenced(self, member_id: str, group_instance_id: str | None) -> bool:
        return (self.has_static_member(group_instance_id)
                and self.static_members[group_instance_id] != member_id)  # type: ignore[index]

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def has_all_members_joined(self) -> bool:
        return self.size == self.num_awaiting_join and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # ------------------------------------------------------------ protocols

    def candidate_protocols(self) -> set[str]:
        n = self.size
        return {p for p, c in self._protocol_counts.items() if c == n and p is not None}

    def supports_protocols(self, protocol_type: str, protocols: Iterable[str]) -> bool:
        names = set(protocols)
        if self.is_(EMPTY):
            return bool(protocol_type) and bool(names)
        counts = self._protocol_counts
        return self.protocol_type == protocol_type and any(counts.get(p, 0) == self.size for p in names)

    def select_protocol(self) -> str:
        """Each member votes for its first candidate; most votes wins; ties: smallest name."""
        if not self.members:
            raise IllegalStateTransition(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = m.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return min(votes, key=lambda p: (-votes[p], p))

    # ------------------------------------------------------------ generations

    def init_next_generation(self) -> str:
        """initNextGeneration up to its state change: the generation, protocol and subscriptions move on.
        Returns the state the group moves to next (CompletingRebalance with members, else Empty); the caller
        makes that transition (so that it is logged)."""
        self.generation += 1
        self.protocol_name = self.select_protocol() if self.members else None
        self.subscribed_topics = self.compute_subscribed_topics()
        self.pending_sync.clear()
        return COMPLETING_REBALANCE if self.members else EMPTY

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """The topics of a consumer group's subscriptions; None when unknown (then nothing is expired by it)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            try:
                parsed = parse_subscription_topics(m.metadata(self.protocol_name))
            except ValueError:
                return None
            topics |= parsed
        return frozenset(topics)

    def join_response(self, member_id: str, with_members: bool, leader: str | None = None) -> JoinGroupResponse:
        """The JoinGroup answer of this generation for ``member_id`` (the members' metadata for the leader)."""
        members = []
        if with_members:
            members = [JoinMember(mid, inst, meta) for mid, inst, meta in self.current_member_metadata()]
        return JoinGroupResponse(errors.NONE, self.generation, self.protocol_type, self.protocol_name,
                                 (self.leader_id if leader is None else leader) or "", member_id, members)

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        if self.state in (DEAD, PREPARING_REBALANCE):
            raise IllegalStateTransition(f"cannot list member metadata of group {self.group_id} in {self.state}")
        return [(mid, m.group_instance_id, m.metadata(self.protocol_name)) for mid, m in self.members.items()]

    # ------------------------------------------------------------ records

    def to_value(self, assignment: dict[str, bytes]) -> GroupValue:
        """The GroupMetadataValue storeGroup writes for this group with ``assignment``."""
        members = []
        for mid, m in self.members.items():
            if self.protocol_name is None:
                raise IllegalStateTransition(f"group {self.group_id} has members but no protocol")
            if mid not in assignment:
                raise IllegalStateTransition(f"member {mid} of group {self.group_id} has no assignment")
            members.append(MemberRecord(mid, m.group_instance_id, m.client_id, m.client_host,
                                        m.rebalance_timeout_ms, m.session_timeout_ms,
                                        m.metadata(self.protocol_name), bytes(assignment[mid])))
        return GroupValue(self.protocol_type or "", self.generation, self.protocol_name, self.leader_id,
                          -1 if self.state_timestamp_ms is None else self.state_timestamp_ms, tuple(members))

    def snapshot_value(self) -> GroupValue:
        """The group as a GroupValue with the members' current assignments (for comparisons)."""
        return self.to_value({mid: m.assignment for mid, m in self.members.items()})

    @classmethod
    def from_value(cls, group_id: str, value: GroupValue, now_ms: int) -> "GroupMetadata":
        """GroupMetadata.loadGroup: Stable with members, else Empty."""
        group = cls(group_id, now_ms, STABLE if value.members else EMPTY)
        group.generation = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        group.state_timestamp_ms = None if value.current_state_timestamp == -1 else value.current_state_timestamp
        for r in value.members:
            member = MemberMetadata(r.member_id, r.group_instance_id, r.client_id, r.client_host,
                                    r.rebalance_timeout_ms, r.session_timeout_ms, value.protocol_type,
                                    [(value.protocol, r.subscription)], r.assignment)  # type: ignore[list-item]
            group._attach(member)
            if r.group_instance_id is not None:
                group.static_members[r.group_instance_id] = r.member_id
        group.subscribed_topics = group.compute_subscribed_topics()
        return group

    def __repr__(self) -> str:
        return (f"GroupMetadata({self.group_id!r}, {self.state}, generation={self.generation}, "
                f"protocol_type={self.protocol_type!r}, members={list(self.members)})")


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def parse_subscription_topics(data: bytes) -> set[str]:
    """The topics of a ConsumerProtocol Subscription (the v0 prefix every version starts with)."""
    pos = 0

    def take(n: int) -> bytes:
        nonlocal pos
        if n < 0 or pos + n > len(data):
            raise ValueError("truncated consumer subscription")
        chunk = data[pos:pos + n]
        pos += n
        return chunk

    version = _I16.unpack(take(2))[0]
    if version < 0:
        raise ValueError(f"invalid consumer protocol version {version}")
    count = _I32.unpack(take(4))[0]
    if count < 0:
        raise ValueError("null topic array")
    topics = set()
    for _ in range(count):
        n = _I16.unpack(take(2))[0]
        try:
            topics.add(take(n).decode("utf-8"))
        except UnicodeDecodeError:
            raise ValueError("topic name is not UTF-8") from None
    user_data_len = _I32.unpack(take(4))[0]   # nullable bytes: -1 = null
    if user_data_len >= 0:
        take(user_data_len)
    elif user_data_len != -1:
        raise ValueError("invalid user data length")
    return topics


def encode_subscription(topics: list[str], user_data: bytes | None = None, version: int = 0) -> bytes:
    """A ConsumerProtocol Subscription v0 (for tests and simulated clients)."""
    out = [_I16.pack(version), _I32.pack(len(topics))]
    for t in topics:
        raw = t.encode("utf-8")
        out += [_I16.pack(len(raw)), raw]
    out.append(_I32.pack(-1) if user_data is None else _I32.pack(len(user_data)) + user_data)
    return b"".join(out)
