"""Setup steps of transactions: a transactional producer, a transaction's partitions, records and end.

Each side's producer id and epoch are its own (the id comes from the id block a broker took from ZooKeeper),
so :class:`TxnProducer` keeps them as the side's variables ``TID.producer_id`` and ``TID.producer_epoch``; a
case's request quotes them back as ``"$TID.producer_id"``, and a case's answer that names them
(``aborted_transactions``) is compared with them written back as the same ``"$TID.producer_id"``
(``Case.quoted``).  Every step goes to the transactional id's coordinator (FindCoordinator v1, key type 1) and
retries the answers Kafka's producer retries (the coordinator loading, moving, or finishing the previous
transaction's markers).
"""
from __future__ import annotations

from typing import Any

from kafkacommon.record_batch import encode_batch
from util.waiting import wait_for

from conformance.side import BASE_TIMESTAMP, SetupError, Side, Step

TXN_TIMEOUT_MS = 900_000    # Kafka's transaction.max.timeout.ms: no open transaction of the setup times out
RETRIABLE = {14, 15, 16, 51}   # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
#                                CONCURRENT_TRANSACTIONS


def _retrying(side: Side, tid: str, what: str, api_key: int, version: int, fields: dict[str, Any],
              code: Any) -> dict[str, Any]:
    last: dict[str, Any] = {}

    def answered() -> bool:
        nonlocal last
        last = side.call(side.txn_coordinator(tid), api_key, version, side.resolve(fields))
        return code(last) not in RETRIABLE
    wait_for(answered, 30, f"{side.name}: {what} of {tid} past retriable errors", 0.05)
    if code(last):
        raise SetupError(f"{side.name}: {what} of {tid}: {last}")
    return last


class TxnProducer(Step):
    """InitProducerId v1 of transactional id ``tid`` at its coordinator (transaction timeout 15 minutes, so no
    transaction the setup leaves open is aborted while the suite runs).  Variables: ``TID.producer_id``,
    ``TID.producer_epoch``."""

    def __init__(self, tid: str) -> None:
        self.tid = tid
        self.key = ("txn-producer", tid)

    def run(self, side: Side) -> None:
        r = _retrying(side, self.tid, "InitProducerId", 22, 1, {
            "transactional_id": self.tid, "transaction_timeout_ms": TXN_TIMEOUT_MS}, lambda r: r["error_code"])
        side.vars[f"{self.tid}.producer_id"] = r["producer_id"]
        side.vars[f"{self.tid}.producer_epoch"] = r["producer_epoch"]


class Txn(Step):
    """A transaction of ``tid`` (after :class:`TxnProducer`): AddPartitionsToTxn v1 of ``topic``-``partition``,
    then, when ``count`` > 0, ``count`` transactional records in one batch (Produce v7 to the leader, the
    producer's next sequence), and, when ``end`` is ``commit`` or ``abort``, EndTxn v1, waiting until the
    partition's last stable offset reaches its high watermark (the markers are written).  ``end=None`` leaves
    the transaction open."""

    def __init__(self, tid: str, topic: str, partition: int = 0, count: int = 0, end: str | None = None) -> None:
        if end not in (None, "commit", "abort"):
            raise ValueError(f"a transaction ends with commit or abort, not {end!r}")
        self.tid, self.topic, self.partition, self.count, self.end = tid, topic, partition, count, end
        self.key = ("txn", tid, topic, partition, count, end)

    def run(self, side: Side) -> None:
        side.apply(TxnProducer(self.tid))
        pid, epoch = f"${self.tid}.producer_id", f"${self.tid}.producer_epoch"
        _retrying(side, self.tid, "AddPartitionsToTxn", 24, 1, {
            "v3_and_below_transactional_id": self.tid, "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": self.topic, "partitions": [self.partition]}]},
            lambda r: r["results_by_topic_v3_and_below"][0]["results_by_partition"][0]["partition_error_code"])
        if self.count:
            seq_var = f"{self.tid}.sequence.{self.topic}.{self.partition}"
            seq = side.vars.get(seq_var, 0)
            records = encode_batch(0, -1, [(b"k", b"txn-%d" % (seq + i), BASE_TIMESTAMP + seq + i)
                                           for i in range(self.count)],
                                   producer_id=side.vars[f"{self.tid}.producer_id"],
                                   producer_epoch=side.vars[f"{self.tid}.producer_epoch"], base_sequence=seq,
                                   transactional=True)
            r = side.call(side.leader(self.topic, self.partition), 0, 7, {
                "transactional_id": self.tid, "acks": -1, "timeout_ms": 30000, "topic_data": [{
                    "name": self.topic, "partition_data": [{"index": self.partition, "records": records}]}]})
            err = r["responses"][0]["partition_responses"][0]["error_code"]
            if err:
                raise SetupError(f"{side.name}: transactional Produce to {self.topic}-{self.partition}: error {err}")
            side.vars[seq_var] = seq + self.count
        if self.end is not None:
            _retrying(side, self.tid, "EndTxn", 26, 1, {"transactional_id": self.tid, "producer_id": pid,
                                                        "producer_epoch": epoch, "committed": self.end == "commit"},
                      lambda r: r["error_code"])
            wait_stable(side, self.topic, self.partition)


def wait_stable(side: Side, topic: str, partition: int) -> None:
    """Until ``topic``-``partition``'s last stable offset (ListOffsets v2, read_committed) is its high watermark
    (ListOffsets v1): no transaction is open there."""
    def offset(version: int, isolation: int) -> int:
        r = side.call(side.leader(topic, partition), 2, version, {
            "replica_id": -1, "isolation_level": isolation, "topics": [{"name": topic, "partitions": [
                {"partition_index": partition, "timestamp": -1}]}]})
        return r["topics"][0]["partitions"][0]["offset"]
    wait_for(lambda: offset(2, 1) == offset(1, 0), 30, f"{side.name}: {topic}-{partition}'s markers", 0.05)


class TxnOffsets(Step):
    """AddOffsetsToTxn v1 of ``group`` to ``tid``'s open transaction (after :class:`TxnProducer`)."""

    def __init__(self, tid: str, group: str) -> None:
        self.tid, self.group = tid, group
        self.key = ("txn-offsets", tid, group)

    def run(self, side: Side) -> None:
        side.apply(TxnProducer(self.tid))
        _retrying(side, self.tid, "AddOffsetsToTxn", 25, 1, {
            "transactional_id": self.tid, "producer_id": f"${self.tid}.producer_id",
            "producer_epoch": f"${self.tid}.producer_epoch", "group_id": self.group}, lambda r: r["error_code"])
