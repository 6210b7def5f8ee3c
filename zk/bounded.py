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

The handler's ``select`` (:func:`poll_select`) is kazoo's own answer by a
cheaper road.  kazoo's connection thread calls it before every read and write
on the socket and once per turn of its loop, three to four times per request,
and kazoo's version builds a fresh ``selectors`` epoll each time (create,
register each socket, wait, close: about 10 µs of CPU, and the profile of a
controller failover's ZooKeeper round trips put half of that thread's Python
time there).  One ``poll`` does it in about 2 µs, with no limit on the fd's
number either.
"""
from __future__ import annotations

import math
import select
from typing import Any, Callable, Sequence

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

    def select(self, *args: Any, **kwargs: Any) -> tuple[list, list, list]:
        return poll_select(*args, **kwargs)


_READ = select.POLLIN
_WRITE = select.POLLOUT


def _fd(fileobj: Any) -> int:
    """kazoo's ``fileobj_to_fd``: an int, or the object's ``fileno()``; TypeError for anything else or a
    negative one (a closed socket's)."""
    if isinstance(fileobj, int):
        fd = fileobj
    else:
        try:
            fd = int(fileobj.fileno())
        except (AttributeError, TypeError, ValueError):
            raise TypeError(f"Invalid file object: {fileobj!r}") from None
    if fd < 0:
        raise TypeError(f"Invalid file descriptor: {fd}")
    return fd


def poll_select(rlist: Sequence[Any], wlist: Sequence[Any], xlist: Sequence[Any],
                timeout: float | None = None) -> tuple[list, list, list]:
    """kazoo's ``selector_select`` (its drop-in for ``select.select``) with one ``select.poll`` in place of a
    ``selectors`` epoll made and closed per call; the same answers: an object ready to read is listed as
    readable only, one ready to write (and not to read) as writable; a hang-up or an error makes it ready
    for whichever it was asked about (as ``selectors``' epoll reports them); ``xlist`` is never answered; a
    negative or non-numeric timeout, or an fd the kernel does not know, raise as kazoo's does."""
    if timeout is not None:
        if not isinstance(timeout, (int, float)):
            raise TypeError("timeout must be a number")
        if timeout < 0:
            raise ValueError("timeout must be non-negative")
    wanted: dict[int, int] = {}
    objects: dict[int, list[Any]] = {}
    for mask, fileobjs in ((_READ, rlist), (_WRITE, wlist)):
        for fileobj in fileobjs:
            fd = _fd(fileobj)
            wanted[fd] = wanted.get(fd, 0) | mask
            objects.setdefault(fd, []).append(fileobj)
    poller = select.poll()
    for fd, mask in wanted.items():
        poller.register(fd, mask)
    ready = poller.poll(None if timeout is None else math.ceil(timeout * 1000))
    readable: list[Any] = []
    writable: list[Any] = []
    for fd, got in ready:
        if got & select.POLLNVAL:   # epoll would have refused to register it
            raise ValueError("Invalid event mask or fd")
        # selectors' epoll: any bit but IN makes it writable, any bit but OUT readable; then what was asked
        events = (_WRITE if got & ~_READ else 0) | (_READ if got & ~_WRITE else 0)
        events &= wanted[fd]
        if events & _READ:
            readable.extend(objects[fd])
        elif events & _WRITE:
            writable.extend(objects[fd])
    return readable, writable, []
