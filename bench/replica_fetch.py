"""The replica fetch path's CPU per fetch, in one process, in the pattern of a controller failover at 10,000
partitions (issue 49): a ReplicaManager leading N partitions with real logs and one follower's fetch session.

Per repetition, the fetching thread's CPU (time.thread_time) of: ``full``, a full fetch listing all N (a new
session); ``bump``, the fetch after a LeaderAndIsr gave half of them a new leader epoch (the follower lists those
at the new epoch and forgets a quarter of the others); ``incr5``, the five incremental fetches after it (the first
binds the bumped partitions to the session's clock again); on the follower's side ``fol_req``, five
``FetcherState.request``s over N assigned partitions with nothing changed, and ``fol_req_changed``, one after a
third of them got a new epoch.  Prints the median and the minimum of each (ms); ``profile`` adds cProfile's top.
The broker's collector settings are used (gc.freeze, young generation at 20,000).

usage: PYTHONPATH=$PWD python3 bench/replica_fetch.py N REPS [profile]
"""
import sys, time, os, tempfile, statistics, cProfile, pstats, io, shutil
from pathlib import Path
from replication.broker_state import PartitionInfo
from node.events import EventLog
from node.replicas.replica_manager import ReplicaManager
from node.replicas.hosted import Hosted
from replication.partition import ReplicaSettings
from replication.fetcher import FetcherState
from replication.fetch_session import PartitionFetch
from proto import kafkasim_pb2 as pb
N = int(sys.argv[1]); REPS = int(sys.argv[2]); PROF = len(sys.argv) > 3
tmp = Path(tempfile.mkdtemp(prefix="replica_fetch-"))
rm = ReplicaManager(1, tmp / "logs", ReplicaSettings(), EventLog(tmp / "events.jsonl", 1),
                    broker_epoch=lambda: 5, endpoint_of=lambda b: None, controller_endpoint=lambda: None,
                    fetch_wait_ms=100, segment_bytes=1 << 20, checkpoint_interval_ms=60_000, topic_config=lambda t: {})
rm.apply_leader_and_isrs([PartitionInfo("t", p, 1, 0, (1, 2, 3), (1, 2, 3), 0, 1) for p in range(N)])
def req(sid, sep, parts, forgotten=()):
    return pb.FetchRequest(replica_id=2, replica_epoch=7, max_wait_ms=0, session_id=sid, session_epoch=sep, partitions=[
        pb.FetchPartition(topic="t", partition=p, fetch_offset=0, last_fetched_epoch=-1, current_leader_epoch=e,
                          max_bytes=1 << 20, follower_high_watermark=0) for p, e in parts],
        forgotten=[pb.TopicPartition(topic="t", partition=p) for p in forgotten] if forgotten else [])
import gc; gc.freeze(); gc.set_threshold(20_000, *gc.get_threshold()[1:])
res = {"full": [], "bump": [], "incr5": [], "fol_req": [], "fol_req_changed": []}
pr = cProfile.Profile() if PROF else None
epoch = 0
for rep in range(REPS):
    # full fetch (a session opened), then idle incrementals
    r0 = req(0, 0, [(p, epoch) for p in range(N)])
    if pr: pr.enable()
    c = time.thread_time(); r = rm.fetch(r0); res["full"].append(time.thread_time() - c)
    if pr: pr.disable()
    sid, sep = r.session_id, 1
    for i in range(3):
        r = rm.fetch(req(sid, sep, [])); sep += 1
    # the failover: half the partitions get a new epoch (still led), a quarter move away (forgotten)
    epoch += 1
    bumped = list(range(0, N, 2)); moved = list(range(1, N, 4))
    rm.apply_leader_and_isrs([PartitionInfo("t", p, 1, epoch, (1, 2, 3), (1, 2, 3), epoch, 1) for p in bumped])
    rb = req(sid, sep, [(p, epoch) for p in bumped], moved); sep += 1
    if pr: pr.enable()
    c = time.thread_time(); r = rm.fetch(rb); res["bump"].append(time.thread_time() - c)
    if pr: pr.disable()
    assert r.error_code == 0, r.error_code
    rs = [req(sid, sep + i, []) for i in range(5)]; sep += 5
    if pr: pr.enable()
    c = time.thread_time()
    for x in rs:
        r = rm.fetch(x)
    res["incr5"].append(time.thread_time() - c)
    if pr: pr.disable()
    # everything back at the new epoch for the next repetition
    rm.apply_leader_and_isrs([PartitionInfo("t", p, 1, epoch, (1, 2, 3), (1, 2, 3), epoch, 1) for p in range(1, N, 2)])
# follower side: FetcherState.request over N assigned partitions, all known, nothing changed; then a share changed
hs = {("t", p): (Hosted.__new__(Hosted), 3) for p in range(N)}
pos = {tp: PartitionFetch(10, 3, 3, 1 << 20, 10, 0) for tp in hs}
fs = FetcherState()
q = fs.request(hs, lambda tp, h, e: pos[tp], 0.0); fs.answered(q, 0, 77)
for rep in range(REPS):
    if pr: pr.enable()
    c = time.thread_time()
    for i in range(5):
        q = fs.request(hs, lambda tp, h, e: pos[tp], 1.0); fs.answered(q, 0, 77)
    res["fol_req"].append(time.thread_time() - c)
    if pr: pr.disable()
    hs2 = dict(hs)
    for p in range(0, N, 3):
        hs2[("t", p)] = (hs[("t", p)][0], 4 + rep)
    if pr: pr.enable()
    c = time.thread_time(); q = fs.request(hs2, lambda tp, h, e: pos[tp]._replace(current_leader_epoch=e), 1.0)
    fs.answered(q, 0, 77)
    res["fol_req_changed"].append(time.thread_time() - c)
    if pr: pr.disable()
    for tp, pf in q.listed:
        fs.moved(tp, hs2[tp][0], hs2[tp][1], pf)
    hs = hs2
rm.close()
shutil.rmtree(tmp, ignore_errors=True)
print(" ".join(f"{k}={1000*statistics.median(v):.2f}/{1000*min(v):.2f}ms" for k, v in res.items()))
if pr:
    s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(25); print(s.getvalue())
