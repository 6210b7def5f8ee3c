"""Waiting for a condition with a deadline: the only way kafkasim synchronises with other processes."""
from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


class WaitTimeout(TimeoutError):
    pass


def wait_for(cond: Callable[[], T], timeout: float, what: str, interval: float = 0.02) -> T:
    """Poll ``cond`` until it returns a truthy value (returned) or ``timeout`` seconds pass.

    Exceptions raised by ``cond`` count as "not yet"; the last one is chained
    to the WaitTimeout so that a failure says why.
    """
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            value = cond()
            if value:
                return value
        except Exception as e:  # the thing polled may not be up yet
            last = e
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout:.1f}s waiting for {what}") from last
        time.sleep(interval)
