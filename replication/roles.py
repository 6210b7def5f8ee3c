"""A replica's role changes, sans-IO: what a LeaderAndIsr (or UpdateMetadata) does to one hosted partition.

Kafka's ReplicaManager.becomeLeaderOrFollower per partition: the same leader and leader epoch is only a
newer ISR; else this broker becomes the leader (makeLeader: the new epoch enters the leader epoch cache at
the log end, the leader learns the live brokers, then the core's become_leader) or a follower (makeFollower:
the core's become_follower, then fetch from the new leader, if there is one).  The broker's replica manager
(node/replicas/replica_manager.py) and the simulator's (sim/replicas.py) call these and carry out the
returned :class:`RoleChange` with their own logs, fetchers and waiters; the follower's fetch answer goes
through :func:`follower_fetched`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from kafkacommon import errors
from kafkacommon.event import Event
from replication.partition import PartitionReplication
from replication.partition_types import LogView
from replication.truncation import follower_truncation

ISR = "isr"
LEADER = "leader"
FOLLOWER = "follower"


def leader_and_isr_action(repl: PartitionReplication | None, broker_id: int, leader: int, leader_epoch: int) -> str:
    """What one partition of a LeaderAndIsr does here: ISR (a newer ISR of the role it has), LEADER or FOLLOWER."""
    if repl is not None and repl.leader_epoch == leader_epoch and repl.leader_id == leader:
        return ISR
    return LEADER if leader == broker_id else FOLLOWER


def leader_and_isr_order(parts: Iterable[Any], repl_of: Callable[[Any], PartitionReplication | None],
                         broker_id: int) -> tuple[list[Any], list[Any], list[Any]]:
    """The order one LeaderAndIsr request's partitions (``PartitionInfo``) are taken up in, as three steps, in
    request order within each: (the replicas hosted here that now follow or only see their ISR change, then
    the new replicas that lead; the hosted replicas that now lead, which a shell may take up side by side; the
    new replicas that follow).  ``repl_of(p)``: the hosted replica's state, None when it is new.

    A hosted replica becoming a follower writes nothing, so the partitions it follows are fetched at once (a
    new leader's acks=all appends, a moved coordinator's first commit, wait on those fetches); each new
    leader writes and fsyncs its leader epoch checkpoint.  Kafka 2.8 runs makeLeaders before makeFollowers,
    one partition after the other (this order when every replica is new): a listed deviation."""
    first: list[Any] = []
    new_leaders: list[Any] = []
    together: list[Any] = []
    last: list[Any] = []
    for p in parts:
        repl = repl_of(p)
        leads = leader_and_isr_action(repl, broker_id, p.leader, p.leader_epoch) == LEADER
        if repl is not None:
            (together if leads else first).append(p)
        else:
            (new_leaders if leads else last).append(p)
    return first + new_leaders, together, last


def isr_update_is_newer(repl: PartitionReplication | None, leader_epoch: int, zk_version: int) -> bool:
    """UpdateMetadata's partition state: applied only as a newer ISR of the same leader epoch (after an AlterIsr)."""
    return repl is not None and repl.leader_epoch == leader_epoch and zk_version > repl.zk_version


def isr_update(repl: PartitionReplication | None, leader_epoch: int, zk_version: int, isr: Iterable[int],
               log: LogView | None, now_ms: int, newer_only: bool = False) -> list[Event] | None:
    """A partition state for the role this replica has already: a LeaderAndIsr's (:data:`ISR`), or, with
    ``newer_only``, UpdateMetadata's, applied only when :func:`isr_update_is_newer`.  -> the core's events (the
    shell logs them, then wakes what waits on the partition: the HW may have moved), or None when nothing was
    applied (the replica is not hosted, or the state is not newer)."""
    if repl is None or (newer_only and not isr_update_is_newer(repl, leader_epoch, zk_version)):
        return None
    return repl.apply_isr_update(list(isr), zk_version, leader_epoch, log=log, now_ms=now_ms)


@dataclass
class RoleChange:
    """What the shell carries out, in this order: ``epoch_start`` into the log's leader epoch cache, stop
    fetching (or fetch from ``fetch_from``), log ``events``, wake what waits on the partition, tell the
    role's listeners (the group coordinator), start fetching from ``fetch_from`` (the broker starts one
    :func:`leader_and_isr_order` step's new fetches together once the step is done, as Kafka's makeFollowers
    adds its fetchers once for all its partitions)."""
    is_leader: bool
    leader_epoch: int
    events: list[Event] = field(default_factory=list)
    epoch_start: tuple[int, int] | None = None   # (leader epoch, start offset) for the leader epoch cache
    fetch_from: tuple[int, int] | None = None    # (leader, leader epoch) a follower fetches from


def become_leader(repl: PartitionReplication, log: LogView, latest_cached_epoch: int, leader_epoch: int,
                  isr: Iterable[int], replicas: Iterable[int], zk_version: int, live: frozenset[int] | None,
                  now_ms: int) -> RoleChange:
    """Kafka's makeLeader.  ``latest_cached_epoch``: the newest epoch in the log's leader epoch cache."""
    change = RoleChange(True, leader_epoch)
    if leader_epoch > latest_cached_epoch:   # the new epoch starts at the log end, in the cache at once
        change.epoch_start = (leader_epoch, log.log_end_offset)
    if live is not None:
        repl.set_live_brokers(live)
    change.events = repl.become_leader(leader_epoch, list(isr), list(replicas), zk_version, log, now_ms)
    return change


