"""What the transaction coordinator core hands out and keeps per transactional id, sans-IO.

:class:`Output` (responses, appends, marker commands, events) and :class:`AppendCmd` are what the shell
carries out; :class:`TxnEntry` is one transactional id in the core's cache: its durable metadata and Kafka's
transient fields (transactions/core.py's docstring says which is which); :func:`map_append_error` and the
marker error sets are Kafka 2.8's (TransactionStateManager, TransactionMarkerRequestCompletionHandler).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from kafkacommon import errors
from kafkacommon.event import Event
from transactions import state as st
from transactions.messages import MarkerCmd

OFFSETS_TOPIC = "__consumer_offsets"
RETRIABLE_MARKER_ERRORS = frozenset({
    errors.UNKNOWN_TOPIC_OR_PARTITION, errors.NOT_LEADER_OR_FOLLOWER, errors.NOT_ENOUGH_REPLICAS,
    errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, errors.REQUEST_TIMED_OUT, errors.KAFKA_STORAGE_ERROR,
    errors.NETWORK_EXCEPTION, errors.COORDINATOR_LOAD_IN_PROGRESS})
ABANDON_MARKER_ERRORS = frozenset({errors.INVALID_PRODUCER_EPOCH, errors.TRANSACTION_COORDINATOR_FENCED})
SKIP_MARKER_ERRORS = frozenset({errors.UNSUPPORTED_FOR_MESSAGE_FORMAT, errors.UNSUPPORTED_VERSION})
PARTITION_GONE = -100   # the shell's word for a partition no longer in the metadata (deleted): skipped


def map_append_error(code: int) -> int:
    """appendTransactionToLog's mapping of an append error to the error the client gets."""
    if code in (errors.UNKNOWN_TOPIC_OR_PARTITION, errors.NOT_ENOUGH_REPLICAS,
                errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, errors.REQUEST_TIMED_OUT):
        return errors.COORDINATOR_NOT_AVAILABLE
    if code in (errors.NOT_LEADER_OR_FOLLOWER, errors.KAFKA_STORAGE_ERROR):
        return errors.NOT_COORDINATOR
    if code in (errors.MESSAGE_TOO_LARGE, errors.RECORD_LIST_TOO_LARGE):
        return errors.UNKNOWN_SERVER_ERROR
    return code


@dataclass
class AppendCmd:
    append_id: int
    records: list[tuple[bytes, bytes | None]]
    acks: int
    timeout_ms: int
    base_offset: int | None = None     # where the shell appended it (set by the shell, when it knows)


@dataclass
class Output:
    responses: list[tuple[object, object]] = field(default_factory=list)
    appends: list[AppendCmd] = field(default_factory=list)
    markers: list[MarkerCmd] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)

    def extend(self, other: "Output") -> "Output":
        self.responses.extend(other.responses)
        self.appends.extend(other.appends)
        self.markers.extend(other.markers)
        self.events.extend(other.events)
        return self

    def respond(self, handle: object, response: object) -> None:
        if handle is not None:
            self.responses.append((handle, response))


@dataclass(eq=False)
class TxnEntry:
    """One transactional id in the cache: its durable metadata and Kafka's transient fields."""
    transactional_id: str
    meta: st.TxnMetadata | None               # durable: the last record's value (None: not written yet)
    created_producer_id: int = -1             # an id created by InitProducerId before its first record
    pending: str | None = None                # the state being written (Kafka's pendingState)
    last_producer_id: int = -1
    last_producer_epoch: int = -1
    fence_epoch: int | None = None            # a fence's bumped epoch while written, or after it failed
    markers_left: set = field(default_factory=set)
    complete: st.TxnMetadata | None = None    # the CompleteCommit/Abort metadata, once the markers are written

    def current(self, now_ms: int) -> st.TxnMetadata:
        if self.meta is not None:
            return self.meta
        return st.TxnMetadata(self.transactional_id, self.created_producer_id, st.NO_PRODUCER_EPOCH, 0, st.EMPTY,
                              frozenset(), -1, now_ms)

    def epoch(self) -> int:
        """The epoch requests are checked against: a fence's bumped one once it was tried."""
        base = self.meta.producer_epoch if self.meta is not None else st.NO_PRODUCER_EPOCH
        return base if self.fence_epoch is None else max(base, self.fence_epoch)
