"""replication/fetcher.py: a request made from only what moved since the last one (the same assignment given
again, every partition fetched, its answer taken) is the request a walk over every partition makes (issue 49)."""
from __future__ import annotations

import random

from kafkacommon import errors
from replication.fetch_session import PartitionFetch
from replication.fetcher import FetcherState


def _shape(req):
    if req is None:
        return None
    return (req.session_id, req.session_epoch, req.listed, req.forgotten, list(req.current.items()), req.parts)


def test_a_request_from_what_moved_is_the_one_a_walk_over_every_partition_makes() -> None:
    for seed in range(40):
        rng = random.Random(seed)
        fast, walk = FetcherState(), FetcherState()   # walk: given a fresh copy each time, so it always walks
        handles = {p: object() for p in range(12)}
        parts = {("t", p): (handles[p], 3) for p in range(8)}
        pos = {}

        def position(tp, h, epoch):
            if rng_pos.random() < 0.05:
                return None                       # no longer fetched from this leader
            return pos.setdefault(tp, PartitionFetch(0, -1, epoch, 100, 0))

        now = 0.0
        for step in range(150):
            now += rng.choice((1.0, 10.0, 60.0))
            if rng.random() < 0.08:               # a new assignment: a new mapping
                parts = dict(parts)
                p = rng.randrange(12)
                if ("t", p) in parts and rng.random() < 0.5:
                    del parts[("t", p)]
                else:
                    parts[("t", p)] = (handles[p], rng.choice((3, 4)))
            rng_pos = random.Random(step * 1000 + seed)
            a = fast.request(parts, position, now)
            rng_pos = random.Random(step * 1000 + seed)
            b = walk.request(dict(parts), position, now)
            assert _shape(a) == _shape(b), (seed, step)
            if a is None:
                continue
            r = rng.random()
            if r < 0.05:                          # the call failed or was cut
                fast.failed(), walk.failed()
                continue
            if r < 0.08:                          # cut before it was sent: neither answered nor failed
                continue
            error = errors.FETCH_SESSION_ID_NOT_FOUND if r < 0.11 else errors.NONE
            sid = 77 + seed
            assert fast.answered(a, error, sid) == walk.answered(b, error, sid)
            if error != errors.NONE:
                continue
            for tp in list(a.current):
                x = rng.random()
                h, epoch = a.parts[tp]
                if x < 0.5:
                    continue                      # no news: not in the answer
                if x < 0.55:
                    fast.still_fetching(a, tp, None, 1), walk.still_fetching(b, tp, None, 1)   # role moved
                    continue
                if x < 0.6:
                    fast.backoff(tp, h, epoch, now), walk.backoff(tp, h, epoch, now)
                    continue
                if x < 0.62:
                    fast.forget(tp), walk.forget(tp)
                    continue
                old = a.current[tp]
                new = old._replace(fetch_offset=old.fetch_offset + rng.choice((0, 1, 5))) if x < 0.95 else old
                assert fast.still_fetching(a, tp, (1, epoch), 1) and walk.still_fetching(b, tp, (1, epoch), 1)
                fast.moved(tp, h, epoch, new), walk.moved(tp, h, epoch, new)


def test_nothing_moved_lists_nothing_and_a_moved_partition_is_listed_in_the_assignments_order() -> None:
    core = FetcherState()
    parts = {("t", p): (object(), 3) for p in range(5)}
    pos = {tp: PartitionFetch(4, 2, 3, 100, 4) for tp in parts}
    r1 = core.request(parts, lambda tp, h, e: pos[tp], 0)
    assert core.answered(r1, errors.NONE, 9)
    r2 = core.request(parts, lambda tp, h, e: 1 / 0, 0)     # positions not read again
    assert (r2.session_id, r2.session_epoch, r2.listed, r2.forgotten) == (9, 1, (), ())
    assert core.answered(r2, errors.NONE, 9)
    h = {tp: handle for tp, (handle, _epoch) in parts.items()}
    core.moved(("t", 3), h[("t", 3)], 3, PartitionFetch(6, 2, 3, 100, 6))
    core.moved(("t", 1), h[("t", 1)], 3, PartitionFetch(5, 2, 3, 100, 5))
    core.moved(("t", 2), h[("t", 2)], 3, pos[("t", 2)])        # the same position: not listed
    r3 = core.request(parts, lambda tp, h, e: 1 / 0, 0)
    assert [tp for tp, _pf in r3.listed] == [("t", 1), ("t", 3)] and list(r3.current) == list(parts)
