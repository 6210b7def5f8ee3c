"""The broker's gRPC server: grpc.aio on an event-loop thread of its own.

Coroutine handlers (the ``Groups`` service) run on the loop: a JoinGroup or
SyncGroup parked by the coordinator is a coroutine awaiting the core's
future, not a thread, so a group of 1,000 members parks 1,000 coroutines and
its completion wakes one loop instead of 1,000 threads contending for the
GIL.  Plain handlers (the ``Broker`` service: long-polled fetches, produce,
the controller's requests) run in a thread pool (gRPC's
``migration_thread_pool``), as on a threaded server.

The object offers the synchronous calls the broker needs (add a port,
start, stop) and runs them on the loop.
"""
from __future__ import annotations

import asyncio
import threading
from concurrent import futures
from typing import Any, Callable

import grpc


class AioServer:
    def __init__(self, pool: futures.ThreadPoolExecutor, maximum_concurrent_rpcs: int,
                 name: str = "grpc-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name=name, daemon=True)
        self._thread.start()
        self.pool = pool

        async def make() -> grpc.aio.Server:
            return grpc.aio.server(migration_thread_pool=pool, maximum_concurrent_rpcs=maximum_concurrent_rpcs)

        self.server = self.call(make())

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def call(self, coro, timeout: float | None = 30.0) -> Any:
        """Run ``coro`` on the loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def on_loop(self, fn: Callable[[], Any], timeout: float | None = 30.0) -> Any:
        async def run() -> Any:
            return fn()
        return self.call(run(), timeout)

    def add(self, register: Callable[[Any, Any], None], servicer: Any) -> None:
        """``add_XServicer_to_server(servicer, server)``, on the loop."""
        self.on_loop(lambda: register(servicer, self.server))

    def add_insecure_port(self, address: str) -> int:
        return self.on_loop(lambda: self.server.add_insecure_port(address))

    def start(self) -> None:
        self.call(self.server.start())

    def stop(self, grace: float) -> None:
        """Stop serving: calls in flight get ``grace`` seconds, then are cancelled; waits at most
        ``grace`` + 2 s.  The loop keeps running (later coroutines still complete)."""
        try:
            self.call(self.server.stop(grace), timeout=grace + 2)
        except futures.TimeoutError:
            pass
