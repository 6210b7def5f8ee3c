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
