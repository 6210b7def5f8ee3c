"""The shutdown watchdog (node/server/shutdown.py): a stop stuck past its bound is logged and ended; one that
finishes in time never is.  In-process, with the exit and the clock injected."""
from __future__ import annotations

import threading

import pytest
import yaml

from node.config import load_config
from node.events import EventLog, read_events
from node.server.shutdown import EXIT_SHUTDOWN_TIMED_OUT, ShutdownWatchdog, controlled_shutdown_budget_s, stop_deadline_s


class FakeExit:
    def __init__(self):
        self.codes: list[int] = []
        self.called = threading.Event()

    def __call__(self, code: int) -> None:
        self.codes.append(code)
        self.called.set()


def test_a_stop_stuck_past_its_bound_is_logged_with_its_step_and_ended(tmp_path):
    log = EventLog(tmp_path / "broker-1.jsonl", 1)
    now = [100.0]
    fake_exit = FakeExit()
    w = ShutdownWatchdog(log, deadline_s=5.0, clock=lambda: now[0], exit=fake_exit, poll_s=0.005).start()
    w.enter("controlled_shutdown")
    now[0] = 105.5  # past the bound
    assert fake_exit.called.wait(10), "the watchdog never fired"
    assert fake_exit.codes == [EXIT_SHUTDOWN_TIMED_OUT] and EXIT_SHUTDOWN_TIMED_OUT != 0
    assert not w.finish()  # the stop, had it come back, must not log broker_stopped after this
    log.emit("broker_stopped")  # the log is closed: nothing more lands
    evs = read_events(tmp_path / "broker-1.jsonl")
    assert [e["type"] for e in evs] == ["shutdown_step", "shutdown_timed_out"]
    assert evs[0]["step"] == "controlled_shutdown" and evs[0]["elapsed_ms"] == 0.0
    assert evs[1]["step"] == "controlled_shutdown" and evs[1]["deadline_ms"] == 5000.0
    assert evs[1]["elapsed_ms"] >= 5000.0


def test_a_stop_that_finishes_in_time_is_never_ended(tmp_path):
    log = EventLog(tmp_path / "broker-1.jsonl", 1)
    now = [0.0]
    fake_exit = FakeExit()
    w = ShutdownWatchdog(log, deadline_s=5.0, clock=lambda: now[0], exit=fake_exit, poll_s=0.005).start()
    w.enter("zk_session_close")
    now[0] = 4.9
    assert w.finish()
    now[0] = 50.0
    w._thread.join(10)
    assert not w._thread.is_alive() and fake_exit.codes == []
    log.close()
    assert [(e["type"], e["step"]) for e in read_events(tmp_path / "broker-1.jsonl")] == [
        ("shutdown_step", "zk_session_close")]


def test_the_bound_comes_from_the_config(tmp_path):
    doc = {"run.dir": str(tmp_path / "run"), "offsets.topic.replication.factor": 1,
           "zookeeper.session.timeout.ms": 2000, "controller.socket.timeout.ms": 1000,
           "controlled.shutdown.max.retries": 3, "controlled.shutdown.retry.backoff.ms": 50,
           "brokers": [{"id": 1, "port": 19999}]}
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(doc))
    cfg = load_config(path)
    assert controlled_shutdown_budget_s(cfg) == pytest.approx(3 * 1.05)
    assert stop_deadline_s(cfg) == pytest.approx(3 * 1.05 + 2 * 2.0 + 13.0)   # 13: 5 + 2 + 1 (handover) + 5
    path.write_text(yaml.safe_dump(doc | {"controlled.shutdown.enable": False}))
    assert stop_deadline_s(load_config(path)) == pytest.approx(2 * 2.0 + 13.0)
