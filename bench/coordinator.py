"""Group coordinator: replay rate, commit throughput against ZooKeeper znodes, failover stages.

    python bench/coordinator.py [--records 1000000] [--runs 5] [--quick] [--json] [--only replay|commit|failover]
                                [--threads 8 32] [--per-request 10 100] [--no-rdkafka] [--signals SIGTERM SIGKILL]

replay     1M offset-commit records (10k keys: 100 groups x 100 partitions,
           each committed 100 times, 100 offsets per batch as one commit
           request writes them) in a real segment log on disk, loaded through
           the coordinator's own load loop (node.shells.coordinator_shell.replay_log ->
           PartitionCoordinator.replay), before and after the log cleaner
           compacts it.  Baselines, same run: decoding the same batches without
           replaying them, with the reference decoder (kafkacommon/batch_scan.py)
           and with the load's own (kafkacommon/fastscan.py: the floor of a
           replay, every record decoded and none kept).  One core (this process).
commit     OffsetCommit requests to a real 3-broker cluster (RF 3, acks=all),
           N client threads (one group each; N = 8 and 32 by default), 10 and
           100 partitions per request, for a fixed time.  Baseline, same run:
           the old ZooKeeper design (Kafka's pre-0.9 consumer: one znode per
           partition under /consumers/<g>/offsets/<t>/<p>, one synchronous
           setData per offset), N kazoo threads sharing one client on the same
           ZooKeeper (its best arrangement here: a client per thread is slower,
           each one more Python I/O thread), timed in two windows as long as
           ours, one before kafkasim's cluster starts and one after it is down
           (after one untimed window at the highest concurrency first, which
           warms the ZooKeeper JVM's JIT up: a cold first window was the
           lowest); its figure at each concurrency is the mean of the two (the window
           after alone, the old figure, and the best window are printed beside
           it).  Throughput is each side's peak over the concurrencies, and the
           goal compares peak with peak.  Then the
           same commits through the Kafka listener by librdkafka (a
           confluent-kafka Consumer per thread, one group each, synchronous
           commits), and the floor of that path: the same consumers reading the
           same offsets back (OffsetFetch: the same listener, door and core, no
           write, no replication), and the write floor: librdkafka producers,
           as many threads, each with one Produce in flight carrying one batch
           of as many records as a commit has offsets (the commit's own keys
           and values), acks=all, to a topic of RF 3 with as many partitions as
           __consumer_offsets (each thread on its group's offsets partition's
           number), on the same brokers; the brokers' logged Produce requests
           are checked to be one a round.
failover   a group of 2 members committing after every poll, and a member of
           another group on the same offsets partition that only commits once it
           has its assignment; the broker coordinating them gets SIGTERM
           (controlled shutdown) or SIGKILL; per run, from the event logs and the
           clients: process exit, new leader elected, each ISR member's
           LeaderAndIsr arrived and applied, the new leader taking the offsets
           partition up, load finished, its HW moving after the load, first commit
           accepted by each kind of member (all from the signal).  After each
           SIGTERM failover, once it has settled, its floor in the same run on
           the same cluster and disk (bench/failover_floor.py, --floor-rounds):
           the least Kafka 2.8's design must do after the load before an
           acks=all commit is answered (the leader's append, the follower's
           fetch answered, its append with the new epoch's checkpoint written,
           fsynced and renamed, its next fetch moving the HW, the answer), as a
           steady commit on the new coordinator minus the same member's
           Heartbeat round trip (which holds the request's way in) plus the
           epoch checkpoint written by the broker's own code on that disk;
           printed beside the goal's "loaded + X ms" as "loaded + floor", with
           checks of its assumptions against the run (the ISR the first commit
           waited for; the follower's first record of the new epoch being the
           first appended after the load, and when each step came).
           With --sched, each failover is also recorded by `perf sched record`
           (bench/sched_windows.py) from just before the signal until the old
           broker has exited, and the benchmark prints which processes used
           the cores, and how long their threads waited for one, in its
           windows: from the signal to the load, from the load to the first
           commit, and the stopping broker after its controlled shutdown.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.commit_load import commit_rdkafka, produce_rdkafka, produce_requests, timed  # noqa: E402
from bench import failover_floor  # noqa: E402
from bench.sched_windows import SchedRecorder, failover_cpu, print_failover  # noqa: E402
from bench.common import TICK_MS, make_cluster, summary  # noqa: E402
from client.admin import GroupAdmin  # noqa: E402
from client.group import GroupMember  # noqa: E402
from client.metadata import ClusterClient  # noqa: E402
from client.producer import Producer  # noqa: E402
from coordinator.core import GroupConfig, PartitionCoordinator  # noqa: E402
from coordinator.records import OffsetKey, OffsetValue, encode_key, encode_value  # noqa: E402
from kafkacommon import errors  # noqa: E402
from kafkacommon.batch_scan import iter_batches  # noqa: E402
from kafkacommon.fastscan import iter_batch_records  # noqa: E402
from kafkacommon.hashing import partition_for  # noqa: E402
from zk.admin import create_topic  # noqa: E402
from node.shells.coordinator_shell import replay_log  # noqa: E402
from node.events import read_run_events  # noqa: E402
from node.storage import PartitionLog  # noqa: E402
from node.storage.cleaner import clean  # noqa: E402
from util.waiting import wait_for  # noqa: E402
from proto import groups_pb2 as gpb  # noqa: E402
from kazoo.client import KazooClient  # noqa: E402  (the baseline is kazoo itself)
from zk.server import EmbeddedZooKeeper  # noqa: E402

CHUNK = 5 << 20  # offsets.load.buffer.size
OFFSETS_PARTITIONS = 50   # the commit benchmark's offsets.topic.num.partitions
FLOOR_TOPIC = "commit-floor"   # the write floor's topic (as many partitions as __consumer_offsets, RF 3)


# ---------------------------------------------------------------------- replay

def build_log(d: Path, records: int) -> PartitionLog:
    log = PartitionLog(d, "__consumer_offsets", 0, segment_bytes=1 << 20)
    keys = [encode_key(OffsetKey(f"group-{g}", "t", p)) for g in range(100) for p in range(100)]
    now = 1_700_000_000_000
    n = 0
    while n < records:
        batch = []
        for i in range(100):
            k = keys[(n + i) % len(keys)]
            batch.append((k, encode_value(OffsetValue(n + i, -1, "", now + n, None))))
        log.append_as_leader(batch, 0, now + n)
        n += len(batch)
    log.flush()
    return log


def reader(log: PartitionLog):
    return lambda offset: (bytes(log.read(max(offset, log.log_start_offset), CHUNK)) if offset < log.log_end_offset
                           else b"", log.log_start_offset, log.log_end_offset)


def time_replay(log: PartitionLog) -> dict:
    read = reader(log)
    t = time.perf_counter()
    n, offset = 0, 0
    while offset < log.log_end_offset:  # baseline: decode only
        data, _, _ = read(offset)
        for _, b in iter_batches(data):
            n += len(b.records)
            offset = b.next_offset
    decode_s = time.perf_counter() - t
    t = time.perf_counter()
    fast, offset = 0, 0
    while offset < log.log_end_offset:  # the floor: the load's own decoder, every record decoded, none kept
        data, _, _ = read(offset)
        for offset, recs in iter_batch_records(data):
            fast += len(recs)
    fast_s = time.perf_counter() - t
    core = PartitionCoordinator(0, GroupConfig(), lambda: "uuid")
    t = time.perf_counter()
    core.begin_load(0)
    stats = replay_log(core, read)
    core.finish_load(0)
    replay_s = time.perf_counter() - t
    return {"records": stats.read, "replayed": stats.records, "bytes": stats.bytes, "decode_only_per_s": n / decode_s,
            "fast_decode_only_per_s": fast / fast_s,
            "replay_s": replay_s, "replay_per_s": stats.read / replay_s, "groups": len(core.group_ids())}


def bench_replay(records: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="kafkasim-replay-") as tmp:
        log = build_log(Path(tmp), records)
        before = time_replay(log)
        t = time.perf_counter()
        r = clean(log, now_ms=1_800_000_000_000, min_cleanable_ratio=0.0, upper_bound_offset=log.log_end_offset)
        clean_s = time.perf_counter() - t
        after = time_replay(log)
        log.close()
    return {"before": before, "after": after, "clean_s": clean_s, "kept": r.records_kept, "read": r.records_read}


# ---------------------------------------------------------------------- commit throughput

def zookeeper_design(zk: EmbeddedZooKeeper, seconds: float, threads: int, per_request: int) -> float:
    """The old ZooKeeper design's offsets/s in one window of ``seconds``: one znode per (group, topic,
    partition), one synchronous setData per offset, ``threads`` kazoo threads sharing one client."""
    zkc = KazooClient(hosts=zk.connect_string, timeout=10)
    zkc.start(timeout=30)
    try:
        for i in range(threads):
            for p in range(per_request):
                zkc.ensure_path(f"/bench-consumers/bench-{i}/offsets/t/{p}")
        zcounts = [0] * threads
        stop = threading.Event()

        def zrun(i: int) -> None:
            n = 0
            while not stop.is_set():
                n += 1
                for p in range(per_request):
                    zkc.set(f"/bench-consumers/bench-{i}/offsets/t/{p}", str(n).encode())
                zcounts[i] += 1

        zs = timed(zrun, threads, seconds, stop)
        zkc.delete("/bench-consumers", recursive=True)
    finally:
        zkc.stop()
    return sum(zcounts) * per_request / zs


def bench_commit(zk: EmbeddedZooKeeper, work: Path, seconds: float, threads: int = 8, per_request: int = 10,
                 rdkafka: bool = True) -> dict:
    # The ZooKeeper design is timed in two windows of ``seconds``, one before kafkasim's cluster starts and one
    # after it is down, so it sees the machine's load on both sides of ours; its figure is their mean.  The
    # window after alone was this benchmark's figure until 2026-11-29 and is still printed ("after" below).
    zk_before = zookeeper_design(zk, seconds, threads, per_request)
    # a 6 s session: on this contended host a 1 s session can expire mid-run and move coordinators
    c = make_cluster(zk, work, partitions=OFFSETS_PARTITIONS, **{"zookeeper.session.timeout.ms": 6000})
    try:
        create_topic(c.zk(), "t", per_request, 3, {})
        if rdkafka:   # the write floor's topic: RF 3, as many partitions as __consumer_offsets, the same brokers
            create_topic(c.zk(), FLOOR_TOPIC, OFFSETS_PARTITIONS, 3, {})
        cc = ClusterClient([f"{b.host}:{b.port}" for b in c.cfg.brokers])
        admin = GroupAdmin(cc)
        groups = [f"bench-{i}" for i in range(threads)]
        stubs = [cc.groups_stub(admin.coordinator(g)[1]) for g in groups]
        for g, stub in zip(groups, stubs):  # every coordinator loaded before the clock starts
            wait_for(lambda: stub.OffsetFetch(gpb.OffsetFetchRequest(group_id=g, all_partitions=True),
                                              timeout=10).error_code == 0, 30, f"the coordinator of {g}")
        counts = [0] * threads
        errors_seen = [0] * threads
        codes: dict[str, int] = {}
        stop = threading.Event()

        def run(i: int) -> None:
            n = 0
            while not stop.is_set():
                n += 1
                r = stubs[i].OffsetCommit(gpb.OffsetCommitRequest(
                    group_id=groups[i], generation_id=-1, retention_time_ms=-1, partitions=[
                        gpb.OffsetCommitPartition(topic="t", partition=p, offset=n, leader_epoch=-1)
                        for p in range(per_request)]), timeout=10)
                bad = [x.error_code for x in r.partitions if x.error_code]
                if bad:
                    errors_seen[i] += 1
                    name = errors.name(bad[0])
                    codes[name] = codes.get(name, 0) + 1
                else:
                    counts[i] += 1

        ours = timed(run, threads, seconds, stop)
        requests = sum(counts)
        result = {"per_request": per_request, "threads": threads, "requests_per_s": requests / ours,
                  "offsets_per_s": requests * per_request / ours,
                  "errors": sum(errors_seen), "error_codes": codes}
        cc.close()
        if rdkafka:
            boot = ",".join(f"{h}:{p}" for h, p in (b.kafka_advertised for b in c.cfg.brokers))
            result["rdkafka"] = commit_rdkafka(boot, seconds, threads, per_request)
            # the write floor: each commit is at least one acks=all, RF-3 append of its records through the
            # same listener; the same threads, each one Produce of one batch of the commit's records in flight
            result["rdkafka"]["produce_floor"] = produce_rdkafka(
                boot, seconds, threads, per_request, FLOOR_TOPIC, OFFSETS_PARTITIONS, client_prefix="bench-floor",
                requests=lambda: produce_requests(c.run_dir, "bench-floor"))
    finally:
        c.down()
    zk_after = zookeeper_design(zk, seconds, threads, per_request)
    result["zookeeper_before_offsets_per_s"] = zk_before
    result["zookeeper_after_offsets_per_s"] = zk_after   # the old figure: the window after ours alone
    result["zookeeper_offsets_per_s"] = (zk_before + zk_after) / 2
    result["ratio"] = result["offsets_per_s"] / result["zookeeper_offsets_per_s"]
    if "rdkafka" in result:
        result["rdkafka"]["ratio"] = result["rdkafka"]["offsets_per_s"] / result["zookeeper_offsets_per_s"]
        floor = result["rdkafka"]["produce_floor"]
        floor["ratio"] = floor["records_per_s"] / result["zookeeper_offsets_per_s"]
    return result


# ---------------------------------------------------------------------- failover stages

def _first(events: list[dict], after_ns: int, type_: str, **match) -> dict | None:
    return next((e for e in events if e["mono_ns"] >= after_ns and e["type"] == type_
                 and all(e.get(k) == v for k, v in match.items())), None)


def one_failover(zk: EmbeddedZooKeeper, work: Path, sig: signal.Signals, floor_rounds: int = 0,
                 sched: bool = False) -> dict:
    c = make_cluster(zk, work, partitions=50, controlled=(sig == signal.SIGTERM),
                     **{"group.initial.rebalance.delay.ms": 100, "group.min.session.timeout.ms": 1000,
                        "controlled.shutdown.retry.backoff.ms": 50})
    members = []
    stop = threading.Event()
    rec: SchedRecorder | None = None
    try:
        create_topic(c.zk(), "t", 4, 3, {})
        bootstrap = [f"{b.host}:{b.port}" for b in c.cfg.brokers]
        Producer(ClusterClient(bootstrap)).send_batch("t", 0, [(None, b"x", -1)] * 10)
        acks: list[tuple[int, int]] = []
        only_acks: list[tuple[int, int]] = []
        p = partition_for("g", 50)
        # a member of another group on the same offsets partition that, once it has its assignment, only
        # commits: its first commit times the coordinator's path alone, not the fetches from the moved
        # leaders of "t" that come first in the others' poll-then-commit loop
        g2 = next(g for g in (f"g-commits-{i}" for i in range(10_000)) if partition_for(g, 50) == p)
        members = [GroupMember(ClusterClient(bootstrap), "g", ["t"], client_id=f"m{i}", session_timeout_ms=6000,
                               heartbeat_interval_ms=500) for i in range(2)]
        # the commits-only member's calls on the benchmark's clock: where its first commit's time goes
        calls: list[tuple[int, str, str, object]] = []
        members.append(GroupMember(ClusterClient(bootstrap), g2, ["t"], client_id="commits-only",
                                   session_timeout_ms=6000, heartbeat_interval_ms=500,
                                   on_op=lambda op, phase, f: calls.append((time.monotonic_ns(), op, phase,
                                                                            f.get("coordinator")))))
        _note_calls(members[-1], calls)

        def loop(m: GroupMember) -> None:
            only = m.group_id == g2
            while not stop.is_set():
                try:
                    if not only or not m.assignment:
                        m.poll(20)
                    m.commit({tp: max(0, pos) for tp, pos in m.fetcher.positions.items()} or {("t", 0): 0})
                    (only_acks if only else acks).append((time.monotonic_ns(), m.coordinator[0] if m.coordinator else -1))
                except Exception:
                    stop.wait(0.005)
        ts = [threading.Thread(target=loop, args=(m,), daemon=True) for m in members]
        for t in ts:
            t.start()
        wait_for(lambda: len(acks) > 20 and len(only_acks) > 20, 60, "commits before the fault")
        old = GroupAdmin(ClusterClient(bootstrap)).coordinator("g")[0]
        rec = SchedRecorder.start(work / f"sched-{old}-{time.monotonic_ns()}.data") if sched else None
        if sched and rec is None:
            raise SystemExit("--sched: `perf sched record` did not start (it needs root, or "
                             "kernel.perf_event_paranoid <= -1, and the kernel's sched tracepoints)")
        t0 = time.monotonic_ns()
        c.signal_broker(old, sig)
        for a in (acks, only_acks):
            wait_for(lambda a=a: any(t > t0 and b not in (old, -1) for t, b in a), 60, "a commit on the new coordinator")
        first = next(t for t, b in acks if t > t0 and b not in (old, -1))
        first_only = next(t for t, b in only_acks if t > t0 and b not in (old, -1))
        c.wait_exit(old, timeout=20)
        if rec is not None:
            rec.stop()
        ev = read_run_events(c.run_dir)
        stopped = _first(ev, t0, "zk_session_closing", broker=old)
        elected = _first(ev, t0, "partition_state_written", topic="__consumer_offsets", partition=p)
        loaded = _first(ev, t0, "coordinator_loaded", partition=p)
        new = loaded["broker"] if loaded else None
        # each broker logs its LeaderAndIsr's role changes once it has applied the whole request: the new
        # leader's (one leader epoch checkpoint fsync per partition it now leads, each under that
        # partition's lock, which the other ISR member's fetches take too) and the other ISR member's
        led = _first(ev, t0, "became_leader", topic="__consumer_offsets", partition=p, broker=new)
        follows = [e for e in ev if e["mono_ns"] >= t0 and e["type"] == "became_follower" and e.get("partition") == p
                   and e.get("topic") == "__consumer_offsets" and e.get("leader") == new and e["broker"] != old]

        def rel(e):
            return (e["mono_ns"] - t0) / 1e6 if e else float("nan")
        ready = max((x for x in (rel(loaded), rel(led), rel(follows[0]) if follows else float("nan")) if x == x),
                    default=float("nan"))
        # the breakdown: when each ISR member's LeaderAndIsr arrived (its leader_and_isr_applied line's mono_ns
        # minus its duration) and was applied, when the new leader took the offsets partition up (its load
        # starts then), and when its HW first moved after the load (the other ISR member's fetch that acks)
        other = follows[0]["broker"] if follows else None
        applied = {b: _first(ev, t0, "leader_and_isr_applied", broker=b) for b in (new, other)}

        def arrived(b):
            e = applied.get(b)
            return rel(e) - e["duration_ms"] if e else float("nan")
        took_up = _first(ev, t0, "coordinator_load_started", partition=p, broker=new)
        hw = _first(ev, loaded["mono_ns"] if loaded else t0, "hw_changed", topic="__consumer_offsets", partition=p,
                    broker=new)
        breakdown = {"lai_arrived_leader": arrived(new), "lai_arrived_follower": arrived(other),
                     "leader_took_up": rel(took_up), "leader_request_applied": rel(applied.get(new)),
                     "follower_request_applied": rel(applied.get(other)), "hw_after_load": rel(hw)}
        # the controlled shutdown's second batch (the followed partitions' ISR removals: new leader epochs on
        # both survivors, each with its checkpoint fsync under its partition's lock) applied on each ISR member
        second = {b: [e for e in ev if e["mono_ns"] >= t0 and e["type"] == "leader_and_isr_applied"
                      and e["broker"] == b][1:2] for b in (new, other)}
        breakdown.update(_client_stages(calls, t0, first_only, old), **{
            "second_batch_leader": rel(second[new][0]) if second.get(new) else float("nan"),
            "second_batch_follower": rel(second[other][0]) if second.get(other) else float("nan"),
            # each member's commit cadence before the signal (median gap between acknowledgements): the polling
            # members' includes their poll (an empty long poll of up to 20 ms at each leader of "t")
            "cadence_polling": _cadence(acks, t0), "cadence_commits_only": _cadence(only_acks, t0)})
        if rec is not None and loaded:
            done = _first(ev, t0, "controlled_shutdown_done", broker=old)
            breakdown.update(failover_cpu(rec, {c.pids.get(old): "stopping", c.pids.get(new): "new",
                                                c.pids.get(other): "follower", zk.servers[0].pid: "zookeeper",
                                                os.getpid(): "clients"},
                                          t0, loaded["mono_ns"], first, done["mono_ns"] if done else None))
        if floor_rounds and loaded:
            breakdown.update(failover_floor.after_failover(c, ev, members[0], stop, ts, first, loaded, led, new,
                                                           other, p, floor_rounds))
        return {**breakdown, "exit": rel(stopped) if sig == signal.SIGTERM else 0.0, "elected": rel(elected),
                "loaded": rel(loaded), "first_commit": (first - t0) / 1e6,
                "after_load": (first - t0) / 1e6 - rel(loaded),
                "first_commit_commits_only": (first_only - t0) / 1e6,
                "after_load_commits_only": (first_only - t0) / 1e6 - rel(loaded),
                "leader_applied": rel(led), "follower_applied": rel(follows[0]) if follows else float("nan"),
                "after_ready_commits_only": (first_only - t0) / 1e6 - ready,
                "load_ms": loaded["duration_ms"] if loaded else float("nan")}
    finally:
        if rec is not None:
            rec.stop()
        stop.set()
        for m in members:
            m.close(leave=False)
        c.down()


def _note_calls(m: GroupMember, calls: list) -> None:
    """Note each coordinator call of ``m`` as it is sent and each one that fails (an error answer or a gRPC
    error) in ``calls``: (monotonic ns, op, phase, detail)."""
    call = m._call   # noqa: SLF001 (the benchmark looks inside its own client, as bench/vs_coordinator.py does)

    def noted(name: str, *args, **kwargs):
        calls.append((time.monotonic_ns(), name, "send", m.coordinator[0] if m.coordinator else None))
        try:
            return call(name, *args, **kwargs)
        except Exception as e:
            calls.append((time.monotonic_ns(), name, "failed", type(e).__name__))
            raise
    m._call = noted   # type: ignore[method-assign]


def _client_stages(calls: list, t0: int, first: int, old: int) -> dict:
    """The commits-only member's way to its first commit on the new coordinator, ms from the signal: it learns
    of the move (its first failed coordinator call), FindCoordinator names another broker, and the commit that
    succeeded is sent."""
    after = [c for c in list(calls) if t0 < c[0] <= first]
    learned = next((t for t, _op, phase, _d in after if phase == "failed"), None)
    named = next((t for t, op, _phase, d in after if op == "find_coordinator" and d not in (old, None)), None)
    sent = max((t for t, op, phase, _d in after if op == "OffsetCommit" and phase == "send"), default=None)
    return {k: (v - t0) / 1e6 if v is not None else float("nan")
            for k, v in (("client_learned", learned), ("client_named", named), ("client_sent", sent))}


def _load1() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def _cadence(acks: list[tuple[int, int]], t0: int) -> float:
    ts = [t for t, _ in list(acks) if t < t0][-21:]
    return statistics.median(b - a for a, b in zip(ts, ts[1:])) / 1e6 if len(ts) > 2 else float("nan")


def _med_gap(runs: list[dict], later: str, earlier: str) -> str:
    gaps = [r[later] - r[earlier] for r in runs if r[later] == r[later] and r[earlier] == r[earlier]]
    return f"{statistics.median(gaps):+.1f} ms" if gaps else "n/a"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--threads", type=int, nargs="+", default=[8, 32],
                    help="committing threads (one group each), and as many kazoo threads for the ZooKeeper design")
    ap.add_argument("--quick", action="store_true", help="100k records, 2 runs, 2 s")
    ap.add_argument("--only", choices=["replay", "commit", "failover"])
    ap.add_argument("--per-request", type=int, nargs="+", default=[10, 100], help="offsets per commit request")
    ap.add_argument("--no-rdkafka", action="store_true", help="commit throughput through kafkasim's client only")
    ap.add_argument("--signals", nargs="+", choices=["SIGTERM", "SIGKILL"], default=["SIGTERM", "SIGKILL"],
                    help="the failovers' signals")
    ap.add_argument("--floor-rounds", type=int, default=40,
                    help="after each SIGTERM failover: rounds of the floor's parts (0: no floor)")
    ap.add_argument("--sched", action="store_true",
                    help="record each failover with `perf sched record` and print which processes used the cores "
                         "in its windows (needs perf and the right to trace the scheduler)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.sched and shutil.which("perf") is None:
        ap.error("--sched needs perf (`perf sched record`) on the PATH")
    if a.quick:
        a.records, a.runs, a.seconds = 100_000, 2, 2.0
    res: dict = {}
    if a.only in (None, "replay"):
        res["replay"] = bench_replay(a.records)
    if a.only in (None, "commit", "failover"):
        with tempfile.TemporaryDirectory(prefix="kafkasim-bench-") as tmp:
            zk = EmbeddedZooKeeper(Path(tmp) / "zk", tick_ms=TICK_MS)
            zk.start()
            try:
                if a.only in (None, "commit"):
                    # the ZooKeeper JVM's JIT warmed up on the same load, untimed, before its first window
                    res["zookeeper_warm_up"] = {n: zookeeper_design(zk, a.seconds, max(a.threads), n)
                                                for n in a.per_request}
                    res["commit"] = [bench_commit(zk, Path(tmp), a.seconds, threads=th, per_request=n,
                                                  rdkafka=not a.no_rdkafka)
                                     for n in a.per_request for th in a.threads]
                if a.only in (None, "failover"):
                    for sig in (getattr(signal, name) for name in a.signals):
                        res[f"failover {sig.name}"] = [
                            {"load1_before": _load1(), **one_failover(
                                zk, Path(tmp), sig, a.floor_rounds if sig == signal.SIGTERM else 0, a.sched),
                             "load1_after": _load1()} for _ in range(a.runs)]
            finally:
                zk.stop()
    if a.json:
        print(json.dumps(res, indent=2))
        return
    if "replay" in res:
        r = res["replay"]
        for when in ("before", "after"):
            x = r[when]
            print(f"replay {when:6} compaction: {x['records']:>9} records in {x['replay_s']:.2f} s = "
                  f"{x['replay_per_s']:>9.0f} records/s (decode only: {x['decode_only_per_s']:.0f}/s with the "
                  f"reference decoder, {x['fast_decode_only_per_s']:.0f}/s with the load's own; {x['groups']} groups)")
        b = r["before"]
        print(f"  floor (issue 49): the load's own decoder alone, every record decoded and none kept, "
              f"{b['fast_decode_only_per_s']:.0f} records/s; the replay is {b['replay_per_s'] / b['fast_decode_only_per_s']:.2f}x "
              f"of it (goal >= 2M records/s: {'met' if b['replay_per_s'] >= 2e6 else 'MISSED'}"
              f"{'; below the floor' if b['fast_decode_only_per_s'] < 2e6 else ''})")
        print(f"  compaction: {r['read']} records read, {r['kept']} kept, in {r['clean_s']:.2f} s; "
              f"goal >= 500k records/s: {'met' if r['before']['replay_per_s'] >= 5e5 else 'MISSED'} (before)")
    for r in res.get("commit", []):
        print(f"commit, {r['per_request']} partitions per request, {r['threads']} threads: "
              f"{r['requests_per_s']:.0f} requests/s, {r['offsets_per_s']:.0f} offsets/s (RF 3, acks=all; "
              f"{r['errors']} errors {r['error_codes'] or ''}); ZooKeeper znodes: "
              f"{r['zookeeper_offsets_per_s']:.0f} offsets/s ({r['ratio']:.1f}x; the mean of the windows before "
              f"and after ours, {r['zookeeper_before_offsets_per_s']:.0f} and {r['zookeeper_after_offsets_per_s']:.0f})")
        if "rdkafka" in r:
            x = r["rdkafka"]
            print(f"  librdkafka through the Kafka listener: {x['requests_per_s']:.0f} requests/s, "
                  f"{x['offsets_per_s']:.0f} offsets/s ({x['errors']} errors {x['error_codes'] or ''}; {x['ratio']:.1f}x); "
                  f"floor, OffsetFetch of the same offsets (no write): {x['offset_fetch_requests_per_s']:.0f} requests/s "
                  f"= {x['offset_fetch_requests_per_s'] * r['per_request'] / r['zookeeper_offsets_per_s']:.1f}x the "
                  f"ZooKeeper design's offsets/s")
            f = x["produce_floor"]
            print(f"  write floor, librdkafka producers (one Produce of one batch of {r['per_request']} commit-sized "
                  f"records in flight per thread, acks=all, RF 3, {f['partitions']} partitions): "
                  f"{f['requests_per_s']:.0f} requests/s, {f['records_per_s']:.0f} records/s ({f['errors']} errors "
                  f"{f['error_codes'] or ''}; {f['ratio']:.1f}x the ZooKeeper design's offsets/s); librdkafka's commits ÷ this floor "
                  f"{x['requests_per_s'] / f['requests_per_s']:.2f}; {f['produce_requests']} Produce requests "
                  f"logged for the window's {f['rounds']} rounds ("
                  f"{'one a round' if f['produce_requests'] == f['rounds'] else 'NOT one a round'})")
    for n in sorted({r["per_request"] for r in res.get("commit", [])}):
        rs = [r for r in res["commit"] if r["per_request"] == n]
        theirs = max(r["zookeeper_offsets_per_s"] for r in rs)
        old = max(r["zookeeper_after_offsets_per_s"] for r in rs)
        best = max(max(r["zookeeper_before_offsets_per_s"], r["zookeeper_after_offsets_per_s"]) for r in rs)
        print(f"ZooKeeper design, {n} partitions per request: its warm-up window ({max(r['threads'] for r in rs)} "
              f"threads, untimed) {res['zookeeper_warm_up'][n]:.0f} offsets/s, then each concurrency's windows before and "
              f"after ours: " + ", ".join(f"{r['threads']} threads {r['zookeeper_before_offsets_per_s']:.0f} and "
                                          f"{r['zookeeper_after_offsets_per_s']:.0f}" for r in rs))
        print(f"ZooKeeper design, {n} partitions per request: peak over the concurrencies of each one's mean of the "
              f"windows before and after ours, {theirs:.0f} offsets/s (the old figure, the window after ours alone: "
              f"{old:.0f}; the best single window: {best:.0f})")
        for name, ours in (("kafkasim client", max(r["offsets_per_s"] for r in rs)),
                           ("librdkafka", max((r["rdkafka"]["offsets_per_s"] for r in rs if "rdkafka" in r), default=None))):
            if ours is not None:
                print(f"commit peak, {n} partitions per request, {name}: {ours:.0f} against {theirs:.0f} offsets/s -> "
                      f"{ours / theirs:.1f}x (goal >= 10x: {'met' if ours >= 10 * theirs else 'MISSED'}; against the "
                      f"old figure {ours / old:.1f}x, against the best single window {ours / best:.1f}x)")
        floor = max((r["rdkafka"]["produce_floor"]["records_per_s"] for r in rs if "rdkafka" in r), default=None)
        if floor is not None:
            print(f"write floor peak, {n} records per Produce, librdkafka: {floor:.0f} records/s against {theirs:.0f} "
                  f"offsets/s -> {floor / theirs:.1f}x (the goal of 10x is "
                  f"{'below this floor' if floor < 10 * theirs else 'within this floor'}; against the old figure "
                  f"{floor / old:.1f}x, against the best single window {floor / best:.1f}x)")
    for sig in ("SIGTERM", "SIGKILL"):
        runs = res.get(f"failover {sig}")
        if not runs:
            continue
        print(f"coordinator failover after {sig} (ms from the signal):")
        for stage in ("exit", "elected", "lai_arrived_follower", "lai_arrived_leader", "leader_took_up", "loaded",
                      "leader_request_applied", "follower_request_applied", "hw_after_load", "second_batch_leader",
                      "second_batch_follower", "client_learned", "client_named", "client_sent", "first_commit",
                      "after_load", "first_commit_commits_only", "after_load_commits_only", "after_ready_commits_only",
                      "load_ms"):
            print(f"  {stage:<25} {summary([r[stage] for r in runs])}")
        print("  after the load (medians of each run's gaps): the new leader's request applied "
              f"{_med_gap(runs, 'leader_request_applied', 'loaded')}, the other ISR member's "
              f"{_med_gap(runs, 'follower_request_applied', 'loaded')}; the HW moved "
              f"{_med_gap(runs, 'hw_after_load', 'loaded')}, the first commit answered "
              f"{_med_gap(runs, 'first_commit', 'hw_after_load')} after that")
        print("  the commits-only member, after the load (medians of each run's gaps): it learned of the move "
              f"{_med_gap(runs, 'client_learned', 'loaded')}, FindCoordinator named the new coordinator "
              f"{_med_gap(runs, 'client_named', 'loaded')}, the commit that succeeded was sent "
              f"{_med_gap(runs, 'client_sent', 'loaded')}, answered {_med_gap(runs, 'first_commit_commits_only', 'loaded')}")
        print("  the controlled shutdown's second batch (ISR removals) applied, after the load: on the new leader "
              f"{_med_gap(runs, 'second_batch_leader', 'loaded')}, on the other ISR member "
              f"{_med_gap(runs, 'second_batch_follower', 'loaded')}")
        print("  commit cadence before the signal (median gap between acknowledgements): the polling members "
              f"{statistics.median(r['cadence_polling'] for r in runs):.1f} ms (poll: an empty long poll of up to "
              f"20 ms at each leader of 't', then commit), the commits-only member "
              f"{statistics.median(r['cadence_commits_only'] for r in runs):.1f} ms")
        print_failover(runs)
    term = res.get("failover SIGTERM")
    if term:
        med = statistics.median(r["first_commit"] for r in term)
        print(f"goal: clean failover median first commit <= 150 ms: {med:.1f} ms {'met' if med <= 150 else 'MISSED'}")
        gap = statistics.median(r["after_load"] for r in term)
        print(f"goal (issue 49): first commit <= the new coordinator loaded + 10 ms, median: loaded + {gap:.1f} ms "
              f"{'met' if gap <= 10 else 'MISSED'} (the polling members: each of their commits follows a poll)")
        gap = statistics.median(r["after_load_commits_only"] for r in term)
        print(f"  the same, the member that only commits (the coordinator's path alone): loaded + {gap:.1f} ms "
              f"{'met' if gap <= 10 else 'MISSED'}")
        gap = statistics.median(r["after_ready_commits_only"] for r in term)
        print(f"  that member's first commit after the later of the load and both ISR members' LeaderAndIsr "
              f"applied: + {gap:.1f} ms")
        failover_floor.print_floor(term)


if __name__ == "__main__":
    main()
