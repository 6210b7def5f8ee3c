"""Retention on real brokers: old segments go on the leader and the follower, the earliest offset moves."""
from __future__ import annotations

import time

import grpc

from helpers import events
from kafkacommon import errors
from zk.admin import create_topic
from kafkacommon.batch_scan import scan_batches
from node.storage.segment import parse_segment_base
from util.waiting import wait_for
from proto import kafkasim_pb2 as pb
from proto import kafkasim_pb2_grpc as pbg

TOPIC = "retained"


def stub(cluster, broker: int) -> pbg.BrokerStub:
    spec = cluster.cfg.broker(broker)
    return pbg.BrokerStub(grpc.insecure_channel(f"{spec.host}:{spec.port}"))


def produce(cluster, leader: int, values: list[bytes], ts: int) -> pb.ProduceResponse:
    return stub(cluster, leader).Produce(pb.ProduceRequest(
        topic=TOPIC, partition=0, acks=-1, timeout_ms=5000,
        records=[pb.Record(key_null=True, value=v, timestamp_ms=ts) for v in values]), timeout=10)


def segment_bases(cluster, broker: int) -> list[int]:
    d = cluster.cfg.broker(broker).log_dir / f"{TOPIC}-0"
    return sorted(b for n in d.iterdir() if (b := parse_segment_base(n.name)) is not None)


def test_retention_deletes_old_segments_on_leader_and_follower(make_cluster):
    cluster = make_cluster(2, log__retention__check__interval__ms=200, offsets__topic__num__partitions=1)
    create_topic(cluster.zk(), TOPIC, 1, 2, {"retention.ms": 60_000, "segment.bytes": 400})
    leader = cluster.view().topics[TOPIC]["partitions"][0]["leader"]
    follower = 3 - leader
    hour_ago = int(time.time() * 1000) - 3_600_000
    wait_for(lambda: produce(cluster, leader, [b"warm-up"], hour_ago).error_code == errors.NONE, 10,
             "a leader that accepts writes")
    for i in range(7):  # every record an hour old: past retention.ms, several segments of 400 bytes
        assert produce(cluster, leader, [b"v%d" % i * 40], hour_ago).error_code == errors.NONE
    # retention deletes every segment once the HW covers them, the active one too (Kafka rolls an empty one)
    for broker in (leader, follower):
        wait_for(lambda: segment_bases(cluster, broker) == [8], 20, f"broker {broker} to keep only an empty segment")
    deleted = events(cluster, leader, "log_segments_deleted", topic=TOPIC)
    assert deleted and deleted[-1]["log_start_offset"] == 8 and "retention_ms" in deleted[-1]["reasons"]
    assert events(cluster, follower, "log_segments_deleted", topic=TOPIC)
    earliest = stub(cluster, leader).ListOffsets(pb.ListOffsetsRequest(
        partitions=[pb.TopicPartition(topic=TOPIC, partition=0)], timestamp=-2), timeout=10)
    assert earliest.partitions[0].offset == 8
    fetch = pb.FetchRequest(replica_id=-1, max_wait_ms=0, partitions=[pb.FetchPartition(
        topic=TOPIC, partition=0, fetch_offset=0, current_leader_epoch=-1, last_fetched_epoch=-1, max_bytes=1 << 20)])
    assert stub(cluster, leader).Fetch(fetch, timeout=10).partitions[0].error_code == errors.OFFSET_OUT_OF_RANGE
    # a new record lands at the log start and is read from there
    assert produce(cluster, leader, [b"fresh"], -1).base_offset == 8
    fetch.partitions[0].fetch_offset = 8
    got = stub(cluster, leader).Fetch(fetch, timeout=10).partitions[0]
    assert [r.value for _, b in scan_batches(got.records).batches for r in b.records] == [b"fresh"]
