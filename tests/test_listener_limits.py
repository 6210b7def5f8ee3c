"""The Kafka listener's connection limits (listener/limits.py), on a real listener on loopback, in process.

max.connections.per.ip closes one connection too many at once; max.connections stops accepting until one
closes; queued.max.requests stops reading while that many requests wait to start; connections.max.idle.ms
closes an idle connection; request.timeout.ms drops a frame left half-sent, also one trickled in byte by byte.
Each closing is a ``kafka_connection_closed`` event."""
from __future__ import annotations

import asyncio
import socket
import struct
import threading

import pytest
from kafka.protocol.metadata import ApiVersionsRequest

from listener.app import make_dispatcher
from listener.limits import Gate, LimitError, Limits, parse_overrides
from listener.server import Dispatcher, KafkaListener
from util.waiting import wait_for
from tests.test_listener_codec import _closed, _framed, _read_frame, make_ctx


class Running:
    """A started listener with ``limits`` and the events it emitted."""

    def __init__(self, limits: Limits, dispatcher: Dispatcher | None = None) -> None:
        self.events: list[tuple[str, dict]] = []
        emit = lambda type_, **f: self.events.append((type_, f))   # noqa: E731
        self.listener = KafkaListener("127.0.0.1", 0, dispatcher or make_dispatcher(make_ctx(), emit), limits, emit)
        self.listener.start()
        self.socks: list[socket.socket] = []

    def connect(self) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", self.listener.port), timeout=10)
        self.socks.append(s)
        return s

    def of(self, kind: str) -> list[dict]:
        return [f for t, f in list(self.events) if t == kind]

    def close(self) -> None:
        for s in self.socks:
            s.close()
        self.listener.stop()


def answered(s: socket.socket, corr: int) -> bool:
    s.sendall(_framed(ApiVersionsRequest(version=2), corr))
    return struct.unpack_from(">i", _read_frame(s), 4)[0] == corr


@pytest.fixture
def running():
    made: list[Running] = []

    def make(limits: Limits, dispatcher: Dispatcher | None = None) -> Running:
        made.append(Running(limits, dispatcher))
        return made[-1]
    yield make
    for r in made:
        r.close()


def test_one_connection_too_many_from_an_address_is_closed_at_once(running) -> None:
    r = running(Limits(max_per_ip=2))
    a, b = r.connect(), r.connect()
    assert answered(a, 1) and answered(b, 2)
    c = r.connect()
    assert _closed(c)
    assert r.of("kafka_connection_closed")[0]["reason"] == "max.connections.per.ip"
    assert r.of("kafka_connection_closed")[0]["limit"] == 2
    a.close()
    wait_for(lambda: r.listener.quotas.of("127.0.0.1") == 1, 10, "the closed connection to be counted out")
    assert answered(r.connect(), 3)


def test_an_override_gives_one_address_its_own_limit(running) -> None:
    r = running(Limits(max_per_ip=0, per_ip_overrides=parse_overrides("127.0.0.1:1")))
    assert answered(r.connect(), 1)
    assert _closed(r.connect())


def test_at_max_connections_the_listener_accepts_no_more_until_one_closes(running) -> None:
    r = running(Limits(max_connections=2))
    a, b = r.connect(), r.connect()
    assert answered(a, 1) and answered(b, 2)
    c = r.connect()            # the kernel completes the handshake; the listener does not take it up
    c.sendall(_framed(ApiVersionsRequest(version=2), 3))
    wait_for(lambda: r.of("kafka_connection_limit") and r.listener.quotas.connections.waiting == 1, 10,
             "the listener to stop accepting")
    assert r.of("kafka_connection_limit")[0] == {"limit": "max.connections", "value": 2, "reached": True, "open": 2}
    a.close()
    assert struct.unpack_from(">i", _read_frame(c), 4)[0] == 3    # taken up once a slot is free
    # accepting again, then at the limit again with the new one
    assert [e["reached"] for e in r.of("kafka_connection_limit")][:3] == [True, False, True]


