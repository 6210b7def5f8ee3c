"""The simulated world: virtual time, one seeded generator, and a network between named nodes.

    world = World(seed=7)
    world.after(5.0, fn, arg)               # run fn(arg) 5 ms from now (virtual)
    world.net.send("b1", "b2", deliver)     # deliver() at b2 after the link's latency
    world.run_until(60_000.0)

Time is virtual and counted in ms as floats (``now_ms``); the cores get ``int``
ms (:meth:`World.core_ms`).  Everything random comes from ``world.rng``, a
``random.Random(seed)``: link latencies, jitter, member ids, fault times.
Events at the same instant run in the order they were scheduled, so one seed
is one run.  Nothing here reads a clock, a socket or a thread.

Nodes are strings as in chaos runs (``b<id>``, ``zk1``, ``client``).  A node
can be crashed (its timers and the messages to it are dropped: ``incarnation``
changes) or paused (its timers and the messages to it wait until it resumes,
as a stopped process keeps its TCP buffers).  Links deliver in order per
(source, destination), as TCP does; a partition blocks a direction; a loss
fault drops a fraction of messages.
"""
from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class Node:
    name: str
    incarnation: int = 0
    up: bool = True
    paused: bool = False
    held: list = field(default_factory=list)   # callbacks held while paused
    clock_skew_ms: float = 0.0                  # a clock jump: what the node's own clock adds


class World:
    def __init__(self, seed: int, *, base_latency_ms: tuple[float, float] = (0.1, 1.0),
                 jitter_ms: float = 0.2) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.now_ms = 0.0
        self._queue: list[tuple[float, int, Callable[..., Any], tuple]] = []
        self._seq = 0
        self.nodes: dict[str, Node] = {}
        self.net = Network(self, base_latency_ms, jitter_ms)
        self.steps = 0
        self.deadlines: dict = {}      # sim/rpc.py's pending calls per (caller, incarnation, timeout)
        self.current: tuple | None = None    # the step running now: (time, seq, fn, args)
        self.after_step: Callable[[], None] | None = None   # called after every step (sim/invariants.py)

    # ------------------------------------------------------------------ nodes

    def node(self, name: str) -> Node:
        n = self.nodes.get(name)
        if n is None:
            n = self.nodes[name] = Node(name)
        return n

    def core_ms(self, node: str | None = None) -> int:
        """The integer ms a core is handed: virtual now, plus the node's clock jump."""
        skew = self.nodes[node].clock_skew_ms if node is not None and node in self.nodes else 0.0
        return int(self.now_ms + skew)

    def mono_ns(self) -> int:
        return int(round(self.now_ms * 1e6))

    # ------------------------------------------------------------------ timers

    def at(self, t_ms: float, fn: Callable[..., Any], *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (max(t_ms, self.now_ms), self._seq, fn, args))

    def after(self, delay_ms: float, fn: Callable[..., Any], *args: Any) -> None:
        self.at(self.now_ms + delay_ms, fn, *args)

    def on_node(self, node: str, delay_ms: float, fn: Callable[..., Any], *args: Any) -> None:
        """A timer of ``node``: dropped if it crashes meanwhile, held while it is paused."""
        n = self.node(node)
        self.after(delay_ms, self._node_call, n, n.incarnation, fn, args)

    def _node_call(self, n: Node, incarnation: int, fn: Callable[..., Any], args: tuple) -> None:
        if not n.up or n.incarnation != incarnation:
            return
        if n.paused:
            n.held.append((incarnation, fn, args))
            return
        fn(*args)

    def run_until(self, t_end_ms: float) -> None:
        q = self._queue
        pop = heapq.heappop
        after = self.after_step
        while q and q[0][0] <= t_end_ms:
            step = self.current = pop(q)
            self.now_ms = step[0]
            self.steps += 1
            step[2](*step[3])
            if after is not None:
                after()
        self.now_ms = max(self.now_ms, t_end_ms)

    # ------------------------------------------------------------------ node faults

    def crash(self, node: str) -> None:
        n = self.node(node)
        n.up = False
        n.paused = False
        n.held.clear()
        n.incarnation += 1

    def restart(self, node: str) -> None:
        n = self.node(node)
        n.up = True
        n.incarnation += 1

    def pause(self, node: str) -> None:
        self.node(node).paused = True

    def resume(self, node: str) -> None:
        n = self.node(node)
        n.paused = False
        held, n.held = n.held, []
        for incarnation, fn, args in held:
            self.after(0.0, self._node_call, n, incarnation, fn, args)


class Network:
    """Links between nodes: per-link latency from the seed, ordered delivery, partitions, loss."""

    def __init__(self, world: World, base_latency_ms: tuple[float, float], jitter_ms: float) -> None:
        self.world = world
        self.base = base_latency_ms
        self.jitter_ms = jitter_ms
        self._latency: dict[tuple[str, str], float] = {}
        self._last: dict[tuple[str, str], float] = {}
        self.blocked: dict[tuple[str, str], int] = {}    # (src, dst) -> how many faults block it
        self.loss: dict[tuple[str, str], float] = {}
        self.delay: dict[tuple[str, str], float] = {}
        self.sent = 0
        self.dropped = 0

    def latency(self, src: str, dst: str) -> float:
        key = (src, dst)
        lat = self._latency.get(key)
        if lat is None:
            lat = self._latency[key] = self.world.rng.uniform(*self.base)
        return lat

    def reachable(self, src: str, dst: str) -> bool:
        return not self.blocked.get((src, dst))

    def block(self, src: str, dst: str) -> None:
        self.blocked[(src, dst)] = self.blocked.get((src, dst), 0) + 1

    def unblock(self, src: str, dst: str) -> None:
        n = self.blocked.get((src, dst), 0) - 1
        if n <= 0:
            self.blocked.pop((src, dst), None)
        else:
            self.blocked[(src, dst)] = n

    def send(self, src: str, dst: str, deliver: Callable[..., Any], *args: Any,
             incarnation: int | None = None) -> bool:
        """Deliver ``deliver(*args)`` at ``dst`` after the link's latency; False if dropped now.

        A message to a crashed node is lost; to a paused node it waits.  A partition drops what
        crosses it (a TCP connection that times out loses its unsent data too).  ``incarnation``
        (an answer's) names the incarnation of ``dst`` the message is for, else the current one:
        an answer to a caller that has crashed since its request is lost."""
        w = self.world
        self.sent += 1
        key = (src, dst)
        if self.blocked.get(key):
            self.dropped += 1
            return False
        loss = self.loss.get(key)
        if loss and w.rng.random() < loss:
            self.dropped += 1
            return False
        t = w.now_ms + self.latency(src, dst) + w.rng.random() * self.jitter_ms + self.delay.get(key, 0.0)
        t = max(t, self._last.get(key, 0.0))   # in order per connection, as TCP
        self._last[key] = t
        n = w.node(dst)
        w.at(t, self._arrive, key, n, n.incarnation if incarnation is None else incarnation, deliver, args)
        return True

    def _arrive(self, key: tuple[str, str], n: Node, incarnation: int, deliver: Callable[..., Any],
                args: tuple) -> None:
        if self.blocked.get(key):     # cut while in flight
            self.dropped += 1
            return
        if not n.up or n.incarnation != incarnation:
            self.dropped += 1
            return
        if n.paused:
            n.held.append((incarnation, deliver, args))
            return
        deliver(*args)
