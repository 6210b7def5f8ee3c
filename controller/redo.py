"""What the controller does again after ZooKeeper cut its work short, sans-IO.

Two losses, two answers:

* **the connection** (the session lives on): an event that only re-reads ZooKeeper and decides
  again (the election, a watch's re-read, the re-election after registering anew) is done again,
  once, when the connection is back, in the order the events were first cut short.  A request
  (AlterIsr, ControlledShutdown, ElectLeaders) is never redone: its caller gets the error and asks
  again.  The periodic tick is not redone either: the next tick does its work.  (Kafka 2.8's
  ZooKeeperClient holds a request until the connection is back and sends it again; the effect is
  the same: the event completes once ZooKeeper answers.)
* **the session** (Kafka's Expire): every event waiting to be redone is dropped with the queued
  work; the controller resigns, the broker registers anew and re-elects, which decides
  everything again (``controller.handlers.ControllerHandlers.expire`` and ``reelect``).

Both shells run their events through one :class:`ControllerEvents`, which holds the sequencing the event
thread adds around :mod:`controller.handlers`: which handler an event runs, the guard around it (a fenced
controller resigns; a lost connection logs ``controller_error`` and leaves the event in a :class:`RedoQueue`),
the order of a tick (the events due again first, in their order, then the core's timers), and the session's
expiry (nothing redone, the resignation, then the broker's registration and the re-election as one event).
The broker's event thread (node/shells/controller_shell.py) and the simulator's controller
(sim/controller.py) only decide when an event is taken (a queue and a thread, or the simulated clock) and
carry out the commands with their own I/O.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from controller import handlers
from controller.event_names import (  # noqa: F401 (the shells name the events as redo.X)
    STARTUP, CONTROLLER_CHANGE, BROKER_CHANGE, TOPIC_CHANGE, TOPIC_DELETION, PARTITION_MODIFICATIONS,
    CONFIG_CHANGE, REASSIGNMENT_ISR_CHANGE, ZK_PARTITION_REASSIGNMENT, LOG_DIR_EVENT, EXPIRE,
    REGISTER_AND_REELECT, TICK, SHUTDOWN)
from zk.exceptions import CONNECTION_ERRORS, ControllerMovedError

#: Events that only re-read ZooKeeper and decide again, so a connection lost halfway through one
#: is safe to redo once the connection is back.
REDO_ON_CONNECTION_LOSS = frozenset({STARTUP, CONTROLLER_CHANGE, BROKER_CHANGE, TOPIC_CHANGE, TOPIC_DELETION,
                                     PARTITION_MODIFICATIONS, CONFIG_CHANGE, REGISTER_AND_REELECT,
                                     REASSIGNMENT_ISR_CHANGE, ZK_PARTITION_REASSIGNMENT, LOG_DIR_EVENT})


def redone_after_connection_loss(event: str) -> bool:
    """Whether ``event`` (an event's or a request's name), cut short by a lost connection, is done again."""
    return event in REDO_ON_CONNECTION_LOSS


class RedoQueue:
    """The events a lost connection cut short, waiting for the connection (each once, first loss first)."""

    def __init__(self) -> None:
        self._pending: list[str] = []

    @property
    def pending(self) -> tuple[str, ...]:
        return tuple(self._pending)

    def cut_short(self, event: str) -> bool:
        """A lost connection stopped ``event`` halfway: -> whether it will be done again (the
        ``controller_error`` line's ``redo``)."""
        if not redone_after_connection_loss(event):
            return False
        if event not in self._pending:
            self._pending.append(event)
        return True

    def due(self, connected: bool) -> list[str]:
        """On a tick: the events to do again now, in order (none while the connection is still down)."""
        if not connected or not self._pending:
            return []
        due, self._pending = self._pending, []
        return due

    def session_expired(self) -> str:
        """The session is gone: nothing cut short is redone; -> the event that follows the resignation
        (register anew and re-elect, which decides everything again)."""
        self._pending.clear()
        return REGISTER_AND_REELECT


@dataclass(frozen=True)
class RegisterBroker:
    """A command of :data:`REGISTER_AND_REELECT`: register this broker in ZooKeeper with its new session
    (``/brokers/ids/<id>``, a new broker epoch).  The shell raises a connection error when it cannot (yet):
    the event is then redone on a tick once the connection is back, as any event cut short."""


class ControllerEvents:
    """The controller's event thread without its thread: what each event runs, and how it is guarded.

    ``run(event, do)`` an event by its name; ``request(name, steps, do)`` a broker's request (AlterIsr,
    ControlledShutdown, ElectLeaders, the admin requests, a LeaderAndIsr's answer: a lost connection is raised to the caller, who asks again, and not
    redone); ``tick(connected, do)`` the periodic tick; ``expire(do)`` the session's expiry, which returns the
    event to run next.  ``do`` carries out one of :mod:`controller.handlers`' commands (or
    :class:`RegisterBroker`) with the shell's I/O.  Exceptions other than ZooKeeper's fencing and connection
    errors are the shell's to report."""

    def __init__(self, h: handlers.ControllerHandlers) -> None:
        self.handlers = h
        self.redo = RedoQueue()
        self._events: dict[str, Callable[[], Any]] = {
            STARTUP: h.elect, CONTROLLER_CHANGE: h.controller_change, BROKER_CHANGE: h.broker_change,
            TOPIC_CHANGE: h.topic_change, TOPIC_DELETION: h.topic_deletion,
            PARTITION_MODIFICATIONS: h.partition_modifications, CONFIG_CHANGE: h.config_change,
            REASSIGNMENT_ISR_CHANGE: h.reassignment_isr_change, ZK_PARTITION_REASSIGNMENT: h.zk_partition_reassignment,
            LOG_DIR_EVENT: h.log_dir_event, REGISTER_AND_REELECT: self._register_and_reelect, SHUTDOWN: h.shutdown}

    def _register_and_reelect(self) -> handlers.Steps:
        yield RegisterBroker()
        return (yield from self.handlers.reelect())

    def run(self, event: str, do: Callable[[Any], Any]) -> Any:
        """One event (by its name), guarded: -> what its handler returns (None when it was cut short or the
        controller was fenced)."""
        out = self._guarded(event, self._events[event](), do, request=False)
        return None if out is _FENCED else out

    def request(self, name: str, steps: handlers.Steps, do: Callable[[Any], Any], fenced: Any = None) -> Any:
        """A broker's request (``name`` for the log line): its answer, or ``fenced`` when the controller was
        fenced meanwhile (it resigned: the caller's NOT_CONTROLLER); a lost connection is logged and raised
        to the shell (the caller gets the error and asks again)."""
        out = self._guarded(name, steps, do, request=True)
        return fenced if out is _FENCED else out

    def tick(self, connected: Callable[[], bool], do: Callable[[Any], Any]) -> None:
        """The periodic tick: the events a lost connection cut short, again, in order, once it is back; then
        the core's timers (a lost connection cuts their writes short; the next tick does them)."""
        for event in self.redo.due(connected()):
            self.run(event, do)
        self._guarded(TICK, self.handlers.tick(connected=connected()), do, request=False)

    def expire(self, do: Callable[[Any], Any]) -> str:
        """Kafka's Expire: nothing cut short is redone; the controller resigns (unless a zombie); -> the event
        to run next (:data:`REGISTER_AND_REELECT`: the broker registers anew and re-elects)."""
        follow_up = self.redo.session_expired()
        handlers.run(self.handlers.expire(), do)
        return follow_up

    def _guarded(self, name: str, steps: handlers.Steps, do: Callable[[Any], Any], request: bool) -> Any:
        try:
            return handlers.run(steps, do)
        except ControllerMovedError as e:
            handlers.run(self.handlers.fenced(str(e)), do)
            return _FENCED
        except CONNECTION_ERRORS as e:
            # controller_error's fields (its "event" is the controller event cut short, docs/events.md)
            do(handlers.Emit("controller_error", dict(event=name, error=repr(e), redo=self.redo.cut_short(name))))
            if request:
                raise
        return None


_FENCED = object()
