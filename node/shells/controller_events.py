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

from controller import redo
from kafkacommon import errors


class Event(str, Enum):
    """The plain events, named as controller/redo.py names them (the rule of what is redone is there)."""
    STARTUP = redo.STARTUP
    CONTROLLER_CHANGE = redo.CONTROLLER_CHANGE
    BROKER_CHANGE = redo.BROKER_CHANGE
    TOPIC_CHANGE = redo.TOPIC_CHANGE
    TOPIC_DELETION = redo.TOPIC_DELETION
    PARTITION_MODIFICATIONS = redo.PARTITION_MODIFICATIONS
    CONFIG_CHANGE = redo.CONFIG_CHANGE
    REASSIGNMENT_ISR_CHANGE = redo.REASSIGNMENT_ISR_CHANGE
    ZK_PARTITION_REASSIGNMENT = redo.ZK_PARTITION_REASSIGNMENT
    LOG_DIR_EVENT = redo.LOG_DIR_EVENT
    EXPIRE = redo.EXPIRE
    REGISTER_AND_REELECT = redo.REGISTER_AND_REELECT
    TICK = redo.TICK
    SHUTDOWN = redo.SHUTDOWN


def event_name(event: "Event | Request") -> str:
    """An event's name (a request's kind): what the controller_error line and controller/redo.py use."""
    return event.kind if isinstance(event, Request) else event.value


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


@dataclass
class ElectLeadersRequest(Request):
    """The Kafka ElectLeaders request: a preferred (0) or unclean (1) election of ``tps``."""

    tps: list[tuple[str, int]] = field(default_factory=list)
    election_type: int = 0
    kind: ClassVar[str] = "elect_leaders_request"
    dropped: ClassVar[Any] = None   # the caller answers NOT_CONTROLLER for every partition


@dataclass
class AlterReassignments(Request):
    """AlterPartitionReassignments: {tp: target replicas, or None to cancel}."""

    requested: dict = field(default_factory=dict)
    kind: ClassVar[str] = "alter_reassignments"
    dropped: ClassVar[Any] = (errors.NOT_CONTROLLER, {})


@dataclass
class ListReassignments(Request):
    """ListPartitionReassignments: of ``tps`` (None: every one under way)."""

    tps: list[tuple[str, int]] | None = None
    kind: ClassVar[str] = "list_reassignments"
    dropped: ClassVar[Any] = (errors.NOT_CONTROLLER, {})


@dataclass
class LeaderAndIsrAnswer(Request):
    """A broker's answer to one of this controller's LeaderAndIsr (Kafka's LeaderAndIsrResponseReceived):
    every partition of the request with its error.  Nobody waits on it; a session expiry drops it."""

    broker_id: int = -1
    broker_epoch: int = -1
    errors: dict = field(default_factory=dict)
    kind: ClassVar[str] = "leader_and_isr_response"
    dropped: ClassVar[Any] = None
