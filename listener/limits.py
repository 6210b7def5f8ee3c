"""The Kafka listener's connection limits, as Kafka 2.8's SocketServer keeps them.

- ``max.connections``: the broker's connections over all its listeners.  At the limit, a listener stops
  accepting (new connections wait in the kernel's backlog, as behind Kafka's blocked acceptor) until one
  closes.
- ``max.connections.per.ip`` (and ``max.connections.per.ip.overrides``, ``host:count,...``): a new connection
  from an address that has this many already is closed at once (Kafka's TooManyConnectionsException).
- ``queued.max.requests``: requests read from every connection and not yet answered, over the broker; at the
  limit, no connection is read from until an answer goes out (Kafka's full request queue blocks its
  processors).
- ``connections.max.idle.ms``: a connection that has read and written nothing for this long, with no request
  in progress, is closed.
- ``request.timeout.ms``: a frame whose first bytes came more than this long ago and that is still not whole
  is dropped with its connection (kafkasim's rule against clients that trickle: docs/deviations.md).

:class:`Gate` is the counter with waiters behind the broker-wide limits: the listeners each run their own
event loop thread, so a gate is shared across threads and wakes the loop a waiter waits on.
"""
from __future__ import annotations

import asyncio
import ipaddress
import socket
import threading
from collections import Counter
from dataclasses import dataclass, field

UNLIMITED = 2**31 - 1


class LimitError(ValueError):
    pass


def parse_overrides(text: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides`` (``host:count,...``; hosts are names or addresses) -> {address: count}.
    Names are resolved once, at the listener's start, as Kafka resolves them."""
    out: dict[str, int] = {}
    for item in filter(None, (x.strip() for x in (text or "").split(","))):
        host, sep, count = item.rpartition(":")
        if not sep or not host:
            raise LimitError(f"max.connections.per.ip.overrides: {item!r} is not host:count")
        try:
            n = int(count)
        except ValueError:
            raise LimitError(f"max.connections.per.ip.overrides: {item!r}: {count!r} is not a count") from None
        if n < 0:
            raise LimitError(f"max.connections.per.ip.overrides: {item!r}: the count is negative")
        host = host.strip("[]")
        try:
            address = str(ipaddress.ip_address(host))
        except ValueError:
            try:
                address = socket.gethostbyname(host)
            except OSError as e:
                raise LimitError(f"max.connections.per.ip.overrides: {host!r} does not resolve: {e}") from None
        out[address] = n
    return out


@dataclass(frozen=True)
class Limits:
    """One broker's listener limits (Kafka's keys; UNLIMITED is Kafka's Int.MaxValue default)."""

    max_request_bytes: int = 104857600          # socket.request.max.bytes
    idle_ms: int = 600_000                      # connections.max.idle.ms
    partial_frame_ms: int = 30_000              # request.timeout.ms
    max_connections: int = UNLIMITED            # max.connections
    max_per_ip: int = UNLIMITED                 # max.connections.per.ip
    per_ip_overrides: dict[str, int] = field(default_factory=dict)   # max.connections.per.ip.overrides
    queued_max_requests: int = 500              # queued.max.requests

    def max_for(self, address: str) -> int:
        return self.per_ip_overrides.get(address, self.max_per_ip)

    def sweep_interval_s(self) -> float:
        """How often a listener looks for idle connections and stale partial frames: a tenth of the shorter
        bound, at most a second (Kafka checks at each of its processors' polls)."""
        return max(0.005, min(1.0, min(self.idle_ms, self.partial_frame_ms) / 10_000))


class Gate:
    """A count below a capacity, shared by event loops on several threads: ``take`` waits (on the caller's loop)
    while the count is at the capacity; ``give`` frees one and wakes a waiter."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.count = 0
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = []

    def try_take(self) -> bool:
        with self._lock:
            if self.count >= self.capacity:
                return False
            self.count += 1
            return True

    async def take(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                if self.count < self.capacity:
                    self.count += 1
                    return
                fut = loop.create_future()
                self._waiters.append((loop, fut))
            try:
                await fut
            finally:
                with self._lock:
                    if (loop, fut) in self._waiters:
                        self._waiters.remove((loop, fut))

    def give(self) -> None:
        with self._lock:
            self.count -= 1
            waiters, self._waiters = self._waiters, []
        for loop, fut in waiters:   # each waiter tries again; the ones that lose wait anew
            if not loop.is_closed():
                loop.call_soon_threadsafe(_wake, fut)

    @property
    def full(self) -> bool:
        with self._lock:
            return self.count >= self.capacity

    @property
    def waiting(self) -> int:
        """How many wait in ``take`` now."""
        with self._lock:
            return len(self._waiters)


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


class Quotas:
    """One broker's connection counts, shared by its listeners: every connection, and those of each address."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.connections = Gate(limits.max_connections)
        self.requests = Gate(limits.queued_max_requests)
        self._per_ip: Counter[str] = Counter()
        self._lock = threading.Lock()

    def admit(self, address: str) -> int | None:
        """Count a connection accepted from ``address`` (its broker-wide slot is taken already); None, or the
        address's limit when it has that many already (the connection is to be closed at once)."""
        limit = self.limits.max_for(address)
        with self._lock:
            if self._per_ip[address] >= limit:
                return limit
            self._per_ip[address] += 1
            return None

    def release(self, address: str) -> None:
        with self._lock:
            self._per_ip[address] -= 1
            if self._per_ip[address] <= 0:
                del self._per_ip[address]

    def of(self, address: str) -> int:
        with self._lock:
            return self._per_ip[address]
