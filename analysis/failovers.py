"""The failover timeline: ``judge/timeline.py``'s rows, with its rules (docs/chaos.md, "Failover timeline").

``failovers(inputs, tables)`` gives one row per (fault start, group whose
offsets partition one of the fault's brokers led at the fault's time T) and
one controller row per fault that hit the controller of time T, with the
columns of ``judge.timeline.ROW_FIELDS`` (after ``run``).  The rules, as there:

* the leader of partition P at T is the last state written for P that had
  *landed* by T (``analysis.tables.state_writes``), ties by logging time;
* detection, election and the controller failover are looked for until the
  next fault start that hits the same broker (naming it, or naming any
  ZooKeeper server); the failure that opens an unavailability window must
  complete before the next fault start of any kind; the load, the first
  commit and the end of the window are not bounded;
* a client op's completion is paired with its process's invoke (the line
  before it of that process, when it is an invoke: the ``ops`` table's
  pairs); end-of-run reads (``final``) are ignored.

How: what a failover looks at is few rows per run whatever the load (the
faults, controller elections, broker changes, the offsets topic's partition
states and loads, the groups), so those are collected in one Spark job and
the stages found from them in plain Python on the driver (``_Run``).  The
client ops, which may be millions, stay in Spark: one window over each
group's completions into which each row's instants (T and its last stage)
are merged, whose few results are collected in a second job.  The rows are
a local relation (``local_rows``).  Times are rounded as ``round(ns / 1e6,
3)``; :func:`round3` is the same rounding as a Spark expression.
"""
from __future__ import annotations

import json
import re
from typing import Any, Iterable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from analysis.local_rows import local_rows
from analysis.spark import collect_many, gathered, union_by_name
from analysis.tables import OFFSETS_TOPIC, state_writes
from judge.timeline import CAUSE_END, CAUSE_FAULT, CAUSE_NONE, END_PHASE, STOP_PHASE
from kafkacommon.hashing import partition_for

ROW_TYPES = {
    "fault": "int", "cause": "string", "kind": "string", "target": "string", "nodes": "array<string>",
    "time_ns": "bigint",
    "heal_ms": "double", "group": "string", "partition": "int", "old_leader": "int", "new_leader": "int",
    "moved": "boolean", "detect_ms": "double", "detect_by": "string", "elect_ms": "double",
    "elect_reason": "string", "load_ms": "double", "load_duration_ms": "double", "records_replayed": "bigint",
    "records": "bigint", "first_commit_ms": "double", "unavailable_ms": "double",
    "unavailable_from_ms": "double", "unavailable_to_ms": "double", "old_controller": "int",
    "new_controller": "int", "controller_failover_ms": "double",
}
FAILED_OPS = ("commit", "heartbeat", "join", "sync", "fetch-committed", "poll")
RECOVERED_OPS = ("commit", "join", "sync", "heartbeat", "fetch-committed")
NOT_FAILOVER_REASONS = ("preferred_admin", "auto_rebalance")
SHUTDOWN_KINDS = ("terminate",)


# ---------------------------------------------------------------- helpers

def ms_between(t: int | None, t0: int | None) -> float | None:
    """``round((t - t0) / 1e6, 3)``, exactly as the Python timeline computes it."""
    return None if t is None or t0 is None else round((t - t0) / 1e6, 3)


_SPLIT = 134217729.0   # 2**27 + 1: Veltkamp's split of a double into two halves of 26 bits


