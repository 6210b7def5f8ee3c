"""Cases of transactions: FindCoordinator (key type 1), InitProducerId with a transactional id,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, and read_committed Fetch and ListOffsets.

Each case that changes a transaction has its own transactional id (named after the case's version); the shared
ones are ``tx-idle`` (initialised, no transaction), ``txn-aborted`` (a topic with 2 records, an aborted
transaction of 3 and a committed one of 2) and ``txn-open`` (2 records and a transaction of 3 left open: its
last stable offset stays 2).
"""
from __future__ import annotations

import re
from typing import Any

from conformance.cases import CROSS_SEGMENT, Case, each_version
from conformance.side import Commit, Group, Produce, Topic
from conformance.steps_txn import TXN_TIMEOUT_MS, Txn, TxnOffsets, TxnProducer
from conformance.table_data import fetch, list_offsets
from kafkacommon.record_batch import decode_batch

T1 = [Topic("t1", 1, 2), Produce("t1", 0, 5)]
TXT = [Topic("txn-t", 1, 2)]
IDLE = [TxnProducer("tx-idle")]
ABORTED = [Topic("txn-aborted", 1, 2), Produce("txn-aborted", 0, 2), Txn("tx-aborter", "txn-aborted", 0, 3, "abort"),
           Txn("tx-aborter", "txn-aborted", 0, 2, "commit")]
OPEN = [Topic("txn-open", 1, 2), Produce("txn-open", 0, 2), Txn("tx-opener", "txn-open", 0, 3)]
NEW_ID = {"producer_id": "a new producer id comes from the id block each broker took from ZooKeeper, in the order "
                         "brokers asked"}


def pid(tid: str) -> str:
    return f"${tid}.producer_id"


def epoch(tid: str) -> str:
    return f"${tid}.producer_epoch"


def init(tid: str, timeout_ms: int = 60000, producer_id: Any = -1, producer_epoch: Any = -1) -> Any:
    return {"transactional_id": tid, "transaction_timeout_ms": timeout_ms, "producer_id": producer_id,
            "producer_epoch": producer_epoch}


def add_partitions(tid: str, topic: str = "txn-t", partition: int = 0, producer_id: Any = None,
                   producer_epoch: Any = None) -> Any:
    return {"v3_and_below_transactional_id": tid,
            "v3_and_below_producer_id": pid(tid) if producer_id is None else producer_id,
            "v3_and_below_producer_epoch": epoch(tid) if producer_epoch is None else producer_epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": [partition]}]}


def add_offsets(tid: str, group: str, producer_epoch: Any = None) -> Any:
    return {"transactional_id": tid, "producer_id": pid(tid),
            "producer_epoch": epoch(tid) if producer_epoch is None else producer_epoch, "group_id": group}


def end(tid: str, commit: bool = True, producer_epoch: Any = None) -> Any:
    return {"transactional_id": tid, "producer_id": pid(tid),
            "producer_epoch": epoch(tid) if producer_epoch is None else producer_epoch, "committed": commit}


def txn_commit(tid: str, group: str, topic: str = "t1", generation: Any = -1, member: Any = "",
               producer_epoch: Any = None) -> Any:
    return {"transactional_id": tid, "group_id": group, "producer_id": pid(tid),
            "producer_epoch": epoch(tid) if producer_epoch is None else producer_epoch, "generation_id": generation,
            "member_id": member, "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "committed_offset": 3, "committed_leader_epoch": -1,
                 "committed_metadata": "txn"}]}]}


def read_committed(topic: str, isolation: int = 1) -> Any:
    return {**fetch(topic), "isolation_level": isolation}


_ESCAPED = re.compile(r"\\x([0-9a-f]{2})")


def _raw(records: Any) -> bytes | None:
    """The records' bytes: kafka-python's dicts give bytes as text, decoded as UTF-8 with each invalid byte
    escaped ``\\xNN`` (none of the setup's keys and values holds a backslash)."""
    if records is None or isinstance(records, (bytes, bytearray)):
        return records
    parts = _ESCAPED.split(records)
    return b"".join(bytes([int(x, 16)]) if i % 2 else x.encode() for i, x in enumerate(parts))


