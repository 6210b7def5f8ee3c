"""One event shape: the cores return ``kafkacommon.event.Event``s, never ``(name, dict)`` tuples or
``{"event": ...}`` dicts, and ``EventLog.log`` writes them as docs/events.md's lines."""
from __future__ import annotations

import ast
import json
from pathlib import Path

from coordinator.testing import Driver, form_group, quick_config
from kafkacommon.event import Event
from node.events import EventLog, read_events

ROOT = Path(__file__).resolve().parent.parent
CORES = ["controller", "coordinator", "replication/broker_state.py", "replication"]


def other_shapes(tree: ast.AST) -> list[int]:
    """Lines building an event as a ``("name", {...})`` tuple or a dict with an ``"event"`` key."""
    found = []
    for n in ast.walk(tree):
        if (isinstance(n, ast.Tuple) and len(n.elts) == 2 and isinstance(n.elts[1], ast.Dict)
                and isinstance(n.elts[0], ast.Constant) and isinstance(n.elts[0].value, str)):
            found.append(n.lineno)
        elif isinstance(n, ast.Dict) and any(isinstance(k, ast.Constant) and k.value == "event" for k in n.keys):
            found.append(n.lineno)
    return sorted(found)


def test_the_cores_build_no_other_event_shape() -> None:
    assert other_shapes(ast.parse('x.append(("hw_changed", {"old": 1}))\ny = {"event": "a"}')) == [1, 2]
    files = [p for c in CORES for p in ((ROOT / c).rglob("*.py") if (ROOT / c).is_dir() else [ROOT / c])]
    assert len(files) > 8
    found = {str(p.relative_to(ROOT)): lines for p in files if (lines := other_shapes(ast.parse(p.read_text())))}
    assert found == {}


def test_the_coordinator_returns_events_and_the_log_writes_them(tmp_path: Path) -> None:
    d = Driver(quick_config())
    form_group(d)
    assert d.events and all(type(e) is Event for e in d.events)
    log = EventLog(tmp_path / "broker-1.jsonl", 1, wall_ms=lambda: 1000.0, mono_ns=lambda: 7)
    log.log(Event("group_generation", {"partition": 0, "group": "g", "members": ["m"]}))
    log.close()
    assert read_events(tmp_path / "broker-1.jsonl") == [
        {"ts_ms": 1000.0, "mono_ns": 7, "broker": 1, "type": "group_generation", "partition": 0, "group": "g",
         "members": ["m"]}]
    line = (tmp_path / "broker-1.jsonl").read_text()
    assert line == json.dumps(read_events(tmp_path / "broker-1.jsonl")[0], separators=(",", ":")) + "\n"
