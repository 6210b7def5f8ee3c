"""The controller shell writes a handler's event lines before it reads the handler's clock, so a span a handler
times (a plan's ZooKeeper writes, ``write_ms``) does not include writing the lines made before it."""
from __future__ import annotations

from controller import handlers
from controller.core import ControllerSettings
from node.events import EventLog, read_events
from node.shells.controller_shell import ControllerShell


def shell(tmp_path) -> tuple[ControllerShell, EventLog]:
    events = EventLog(tmp_path / "broker-1.jsonl", 1)
    return ControllerShell(1, zk=None, settings=ControllerSettings(broker_id=1, auto_leader_rebalance=False),
                           events=events, socket_timeout_s=1.0, register_broker=lambda: None), events


def test_lines_are_written_before_the_clock_is_read(tmp_path):
    sh, events = shell(tmp_path)
    sh._do(handlers.Emit("partition_state_written", {"topic": "t", "partition": 0}))
    sh._do(handlers.Emit("partition_state_written", {"topic": "t", "partition": 1}))
    assert read_events(events.path) == []          # stamped, not yet written
    t0 = sh._do(handlers.MonoNs())
    lines = read_events(events.path)
    assert [e["partition"] for e in lines] == [0, 1]
    assert all(e["mono_ns"] <= t0 for e in lines)  # stamped when made, written before the clock was read
    assert sh._stamped == []


def test_a_clock_with_no_lines_writes_nothing(tmp_path):
    sh, events = shell(tmp_path)
    a = sh._do(handlers.MonoNs())
    b = sh._do(handlers.MonoNs())
    assert a <= b and read_events(events.path) == []
