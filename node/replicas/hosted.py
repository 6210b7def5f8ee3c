"""The types the replica manager shares with its fetchers, its Fetch handler and its purgatory.

``Hosted`` is one partition replica on this broker, ``ConsumerRead`` a consumer's read of one, ``AckWaiter`` an acks=all
append waiting for the high watermark, and ``FetcherOwner`` what a follower's
fetcher uses of the replica manager that runs it.  They live here, not in
``node.replicas.replica_manager``, so the modules the replica manager is built from
need not import it back.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Protocol

from kafkacommon.topic_config import LogConfig

if TYPE_CHECKING:
    from node.events import EventLog
    from replication.partition import PartitionReplication
    from node.storage import PartitionLog

TP = tuple[str, int]


@dataclass(eq=False)
class AckWaiter:
    """An acks=all append waiting until the HW covers ``required`` (Kafka's DelayedProduce)."""

    tp: TP
    required: int
    leader_epoch: int
    deadline: float
    on_done: Callable[[int], None]
    # on_done does not block (it signals another thread, a produce request's, or the group coordinator's
    # tries its locks): the follower's Fetch that moves the HW may call it itself; otherwise (the
    # transaction coordinator's appends, which take their core's lock) the purgatory thread calls it
    inline: bool = False
    # set, under its partition's lock, once it has left ``Hosted.waiters`` with its outcome: the purgatory's
    # timer then drops it without taking that lock again
    settled: bool = False


class Appended(NamedTuple):
    """A client batch's append (:meth:`ReplicaManager.append_batch`)."""

    error: int
    base_offset: int
    last_offset: int
    pending: bool                # acks=all: the outcome comes through ``on_done``
    log_append_time: int = -1    # message.timestamp.type=LogAppendTime: the stamp the batch got


class ConsumerRead(NamedTuple):
    """One partition of a consumer's fetch as the leader answers it (the replica manager's ``consumer_read``)."""

    error: int
    high_watermark: int = -1
    log_start_offset: int = -1
    leader_epoch: int = -1
    records: Any = b""                                 # bytes, or node.storage.file_records.FileRecords
    diverging: tuple[int, int] | None = None           # (epoch, end offset): the consumer must truncate
    last_stable_offset: int = -1
    aborted: list | None = None                        # read_committed: the AbortedTxn entries it overlaps


@dataclass
class Hosted:
    """One partition replica on this broker."""

    log: PartitionLog
    repl: PartitionReplication
    cond: threading.Condition = field(default_factory=threading.Condition)  # guards both; wakes waiters
    fetching_from: tuple[int, int] | None = None  # (leader, leader epoch) this follower fetches from
    waiters: list[AckWaiter] = field(default_factory=list)  # acks=all appends waiting for the HW
    config: dict = field(default_factory=dict)  # the topic's config overrides (cleanup.policy, ...)
    log_config: LogConfig = field(default_factory=LogConfig)  # the overrides over the broker's defaults


class FetcherOwner(Protocol):
    """What ``node.replicas.fetcher.LeaderFetcher`` uses of its replica manager."""

    broker_id: int
    fetch_wait_ms: int
    fetch_max_bytes: int
    events: EventLog

    def endpoint_of(self, broker: int) -> str | None: ...

    def broker_epoch(self) -> int: ...

    def log_events(self, events: list[tuple[str, dict[str, Any]]]) -> None: ...
