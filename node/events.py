"""The structured event log: one JSON object per line, per broker.

Each line carries ``ts_ms`` (wall clock, ms since the epoch, float),
``mono_ns`` (CLOCK_MONOTONIC in ns: comparable across processes on one
machine), ``broker`` and ``type``, then the event's own fields.  The schema
of every type is in docs/events.md.
"""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable


class EventLog:
    def __init__(self, path: Path | str, broker_id: int,
                 wall_ms: Callable[[], float] = lambda: time.time() * 1000.0,
                 mono_ns: Callable[[], int] = time.monotonic_ns):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.broker_id = broker_id
        self._wall_ms = wall_ms
        self._mono_ns = mono_ns
        self._lock = threading.Lock()
        # line-buffered append: each event reaches the OS as one write
        self._f = open(self.path, "a", buffering=1, encoding="utf-8")

    def emit(self, type_: str, **fields: Any) -> dict[str, Any]:
        record = {"ts_ms": round(self._wall_ms(), 3), "mono_ns": self._mono_ns(),
                  "broker": self.broker_id, "type": type_, **fields}
        line = json.dumps(record, separators=(",", ":"), default=str)
        with self._lock:
            if not self._f.closed:
                self._f.write(line + "\n")
        return record

    def close(self) -> None:
        with self._lock:
            if not self._f.closed:
                self._f.flush()
                os.fsync(self._f.fileno())
                self._f.close()


def read_json_lines(path: Path | str) -> list[dict[str, Any]]:
    """Every complete JSON-object line of a file written line by line; a torn last line (a killed
    writer) and lines that don't parse are skipped.  Event logs and chaos histories are read so."""
    out: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.endswith("\n"):
                break
            obj = _json_object(line)
            if obj is not None:
                out.append(obj)
    return out


def _json_object(line: str | bytes) -> dict[str, Any] | None:
    """One line's JSON object; None when it does not parse or is not an object."""
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def read_events(path: Path | str) -> list[dict[str, Any]]:
    """Every complete line of an event log; a torn last line (a killed writer) is skipped."""
    return read_json_lines(path)


class EventTail:
    """Follows a run's event logs: each :meth:`poll` parses only the lines appended since the last.

    Waiting for an event by re-reading every log costs time proportional to
    the whole log on every poll; at 1,000 partitions a broker logs thousands
    of lines, and a waiter polling every 10 ms then takes a core away from
    the brokers it is watching.  A line still being written (no newline yet)
    is left for the next poll.  ``contains`` skips, unparsed, every line
    without that substring.
    """

    def __init__(self, run_dir: Path | str, contains: str | None = None):
        self.dir = Path(run_dir) / "events"
        self._needle = contains.encode() if contains else None
        self._offsets: dict[Path, int] = {}

    def poll(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for p in sorted(self.dir.glob("broker-*.jsonl")):
            start = self._offsets.get(p, 0)
            with open(p, "rb") as f:
                f.seek(start)
                chunk = f.read()
            end = chunk.rfind(b"\n") + 1
            if not end:
                continue
            self._offsets[p] = start + end
            for line in chunk[:end].splitlines():
                if self._needle is not None and self._needle not in line:
                    continue
                obj = _json_object(line)
                if obj is not None:
                    out.append(obj)
        out.sort(key=lambda e: e["mono_ns"])
        return out

    def first(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
        """The first newly logged event ``predicate`` accepts, or None; for ``wait_for``."""
        return next((e for e in self.poll() if predicate(e)), None)


def read_run_events(run_dir: Path | str) -> list[dict[str, Any]]:
    """Every broker's events in a run directory (``<run_dir>/events/broker-*.jsonl``), merged in time order."""
    out: list[dict[str, Any]] = []
    for p in sorted((Path(run_dir) / "events").glob("broker-*.jsonl")):
        out.extend(read_events(p))
    return sorted(out, key=lambda e: e["mono_ns"])
