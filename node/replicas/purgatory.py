"""Kafka's produce purgatory: acks=all appends waiting for the high watermark.

A waiter is registered under its partition's lock when the records are
appended; the replica manager checks the partition's waiters whenever the HW
or the role may have moved, and hands the finished ones to this thread, which
also times out the ones past their deadline.  Callbacks run here, outside
every partition lock (the group coordinator's write path continues from them).
A follower's Fetch that moves the HW completes its waiters itself, once it has
let go of the partition's lock (:func:`run_callbacks`), as Kafka's request
handler completes a DelayedProduce: no hand-off to this thread on the path of
every acks=all answer.
"""
from __future__ import annotations

import heapq
import logging
import threading
import time
from typing import Callable

from kafkacommon import errors
from node.replicas.hosted import AckWaiter, Hosted

log = logging.getLogger(__name__)
TP = tuple[str, int]


class Purgatory(threading.Thread):
    """Completes acks=all waiters off the request threads: runs their callbacks
    (outside every partition lock) and times out the ones past their deadline."""

    def __init__(self, outcome: Callable[["Hosted", AckWaiter], int | None]):
        super().__init__(name="produce-purgatory", daemon=True)
        self._outcome = outcome
        self._cond = threading.Condition()
        self._done: list[tuple[AckWaiter, int]] = []
        self._watched: list[tuple[float, int, Hosted, AckWaiter]] = []  # a heap by deadline
        self._seq = 0
        self._stopped = False
        self.start()

    def watch(self, h: "Hosted", w: AckWaiter) -> None:
        with self._cond:
            self._seq += 1
            heapq.heappush(self._watched, (w.deadline, self._seq, h, w))
            if self._watched[0][3] is w:  # the earliest deadline now: the thread's wait must shorten
                self._cond.notify()

    def complete(self, w: AckWaiter, code: int) -> None:
        with self._cond:
            self._done.append((w, code))
            self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def _drop_settled(self) -> None:
        """With ``_cond`` held: the waiters at the head of the deadline heap that have their outcome already
        leave it, whatever their deadline, so the thread sleeps until the next one that may expire (a waiter
        completed by the HW is only read here, without its partition's lock)."""
        while self._watched and self._watched[0][3].settled:
            heapq.heappop(self._watched)

    def run(self) -> None:
        while True:
            with self._cond:
                self._drop_settled()
                while not self._done and not self._stopped and not (
                        self._watched and self._watched[0][0] <= time.monotonic()):
                    self._cond.wait(self._watched[0][0] - time.monotonic() if self._watched else None)
                    self._drop_settled()
                if self._stopped:
                    return
                done, self._done = self._done, []
                expired = []
                while self._watched and self._watched[0][0] <= time.monotonic():
                    expired.append(heapq.heappop(self._watched))
            for _, _, h, w in expired:
                if w.settled:
                    continue  # completed already
                with h.cond:
                    if w.settled or w not in h.waiters:
                        continue  # completed already
                    h.waiters.remove(w)
                    w.settled = True
                    code = self._outcome(h, w)
                done.append((w, errors.REQUEST_TIMED_OUT if code is None else code))
            run_callbacks(done)


def run_callbacks(done: list[tuple[AckWaiter, int]]) -> None:
    """Each finished waiter's callback with its outcome, with no partition lock held."""
    for w, code in done:
        try:
            w.on_done(code)
        except Exception:
            log.exception("append callback failed")