def round3(x: Column) -> Column:
    """Python's ``round(x, 3)`` of a double, as a Spark expression (no Python worker): the exact value of
    ``x * 1000`` rounded half to even, over 1000.  ``p = x * 1000`` in doubles is that value but for the
    rounding error ``err``, which Dekker's product gives exactly (1000 has 10 bits, each half of ``x`` 27 at
    most, so every product below is exact); ``err`` only matters when ``p`` is a tie: its sign says which
    side of the tie the exact value lies on (a tie of both is a tie: half to even, as Python)."""
    p = x * 1000.0
    c = x * _SPLIT
    hi = c - (c - x)
    lo = x - hi
    err = (hi * 1000.0 - p) + lo * 1000.0
    fl = F.floor(p).cast("double")
    k = (F.when((p - fl == 0.5) & (err > 0), fl + 1.0).when((p - fl == 0.5) & (err < 0), fl)
         .otherwise(F.rint(p)))
    return F.when(F.abs(p) < 4503599627370496.0, k / 1000.0).otherwise(p / 1000.0)   # 2**52: no fraction left


def _ms(t: Column | str, t0: Column | str = "time_ns") -> Column:
    """ms from ``t0`` to ``t``, rounded exactly as Python's ``round((t - t0) / 1e6, 3)``."""
    a = F.col(t) if isinstance(t, str) else t
    b = F.col(t0) if isinstance(t0, str) else t0
    return round3((a - b).cast("double") / 1e6)


def _nk(*values: Any) -> tuple:
    """A sort key of a struct's fields as Spark orders structs (``array_min``, ``least``): field by field, a
    null before any value."""
    return tuple((v is not None, v if v is not None else 0) for v in values)


def _least(*values: int | None) -> int | None:
    """Spark's ``least``: the smallest value not null (None: none)."""
    found = [v for v in values if v is not None]
    return min(found) if found else None


def _before(t: int, end: int | None) -> bool:
    """``t < end``, a null end being infinity."""
    return end is None or t < end


# ---------------------------------------------------------------- inputs: few rows per run, one job

_RUN_EVENTS = ("controller_elected", "controller_resigned", "broker_change", "controlled_shutdown_requested",
               "broker_stopping", "topic_created", "replicas_offline")
_INT = re.compile(r"-?[0-9]+")


def completions(ops: DataFrame) -> DataFrame:
    """Client completions, from the paired ``ops`` table, ``final`` ones dropped: run, index (the
    completion's), time, type, f, group."""
    return ops.where(F.col("complete_index").isNotNull() & ~F.col("final") & F.col("group").isNotNull()).select(
        "run", F.col("complete_index").alias("index"), F.col("complete_ns").alias("time"), "type", "f", "group")


def _ops(inputs, tables) -> DataFrame:
    ops = (tables or {}).get("ops")
    if ops is None:
        from analysis.ops_tables import build_ops_tables
        ops = build_ops_tables(inputs)["ops"]
    return ops


def _stage_ops(comp: DataFrame) -> DataFrame:
    """The completions a stage can be made of: ok commits, joins, syncs, heartbeats and fetch-committed, and
    failed (fail/info) ones of those and of polls.  Ok polls, the bulk of a group's ops, play no part."""
    return comp.where(((F.col("type") == "ok") & F.col("f").isin(*RECOVERED_OPS))
                      | (F.col("type").isin("fail", "info") & F.col("f").isin(*FAILED_OPS)))


def _end_marks(inputs, tables) -> DataFrame:
    """Per run (with marks): ``_end_ns`` and ``_stop_ns``, the runner's end-phase marks (the first nemesis line
    of ``value.phase`` ``end``, ``stop``).  From ``tables["nemesis"]`` (``ops_tables.nemesis_lines``: few
    rows) when given, else from the history."""
    nem = (tables or {}).get("nemesis")
    if nem is None:
        nem = inputs.ops.where(F.col("process") == "nemesis")
    phase = F.col("value.phase")
    return (nem.where(phase.isin(END_PHASE, STOP_PHASE)).groupBy("run")
            .agg(F.min(F.when(phase == END_PHASE, F.col("time"))).alias("_end_ns"),
                 F.min(F.when(phase == STOP_PHASE, F.col("time"))).alias("_stop_ns")))


