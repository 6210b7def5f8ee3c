"""The listener's TCP shell: size-prefixed frames on an asyncio loop in its own thread.

A connection's requests are read ahead (up to ``MAX_IN_FLIGHT`` unanswered) and
answered strictly in request order.  Each request starts only once the one
before it on the connection is done with the broker's state, so their effects
happen in request order as under Kafka's muted channel; a Produce is done with
the state once its batches are appended, so the next request starts while it
waits for acks=all (docs/deviations.md: Kafka mutes the connection until the
answer is sent).  A size prefix that is negative or above
``socket.request.max.bytes``, a frame that does not decode, an unknown API or
an unsupported version (but ApiVersions') close that connection only, after
the answers to the requests before it; the listener keeps serving the others.
Produce with acks=0 is answered with nothing.  Every request is a
``kafka_request`` event (docs/events.md).
"""
from __future__ import annotations

import asyncio
import functools
import logging
import socket
import threading
import time
from typing import Any, Awaitable, Callable

from listener.limits import Limits, Quotas
from listener.protocol import (BadRequest, Request, api_name, encode_response, error_name, parse_request,
                               stays_in_file)

log = logging.getLogger("kafkasim.listener")

# unanswered requests read ahead on one connection (Kafka's clients send at most
# max.in.flight.requests.per.connection; librdkafka's default is 1,000,000)
MAX_IN_FLIGHT = 64
# requests in progress on one connection, in bytes, above which the next frame is read only once they are
# answered: a connection holds at most this much plus one frame (up to socket.request.max.bytes)
READ_AHEAD_BYTES = 1 << 20
# connections the kernel holds for a listener that is not accepting (Kafka's socket.listen.backlog.size, 50)
LISTEN_BACKLOG = 50

# (request, connection context) -> response fields, or None for no response (acks=0 produce)
Handler = Callable[[Request, "Connection"], Awaitable[dict[str, Any] | None]]
# (request, response fields) -> the version to encode the response at (ApiVersions' error answer: v0)
VersionFor = Callable[[Request, dict[str, Any]], int]


class Connection:
    """What a handler may know about the connection a request came on."""

    def __init__(self, peer: tuple[str, int] | None) -> None:
        self.peer_host = peer[0] if peer else ""
        self.peer_port = peer[1] if peer else 0

    @property
    def peer_name(self) -> str:
        return f"{self.peer_host}:{self.peer_port}"

    @property
    def client_host(self) -> str:
        """The peer's address as Kafka shows a group member's client host ("/127.0.0.1")."""
        return "/" + self.peer_host


class CloseConnection(Exception):
    """Raised by a handler that answers by closing the connection (Kafka does so when an acks=0
    produce fails, so that the producer refreshes its metadata)."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def first_error(values: Any) -> int:
    """The response's top-level error code, else the first non-zero one nested in it."""
    if isinstance(values, dict):
        top = values.get("error_code")
        if top:
            return top
        for v in values.values():
            if isinstance(v, (list, dict)):
                code = first_error(v)
                if code:
                    return code
    elif isinstance(values, list):
        for v in values:
            code = first_error(v)
            if code:
                return code
    return 0


class Dispatcher:
    """Frame in, frame out: the part of the listener that tests drive in process."""

    def __init__(self, handlers: dict[int, Handler], emit: Callable[..., Any],
                 version_for: VersionFor | None = None) -> None:
        self.handlers = handlers
        self.emit = emit
        self.version_for = version_for or (lambda req, values: req.api_version)

    async def handle(self, frame: bytes, conn: Connection,
                     applied: Callable[[], None] | None = None) -> bytes | list | None:
        """The framed response to one request frame (bytes, or a list of pieces to write in order:
        ``protocol.joined``), or None (no response due).
        Raises BadRequest when the connection must be closed.  ``applied`` is called once the
        request is done with the broker's state (a Produce: its batches appended), at the latest
        when it is answered: the connection's next request may start then."""
        t0 = time.monotonic_ns()
        try:
            req = parse_request(frame)
            if applied is not None:
                req.applied = applied
        except BadRequest as e:
            self.emit("kafka_request", client_id=e.client_id, api=api_name(e.api_key) if e.api_key >= 0 else None,
                      api_version=e.api_version, correlation_id=e.correlation_id, error="INVALID_REQUEST",
                      peer=f"{conn.peer_host}:{conn.peer_port}", closed=True, reason=e.reason, duration_ms=0.0)
            raise
        handler = self.handlers[req.api_key]
        try:
            values = await handler(req, conn)
            out = None if values is None else encode_response(req, values, self.version_for(req, values))
        except CloseConnection as e:
            self._event(req, conn, e.code, t0, closed=True, no_response=True, reason=e.reason)
            raise BadRequest(e.reason, req.api_key, req.api_version, req.correlation_id, req.client_id) from None
        except Exception as e:  # a handler bug must not kill the listener: answer nothing, close
            log.exception("%s v%d failed", req.api, req.api_version)
            self._event(req, conn, -1, t0, closed=True, reason=repr(e))
            raise BadRequest(f"{req.api} failed: {e!r}", req.api_key, req.api_version, req.correlation_id,
                             req.client_id) from e
        if values is None:
            self._event(req, conn, 0, t0, no_response=True)
            return None
        self._event(req, conn, first_error(values), t0)
        return out

    def _event(self, req: Request, conn: Connection, code: int, t0: int, **extra: Any) -> None:
        self.emit("kafka_request", client_id=req.client_id, api=req.api, api_version=req.api_version,
                  correlation_id=req.correlation_id, error=error_name(code),
                  peer=f"{conn.peer_host}:{conn.peer_port}", duration_ms=round((time.monotonic_ns() - t0) / 1e6, 3),
                  **extra)


