"""The transaction coordinator's requests and responses, and its commands to the shell, as dataclasses.

Both doors (the Kafka listener, the simulator's clients) speak these; each request has
``error_response(code)``, the answer a door gives without a core (NOT_COORDINATOR, a load in progress).
"""
from __future__ import annotations

from dataclasses import dataclass, field

TP = tuple[str, int]


@dataclass(frozen=True)
class InitProducerIdRequest:
    transactional_id: str
    transaction_timeout_ms: int
    producer_id: int = -1          # KIP-360: the producer's current id and epoch, -1 when it has none
    producer_epoch: int = -1

    def error_response(self, code: int) -> "InitProducerIdResponse":
        return InitProducerIdResponse(code)


@dataclass(frozen=True)
class InitProducerIdResponse:
    error_code: int
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True)
class AddPartitionsToTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[TP, ...]

    def error_response(self, code: int) -> "AddPartitionsToTxnResponse":
        return AddPartitionsToTxnResponse(tuple((tp, code) for tp in self.partitions))


@dataclass(frozen=True)
class AddPartitionsToTxnResponse:
    results: tuple[tuple[TP, int], ...]      # (partition, error) for every partition asked

    @property
    def error_code(self) -> int:
        return next((code for _, code in self.results if code), 0)


@dataclass(frozen=True)
class AddOffsetsToTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str
    offsets_partition: int = -1    # the group's __consumer_offsets partition (the door computes it)

    def error_response(self, code: int) -> "TxnErrorResponse":
        return TxnErrorResponse(code)


@dataclass(frozen=True)
class EndTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool

    def error_response(self, code: int) -> "TxnErrorResponse":
        return TxnErrorResponse(code)


@dataclass(frozen=True)
class TxnErrorResponse:
    """AddOffsetsToTxn's and EndTxn's answer: one error code."""
    error_code: int


@dataclass(frozen=True)
class DescribeTransactionsRequest:
    """What the coordinator holds for some transactional ids (the web view and tests; Kafka 3.0's API)."""
    transactional_ids: tuple[str, ...]

    def error_response(self, code: int) -> "DescribeTransactionsResponse":
        return DescribeTransactionsResponse(tuple(DescribedTxn(t, code) for t in self.transactional_ids))


@dataclass(frozen=True)
class DescribedTxn:
    transactional_id: str
    error_code: int
    state: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    timeout_ms: int = -1
    start_ms: int = -1
    partitions: tuple[TP, ...] = ()


@dataclass(frozen=True)
class DescribeTransactionsResponse:
    transactions: tuple[DescribedTxn, ...]


@dataclass(frozen=True)
class MarkerCmd:
    """Write these transaction markers (WriteTxnMarkers to the partitions' leaders), then call the core's
    ``on_markers_written`` with each partition's outcome."""
    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: tuple[TP, ...] = field(default=())
