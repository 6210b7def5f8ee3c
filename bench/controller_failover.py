"""Controller failover after SIGTERM and SIGKILL of the controller, against kazoo's Election recipe.

    python bench/controller_failover.py [--runs 20] [--partitions 50 1000] [--quick]
                                        [--signals SIGTERM SIGKILL] [--no-controlled-shutdown]
                                        [--warmup-rounds 150] [--warmup-runs 4]

Every run uses a fresh cluster of 3 real broker processes on its own chroot
of one shared real ZooKeeper (tick 100 ms).  Each failover is split, from
the brokers' event logs, into:

  detection   the old controller gone (it starts closing its ZooKeeper
              session on SIGTERM; the kill itself on SIGKILL) -> the winner
              starts its election, split into
    notified    -> the winner's event thread takes up the CONTROLLER_CHANGE (the
                close reaching ZooKeeper, /controller deleted, the watch's
                notification, kazoo's event thread, the controller's queue)
    read        -> its read of /controller (absent) done: the election starts
  (old close answered: the old controller has the answer to its close)
  elect+write the winner's election, context load and every
              partition-state write -> the failover's last fenced multi has landed,
              split into the winner's own stages (elect, load, decide, write:
              its ZooKeeper writes) and what lies between them (its requests
              queued, its event lines, hand-offs between its threads)
  total       the old controller gone -> every partition state written, the
              election's multi included (controlled shutdown off, so that the
              next controller does all the work)
  applied     the old controller gone -> the last LeaderAndIsr of the new
              epoch taken up by its broker (``leader_and_isr_applied``, once
              no new one came for 0.3 s): when the brokers act on the failover

and, per live broker, the CPU its threads ran (``winner_cpu``, ``peer_cpu``)
and the time they waited for a core (``winner_wait``, ``peer_wait``), in ms,
from /proc/PID/task/*/schedstat: from the signal until the waiter saw the
failover done (its ``controller_failover_done`` line, polled every 10 ms);
``winner_cpu_settled`` and ``peer_cpu_settled``: the CPU from the signal until
the brokers' take-up has settled (``applied``'s 0.3 s without a new line), the
whole failover's work on each live broker (and 0.3 s of idle).

A third series keeps Kafka's default, controlled shutdown on: the stopping
controller moves its own leaderships away and leaves every ISR before it
exits.  It reports how long that took, how many leaderships moved, and the
next controller's failover after the exit (which finds nothing to write).

ZooKeeper is warmed up first, as a long-running server is (its JIT has
compiled the multi, check and setData paths): 150 fenced multis of 1,000
state writes in a scratch chroot, then 4 failovers per size that are not
counted (``--warmup-rounds``, ``--warmup-runs``).  A cold JVM made the
1,000-partition writes 2-3x slower, with C2 compiler threads competing for
the cores.  The waiter reads only the lines appended to the event logs
(``node.events.EventTail``); the figures come from the events' own clocks.

The baseline, measured in the same run on the same ZooKeeper: three
processes in kazoo's Election recipe, from the leader gone to the next
leader's callback running (no state to load or write).  The floor, also in
the same run, is the least ZooKeeper work a failover of N partitions must do:
the same election, one read (the fence's version), then, each in one multi
fenced by a version check, the states of every partition whose ISR held the
dead broker (N: RF 3 on 3 brokers) and then those of the partitions it led
(ceil(N/3), the leaders spread evenly), as Kafka's failover writes them
(leader -1 first, then the election); no context to read, nothing to decide
and no request to send.  Its own N-vs-50 ratio is printed beside ours: a
ratio goal below it is below the floor.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from launcher.cluster import Cluster  # noqa: E402
from node.events import EventTail, read_run_events  # noqa: E402
from util.waiting import WaitTimeout, wait_for  # noqa: E402
from zk.errors import SessionExpired, ZkConnectionLost  # noqa: E402
from zk.server import EmbeddedZooKeeper  # noqa: E402
from bench.common import SESSION_MS, TICK_MS, make_cluster, summary, warm_zookeeper  # noqa: E402


def events(cluster: Cluster) -> list[dict]:
    return read_run_events(cluster.run_dir)


def controlled_shutdown(zk: EmbeddedZooKeeper, workdir: Path, partitions: int) -> dict:
    """SIGTERM of the controller with controlled shutdown on (Kafka's default): it moves its own
    leaderships away first; then the next controller takes over with nothing left to write."""
    cluster = make_cluster(zk, workdir, partitions, controlled=True)
    try:
        view = cluster.view()
        old, epoch = view.controller_id, view.controller_epoch
        cluster.signal_broker(old, signal.SIGTERM)

        tail = EventTail(cluster.run_dir, contains="controller_failover_done")
        done = wait_for(lambda: tail.first(lambda e: e["type"] == "controller_failover_done"
                                           and e["epoch"] == epoch + 1),
                        30, "the next controller's failover", interval=0.01)
        evs = events(cluster)
        cs = next(e for e in evs if e["type"] == "controlled_shutdown_done" and e["broker"] == old)
        gone = next(e for e in evs if e["type"] == "zk_session_closing" and e["broker"] == old)["mono_ns"]
        moved = sum(1 for e in evs if e["type"] == "partition_state_written" and e["reason"] == "controlled_shutdown")
        return {"controlled_shutdown": cs["duration_ms"], "moved": moved, "succeeded": cs["succeeded"],
                "failover_after_exit": (done["mono_ns"] - gone) / 1e6, "states_written": done["states_written"]}
    finally:
        cluster.down()


def sched_ns(pid: int) -> tuple[int, int]:
    """(CPU run, run-queue wait) in ns, summed over process ``pid``'s threads alive now
    (/proc/PID/task/*/schedstat); (0, 0) when it is gone."""
    run = wait = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0, 0
    for tid in tids:
        try:
            f = Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()
        except OSError:
            continue
        run += int(f[0])
        wait += int(f[1])
    return run, wait


def controller_failover(zk: EmbeddedZooKeeper, workdir: Path, partitions: int, sig: signal.Signals) -> dict:
    """The controller's own failover work: controlled shutdown off, so the next controller
    elects every leader and shrinks every ISR itself."""
    cluster = make_cluster(zk, workdir, partitions)
    try:
        view = cluster.view()
        old, epoch = view.controller_id, view.controller_epoch
        # the waiter parses only new lines that name the event: re-reading every log each poll
        # would take a core from the brokers being measured (thousands of lines at 1,000 partitions)
        tail = EventTail(cluster.run_dir, contains="controller_failover_done")
        tail.poll()
        applied_tail = EventTail(cluster.run_dir, contains="leader_and_isr_applied")
        applied_tail.poll()
        live = {b: pid for b, pid in cluster.pids.items() if b != old}
        before = {b: sched_ns(pid) for b, pid in live.items()}
        t_signal = time.monotonic_ns()
        cluster.signal_broker(old, sig)
        try:
            failover = wait_for(lambda: tail.first(lambda e: e["type"] == "controller_failover_done"
                                                   and e["epoch"] == epoch + 1),
                                SESSION_MS / 1000 * 3 + 20, "the new controller's failover", interval=0.01)
            after = {b: sched_ns(pid) for b, pid in live.items()}
        except WaitTimeout:   # said with the controllers' last lines, and not counted
            last = [e for e in events(cluster) if e["type"].startswith(("controller", "zk_"))][-12:]
            print("\n".join(f"    {e}" for e in last), file=sys.stderr)
            return {"discarded": f"no failover of epoch {epoch + 1} within {SESSION_MS / 1000 * 3 + 20:.0f} s"}
        applied = applied_settled(applied_tail, epoch + 1)
        settled = {b: sched_ns(pid) for b, pid in live.items()}
        evs = events(cluster)
        elected = next(e for e in evs if e["type"] == "controller_elected" and e["epoch"] == epoch + 1)
        gone_ev = next((e for e in evs if e["type"] == "zk_session_closing" and e["broker"] == old), None)
        gone = gone_ev["mono_ns"] if sig == signal.SIGTERM else t_signal
        start_elect = elected["mono_ns"] - elected["elect_ms"] * 1e6
        # done: the failover's last state write landed (the election, after the dead replicas went offline),
        # as the floor's second multi
        writes = [e for e in evs if e["type"] == "partition_states_written" and e["epoch"] == epoch + 1
                  and e["broker"] == failover["broker"] and e["mono_ns"] <= failover["mono_ns"]]
        if not writes:   # not this failover: another election came first (sessions expiring on a loaded machine)
            return {"discarded": f"the failover of epoch {epoch + 1} wrote no state"}
        done = max(e["mono_ns_written"] for e in writes)
        out = {"detect": (start_elect - gone) / 1e6, "elect_write": (done - start_elect) / 1e6,
               "total": (done - gone) / 1e6, "states": sum(e["count"] for e in writes),
               # the winner's own split of elect+write: its election multi, then load, decide and write
               "elect": elected["elect_ms"], "load": failover["load_ms"], "decide": failover["decide_ms"],
               "write": failover["write_ms"]}
        # detect, split: the old controller's close, ZooKeeper deleting /controller, the watch's notification and
        # the winner's event queue (-> its event thread takes the CONTROLLER_CHANGE up), then its /controller read
        # the rest of elect+write: the winner's work between those stages (its requests queued, its event lines, the
        # hand-offs between its threads)
        out["between"] = out["elect_write"] - out["elect"] - out["load"] - out["decide"] - out["write"]
        if "event_mono_ns" in elected:   # (a tree before the field: no split)
            out["detect_notified"] = (elected["event_mono_ns"] - gone) / 1e6
            out["detect_read"] = (start_elect - elected["event_mono_ns"]) / 1e6
        if applied:   # the brokers' side: every LeaderAndIsr of the new epoch taken up by its broker
            out["applied"] = (max(e["mono_ns"] for e in applied) - gone) / 1e6
        for b in live:   # the live brokers' threads over the failover: CPU and waits for a core
            who = "winner" if b == failover["broker"] else "peer"
            out[f"{who}_cpu"] = (after[b][0] - before[b][0]) / 1e6
            out[f"{who}_wait"] = (after[b][1] - before[b][1]) / 1e6
            out[f"{who}_cpu_settled"] = (settled[b][0] - before[b][0]) / 1e6
        stopped = next((e for e in evs if e["type"] == "broker_stopped" and e["broker"] == old), None)
        if sig == signal.SIGTERM and stopped is not None:   # the close's answer reached the old controller
            out["old_close_answered"] = (stopped["mono_ns"] - gone) / 1e6
        return out
    finally:
        cluster.down()


def applied_settled(tail: EventTail, epoch: int, quiet_s: float = 0.3, timeout_s: float = 10.0) -> list[dict]:
    """The live brokers' ``leader_and_isr_applied`` lines of ``epoch``, once none has come for ``quiet_s``."""
    seen: list[dict] = []
    last = [time.monotonic()]

    def quiet() -> bool:
        new = [e for e in tail.poll() if e["type"] == "leader_and_isr_applied" and e["controller_epoch"] == epoch]
        if new:
            seen.extend(new)
            last[0] = time.monotonic()
        return bool(seen) and time.monotonic() - last[0] >= quiet_s

    try:
        wait_for(quiet, timeout_s, "the brokers' LeaderAndIsr lines to settle", interval=0.02)
    except Exception:  # noqa: BLE001 - reported without the stage
        return []
    return seen


def dead_leaderships(partitions: int, brokers: int = 3) -> int:
    """The partitions a dead broker led, at most: the leaders of ``partitions`` spread evenly over ``brokers``."""
    return -(-partitions // brokers)


def kazoo_failover(zk: EmbeddedZooKeeper, workdir: Path, sig: signal.Signals, writes: int = 0) -> dict:
    """kazoo's Election among three processes: from the leader gone to the next leader's callback; with
    ``writes``, to the next leader having written that many state znodes in one fenced multi, then the
    :func:`dead_leaderships` of them in a second (the floor of a controller failover in Kafka's order, with
    no context to read, no decision to make and no request to send)."""
    out = workdir / f"kazoo-{uuid.uuid4().hex[:8]}.log"
    out.touch()
    path = f"/bench-election-{uuid.uuid4().hex[:8]}"
    worker = [sys.executable, str(ROOT / "bench" / "kazoo_election_worker.py"), zk.connect_string, path, str(out),
              str(SESSION_MS), str(writes)]
    if writes:   # the state znodes, made by the worker (kazoo stays in zk/ and the kazoo baselines)
        subprocess.run(worker + ["create"], check=True, timeout=60)
    procs = [subprocess.Popen(worker + ([str(dead_leaderships(writes))] if writes else [])) for _ in range(3)]

    def lines() -> list[list[str]]:
        return [ln.split() for ln in out.read_text().splitlines() if ln.strip()]

    try:
        wait_for(lambda: sum(ln[0] == "ready" for ln in lines()) == 3 and any(ln[0] == "elected" for ln in lines()),
                 30, "three contenders and a leader")
        leader = next(ln[1] for ln in lines() if ln[0] == "elected")
        proc = next(p for p in procs if str(p.pid) == leader)
        if writes:   # the first leader done with its own writes before it is stopped
            wait_for(lambda: any(ln[0] == "written" and ln[1] == leader for ln in lines()), 30,
                     "the first leader's own writes")
        t_signal = time.monotonic_ns()
        proc.send_signal(sig)
        done = "written" if writes else "elected"
        nxt = wait_for(lambda: [ln for ln in lines() if ln[0] == done and ln[1] != leader],
                       SESSION_MS / 1000 * 3 + 20, "the next leader", interval=0.01)[0]
        if sig == signal.SIGTERM:
            gone = int(wait_for(lambda: [ln for ln in lines() if ln[0] == "gone"], 10, "leader gone")[0][2])
        else:
            gone = t_signal
        return {"total": (int(nxt[2]) - gone) / 1e6}
    finally:
        for p in procs:
            p.kill()
            p.wait()


def floor_name(n: int, sig: str) -> str:
    return f"floor: kazoo Election + fenced multis of {n} and {dead_leaderships(n)} writes, {sig}"


def retried(run, tries: int = 3) -> dict:
    """``run()`` on a fresh cluster, again when a ZooKeeper session expired on the way (1 s sessions expire on a
    loaded machine): said on stderr, and the run is not counted."""
    for attempt in range(1, tries + 1):
        try:
            return run()
        except (SessionExpired, ZkConnectionLost) as e:
            print(f"  run retried ({attempt}/{tries}): {e!r}", file=sys.stderr)
            if attempt == tries:
                raise
    raise AssertionError("unreachable")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--partitions", type=int, nargs="+", default=[50, 1000])
    ap.add_argument("--quick", action="store_true", help="3 runs each (a smoke test of the benchmark)")
    ap.add_argument("--json", type=Path, help="also write the raw figures here")
    ap.add_argument("--signals", nargs="+", choices=["SIGTERM", "SIGKILL"], default=["SIGTERM", "SIGKILL"])
    ap.add_argument("--warmup-rounds", type=int, default=150,
                    help="fenced multis of state writes run first, untimed, so that ZooKeeper's JIT has compiled "
                         "its write path as in a long-running server (0: measure a cold JVM)")
    ap.add_argument("--warmup-runs", type=int, default=4,
                    help="failovers run first at each partition count and not counted (default 4)")
    ap.add_argument("--no-controlled-shutdown", action="store_true", help="skip the controlled-shutdown series")
    args = ap.parse_args()
    signals = [signal.Signals[name] for name in args.signals]
    runs = 3 if args.quick else args.runs
    results: dict[str, list[dict]] = {}
    discarded: list[tuple[int, str]] = []
    with tempfile.TemporaryDirectory(prefix="kafkasim-bench-") as tmp:
        workdir = Path(tmp)
        zk = EmbeddedZooKeeper(workdir / "zookeeper", servers=1, tick_ms=TICK_MS)
        zk.start(timeout=60)
        try:
            if args.warmup_rounds:
                took = warm_zookeeper(zk, max(args.partitions), args.warmup_rounds)
                print(f"  ZooKeeper warmed up: {args.warmup_rounds} fenced multis of {max(args.partitions)} "
                      f"state writes in {took:.1f} s", file=sys.stderr)
            for i in range(args.warmup_runs):  # untimed: the rest of ZooKeeper's paths (sessions, watches)
                for n in args.partitions:
                    retried(lambda: controller_failover(zk, workdir, n, signals[0]))
                print(f"  warm-up failover {i + 1}/{args.warmup_runs} done (not counted)", file=sys.stderr)
            for sig in signals:
                for i in range(runs):
                    results.setdefault(f"kazoo Election, {sig.name}", []).append(kazoo_failover(zk, workdir, sig))
                    for n in args.partitions:
                        results.setdefault(floor_name(n, sig.name),
                                           []).append(kazoo_failover(zk, workdir, sig, writes=n))
                    for n in args.partitions:
                        r = retried(lambda: controller_failover(zk, workdir, n, sig))
                        if "discarded" in r:   # said, and counted below
                            print(f"  run discarded: {r['discarded']}", file=sys.stderr)
                            discarded.append((n, r["discarded"]))
                        else:
                            results.setdefault(f"kafkasim controller, {n} partitions, {sig.name}", []).append(r)
                        if sig == signal.SIGTERM and not args.no_controlled_shutdown:
                            results.setdefault(f"controlled shutdown of the controller, {n} partitions", []).append(
                                controlled_shutdown(zk, workdir, n))
                    print(f"  {sig.name} run {i + 1}/{runs} done", file=sys.stderr)
        finally:
            zk.stop()
    print(f"\nController failover, 3 brokers, ZooKeeper tick {TICK_MS} ms, session timeout {SESSION_MS} ms")
    for n, why in discarded:
        print(f"discarded: a run at {n} partitions ({why})")
    for name, rs in results.items():
        print(f"\n{name}")
        for stage in ("detect", "detect_notified", "detect_read", "old_close_answered", "elect_write", "elect",
                      "load", "decide", "write", "between", "total", "applied", "winner_cpu", "winner_wait",
                      "peer_cpu", "peer_wait", "winner_cpu_settled", "peer_cpu_settled", "controlled_shutdown",
                      "failover_after_exit"):
            if any(stage in r for r in rs):
                print(f"  {stage:<20} {summary([r[stage] for r in rs if stage in r])}")
        if "moved" in rs[0]:
            print(f"  leaderships moved    median {statistics.median(r['moved'] for r in rs):.0f}; "
                  f"all succeeded: {all(r['succeeded'] for r in rs)}; "
                  f"states left for the next controller: {max(r['states_written'] for r in rs)}")
    for sig in args.signals:
        base = statistics.median(r["total"] for r in results[f"kazoo Election, {sig}"])
        meds = {n: statistics.median(r["total"] for r in results[f"kafkasim controller, {n} partitions, {sig}"])
                for n in args.partitions}
        line = ", ".join(f"{n} partitions {m:.1f} ms ({m / base:.2f}x kazoo)" for n, m in meds.items())
        print(f"\n{sig}: kazoo Election median {base:.1f} ms; kafkasim {line}")
        floors = {n: statistics.median(r["total"] for r in results[floor_name(n, sig)]) for n in args.partitions}
        for n, m in meds.items():
            print(f"{sig}: {n} partitions: floor (election, a read, fenced multis of {n} and {dead_leaderships(n)} "
                  f"writes) {floors[n]:.1f} ms = {floors[n] / base:.2f}x kazoo; kafkasim {m / floors[n]:.2f}x "
                  f"the floor")
        if len(meds) >= 2:
            lo, hi = min(args.partitions), max(args.partitions)
            ours, least = meds[hi] / meds[lo], floors[hi] / floors[lo]
            verdict = ("met" if ours <= 2 else "missed" if least <= 2 else
                       "below the floor, kafkasim within the floor's own ratio" if ours <= least else
                       "below the floor, kafkasim above the floor's own ratio")
            print(f"{sig}: {hi} vs {lo} partitions: kafkasim {ours:.2f}x; the floor's own {hi} vs {lo}: "
                  f"{least:.2f}x, measured in this run (goal <= 2x: {verdict})")
    if "SIGTERM" in args.signals:
        clean = statistics.median(r["total"] for r in
                                  results[f"kafkasim controller, {min(args.partitions)} partitions, SIGTERM"])
        print(f"\nclean failover median ({min(args.partitions)} partitions): {clean:.1f} ms (goal <= 50 ms)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