def batches(r: dict[str, Any]) -> dict[str, Any]:
    """Each partition's records as its batches' fields (offsets, flags, producer, records' keys and values), not
    bytes: a control batch's timestamp is the wall clock of the marker's writing."""
    for t in r.get("responses") or ():
        for p in t.get("partitions") or ():
            raw, out, pos = _raw(p.get("records")), [], 0
            while raw and pos < len(raw):
                b, pos = decode_batch(raw, pos)
                out.append({"base_offset": b.base_offset, "last_offset_delta": b.last_offset_delta,
                            "transactional": b.is_transactional, "control": b.is_control,
                            "producer_id": b.producer_id, "producer_epoch": b.producer_epoch,
                            "base_sequence": b.base_sequence,
                            "records": [[x.key, x.value] for x in b.records] if not b.is_control else len(b.records)})
            if raw is not None:
                p["records"] = out
    return r


BATCHES = "record batches are compared by their fields: a control batch's timestamps are the marker's wall clock"
QUOTED = {"producer_id": "tx-aborter.producer_id", "producer_epoch": "tx-aborter.producer_epoch"}
QUOTED_OPEN = {"producer_id": "tx-opener.producer_id", "producer_epoch": "tx-opener.producer_epoch"}


def cases() -> list[Case]:
    out: list[Case] = []
    out += each_version("transaction", 10, range(1, 4), {"key": "tx-idle", "key_type": 1}, setup=IDLE)
    out += each_version("unknown_key_type", 10, range(1, 4), {"key": "tx-idle", "key_type": 2}, setup=IDLE)

    I = range(0, 5)
    out += each_version("transactional", 22, I, lambda v: init(f"tx-init-{v}"), setup=IDLE,
                        target=lambda v: f"txn:tx-init-{v}", ignore=NEW_ID)
    out += each_version("transactional_again", 22, I, lambda v: init(f"tx-reinit-{v}"),
                        setup=lambda v: [TxnProducer(f"tx-reinit-{v}")], target=lambda v: f"txn:tx-reinit-{v}",
                        quoted=lambda v: {"producer_id": f"tx-reinit-{v}.producer_id"})
    out += each_version("invalid_transaction_timeout", 22, I, init("tx-idle", TXN_TIMEOUT_MS + 1), setup=IDLE,
                        target="txn:tx-idle")
    out += each_version("not_coordinator", 22, I, init("tx-idle"), setup=IDLE, target="other:txn:tx-idle")
    out += each_version("wrong_epoch", 22, range(3, 5), init("tx-idle", producer_id=pid("tx-idle"),
                                                               producer_epoch=99),
                        setup=IDLE, target="txn:tx-idle", ignore=NEW_ID)

    A = range(0, 4)
    out += each_version("add", 24, A, lambda v: add_partitions(f"tx-add-{v}"),
                        setup=lambda v: TXT + [TxnProducer(f"tx-add-{v}")], target=lambda v: f"txn:tx-add-{v}")
    out += each_version("wrong_epoch", 24, A, add_partitions("tx-idle", producer_epoch=99), setup=TXT + IDLE,
                        target="txn:tx-idle")
    out += each_version("unknown_producer_id", 24, A, add_partitions("tx-idle", producer_id=999_999),
                        setup=TXT + IDLE, target="txn:tx-idle")
    out += each_version("unknown_transactional_id", 24, A, add_partitions("tx-never", producer_id=0,
                                                                            producer_epoch=0),
                        setup=TXT + IDLE, target="txn:tx-never")
    out += each_version("unknown_topic", 24, A, add_partitions("tx-idle", "no-such-topic"), setup=IDLE,
                        target="txn:tx-idle")
    out += each_version("not_coordinator", 24, A, add_partitions("tx-idle"), setup=TXT + IDLE,
                        target="other:txn:tx-idle")

    out += each_version("add", 25, A, lambda v: add_offsets(f"tx-offs-{v}", f"txg-{v}"),
                        setup=lambda v: [TxnProducer(f"tx-offs-{v}")], target=lambda v: f"txn:tx-offs-{v}")
    out += each_version("wrong_epoch", 25, A, add_offsets("tx-idle", "txg", producer_epoch=99), setup=IDLE,
                        target="txn:tx-idle")
    out += each_version("not_coordinator", 25, A, add_offsets("tx-idle", "txg"), setup=IDLE,
                        target="other:txn:tx-idle")

    out += each_version("commit", 26, A, lambda v: end(f"tx-end-{v}"),
                        setup=lambda v: TXT + [Txn(f"tx-end-{v}", "txn-t", 0, 1)], target=lambda v: f"txn:tx-end-{v}")
    out += each_version("abort_without_records", 26, A, lambda v: end(f"tx-abort-{v}", commit=False),
                        setup=lambda v: TXT + [Txn(f"tx-abort-{v}", "txn-t", 0, 0)],
                        target=lambda v: f"txn:tx-abort-{v}")
    out += each_version("no_transaction", 26, A, end("tx-idle"), setup=IDLE, target="txn:tx-idle")
    out += each_version("wrong_epoch", 26, A, end("tx-idle", producer_epoch=99), setup=IDLE, target="txn:tx-idle")
    out += each_version("not_coordinator", 26, A, end("tx-idle"), setup=IDLE, target="other:txn:tx-idle")

    out += each_version("commit", 28, A, lambda v: txn_commit(f"tx-toc-{v}", f"txg-toc-{v}"),
                        setup=lambda v: T1 + [TxnOffsets(f"tx-toc-{v}", f"txg-toc-{v}")],
                        target=lambda v: f"coordinator:txg-toc-{v}")
    out += each_version("unknown_topic", 28, A, lambda v: txn_commit(f"tx-toc-{v}", f"txg-toc-{v}",
                                                                       "no-such-topic"),
                        setup=lambda v: T1 + [TxnOffsets(f"tx-toc-{v}", f"txg-toc-{v}")],
                        target=lambda v: f"coordinator:txg-toc-{v}")
    out += each_version("not_coordinator", 28, A, lambda v: txn_commit(f"tx-toc-{v}", f"txg-toc-{v}"),
                        setup=lambda v: T1 + [TxnOffsets(f"tx-toc-{v}", f"txg-toc-{v}")],
                        target=lambda v: f"other:coordinator:txg-toc-{v}")
    out += each_version("consumer_group_member", 28, [3],
                        txn_commit("tx-toc-3", "stable", generation="$stable.generation", member="$stable.member"),
                        setup=T1 + [Group("stable", "t1"), TxnOffsets("tx-toc-3", "stable")],
                        target="coordinator:stable")
    out += each_version("unknown_member", 28, [3], txn_commit("tx-toc-3", "stable", generation="$stable.generation",
                                                              member="nobody"),
                        setup=T1 + [Group("stable", "t1"), TxnOffsets("tx-toc-3", "stable")],
                        target="coordinator:stable")
    out += each_version("illegal_generation", 28, [3], txn_commit("tx-toc-3", "stable", generation=99,
                                                                  member="$stable.member"),
                        setup=T1 + [Group("stable", "t1"), TxnOffsets("tx-toc-3", "stable")],
                        target="coordinator:stable")
    out += each_version("standalone_group", 28, A, lambda v: txn_commit(f"tx-toc-{v}", "committed"),
                        setup=lambda v: T1 + [Commit("committed", "t1", 0, 3), TxnOffsets(f"tx-toc-{v}",
                                                                                        "committed")],
                        target="coordinator:committed")

    F = range(4, 13)
    view = {"view": batches, "view_reason": BATCHES}
    segment = {"responses[*].partitions[*].records*": CROSS_SEGMENT}
    out += each_version("read_committed_aborted", 1, F, read_committed("txn-aborted"), setup=ABORTED,
                        target="leader:txn-aborted:0", quoted=QUOTED, known=segment, **view)
    out += each_version("read_uncommitted_aborted", 1, F, read_committed("txn-aborted", 0), setup=ABORTED,
                        target="leader:txn-aborted:0", quoted=QUOTED, known=segment, **view)
    out += each_version("read_committed_after_abort", 1, F, {**read_committed("txn-aborted"), "topics": [
        {"topic": "txn-aborted", "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 5,
                                                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]},
                        setup=ABORTED, target="leader:txn-aborted:0", quoted=QUOTED, **view)
    out += each_version("read_committed_open", 1, F, read_committed("txn-open"), setup=OPEN,
                        target="leader:txn-open:0", quoted=QUOTED_OPEN, **view)
    out += each_version("read_uncommitted_open", 1, F, read_committed("txn-open", 0), setup=OPEN,
                        target="leader:txn-open:0", quoted=QUOTED_OPEN, **view)
    L = range(2, 7)
    out += each_version("read_committed_open", 2, L, {**list_offsets("txn-open", -1), "isolation_level": 1},
                        setup=OPEN, target="leader:txn-open:0")
    out += each_version("read_committed_aborted", 2, L, {**list_offsets("txn-aborted", -1), "isolation_level": 1},
                        setup=ABORTED, target="leader:txn-aborted:0")
    return out
