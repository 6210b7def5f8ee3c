"""A follower's fetcher keeps one connection to its leader (issue 49, rpc49): a parked poll cut short to take up a
new partition is cancelled at the leader, and the next request comes on the same connection; node/net/peers.py's
channels share a connection only under the same name."""
from __future__ import annotations

import threading
from concurrent import futures
from types import SimpleNamespace

import grpc

from kafkacommon import errors
from node.net.peers import peer_channel
from node.replicas.fetcher import LeaderFetcher
from proto import kafkasim_pb2 as pb
from proto import kafkasim_pb2_grpc as pbg
from util.waiting import wait_for


def _until(pred, timeout: float = 10.0) -> None:
    wait_for(pred, timeout, "the leader's calls", interval=0.005)


class _Leader(pbg.BrokerServicer):
    """Every Fetch parks until it is cancelled (or the test ends); records each call's peer, partitions listed and
    whether it ended by a cancel."""

    def __init__(self) -> None:
        self.calls: list[dict] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def Fetch(self, request, context):
        ended = threading.Event()
        call = {"peer": context.peer(), "listed": sorted((p.topic, p.partition) for p in request.partitions),
                "cancelled": False}
        with self.lock:
            self.calls.append(call)
        context.add_callback(ended.set)
        while not ended.is_set() and not self.stop.is_set():
            ended.wait(0.05)
        call["cancelled"] = not context.is_active() and not self.stop.is_set()
        return pb.FetchResponse(error_code=errors.NONE)



def _server(servicer):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    pbg.add_BrokerServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"127.0.0.1:{port}"


def _hosted(leader: int, epoch: int):
    log = SimpleNamespace(closed=False, log_end_offset=0, log_start_offset=0,
                          epoch_cache=SimpleNamespace(latest_epoch=-1))
    return SimpleNamespace(cond=threading.Condition(), log=log, repl=SimpleNamespace(high_watermark=0),
                           fetching_from=(leader, epoch))


def test_a_cut_poll_is_cancelled_at_the_leader_and_the_next_request_comes_on_the_same_connection() -> None:
    leader = _Leader()
    server, target = _server(leader)
    events: list = []
    owner = SimpleNamespace(broker_id=2, fetch_wait_ms=5000, fetch_max_bytes=1 << 20,
                            events=SimpleNamespace(emit=lambda *a, **k: events.append((a, k))),
                            endpoint_of=lambda b: target, broker_epoch=lambda: 1, log_events=lambda e: None)
    f = LeaderFetcher(owner, 1)
    try:
        f.assign(("t", 0), _hosted(1, 5), 5)
        f.start()
        _until(lambda: len(leader.calls) == 1)    # parked at the leader (the fetcher marks a poll before it sends)
        f.assign(("t", 1), _hosted(1, 5), 5)   # not in the parked poll: cut it short
        _until(lambda: len(leader.calls) >= 2)
        first, second = leader.calls[0], leader.calls[1]
        _until(lambda: first["cancelled"])
        assert first["listed"] == [("t", 0)]
        assert ("t", 1) in second["listed"]
        assert second["peer"] == first["peer"]      # the same connection: no new TCP and HTTP/2 set-up
        assert not events
    finally:
        f.stop()
        leader.stop.set()
        f.join(10)
        server.stop(0)


def test_peer_channels_share_a_connection_only_under_the_same_name() -> None:
    peers: list[str] = []

    def echo(req, ctx):
        peers.append(ctx.peer())
        return req

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "t.S", {"Echo": grpc.unary_unary_rpc_method_handler(echo, lambda b: b, lambda b: b)}),))
    target = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
    server.start()
    channels = [peer_channel(target, share="a"), peer_channel(target, share="a"), peer_channel(target, share="b"),
                peer_channel(target), peer_channel(target)]
    try:
        for ch in channels:
            ch.unary_unary("/t.S/Echo", request_serializer=None, response_deserializer=None)(b"x", timeout=10)
        a1, a2, b, own1, own2 = peers
        assert a1 == a2
        assert len({a1, b, own1, own2}) == 4
        channels[0].close()          # the connection outlives one of its channels
        channels[1].unary_unary("/t.S/Echo", request_serializer=None, response_deserializer=None)(b"x", timeout=10)
        assert peers[-1] == a1
    finally:
        for ch in channels:
            ch.close()
        server.stop(0)
