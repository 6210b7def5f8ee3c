"""Request and answer over the simulated network, with a deadline, as gRPC calls are made.

    call(world, "client", "b2", broker.handle, ("JoinGroup", req), on_reply, timeout_ms=5000)

The request travels src -> dst; the handler gets ``(payload, reply)`` and may
answer later (a parked JoinGroup).  The answer travels dst -> src, to the
caller's incarnation that made the call: a caller that crashed meanwhile never
gets it (its connection died with it; a restarted process has new ones, and an
answer from a paused peer that resumes later goes nowhere).  The caller's
``on_reply`` runs once: with the answer, or with None at the deadline (a lost
request or answer, a partition, a dead or paused peer).
"""
from __future__ import annotations

from collections import deque
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


class _Deadlines:
    """The pending calls of one (caller, its incarnation, timeout): deadlines in call order, so one timer
    at the oldest pending call's deadline serves them all (answered calls are skipped when it fires)."""

    __slots__ = ("world", "src", "calls", "armed")

    def __init__(self, world: World, src: str) -> None:
        self.world, self.src = world, src
        self.calls: deque[tuple[float, _Call]] = deque()
        self.armed = False

    def add(self, deadline: float, c: _Call) -> None:
        self.calls.append((deadline, c))
        if not self.armed:
            self.armed = True
            self.world.on_node(self.src, deadline - self.world.now_ms, self._fire)

    def _fire(self) -> None:
        calls, now = self.calls, self.world.now_ms
        while calls and (calls[0][1].done or calls[0][0] <= now):
            _deadline, c = calls.popleft()
            c.finish(None)        # nothing when it was answered
        if calls:
            self.world.on_node(self.src, calls[0][0] - now, self._fire)
        else:
            self.armed = False


def call(world: World, src: str, dst: str, handler: Callable[[Any, Callable[[Any], None]], None], payload: Any,
         on_reply: Callable[[Any], None], timeout_ms: float) -> None:
    c = _Call(on_reply)
    node = world.node(src)
    incarnation = node.incarnation

    def reply(answer: Any) -> None:
        world.net.send(dst, src, c.finish, answer, incarnation=incarnation)

    world.net.send(src, dst, handler, payload, reply)
    key = (src, incarnation, timeout_ms)
    q = world.deadlines.get(key)
    if q is None:
        q = world.deadlines[key] = _Deadlines(world, src)
    q.add(world.now_ms + timeout_ms, c)


def tell(world: World, src: str, dst: str, handler: Callable[..., None], *args: Any) -> None:
    """A one-way message (a controller request whose answer only matters for logging)."""
    world.net.send(src, dst, handler, *args)
