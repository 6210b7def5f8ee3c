"""chaos/workload.py ``Worker.ready``: the runner starts the workload, and counts the faults' times, once every
worker's client is built (chaos/runner.py); a worker that builds a client says so itself."""
from __future__ import annotations

import threading

from chaos.workload import Worker


class Opens(Worker):
    opens_client = True

    def __init__(self, built: threading.Event, fail: bool = False):
        super().__init__("opens", threading.Event())
        self.built, self.fail = built, fail

    def body(self) -> None:
        assert self.built.wait(10)
        if self.fail:
            raise RuntimeError("the client could not be built")
        self.ready.set()
        self.stop_event.wait(10)


class Plain(Worker):
    def body(self) -> None:
        self.stop_event.wait(10)


def test_a_worker_that_opens_a_client_is_ready_once_it_is_built():
    built = threading.Event()
    w = Opens(built)
    w.start()
    assert not w.ready.wait(0.2)          # still building its client
    built.set()
    assert w.ready.wait(10) and w.is_alive()
    w.stop_event.set()
    w.join(10)


def test_a_worker_that_fails_before_its_client_is_built_does_not_hold_the_run():
    built = threading.Event()
    w = Opens(built, fail=True)
    w.start()
    built.set()
    assert w.ready.wait(10)
    w.join(10)
    assert isinstance(w.error, RuntimeError)


def test_a_worker_without_a_client_of_its_own_is_ready_as_it_starts():
    w = Plain("plain", threading.Event())
    assert not w.ready.is_set()
    w.start()
    assert w.ready.wait(10) and w.is_alive()
    w.stop_event.set()
    w.join(10)