def _collected(inputs, tables, ops: DataFrame) -> dict[str, list[dict]]:
    """The few rows the timeline reads, of every run, in one job: the fault starts, the events of the controller
    and the brokers it looks at (and the coordinator loads), the offsets topic's partition states with their
    landing times, the end-phase marks and the groups."""
    f = (tables or {}).get("faults")
    if f is None:
        from analysis.tables import faults
        f = faults(inputs)
    ev = inputs.parsed_events()
    return collect_many({
        "faults": f.select("run", "fault", "kind", "target", "nodes", "start_ns", "heal_ns"),
        "events": ev.where(F.col("type").isin(*_RUN_EVENTS, "coordinator_loaded")).select(
            "run", "broker", "mono_ns", "type", "dead", "bounced", "broker_id", "topic", "partitions", "replicas",
            "partition", "leader_epoch", "records", "replayed", "duration_ms"),
        "states": state_writes(inputs).where(F.col("topic") == OFFSETS_TOPIC).select(
            "run", "partition", "landed_ns", "mono_ns", "broker", "leader", "leader_epoch", "reason"),
        "marks": _end_marks(inputs, tables),
        "groups": ops.where(F.col("group").isNotNull()).select("run", "group").distinct()})


# ---------------------------------------------------------------- the stages, per run, on the driver

def _brokers(nodes: Iterable[str | None]) -> list[int]:
    """The int nodes (as Spark's cast of ``^-?[0-9]+$`` strings to int: out of range, none)."""
    out = []
    for n in nodes:
        if n is not None and _INT.fullmatch(n) and -2**31 <= int(n) < 2**31:
            out.append(int(n))
    return out


class _Run:
    """One run's events, indexed as the timeline reads them.  A state or an election is a tuple whose leading
    fields are its order: a state ``(landed, mono, broker, leader, epoch, reason)``, a load ``(t, broker, epoch,
    duration_ms, replayed, records)``."""

    def __init__(self) -> None:
        self.has_events = False              # any event of _RUN_EVENTS: a run without gets no rows
        self.ctl: list[tuple[int, int, bool]] = []    # (t, broker, elected)
        self.bc: list[tuple[int, list, list]] = []    # (t, dead, bounced)
        self.csr: list[tuple[int, int | None]] = []   # (t, broker_id)
        self.ro: list[tuple[int, int | None, list]] = []   # (t, broker_id, replicas)
        self.stops: list[tuple[int, int]] = []        # (t, broker)
        self.created: list[tuple[int, int]] = []      # (t, partitions) of the offsets topic
        self.states: dict[int, list[tuple]] = {}
        self.loads: dict[int, list[tuple]] = {}
        self.faults: list[dict] = []
        self.every: list[tuple[int, list[int], bool]] = []   # every fault start: (t, brokers, zk)
        self.end_ns: int | None = None
        self.stop_ns: int | None = None
        self.groups: list[str] = []

    @property
    def n(self) -> int | None:
        return min(self.created)[1] if self.created else None

    def add_event(self, e: dict) -> None:
        t, kind = e["mono_ns"], e["type"]
        if kind == "coordinator_loaded":
            if e["partition"] is not None:
                self.loads.setdefault(e["partition"], []).append(
                    (t, e["broker"], e["leader_epoch"], e["duration_ms"], e["replayed"], e["records"]))
            return
        self.has_events = True
        if kind in ("controller_elected", "controller_resigned"):
            self.ctl.append((t, e["broker"], kind == "controller_elected"))
        elif kind == "broker_change":
            self.bc.append((t, e["dead"] or [], e["bounced"] or []))
        elif kind == "controlled_shutdown_requested":
            self.csr.append((t, e["broker_id"]))
        elif kind == "replicas_offline":
            self.ro.append((t, e["broker_id"], e["replicas"] or []))
        elif kind == "broker_stopping":
            self.stops.append((t, e["broker"]))
        elif kind == "topic_created" and e["topic"] == OFFSETS_TOPIC and e["partitions"] is not None:
            self.created.append((t, e["partitions"]))

    # -- as the Spark expressions of the runner's rules did (``judge.timeline``)

    def any_end(self, t0: int) -> int | None:
        return _least(*(t for t, _, _ in self.every if t > t0))

    def end_for(self, fault: dict, broker: int) -> int | None:
        """The end of a fault's window for ``broker``: the first of the next fault start after T hitting it
        (naming it, or any ZooKeeper server), the runner's ``stop`` mark, and (unless the fault is a SIGTERM)
        the broker's next clean stop.  None: none (infinity)."""
        t0 = fault["start_ns"]
        nxt = _least(*(t for t, brokers, zk in self.every if t > t0 and (broker in brokers or zk)))
        stop = None
        if fault["kind"] not in SHUTDOWN_KINDS:
            stop = _least(*(t for t, b in self.stops if t > t0 and b == broker))
        return _least(nxt, self.stop_ns, stop)

    def election_after(self, t0: int, end: int | None, not_by: int | None) -> tuple[int, int] | None:
        """The first ``controller_elected`` after T, before ``end``, by another broker than ``not_by``."""
        if not_by is None:
            return None
        found = [(t, b) for t, b, elected in self.ctl if elected and t > t0 and _before(t, end) and b != not_by]
        return min(found) if found else None

    def controller_at(self, t0: int) -> int | None:
        """The last ``controller_elected`` at or before T, unless its broker resigned since."""
        found = [(t, b) for t, b, elected in self.ctl if elected and t <= t0]
        if not found:
            return None
        t_el, b_el = max(found)
        gone = any(not elected and b == b_el and t_el < t <= t0 for t, b, elected in self.ctl)
        return None if gone else b_el

    def load_after(self, partition: int, el: tuple | None) -> tuple | None:
        """The new leader's ``coordinator_loaded`` for the partition at or after the election ``el`` landed."""
        if el is None:
            return None
        landed, _, _, leader, epoch, _ = el
        found = [ld for ld in self.loads.get(partition, ()) if ld[0] >= landed and ld[1] == leader
                 and (epoch is None or ld[2] is None or ld[2] >= epoch)]
        return min(found, key=lambda ld: _nk(*ld)) if found else None


