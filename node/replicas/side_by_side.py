"""The threads a broker takes up one LeaderAndIsr's hosted new leaders on, side by side.

Each new leader writes and fsyncs its leader epoch checkpoint; side by side, the filesystem commits those fsyncs
together (node/replicas/replica_manager.py, docs/deviations.md).  The threads are started with the broker's first
LeaderAndIsr and kept: started afresh for each request, they took a millisecond each to start on a busy machine,
while the other ISR members' fetches waited on the partitions they had not reached.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, TypeVar

T = TypeVar("T")


class SideBySide:
    def __init__(self, threads: int, name: str = "make-leader") -> None:
        self._threads = threads
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
        self._started = False

    def start(self) -> None:
        """Start every thread now, without waiting for them (the first call only)."""
        if self._started:
            return
        self._started = True
        barrier = threading.Barrier(self._threads)   # each waits for the others: the pool starts all of them
        for _ in range(self._threads):
            self._pool.submit(_wait_at, barrier)

    def run(self, fn: Callable[[T], None], items: Iterable[T]) -> None:
        """``fn`` on each item, side by side; returns when all are done.  Each thread takes the next item not yet
        taken, as a pool's task per item would, but without one: a task handed to the pool costs a future and its
        thread switches, ~15 µs of CPU each, tens of milliseconds for a request moving a thousand leaders here.
        Once an item raises, no item is taken any more (the pool's map cancelled the tasks not yet started) and,
        those running done, the error of the first item in the items' order that raised is raised."""
        items = list(items)
        pending = iter(enumerate(items))   # next() on it is one step under the GIL: each item is taken once
        failed: list[tuple[int, BaseException]] = []

        def take() -> None:
            for i, item in pending:
                if failed:
                    return
                try:
                    fn(item)
                except BaseException as e:
                    failed.append((i, e))
                    return
        list(self._pool.map(lambda _: take(), range(min(self._threads, len(items)))))
        if failed:
            raise min(failed, key=lambda f: f[0])[1]

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False)


def _wait_at(barrier: threading.Barrier) -> None:
    try:
        barrier.wait(timeout=10)
    except threading.BrokenBarrierError:
        pass
