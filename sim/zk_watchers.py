"""The client library's side of ZooKeeper watches (what kazoo does), for the simulator's ZooKeeper client.

The server (sim/zk_model.py) sends one notification per (session, path, kind of watch); the
client library then decides which callbacks it reaches.  kazoo, which the real brokers use:

* registers a callback only when the request succeeded (``exists`` on a missing node succeeds);
  the same callback object registered twice for a path is kept once, a new one (a new lambda)
  is another callback;
* on CREATED or CHANGED calls, and forgets, the path's data callbacks (``get``/``exists``);
  on CHILD its child callbacks (``get_children``); on DELETED both;
* when the session expires, calls every callback it holds with a NONE event (path None) and
  forgets them all.

One difference, for determinism: kazoo keeps a path's callbacks in a set, so several callbacks
for one notification run in an arbitrary order; here they run in the order they were registered.
"""
from __future__ import annotations

from typing import Callable

from sim.zk_model import CHANGED, CHILD, CREATED, DELETED, NONE, WatchEvent
from zk.stat import WatchEvent as ClientEvent

Callback = Callable[[ClientEvent], None]


class ClientWatchers:
    """One session's registered watch callbacks."""

    def __init__(self) -> None:
        self._data: dict[str, list[Callback]] = {}
        self._child: dict[str, list[Callback]] = {}

    @staticmethod
    def _add(table: dict[str, list[Callback]], path: str, fn: Callback) -> None:
        fns = table.setdefault(path, [])
        if fn not in fns:
            fns.append(fn)

    def add_data(self, path: str, fn: Callback) -> None:
        """After a successful ``get`` or ``exists`` with a watch."""
        self._add(self._data, path, fn)

    def add_child(self, path: str, fn: Callback) -> None:
        """After a successful ``get_children`` with a watch."""
        self._add(self._child, path, fn)

    def dispatch(self, event: WatchEvent) -> list[tuple[Callback, ClientEvent]]:
        """The calls one notification makes (and the callbacks it consumes), in order."""
        if event.type == NONE:
            return self.expire()
        if event.type in (CREATED, CHANGED):
            fns = self._data.pop(event.path, [])
        elif event.type == DELETED:
            fns = self._data.pop(event.path, []) + self._child.pop(event.path, [])
        elif event.type == CHILD:
            fns = self._child.pop(event.path, [])
        else:
            raise ValueError(f"unknown watch event type {event.type!r}")
        ev = event.event()
        return [(fn, ev) for fn in fns]

    def expire(self) -> list[tuple[Callback, ClientEvent]]:
        """The session expired: every callback once with NONE (child callbacks first, as kazoo),
        then none are left."""
        fns = [fn for fns in self._child.values() for fn in fns] + [fn for fns in self._data.values() for fn in fns]
        self._data, self._child = {}, {}
        ev = ClientEvent(NONE, None)  # type: ignore[arg-type]
        return [(fn, ev) for fn in fns]

    def pending(self) -> int:
        return sum(map(len, self._data.values())) + sum(map(len, self._child.values()))
