"""The controller's rule for events a lost ZooKeeper connection or session cut short (controller/redo.py),
which the broker's event thread and the simulator's controller both follow."""
from __future__ import annotations

from controller import redo
from controller.redo import REDO_ON_CONNECTION_LOSS, RedoQueue, redone_after_connection_loss
from node.shells.controller_events import AlterIsr, ControlledShutdown, ElectLeaders, Event, event_name


def test_watch_events_that_only_reread_are_redone_and_the_others_are_not():
    for event in Event:
        assert redone_after_connection_loss(event_name(event)) == (event.value in REDO_ON_CONNECTION_LOSS)
    assert redone_after_connection_loss(redo.BROKER_CHANGE) and redone_after_connection_loss(redo.REGISTER_AND_REELECT)
    assert not redone_after_connection_loss(redo.TICK) and not redone_after_connection_loss(redo.EXPIRE)
    # the broker's events are the core's names: nothing redone that the core does not name
    assert REDO_ON_CONNECTION_LOSS <= {e.value for e in Event}


def test_a_request_is_never_redone_and_asking_does_not_raise():
    # a request is an unhashable dataclass: asking a frozenset about it raised TypeError in the event
    # thread's error handler and killed the thread, so a controller whose session expired during an
    # AlterIsr never registered again
    q = RedoQueue()
    for request in (AlterIsr(broker_id=3, broker_epoch=7, items=[("t", 0)]), ElectLeaders(),
                    ControlledShutdown(broker_id=1, broker_epoch=2)):
        assert q.cut_short(event_name(request)) is False
    assert q.pending == ()


def test_events_cut_short_are_redone_once_each_in_first_loss_order_when_the_connection_is_back():
    q = RedoQueue()
    assert q.cut_short(redo.TOPIC_CHANGE) and q.cut_short(redo.STARTUP) and q.cut_short(redo.TOPIC_CHANGE)
    assert not q.cut_short(redo.TICK)                     # the next tick does the tick's work
    assert q.due(connected=False) == [] and q.pending == (redo.TOPIC_CHANGE, redo.STARTUP)
    assert q.due(connected=True) == [redo.TOPIC_CHANGE, redo.STARTUP]
    assert q.due(connected=True) == [] and q.pending == ()


def test_a_lost_session_drops_what_waited_to_be_redone_and_registers_and_reelects():
    q = RedoQueue()
    q.cut_short(redo.BROKER_CHANGE)
    assert q.session_expired() == redo.REGISTER_AND_REELECT
    assert q.due(connected=True) == []


# ---------------------------------------------------------------------- ControllerEvents: the event thread's steps

from controller import handlers as h  # noqa: E402
from controller.core import ControllerCore, ControllerSettings  # noqa: E402
from kafkacommon import errors  # noqa: E402
from kafkacommon.metadata import BrokerRegistration  # noqa: E402
from zk.exceptions import ControllerMovedError, ZkConnectionLost  # noqa: E402


class _Io:
    """Scripted I/O for ControllerEvents: ZooKeeper up or down, and what was done, in order."""

    def __init__(self) -> None:
        self.up = True
        self.done: list = []
        self.fence = False

    def do(self, cmd):
        self.done.append(cmd)
        if isinstance(cmd, (h.Emit, h.Clock, h.MonoNs, h.CloseChannels, h.Send)):
            return 0 if isinstance(cmd, (h.Clock, h.MonoNs)) else None
        if not self.up:
            raise ZkConnectionLost("down")
        if isinstance(cmd, h.ReadController):
            return 2                                  # someone else is the controller
        if isinstance(cmd, h.ReadControllerAndEpoch):
            return 2, (4, 4)
        if isinstance(cmd, h.ReadBrokers):
            return {1: BrokerRegistration(1, "127.0.0.1", 9001, 0, epoch=5)}
        if isinstance(cmd, h.WriteStates) and self.fence:
            raise ControllerMovedError("moved")
        return None

    def names(self) -> list[str]:
        return [type(c).__name__ if not isinstance(c, h.Emit) else f"Emit:{c.name}" for c in self.done
                if not isinstance(c, (h.Clock, h.MonoNs))]


def _events() -> redo.ControllerEvents:
    core = ControllerCore(ControllerSettings(broker_id=1, offsets_replication_factor=100))
    return redo.ControllerEvents(h.ControllerHandlers(core, 1))


def test_an_event_cut_short_is_logged_and_redone_before_the_tick_once_the_connection_is_back() -> None:
    ev, io = _events(), _Io()
    io.up = False
    assert ev.run(redo.STARTUP, io.do) is None
    errs = [c.fields for c in io.done if isinstance(c, h.Emit) and c.name == "controller_error"]
    assert errs == [{"event": redo.STARTUP, "error": "ZkConnectionLost('down')", "redo": True}]
    io.done.clear()
    ev.tick(lambda: io.up, io.do)                 # still down: nothing redone, the tick's timers only
    assert "ReadControllerAndEpoch" not in io.names() and ev.redo.pending == (redo.STARTUP,)
    io.up, io.done = True, []
    ev.tick(lambda: io.up, io.do)
    assert io.names()[0] == "ReadControllerAndEpoch" and ev.redo.pending == ()   # the election again, then the tick


def test_an_expiry_drops_what_waited_and_registers_before_it_reelects() -> None:
    ev, io = _events(), _Io()
    io.up = False
    ev.run(redo.STARTUP, io.do)
    assert ev.redo.pending == (redo.STARTUP,)
    io.up = True
    assert ev.expire(io.do) == redo.REGISTER_AND_REELECT and ev.redo.pending == ()
    io.done.clear()
    ev.run(redo.REGISTER_AND_REELECT, io.do)
    assert io.names()[:2] == ["RegisterBroker", "ReadControllerAndEpoch"]
    io.up, io.done = False, []                    # the registration cannot be made yet: redone on a tick
    ev.run(redo.REGISTER_AND_REELECT, io.do)
    assert ev.redo.pending == (redo.REGISTER_AND_REELECT,)


def test_a_request_cut_short_raises_to_its_caller_and_a_fenced_one_answers_as_told() -> None:
    ev, io = _events(), _Io()
    io.up = False
    try:
        ev.request("alter_isr", iter_raise(), io.do)
    except ZkConnectionLost:
        pass
    else:
        raise AssertionError("the request's lost connection was swallowed")
    assert ev.redo.pending == ()
    io.up = True
    assert ev.request("alter_isr", iter_fenced(), io.do, fenced=(errors.NOT_CONTROLLER, {})) == \
        (errors.NOT_CONTROLLER, {})


def iter_raise():
    yield h.ReadBrokers()


def iter_fenced():
    raise ControllerMovedError("moved")
    yield  # a generator
