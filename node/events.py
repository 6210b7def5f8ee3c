"""The structured event log: one JSON object per line, per broker.

Each line carries ``ts_ms`` (wall clock, ms since the epoch, float),
``mono_ns`` (CLOCK_MONOTONIC in ns: comparable across processes on one
machine), ``broker`` and ``type``, then the event's own fields.  The schema
of every type is in docs/events.md.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Iterable

from kafkacommon.event import Event
from util.jsonlines import JsonLinesWriter, json_object, read_json_lines

__all__ = ["EventLog", "EventTail", "read_events", "read_json_lines", "read_run_events"]


class EventLog:
    """A broker's event log: ``emit(type, **fields)`` or ``log(*events)`` (the cores' ``Event``s)."""

    def __init__(self, path: Path | str, broker_id: int,
                 wall_ms: Callable[[], float] = lambda: time.time() * 1000.0,
                 mono_ns: Callable[[], int] = time.monotonic_ns):
        self._out = JsonLinesWriter(path, default=str)   # anything not JSON-serialisable: str()
        self.path = self._out.path
        self.broker_id = broker_id
        self._wall_ms = wall_ms
        self._mono_ns = mono_ns

    def emit(self, type_: str, **fields: Any) -> dict[str, Any]:
        record = self.stamp(type_, **fields)
        self._out.write(record)   # nothing once closed
        return record

    def stamp(self, type_: str, **fields: Any) -> dict[str, Any]:
        """The event's line, stamped now (its clocks), for :meth:`write_stamped`."""
        return {"ts_ms": round(self._wall_ms(), 3), "mono_ns": self._mono_ns(),
                "broker": self.broker_id, "type": type_, **fields}

    def write_stamped(self, records: list[dict[str, Any]]) -> None:
        """Lines :meth:`stamp` made, in order, in one write (nothing once closed)."""
        if records:
            self._out.write_many(records)

    def emit_many(self, items: Iterable[tuple[str, dict[str, Any]]]) -> None:
        """``emit`` each (type, fields), in order, in one write to the file (the same lines, stamped now: each
        as :meth:`stamp` does it)."""
        wall_ms, mono_ns, broker = self._wall_ms, self._mono_ns, self.broker_id
        self.write_stamped([{"ts_ms": round(wall_ms(), 3), "mono_ns": mono_ns(), "broker": broker, "type": t, **fields}
                            for t, fields in items])

    def log(self, *events: Event) -> None:
        """Write the events a core returned, in order (in one write)."""
        self.emit_many(events)   # each Event is its (name, fields)

    def close(self) -> None:
        self._out.close()


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
                obj = json_object(line)
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