def _runs(got: dict[str, list[dict]]) -> dict[str, _Run]:
    runs: dict[str, _Run] = {}

    def of(name: str) -> _Run:
        return runs.setdefault(name, _Run())
    for e in got["events"]:
        of(e["run"]).add_event(e)
    for s in got["states"]:
        of(s["run"]).states.setdefault(s["partition"], []).append(
            (s["landed_ns"], s["mono_ns"], s["broker"], s["leader"], s["leader_epoch"], s["reason"]))
    for f in got["faults"]:
        r = of(f["run"])
        nodes = f["nodes"] or []
        f["brokers"] = _brokers(nodes)
        f["zk"] = any(n is not None and n.startswith("zk") for n in nodes)
        r.faults.append(f)
        r.every.append((f["start_ns"], f["brokers"], f["zk"]))
    for m in got["marks"]:
        of(m["run"]).end_ns, of(m["run"]).stop_ns = m["_end_ns"], m["_stop_ns"]
    for g in got["groups"]:
        of(g["run"]).groups.append(g["group"])
    return runs


def _fault_row(run: str, f: dict) -> dict:
    return {"run": run, "fault": f["fault"], "cause": CAUSE_FAULT, "kind": f["kind"], "target": f["target"],
            "nodes": f["nodes"] or [], "time_ns": f["start_ns"], "heal_ms": ms_between(f["heal_ns"], f["start_ns"])}


def _detect(cands: list[tuple[int | None, str]], last: bool = False) -> tuple[int, str] | None:
    found = [c for c in cands if c[0] is not None]
    return (max(found) if last else min(found)) if found else None


