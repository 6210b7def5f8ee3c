"""The report's figures drawn in child processes while the driver goes on collecting and writing HTML.

    drawer = Drawer()                                  # its workers start (and import matplotlib) now
    drawer.draw("timeseries", path, buckets, ...)      # a function of analysis.plots; returns at once
    ...
    drawer.wait()                                      # every figure written, or the first child's error raised
    drawer.close()

matplotlib holds the GIL while it draws, so a thread would not overlap the driver; a process does.  The
workers come from a ``forkserver`` (a fresh interpreter that has imported ``analysis.plots``), never a fork of
the driver, whose py4j connections and threads a child must not inherit.  The figures' data are small
(collected aggregates: plain dicts and lists) and are pickled to the workers.  A child's exception is raised
by :meth:`Drawer.wait` with the child's traceback as its cause; a child that dies makes the pool broken, which
:meth:`Drawer.wait` raises too (``BrokenProcessPool``), so an error is never lost and never hangs the report.
"""
from __future__ import annotations

import importlib
import multiprocessing
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

#: Drawing processes (the machine the report is tuned on has 2 cores; the driver mostly waits on the JVM).
WORKERS = 2
PLOTS = "analysis.plots"


def _draw(module: str, name: str, path: Path, args: tuple, kwargs: dict) -> str:
    getattr(importlib.import_module(module), name)(path, *args, **kwargs)
    return str(path)


def _ready(module: str) -> None:
    importlib.import_module(module)


class Drawer:
    """A small process pool drawing ``module``'s figure functions (each ``f(path, *args, **kwargs)``)."""

    def __init__(self, workers: int = WORKERS, module: str = PLOTS) -> None:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload([module])   # effective when this process starts its forkserver
        self._module = module
        self._pool = ProcessPoolExecutor(workers, mp_context=ctx)
        self._pending: list[tuple[str, Future]] = []
        for _ in range(workers):   # start the workers now: they get ready while the caller collects
            self._pending.append(("(start)", self._pool.submit(_ready, module)))

    def draw(self, name: str, path: Path, *args: Any, **kwargs: Any) -> None:
        """Draw ``module.name(path, *args, **kwargs)`` in a worker; :meth:`wait` reports how it went."""
        self._pending.append((f"{name} -> {Path(path).name}", self._pool.submit(_draw, self._module, name, path,
                                                                                  args, kwargs)))

    def wait(self) -> None:
        """Wait for every figure; raise the first error (the child's exception, its traceback as the cause)."""
        pending, self._pending = self._pending, []
        for what, future in pending:
            try:
                future.result()
            except Exception as e:
                raise RuntimeError(f"drawing the report's figure {what} failed: {e!r}") from e

    def close(self) -> None:
        """Stop the workers (figures not yet started are dropped)."""
        self._pool.shutdown(wait=True, cancel_futures=True)
