"""Scale: idle CPU and the controller's SIGTERM failover of a 5-broker cluster at N partitions (issue 49).

    python bench/scale.py [--partitions 1000 10000] [--window 20] [--no-profile] [--profile-failover [--gil]]
                          [--only idle|failover] [--json FILE] [--keep-events DIR] [--floor-runs 3]

For each N, a fresh cluster of 5 real broker processes on its own real
ZooKeeper, with Kafka's defaults for stopping (controlled shutdown on), and one
topic of N partitions, replication factor 3 (besides the 50 partitions of
``__consumer_offsets``).  Once every broker has taken up every replica it
holds, replica.lag.time.max.ms has passed since the last role change, every
ISR in ZooKeeper is full, no ISR event was logged for 5 s, and the log flusher's one
pass (30 s after the start) is over:

  idle CPU    no client; the five broker processes' CPU seconds
              (/proc/PID/stat utime + stime) over a fixed window, as % of one
              core per broker and in total
  threads     one broker's (not the controller's) CPU by thread over the same
              window (/proc/PID/task), each named by py-spy dump; and the
              controller's broker's the same way
  profile     (unless --no-profile, after the window) py-spy samples that
              broker for 10 s: the functions most often on the CPU
  failover    SIGTERM of the controller, until the next controller has
              elected every leader (its ``controller_failover_done``, every
              partition led by a live broker in ZooKeeper), from the old
              controller's ``signal_received``; then the stages from the
              events' own clocks (signal -> controlled shutdown done ->
              resigned -> each of the broker's stop steps (``shutdown_step``)
              -> session closing -> the next controller elected -> its load
              and failover), and the counts of ``shutdown_timed_out`` and
              ``alter_isr_failed``.  With --profile-failover, py-spy samples the
              stopping controller (non-blocking) from the signal to its exit,
              and every other broker until the next controller is done: the
              next controller's profile, and all five brokers' together.  With
              --gil, py-spy samples only the thread holding each broker's
              interpreter lock (``py-spy --gil``): the brokers' Python time,
              which is what their threads queue for, without the threads
              that wait in a system call (an fsync, a poll) counted as busy.
              ``--only idle`` measures the idle CPU (and its profile) only.

  floor       (unless --floor-runs 0) right after each size's failover, on
              the same ZooKeeper (brokers stopped, a chroot of its own), the
              least ZooKeeper work any implementation of this path must do:
              the controlled shutdown's fenced state writes in the counts the
              run's events show, the stopping controller's session closed and
              the next contender of a kazoo Election elected (the STRICT
              floor; printed also with Kafka's read of every partition state
              after it).  bench/scale_floor.py says how, and why.

The figures are same-run ratios: N=10,000 against N=1,000 (the issue's goals:
idle CPU <= 2x, the failover <= 5x, and no stop step running into its deadline);
the floor's own ratio is printed beside kafkasim's: a goal below it is below the
floor, and when it is at most 5x, the goal is not.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import scale_floor  # noqa: E402
from launcher.cluster import Cluster  # noqa: E402
from node.config import KAFKA_PORT_OFFSET, load_config  # noqa: E402
from node.events import EventTail, read_run_events  # noqa: E402
from util.waiting import WaitTimeout, wait_for  # noqa: E402
from zk import paths as zk_paths  # noqa: E402
from zk.admin import create_topic  # noqa: E402
from zk.server import EmbeddedZooKeeper, free_port  # noqa: E402

BROKERS = 5
RF = 3
TOPIC = "scale"
QUIET_S = 5.0
FLUSHER_FIRST_S = 30.0   # node.replicas.log_settings.flusher_due: the log flusher's only pass
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK   # utime, stime (fields 14 and 15)


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds of each of the process's threads (/proc/PID/task/TID/stat)."""
    out: dict[int, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out[int(task.name)] = cpu_seconds_of(task / "stat")
        except (OSError, ValueError):
            pass
    return out


def cpu_seconds_of(stat: Path) -> float:
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def thread_names(pid: int) -> dict[int, str]:
    """OS thread id -> the Python thread's name, and where its stack is rooted (py-spy dump)."""
    try:
        r = subprocess.run(["py-spy", "dump", "--json", "--nonblocking", "--pid", str(pid)], capture_output=True,
                           text=True, timeout=60)
        threads = json.loads(r.stdout)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return {}
    out = {}
    for t in threads:
        frames = [f["name"] for f in t.get("frames", []) if not f["name"].startswith(ROOT_FRAMES)]
        out[t["os_thread_id"]] = f"{t['thread_name']} ({frames[-1] if frames else '?'})"
    return out


def by_thread(pid: int, before: dict[int, float], span: float, n: int = 8) -> list[str]:
    """The threads that used the most CPU over the window, in % of a core."""
    after = thread_cpu(pid)
    names = thread_names(pid)
    used = collections.Counter()
    for tid, v in after.items():
        used[names.get(tid, f"thread {tid}")] += 100 * (v - before.get(tid, 0.0)) / span
    return [f"    {v:5.2f}%  {name}" for name, v in used.most_common(n) if v > 0]


def start(work: Path, partitions: int) -> tuple[EmbeddedZooKeeper, Cluster]:
    d = work / f"n{partitions}-{uuid.uuid4().hex[:6]}"
    d.mkdir()
    zk = EmbeddedZooKeeper(d / "zookeeper", servers=1)
    zk.start(timeout=60)
    c = None
    try:   # (a refused config too: its ZooKeeper stopped, not left behind)
        doc = {"run.dir": str(d / "run"), "zookeeper.connect": zk.connect_string,
               "auto.leader.rebalance.enable": False,
               "brokers": [{"id": i, "host": "127.0.0.1", "port": free_port(paired=KAFKA_PORT_OFFSET)}
                           for i in range(1, BROKERS + 1)]}
        (d / "cluster.yaml").write_text(yaml.safe_dump(doc))
        c = Cluster(load_config(d / "cluster.yaml"), d / "cluster.yaml")
        c.up(timeout=120)
    except BaseException:
        if c is not None:
            c.down()
        zk.stop()
        raise
    return zk, c


def settle(c: Cluster, partitions: int, timeout: float) -> tuple[float, bool]:
    """Create the topic, wait until every replica is taken up, let the start-up's ISR churn pass, then
    wait until every ISR is full.  -> (seconds to create, every ISR full)."""
    t0 = time.monotonic()
    create_topic(c.zk(), TOPIC, partitions, RF, {}, timeout_s=timeout)
    created = time.monotonic() - t0
    tail = EventTail(c.run_dir, contains='"topic":"' + TOPIC + '"')
    roles: set[tuple[int, int]] = set()
    last = [time.monotonic_ns()]

    def taken_up() -> bool:
        for e in tail.poll():
            if e["type"] in ("became_leader", "became_follower"):
                roles.add((e["broker"], e["partition"]))
                last[0] = max(last[0], e["mono_ns"])
        return len(roles) >= partitions * RF

    wait_for(taken_up, timeout, f"{partitions * RF} replicas taken up", interval=0.5)
    quiet_ns = last[0] + (c.cfg.get("replica.lag.time.max.ms") + 2000) * 1_000_000
    time.sleep(max(0.0, (quiet_ns - time.monotonic_ns()) / 1e9))  # a fixed span, not a condition

    def full() -> bool:
        return all(sorted(s["isr"]) == sorted(s["replicas"])
                   for t in c.view().topics.values() for s in t["partitions"].values())

    try:
        wait_for(full, timeout, "every ISR full", interval=2.0)
    except WaitTimeout:
        return created, False
    # then until the brokers have taken up the ISRs too: QUIET_S without an ISR event (start-up's shrinks and
    # expansions reach the followers' caches with the next UpdateMetadata)
    churn = EventTail(c.run_dir, contains="isr")
    last = [time.monotonic()]

    def quiet() -> bool:
        if churn.poll():
            last[0] = time.monotonic()
        return time.monotonic() - last[0] >= QUIET_S
    try:
        wait_for(quiet, timeout, f"{QUIET_S:.0f} s without an ISR event", interval=0.5)
    except WaitTimeout:
        return created, False
    return created, True


def py_spy(pid: int, out: Path, duration: float | None, gil: bool = False) -> subprocess.Popen | None:
    cmd = ["py-spy", "record", "--pid", str(pid), "--format", "raw", "--rate", str(SPY_RATE), "--nonblocking",
           "-o", str(out)] + (["--gil"] if gil else [])
    if duration:
        cmd += ["--duration", str(int(duration))]
    try:
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except FileNotFoundError:
        return None


SPY_RATE = 100   # samples per second and thread
#: Frames every busy stack of a thread shares (its start), left out of the inclusive list
ROOT_FRAMES = ("Thread._bootstrap", "Thread.run (", "_worker (concurrent", "_WorkItem.run", "<module>", "_run_code",
               "_run_module", "BaseEventLoop.run_forever", "BaseEventLoop._run_once", "Handle._run", "main (node")


def _function(frame: str) -> str:
    """py-spy's ``name (path:line)`` without the line: samples add up per function."""
    name, _, where = frame.partition(" (")
    return f"{name} ({where.rsplit(':', 1)[0]})" if where else name


def top_stacks(raw: Path | list[Path], n: int = 12, gil: bool = False) -> list[str]:
    """From py-spy's collapsed stacks (only threads on the CPU are sampled; with ``--gil`` only the thread holding
    the interpreter lock), of one file or several added up: the functions most often running (self) and most
    often anywhere on the stack (inclusive), as % of the samples, with the CPU seconds the samples stand for."""
    raws = [p for p in ([raw] if isinstance(raw, Path) else raw) if p.exists()]
    if not raws:
        return ["(no profile: is py-spy installed?)"]
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in (ln for p in raws for ln in p.read_text().splitlines()):
        stack, _, count = line.rpartition(" ")
        frames = [_function(f) for f in stack.split(";") if f]
        if not frames:
            continue
        k = int(count)
        total += k
        own[frames[-1]] += k
        for f in set(frames):
            incl[f] += k
    if not total:
        return ["(no samples on the CPU)"]
    out = [f"{total} samples of the interpreter lock's holder ({total / SPY_RATE:.1f} s held, summed over the "
           "processes: a holder waiting for a core still holds it); self:" if gil else
           f"{total} samples on the CPU ({total / SPY_RATE:.1f} CPU-s); self:"]
    out += [f"    {100 * k / total:5.1f}%  {f}" for f, k in own.most_common(n)]
    out.append("  inclusive:")
    out += [f"    {100 * k / total:5.1f}%  {f}" for f, k in incl.most_common(4 * n)
            if not f.startswith(ROOT_FRAMES)][:2 * n]
    return out


def measure(work: Path, partitions: int, window: float, profile: bool, profile_failover: bool,
            failover: bool = True, keep_events: Path | None = None, floor_runs: int = 0,
            gil: bool = False) -> dict[str, Any]:
    zk, c = start(work, partitions)
    up = time.monotonic()
    res: dict[str, Any] = {"partitions": partitions}
    try:
        res["create_s"], res["isr_full"] = settle(c, partitions, timeout=300)
        # the log flusher's one pass, 30 s after each broker's start (it fsyncs every log written to: a
        # start-up task, not idling), is over before the window opens
        time.sleep(max(0.0, up + FLUSHER_FIRST_S + 2 - time.monotonic()))   # a fixed span, not a condition
        pids = {b: c.pids[b] for b in sorted(c.pids)}
        churn = EventTail(c.run_dir, contains="isr")
        churn.poll()
        view = c.view()
        other = next(b for b in pids if b != view.controller_id)   # the broker profiled: not the controller
        threads_before = thread_cpu(pids[other])
        ctl = view.controller_id
        ctl_before = thread_cpu(pids[ctl]) if ctl in pids else {}
        before = {b: cpu_seconds(p) for b, p in pids.items()}
        t0 = time.monotonic()
        time.sleep(window)  # the measurement window itself (none with --only failover)
        span = time.monotonic() - t0
        res["idle_cpu_pct"] = {b: 100 * (cpu_seconds(p) - before[b]) / span if window else 0.0
                               for b, p in pids.items()}
        res["idle_threads"] = {"broker": other,
                               "top": by_thread(pids[other], threads_before, span) if window else []}
        if ctl in pids:
            res["idle_controller_threads"] = {"broker": ctl,
                                              "top": by_thread(pids[ctl], ctl_before, span) if window else []}
        res["idle_isr_events"] = dict(collections.Counter(e["type"] for e in churn.poll()))
        view = c.view()
        old, epoch = view.controller_id, view.controller_epoch
        if profile:
            raw = work / f"idle-{partitions}.txt"
            p = py_spy(pids[other], raw, 10)
            if p is not None:
                try:
                    p.wait(timeout=60)
                except subprocess.TimeoutExpired:   # a loaded machine: no profile rather than no figures
                    p.kill()
                    p.wait()
            res["idle_profile"] = {"broker": other, "top": top_stacks(raw)}
        if not failover:
            return res
        # the failover
        tail = EventTail(c.run_dir, contains="controller_failover_done")
        tail.poll()
        spy_raw = work / f"failover-{partitions}.txt"
        cpu_at = {b: cpu_seconds(p) for b, p in pids.items()}
        cpu_last = dict(cpu_at)

        def cpu_sample() -> None:   # the stopping broker's last figure is read before it is reaped
            for b, pid in pids.items():
                try:
                    cpu_last[b] = cpu_seconds(pid)
                except (OSError, IndexError, ValueError):
                    pass
        # a partition state as the cluster wrote it: the floor's znodes are made like it
        sample = c.zk().get(zk_paths.partition_state(TOPIC, 0))[0]
        res["load_at_signal"] = scale_floor.load1()
        c.signal_broker(old, signal.SIGTERM)
        spy = py_spy(pids[old], spy_raw, None, gil) if profile_failover else None
        # and the others, until the next controller is done (one of them)
        others = {b: py_spy(p, work / f"failover-{partitions}-b{b}.txt", None, gil) for b, p in pids.items()
                  if b != old} if profile_failover else {}
        done = wait_for(lambda: cpu_sample() or tail.first(lambda e: e["type"] == "controller_failover_done"
                                                           and e["epoch"] > epoch), 180,
                        "the next controller's failover", interval=0.05)
        cpu_sample()
        res["failover_cpu_s"] = {b: cpu_last[b] - cpu_at[b] for b in pids}
        for p in others.values():
            if p is not None:
                p.send_signal(signal.SIGINT)   # py-spy writes what it sampled
        for b, p in others.items():
            if p is not None:
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        if done["broker"] in others:
            res["new_controller_profile"] = {"broker": done["broker"],
                                             "top": top_stacks(work / f"failover-{partitions}-b{done['broker']}.txt")}
        try:
            c.wait_exit(old, timeout=120)
        except Exception:
            pass
        if spy is not None:
            try:
                spy.wait(timeout=30)
            except subprocess.TimeoutExpired:
                spy.kill()
                spy.wait()
            res["failover_profile"] = {"broker": old, "top": top_stacks(spy_raw)}
            res["all_profile"] = {"gil": gil, "top": top_stacks(
                [spy_raw] + [work / f"failover-{partitions}-b{b}.txt" for b in others], gil=gil)}

        def all_led() -> bool:
            v = c.view()
            return all(s["leader"] >= 0 and s["leader"] != old and s["leader"] in v.brokers
                       for t in v.topics.values() for s in t["partitions"].values())
        wait_for(all_led, 60, "every partition led by a live broker", interval=1.0)
        evs = read_run_events(c.run_dir)
        if keep_events is not None:   # the brokers' event logs, for a closer look
            shutil.copytree(Path(c.run_dir) / "events", keep_events / f"events-{partitions}", dirs_exist_ok=True)
            for raw in work.glob(f"failover-{partitions}*.txt"):   # --profile-failover's py-spy samples
                shutil.copy(raw, keep_events / f"events-{partitions}" / raw.name)
        res.update(stages(evs, old, epoch, done))
    finally:
        c.down(timeout=60)
        try:   # the floor, right after the failover, on the same ZooKeeper (the brokers stopped)
            if floor_runs and "cs_writes" in res:
                states = partitions + scale_floor.OFFSETS_PARTITIONS
                res["floor"] = scale_floor.measure(zk.connect_string, work, states,
                                                   scale_floor.floor_counts(res["cs_writes"], states),
                                                   sample, old, runs=floor_runs)
        finally:
            zk.stop()
    return res


def stages(evs: list[dict], old: int, epoch: int, done: dict) -> dict[str, Any]:
    mine = [e for e in evs if e["broker"] == old]
    sig = next(e for e in mine if e["type"] == "signal_received")["mono_ns"]

    def at(t: str, src: list[dict] = mine, **match: Any) -> float | None:
        e = next((e for e in src if e["type"] == t and e["mono_ns"] >= sig
                  and all(e.get(k) == v for k, v in match.items())), None)
        return None if e is None else (e["mono_ns"] - sig) / 1e6

    def span(t: str) -> tuple[float, float, int] | None:
        xs = [e["mono_ns"] for e in mine if e["type"] == t and e["mono_ns"] >= sig]
        return None if not xs else ((xs[0] - sig) / 1e6, (xs[-1] - sig) / 1e6, len(xs))

    out: dict[str, Any] = {
        # the stopping broker's own lines between the controller's decision and its end: (first, last, count)
        "spans": {t: span(t) for t in ("partition_state_written", "replica_stopped", "became_follower",
                                       "became_leader", "leadership_lost", "coordinator_unloaded")},
        "controlled_shutdown_done": at("controlled_shutdown_done"),
        "controller_resigned": at("controller_resigned"),
        "steps": {e["step"]: (e["mono_ns"] - sig) / 1e6 for e in mine if e["type"] == "shutdown_step"},
        "zk_session_closing": at("zk_session_closing"),
        "broker_stopped": at("broker_stopped"),
        "elected": at("controller_elected", evs, epoch=epoch + 1),
        "failover_done": (done["mono_ns"] - sig) / 1e6,
        "cs_requested": at("controlled_shutdown_requested"),
        "cs_states_written": at("partition_states_written"),
        "cs_writes": [(e["count"], e["write_ms"]) for e in mine if e["type"] == "partition_states_written"
                      and e["mono_ns"] >= sig],
        "new_load_ms": done["load_ms"], "new_decide_ms": done["decide_ms"], "new_write_ms": done["write_ms"],
        "new_total_ms": done["total_ms"], "new_states_written": done["states_written"],
        "shutdown_timed_out": [e["step"] for e in evs if e["type"] == "shutdown_timed_out"],
        "alter_isr_failed": sum(e["type"] == "alter_isr_failed" for e in evs),
    }
    # the stopping controller's LeaderAndIsr requests (its controlled shutdown's): each broker's arrival and end
    out["cs_requests"] = {b: [(e["partitions"], e["leaders"], e["followers"],
                               (e["mono_ns"] - e["duration_ms"] * 1e6 - sig) / 1e6, (e["mono_ns"] - sig) / 1e6)
                              for e in evs if e["broker"] == b and e["type"] == "leader_and_isr_applied"
                              and e.get("controller_epoch") == epoch and e["mono_ns"] >= sig]
                          for b in sorted({e["broker"] for e in evs})}
    # the next controller's requests: when each broker got its LeaderAndIsr and UpdateMetadata of the new epoch
    # (arrival = the line's mono_ns minus its duration) and applied them, from the signal
    nb = done["broker"]
    out["new_controller"] = nb
    # where the next controller took the 10,050 states from, and whether its broker was applying the stopping
    # controller's LeaderAndIsr when it was elected (then it reads ZooKeeper: docs/deviations.md)
    out["new_from_cache"] = done.get("states_from_cache")
    out["new_broker_applying"] = out["elected"] is not None and any(
        arrived <= out["elected"] <= applied for _n, _l, _f, arrived, applied in out["cs_requests"].get(nb, []))
    out["new_requests"] = {b: [(e["type"], e.get("partitions"), (e["mono_ns"] - e["duration_ms"] * 1e6 - sig) / 1e6,
                                (e["mono_ns"] - sig) / 1e6)
                               for e in evs if e["broker"] == b and e.get("controller_epoch") == epoch + 1
                               and e["type"] in ("leader_and_isr_applied", "update_metadata_applied")
                               and e["mono_ns"] <= done["mono_ns"] + 5e9]
                           for b in sorted({e["broker"] for e in evs}) if b != old}
    el = next((e for e in evs if e["type"] == "controller_elected" and e.get("epoch") == epoch + 1), None)
    if el is not None:
        out["new_lines"] = collections.Counter(e["type"] for e in evs if e["broker"] == nb
                                               and el["mono_ns"] <= e["mono_ns"] <= done["mono_ns"]).most_common(12)
    cs = next((e for e in mine if e["type"] == "controlled_shutdown_done"), None)
    if cs is not None:
        out["controlled_shutdown"] = {k: cs[k] for k in ("attempts", "succeeded", "duration_ms")}
    return out


def fmt_ms(v: float | None) -> str:
    return "   n/a" if v is None else f"{v:9.1f} ms"


def report(r: dict[str, Any]) -> None:
    n = r["partitions"]
    cpu = r["idle_cpu_pct"]
    print(f"\n== {n} partitions (RF {RF}, {BROKERS} brokers): created in {r['create_s']:.1f} s, "
          f"every ISR full before measuring: {r['isr_full']}")
    print("idle CPU, % of a core: " + ", ".join(f"broker {b} {v:.1f}" for b, v in cpu.items())
          + f"; total {sum(cpu.values()):.1f}")
    print(f"ISR events during the window: {r['idle_isr_events'] or 'none'}")
    print(f"idle CPU of broker {r['idle_threads']['broker']} by thread, % of a core (/proc, the same window):")
    print("\n".join(r["idle_threads"]["top"]))
    if r.get("idle_controller_threads"):
        print(f"idle CPU of the controller, broker {r['idle_controller_threads']['broker']}, by thread, % of a core:")
        print("\n".join(r["idle_controller_threads"]["top"]))
    if "idle_profile" in r:
        print(f"idle profile of broker {r['idle_profile']['broker']} (py-spy, 10 s):")
        print("\n".join("  " + ln for ln in r["idle_profile"]["top"]))
    if "failover_done" not in r:
        return
    print(f"SIGTERM of the controller (1-minute load at the signal {r.get('load_at_signal', 0):.2f}), from its "
          "signal_received:")
    for k in ("cs_requested", "cs_states_written", "controlled_shutdown_done", "controller_resigned"):
        print(f"  {k:<28}{fmt_ms(r[k])}")
    for step, t in r["steps"].items():
        print(f"  step {step:<23}{fmt_ms(t)}")
    for k in ("zk_session_closing", "broker_stopped", "elected", "failover_done"):
        print(f"  {k:<28}{fmt_ms(r[k])}")
    source = "its broker's cache" if r.get("new_from_cache") else "ZooKeeper"
    applying = "yes" if r.get("new_broker_applying") else "no"
    print(f"  the new controller: load {r['new_load_ms']:.1f} ms, decide {r['new_decide_ms']:.1f} ms, write "
          f"{r['new_write_ms']:.1f} ms, the rest (the requests to the brokers) "
          f"{r['new_total_ms'] - r['new_load_ms'] - r['new_decide_ms'] - r['new_write_ms']:.1f} ms; failover "
          f"{r['new_total_ms']:.1f} ms, {r['new_states_written']} states written; the states from "
          f"{source} (its broker applying the stopping controller's LeaderAndIsr when elected: {applying})")
    print(f"  the stopping controller's state writes (count, ZooKeeper ms): {r['cs_writes']}")
    for t, sp in r["spans"].items():
        if sp:
            print(f"  its {t} lines: {sp[2]} from {sp[0]:.1f} to {sp[1]:.1f} ms")
    if "controlled_shutdown" in r:
        print(f"  controlled shutdown: {r['controlled_shutdown']}")
    print("  the stopping controller's LeaderAndIsr, each broker: (partitions, leaders, followers, arrived, applied "
          "ms from the signal)")
    for b, reqs in r.get("cs_requests", {}).items():
        print(f"    broker {b}: " + "; ".join(f"{n} ({ld}, {fl}) {a:.0f}-{d:.0f}" for n, ld, fl, a, d in reqs))
    if "failover_cpu_s" in r:
        cpu_s = r["failover_cpu_s"]
        print("  CPU seconds from the signal to the next controller's failover_done (/proc): "
              + ", ".join(f"broker {b} {v:.2f}" for b, v in cpu_s.items()) + f"; total {sum(cpu_s.values()):.2f}")
    print(f"  the new controller (broker {r['new_controller']})'s requests, each broker: (kind, partitions, "
          "arrived, applied ms from the signal)")
    for b, reqs in r["new_requests"].items():
        print(f"    broker {b}: " + "; ".join(f"{k.split('_applied')[0]} {n} {a:.0f}-{d:.0f}" for k, n, a, d in reqs))
    if r.get("new_lines"):
        print(f"  its lines from elected to done: {r['new_lines']}")
    print(f"  shutdown_timed_out: {r['shutdown_timed_out'] or 'none'}; alter_isr_failed events: {r['alter_isr_failed']}")
    if "floor" in r:
        print("\n".join(scale_floor.report(r["floor"])))
    if "new_controller_profile" in r:
        print(f"profile of the next controller, broker {r['new_controller_profile']['broker']} (py-spy, signal to "
              "its controller_failover_done):")
        print("\n".join("  " + ln for ln in r["new_controller_profile"]["top"]))
    if "failover_profile" in r:
        print(f"profile of the stopping controller, broker {r['failover_profile']['broker']} (py-spy, signal to exit):")
        print("\n".join("  " + ln for ln in r["failover_profile"]["top"]))
    if "all_profile" in r:
        print("profile of the five brokers together (py-spy" + (" --gil: the interpreter lock's holder"
                                                                if r["all_profile"]["gil"] else "") +
              ", each from the signal: the stopping one to its exit, the others to the next controller's done):")
        print("\n".join("  " + ln for ln in r["all_profile"]["top"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--window", type=float, default=20.0, help="idle CPU window, seconds (default 20)")
    ap.add_argument("--no-profile", action="store_true", help="no py-spy profile of the idle cluster")
    ap.add_argument("--profile-failover", action="store_true",
                    help="py-spy on every broker during the failover (its figures then include py-spy's cost)")
    ap.add_argument("--gil", action="store_true",
                    help="with --profile-failover: sample only the thread holding each broker's interpreter lock")
    ap.add_argument("--only", choices=["idle", "failover"],
                    help="idle: measure the idle CPU only, no failover; failover: only the SIGTERM failover, no "
                         "idle CPU window and no idle profile")
    ap.add_argument("--floor-runs", type=int, default=3,
                    help="the failover's floor (bench/scale_floor.py) this many times after each size's failover, on "
                         "its ZooKeeper (default 3; 0: none)")
    ap.add_argument("--json", type=Path, help="also write the raw figures here")
    ap.add_argument("--keep-events", type=Path, metavar="DIR",
                    help="copy each run's broker event logs (and --profile-failover's py-spy samples) to DIR/events-N")
    a = ap.parse_args()
    if a.gil and not a.profile_failover:
        ap.error("--gil samples the failover's profile: it needs --profile-failover")
    if a.only == "failover":
        a.window, a.no_profile = 0.0, True
    results = []
    with tempfile.TemporaryDirectory(prefix="kafkasim-bench-scale-") as tmp:
        for n in a.partitions:
            r = measure(Path(tmp), n, a.window, not a.no_profile, a.profile_failover, a.only != "idle",
                        a.keep_events, a.floor_runs, a.gil)
            report(r)
            results.append(r)
            sys.stdout.flush()
    if len(results) >= 2:
        lo, hi = results[0], results[-1]
        cpu_lo, cpu_hi = sum(lo["idle_cpu_pct"].values()), sum(hi["idle_cpu_pct"].values())
        if cpu_lo:
            print(f"\nidle CPU {hi['partitions']} vs {lo['partitions']} partitions: {cpu_hi:.1f}% vs {cpu_lo:.1f}% "
                  f"= {cpu_hi / cpu_lo:.2f}x (goal <= 2x: {'met' if cpu_hi <= 2 * cpu_lo else 'MISSED'})")
    if len(results) >= 2 and a.only != "idle":
        f_lo, f_hi = lo["failover_done"], hi["failover_done"]
        timed_out = hi["shutdown_timed_out"] + lo["shutdown_timed_out"]
        print(f"SIGTERM failover {hi['partitions']} vs {lo['partitions']} partitions: {f_hi:.0f} ms vs {f_lo:.0f} ms "
              f"= {f_hi / f_lo:.2f}x (goal <= 5x: {'met' if f_hi <= 5 * f_lo else 'MISSED'}); "
              f"stop steps past their deadline: {timed_out or 'none'}")
        if "floor" in lo and "floor" in hi:
            fl, fh = lo["floor"], hi["floor"]
            print(f"the floor (strict: controlled-shutdown writes + handover), median: {fh['strict']:.1f} ms vs "
                  f"{fl['strict']:.1f} ms; " + scale_floor.verdict((f_lo, f_hi), (fl["strict"], fh["strict"])))
            print(f"the floor with Kafka's read of every state: {fh['kafka']:.1f} ms vs {fl['kafka']:.1f} ms = "
                  f"{fh['kafka'] / fl['kafka']:.2f}x; kafkasim {f_hi / fh['strict']:.1f}x / {f_lo / fl['strict']:.1f}x "
                  f"the strict floor at {hi['partitions']} / {lo['partitions']}")
    if a.json:
        a.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