def _fault_rows(name: str, r: _Run) -> tuple[list[dict], list[dict]]:
    """The controller rows, and the group rows up to their stages (``_detect`` (t, by), ``_el`` the state of the
    move, ``_load``, ``_any_end``), of the run's fault starts that name a broker."""
    ctl_rows, group_rows = [], []
    n = r.n
    for f in r.faults:
        if not r.has_events or not f["brokers"]:
            continue
        t0, brokers = f["start_ns"], f["brokers"]
        controller = r.controller_at(t0)
        any_end = r.any_end(t0)
        if controller is not None and controller in brokers:
            won = r.election_after(t0, r.end_for(f, controller), controller)
            ctl_rows.append({**_fault_row(name, f), "moved": won is not None, "old_controller": controller,
                             "new_controller": won[1] if won else None,
                             "controller_failover_ms": ms_between(won[0], t0) if won else None})
        if n is None or n <= 0:
            continue
        for group in r.groups:
            p = partition_for(group, n)
            states = r.states.get(p, [])
            at = max((s for s in states if s[0] <= t0), key=lambda s: _nk(*s), default=None)
            old = at[3] if at is not None else None
            if old is None or old not in brokers:
                continue
            end = r.end_for(f, old)
            name_p = f"{OFFSETS_TOPIC}-{p}"
            bc = _least(*(t for t, dead, bounced in r.bc if t > t0 and _before(t, end)
                          and (old in dead or old in bounced)))
            csr = (_least(*(t for t, b in r.csr if t > t0 and _before(t, end) and b == old))
                   if f["kind"] in SHUTDOWN_KINDS else None)
            ce = None
            if controller is not None and controller in brokers:
                won = r.election_after(t0, end, controller)
                ce = won[0] if won else None
            ro = _least(*(t for t, b, replicas in r.ro if t > t0 and _before(t, end) and b == old
                          and name_p in replicas))
            # the partition's first change of leader after T: the fault's election if a failover after detection
            change = min((s for s in states if s[0] > t0 and _before(s[0], end) and s[3] is not None and s[3] >= 0
                          and s[3] != old), key=lambda s: _nk(*s), default=None)
            detect = _detect([(bc, "broker_change"), (csr, "controlled_shutdown_requested"),
                              (ro, "replicas_offline"), (ce, "controller_elected")])
            el = None
            if (detect is not None and change is not None and change[0] >= detect[0]
                    and (change[5] is None or change[5] not in NOT_FAILOVER_REASONS)):
                el = change
            group_rows.append({**_fault_row(name, f), "group": group, "partition": p, "old_leader": old,
                               "_detect": detect, "_el": el, "_load": r.load_after(p, el), "_any_end": any_end})
    return ctl_rows, group_rows


def _unattributed_rows(name: str, r: _Run, taken: set) -> list[dict]:
    """The rows of the leader moves of a group's offsets partition that no fault row took (``taken``: (run,
    partition, landed, mono, broker)), up to their stages, as in ``judge.timeline``: origin at the controller's
    last detection of the old leader since its election (else at the move), ``cause`` ``end phase`` after the
    ``end`` mark (``stop`` without one), else ``none in schedule``."""
    n = r.n
    if not r.has_events or n is None or n <= 0:
        return []
    by_partition: dict[int, list[str]] = {}
    for g in r.groups:
        by_partition.setdefault(partition_for(g, n), []).append(g)
    end_mark = r.end_ns if r.end_ns is not None else r.stop_ns
    rows = []
    for p, states in r.states.items():
        old = since = None
        for s in sorted(states, key=lambda s: _nk(*s)):
            landed, mono, broker, leader, _, reason = s
            change = leader is not None and leader >= 0 and (old is None or leader != old)
            if (change and old is not None and (reason is None or reason not in NOT_FAILOVER_REASONS)
                    and (name, p, landed, mono, broker) not in taken and p in by_partition):
                name_p = f"{OFFSETS_TOPIC}-{p}"

                def inside(t: int) -> bool:
                    return since < t <= landed
                detect = _detect([
                    (max((t for t, dead, bounced in r.bc if inside(t) and (old in dead or old in bounced)),
                         default=None), "broker_change"),
                    (max((t for t, b in r.csr if inside(t) and b == old), default=None),
                     "controlled_shutdown_requested"),
                    (max((t for t, b, replicas in r.ro if inside(t) and b == old and name_p in replicas),
                         default=None), "replicas_offline"),
                    (max((t for t, b, elected in r.ctl if elected and inside(t) and b != old), default=None),
                     "controller_elected")], last=True)
                t0 = detect[0] if detect is not None else landed
                cause = CAUSE_END if end_mark is not None and landed > end_mark else CAUSE_NONE
                for g in by_partition[p]:
                    rows.append({"run": name, "fault": None, "cause": cause, "kind": None, "target": None,
                                 "nodes": [], "time_ns": t0, "heal_ms": None, "group": g, "partition": p,
                                 "old_leader": old, "_detect": detect, "_el": s, "_load": r.load_after(p, s),
                                 "_any_end": r.any_end(t0)})
            if leader is not None and leader >= 0:
                if change:
                    since = landed
                old = leader
    return rows


