"""Bounds on a broker's stop, and the watchdog that enforces the last one.

Every step of :meth:`node.server.broker.Broker.stop` that talks to ZooKeeper or to
the controller gives up after a bounded time on its own (the controlled
shutdown's budget below, ZooKeeper requests within the session timeout, see
zk/bounded.py).  The watchdog is the last line of defence for whatever still
blocks: past :func:`stop_deadline_s` it logs ``shutdown_timed_out`` with the
step the stop was stuck in, dumps every thread's stack to stderr (the broker's
log file), closes the event log and ends the process with
:data:`EXIT_SHUTDOWN_TIMED_OUT`.
"""
from __future__ import annotations

import faulthandler
import logging
import os
import sys
import threading
import time
from typing import Callable

from node.config import ClusterConfig
from node.events import EventLog

log = logging.getLogger(__name__)

#: The exit status of a broker whose stop the watchdog cut short (0 = a clean stop, 1 = start-up failed).
EXIT_SHUTDOWN_TIMED_OUT = 3
#: How long a stop waits, after a controlled shutdown succeeded, for the controller's LeaderAndIsr to be applied
#: here and its coordinator unloads done before the Kafka listeners close (:func:`await_handover`).
HANDOVER_WAIT_S = 1.0
#: The stop's steps that wait a fixed time at most: the controller thread's join (ControllerShell.shutdown),
#: the gRPC server's stop (Broker.stop) and the wait for the controlled shutdown's handover.
FIXED_STEPS_S = 5.0 + 2.0 + HANDOVER_WAIT_S
#: Slack for the steps that only touch local files and threads (groups, replica logs, the event log).
SLACK_S = 5.0


def controlled_shutdown_budget_s(cfg: ClusterConfig) -> float:
    """Kafka's bound on a controlled shutdown: ``controlled.shutdown.max.retries`` attempts, each
    waiting up to ``controller.socket.timeout.ms`` for the controller, ``controlled.shutdown.retry.backoff.ms``
    apart.  0 when ``controlled.shutdown.enable`` is off."""
    g = cfg.get
    if not g("controlled.shutdown.enable"):
        return 0.0
    attempts = max(1, g("controlled.shutdown.max.retries"))
    return attempts * (g("controller.socket.timeout.ms") + g("controlled.shutdown.retry.backoff.ms")) / 1000.0


def stop_deadline_s(cfg: ClusterConfig) -> float:
    """The watchdog's bound on a whole stop: the controlled shutdown's budget, plus twice the session
    timeout (a ZooKeeper request under way when the budget ran out, then closing the session), plus
    the fixed-bound steps and some slack."""
    return controlled_shutdown_budget_s(cfg) + 2 * cfg.session_timeout_ms / 1000.0 + FIXED_STEPS_S + SLACK_S


class ShutdownWatchdog:
    """Ends the process if a stop does not finish in time.

    ``start()`` arms it, ``enter(step)`` names the step under way, ``finish()`` disarms it (False
    when it had already fired).  ``clock`` and ``exit`` are injectable for tests.
    """

    def __init__(self, events: EventLog, deadline_s: float, clock: Callable[[], float] = time.monotonic,
                 exit: Callable[[int], None] = os._exit, poll_s: float = 0.1):
        self.events = events
        self.deadline_s = deadline_s
        self.step = "starting"
        self.fired = False
        self._clock = clock
        self._exit = exit
        self._poll_s = poll_s
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._t0 = 0.0
        self._thread = threading.Thread(target=self._run, name="shutdown-watchdog", daemon=True)

    def start(self) -> "ShutdownWatchdog":
        self._t0 = self._clock()
        self._thread.start()
        return self

    def enter(self, step: str) -> None:
        self.step = step
        self.events.emit("shutdown_step", step=step, elapsed_ms=round((self._clock() - self._t0) * 1000, 3))

    def finish(self) -> bool:
        """Disarm.  If the watchdog fired, this waits until it has logged (and, for real, until the
        process is gone), then returns False."""
        with self._lock:
            self._done.set()
            return not self.fired

    def _run(self) -> None:
        while True:
            remaining = self._t0 + self.deadline_s - self._clock()
            if remaining <= 0:
                break
            if self._done.wait(min(remaining, self._poll_s)):
                return
        with self._lock:
            if self._done.is_set():
                return
            self.fired = True
            elapsed_s = self._clock() - self._t0
            log.error("stop stuck in %s after %.1fs (bound %.1fs): exiting", self.step, elapsed_s, self.deadline_s)
            try:
                faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
            except Exception:  # no usable stderr: the event below is what matters
                pass
            self.events.emit("shutdown_timed_out", step=self.step, elapsed_ms=round(elapsed_s * 1000, 3),
                             deadline_ms=round(self.deadline_s * 1000, 3))
            self.events.close()
            for h in logging.getLogger().handlers:
                h.flush()
            sys.stdout.flush()
            sys.stderr.flush()
            self._exit(EXIT_SHUTDOWN_TIMED_OUT)


def await_handover(moved: set[tuple[str, int]], leads: Callable[[set[tuple[str, int]]], set[tuple[str, int]]],
                   released: Callable[[set[tuple[str, int]]], bool], events: EventLog,
                   timeout_s: float = HANDOVER_WAIT_S, clock: Callable[[], float] = time.monotonic) -> bool:
    """After a successful controlled shutdown: wait until none of ``moved`` (the partitions this broker led, with
    other replicas, when it asked) is led here any more (``leads(moved)``: the controller's LeaderAndIsr applied) and
    ``released(moved)`` (the group and transaction coordinators unloaded them, their parked requests answered),
    at most ``timeout_s``; logs ``controlled_shutdown_handover``.  The Kafka listeners close after it, so their
    clients get those answers, and NOT_COORDINATOR / NOT_LEADER_OR_FOLLOWER for what they send meanwhile, before
    their connections close: what Kafka 2.8.2 shows on the wire, where the LeaderAndIsr is handled while
    KafkaServer.shutdown() stops its dynamic config manager, before it stops the socket server
    (docs/kafka-listener.md)."""
    t0 = clock()
    done = threading.Event()
    still = set(moved)
    while True:
        # ``leads(tps)``: those of ``tps`` still led here.  Each poll asks only about the partitions not handed
        # over yet (asking about every hosted partition every 2 ms, at thousands of partitions, took the
        # interpreter from the LeaderAndIsr being waited for)
        still = leads(still) if still else still
        if not still and released(moved):
            break
        if clock() - t0 >= timeout_s:
            break
        done.wait(0.002)   # polling the replica manager and the shells (no event to wait on across both)
    settled = not leads(moved) and released(moved)
    events.emit("controlled_shutdown_handover", moved=len(moved), settled=settled,
                waited_ms=round((clock() - t0) * 1000, 3))
    return settled