def become_follower(repl: PartitionReplication, leader: int, leader_epoch: int, isr: Iterable[int],
                    replicas: Iterable[int], zk_version: int, shutting_down: bool = False) -> RoleChange:
    """Kafka's makeFollower: the core forgets the leader's state; fetch from the leader if there is one, unless
    this broker is shutting down (``shutting_down``: Kafka's ReplicaManager.makeFollowers skips "the
    adding-fetcher step of the become-follower state change ... since it is shutting down").  A broker that
    handed its leaderships over in its controlled shutdown and then fetched from the new leaders would count
    there as a caught-up replica: once it is gone, its log end would hold each new leader's HW (and every
    acks=all append, offset commits included) for ``replica.lag.time.max.ms``."""
    change = RoleChange(False, leader_epoch)
    change.events = repl.become_follower(leader, leader_epoch, list(isr), list(replicas), zk_version)
    change.fetch_from = (leader, leader_epoch) if leader >= 0 and not shutting_down else None
    if leader >= 0 and shutting_down:
        change.events.append(Event("follower_fetch_skipped", {"topic": repl.topic, "partition": repl.partition,
                                                              "leader": leader, "leader_epoch": leader_epoch,
                                                              "reason": "shutting_down"}))
    return change


# ---------------------------------------------------------------------- a follower's fetch answer

STALE = "stale"          # an answer to a fetch from another position: ignored (fetch again from where the log is)
RESET = "reset"          # behind the leader's log start: truncate fully and start at ``offset``
FAILED = "failed"        # an error: back off and fetch again
TRUNCATE = "truncate"    # a diverging epoch: truncate to ``offset``
APPEND = "append"        # append what came (maybe nothing: a long poll's empty answer)


@dataclass(frozen=True)
class FetchAnswer:
    """What a follower does with one partition's fetch answer; then it calls :func:`follower_moved`."""
    kind: str
    offset: int = -1
    complete: bool = True   # TRUNCATE: False when the follower's epoch was older (the exchange repeats)
    # for the log_truncated event only (not part of what the follower does): the reason of a RESET or of a
    # TRUNCATE after OFFSET_OUT_OF_RANGE, and a diverging epoch's (epoch, end offset) from the leader
    reason: str = field(default="", compare=False)
    diverging: tuple[int, int] | None = field(default=None, compare=False)

    def truncated_fields(self, records_dropped: int, leader: int, leader_epoch: int) -> dict:
        """The ``log_truncated`` event's fields once the shell cut its log as this answer says."""
        fields: dict = {"to_offset": self.offset, "records_dropped": records_dropped}
        if self.diverging is not None:
            fields.update(diverging_epoch=self.diverging[0], diverging_end_offset=self.diverging[1])
        if self.kind == TRUNCATE:
            fields["complete"] = self.complete
        if self.reason:
            fields["reason"] = self.reason
        fields.update(leader=leader, leader_epoch=leader_epoch)
        return fields


def follower_fetch_answer(error: int, diverging: tuple[int, int] | None, leader_log_start: int | None,
                          log: LogView, repl: PartitionReplication,
                          leader_log_end: int | None = None, *, fetch_offset: int | None = None) -> FetchAnswer:
    """Kafka 2.8's AbstractFetcherThread on one partition's answer.  An answer to a fetch whose
    ``fetch_offset`` is no longer where this follower's log ends is STALE and ignored, errors included
    ("a partition is removed and re-added or truncated when there is a pending fetch request": Kafka
    processes an answer only if its fetch offset is the partition's current one).  OFFSET_OUT_OF_RANGE
    (handleOutOfRangeError): a follower ahead of the leader's log end truncates to it; one behind the
    leader's log start (retention deleted what it lacks) starts over there.  Another error backs off; a
    diverging epoch ``(epoch, end offset)`` truncates where :func:`follower_truncation` says; else the
    records are appended.  (Kafka's follower asks the leader for its log end and start with ListOffsets;
    kafkasim's fetch answer carries both.)"""
    if fetch_offset is not None and fetch_offset != log.log_end_offset:
        return FetchAnswer(STALE)
    if error == errors.OFFSET_OUT_OF_RANGE:
        if leader_log_end is not None and 0 <= leader_log_end < log.log_end_offset:
            return FetchAnswer(TRUNCATE, leader_log_end, True, reason="above_leader_log_end")
        if leader_log_start is not None and leader_log_start > log.log_end_offset:
            return FetchAnswer(RESET, leader_log_start, reason="below_leader_log_start")
    if error != errors.NONE:
        return FetchAnswer(FAILED)
    if diverging is not None:
        offset, complete = follower_truncation(diverging[0], diverging[1], log, repl.high_watermark)
        return FetchAnswer(TRUNCATE, offset, complete, diverging=diverging)
    return FetchAnswer(APPEND)


def follower_moved(answer: FetchAnswer, repl: PartitionReplication, log: LogView, leader_hw: int,
                   leader_log_start: int | None = None) -> tuple[list[Event], int | None]:
    """After the shell carried out ``answer`` on its log: the core's events (the follower's HW), and the
    log start offset the follower takes (the leader's, never past its own HW; None: leave it)."""
    if answer.kind == RESET:
        return repl.on_fetch_response(answer.offset, log), None
    if answer.kind == TRUNCATE:
        return repl.on_truncate(log.log_end_offset), None
    if answer.kind == APPEND:
        events = repl.on_fetch_response(leader_hw, log)
        return events, None if leader_log_start is None else min(leader_log_start, repl.high_watermark)
    return [], None
