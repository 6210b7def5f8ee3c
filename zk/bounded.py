"""kazoo requests that never wait forever.

kazoo's synchronous calls (``get``, ``exists``, ``create``, a transaction's
``commit``, ...) send a request and then block in ``AsyncResult.get()``
without a timeout.  While the client has no connection (ZooKeeper died, or
is partitioned away) kazoo keeps the request queued until a connection comes
back, which may be never: the caller hangs.  A broker stopping then never
exits (it hung reading /controller for its controlled shutdown).

:class:`BoundedHandler` is kazoo's threading handler whose results bound
every blocking wait, in the spirit of Kafka's ZooKeeperClient (which fails a
request that found no connection within a bound):

- a wait without a timeout lasts at most the client's request bound (the
  session timeout: a request unanswered for that long belongs to a session
  the server may already have expired), then raises
  :class:`RequestTimedOut`, an ``OperationTimeoutError``, so the callers'
  connection-error handling covers it;
- once the client is closing (:meth:`zk.client.ZkClient.fail_fast`), a wait
  on a request made while there is no connection raises ``ConnectionLoss``
  at once.

A request that timed out this way may still be sent when the connection
comes back, exactly like one whose answer a connection loss swallowed: its
outcome is unknown, and callers already treat a connection error so.
"""
from __future__ import annotations

from typing import Any, Callable

from kazoo.exceptions import ConnectionLoss, OperationTimeoutError
from kazoo.handlers.threading import AsyncResult, KazooTimeoutError, SequentialThreadingHandler

#: wait_bound() -> seconds a blocking wait may last; 0 = fail at once (closing, no connection).
WaitBound = Callable[[], float]


class RequestTimedOut(OperationTimeoutError):
    """No answer from ZooKeeper within the bound: a connection error, not a hang."""


class BoundedResult(AsyncResult):
    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        if block and not self.ready():
            bound = self._handler.wait_bound()
            if bound <= 0:
                raise ConnectionLoss("no ZooKeeper connection, and the client is closing: not waiting")
            if timeout is None:  # an explicit timeout (zk/batch.py's) is the caller's own bound
                timeout = bound
        try:
            return super().get(block, timeout)
        except KazooTimeoutError:
            raise RequestTimedOut(f"no answer from ZooKeeper within {timeout}s") from None


class BoundedHandler(SequentialThreadingHandler):
    """kazoo's default handler, whose async results are :class:`BoundedResult`."""

    def __init__(self, wait_bound: WaitBound):
        super().__init__()
        self.wait_bound = wait_bound

    def async_result(self) -> BoundedResult:
        return BoundedResult(self)
