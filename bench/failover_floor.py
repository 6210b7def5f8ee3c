"""The clean coordinator failover's floor (issue 49): the least that must happen after the new coordinator is
loaded before an acks=all commit (RF 3, the offsets partition's ISR as it stands) can be answered, in Kafka 2.8's
design, measured in the same run on the same cluster and disk once the failover has settled.

After the load, Kafka 2.8 needs, at the least (``Partition.appendRecordsToLeader`` and its ``DelayedProduce``,
``Log.appendAsFollower`` -> ``maybeAssignEpochStartOffset`` -> ``LeaderEpochFileCache.assign`` -> its
``CheckpointFile.write``, the fetch that moves the high watermark):

1. the leader's append of the commit's records;
2. the ISR follower's fetch answered with them;
3. the follower's append, which as the first record of the new leader epoch assigns the epoch and writes its
   checkpoint (a new file written, fsynced and renamed over the old one);
4. the follower's next fetch, which moves the leader's high watermark;
5. the answer to the client.

How each part is measured (:func:`measure`), round after round, one part after the other, nothing else running in
the benchmark's clients:

* a steady commit on the new coordinator (kafkasim's client, the same group and offsets partition, the same
  offsets), timed as its RPC in the client's ``_call`` (building the request before it and reading the answer
  after it are not on the path after the load): 1, 2, 4 and 5 plus the request on its way in, and the
  follower's append without the epoch's checkpoint;
* a Heartbeat of the same member to the same coordinator, timed the same way: a round trip of the same client,
  channel and broker with no append and no replication.  It holds the request's own one-way time (and its
  answer's, and the door's), so subtracting it leaves a sure floor that under-counts by the answer's way back
  and the Heartbeat's handling;
* the follower's epoch checkpoint written as the broker writes it (``LeaderEpochCache.assign`` on a
  ``LeaderEpochCheckpointFile`` holding the follower's own entries, on the cluster's disk): part 3's extra.

floor = commit - heartbeat + checkpoint, per round (median over the rounds); beside it the same with half the
heartbeat subtracted (if the request and its answer take as long as each other).
"""
from __future__ import annotations

import shutil
import statistics
import time
from pathlib import Path

from coordinator.records import OffsetKey, decode_key
from kafkacommon.batch_scan import iter_batches
from node.events import read_run_events
from node.storage.checkpoint import LEADER_EPOCH_CHECKPOINT, LeaderEpochCheckpointFile
from node.storage.epoch_cache import LeaderEpochCache

GOAL_MS = 10.0   # the goal: first commit <= loaded + 10 ms


def floor_of(commit_ms: list[float], heartbeat_ms: list[float], flush_ms: list[float]) -> dict:
    """The floor from rounds of (commit, heartbeat, checkpoint flush) times measured side by side: each part's
    median, and the medians over the rounds of commit - heartbeat + flush (``floor``, a sure floor) and of
    commit - heartbeat / 2 + flush (``floor_even``, if the request and its answer cost the same)."""
    rounds = list(zip(commit_ms, heartbeat_ms, flush_ms))
    if not rounds:
        nan = float("nan")
        return {"commit": nan, "heartbeat": nan, "flush": nan, "floor": nan, "floor_even": nan, "rounds": 0}
    return {"commit": statistics.median(c for c, _, _ in rounds),
            "heartbeat": statistics.median(h for _, h, _ in rounds),
            "flush": statistics.median(f for _, _, f in rounds),
            "floor": statistics.median(c - h + f for c, h, f in rounds),
            "floor_even": statistics.median(c - h / 2 + f for c, h, f in rounds),
            "rounds": len(rounds)}


def verdict(after_load_ms: float, floor_ms: float, goal_ms: float = GOAL_MS) -> str:
    """The goal (first commit <= loaded + ``goal_ms``) against the floor measured in the same run."""
    if floor_ms != floor_ms or after_load_ms != after_load_ms:
        return "no floor measured"
    if floor_ms > goal_ms:
        return f"the goal (+{goal_ms:.0f} ms) is below this floor (+{floor_ms:.1f} ms)"
    return (f"the goal (+{goal_ms:.0f} ms) is not below this floor (+{floor_ms:.1f} ms); kafkasim's first commit is "
            f"{after_load_ms - floor_ms:.1f} ms above the floor")


