"""Consumers' leader epochs on the Kafka listener, against a real leader's log, in process.

Fetch v12's ``last_fetched_epoch`` gets a diverging epoch as a follower's would (Kafka 2.8's
Partition.readRecords), a fetch or a ListOffsets with an older or newer ``current_leader_epoch`` gets
FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH before anything is read, and Metadata gives leader -1 for a
partition whose leader is not live.
"""
from __future__ import annotations

import asyncio
from dataclasses import replace as dataclass_replace

import pytest
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.record.default_records import DefaultRecordBatchBuilder

from listener.app import make_dispatcher
from listener.protocol import REQUESTS, RESPONSES, joined
from listener.records import check_client_batch
from replication.broker_state import PartitionInfo
from tests.test_listener_codec import CONN, frame, make_ctx

FENCED, UNKNOWN = 74, 75


@pytest.fixture
def leader(tmp_path):
    """A leader of t-0 whose log has epoch 4 at offsets 0..2 and epoch 6 from offset 3 (LEO 6, all committed)."""
    from node.events import EventLog
    from node.replicas.replica_manager import ReplicaManager
    from replication.partition_types import ReplicaSettings
    rm = ReplicaManager(1, tmp_path / "logs", ReplicaSettings(), EventLog(tmp_path / "events.jsonl", 1),
                        broker_epoch=lambda: 5, endpoint_of=lambda b: None, controller_endpoint=lambda: None,
                        fetch_wait_ms=100, segment_bytes=1 << 20, checkpoint_interval_ms=60_000)
    for epoch in (4, 6):
        rm.become_leader(PartitionInfo("t", 0, 1, epoch, (1,), (1,), 0, 1))
        b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
        for i in range(3):
            b.append(i, 1000 + i, b"k", b"e%d-%d" % (epoch, i), [])
        c = check_client_batch(bytes(b.build()), 1 << 20, 9)
        rm.append_batch(("t", 0), c.data, c.record_count, c.max_timestamp, 1, 1000, lambda code: None)
    ctx = make_ctx()
    ctx.state.metadata = {("t", 0): PartitionInfo("t", 0, 1, 6, (1,), (1,), 0, 1)}
    yield make_dispatcher(dataclass_replace(ctx, replicas=rm), lambda *a, **k: None)
    rm.close()


def fetch(d, version: int, offset: int, last_fetched_epoch: int = -1, current_leader_epoch: int = -1):
    R = REQUESTS[1]
    req = R(version=version, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
            session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
            topics=[R.FetchTopic(topic="t", partitions=[R.FetchTopic.FetchPartition(
                partition=0, fetch_offset=offset, partition_max_bytes=1 << 20, current_leader_epoch=current_leader_epoch,
                last_fetched_epoch=last_fetched_epoch, log_start_offset=-1)])])
    out = asyncio.run(d.handle(frame(req, 9), CONN))
    return RESPONSES[1].decode(joined(out), version=version, header=True, framed=True).responses[0].partitions[0]


def test_a_consumers_last_fetched_epoch_that_diverges_gets_the_leaders_end_of_that_epoch(leader) -> None:
    # the consumer read epoch 5 up to offset 5: the leader has no epoch 5; its largest below is 4, ending at 3
    p = fetch(leader, 12, 5, last_fetched_epoch=5)
    assert (p.error_code, p.diverging_epoch.epoch, p.diverging_epoch.end_offset, bytes(p.records)) == (0, 4, 3, b"")
    # epoch 4 read past its end (offset 4 > 3): truncate to 3 too
    p = fetch(leader, 12, 4, last_fetched_epoch=4)
    assert (p.diverging_epoch.epoch, p.diverging_epoch.end_offset, bytes(p.records)) == (4, 3, b"")


def test_a_consumer_in_step_with_the_leader_gets_records_and_no_divergence(leader) -> None:
    p = fetch(leader, 12, 3, last_fetched_epoch=4)      # epoch 4 ended exactly at 3: in step
    assert p.error_code == 0 and p.diverging_epoch is None and len(bytes(p.records)) > 0
    p = fetch(leader, 11, 5, last_fetched_epoch=5)      # v11 has no last_fetched_epoch: records
    assert p.error_code == 0 and len(bytes(p.records)) > 0


def test_a_last_fetched_epoch_above_every_known_one_is_out_of_range(leader) -> None:
    assert fetch(leader, 12, 3, last_fetched_epoch=9).error_code == 1     # OFFSET_OUT_OF_RANGE


@pytest.mark.parametrize("asked,code", [(5, FENCED), (7, UNKNOWN), (6, 0), (-1, 0)])
def test_a_fetch_is_fenced_by_its_current_leader_epoch_before_anything_is_read(leader, asked: int, code: int) -> None:
    p = fetch(leader, 12, 0, current_leader_epoch=asked)
    assert p.error_code == code
    assert (len(bytes(p.records)) > 0) == (code == 0)


@pytest.mark.parametrize("asked,code", [(5, FENCED), (7, UNKNOWN), (6, 0), (-1, 0)])
def test_list_offsets_is_fenced_by_its_current_leader_epoch(leader, asked: int, code: int) -> None:
    R = REQUESTS[2]
    req = R(version=6, replica_id=-1, isolation_level=0, topics=[R.ListOffsetsTopic(name="t", partitions=[
        R.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=-1, current_leader_epoch=asked)])])
    r = RESPONSES[2].decode(asyncio.run(leader.handle(frame(req), CONN)), version=6, header=True, framed=True)
    p = r.topics[0].partitions[0]
    assert p.error_code == code
    assert (p.offset, p.leader_epoch) == ((6, 6) if code == 0 else (-1, -1))


def test_metadata_gives_leader_minus_one_for_a_partition_whose_leader_is_not_live() -> None:
    ctx = make_ctx()
    ctx.state.metadata = {("t", 0): PartitionInfo("t", 0, 2, 3, (1, 2), (2,), 0, 1)}   # leader 2: not live
    d = make_dispatcher(ctx, lambda *a, **k: None)
    for v in (1, 9):
        out = asyncio.run(d.handle(frame(MetadataRequest(version=v, topics=[MetadataRequest.MetadataRequestTopic(
            name="t")], allow_auto_topic_creation=False)), CONN))
        p = MetadataResponse.decode(out, version=v, header=True, framed=True).topics[0].partitions[0]
        assert (p.error_code, p.leader_id) == (5, -1)        # LEADER_NOT_AVAILABLE
        if v >= 5:
            assert list(p.offline_replicas) == [2]
