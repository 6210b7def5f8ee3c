"""A per-link TCP fault proxy, run as its own OS process and driven over a loopback control socket.

    python -m chaos.proxy --seed S [--control-port 0] [--ready-file PATH] [--parent-pid P]

A *link* (``"b1->b2"``, ``"b1->zk2"``, ``"client->b3"``: source node -> destination
node) listens on ``127.0.0.1:<port>`` and forwards every connection it accepts to
one upstream ``host:port``.  Each connection is full duplex: ``out`` is the bytes
from the connecting side towards upstream (src->dst), ``back`` the replies
(dst->src).  Each link has rules per direction, changeable at any moment while
connections are open:

``blocked``
    A partition.  The proxy stops reading the sending socket (TCP back-pressure
    builds as with dropped packets) and holds what it had already read.  On heal
    the held bytes and everything after are forwarded in order.  While ``out`` is
    blocked, new connections are accepted but upstream is not dialled until the
    heal (the SYNs are "dropped": no data ever flows).  An EOF, or a hard close
    of one side, only reaches the other side once the direction is unblocked.
``latency_ms`` / ``jitter_ms``
    Every chunk read is held for latency +/- uniform(jitter) ms, but never
    released before the previous chunk of the same connection and direction.
``loss``
    TCP cannot lose bytes, so the proxy models what an application sees when
    packets are lost: a retransmission stall.  Each chunk, with probability
    ``loss``, is held for a retransmission timeout on top of its latency: 200 ms,
    doubling with each consecutive loss in the same connection direction, capped
    at 3.2 s; the first chunk that is not lost resets the timeout.  Order is still
    preserved, so a lost chunk also stalls every chunk behind it (head-of-line
    blocking, as in TCP).

The ``reset`` action closes every open connection of a link at once, both sides,
with an RST (SO_LINGER 0).  Jitter and loss draw from ``random.Random(f"{seed}:{link}")``
(:class:`LinkRandom`), never from the global generator.

With no rules on a direction, a chunk (at most 64 KiB) is written straight to the
other socket: no queue, no timer.  Back-pressure follows the sockets' own flow
control; with delays, at most ``HELD_HIGH`` bytes are queued per connection
direction before the proxy stops reading the sender.

Control: newline-delimited JSON requests on ``127.0.0.1:<control-port>``, one JSON
line back per request, ``{"ok": true, ...}`` or ``{"ok": false, "error": "..."}``.
Ops: ``add_link`` (name, upstream, listen_port), ``set`` (link, direction,
blocked, latency_ms, jitter_ms, loss), ``clear`` (link), ``clear_all``, ``reset``
(link), ``stats``, ``shutdown``.  A bad request changes nothing.  The client side
is :class:`chaos.proxy_control.ProxyProcess`.

The process writes ``{"control_port": N, "pid": P}`` to the ready file (atomically)
once listening, and exits on SIGTERM, on ``shutdown``, or when its parent dies.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import struct
import sys
from collections import deque
from pathlib import Path
from typing import Any

from chaos.proxy_control import DIRECTIONS, RULE_FIELDS, BadRequest, parse_request
from chaos.proxy_control import ProxyError, ProxyProcess

__all__ = ["LinkRandom", "ProxyError", "ProxyProcess", "rto_ms", "main"]

CHUNK = 64 * 1024
RTO_INITIAL_MS = 200.0
RTO_MAX_MS = 3200.0
HELD_HIGH = 4 * 1024 * 1024  # queued bytes per connection direction before the sender is paused
HELD_LOW = 1 * 1024 * 1024   # ... and resumed
PARENT_POLL_S = 0.5


def rto_ms(consecutive_losses: int) -> float:
    """The retransmission timeout after ``consecutive_losses`` earlier losses in a row."""
    return min(RTO_MAX_MS, RTO_INITIAL_MS * 2 ** min(consecutive_losses, 8))


class LinkRandom:
    """The per-link random source: the same (seed, link) gives the same draws in any process."""

    def __init__(self, seed: int | str, link: str) -> None:
        self._rng = random.Random(f"{seed}:{link}")

    def chunk_delay_ms(self, latency_ms: float, jitter_ms: float, loss: float,
                       consecutive_losses: int = 0) -> tuple[float, bool]:
        """(delay in ms, lost?) for one chunk.  Draws once for jitter (if any), once for loss (if any)."""
        delay = latency_ms
        if jitter_ms > 0:
            delay += self._rng.uniform(-jitter_ms, jitter_ms)
        lost = loss > 0 and self._rng.random() < loss
        if lost:
            delay += rto_ms(consecutive_losses)
        return max(0.0, delay), lost


class Rules:
    """The rules of one direction of one link (mutated in place: flows hold a reference)."""
    __slots__ = ("blocked", "latency_ms", "jitter_ms", "loss", "delayed", "active")

    def __init__(self) -> None:
        self.update({"blocked": False, "latency_ms": 0.0, "jitter_ms": 0.0, "loss": 0.0})

    def update(self, fields: dict[str, Any]) -> None:
        for k, v in fields.items():
            setattr(self, k, v)
        self.delayed = self.latency_ms > 0 or self.jitter_ms > 0 or self.loss > 0
        self.active = self.blocked or self.delayed

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in RULE_FIELDS}


_EOF = object()    # marker: the sender half-closed; write_eof() on the receiver
_CLOSE = object()  # marker: the sender is gone; close the receiver


class Flow:
    """One direction of one connection: bytes read from ``src`` are written to ``dst``."""
    __slots__ = ("conn", "link", "direction", "rules", "src", "dst", "queue", "queued",
                 "last_release", "losses", "timer", "dst_paused", "finished", "loop")

    def __init__(self, conn: "Conn", direction: str, src: asyncio.Transport, dst: asyncio.Transport) -> None:
        self.conn, self.link, self.direction = conn, conn.link, direction
        self.rules: Rules = conn.link.rules[direction]
        self.src, self.dst, self.loop = src, dst, conn.loop
        self.queue: deque[tuple[float, Any, int]] = deque()
        self.queued = 0
        self.last_release = 0.0
        self.losses = 0
        self.timer: asyncio.TimerHandle | None = None
        self.dst_paused = False
        self.finished = False

    def on_data(self, data: bytes) -> None:
        if self.finished:
            return
        if not self.queue and not self.rules.active:   # the fast path
            self.dst.write(data)
            self.link.forwarded[self.direction] += len(data)
            return
        r = self.rules
        delay = 0.0
        if r.delayed:
            delay, lost = self.link.rng.chunk_delay_ms(r.latency_ms, r.jitter_ms, r.loss, self.losses)
            self.losses = self.losses + 1 if lost else 0
        self._enqueue(data, len(data), delay)

    def on_marker(self, marker: object) -> None:
        if self.finished:
            return
        if not self.queue and not self.rules.active:
            self._deliver_marker(marker)
        else:
            self._enqueue(marker, 0, self.rules.latency_ms)

    def _enqueue(self, item: Any, size: int, delay_ms: float) -> None:
        release = max(self.loop.time() + delay_ms / 1000.0, self.last_release)
        self.last_release = release
        self.queue.append((release, item, size))
        self.queued += size
        self.link.held[self.direction] += size
        self.pump()

    def pump(self) -> None:
        if self.finished or self.rules.blocked:
            self.update_reading()
            return
        q, now = self.queue, self.loop.time()
        while q:
            release, item, size = q[0]
            if release > now:
                if self.timer is None or self.timer.when() != release:
                    if self.timer is not None:
                        self.timer.cancel()
                    self.timer = self.loop.call_at(release, self._fire)
                break
            q.popleft()
            if item is _EOF or item is _CLOSE:
                self._deliver_marker(item)
                return
            self.queued -= size
            self.link.held[self.direction] -= size
            self.link.forwarded[self.direction] += size
            self.dst.write(item)
        self.update_reading()

    def _fire(self) -> None:
        self.timer = None
        self.pump()

    def _deliver_marker(self, marker: object) -> None:
        self.finished = True
        if marker is _EOF:
            if not self.dst.is_closing() and self.dst.can_write_eof():
                self.dst.write_eof()
        else:
            self.dst.close()
        self.conn.check_done()

    def update_reading(self) -> None:
        """Read ``src`` unless blocked, ``dst`` is full, or too much is queued."""
        src = self.src
        if self.finished or src.is_closing():
            return
        reading = src.is_reading()
        full = self.queued > (HELD_HIGH if reading else HELD_LOW)
        if self.rules.blocked or self.dst_paused or full:
            if reading:
                src.pause_reading()
        elif not reading:
            src.resume_reading()

    def kill(self) -> None:
        """Drop everything: ``dst`` is gone, or the connection is torn down."""
        self.finished = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.link.held[self.direction] -= self.queued
        self.queued = 0
        self.queue.clear()


def _rst(transport: asyncio.BaseTransport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    transport.abort()


class _Side(asyncio.BufferedProtocol):
    """The protocol of one socket of a proxied connection (the client's, or upstream's)."""

    def __init__(self, link: "Link", conn: "Conn | None" = None) -> None:
        self.link, self.conn = link, conn
        self.view = memoryview(bytearray(CHUNK))
        self.inflow: Flow | None = None   # reads from this socket
        self.outflow: Flow | None = None  # writes to this socket

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.pause_reading()  # type: ignore[attr-defined]  # until the flows are wired
        if self.conn is None:      # a new client connection
            self.conn = Conn(self.link, transport, self)  # type: ignore[arg-type]

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.view

    def buffer_updated(self, nbytes: int) -> None:
        self.inflow.on_data(bytes(self.view[:nbytes]))  # type: ignore[union-attr]

    def eof_received(self) -> bool:
        if self.inflow is not None:
            self.inflow.on_marker(_EOF)
        return True  # keep the other half open

    def connection_lost(self, exc: Exception | None) -> None:
        if self.conn is not None:
            self.conn.side_lost(self)

    def pause_writing(self) -> None:
        if self.outflow is not None:
            self.outflow.dst_paused = True
            self.outflow.update_reading()

    def resume_writing(self) -> None:
        if self.outflow is not None:
            self.outflow.dst_paused = False
            self.outflow.update_reading()


class Conn:
    """One accepted connection and (once dialled) its upstream connection."""

    def __init__(self, link: "Link", client: asyncio.Transport, client_side: _Side) -> None:
        self.link, self.loop = link, link.loop
        self.client, self.client_side = client, client_side
        self.upstream: asyncio.Transport | None = None
        self.out: Flow | None = None
        self.back: Flow | None = None
        self.connecting: asyncio.Task | None = None
        self.closed = False
        link.accepted += 1
        link.conns.add(self)
        if link.rules["out"].blocked:
            link.waiting.add(self)
        else:
            self.dial()

    def dial(self) -> None:
        self.link.waiting.discard(self)
        self.connecting = self.loop.create_task(self._dial())

    async def _dial(self) -> None:
        link = self.link
        try:
            transport, side = await self.loop.create_connection(
                lambda: _Side(link, self), link.host, link.port)
        except OSError as e:
            print(f"proxy: {link.name}: cannot reach {link.host}:{link.port}: {e}", file=sys.stderr)
            self.close(hard=True)
            return
        if self.closed:
            transport.abort()
            return
        self.upstream = transport  # type: ignore[assignment]
        self.out = Flow(self, "out", self.client, self.upstream)  # type: ignore[arg-type]
        self.back = Flow(self, "back", self.upstream, self.client)  # type: ignore[arg-type]
        self.client_side.inflow, self.client_side.outflow = self.out, self.back
        side.inflow, side.outflow = self.back, self.out
        self.out.update_reading()
        self.back.update_reading()

    def flows(self) -> tuple[Flow, ...]:
        return tuple(f for f in (self.out, self.back) if f is not None)

    def side_lost(self, side: _Side) -> None:
        if self.closed:
            return
        if self.upstream is None:  # the client went away before upstream was dialled
            self.close()
            return
        if side.outflow is not None:
            side.outflow.kill()
        if side.inflow is not None:
            side.inflow.on_marker(_CLOSE)
        self.check_done()

    def check_done(self) -> None:
        if self.out is not None and self.back is not None and self.out.finished and self.back.finished:
            self.close()

    def close(self, hard: bool = False) -> None:
        if self.closed:
            return
        self.closed = True
        self.link.conns.discard(self)
        self.link.waiting.discard(self)
        for f in self.flows():
            f.kill()
        if self.connecting is not None and not self.connecting.done():
            self.connecting.cancel()
        for t in (self.client, self.upstream):
            if t is not None:
                _rst(t) if hard else t.close()


class Link:
    def __init__(self, loop: asyncio.AbstractEventLoop, name: str, host: str, port: int, seed: int | str) -> None:
        self.loop, self.name, self.host, self.port = loop, name, host, port
        self.rules = {d: Rules() for d in DIRECTIONS}
        self.rng = LinkRandom(seed, name)
        self.conns: set[Conn] = set()
        self.waiting: set[Conn] = set()  # accepted while `out` was blocked: not dialled yet
        self.accepted = 0
        self.forwarded = {d: 0 for d in DIRECTIONS}
        self.held = {d: 0 for d in DIRECTIONS}
        self.server: asyncio.AbstractServer | None = None
        self.listen_port = 0

    async def listen(self, port: int) -> int:
        self.server = await self.loop.create_server(lambda: _Side(self), "127.0.0.1", port, backlog=1024)
        self.listen_port = self.server.sockets[0].getsockname()[1]
        return self.listen_port

    def set_rules(self, directions: tuple[str, ...], fields: dict[str, Any]) -> None:
        for d in directions:
            self.rules[d].update(fields)
        for conn in list(self.conns):
            for f in conn.flows():
                if f.direction in directions:
                    f.pump()
        if not self.rules["out"].blocked:
            for conn in list(self.waiting):
                conn.dial()

    def reset(self) -> int:
        conns = list(self.conns)
        for conn in conns:
            conn.close(hard=True)
        return len(conns)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
        self.reset()

    def stats(self) -> dict[str, Any]:
        return {"upstream": f"{self.host}:{self.port}", "port": self.listen_port,
                "accepted": self.accepted, "open": len(self.conns), "waiting": len(self.waiting),
                "bytes_out": self.forwarded["out"], "bytes_back": self.forwarded["back"],
                "held_out": self.held["out"], "held_back": self.held["back"],
                "rules": {d: self.rules[d].as_dict() for d in DIRECTIONS}}


class Proxy:
    def __init__(self, seed: int | str) -> None:
        self.seed = seed
        self.links: dict[str, Link] = {}
        self.stopped = asyncio.Event()

    def _link(self, req: dict[str, Any]) -> Link:
        if req["link"] not in self.links:
            known = ", ".join(sorted(self.links)) or "none"
            raise BadRequest(f"{req['op']}: unknown link {req['link']!r} (known: {known})")
        return self.links[req["link"]]

    async def handle(self, raw: Any) -> dict[str, Any]:
        req = parse_request(raw)  # raises BadRequest; nothing has changed yet
        op = req["op"]
        if op == "add_link":
            if req["name"] in self.links:
                raise BadRequest(f"add_link: link {req['name']!r} already exists")
            link = Link(asyncio.get_running_loop(), req["name"], req["host"], req["port"], self.seed)
            try:
                port = await link.listen(req["listen_port"])
            except OSError as e:
                raise BadRequest(f"add_link: cannot listen on 127.0.0.1:{req['listen_port']}: "
                                 f"{e.strerror or e}") from None
            self.links[req["name"]] = link
            return {"port": port}
        if op == "set":
            self._link(req).set_rules(req["directions"], req["rules"])
        elif op == "clear":
            self._link(req).set_rules(DIRECTIONS, Rules().as_dict())
        elif op == "clear_all":
            for link in self.links.values():
                link.set_rules(DIRECTIONS, Rules().as_dict())
        elif op == "reset":
            return {"closed": self._link(req).reset()}
        elif op == "stats":
            return {"links": {n: link.stats() for n, link in self.links.items()}}
        elif op == "shutdown":
            return {"shutdown": True}  # popped before the answer is sent
        return {}

    async def serve_control(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    line = await reader.readline()
                except ValueError:
                    resp: dict[str, Any] = {"ok": False, "error": "request line too long"}
                else:
                    if not line:
                        break
                    if not line.strip():
                        continue
                    resp = await self.respond(line)
                shutdown = resp.pop("shutdown", False)
                writer.write(json.dumps(resp).encode() + b"\n")
                await writer.drain()
                if shutdown:
                    self.stopped.set()
        except (ConnectionError, OSError, asyncio.CancelledError):
            pass  # the client went away, or the proxy is stopping
        finally:
            writer.close()

    async def respond(self, line: bytes) -> dict[str, Any]:
        try:
            req = json.loads(line)
        except ValueError as e:
            return {"ok": False, "error": f"not JSON: {e}"}
        try:
            resp = {"ok": True, **(await self.handle(req))}
        except BadRequest as e:
            return {"ok": False, "error": str(e)}
        except Exception as e:  # a bug: report it, keep serving
            return {"ok": False, "error": f"internal error: {e!r}"}
        return resp

    def close(self) -> None:
        for link in self.links.values():
            link.close()


async def _watch_parent(parent: int, stopped: asyncio.Event) -> None:
    while os.getppid() == parent:
        await asyncio.sleep(PARENT_POLL_S)
    print(f"proxy: parent {parent} is gone; exiting", file=sys.stderr)
    stopped.set()


async def serve(seed: int | str, control_port: int, ready_file: Path | None, parent: int) -> None:
    loop = asyncio.get_running_loop()
    proxy = Proxy(seed)
    server = await asyncio.start_server(proxy.serve_control, "127.0.0.1", control_port, limit=1 << 20)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, proxy.stopped.set)
    watcher = loop.create_task(_watch_parent(parent, proxy.stopped))
    port = server.sockets[0].getsockname()[1]
    if ready_file is not None:
        tmp = ready_file.with_name(ready_file.name + ".tmp")
        tmp.write_text(json.dumps({"control_port": port, "pid": os.getpid()}))
        os.replace(tmp, ready_file)
    await proxy.stopped.wait()
    watcher.cancel()
    server.close()
    proxy.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m chaos.proxy", description=__doc__.split("\n")[0])
    ap.add_argument("--seed", required=True, help="seed of every link's random source")
    ap.add_argument("--control-port", type=int, default=0)
    ap.add_argument("--ready-file", type=Path)
    ap.add_argument("--parent-pid", type=int, default=None,
                    help="exit when this process is no longer the parent (default: the parent at start)")
    args = ap.parse_args(argv)
    parent = args.parent_pid if args.parent_pid is not None else os.getppid()
    asyncio.run(serve(args.seed, args.control_port, args.ready_file, parent))
    return 0


if __name__ == "__main__":
    sys.exit(main())
