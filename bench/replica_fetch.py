"""The replica fetch path's CPU per fetch, in one process, in the pattern of a controller failover at 10,000
partitions (issue 49): a ReplicaManager leading N partitions with real logs and one follower's fetch session.

Per repetition, the fetching thread's CPU (time.thread_time) of: ``full``, a full fetch listing all N (a new
session, as a follower's fetcher sends after a cut poll); ``full_next``, the session's incremental fetch after it
(listing none); ``bump``, the fetch after a LeaderAndIsr gave half of them a new leader epoch (the follower lists those
at the new epoch and forgets a quarter of the others); ``incr5``, the five incremental fetches after it (the first
binds the bumped partitions to the session's clock again); on the follower's side ``fol_req``, five
``FetcherState.request``s over N assigned partitions with nothing changed, ``fol_few``, five rounds of a request,
its answer and 1 % of the partitions moved (appended to), and ``fol_req_changed``, one after a third of them got a
new epoch.  Prints the median and the minimum of each (ms); ``--profile`` adds cProfile's top.
The broker's collector settings are used (gc.freeze, young generation at 20,000).

    PYTHONPATH=$PWD python3 bench/replica_fetch.py [--partitions 2000] [--reps 15] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from node.events import EventLog  # noqa: E402
from node.replicas.hosted import Hosted  # noqa: E402
from node.replicas.replica_manager import ReplicaManager  # noqa: E402
from proto import kafkasim_pb2 as pb  # noqa: E402
from replication.broker_state import PartitionInfo  # noqa: E402
from replication.fetch_session import PartitionFetch  # noqa: E402
from replication.fetcher import FetcherState  # noqa: E402
from replication.partition_types import ReplicaSettings  # noqa: E402

STEPS = ("full", "full_next", "bump", "incr5", "fol_req", "fol_few", "fol_req_changed")


def fetch_request(sid: int, sep: int, parts: list[tuple[int, int]], forgotten: list[int] = ()) -> pb.FetchRequest:
    """Follower 2's fetch of topic ``t``: (partition, current leader epoch) listed, partitions forgotten."""
    return pb.FetchRequest(replica_id=2, replica_epoch=7, max_wait_ms=0, session_id=sid, session_epoch=sep,
                           partitions=[pb.FetchPartition(topic="t", partition=p, fetch_offset=0, last_fetched_epoch=-1,
                                                         current_leader_epoch=e, max_bytes=1 << 20,
                                                         follower_high_watermark=0) for p, e in parts],
                           forgotten=[pb.TopicPartition(topic="t", partition=p) for p in forgotten])


def states(partitions, epoch: int) -> list[PartitionInfo]:
    return [PartitionInfo("t", p, 1, epoch, (1, 2, 3), (1, 2, 3), epoch, 1) for p in partitions]


class Timer:
    """Each step's thread CPU per repetition, and (with ``profile``) cProfile over the timed parts only."""

    def __init__(self, profile: bool) -> None:
        self.res: dict[str, list[float]] = {k: [] for k in STEPS}
        self.prof = cProfile.Profile() if profile else None

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        if self.prof:
            self.prof.enable()
        c = time.thread_time()
        try:
            yield
        finally:
            self.res[name].append(time.thread_time() - c)
            if self.prof:
                self.prof.disable()


