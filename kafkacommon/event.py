"""The one shape of an event a sans-IO core returns for its shell to log.

An ``Event`` is the event's type (``name``) and its fields, as docs/events.md
lists them; the shell adds the common fields (``ts_ms``, ``mono_ns``,
``broker``, ``type``) when it writes the line (``node.events.EventLog.log``).
The controller core (``Plan.events``/``observed``), the group coordinator
(``Result.events``), a broker's request fencing (``replication.broker_state``) and
the replication core return events in this shape, and nothing else.

It is a named tuple, so ``name, fields = event`` works, and it is immutable.
"""
from __future__ import annotations

from typing import Any, NamedTuple


class Event(NamedTuple):
    name: str
    fields: dict[str, Any]