def isr_as_of(events: list[dict], broker: int, topic: str, partition: int, before_ns: int) -> list[int] | None:
    """The ISR ``broker`` held for the partition as of ``before_ns``: its last became_leader / isr_updated /
    replica_isr_changed line for it before then (None when there is none)."""
    isr = None
    for e in events:
        if e["mono_ns"] >= before_ns:
            break
        if (e["broker"] == broker and e.get("topic") == topic and e.get("partition") == partition
                and e["type"] in ("became_leader", "isr_updated", "replica_isr_changed")):
            isr = list(e["isr"])
    return isr


def partition_dir(run_dir: Path, broker: int, topic: str, partition: int) -> Path:
    return Path(run_dir) / "data" / f"broker-{broker}" / f"{topic}-{partition}"


def epoch_start(run_dir: Path, broker: int, topic: str, partition: int, epoch: int) -> tuple[int | None, int | None]:
    """The start offset of ``epoch`` in ``broker``'s epoch checkpoint of the partition, and the file's mtime in
    ns (CLOCK_REALTIME, the kernel's coarse clock): when its last assign wrote it."""
    path = partition_dir(run_dir, broker, topic, partition) / LEADER_EPOCH_CHECKPOINT
    try:
        entries = LeaderEpochCheckpointFile(path).read()
        mtime = path.stat().st_mtime_ns
    except OSError:
        return None, None
    return next((s for e, s in entries if e == epoch), None), mtime


def first_at(run_dir: Path, broker: int, topic: str, partition: int, offset: int) -> tuple[str | None, int | None]:
    """The group whose record sits at ``offset`` in ``broker``'s log of the offsets partition, and its batch's
    timestamp (the leader's append time: wall-clock ms, cut to the ms); (None, None) when not found."""
    d = partition_dir(run_dir, broker, topic, partition)
    segs = sorted(d.glob("*.log"), key=lambda p: int(p.stem))
    seg = next((s for s in reversed(segs) if int(s.stem) <= offset), None)
    if seg is None:
        return None, None
    for _pos, b in iter_batches(seg.read_bytes()):
        if b.base_offset <= offset <= b.base_offset + b.last_offset_delta:
            for r in b.records:
                if r.offset == offset and r.key is not None:
                    k = decode_key(bytes(r.key))
                    return (k.group if isinstance(k, OffsetKey) else f"{k.group} (group metadata)"), r.timestamp_ms
    return None, None


def measure(member, offsets: dict, run_dir: Path, follower: int, topic: str, partition: int,
            rounds: int) -> dict:
    """``rounds`` rounds of: one commit of ``offsets`` by ``member``, one Heartbeat of it, one epoch checkpoint
    written as the follower writes its first of a new epoch (a copy of the follower's own checkpoint, reset
    before each round, on the cluster's disk), each timed alone; the commit and the Heartbeat as their RPCs in
    the client's ``_call`` (``commit_call``: the whole ``commit()``, median).  A round whose commit or Heartbeat
    fails or is retried is left out."""
    src = partition_dir(run_dir, follower, topic, partition) / LEADER_EPOCH_CHECKPOINT
    d = Path(run_dir) / "floor" / f"{topic}-{partition}"
    d.mkdir(parents=True, exist_ok=True)
    path = d / LEADER_EPOCH_CHECKPOINT
    shutil.copyfile(src, path)
    seed = path.read_bytes()
    entries = LeaderEpochCheckpointFile(path).read()
    epoch, start = (entries[-1][0] + 1, entries[-1][1] + 1) if entries else (0, 0)
    commit_ms, heartbeat_ms, flush_ms, whole_ms = [], [], [], []
    failed = 0
    # the RPCs alone, as the client's _call makes them (the request built and the answer read outside are not
    # on the path after the load): one OffsetCommit and one Heartbeat a round, else the round is left out
    rpcs: list[tuple[str, float]] = []
    inner = member._call   # noqa: SLF001 (the benchmark times inside its own client, as coordinator.py does)

    def timed(name: str, *args, **kwargs):
        t = time.perf_counter_ns()
        try:
            return inner(name, *args, **kwargs)
        finally:
            rpcs.append((name, (time.perf_counter_ns() - t) / 1e6))
    member._call = timed
    try:
        for _ in range(rounds):
            rpcs.clear()
            try:
                t = time.perf_counter_ns()
                member.commit(offsets)
                whole = (time.perf_counter_ns() - t) / 1e6
                code = member.heartbeat()
            except Exception:   # a failed commit is not a steady one
                failed += 1
                continue
            if code != 0 or [n for n, _ in rpcs] != ["OffsetCommit", "Heartbeat"]:
                failed += 1
                continue
            path.write_bytes(seed)
            cache = LeaderEpochCache(LeaderEpochCheckpointFile(path))
            t = time.perf_counter_ns()
            cache.assign(epoch, start)
            f = (time.perf_counter_ns() - t) / 1e6
            commit_ms.append(rpcs[0][1])
            heartbeat_ms.append(rpcs[1][1])
            flush_ms.append(f)
            whole_ms.append(whole)
    finally:
        member._call = inner
    return {**floor_of(commit_ms, heartbeat_ms, flush_ms), "failed": failed,
            "commit_call": statistics.median(whole_ms) if whole_ms else float("nan"),
            "checkpoint_bytes": len(seed), "checkpoint_entries": len(entries) + 1}


