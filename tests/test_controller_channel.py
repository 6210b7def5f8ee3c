"""node/net/channel.py's BrokerChannel over real gRPC on loopback: a resigned controller's channel stops as Kafka
2.8's ControllerChannelManager does on resignation (removeExistingBroker: its RequestSendThread stopped, its queue
cleared), so the requests it had not delivered are dropped and the one under way is not waited for."""
from __future__ import annotations

import threading
from concurrent import futures

import grpc
import pytest

from node.net.channel import BrokerChannel
from proto import kafkasim_pb2 as pb
from proto import kafkasim_pb2_grpc as pbg
from util.waiting import wait_for


class Broker(pbg.BrokerServicer):
    """Records each LeaderAndIsr by its controller epoch; the first one blocks until ``release`` is set, and
    notes whether its caller went away meanwhile."""

    def __init__(self) -> None:
        self.got: list[int] = []
        self.release = threading.Event()
        self.caller_gone = threading.Event()

    def LeaderAndIsr(self, request, context):
        self.got.append(request.header.controller_epoch)
        if len(self.got) == 1:
            context.add_callback(self.caller_gone.set)
            self.release.wait(30)
        return pb.LeaderAndIsrResponse()


def serve(servicer: Broker) -> tuple[grpc.Server, str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pbg.add_BrokerServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"127.0.0.1:{port}"


@pytest.fixture
def sent():
    """A broker, a channel to it with three LeaderAndIsr requests queued (controller epochs 1, 2, 3), and the
    epochs whose answers the channel reported."""
    broker = Broker()
    server, target = serve(broker)
    answered: list[int] = []
    ch = BrokerChannel(1, target, 10.0, lambda _b, _kind, req, _resp: answered.append(req.header.controller_epoch))
    for epoch in (1, 2, 3):
        ch.send(pb.LeaderAndIsrRequest(header=pb.ControllerHeader(controller_id=9, controller_epoch=epoch)))
    yield broker, ch, answered
    broker.release.set()
    ch.close()
    assert ch.join(10)
    server.stop(None)


def test_a_closed_channel_drops_what_it_had_not_delivered_and_cancels_the_request_under_way(sent):
    broker, ch, answered = sent
    wait_for(lambda: broker.got == [1], 10, "the first request under way at the broker")
    ch.close()
    wait_for(broker.caller_gone.is_set, 10, "the request under way cancelled by the close")
    assert ch.join(10), "the sender thread ended"
    broker.release.set()
    # the sender is gone, so nothing else can reach the broker: the two queued requests were dropped, and the
    # cancelled one's answer never reached the controller
    assert broker.got == [1]
    assert answered == []


def test_an_open_channel_delivers_every_request_in_order_and_reports_each_answer(sent):
    broker, _ch, answered = sent
    broker.release.set()
    wait_for(lambda: answered == [1, 2, 3], 10, "every answer, in order")
    assert broker.got == [1, 2, 3]