# ---------------------------------------------------------------- the client ops, in Spark

_PROBES = "run string, `group` string, fault int, time_ns bigint, _floor bigint"


def _group_stages(spark, rows: list[dict], comp: DataFrame) -> dict[tuple, tuple]:
    """Per (run, group, fault, time_ns) of ``rows``: the first failed op after T, as (t, back: the first
    recovery after it), and the first ok commit after ``_floor`` (the row's last stage).  By one window over each
    group's completions with the rows' instants (T and ``_floor``) merged in (ops before an instant they share);
    its few rows collected."""
    if not rows:
        return {}
    keys = local_rows(spark, sorted({(r["run"], r["group"], r["fault"], r["time_ns"], r["_floor"]) for r in rows},
                                    key=lambda k: _nk(*k)), _PROBES)
    ops = comp.select("run", "group", "time", "index", F.lit(0).alias("_probe"), "type", "f",
                      F.lit(None).cast("int").alias("fault"), F.lit(None).cast("bigint").alias("_t0"),
                      F.lit(None).cast("int").alias("_pk"))

    def probes(at: str, pk: int) -> DataFrame:
        return keys.select("run", "group", F.col(at).alias("time"), F.lit(None).cast("bigint").alias("index"),
                           F.lit(1).alias("_probe"), F.lit(None).cast("string").alias("type"),
                           F.lit(None).cast("string").alias("f"), "fault", F.col("time_ns").alias("_t0"),
                           F.lit(pk).alias("_pk"))
    # reversed order and a growing frame: last(...) is "the nearest such row after this one" (a linear pass)
    after = (Window.partitionBy("run", "group")
             .orderBy(F.col("time").desc(), F.col("_probe").desc(), F.col("index").desc())
             .rowsBetween(Window.unboundedPreceding, -1))
    is_op = F.col("_probe") == 0
    recovered = F.when(is_op & (F.col("type") == "ok") & F.col("f").isin(*RECOVERED_OPS), F.col("time"))
    commit = F.when(is_op & (F.col("type") == "ok") & (F.col("f") == "commit"), F.col("time"))
    failed = F.when(is_op & F.col("type").isin("fail", "info") & F.col("f").isin(*FAILED_OPS),
                    F.struct(F.col("time").alias("t"), F.col("_back").alias("back")))
    merged = (union_by_name([ops, probes("time_ns", 0), probes("_floor", 1)])
              .withColumns({"_back": F.last(recovered, ignorenulls=True).over(after),
                            "_commit_t": F.last(commit, ignorenulls=True).over(after)})
              .withColumn("_failed", F.last(failed, ignorenulls=True).over(after)))
    found = merged.where(F.col("_probe") == 1).groupBy("run", "group", "fault", "_t0").agg(
        F.max(F.when(F.col("_pk") == 0, F.col("_failed"))).alias("_failed"),
        F.max(F.when(F.col("_pk") == 1, F.col("_commit_t"))).alias("_commit_t"))
    return {(x["run"], x["group"], x["fault"], x["_t0"]): (x["_failed"], x["_commit_t"])
            for x in gathered(found).collect()}