def after_failover(c, ev: list[dict], m, stop, ts, first: int, loaded: dict, led: dict | None, new: int,
                   other: int | None, p: int, rounds: int) -> dict:
    """The failover's floor (this module's) measured on this cluster once the failover has settled (the
    members' loops stopped), and the floor's assumptions checked against this run's events and files: the ISR the
    new leader held at the first commit and during the floor, and whether the other ISR member's first record of
    the new leader epoch was the first one appended after the load (its epoch's start offset = the load's end)."""
    topic = "__consumer_offsets"
    isr_first = isr_as_of(ev, new, topic, p, first)
    # the follower the first commit waited for: the ISR member other than the leader (the became_follower line's
    # broker when the ISR is not known)
    other = next((b for b in isr_first or () if b != new), other)
    if other is None:
        return {}
    epoch = led["leader_epoch"] if led else None
    start, mtime_ns = epoch_start(c.run_dir, other, topic, p, epoch) if epoch is not None else (None, None)
    stop.set()
    for t in ts:
        t.join(10)
    offsets = {tp: max(0, pos) for tp, pos in m.fetcher.positions.items()} or {("t", 0): 0}
    on_new = bool(m.coordinator) and m.coordinator[0] == new
    t_floor = time.monotonic_ns()
    res = measure(m, offsets, c.run_dir, other, topic, p, rounds)
    ev2 = read_run_events(c.run_dir)
    group, appended = first_at(c.run_dir, new, topic, p, start) if start is not None else (None, None)
    return {"floor_" + k: v for k, v in res.items()} | {
        "floor_on_new_coordinator": on_new,
        "isr_at_first_commit": isr_first, "floor_follower": other,
        "isr_during_floor": isr_as_of(ev2, new, topic, p, t_floor),
        "new_epoch": epoch, "load_end_offset": loaded.get("end_offset"), "follower_epoch_start": start,
        "first_of_epoch_group": group,
        # the leader's HW passing that record (the other ISR member's fetch after its append), after the load
        "hw_past_first_after_load": _hw_past(ev, new, topic, p, start, loaded),
        # the leader's append of that record (its batch's timestamp), after the load
        "leader_append_after_load": appended - loaded["ts_ms"] if appended is not None else float("nan"),
        # when the other ISR member wrote its checkpoint of the new epoch (the file's mtime, the kernel's coarse
        # realtime clock), after the load (the load's line's ts_ms)
        "follower_epoch_written_after_load": mtime_ns / 1e6 - loaded["ts_ms"] if mtime_ns is not None
        else float("nan")}


def _hw_past(events: list[dict], broker: int, topic: str, partition: int, offset: int | None, loaded: dict) -> float:
    """ms after the load when ``broker``'s HW of the partition first passed ``offset`` (NaN if it did not)."""
    if offset is None:
        return float("nan")
    e = next((e for e in events if e["mono_ns"] >= loaded["mono_ns"] and e["type"] == "hw_changed"
              and e["broker"] == broker and e.get("topic") == topic and e.get("partition") == partition
              and e["new"] > offset), None)
    return (e["mono_ns"] - loaded["mono_ns"]) / 1e6 if e else float("nan")


