"""zk/bounded.py's poll_select: kazoo's selector_select's answers, case by case, with one poll per call."""
from __future__ import annotations

import socket
import time
from typing import Iterator

import pytest
from kazoo.handlers.utils import selector_select

from zk.bounded import BoundedHandler, poll_select


@pytest.fixture
def pairs() -> Iterator[list[tuple[socket.socket, socket.socket]]]:
    made = [socket.socketpair() for _ in range(3)]
    yield made
    for a, b in made:
        a.close()
        b.close()


def both(*args, **kwargs) -> tuple:
    """(kazoo's answer, ours), each as sets of the objects in each list, for the same call."""
    theirs = selector_select(*args, **kwargs)
    ours = poll_select(*args, **kwargs)
    as_ids = lambda answer: tuple(frozenset(map(id, xs)) for xs in answer)   # noqa: E731
    return as_ids(theirs), as_ids(ours)


def test_nothing_ready_times_out_empty(pairs) -> None:
    a, _ = pairs[0]
    start = time.monotonic()
    assert poll_select([a], [], [], 0.05) == ([], [], [])
    assert time.monotonic() - start >= 0.04
    theirs, ours = both([a], [], [], 0)
    assert ours == theirs == (frozenset(), frozenset(), frozenset())


def test_readable_and_writable_as_kazoo_says(pairs) -> None:
    (a, b), (c, d), (e, _) = pairs
    b.send(b"x")   # a readable (and writable)
    d.send(b"y")   # c readable
    # a asked both ways: readable only (kazoo lists an object ready to read as readable, not writable)
    theirs, ours = both([a, c], [a, e], [], 1.0)
    assert ours == theirs
    assert ours[0] == {id(a), id(c)} and ours[1] == {id(e)} and ours[2] == frozenset()
    theirs, ours = both([], [a, c, e], [], 1.0)   # writable only, when asked only that
    assert ours == theirs == (frozenset(), {id(a), id(c), id(e)}, frozenset())


def test_fds_as_ints_and_one_object_listed_twice(pairs) -> None:
    a, b = pairs[0]
    b.send(b"x")
    asked = [a.fileno(), a]   # the same objects to both (an fd over 256 is a new int object at each fileno())
    theirs = selector_select(asked, [], [], 1.0)
    ours = poll_select(asked, [], [], 1.0)
    assert ours[0] == asked and sorted(map(id, ours[0])) == sorted(map(id, theirs[0]))


def test_a_hang_up_is_readable_and_writable_as_asked(pairs) -> None:
    (a, b), (c, d), _ = pairs
    b.close()
    d.shutdown(socket.SHUT_RDWR)
    for args in (([a], [], []), ([], [a], []), ([a, c], [c], [])):
        theirs, ours = both(*args, 1.0)
        assert ours == theirs and any(ours), args


def test_bad_arguments_raise_as_kazoo(pairs) -> None:
    a, _ = pairs[0]
    for bad_timeout, error in (("1", TypeError), (-1, ValueError)):
        for fn in (selector_select, poll_select):
            with pytest.raises(error):
                fn([a], [], [], bad_timeout)
    closed = socket.socket()
    closed.close()
    for fn in (selector_select, poll_select):
        with pytest.raises(TypeError):   # a closed socket's fileno() is -1
            fn([closed], [], [], 0)
        with pytest.raises(TypeError):
            fn([object()], [], [], 0)
    for fn in (poll_select, selector_select):   # (kazoo's leaks the epoll it made, under that very number)
        fd = socket.socket().detach()
        socket.close(fd)   # an fd number the kernel no longer knows
        with pytest.raises(ValueError):
            fn([fd], [], [], 0)


def test_the_handler_uses_it(monkeypatch) -> None:
    import zk.bounded
    calls = []
    monkeypatch.setattr(zk.bounded, "poll_select", lambda *args: calls.append(args) or poll_select(*args))
    a, b = socket.socketpair()
    try:
        b.send(b"x")
        assert BoundedHandler(lambda: 1.0).select([a], [], [], 1.0) == ([a], [], [])
        assert calls == [([a], [], [], 1.0)]
    finally:
        a.close()
        b.close()
