"""The controller event thread's events (Kafka's ControllerEvent): what goes on its queue.

Plain events are their names (``Event``): a watch fired, a tick, a session
expiry; each re-reads what it needs.  Requests (``Request``) carry a caller's
arguments and the ``Future`` the caller waits on, and say what that caller
gets when the event is dropped unprocessed (a session expiry drains the queue).
"""
from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar

from kafkacommon import errors


class Event(str, Enum):
    STARTUP = "startup"
    CONTROLLER_CHANGE = "controller_change"
    BROKER_CHANGE = "broker_change"
    TOPIC_CHANGE = "topic_change"
    TOPIC_DELETION = "topic_deletion"
    EXPIRE = "expire"
    REGISTER_AND_REELECT = "register_and_reelect"
    TICK = "tick"
    SHUTDOWN = "shutdown"


#: Events that only re-read ZooKeeper and decide again, so a connection lost halfway through one
#: is safe to redo: the tick enqueues it again once the connection is back.
REDO_ON_CONNECTION_LOSS = frozenset({Event.STARTUP, Event.CONTROLLER_CHANGE, Event.BROKER_CHANGE,
                                     Event.TOPIC_CHANGE, Event.TOPIC_DELETION, Event.REGISTER_AND_REELECT})


def redo_on_connection_loss(event: "Event | Request") -> bool:
    """Whether ``event``, cut short by a lost connection, is done again later.  Never a request: its
    caller gets the error (and a request, a dataclass with its caller's arguments, is not hashable)."""
    return isinstance(event, Event) and event in REDO_ON_CONNECTION_LOSS


@dataclass
class Request:
    """An event a caller waits on (``future``)."""

    future: Future = field(default_factory=Future, init=False, repr=False)
    kind: ClassVar[str]
    dropped: ClassVar[Any]   # the answer when a session expiry drains the queue

    def drop(self) -> None:
        self.future.set_result(self.dropped)


@dataclass
class ElectLeaders(Request):
    """The admin ElectLeaders call: a preferred election of ``tps`` (None: every partition)."""

    tps: list[tuple[str, int]] | None = None
    kind: ClassVar[str] = "elect_leaders"
    dropped: ClassVar[Any] = {}


@dataclass
class ControlledShutdown(Request):
    broker_id: int = -1
    broker_epoch: int = -1
    kind: ClassVar[str] = "controlled_shutdown"
    dropped: ClassVar[Any] = (errors.NOT_CONTROLLER, [])


@dataclass
class AlterIsr(Request):
    broker_id: int = -1
    broker_epoch: int = -1
    items: list = field(default_factory=list)
    kind: ClassVar[str] = "alter_isr"
    dropped: ClassVar[Any] = (errors.NOT_CONTROLLER, {})