def test_an_idle_connection_is_closed_and_a_busy_one_is_not(running) -> None:
    r = running(Limits(idle_ms=400))
    idle, busy = r.connect(), r.connect()
    assert answered(idle, 1)
    n = 2

    def still_serving() -> bool:   # the busy one keeps sending requests while the idle one times out
        nonlocal n
        n += 1
        assert answered(busy, n)
        return any(f["reason"] == "idle" for f in r.of("kafka_connection_closed"))
    wait_for(still_serving, 20, "the idle connection to be closed", interval=0.05)
    assert _closed(idle)
    (closed,) = r.of("kafka_connection_closed")
    assert closed["reason"] == "idle" and closed["limit"] == 400 and closed["after_ms"] >= 400
    assert answered(busy, n + 1)


@pytest.mark.parametrize("trickle", [False, True])
def test_a_frame_left_half_sent_is_dropped_after_request_timeout_ms(running, trickle: bool) -> None:
    r = running(Limits(partial_frame_ms=500, idle_ms=600_000))
    s = r.connect()
    whole = _framed(ApiVersionsRequest(version=2), 7)
    if not trickle:
        s.sendall(whole[:9])         # the size prefix and part of the header, then nothing
    else:                            # one byte at a time, never finishing within the bound
        sent = [0]

        def drip() -> bool:
            if sent[0] < len(whole) - 1:
                try:
                    s.sendall(whole[sent[0]:sent[0] + 1])
                except (BrokenPipeError, ConnectionResetError):
                    pass     # dropped already: closed with a byte unread, the kernel answered the next with a reset
                sent[0] += 1
            return bool(r.of("kafka_connection_closed"))
        wait_for(drip, 30, "the trickled frame to be dropped", interval=0.05)
    wait_for(lambda: r.of("kafka_connection_closed"), 20, "the half-sent frame to be dropped")
    (closed,) = r.of("kafka_connection_closed")
    assert closed["reason"] == "partial_frame" and closed["after_ms"] >= 500 and closed["partial_bytes"] > 0
    assert _closed(s)
    assert answered(r.connect(), 8)    # the listener serves on


def test_at_queued_max_requests_no_connection_is_read_from_until_one_starts(running) -> None:
    """Requests wait in the queue until a handler starts on them: one connection's blocked first request holds
    its next two back (they start in order), which fill a queue of two; another connection's request is read
    only when they start."""
    release = threading.Event()

    async def slow(req, conn):
        if req.correlation_id == 1:
            await asyncio.get_running_loop().run_in_executor(None, release.wait, 30)
        return {"error_code": 0, "api_keys": [], "throttle_time_ms": 0}
    r = running(Limits(queued_max_requests=2), Dispatcher({18: slow}, lambda *a, **k: None))
    a, b = r.connect(), r.connect()
    a.sendall(b"".join(_framed(ApiVersionsRequest(version=2), c) for c in (1, 2, 3)))
    gate = r.listener.quotas.requests
    wait_for(lambda: gate.full, 10, "the queue to fill")
    b.sendall(_framed(ApiVersionsRequest(version=2), 10))
    wait_for(lambda: gate.waiting == 1, 10, "the other connection's request to wait for a place")
    release.set()
    assert [struct.unpack_from(">i", _read_frame(a), 4)[0] for _ in range(3)] == [1, 2, 3]
    assert struct.unpack_from(">i", _read_frame(b), 4)[0] == 10


def test_a_gate_wakes_a_waiter_on_another_threads_loop() -> None:
    gate = Gate(1)
    assert gate.try_take() and not gate.try_take()
    got = threading.Event()

    def other() -> None:
        async def take() -> None:
            await gate.take()
            got.set()
        asyncio.run(take())
    t = threading.Thread(target=other)
    t.start()
    wait_for(lambda: gate.waiting == 1, 10, "the other thread to wait")
    gate.give()
    t.join(10)
    assert got.is_set() and gate.count == 1


@pytest.mark.parametrize("text,why", [("127.0.0.1", "host:count"), ("127.0.0.1:x", "not a count"),
                                      ("127.0.0.1:-1", "negative"), ("no-such-host.invalid:3", "does not resolve")])
def test_bad_overrides_are_refused_naming_the_item(text: str, why: str) -> None:
    with pytest.raises(LimitError, match=why):
        parse_overrides(text)
