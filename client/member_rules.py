"""The group member's protocol rules, sans-IO: what a member does with each answer it gets.

``client/group.py`` (the threaded, gRPC member) and the simulator's members
(sim/clients.py) both call these, so the rules exist once:

* **Errors.** NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
  COORDINATOR_LOAD_IN_PROGRESS: find the coordinator again and retry.
  REBALANCE_IN_PROGRESS: rejoin.  ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID: reset
  the generation, member id included (Kafka 2.8's ``Generation.NO_GENERATION``),
  and rejoin.  Anything else is fatal.
* **Before a join** (Kafka's ``onJoinPrepare``): a member whose generation was
  reset has lost its partitions (it rejoins owning none); an eager member
  revokes all of its partitions; a cooperative one keeps them, as the owned
  partitions of its subscription.
* **Heartbeats** change the state only when the generation they were sent in
  is still the member's: a coordinator error keeps the generation (the
  loaded group keeps it too).
* **The leader's assignment**: the members' subscriptions decoded, the chosen
  assignor run over the partition counts, one encoded assignment per member.
* **A sync's result**: the new generation and assignment, what to revoke and
  what was added; a cooperative member that gave something up rejoins once.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from client.assignors import get_assignor, partitions_to_revoke
from client.protocol import Assignment, Subscription
from kafkacommon import errors

TP = tuple[str, int]

COORDINATOR_ERRORS = frozenset({errors.NOT_COORDINATOR, errors.COORDINATOR_NOT_AVAILABLE,
                                errors.COORDINATOR_LOAD_IN_PROGRESS})
RESET_ERRORS = frozenset({errors.ILLEGAL_GENERATION, errors.UNKNOWN_MEMBER_ID})
REDISCOVER, REJOIN, RESET, FATAL = "rediscover", "rejoin", "reset", "fatal"
LOST, REVOKED = "lost", "revoked"


@dataclass
class MemberState:
    member_id: str = ""
    generation: int = -1
    leader: str = ""
    protocol: str | None = None
    assignment: list[TP] = field(default_factory=list)


def reset_generation(state: MemberState) -> None:
    """Kafka 2.8's resetGenerationOnResponseError: no generation and no member id (the next JoinGroup
    asks for a new one); the assignment stays until the next join's :func:`join_prepare` loses it."""
    state.generation, state.member_id = -1, ""


def join_prepare(state: MemberState, eager: bool) -> tuple[str, list[TP]]:
    """What a member gives up before it (re)joins: (LOST, partitions) after a generation reset,
    (REVOKED, partitions) for an eager member, ("", []) otherwise.  The caller tells its listener
    and then drops them from ``state.assignment``."""
    if not state.assignment:
        return "", []
    if state.generation == -1 and not state.member_id:
        return LOST, sorted(state.assignment)
    if eager:
        return REVOKED, sorted(state.assignment)
    return "", []


def group_error(state: MemberState, code: int) -> str:
    """A JoinGroup/SyncGroup/OffsetCommit error: update ``state`` and say what to do (REJOIN, RESET or FATAL)."""
    if code in RESET_ERRORS:
        reset_generation(state)
        return RESET
    if code == errors.REBALANCE_IN_PROGRESS or code in COORDINATOR_ERRORS:
        return REJOIN
    return FATAL


def heartbeat_result(state: MemberState, code: int, sent_generation: int) -> bool:
    """A heartbeat's answer: True when the member must rejoin."""
    if code == errors.NONE or sent_generation != state.generation:
        return False
    if code in RESET_ERRORS or code == errors.REBALANCE_IN_PROGRESS:
        if code in RESET_ERRORS:
            reset_generation(state)
        return True
    return False


def commit_outcome(code: int) -> str:
    """The history type of a commit's answer: ok, info (REQUEST_TIMED_OUT: may have been written) or fail."""
    if code == errors.NONE:
        return "ok"
    return "info" if code == errors.REQUEST_TIMED_OUT else "fail"


def leader_assignment(protocol: str, members: Iterable[tuple[str, str | None, bytes]],
                      partition_counts: Mapping[str, int]) -> list[tuple[str, bytes]]:
    """The leader's SyncGroup assignments: ``members`` are (member id, group instance id, subscription bytes);
    ``partition_counts`` the partitions of each topic as the leader's metadata says (ProtocolError on a bad
    subscription)."""
    subs = {}
    for member_id, instance, metadata in members:
        s = Subscription.decode(metadata)
        s.group_instance_id = instance or None
        subs[member_id] = s
    counts = {t: n for t, n in partition_counts.items() if n}
    plan = get_assignor(protocol).assign(counts, subs)
    return [(mid, Assignment(sorted(plan.get(mid, []))).encode()) for mid in subs]


def assignment_of(data: bytes) -> list[TP]:
    """A SyncGroup's assignment bytes as sorted partitions (ProtocolError when malformed)."""
    return sorted(tuple(tp) for tp in Assignment.decode(data).partitions) if data else []


def sync_result(state: MemberState, generation: int, member_id: str, leader: str, protocol: str | None,
                new: list[TP], eager: bool) -> tuple[list[TP], list[TP], bool]:
    """A successful sync: the state takes the generation and assignment; returns (revoked, added, rejoin)."""
    state.generation, state.member_id = generation, member_id
    state.leader, state.protocol = leader, protocol
    revoked = partitions_to_revoke(state.assignment, new)
    added = sorted(set(new) - set(state.assignment))
    state.assignment = list(new)
    return revoked, added, bool(revoked) and not eager