def _staged(row: dict, found: dict[tuple, tuple]) -> dict:
    """A group row's columns from its stages and what its group's ops showed."""
    t0, detect, el, load = row["time_ns"], row["_detect"], row["_el"], row["_load"]
    failed, commit_t = found.get((row["run"], row["group"], row["fault"], t0), (None, None))
    out = {k: v for k, v in row.items() if not k.startswith("_")}
    hit = failed is not None and _before(failed["t"], row["_any_end"])
    out.update(
        new_leader=el[3] if el else None, moved=el is not None,
        detect_ms=ms_between(detect[0], t0) if detect else None, detect_by=detect[1] if detect else None,
        elect_ms=ms_between(el[0], t0) if el else None, elect_reason=el[5] if el else None,
        load_ms=ms_between(load[0], t0) if load else None, load_duration_ms=load[3] if load else None,
        records_replayed=load[4] if load else None, records=load[5] if load else None,
        first_commit_ms=ms_between(commit_t, t0),
        unavailable_ms=ms_between(failed["back"], failed["t"]) if hit else 0.0,
        unavailable_from_ms=ms_between(failed["t"], t0) if hit else None,
        unavailable_to_ms=ms_between(failed["back"], t0) if hit else None)
    return out


def failovers(inputs, tables: dict[str, DataFrame] | None = None) -> DataFrame:
    """The ``failovers`` table, in time order; within a fault the controller row first, then groups by name;
    unattributed moves (``fault`` null) before the fault rows of the same instant.  ``tables`` may hold
    ``faults``, ``ops`` and ``nemesis`` (``ops_tables.nemesis_lines``; built from ``inputs`` when not).
    Two jobs: the few rows it reads, and the first failure and commit of each group row from the client ops.

    Runs whose offsets topic size is unknown (no ``topic_created`` for it) get no group rows (the Python
    timeline raises instead)."""
    spark = inputs.ops.sparkSession
    ops = _ops(inputs, tables)
    runs = _runs(_collected(inputs, tables, ops))
    out: list[dict] = []
    pre: list[dict] = []
    for name, r in runs.items():
        ctl_rows, group_rows = _fault_rows(name, r)
        out += ctl_rows
        taken = {(name, row["partition"], *row["_el"][:3]) for row in group_rows if row["_el"] is not None}
        pre += group_rows + _unattributed_rows(name, r, taken)
    for row in pre:
        row["_floor"] = max(v for v in (row["time_ns"], row["_detect"] and row["_detect"][0],
                                        row["_el"] and row["_el"][0], row["_load"] and row["_load"][0])
                            if v is not None)
    found = _group_stages(spark, pre, _stage_ops(completions(ops)))
    out += [_staged(row, found) for row in pre]
    out.sort(key=lambda x: (x["run"], x["time_ns"], _nk(x["fault"]), _nk(x.get("group"))))
    # ``nodes`` as its JSON text (a local relation's values are plain), parsed back by the projection above it
    types = {**ROW_TYPES, "nodes": "string"}
    schema = ", ".join(["run string"] + [f"`{c}` {t}" for c, t in types.items()])
    rows = local_rows(spark, [(x["run"], *(json.dumps(x[c]) if c == "nodes" else x.get(c) for c in ROW_TYPES))
                              for x in out], schema)
    return rows.select("run", *[F.from_json("nodes", ROW_TYPES["nodes"]).alias(c) if c == "nodes" else F.col(c)
                                for c in ROW_TYPES])
