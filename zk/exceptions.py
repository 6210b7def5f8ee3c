"""kafkasim's ZooKeeper errors, with no I/O: the classes only.

zk/errors.py re-exports them (with the one mapping from kazoo's); pure code (the
simulator's ZooKeeper model, sim/zk_model.py) raises them without loading kazoo.

* ``NoNode``, ``NodeExists``, ``BadVersion``, ``NotEmpty``, ``NoChildrenForEphemerals``,
  ``BadArguments``: ZooKeeper's answer to the request;
* ``RolledBack``, ``RuntimeInconsistency``: in a failed multi's per-op results, the ops
  before and after the one that failed (ZooKeeper's OK and RUNTIMEINCONSISTENCY codes);
* ``ZkConnectionLost``: no connection, or no answer in time (zk/bounded.py).
  The session may still be alive, so an idempotent request may be sent again;
* ``SessionExpired``: the session is gone, and its ephemerals and watches with it.
"""
from __future__ import annotations


class ZkError(Exception):
    """A ZooKeeper request failed."""


class NoNode(ZkError):
    pass


class NodeExists(ZkError):
    pass


class BadVersion(ZkError):
    pass


class NotEmpty(ZkError):
    pass


class NoChildrenForEphemerals(ZkError):
    """An ephemeral znode cannot have children."""


class BadArguments(ZkError):
    """A malformed path or argument."""


class RolledBack(ZkError):
    """In a failed multi: this op was fine, but another one failed, so none was applied."""


class RuntimeInconsistency(ZkError):
    """In a failed multi: this op came after the one that failed and was not tried."""


class ZkConnectionLost(ZkError):
    """No connection to ZooKeeper, or no answer within the request's bound."""


class SessionExpired(ZkError):
    """The session expired (or the client was closed): its ephemerals and watches are gone."""


CONNECTION_ERRORS = (ZkConnectionLost, SessionExpired)


class ControllerMovedError(ZkError):
    """The /controller_epoch check failed: another controller was elected."""


class StateVersionConflict(ZkError):
    """A conditional write found a different zkVersion (BADVERSION)."""

    def __init__(self, path: str):
        super().__init__(f"BADVERSION on {path}")
        self.path = path
