"""The chaos run's history: ``history.jsonl``, one operation per line (docs/chaos.md).

    with HistoryWriter(run_dir / "history.jsonl") as h:
        op = h.invoke(3, "send", {"topic": "t", "value": "p0-17"})
        h.complete(op, "ok", {"topic": "t", "partition": 1, "offset": 42, "value": "p0-17"}, node=2)
        h.nemesis("kill", {"fault": 0, "phase": "start", "kind": "kill", "target": "controller", "nodes": [2]})

Rules (Jepsen's model):

* Every line gets ``index`` (0, 1, 2, ...) and ``time`` (the injected clock,
  CLOCK_MONOTONIC ns by default) under one lock, so index order is time order.
* A client process has at most one open operation.  Its completion (``ok``,
  ``fail`` or ``info``) copies ``process``, ``f``, ``group`` and ``final`` from
  the invoke.  An operation never completed (a crashed client) stays open.
* Each line is one compact JSON object handed to the OS at once (line
  buffered, flushed), so a crash loses at most a torn last line, which
  :func:`read_history` skips.
* Mistakes in the caller (an unknown ``f``, a second invoke on a busy process,
  completing an operation twice, an error on ``ok``) raise ``ValueError``.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable

from judge.check_model import COMPLETION_TYPES, NEMESIS
from util.jsonlines import JsonLinesWriter, read_json_lines

CLIENT_FS = frozenset({"send", "poll", "commit", "fetch-committed", "join", "sync", "heartbeat", "leave",
                       "init-txn", "txn", "end-txn"})
# Fields the writer owns; ``extra`` may not set them.
_RESERVED = frozenset({"index", "type", "process", "time", "f", "value", "error", "node", "group"})


class HistoryWriter:
    """Thread-safe writer of ``history.jsonl`` (created, or truncated if it exists).  ``path`` None: no file
    (a simulated sweep's run keeps the lines it is returned, and encodes them once, at its end)."""

    def __init__(self, path: Path | str | None, clock: Callable[[], int] = time.monotonic_ns) -> None:
        # a value not JSON: TypeError
        self._out = JsonLinesWriter(path, truncate=True, ensure_ascii=False) if path is not None else None
        self.path = self._out.path if self._out is not None else None
        self._closed = False
        self._clock = clock
        self._lock = threading.Lock()
        self._next_index = 0
        self._last_time: int | None = None
        self._open: dict[int, dict[str, Any]] = {}   # process -> its open invoke
        self._counts: dict[str, dict[str, int]] = {}

    # ------------------------------------------------------------------ operations

    def invoke(self, process: int, f: str, value: Any = None, *, group: str | None = None,
               **extra: Any) -> dict[str, Any]:
        """Start client operation ``f`` on ``process``; returns the line written (pass it to complete)."""
        if isinstance(process, bool) or not isinstance(process, int) or process < 0:
            raise ValueError(f"a client process is an int >= 0, got {process!r}")
        if f not in CLIENT_FS:
            raise ValueError(f"unknown client operation {f!r}; expected one of {sorted(CLIENT_FS)}")
        _check_extra(extra)
        op = {"type": "invoke", "process": process, "f": f, "value": value, "error": None, "node": None,
              "group": group, **_clean_extra(extra)}
        return self._write(op, opens=process)

    def complete(self, invoke_op: dict[str, Any], type_: str, value: Any = None, *, error: str | None = None,
                 node: int | None = None, **extra: Any) -> dict[str, Any]:
        """Complete ``invoke_op`` with ``ok``, ``fail`` or ``info``; ``value`` defaults to the invoke's."""
        if type_ not in COMPLETION_TYPES:
            raise ValueError(f"a completion is ok, fail or info, got {type_!r}")
        if not isinstance(invoke_op, dict) or invoke_op.get("type") != "invoke":
            raise ValueError(f"complete() takes the dict invoke() returned, got {invoke_op!r}")
        if type_ == "ok" and error is not None:
            raise ValueError(f"an ok completion has no error, got {error!r}")
        _check_extra(extra)
        op = {"type": type_, "process": invoke_op["process"], "f": invoke_op["f"],
              "value": invoke_op.get("value") if value is None else value, "error": error, "node": node,
              "group": invoke_op.get("group")}
        if invoke_op.get("final"):
            op["final"] = True
        op.update(_clean_extra(extra))
        return self._write(op, closes=invoke_op)

    def nemesis(self, f: str, value: Any) -> dict[str, Any]:
        """A fault's start or heal: an ``info`` line of process ``"nemesis"``."""
        if not isinstance(f, str) or not f:
            raise ValueError(f"a nemesis operation needs a non-empty f, got {f!r}")
        return self._write({"type": "info", "process": NEMESIS, "f": f, "value": value, "error": None,
                            "node": None, "group": None})

    def _write(self, op: dict[str, Any], opens: int | None = None,
               closes: dict[str, Any] | None = None) -> dict[str, Any]:
        with self._lock:
            if self._closed:
                raise ValueError(f"history {self.path} is closed")
            if opens is not None and opens in self._open:
                raise ValueError(f"process {opens} already has an open operation "
                                 f"(index {self._open[opens]['index']}); a process runs one at a time")
            if closes is not None and self._open.get(closes["process"]) is not closes:
                raise ValueError(f"operation {closes.get('index')} of process {closes['process']} "
                                 "is not open (completed already, or not from this writer)")
            t = self._clock()
            if self._last_time is not None and t < self._last_time:
                t = self._last_time  # keep index order = time order even if the clock misbehaves
            line_op = {"index": self._next_index, "type": op["type"], "process": op["process"], "time": t,
                       **{k: v for k, v in op.items() if k not in ("type", "process")}}
            if self._out is not None:
                self._out.write(line_op)   # TypeError (nothing written, nothing counted): not JSON
            self._next_index += 1
            self._last_time = t
            if opens is not None:
                self._open[opens] = line_op
            if closes is not None:
                del self._open[closes["process"]]
            by_type = self._counts.setdefault(line_op["f"], {})
            by_type[line_op["type"]] = by_type.get(line_op["type"], 0) + 1
            return line_op

    # ------------------------------------------------------------------ progress and lifecycle

    def counts(self) -> dict[str, dict[str, int]]:
        """Lines written so far by f and type: ``{"send": {"invoke": 10, "ok": 9}, "kill": {"info": 1}}``."""
        with self._lock:
            return {f: dict(types) for f, types in self._counts.items()}

    def open_ops(self) -> list[dict[str, Any]]:
        """The invokes not completed yet."""
        with self._lock:
            return sorted(self._open.values(), key=lambda o: o["index"])

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._out is not None:
                self._out.close()

    def __enter__(self) -> "HistoryWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _check_extra(extra: dict[str, Any]) -> None:
    bad = sorted(_RESERVED & set(extra))
    if bad:
        raise ValueError(f"{bad} are set by the writer, not through extra fields")


def _clean_extra(extra: dict[str, Any]) -> dict[str, Any]:
    # ``final`` is present only when true (docs/chaos.md)
    return {k: v for k, v in extra.items() if not (k == "final" and not v)}


# ---------------------------------------------------------------------- reading

def read_history(path: Path | str) -> list[dict[str, Any]]:
    """Every complete line of a history; a torn last line (no ``\n``) and unparseable lines are skipped."""
    return read_json_lines(path)
