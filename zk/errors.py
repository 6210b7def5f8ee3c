"""kafkasim's ZooKeeper errors, and the one place kazoo's are turned into them.

Nothing outside zk/ sees a kazoo exception: every public method of
:class:`zk.client.ZkClient` raises these instead (``translate_errors``), and a
multi's or a multiRead's per-op failures come back as these too.

* ``NoNode``, ``NodeExists``, ``BadVersion``, ``NotEmpty``: ZooKeeper's answer to
  the request;
* ``ZkConnectionLost``: no connection, or no answer in time (zk/bounded.py).
  The session may still be alive, so an idempotent request may be sent again;
* ``SessionExpired``: the session is gone, and its ephemerals and watches with it.

``CONNECTION_ERRORS`` is what a lost or stalled connection raises.

The classes themselves live in zk/exceptions.py (no kazoo there), so pure code can raise them.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

from kazoo import exceptions as kz
from kazoo.handlers.threading import KazooTimeoutError

from zk.exceptions import (  # re-exported (__all__): the classes live in the pure module
    CONNECTION_ERRORS, BadArguments, BadVersion, NoChildrenForEphemerals, NodeExists, NoNode, NotEmpty, RolledBack,
    RuntimeInconsistency, SessionExpired, ZkConnectionLost, ZkError,
)

__all__ = ["CONNECTION_ERRORS", "BadArguments", "BadVersion", "NoChildrenForEphemerals", "NodeExists", "NoNode",
           "NotEmpty", "RolledBack", "RuntimeInconsistency", "SessionExpired", "ZkConnectionLost", "ZkError",
           "translate", "translate_errors", "translated"]

_OURS: list[tuple[type[BaseException], type[ZkError]]] = [
    (kz.NoNodeError, NoNode),
    (kz.NodeExistsError, NodeExists),
    (kz.BadVersionError, BadVersion),
    (kz.NotEmptyError, NotEmpty),
    (kz.NoChildrenForEphemeralsError, NoChildrenForEphemerals),
    (kz.BadArgumentsError, BadArguments),
    (kz.RolledBackError, RolledBack),
    (kz.RuntimeInconsistency, RuntimeInconsistency),
    (kz.SessionExpiredError, SessionExpired),      # also ConnectionClosedError: a closed client
    (kz.ConnectionLoss, ZkConnectionLost),
    (kz.OperationTimeoutError, ZkConnectionLost),  # zk/bounded.py's RequestTimedOut
    (kz.ConnectionDropped, ZkConnectionLost),
    (KazooTimeoutError, ZkConnectionLost),         # no connection within the connection timeout at start
]


def translate(e: BaseException) -> BaseException:
    """Our error for one of kazoo's (the original as its cause); any other exception as it is."""
    if isinstance(e, ZkError):
        return e
    for theirs, ours in _OURS:
        if isinstance(e, theirs):
            break
    else:
        if not isinstance(e, kz.KazooException):
            return e
        ours = ZkError
    out = ours(*e.args)
    out.__cause__ = e
    return out


F = TypeVar("F", bound=Callable[..., Any])


def translated(method: F) -> F:
    """``method`` raising our errors instead of kazoo's."""
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except (kz.KazooException, KazooTimeoutError) as e:
            raise translate(e) from e
    return call  # type: ignore[return-value]


def translate_errors(cls: type) -> type:
    """Class decorator: every public method of ``cls`` raises our errors instead of kazoo's."""
    for name, attr in list(vars(cls).items()):
        if not name.startswith("_") and callable(attr) and not isinstance(attr, (staticmethod, classmethod, type)):
            setattr(cls, name, translated(attr))
    return cls