class KafkaListener:
    """``listeners=PLAINTEXT://host:port``: an asyncio server on its own thread, within ``limits`` (listener/limits.py),
    its broker-wide counts in ``quotas`` (shared by the broker's listeners; its own when none is given)."""

    def __init__(self, host: str, port: int, dispatcher: Dispatcher, limits: Limits, emit: Callable[..., Any],
                 quotas: Quotas | None = None) -> None:
        self.host = host
        self.port = port
        self.dispatcher = dispatcher
        self.limits = limits
        self.quotas = quotas or Quotas(limits)
        self.emit = emit
        self.loop = asyncio.new_event_loop()
        self._sock: socket.socket | None = None
        self._tasks: set[asyncio.Task] = set()
        self._thread = threading.Thread(target=self.loop.run_forever, name="kafka-listener", daemon=True)
        self._conns: dict[asyncio.StreamWriter, _ConnState] = {}

    @property
    def max_request_bytes(self) -> int:
        return self.limits.max_request_bytes

    def start(self) -> None:
        """Bind (raises OSError when the port is taken, and stops the thread) and serve on the listener's thread."""
        self._thread.start()
        try:
            sock = socket.create_server((self.host, self.port), reuse_port=False, backlog=LISTEN_BACKLOG)
        except BaseException:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(2)
            raise
        sock.setblocking(False)
        self._sock = sock
        self.port = sock.getsockname()[1]
        asyncio.run_coroutine_threadsafe(self._start_tasks(), self.loop).result(timeout=10)

    async def _start_tasks(self) -> None:
        for coro in (self._accept(), self._sweep()):
            task = asyncio.get_running_loop().create_task(coro)
            self._tasks.add(task)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout_s: float = 2.0) -> None:
        if not self._thread.is_alive():
            return

        async def close() -> None:
            await self._write_ready()
            for t in self._tasks:
                t.cancel()
            if self._sock is not None:
                self._sock.close()
            for w in list(self._conns):
                w.close()
        try:
            asyncio.run_coroutine_threadsafe(close(), self.loop).result(timeout=timeout_s)
        except Exception:  # bounded: a stuck close must not hold the broker's stop
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout_s)

    async def _write_ready(self, bound_s: float = 0.1) -> None:
        """Before the connections close: answers already decided (a parked JoinGroup answered NOT_COORDINATOR by
        the coordinator's unload, from its thread) get written.  Their wake-ups are queued on this loop ahead of
        the stop, and a request's handler then needs a few steps of the loop to write its answer: so the loop runs
        a few steps, and more while a connection has a handled request it has not written, within ``bound_s``."""
        deadline = time.monotonic() + bound_s
        steps = 0
        while time.monotonic() < deadline and (steps < 8 or any(st.handled > st.written for st in self._conns.values())):
            await asyncio.sleep(0)
            steps += 1

    async def _accept(self) -> None:
        """Kafka's acceptor: at ``max.connections`` it accepts nothing (clients wait in the backlog) until a
        connection closes; a connection from an address at its ``max.connections.per.ip`` is closed at once."""
        loop = asyncio.get_running_loop()
        gate = self.quotas.connections
        while True:
            if not gate.try_take():
                self.emit("kafka_connection_limit", limit="max.connections", value=gate.capacity, reached=True,
                          open=gate.count)
                await gate.take()
                self.emit("kafka_connection_limit", limit="max.connections", value=gate.capacity, reached=False,
                          open=gate.count)
            try:
                sock, addr = await loop.sock_accept(self._sock)
            except OSError:        # the listening socket closed (stop), or a transient accept failure
                gate.give()
                if self._sock is None or self._sock.fileno() < 0:
                    return
                continue
            except BaseException:
                gate.give()
                raise
            refused = self.quotas.admit(addr[0])
            if refused is not None:
                self.emit("kafka_connection_closed", peer=f"{addr[0]}:{addr[1]}", reason="max.connections.per.ip",
                          limit=refused, open_ms=0.0)
                gate.give()
                sock.close()
                continue
            task = loop.create_task(self._serve_socket(sock, addr))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _serve_socket(self, sock: socket.socket, addr: tuple) -> None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            reader, writer = await asyncio.open_connection(sock=sock, limit=1 << 16)
            await self.serve_connection(reader, writer)
        finally:
            self.quotas.release(addr[0])
            self.quotas.connections.give()

    async def _sweep(self) -> None:
        """Closes connections idle past ``connections.max.idle.ms`` and frames left half-sent past
        ``request.timeout.ms``."""
        interval = self.limits.sweep_interval_s()
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for writer, st in list(self._conns.items()):
                why = st.expired(now, self.limits)
                if why is not None and not st.closing:
                    st.closing = True
                    reason, after_ms, limit = why
                    self.emit("kafka_connection_closed", peer=st.conn.peer_name, reason=reason, limit=limit,
                              after_ms=round(after_ms, 1), open_ms=round((now - st.opened) * 1000, 1),
                              partial_bytes=st.partial_bytes)
                    writer.close()

    async def serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection until the client goes or a frame closes it (the tests drive it with
        in-memory streams): frames are read ahead while earlier ones are handled, and answered in
        order by :meth:`_answer`.  Read-ahead stops at ``MAX_IN_FLIGHT`` requests, at ``READ_AHEAD_BYTES`` of
        requests in progress, and while the broker's ``queued.max.requests`` are all taken, so a connection
        holds at most one frame above ``READ_AHEAD_BYTES`` (up to ``socket.request.max.bytes``) beside them."""
        peer = writer.get_extra_info("peername")
        conn = Connection(peer[:2] if peer else None)
        st = _ConnState(conn, time.monotonic())
        self._conns[writer] = st
        loop = asyncio.get_running_loop()
        answers: asyncio.Queue = asyncio.Queue(MAX_IN_FLIGHT)
        answering = loop.create_task(self._answer(answers, writer, st))
        previous: asyncio.Future | None = None
        buf = bytearray()
        paused = False
        try:
            while not answering.done():
                if len(buf) >= 4:
                    size = int.from_bytes(buf[:4], "big", signed=True)
                    if size < 0 or size > self.max_request_bytes:
                        self.emit("kafka_request", client_id=None, api=None, api_version=-1, correlation_id=-1,
                                  error="INVALID_REQUEST", peer=conn.peer_name, closed=True,
                                  reason=f"frame size {size} outside 0..{self.max_request_bytes} "
                                         f"(socket.request.max.bytes)", duration_ms=0.0)
                        break
                    if len(buf) >= 4 + size:
                        frame = bytes(buf[4:4 + size])
                        del buf[:4 + size]
                        st.partial_bytes = len(buf)
                        await self.quotas.requests.take()
                        st.pending += 1
                        st.pending_bytes += size
                        applied = loop.create_future()
                        queued = _Queued(self.quotas)
                        task = loop.create_task(self._one(frame, conn, previous, applied, queued.leave))
                        task.add_done_callback(functools.partial(_finished, queued, st, size))
                        previous = applied
                        await answers.put(task)
                        if st.pending_bytes > READ_AHEAD_BYTES:
                            await asyncio.wait([task])
                        paused = True
                        continue
                want = 4 - len(buf) if len(buf) < 4 else 4 + size - len(buf)
                if paused:   # a frame begun before a pause in our reading (not the client's) gets its whole bound
                    st.frame_started = time.monotonic() if buf else None
                    paused = False
                chunk = await reader.read(max(want, 1 << 16))
                if not chunk:
                    break
                st.last_io = time.monotonic()
                if not buf:
                    st.frame_started = st.last_io
                buf += chunk
                st.partial_bytes = len(buf)
        except ConnectionError:
            pass  # the client went away (maybe mid-frame): what it sent before is still answered
        finally:
            if not answering.done():
                await answers.put(None)
            try:
                await answering
            finally:
                while not answers.empty():   # read after the request that closed the connection
                    task = answers.get_nowait()
                    if task is not None:
                        task.cancel()
                self._conns.pop(writer, None)
                writer.close()

    async def _one(self, frame: bytes, conn: Connection, previous: asyncio.Future | None,
                   applied: asyncio.Future, started: Callable[[], None] = lambda: None) -> bytes | list | None:
        """One request, started once the one before it is done with the broker's state (``started`` is called
        then); raises BadRequest (the connection closes) and, then, so do the requests after it."""
        def done(ok: bool = True) -> None:
            if not applied.done():
                applied.set_result(ok)
        try:
            if previous is not None and not await previous:
                raise BadRequest("an earlier request on this connection closed it")
            started()
            try:
                out = await self.dispatcher.handle(frame, conn, done)
            except BaseException:
                done(False)
                raise
            done()
            return out
        finally:
            done(False)   # cancelled before it ran: nothing after it runs either

    async def _answer(self, answers: asyncio.Queue, writer: asyncio.StreamWriter, st: "_ConnState") -> None:
        """Writes the answers in request order; stops at the first request that closes the
        connection (or at the end of the requests), cancelling those read after it."""
        try:
            while (task := await answers.get()) is not None:
                try:
                    out = await task
                except BadRequest:
                    return
                if out is None:
                    continue
                if isinstance(out, list):    # pieces around large byte fields (protocol.encode_response)
                    await write_pieces(writer, out)
                else:
                    writer.write(out)
                st.written += 1
                await writer.drain()   # returns at once unless the client reads slower than we write
                st.last_io = time.monotonic()
        except ConnectionError:
            return
        finally:
            while not answers.empty():
                task = answers.get_nowait()
                if task is not None:
                    task.cancel()
            writer.close()


class _ConnState:
    """What the listener's sweep knows of a connection: its last read or write, the start of a frame not yet
    whole, the requests in progress."""

    __slots__ = ("conn", "opened", "last_io", "frame_started", "partial_bytes", "pending", "pending_bytes",
                 "closing", "handled", "written")

    def __init__(self, conn: Connection, now: float) -> None:
        self.conn = conn
        self.opened = self.last_io = now
        self.frame_started: float | None = None
        self.partial_bytes = 0
        self.pending = 0
        self.pending_bytes = 0
        self.closing = False
        self.handled = 0     # requests whose handling ended (answered, failed or cancelled)
        self.written = 0     # answers written

    def expired(self, now: float, limits: Limits) -> tuple[str, float, int] | None:
        """(reason, ms since, the bound) when the connection is to be closed, else None."""
        if self.frame_started is not None and (now - self.frame_started) * 1000 > limits.partial_frame_ms:
            return "partial_frame", (now - self.frame_started) * 1000, limits.partial_frame_ms
        if self.pending == 0 and (now - self.last_io) * 1000 > limits.idle_ms:
            return "idle", (now - self.last_io) * 1000, limits.idle_ms
        return None


class _Queued:
    """A request's place among the broker's ``queued.max.requests``: from when it is read until a handler starts
    on it (as a request leaves Kafka's request queue when a handler thread takes it; a JoinGroup parked in the
    coordinator holds no place), or until it ends without starting."""

    __slots__ = ("quotas", "left")

    def __init__(self, quotas: Quotas) -> None:
        self.quotas = quotas
        self.left = False

    def leave(self) -> None:
        if not self.left:
            self.left = True
            self.quotas.requests.give()


def _finished(queued: _Queued, st: _ConnState, size: int, task: asyncio.Task) -> None:
    """A request's task ended (answered, failed or cancelled)."""
    st.pending -= 1
    st.pending_bytes -= size
    if not task.cancelled() and task.exception() is None and task.result() is not None:
        st.handled += 1
    queued.leave()


