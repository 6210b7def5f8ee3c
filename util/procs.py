"""What Linux says about a process, from /proc/<pid>/stat."""
from __future__ import annotations

import os


def stat_fields(pid: int | None) -> list[str] | None:
    """The fields after the command name (field 3, the state, first), or None when no such
    process exists or it is a zombie (killed, not yet reaped: it holds no sockets)."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else fields


def process_state(pid: int | None) -> str:
    """'running', 'paused' (SIGSTOP), or 'dead'."""
    fields = stat_fields(pid)
    if fields is None:
        return "dead"
    return "paused" if fields[0] in ("T", "t") else "running"


def start_time(pid: int) -> str | None:
    """The pid's start time (clock ticks since boot), or None when no live process has it."""
    fields = stat_fields(pid)
    return None if fields is None else fields[19]


def cpu_seconds(pid: int) -> float:
    """The CPU seconds (user + system, every thread) a live process has run; 0.0 when there is no such process."""
    fields = stat_fields(pid)
    return 0.0 if fields is None else (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
