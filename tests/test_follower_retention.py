"""A follower whose own retention moves its log start tells its leader at its next fetch, as Kafka's follower does
(its fetch data changed, so its incremental fetch lists the partition): a real ReplicaManager and its fetcher
thread, fetching over gRPC on loopback from a leader that records each request and answers it empty."""
from __future__ import annotations

import threading

from node.events import EventLog
from node.replicas.replica_manager import ReplicaManager
from proto import kafkasim_pb2 as pb
from proto import kafkasim_pb2_grpc as pbg
from replication.broker_state import PartitionInfo
from replication.partition_types import ReplicaSettings
from tests.helpers import serve_broker
from util.waiting import wait_for


class RecordingLeader(pbg.BrokerServicer):
    """Broker 2 as its follower sees it: every Fetch recorded, then answered with nothing new after its long poll
    (``max_wait_ms``), in fetch session 7."""

    def __init__(self) -> None:
        self.requests: list[pb.FetchRequest] = []
        self.seen = threading.Condition()
        self.stopping = threading.Event()

    def Fetch(self, request, context):
        with self.seen:
            self.requests.append(request)
            self.seen.notify_all()
        self.stopping.wait(request.max_wait_ms / 1000)   # a long poll with no news
        return pb.FetchResponse(error_code=0, session_id=7)


def test_a_follower_lists_a_partition_whose_log_start_its_retention_moved(tmp_path):
    leader = RecordingLeader()
    server, address = serve_broker(leader)
    rm = ReplicaManager(1, tmp_path / "logs", ReplicaSettings(), EventLog(tmp_path / "events.jsonl", 1),
                        broker_epoch=lambda: 5, endpoint_of=lambda b: address if b == 2 else None,
                        controller_endpoint=lambda: None, fetch_wait_ms=50, segment_bytes=1 << 20,
                        checkpoint_interval_ms=60_000,
                        topic_config=lambda t: {"retention.ms": "60000", "segment.bytes": "300"})
    try:
        # broker 1 leads t-0 alone and takes six records stamped long ago (several segments, HW 6) ...
        rm.apply_leader_and_isrs([PartitionInfo("t", 0, 1, 0, (1,), (1, 2), 0, 1)])
        for _ in range(6):
            r = rm.produce(pb.ProduceRequest(topic="t", partition=0, acks=1, timeout_ms=1000, records=[
                pb.Record(key_null=True, value=b"v" * 100, timestamp_ms=1_000_000)]))
            assert r.error_code == 0
        # ... then follows broker 2, which leads it in epoch 1
        rm.apply_leader_and_isrs([PartitionInfo("t", 0, 2, 1, (1, 2), (1, 2), 1, 1)])
        h = rm.hosted[("t", 0)]
        assert h.log.log_start_offset == 0 and h.repl.high_watermark == 6

        def listed(since: int) -> list[tuple[int, pb.FetchRequest]]:
            return [(i, q) for i, q in enumerate(leader.requests[since:], since) if q.partitions]

        # the full request lists t-0 from log start 0; the session's next requests list nothing
        wait_for(lambda: len(leader.requests) >= 3, 10.0, "three fetches from the follower")
        (first, full), = listed(0)
        assert first == 0 and full.session_id == 0
        assert [(p.topic, p.partition, p.log_start_offset) for p in full.partitions] == [("t", 0, 0)]
        assert all(q.session_id == 7 for q in leader.requests[1:3])
        # its retention deletes the old segments: the log start moves to 6 with no answer from the leader
        n = len(leader.requests)
        assert rm.retain_logs() >= 2 and h.log.log_start_offset == 6
        wait_for(lambda: listed(n), 10.0, "a fetch listing t-0 again")
        (_i, q), = listed(n)[:1]
        assert q.session_id == 7
        assert [(p.topic, p.partition, p.fetch_offset, p.log_start_offset) for p in q.partitions] == [("t", 0, 6, 6)]
    finally:
        leader.stopping.set()
        rm.close()
        server.stop(0)
