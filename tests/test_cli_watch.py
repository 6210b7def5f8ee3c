"""``kafkasim topics --describe --watch``: Ctrl-C ends the redraw loop at any moment of it.

The loop runs here in-process, on a view with nothing in it (no process is started: the unit tier), with no wait
between redraws, and is interrupted 400 times by a real SIGINT sent to this process at a random moment.  A handler
that took a lock (the loop's ``threading.Event.set``, as before) hung when it ran while the same thread held that
Event's lock inside ``wait``: with no wait between redraws the thread holds it most of the time, and this test hung
within a few dozen signals (pytest-timeout makes that a failure).  tests/test_cli_data.py runs the real command
against a real cluster."""
from __future__ import annotations

import io
import os
import random
import signal
import threading

import pytest

from cli.data import watch
from launcher.cluster import ClusterView


class EmptyCluster:
    """What ``watch`` reads of a cluster: a view (no broker, so no offsets to ask for)."""

    def view(self) -> ClusterView:
        return ClusterView(controller_id=1, controller_epoch=3, brokers={}, topics={})


@pytest.mark.timeout(30)
def test_ctrl_c_at_any_moment_ends_the_watch_and_gives_the_handler_back():
    rng = random.Random(20261130)
    before = signal.getsignal(signal.SIGINT)
    for _ in range(400):
        out = io.StringIO()
        fire = threading.Timer(rng.uniform(0.0, 0.004), os.kill, (os.getpid(), signal.SIGINT))

        def describe(view: ClusterView, topic: str | None, out) -> None:
            print(f"nothing in {topic}", file=out)
            if fire.ident is None:
                fire.start()   # Ctrl-C from the first redraw on: the command's handler is in place

        try:
            assert watch(EmptyCluster(), "lab", 0.0, describe, out=out) == 0
        finally:
            if fire.ident is not None:
                fire.join()
        frames = out.getvalue().split("\x1b[H\x1b[2J")
        assert len(frames) >= 2 and all("controller 1 epoch 3\nnothing in lab\n" in f for f in frames[1:]), frames
        assert signal.getsignal(signal.SIGINT) is before   # Ctrl-C is the caller's again
        assert signal.set_wakeup_fd(-1) == -1              # and no wakeup fd is left installed
