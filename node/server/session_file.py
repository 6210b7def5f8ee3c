"""Proof that a leftover /brokers/ids/<id> belongs to a dead earlier process of this broker.

After registering, a broker records its ZooKeeper session id, its pid and
its pid's start time in ``<log dir>/zk-session.json``.  A restarted broker
reads it back: when that process no longer exists (no pid, or a pid reused
by another process that started at another time), the session recorded
there can only be a dead one, and the restarted broker may replace the
znode it still holds instead of waiting for the session timeout.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from util.procs import start_time


class SessionFile:
    def __init__(self, path: Path):
        self.path = path

    def record(self, session_id: int, password: bytes = b"") -> None:
        """``password`` lets a lab tool expire this session on purpose (``kafkasim chaos``'s
        expire-session fault reconnects with the same credentials and closes it)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"session_id": session_id, "password": password.hex(), "pid": os.getpid(),
                                   "start_time": start_time(os.getpid())}))
        tmp.replace(self.path)

    def credentials(self) -> tuple[int, bytes] | None:
        """(session id, password) of the session last recorded here, or None."""
        try:
            doc = json.loads(self.path.read_text())
            return int(doc["session_id"]), bytes.fromhex(doc["password"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def dead_predecessor_session(self) -> int | None:
        """The recorded session id, if the process that recorded it is gone; else None."""
        try:
            doc = json.loads(self.path.read_text())
            sid, pid, started = int(doc["session_id"]), int(doc["pid"]), doc.get("start_time")
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if pid != os.getpid() and start_time(pid) == started and started is not None:
            return None  # that process is still running: its session may be alive
        return sid