def print_floor(runs: list[dict]) -> None:
    """The floor (bench/failover_floor.py) run by run beside the goal's figure, then the medians and the checks."""
    every = runs
    runs = [r for r in runs if r.get("floor_rounds")]
    if not runs:
        return
    print("the floor after the load (a steady commit on the new coordinator - its Heartbeat "
          "round trip + the follower's epoch checkpoint written; medians of each run's rounds, ms):")
    for i, r in enumerate(every, 1):
        if not r.get("floor_rounds"):
            print(f"  run {i} (load {r['load1_before']:.1f}-{r['load1_after']:.1f}): loaded {r['loaded']:.1f}, first "
                  f"commit loaded + {r['after_load']:.1f}; no floor (no follower in the ISR at the first "
                  f"commit, {r.get('isr_at_first_commit')}, and no became_follower of the new leadership)")
            continue
        print(f"  run {i} (load {r['load1_before']:.1f}-{r['load1_after']:.1f}): loaded {r['loaded']:.1f}, first "
              f"commit loaded + {r['after_load']:.1f} (commits-only + {r['after_load_commits_only']:.1f}); floor parts: "
              f"commit {r['floor_commit']:.2f} (the whole call {r['floor_commit_call']:.2f}), heartbeat "
              f"{r['floor_heartbeat']:.2f}, checkpoint {r['floor_flush']:.2f}"
              f" -> floor {r['floor_floor']:.2f} (even split {r['floor_floor_even']:.2f}; {r['floor_rounds']} rounds, "
              f"{r['floor_failed']} failed); ISR at the first commit {r['isr_at_first_commit']}, during the floor "
              f"{r['isr_during_floor']}; epoch {r['new_epoch']} starts on the follower at {r['follower_epoch_start']} "
              f"(the load ended at {r['load_end_offset']}: group {r['first_of_epoch_group']!r}); that record appended "
              f"by the leader at loaded {r['leader_append_after_load']:+.0f}, the follower's checkpoint of the epoch "
              f"written at loaded {r['follower_epoch_written_after_load']:+.1f}, the leader's HW past it at loaded "
              f"{r['hw_past_first_after_load']:+.1f}")
    med = {k: statistics.median(r[k] for r in every) for k in ("after_load", "after_load_commits_only")}
    med |= {k: statistics.median(r[k] for r in runs) for k in
           ("floor_commit", "floor_heartbeat", "floor_flush", "floor_floor",
            "floor_floor_even", "follower_epoch_written_after_load", "leader_append_after_load",
            "hw_past_first_after_load")}
    print(f"  medians over the runs: steady commit {med['floor_commit']:.2f}, heartbeat {med['floor_heartbeat']:.2f}, "
          f"checkpoint {med['floor_flush']:.2f} -> floor {med['floor_floor']:.2f} ms (even split "
          f"{med['floor_floor_even']:.2f} ms)")
    first = sum(r["follower_epoch_start"] == r["load_end_offset"] for r in runs)
    two = sum(r["isr_at_first_commit"] is not None and len(r["isr_at_first_commit"]) == 2 for r in runs)
    same = sum(r["isr_at_first_commit"] == r["isr_during_floor"] for r in runs)
    print(f"  checks: the follower's first record of the new epoch was the first appended after the load in {first} "
          f"of {len(runs)} runs (medians: the leader appended it at loaded {med['leader_append_after_load']:+.0f} ms, the "
          f"follower wrote its checkpoint of the epoch at loaded {med['follower_epoch_written_after_load']:+.1f} ms, "
          f"the leader's HW passed it at loaded {med['hw_past_first_after_load']:+.1f} ms); the first commit waited "
          f"for an ISR of 2 (one follower) in {two} of {len(runs)}, the floor ran with the same ISR in {same}; "
          f"the floor's member was on the new coordinator in "
          f"{sum(bool(r['floor_on_new_coordinator']) for r in runs)}")
    print(f"goal (issue 49) against its floor, same runs: first commit loaded + {med['after_load']:.1f} ms (commits-only "
          f"+ {med['after_load_commits_only']:.1f}; {len(every)} failovers) against loaded + {med['floor_floor']:.1f} "
          f"ms (the floor, {len(runs)} of them): "
          f"{verdict(med['after_load'], med['floor_floor'])}")
