"""node/replicas/side_by_side.py: every item once, on the pool's threads side by side; after an error no item
more, and the first in the items' order raised."""
from __future__ import annotations

import threading

import pytest

from node.replicas.side_by_side import SideBySide


@pytest.fixture
def pool():
    p = SideBySide(4, name="test-side-by-side")
    p.start()
    yield p
    p.shutdown()


def test_each_item_runs_once_on_the_pools_threads_side_by_side(pool):
    seen, names = [], set()
    four = threading.Barrier(4, timeout=10)   # passes only with four items running at once

    def fn(x: int) -> None:
        if x < 4:
            four.wait()
        seen.append(x)
        names.add(threading.current_thread().name)
    pool.run(fn, range(100))
    assert sorted(seen) == list(range(100))
    assert len(names) == 4 and all(n.startswith("test-side-by-side") for n in names)
    pool.run(fn, [])
    pool.run(fn, iter([200]))
    assert seen[-1] == 200


def test_the_first_error_is_raised_and_no_item_is_taken_after_it(pool):
    seen = []
    # items 3 and 7 fail at once: the first in the items' order wins
    both: threading.Barrier | None = threading.Barrier(2, timeout=10)

    def fn(x: int) -> None:
        seen.append(x)
        if x in (3, 7):
            if both is not None:
                both.wait()
            raise ValueError(x)
    with pytest.raises(ValueError) as e:
        pool.run(fn, range(60))
    assert e.value.args == (3,)
    assert set(range(8)) <= set(seen) and len(seen) == len(set(seen))
    both = None
    one = SideBySide(1, name="test-one")
    try:
        seen.clear()
        with pytest.raises(ValueError) as e:
            one.run(fn, [0, 1, 7, 2, 3])   # one thread: 7 fails, 2 and 3 are not taken
        assert e.value.args == (7,) and seen == [0, 1, 7]
    finally:
        one.shutdown()
