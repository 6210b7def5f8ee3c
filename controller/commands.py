"""The controller handlers' commands: what a handler asks its shell to do (read or write ZooKeeper, send,
log, read the clock), each a small frozen value, and :func:`run`, which carries a handler out through a
shell's ``do(command)``.  The handlers (:mod:`controller.handlers`) yield them; the broker's shell
(node/shells/controller_shell.py) and the simulator's (sim/controller.py) each map every command type to
their own I/O."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generator, NamedTuple

Steps = Generator[Any, Any, Any]


@dataclass(frozen=True)
class ReadController:
    """-> the broker id in /controller, or None; arms the /controller watch (CONTROLLER_CHANGE)."""


@dataclass(frozen=True)
class ReadControllerAndEpoch:
    """-> (the broker id in /controller or None, (epoch, zkVersion) of /controller_epoch or None when it is
    missing), one round trip; arms the /controller watch (CONTROLLER_CHANGE)."""


@dataclass(frozen=True)
class DeleteControllerIfOurs:
    """-> whether this session's /controller was deleted."""


@dataclass(frozen=True)
class TryElect:
    """The election multi (zk/rules.py's election_ops) -> (won, epoch, epoch zkVersion).  ``epoch``: the
    (epoch, zkVersion) of /controller_epoch read with /controller (None: read it first, created when missing).
    ``then``: the :class:`ReadSnapshot` a won election makes next: the shell may send its first round trip
    right behind the multi (ZooKeeper answers a session's requests in order, so those reads see the multi's
    outcome), whether the election is won or not (its watches are then armed either way)."""
    epoch: tuple | None = None
    then: Any = None


class Snapshot(NamedTuple):
    controller_epoch: int
    epoch_zk_version: int
    brokers: dict
    topics: dict          # {name: TopicAssignment}, each with its config overrides (/config/topics/<t>)
    round_trips: int      # ZooKeeper round trips it took (reported in controller_failover_done)
    broker_configs: dict = {}   # this broker's dynamic configs: {"<default>": {...}, "<id>": {...}}
    log_dir_events: tuple = ()  # with ``log_dir_events``: the log dir event notifications' sequence numbers


@dataclass(frozen=True)
class ReadSnapshot:
    """-> :class:`Snapshot` (no partition states); arms the /brokers/topics watch (TOPIC_CHANGE), a data watch
    on every topic znode not watched yet (PARTITION_MODIFICATIONS) and, with ``watch_brokers``, the
    /brokers/ids one (BROKER_CHANGE).  ``log_dir_events``: also list /log_dir_event_notification's children
    in the first round trip, arming its watch (LOG_DIR_EVENT)."""
    watch_brokers: bool = True
    log_dir_events: bool = False


#: a new controller's context: Kafka's onControllerFailover registers the broker, topic and log dir event watches
#: and reads the log dir event notifications (to delete them) before it loads the context; here they share the
#: context's first round trip
FAILOVER_LOAD = ReadSnapshot(watch_brokers=True, log_dir_events=True)


@dataclass(frozen=True)
class CachedStates:
    """-> this broker's metadata cache of partition states, {tp: (state, zkVersion)} ({} when it has none)."""


@dataclass(frozen=True)
class ReadBrokers:
    """-> {id: registration}; arms the /brokers/ids watch."""


@dataclass(frozen=True)
class ReadStates:
    """-> {tp: (state, zkVersion)} of those that exist."""
    tps: tuple


@dataclass(frozen=True)
class ReadDeletionRequests:
    """-> the topics marked for deletion; arms the /admin/delete_topics watch (TOPIC_DELETION)."""


@dataclass(frozen=True)
class ReadLogDirEvents:
    """-> [(sequence, broker id or None)] of /log_dir_event_notification's children; arms its watch
    (LOG_DIR_EVENT)."""


@dataclass(frozen=True)
class DeleteLogDirEvents:
    """Delete these notifications, each in a multi fenced by the controller epoch (one gone is no error)."""
    fence: int
    sequences: tuple


@dataclass(frozen=True)
class CreateTopic:
    fence: int
    assignment: Any


@dataclass(frozen=True)
class WriteStates:
    """-> {tp: new zkVersion}; raises StateVersionConflict or ControllerMovedError into the handler."""
    fence: int
    writes: tuple


@dataclass(frozen=True)
class DeleteTopic:
    fence: int
    assignment: Any


@dataclass(frozen=True)
class DropDeletionMarker:
    fence: int
    topic: str


@dataclass(frozen=True)
class WriteAssignment:
    """/brokers/topics/<t> rewritten with a reassignment's replicas (any version), fenced."""
    fence: int
    assignment: Any


@dataclass(frozen=True)
class ReadZkReassignment:
    """-> /admin/reassign_partitions as {(topic, partition): replicas}, or None when absent; arms an exists-watch
    on it (ZK_PARTITION_REASSIGNMENT) when ``watch``."""
    watch: bool = True


@dataclass(frozen=True)
class WriteZkReassignment:
    """/admin/reassign_partitions set to ``partitions`` (deleted when empty), fenced."""
    fence: int
    partitions: dict


@dataclass(frozen=True)
class Send:
    """The core's requests, {broker id: [commands]}, each broker's in order (the shell's channels)."""
    requests: dict


@dataclass(frozen=True)
class CloseChannels:
    """Stop sending (this controller resigned): the requests not yet delivered are dropped, as Kafka's
    ControllerChannelManager.shutdown drops them."""


@dataclass(frozen=True)
class Emit:
    name: str
    fields: dict


@dataclass(frozen=True)
class Clock:
    """-> the controller's now in ms (the core's timers)."""


@dataclass(frozen=True)
class MonoNs:
    """-> a monotonic clock in ns (only the timings the events report)."""


@dataclass(frozen=True)
class Later:
    """Handle the named event after this one (the shell's queue: ``topic_deletion``)."""
    event: str


def run(steps: Steps, do: Callable[[Any], Any]) -> Any:
    """Carry out a handler: ``do(command)`` for each command, its result sent back, its exception thrown
    in; returns what the handler returns, raises what it does not catch."""
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            cmd = steps.send(result) if error is None else steps.throw(error)
        except StopIteration as stop:
            return stop.value
        try:
            result, error = do(cmd), None
        except Exception as e:  # noqa: BLE001 - handed to the handler, which decides
            result, error = None, e
