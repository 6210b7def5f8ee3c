"""Reading Kafka 2.8.2's own log lines (log4j's ``[yyyy-MM-dd HH:mm:ss,SSS] LEVEL message (logger)``, as
reference/log4j.properties writes server.log and state-change.log): when a line was written, and what a
finished offsets load says."""
from __future__ import annotations

import re
from datetime import datetime
from typing import Any

#: GroupMetadataManager.doLoadGroupsAndOffsets' line at INFO once an offsets partition is loaded (2.8.1+)
OFFSETS_LOADED = re.compile(r"Finished loading offsets and group metadata from (\S+) in (\d+) milliseconds "
                            r"for epoch (\d+), of which (\d+) milliseconds was spent in the scheduler")


def wall_ms(line: str) -> float | None:
    """The wall-clock instant (ms since the epoch, local time) of a line ``[2026-11-29 00:19:52,123] ...``;
    None for a line without that stamp (a stack trace's)."""
    if not line.startswith("[") or len(line) < 25:
        return None
    try:
        return datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f").timestamp() * 1000.0
    except ValueError:
        return None


def offsets_loaded(line: str) -> dict[str, Any] | None:
    """A finished offsets load's line: its partition (``__consumer_offsets-N``), the load's own ms (the logged
    total less its wait for the loader thread), that wait, the coordinator epoch and the line's wall-clock ms;
    None for any other line."""
    m = OFFSETS_LOADED.search(line)
    if m is None:
        return None
    total, waited = int(m.group(2)), int(m.group(4))
    return {"partition": m.group(1), "load_ms": float(total - waited), "scheduler_ms": float(waited),
            "total_ms": float(total), "epoch": int(m.group(3)), "wall_ms": wall_ms(line)}
