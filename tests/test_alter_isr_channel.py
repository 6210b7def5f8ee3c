"""A leader's AlterIsr requests go over one connection to the controller while its address stays, as Kafka's
AlterIsrManager keeps its connection to the controller: a real ReplicaManager whose followers never fetch, and a
controller on loopback gRPC that records each AlterIsr's peer and accepts it."""
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


class RecordingController(pbg.BrokerServicer):
    """Accepts every proposed ISR (zkVersion + 1); records (the caller's address, the partitions) per request."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[tuple[str, int]]]] = []
        self.lock = threading.Lock()

    def AlterIsr(self, request, context):
        with self.lock:
            self.calls.append((context.peer(), [(p.topic, p.partition) for p in request.partitions]))
        return pb.AlterIsrResponse(error_code=0, partitions=[pb.AlterIsrPartitionResult(
            topic=p.topic, partition=p.partition, error_code=0, leader=request.broker_id, leader_epoch=p.leader_epoch,
            isr=list(p.new_isr), current_isr_version=p.current_isr_version + 1) for p in request.partitions])


def test_a_leaders_alter_isr_requests_share_one_connection_to_the_controller(tmp_path):
    controller = RecordingController()
    server, address = serve_broker(controller)
    rm = ReplicaManager(1, tmp_path / "logs", ReplicaSettings(replica_lag_time_max_ms=200),
                        EventLog(tmp_path / "events.jsonl", 1), broker_epoch=lambda: 5, endpoint_of=lambda b: None,
                        controller_endpoint=lambda: address, fetch_wait_ms=50, segment_bytes=1 << 20,
                        checkpoint_interval_ms=60_000, topic_config=lambda t: {})
    try:
        # broker 1 leads t-0 with followers 2 and 3 that never fetch: the ISR shrinks to [1] after the lag time
        rm.apply_leader_and_isrs([PartitionInfo("t", 0, 1, 0, (1, 2, 3), (1, 2, 3), 0, 1)])
        wait_for(lambda: list(rm.hosted[("t", 0)].repl.isr) == [1], 15.0,
                 "t-0's ISR shrunk to [1]")
        # later, t-1 the same: a second AlterIsr request
        rm.apply_leader_and_isrs([PartitionInfo("t", 1, 1, 0, (1, 2), (1, 2), 0, 1)])
        wait_for(lambda: list(rm.hosted[("t", 1)].repl.isr) == [1], 15.0, "t-1's ISR shrunk to [1]")
        with controller.lock:
            calls = list(controller.calls)
        assert [parts for _peer, parts in calls] == [[("t", 0)], [("t", 1)]], calls
        assert calls[0][0] == calls[1][0], calls   # the same client address: one connection
    finally:
        rm.close()
        server.stop(0)
