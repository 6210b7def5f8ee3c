"""What one operation of a coordinator core produces: Kafka's CoordinatorResult, grown for the classic protocol.

A handler (:class:`coordinator.membership.MembershipManager`'s JoinGroup, the offsets manager's
OffsetCommit, ...) returns a :class:`Result`: responses to send, records to append (each a :class:`Write`)
and events to log.  It does not touch the durable state: its records change that only when
:class:`coordinator.core.PartitionCoordinator` replays them, once their append has succeeded.

Unlike Kafka's newer coordinators, a classic group parks requests: a JoinGroup is answered when its
rebalance completes, a SyncGroup when the leader's assignment is stored.  So a result may answer handles of
earlier requests, and a :class:`Write` carries what to do once its append is done (``on_done``: replayed,
or failed with an error) or orphaned by an unload (``on_orphan``).  Those continuations, and the keyed
timers' operations (:mod:`coordinator.timers`), are handed the result of the operation they run in, and add
to it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from coordinator.records import Key, Value
from kafkacommon import errors
from kafkacommon.event import Event


@dataclass(eq=False, slots=True)
class Write:
    """Records for the offsets partition's log, appended with ``acks`` (-1: the HW covers them; 0: fire and
    forget, done when emitted).  Compared by identity."""
    records: list[tuple[Key, Value | None]]
    acks: int
    on_done: Callable[["Result", int], None] | None = None   # (result, 0 = replayed | the append's error)
    on_orphan: Callable[["Result"], None] | None = None       # the partition was unloaded before it was done
    producer: tuple[int, int] | None = None                   # (id, epoch): a transactional batch (TxnOffsetCommit)


class Result:
    """The output of one operation on the coordinator of ``partition`` at ``now_ms``: ``responses`` ((handle,
    response) pairs), ``writes`` (not yet handed to the log) and ``events``."""
    __slots__ = ("partition", "now_ms", "responses", "writes", "events")

    def __init__(self, partition: int, now_ms: int) -> None:
        self.partition = partition
        self.now_ms = now_ms
        self.responses: list[tuple[object, object]] = []
        self.writes: list[Write] = []
        self.events: list[Event] = []

    def respond(self, handle: object, response: object) -> None:
        self.responses.append((handle, response))

    def write(self, records: list[tuple[Key, Value | None]], acks: int,
              on_done: Callable[["Result", int], None] | None = None,
              on_orphan: Callable[["Result"], None] | None = None,
              producer: tuple[int, int] | None = None) -> Write:
        w = Write(records, acks, on_done, on_orphan, producer)
        self.writes.append(w)
        return w

    def event(self, name: str, **fields: object) -> None:
        self.events.append(Event(name, {"partition": self.partition, **fields}))

    def extend(self, other: "Result") -> "Result":
        self.responses.extend(other.responses)
        self.writes.extend(other.writes)
        self.events.extend(other.events)
        return self


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