def leader_side(n: int, reps: int, t: Timer, work: Path) -> None:
    rm = ReplicaManager(1, work / "logs", ReplicaSettings(), EventLog(work / "events.jsonl", 1),
                        broker_epoch=lambda: 5, endpoint_of=lambda b: None, controller_endpoint=lambda: None,
                        fetch_wait_ms=100, segment_bytes=1 << 20, checkpoint_interval_ms=60_000,
                        topic_config=lambda topic: {})
    try:
        rm.apply_leader_and_isrs(states(range(n), 0))
        epoch = 0
        for _ in range(reps):
            full = fetch_request(0, 0, [(p, epoch) for p in range(n)])   # a session opened, then idle fetches
            with t.step("full"):
                r = rm.fetch(full)
            sid, sep = r.session_id, 1
            nxt = fetch_request(sid, sep, [])
            sep += 1
            with t.step("full_next"):
                rm.fetch(nxt)
            for _ in range(2):
                rm.fetch(fetch_request(sid, sep, []))
                sep += 1
            # the failover: half the partitions get a new epoch (still led here), a quarter move away (forgotten)
            epoch += 1
            bumped, moved = list(range(0, n, 2)), list(range(1, n, 4))
            rm.apply_leader_and_isrs(states(bumped, epoch))
            bump = fetch_request(sid, sep, [(p, epoch) for p in bumped], moved)
            sep += 1
            with t.step("bump"):
                r = rm.fetch(bump)
            if r.error_code:
                raise RuntimeError(f"the fetch after the epoch bump answered error {r.error_code}")
            incremental = [fetch_request(sid, sep + i, []) for i in range(5)]
            sep += 5
            with t.step("incr5"):
                for x in incremental:
                    rm.fetch(x)
            rm.apply_leader_and_isrs(states(range(1, n, 2), epoch))   # every partition at the new epoch again
    finally:
        rm.close()


def follower_side(n: int, reps: int, t: Timer) -> None:
    """FetcherState.request over n assigned partitions, all known and nothing changed; then a third changed."""
    assigned = {("t", p): (Hosted.__new__(Hosted), 3) for p in range(n)}
    pos = {tp: PartitionFetch(10, 3, 3, 1 << 20, 10, 0) for tp in assigned}
    fs = FetcherState()
    q = fs.request(assigned, lambda tp, h, e: pos[tp], 0.0)
    fs.answered(q, 0, 77)
    few = sorted(assigned)[::100]
    for rep in range(reps):
        with t.step("fol_req"):
            for _ in range(5):
                q = fs.request(assigned, lambda tp, h, e: pos[tp], 1.0)
                fs.answered(q, 0, 77)
        with t.step("fol_few"):
            for _ in range(5):
                q = fs.request(assigned, lambda tp, h, e: pos[tp], 1.0)
                fs.answered(q, 0, 77)
                for tp in few:   # their answers applied: each a new position
                    pf = q.current[tp]
                    fs.moved(tp, assigned[tp][0], assigned[tp][1], pf._replace(fetch_offset=pf.fetch_offset + 1))
        changed = dict(assigned)
        for p in range(0, n, 3):
            changed[("t", p)] = (assigned[("t", p)][0], 4 + rep)
        with t.step("fol_req_changed"):
            q = fs.request(changed, lambda tp, h, e: pos[tp]._replace(current_leader_epoch=e), 1.0)
            fs.answered(q, 0, 77)
        for tp, pf in q.listed:
            fs.moved(tp, changed[tp][0], changed[tp][1], pf)
        assigned = changed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=2000, help="partitions led, and assigned (default 2000)")
    ap.add_argument("--reps", type=int, default=15, help="repetitions of each step (default 15)")
    ap.add_argument("--profile", action="store_true", help="also print cProfile's top entries of the timed steps")
    a = ap.parse_args()
    if a.partitions < 4 or a.reps < 1:
        ap.error("--partitions must be at least 4 and --reps at least 1")
    gc.freeze()   # the broker's collector settings
    gc.set_threshold(20_000, *gc.get_threshold()[1:])
    t = Timer(a.profile)
    work = Path(tempfile.mkdtemp(prefix="kafkasim-bench-replica-fetch-"))
    try:
        leader_side(a.partitions, a.reps, t, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    follower_side(a.partitions, a.reps, t)
    print(" ".join(f"{k}={1000 * statistics.median(v):.2f}/{1000 * min(v):.2f}ms" for k, v in t.res.items()))
    if t.prof:
        out = io.StringIO()
        pstats.Stats(t.prof, stream=out).sort_stats("tottime").print_stats(25)
        print(out.getvalue())


if __name__ == "__main__":
    main()
