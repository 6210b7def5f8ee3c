"""The controller event thread's rule for events a lost ZooKeeper connection cut short."""
from __future__ import annotations

from node.shells.controller_events import (REDO_ON_CONNECTION_LOSS, AlterIsr, ControlledShutdown, ElectLeaders,
                                           Event, redo_on_connection_loss)


def test_watch_events_that_only_reread_are_redone_and_the_others_are_not():
    for event in Event:
        assert redo_on_connection_loss(event) == (event in REDO_ON_CONNECTION_LOSS)
    assert redo_on_connection_loss(Event.BROKER_CHANGE) and redo_on_connection_loss(Event.REGISTER_AND_REELECT)
    assert not redo_on_connection_loss(Event.TICK) and not redo_on_connection_loss(Event.EXPIRE)


def test_a_request_is_never_redone_and_asking_does_not_raise():
    # a request is an unhashable dataclass: asking a frozenset about it raised TypeError in the event
    # thread's error handler and killed the thread, so a controller whose session expired during an
    # AlterIsr never registered again
    for request in (AlterIsr(broker_id=3, broker_epoch=7, items=[("t", 0)]), ElectLeaders(),
                    ControlledShutdown(broker_id=1, broker_epoch=2)):
        assert redo_on_connection_loss(request) is False
