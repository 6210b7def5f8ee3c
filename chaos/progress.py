"""The progress line of a chaos run: elapsed time, faults so far, op counts.

On a terminal it is a rich progress bar redrawn in place; otherwise (CI, a
pipe) it prints a line every ``every_s`` seconds.  It doubles as the nemesis
loop's waiting point, so the line stays current while the run waits for its
next fault.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, TextIO

from rich.console import Console
from rich.progress import BarColumn, TextColumn
from rich.progress import Progress as RichProgress

BAR = 24
CLIENT_OPS = {"send", "poll", "commit", "fetch-committed", "join", "sync", "heartbeat", "leave"}


class Progress:
    def __init__(self, stream: TextIO, duration_s: float, faults_total: int,
                 counts: Callable[[], dict], enabled: bool = True, every_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic):
        self.stream = stream
        self.duration_s = duration_s
        self.faults_total = faults_total
        self.counts = counts
        self.enabled = enabled
        self.tty = enabled and hasattr(stream, "isatty") and stream.isatty()
        self.every_s = 1.0 if self.tty else every_s
        self.clock = clock
        self.t0 = clock()
        self.faults_started = 0
        self.current: str | None = None
        self.stage = "running"
        self._wake = threading.Event()
        self._last = 0.0
        self._bar: RichProgress | None = None
        self._task: Any = None

    def start(self, t0: float) -> None:
        self.t0 = t0
        if self.tty:
            self._bar = RichProgress(BarColumn(bar_width=BAR), TextColumn("{task.fields[status]}"),
                                     console=Console(file=self.stream, force_terminal=True), auto_refresh=False)
            self._task = self._bar.add_task("chaos", total=self.duration_s or 1, status="")
            self._bar.start()

    def fault(self, fault: Any, skipped: str | None = None) -> None:
        if fault is None:
            self.current = None
        else:
            self.faults_started += 1
            self.current = fault.describe() + (f" (skipped: {skipped})" if skipped else "")
            self._emit(force=True)

    def phase(self, name: str) -> None:
        self.stage = name
        self._emit(force=True)

    def status(self) -> tuple[float, str]:
        """(elapsed s, the text after the bar)."""
        elapsed = min(self.clock() - self.t0, self.duration_s)
        c: dict = self.counts()   # {f: {type: n}}; nemesis lines are info lines of fault kinds
        clients = {f: t for f, t in c.items() if f in CLIENT_OPS}
        ok, fail, info = (sum(t.get(k, 0) for t in clients.values()) for k in ("ok", "fail", "info"))
        now = f" | {self.current}" if self.current else ""
        return elapsed, (f"{elapsed:5.0f}/{self.duration_s:.0f}s {self.stage} "
                         f"| faults {self.faults_started}/{self.faults_total} | ops ok {ok} fail {fail} info {info}{now}")

    def line(self) -> str:
        elapsed, text = self.status()
        done = int(BAR * elapsed / self.duration_s) if self.duration_s else BAR
        return f"[{'#' * done}{'-' * (BAR - done)}] {text}"

    def _emit(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if not force and now - self._last < self.every_s:
            return
        self._last = now
        if self._bar is not None:
            elapsed, text = self.status()
            self._bar.update(self._task, completed=elapsed, status=text)
            self._bar.refresh()
            return
        self.stream.write(self.line() + "\n")
        self.stream.flush()

    def wait(self, seconds: float) -> None:
        """Wait up to ``seconds`` (at most one display interval), then redraw."""
        self._wake.wait(min(seconds, self.every_s))
        self._emit()

    def stop(self) -> None:
        if self.enabled:
            self._emit(force=True)
            if self._bar is not None:
                self._bar.stop()
                self._bar = None
