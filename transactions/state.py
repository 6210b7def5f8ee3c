"""A transactional id's state: Kafka 2.8's TransactionMetadata states, their legal transitions, and the
metadata a __transaction_state record holds.

The states, with the byte each is stored as, and the states each may be entered from (Kafka's
``TransactionMetadata.validPreviousStates``, the one table every transition is checked against)::

    Empty 0              from Empty, CompleteCommit, CompleteAbort           (InitProducerId)
    Ongoing 1            from Ongoing, Empty, CompleteCommit, CompleteAbort  (AddPartitions/AddOffsets)
    PrepareCommit 2      from Ongoing                                        (EndTxn commit)
    PrepareAbort 3       from Ongoing, PrepareEpochFence                     (EndTxn abort, a fence, a timeout)
    CompleteCommit 4     from PrepareCommit                                  (every marker written)
    CompleteAbort 5      from PrepareAbort                                   (every marker written)
    Dead 6               from Empty, CompleteAbort, CompleteCommit           (transactional.id.expiration.ms)
    PrepareEpochFence 7  from Ongoing                                        (never stored: a fence's first step)

:class:`TxnMetadata` is what one record's value holds (Kafka's TxnTransitMetadata without the last producer
id and epoch, which the version-0 value does not store).  :func:`transition` builds the metadata a handler
is about to write, refusing an illegal transition with :class:`IllegalTransition` (Kafka's
IllegalStateException: a bug, never a client's error).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from transactions.records import TxnValue

EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT = "Empty", "Ongoing", "PrepareCommit", "PrepareAbort"
COMPLETE_COMMIT, COMPLETE_ABORT, DEAD, PREPARE_EPOCH_FENCE = "CompleteCommit", "CompleteAbort", "Dead", \
    "PrepareEpochFence"

STATES = (EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT, DEAD, PREPARE_EPOCH_FENCE)
BYTE = {s: i for i, s in enumerate(STATES)}
BY_BYTE = dict(enumerate(STATES))

VALID_PREVIOUS: dict[str, frozenset[str]] = {
    EMPTY: frozenset({EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT}),
    ONGOING: frozenset({ONGOING, EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT}),
    PREPARE_COMMIT: frozenset({ONGOING}),
    PREPARE_ABORT: frozenset({ONGOING, PREPARE_EPOCH_FENCE}),
    COMPLETE_COMMIT: frozenset({PREPARE_COMMIT}),
    COMPLETE_ABORT: frozenset({PREPARE_ABORT}),
    DEAD: frozenset({EMPTY, COMPLETE_ABORT, COMPLETE_COMMIT}),
    PREPARE_EPOCH_FENCE: frozenset({ONGOING}),
}

EXPIRATION_ALLOWED = frozenset({EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT})
IN_TRANSACTION = frozenset({ONGOING, PREPARE_COMMIT, PREPARE_ABORT})
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = (1 << 15) - 1


def is_valid_transition(old: str, new: str) -> bool:
    return old in VALID_PREVIOUS[new]


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka never hands out Short.MaxValue, so it can always fence once more."""
    return epoch >= MAX_EPOCH - 1


class IllegalTransition(Exception):
    """A transition the state table forbids (Kafka's IllegalStateException: a bug)."""


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    """One transactional id's stored metadata (what its last record's value holds)."""
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: str
    partitions: frozenset[tuple[str, int]]
    start_ms: int          # -1: no transaction started
    last_update_ms: int

    def to_value(self) -> TxnValue:
        return TxnValue(self.producer_id, self.producer_epoch, self.timeout_ms, BYTE[self.state],
                        self.partitions, self.last_update_ms, self.start_ms)

    @staticmethod
    def from_value(transactional_id: str, v: TxnValue) -> "TxnMetadata":
        state = BY_BYTE.get(v.status)
        if state is None:
            raise ValueError(f"unknown transaction state byte {v.status}")
        return TxnMetadata(transactional_id, v.producer_id, v.producer_epoch, v.timeout_ms, state,
                           frozenset() if state == EMPTY else v.partitions, v.start_ms, v.last_update_ms)


def transition(old: TxnMetadata, state: str, **changes) -> TxnMetadata:
    """``old`` moved to ``state`` with ``changes``; IllegalTransition when the table forbids it."""
    if not is_valid_transition(old.state, state):
        raise IllegalTransition(f"transactional id {old.transactional_id!r}: {old.state} -> {state} is not a legal "
                                f"transition")
    new = replace(old, state=state, **changes)
    if new.producer_id < 0 or new.producer_epoch < 0:
        raise IllegalTransition(f"transactional id {old.transactional_id!r}: producer {new.producer_id} epoch "
                                f"{new.producer_epoch} is not valid")
    return new
