"""node.events.EventTail: following a run's event logs, parsing only what was appended since the last poll."""
from __future__ import annotations

from node.events import EventLog, EventTail, read_events


def test_each_poll_returns_only_new_complete_lines_in_time_order(tmp_path):
    clock = iter(range(1000, 2000, 10))
    a = EventLog(tmp_path / "events" / "broker-1.jsonl", 1, mono_ns=lambda: next(clock))
    b = EventLog(tmp_path / "events" / "broker-2.jsonl", 2, mono_ns=lambda: next(clock))
    tail = EventTail(tmp_path)
    assert tail.poll() == []
    a.emit("first")
    b.emit("second")
    a.emit("third")
    assert [(e["broker"], e["type"]) for e in tail.poll()] == [(1, "first"), (2, "second"), (1, "third")]
    assert tail.poll() == []
    # a line being written (no newline yet) waits for the next poll, then comes whole
    with open(tmp_path / "events" / "broker-2.jsonl", "a") as f:
        f.write('{"mono_ns":5000,"broker":2,"type":"fourth"')
        f.flush()
        assert tail.poll() == []
        f.write(',"x":1}\n')
    assert [(e["type"], e["x"]) for e in tail.poll()] == [("fourth", 1)]
    a.close()
    b.close()


def test_contains_skips_other_lines_and_first_finds_a_match(tmp_path):
    log = EventLog(tmp_path / "events" / "broker-3.jsonl", 3)
    tail = EventTail(tmp_path, contains="partition_states_written")
    log.emit("partition_state_written", partition=1)
    log.emit("partition_states_written", epoch=4, count=2)
    log.emit("partition_states_written", epoch=5, count=3)
    assert [e["epoch"] for e in tail.poll()] == [4, 5]
    log.emit("partition_states_written", epoch=6, count=1)
    log.emit("partition_states_written", epoch=7, count=1)
    assert tail.first(lambda e: e["epoch"] >= 7)["count"] == 1
    assert tail.first(lambda e: True) is None   # what a poll passed over is not returned again
    log.close()


def test_emit_many_writes_its_lines_in_order_and_nothing_once_closed(tmp_path):
    log = EventLog(tmp_path / "events" / "broker-1.jsonl", 1)
    log.emit("first", n=0)
    log.emit_many([("batch", {"n": i}) for i in range(1, 4)])
    log.log()                                  # nothing to write
    log.close()
    log.emit_many([("late", {"n": 9})])        # closed: nothing lands
    evs = read_events(tmp_path / "events" / "broker-1.jsonl")
    assert [(e["type"], e["n"], e["broker"]) for e in evs] == [("first", 0, 1), ("batch", 1, 1), ("batch", 2, 1),
                                                               ("batch", 3, 1)]
    assert all(a["mono_ns"] <= b["mono_ns"] for a, b in zip(evs, evs[1:]))
