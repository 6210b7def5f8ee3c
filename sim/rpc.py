"""Request and answer over the simulated network, with a deadline, as gRPC calls are made.

    call(world, "client", "b2", broker.handle, ("JoinGroup", req), on_reply, timeout_ms=5000)

The request travels src -> dst; the handler gets ``(payload, reply)`` and may
answer later (a parked JoinGroup).  The answer travels dst -> src.  The
caller's ``on_reply`` runs once: with the answer, or with None at the
deadline (a lost request or answer, a partition, a dead or paused peer).
"""
from __future__ import annotations

from typing import Any, Callable

from sim.world import World


class _Call:
    __slots__ = ("done", "on_reply")

    def __init__(self, on_reply: Callable[[Any], None]) -> None:
        self.done = False
        self.on_reply = on_reply

    def finish(self, answer: Any) -> None:
        if not self.done:
            self.done = True
            self.on_reply(answer)


def call(world: World, src: str, dst: str, handler: Callable[[Any, Callable[[Any], None]], None], payload: Any,
         on_reply: Callable[[Any], None], timeout_ms: float) -> None:
    c = _Call(on_reply)

    def reply(answer: Any) -> None:
        world.net.send(dst, src, c.finish, answer)

    world.net.send(src, dst, handler, payload, reply)
    world.on_node(src, timeout_ms, c.finish, None)


def tell(world: World, src: str, dst: str, handler: Callable[..., None], *args: Any) -> None:
    """A one-way message (a controller request whose answer only matters for logging)."""
    world.net.send(src, dst, handler, *args)
