"""The controller's channel to its own broker: the same requests handed to the broker's service in-process."""
from __future__ import annotations

import queue

from controller.plan import LeaderAndIsrCmd, PartitionView, StopReplicaCmd, UpdateMetadataCmd
from kafkacommon.metadata import BrokerRegistration, LeaderAndIsr
from node.net import wire
from node.net.channel import BrokerChannel, SharedBuild
from proto import kafkasim_pb2 as pb

REGS = tuple(BrokerRegistration(i, "127.0.0.1", 9000 + i, 0, epoch=10 + i) for i in (1, 2, 3))
HEADER = pb.ControllerHeader(controller_id=1, controller_epoch=7, broker_epoch=11)


def _views(epoch: int) -> tuple[PartitionView, ...]:
    return tuple(PartitionView("t", p, LeaderAndIsr(1 + p % 3, epoch, (1, 2), 7), epoch, (1, 2, 3)) for p in range(5))


def _wait(answers: "queue.Queue", n: int) -> list:
    return [answers.get(timeout=10) for _ in range(n)]


def test_local_channel_hands_each_request_to_the_own_broker_in_order() -> None:
    got: list[tuple[str, object]] = []
    answers: "queue.Queue" = queue.Queue()

    def service(kind: str, request):
        got.append((kind, request))
        if kind == "LeaderAndIsr":
            return pb.LeaderAndIsrResponse(partition_errors=[pb.PartitionError(topic="t", partition=1, error_code=5)])
        return getattr(pb, kind + "Response")()

    ch = BrokerChannel(1, "127.0.0.1:1", 5.0, lambda *a: answers.put(a), local=service)
    try:
        cmds = [UpdateMetadataCmd(_views(3), REGS), LeaderAndIsrCmd(_views(4), REGS), StopReplicaCmd((("t", 2),))]
        shared = SharedBuild({})
        for cmd in cmds:
            ch.send_command(cmd, HEADER, shared)
        responses = _wait(answers, 3)
    finally:
        ch.close()
    assert [k for k, _ in got] == ["UpdateMetadata", "LeaderAndIsr", "StopReplica"]
    for (kind, request), cmd in zip(got, cmds):   # the message the broker's gRPC server would have decoded
        assert request == wire.command_to_pb(cmd, HEADER)
    assert [(b, kind) for b, kind, _, _ in responses] == [(1, "UpdateMetadata"), (1, "LeaderAndIsr"),
                                                         (1, "StopReplica")]
    sent, response = responses[1][2], responses[1][3]
    assert sent.header == HEADER and sent.partitions == cmds[1].partitions
    assert [(e.partition, e.error_code) for e in response.partition_errors] == [(1, 5)]


def test_a_failing_own_broker_request_does_not_stop_the_channel() -> None:
    answers: "queue.Queue" = queue.Queue()
    calls: list[str] = []

    def service(kind: str, request):
        calls.append(kind)
        if len(calls) == 1:
            raise RuntimeError("the broker's handler failed")
        return getattr(pb, kind + "Response")()

    ch = BrokerChannel(1, "127.0.0.1:1", 5.0, lambda *a: answers.put(a), local=service)
    try:
        ch.send_command(LeaderAndIsrCmd(_views(1), REGS), HEADER)
        ch.send_command(UpdateMetadataCmd(_views(1), REGS), HEADER)
        (b, kind, _, _), = _wait(answers, 1)
    finally:
        ch.close()
    assert (b, kind) == (1, "UpdateMetadata") and calls == ["LeaderAndIsr", "UpdateMetadata"]


def test_a_message_sent_to_the_own_broker_is_a_copy() -> None:
    answers: "queue.Queue" = queue.Queue()
    got: list = []
    ch = BrokerChannel(1, "127.0.0.1:1", 5.0, lambda *a: answers.put(a),
                       local=lambda kind, request: got.append(request) or pb.StopReplicaResponse())
    request = pb.StopReplicaRequest(header=HEADER, partitions=[pb.TopicPartition(topic="t", partition=0)])
    try:
        ch.send(request)
        _wait(answers, 1)
    finally:
        ch.close()
    assert got == [request] and got[0] is not request