async def write_pieces(writer: asyncio.StreamWriter, pieces: list) -> None:
    """A response's pieces in order: bytes through the transport's buffer, records that stay in their files
    (``stays_in_file``: a consumer Fetch's records) from their segment files with ``os.sendfile`` once the
    bytes before them are sent, as Kafka's ``FileRecords.writeTo`` uses ``transferTo``.  A stream without a socket
    (the tests' in-memory ones) gets the records read into memory.  Raises ConnectionError when a
    file was truncated under the send (Kafka fails the send too): the frame cannot be completed."""
    loop = asyncio.get_running_loop()
    has_socket = writer.get_extra_info("socket") is not None
    pending = []
    try:
        for piece in pieces:
            if not stays_in_file(piece):
                pending.append(piece)
                continue
            if not has_socket:
                data = piece.read()
                if len(data) != len(piece):
                    raise ConnectionError(f"segment truncated: {len(data)} of {len(piece)} record bytes read")
                pending.append(data)
                continue
            writer.writelines(pending)
            pending = []
            for s in piece.slices:
                if writer.transport.is_closing():
                    raise ConnectionError("connection closed")
                sent = await loop.sendfile(writer.transport, s.file, s.position, s.size)
                if sent != s.size:
                    raise ConnectionError(f"segment truncated: {sent} of {s.size} record bytes sent")
        writer.writelines(pending)
    finally:
        for piece in pieces:
            if stays_in_file(piece):
                piece.close()
