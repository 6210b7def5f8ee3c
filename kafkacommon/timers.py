"""Keyed timers for a sans-IO core (Kafka's CoordinatorTimer), the clock being the caller's.

A timer is scheduled under a key, and scheduling the same key again replaces it; it is cancelled by key.
Firing one runs its operation, which is handed whatever the call that fired it passes (the group
coordinator's :class:`coordinator.result.Result`, the transaction coordinator's) and adds to it.  Keys are
tuples, so that no id can make two keys equal.  :meth:`Timers.due` lists the timers due at a time in
deadline order, ties in the order they were scheduled; :meth:`Timers.fire` runs one if it is still the one
scheduled under its key (firing an earlier one may have cancelled or replaced it).  The deadlines are kept
in a heap; a replaced or cancelled timer's entry is dropped when it reaches the top.

Pure: no I/O.  Used by coordinator/ (coordinator/timers.py names its keys) and transactions/.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any, Callable

TimerKey = tuple


@dataclass(eq=False, slots=True)
class Timer:
    key: TimerKey
    deadline_ms: int
    seq: int                                 # scheduling order: ties between equal deadlines
    op: Callable[[Any], None]                # op(result): what firing does
    data: Any = None                         # what the scheduler keeps with it (a DelayedJoin's delays)


class Timers:
    def __init__(self) -> None:
        self._armed: dict[TimerKey, Timer] = {}
        self._heap: list[tuple[int, int, Timer]] = []
        self._seq = 0

    def schedule(self, key: TimerKey, deadline_ms: int, op: Callable[[Any], None], data: Any = None) -> Timer:
        """Arm ``op`` for ``deadline_ms`` under ``key``, replacing the timer scheduled under it, if any."""
        self._seq += 1
        timer = Timer(key, deadline_ms, self._seq, op, data)
        self._armed[key] = timer
        heapq.heappush(self._heap, (deadline_ms, timer.seq, timer))
        if len(self._heap) > 4 * len(self._armed) + 1024:   # mostly replaced heartbeats: start afresh
            self._heap = [(t.deadline_ms, t.seq, t) for t in self._armed.values()]
            heapq.heapify(self._heap)
        return timer

    def cancel(self, key: TimerKey) -> Timer | None:
        """Disarm the timer under ``key``; returns it (None: there was none)."""
        return self._armed.pop(key, None)

    def get(self, key: TimerKey) -> Timer | None:
        return self._armed.get(key)

    def is_scheduled(self, key: TimerKey) -> bool:
        return key in self._armed

    def __len__(self) -> int:
        return len(self._armed)

    def clear(self) -> None:
        self._armed.clear()
        self._heap.clear()

    def next_deadline_ms(self) -> int | None:
        """The earliest deadline of an armed timer; None when none is armed."""
        heap, armed = self._heap, self._armed
        while heap and armed.get(heap[0][2].key) is not heap[0][2]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def due(self, now_ms: int) -> list[Timer]:
        """The armed timers whose deadline is <= ``now_ms``, earliest first (then in scheduling order).
        Timers armed after this call wait for the next one, even if they are due."""
        heap, armed, due = self._heap, self._armed, []
        while heap and heap[0][0] <= now_ms:
            timer = heapq.heappop(heap)[2]
            if armed.get(timer.key) is timer:
                due.append(timer)
        return due

    def fire(self, timer: Timer, result: Any) -> bool:
        """Run ``timer``'s operation with ``result`` if it is still armed (then it is disarmed first)."""
        if self._armed.get(timer.key) is not timer:
            return False
        del self._armed[timer.key]
        timer.op(result)
        return True
