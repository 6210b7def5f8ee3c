"""Kafka's retryRequestsUntilConnected for kafkasim's ZooKeeper door: idempotent calls retried across a
lost connection (``until_connected``), shared by zk/client.py and zk/config_store.py."""
from __future__ import annotations

import functools
import threading
from typing import Any, Callable

from kazoo.exceptions import ConnectionLoss, OperationTimeoutError
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

from zk.errors import ZkConnectionLost

#: What :func:`until_connected` retries: kazoo's inside this module, ours from a nested public call
#: (zk/bounded.py's RequestTimedOut is an OperationTimeoutError).  Not a session expiry: as in Kafka,
#: that reaches the caller, whose ephemerals and watches are gone and who must register and decide again.
RETRIED_ERRORS = (ConnectionLoss, OperationTimeoutError, ZkConnectionLost)


def until_connected(method: Callable[..., Any]) -> Callable[..., Any]:
    """Kafka's retryRequestsUntilConnected, for idempotent calls only (reads, ensure_path):
    a connection loss retries the call, with backoff, for up to ``retry_deadline_s``, so a
    ZooKeeper stall of a few seconds (a slow fsync, a GC pause) is a delay and not a failure.
    Conditional writes are not retried here: their callers decide.  A closing client
    (:meth:`ZkClient.fail_fast`) does not retry at all."""
    @functools.wraps(method)
    def retried(self: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(_retrying, "active", False):  # an outer call retries the whole: one deadline
            return method(self, *args, **kwargs)
        _retrying.active = True
        try:
            for attempt in Retrying(retry=retry_if_exception_type(RETRIED_ERRORS),
                                    stop=stop_after_delay(self.retry_deadline_s) | self._closing_stop,
                                    wait=wait_exponential(multiplier=0.05, max=0.5), reraise=True):
                with attempt:
                    return method(self, *args, **kwargs)
        finally:
            _retrying.active = False
    return retried


_retrying = threading.local()
