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
import logging
import threading
import time
from typing import Any, Awaitable, Callable

from listener.protocol import BadRequest, Request, api_name, encode_response, error_name, parse_request
from node.storage.file_records import FileRecords

log = logging.getLogger("kafkasim.listener")

# unanswered requests read ahead on one connection (Kafka's clients send at most
# max.in.flight.requests.per.connection; librdkafka's default is 1,000,000)
MAX_IN_FLIGHT = 64
# a frame larger than this is not read ahead of: the next frame is read once it is answered, so a
# connection holds at most MAX_IN_FLIGHT such frames plus one larger one (up to socket.request.max.bytes)
READ_AHEAD_BYTES = 1 << 20

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
    """``listeners=PLAINTEXT://host:port``: an asyncio server on its own thread."""

    def __init__(self, host: str, port: int, dispatcher: Dispatcher, max_request_bytes: int,
                 emit: Callable[..., Any]) -> None:
        self.host = host
        self.port = port
        self.dispatcher = dispatcher
        self.max_request_bytes = max_request_bytes
        self.emit = emit
        self.loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._thread = threading.Thread(target=self.loop.run_forever, name="kafka-listener", daemon=True)
        self._conns: set[asyncio.StreamWriter] = set()

    def start(self) -> None:
        """Bind (raises OSError when the port is taken, and stops the thread) and serve on the listener's thread."""
        self._thread.start()
        fut = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self.serve_connection, self.host, self.port, reuse_address=True, limit=1 << 16), self.loop)
        try:
            self._server = fut.result(timeout=10)
        except BaseException:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(2)
            raise
        self.port = self._server.sockets[0].getsockname()[1]

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout_s: float = 2.0) -> None:
        if not self._thread.is_alive():
            return

        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for w in list(self._conns):
                w.close()
        try:
            asyncio.run_coroutine_threadsafe(close(), self.loop).result(timeout=timeout_s)
        except Exception:  # bounded: a stuck close must not hold the broker's stop
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout_s)

    async def serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection until the client goes or a frame closes it (the tests drive it with
        in-memory streams): frames are read ahead while earlier ones are handled, and answered in
        order by :meth:`_answer`."""
        peer = writer.get_extra_info("peername")
        conn = Connection(peer[:2] if peer else None)
        self._conns.add(writer)
        loop = asyncio.get_running_loop()
        answers: asyncio.Queue = asyncio.Queue(MAX_IN_FLIGHT)
        answering = loop.create_task(self._answer(answers, writer))
        previous: asyncio.Future | None = None
        try:
            while not answering.done():
                head = await reader.readexactly(4)
                size = int.from_bytes(head, "big", signed=True)
                if size < 0 or size > self.max_request_bytes:
                    self.emit("kafka_request", client_id=None, api=None, api_version=-1, correlation_id=-1,
                              error="INVALID_REQUEST", peer=f"{conn.peer_host}:{conn.peer_port}", closed=True,
                              reason=f"frame size {size} outside 0..{self.max_request_bytes} "
                                     f"(socket.request.max.bytes)", duration_ms=0.0)
                    break
                frame = await reader.readexactly(size)
                applied = loop.create_future()
                task = loop.create_task(self._one(frame, conn, previous, applied))
                previous = applied
                await answers.put(task)
                if size > READ_AHEAD_BYTES:
                    await asyncio.wait([task])
        except (asyncio.IncompleteReadError, ConnectionError):
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
                self._conns.discard(writer)
                writer.close()

    async def _one(self, frame: bytes, conn: Connection, previous: asyncio.Future | None,
                   applied: asyncio.Future) -> bytes | list | None:
        """One request, started once the one before it is done with the broker's state; raises
        BadRequest (the connection closes) and, then, so do the requests after it."""
        def done(ok: bool = True) -> None:
            if not applied.done():
                applied.set_result(ok)
        try:
            if previous is not None and not await previous:
                raise BadRequest("an earlier request on this connection closed it")
            try:
                out = await self.dispatcher.handle(frame, conn, done)
            except BaseException:
                done(False)
                raise
            done()
            return out
        finally:
            done(False)   # cancelled before it ran: nothing after it runs either

    async def _answer(self, answers: asyncio.Queue, writer: asyncio.StreamWriter) -> None:
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
                await writer.drain()   # returns at once unless the client reads slower than we write
        except ConnectionError:
            return
        finally:
            while not answers.empty():
                task = answers.get_nowait()
                if task is not None:
                    task.cancel()
            writer.close()


async def write_pieces(writer: asyncio.StreamWriter, pieces: list) -> None:
    """A response's pieces in order: bytes through the transport's buffer, a :class:`FileRecords`
    (a consumer Fetch's records) from its segment files with ``os.sendfile`` once the bytes before
    it are sent, as Kafka's ``FileRecords.writeTo`` uses ``transferTo``.  A stream without a socket
    (the tests' in-memory ones) gets the records read into memory.  Raises ConnectionError when a
    file was truncated under the send (Kafka fails the send too): the frame cannot be completed."""
    loop = asyncio.get_running_loop()
    has_socket = writer.get_extra_info("socket") is not None
    pending = []
    try:
        for piece in pieces:
            if not isinstance(piece, FileRecords):
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
            if isinstance(piece, FileRecords):
                piece.close()
