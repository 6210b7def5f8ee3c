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

Both shells keep one :class:`RedoQueue`: the broker's event thread
(node/shells/controller_shell.py) and the simulator's controller (sim/controller.py) report each
event cut short and, on every tick, run what :meth:`RedoQueue.due` hands back.
"""
from __future__ import annotations

# the controller's events, by the names both shells (and the controller_error log line) use
STARTUP = "startup"
CONTROLLER_CHANGE = "controller_change"
BROKER_CHANGE = "broker_change"
TOPIC_CHANGE = "topic_change"
TOPIC_DELETION = "topic_deletion"
PARTITION_MODIFICATIONS = "partition_modifications"   # a topic znode changed (partitions added)
CONFIG_CHANGE = "config_change"                       # a topic's or this broker's config changed
REASSIGNMENT_ISR_CHANGE = "reassignment_isr_change"   # an ISR grew: reassignments may complete
ZK_PARTITION_REASSIGNMENT = "zk_partition_reassignment"   # /admin/reassign_partitions appeared
LOG_DIR_EVENT = "log_dir_event"                       # /log_dir_event_notification changed (controller/log_dirs.py)
EXPIRE = "expire"
REGISTER_AND_REELECT = "register_and_reelect"
TICK = "tick"
SHUTDOWN = "shutdown"

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
