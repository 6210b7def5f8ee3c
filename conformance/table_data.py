"""Cases of the data path: Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, InitProducerId, Metadata."""
from __future__ import annotations

from typing import Any

from conformance.cases import FOLLOWER_FETCH, TOPIC_IDS, Case, each_version
from conformance.side import BASE_TIMESTAMP, Produce, Topic, batch
from kafkacommon.record_batch import encode_batch

# shared fixtures: t1 (1 partition, RF 2, 5 records), t3 (3 partitions, RF 2, 5 records each), a topic with a
# 200-byte message limit, a topic Produce cases append to
T1 = [Topic("t1", 1, 2), Produce("t1", 0, 5)]
T3 = [Topic("t3", 3, 2)] + [Produce("t3", p, 5) for p in range(3)]
SMALL = [Topic("small", 1, 2, {"max.message.bytes": "200"})]
PT = [Topic("produced", 1, 2)]


def produce(topic: str, records: bytes, acks: int = -1, partition: int = 0) -> Any:
    return {"transactional_id": None, "acks": acks, "timeout_ms": 30000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}


def fetch(topic: str, offset: int = 0, partition: int = 0, epoch: int = -1, max_bytes: int = 1 << 20) -> Any:
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": max_bytes, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": topic, "partitions": [{"partition": partition, "current_leader_epoch": epoch,
                                                        "fetch_offset": offset, "log_start_offset": -1,
                                                        "partition_max_bytes": max_bytes}]}]}


def list_offsets(topic: str, ts: int, epoch: int = -1, partition: int = 0) -> Any:
    return {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
        {"partition_index": partition, "current_leader_epoch": epoch, "timestamp": ts, "max_num_offsets": 1}]}]}


def olep(topic: str, leader_epoch: int, current: int = -1, partition: int = 0) -> Any:
    return {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
        {"partition": partition, "current_leader_epoch": current, "leader_epoch": leader_epoch}]}]}


def metadata(v: int, topics: list[str] | None) -> Any:
    if topics is None and v == 0:
        topics = []            # v0 has no null: an empty list is every topic
    return {"topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": False, "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False}


def without_offsets_topic_placement(r: dict[str, Any]) -> dict[str, Any]:
    for t in r.get("topics") or ():
        if t.get("name") == "__consumer_offsets":
            t["partitions"] = len(t["partitions"])
    return r


def cases() -> list[Case]:
    out: list[Case] = []
    P = range(3, 10)
    big = encode_batch(0, -1, [(b"k", b"x" * 300, BASE_TIMESTAMP)])
    out += each_version("append", 0, P, produce("produced", batch(3)), target="leader:produced:0", setup=PT)
    out += each_version("acks1", 0, P, produce("produced", batch(2), acks=1), target="leader:produced:0", setup=PT)
    out += each_version("not_leader", 0, P, produce("t1", batch(1)), target="other:leader:t1:0", setup=T1)
    out += each_version("unknown_topic", 0, P, produce("no-such-topic", batch(1)), setup=T1)
    out += each_version("record_too_large", 0, P, produce("small", big), target="leader:small:0", setup=SMALL)
    out += each_version("invalid_acks", 0, P, produce("t1", batch(1), acks=2), target="leader:t1:0", setup=T1)

    F = range(4, 13)
    out += each_version("from_start", 1, F, fetch("t1"), target="leader:t1:0", setup=T1)
    out += each_version("at_end", 1, F, fetch("t1", 5), target="leader:t1:0", setup=T1)
    out += each_version("offset_out_of_range", 1, F, fetch("t1", 100), target="leader:t1:0", setup=T1)
    out += each_version("not_leader", 1, F, fetch("t1"), target="other:leader:t1:0", setup=T1,
                        known=lambda v: {"responses[*].partitions[*]*": FOLLOWER_FETCH} if v >= 11 else {})
    out += each_version("unknown_topic", 1, F, fetch("no-such-topic"), setup=T1)
    out += each_version("unknown_leader_epoch", 1, range(9, 13), fetch("t1", epoch=7), target="leader:t1:0",
                        setup=T1)
    out += each_version("current_leader_epoch", 1, range(9, 13), fetch("t1", epoch=0), target="leader:t1:0",
                        setup=T1)

    L = range(1, 7)
    out += each_version("earliest", 2, L, list_offsets("t1", -2), target="leader:t1:0", setup=T1)
    out += each_version("latest", 2, L, list_offsets("t1", -1), target="leader:t1:0", setup=T1)
    out += each_version("by_timestamp", 2, L, list_offsets("t1", BASE_TIMESTAMP + 2), target="leader:t1:0",
                        setup=T1)
    out += each_version("not_leader", 2, L, list_offsets("t1", -1), target="other:leader:t1:0", setup=T1)
    out += each_version("unknown_topic", 2, L, list_offsets("no-such-topic", -1), setup=T1)
    out += each_version("unknown_leader_epoch", 2, range(4, 7), list_offsets("t1", -1, epoch=7),
                        target="leader:t1:0", setup=T1)

    O = range(0, 5)
    out += each_version("epoch_0", 23, O, olep("t1", 0), target="leader:t1:0", setup=T1)
    out += each_version("epoch_past_end", 23, O, olep("t1", 3), target="leader:t1:0", setup=T1)
    out += each_version("not_leader", 23, O, olep("t1", 0), target="other:leader:t1:0", setup=T1)
    out += each_version("unknown_topic", 23, O, olep("no-such-topic", 0), setup=T1)
    out += each_version("unknown_leader_epoch", 23, range(2, 5), olep("t1", 0, current=7), target="leader:t1:0",
                        setup=T1)

    out += each_version("idempotent", 22, range(0, 5), {"transactional_id": None, "transaction_timeout_ms": 60000,
                                                        "producer_id": -1, "producer_epoch": -1},
                        ignore={"producer_id": "a producer id comes from the block each broker took from "
                                               "ZooKeeper, in the order brokers asked"})

    M = range(0, 12)
    ids = {"topics[*].topic_id": TOPIC_IDS}
    out += each_version("two_topics", 3, M, lambda v: metadata(v, ["t1", "t3"]), setup=T1 + T3, known=ids)
    out += each_version("unknown_topic", 3, M, lambda v: metadata(v, ["no-such-topic"]), setup=T1)
    out += each_version("all_topics", 3, M, lambda v: metadata(v, None), setup=T1 + T3,
                        view=without_offsets_topic_placement, known=ids,
                        view_reason="__consumer_offsets' partitions are compared by count: Kafka places them "
                                    "from a random broker")
    return out
