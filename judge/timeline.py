"""The failover timeline of a chaos run: per fault, and per consumer group whose coordinator it hit.

Inputs are the run's history (``history.jsonl``: client operations and nemesis
faults, see docs/chaos.md) and every broker's event log merged on ``mono_ns``
(docs/events.md). Both carry ``CLOCK_MONOTONIC`` ns, so a fault's ``time`` and
the brokers' ``mono_ns`` are on one clock. Everything here is pure: lists of
dicts in, lists of dicts (and text) out.

For each fault start at time T, a row per group G whose offsets partition
P = partition_for(G, n) was led at T by one of the fault's brokers, with the
stages as ms from T (3 decimals; None when the stage did not happen). A row's
stages are always in order: detect <= elect <= load <= first commit.

``detect_ms``
    The controller learned that the fault took the old leader L away: the
    first, after T, of a ``broker_change`` with L in ``dead`` or ``bounced``
    (L lost its session, or restarted); a ``controlled_shutdown_requested``
    with ``broker_id`` L, for a ``terminate`` fault only (no other fault makes
    a broker shut down); a ``replicas_offline`` with ``broker_id`` L whose
    ``replicas`` list P (the log directory holding L's replica of P failed:
    a disk fault); or, when the same fault hit the controller of time T,
    a ``controller_elected`` by another broker (the new controller learns by
    winning). ``detect_by`` names which.
``elect_ms``
    The first state written for (__consumer_offsets, P) after T whose leader
    is >= 0 and not L, timed at the write's landing (see "Write times"), if
    it landed at or after the detection and is a failover (moves by
    ``preferred_admin`` and ``auto_rebalance`` are not). ``moved`` says
    whether there was one. So a pause shorter than the session moves nothing
    unless the broker's session did expire (the controller's ``broker_change``).
``load_ms``
    The new leader's ``coordinator_loaded`` for P at or after the election
    (``records_replayed`` = its ``replayed``, ``records`` = its ``records``,
    ``load_duration_ms`` = its ``duration_ms``).
``first_commit_ms``
    The first ``ok`` commit of G completing after T and after every earlier
    stage the row has (after the load, when the coordinator moved); an op
    invoked before then counts if it completed after.
``unavailable_ms``
    From the first failed (``fail``/``info``) commit, heartbeat, join, sync,
    fetch-committed or poll of G completing after T, to the first ``ok``
    commit, join, sync, heartbeat or fetch-committed of G completing after
    that failure (``unavailable_from_ms``/``unavailable_to_ms`` are those two
    instants, from T). 0 when no such op failed; None when it never recovered.

A fault that hit the controller of time T also yields one row with group
None, carrying only the controller stage: ``controller_failover_ms``, T to the
next ``controller_elected`` by another broker.

Moves no fault explains
    Every leader move of a group's offsets partition (as ``elect_ms`` counts
    them) that no fault row took gets a row per group of that partition, with
    ``fault`` None and ``cause`` ``end phase`` (it landed after the runner's
    ``end`` mark) or ``none in schedule``. Its origin (``time_ns``) is the
    controller's last detection of the old leader (as above, any kind) since
    that leader's election, up to the move; else the move itself. Fault rows
    have ``cause`` ``fault``.

Write times
    The leader at T is the latest state written for the partition whose write
    had landed by T. A ``partition_state_written`` lands at the
    ``mono_ns_written`` of its enclosing ``partition_states_written`` (the next
    one logged by the same broker); a line with none uses its own ``mono_ns``.

Windows (overlapping faults, the end phase)
    Leadership stages (detect, elect, controller failover) of fault F for a
    broker are looked for until the first of: the next fault start that hits
    the broker (its nodes name the broker, or name any ZooKeeper server: a
    ZooKeeper fault can reach every broker); the runner's ``stop`` mark (it
    stops the brokers, after the final reads and the drain); and, unless F is
    a ``terminate``, the broker's next ``broker_stopping`` (a clean stop F did
    not cause). So a short pause does not inherit the election of a later kill,
    nor the end phase's controlled shutdown. The first failure of the
    unavailability window must complete before the next fault start of any
    kind. The new leader's load, the first commit and the end of the
    unavailability window are not bounded.

The runner's marks are nemesis lines of the history with ``value.phase``
``end`` (the workload stops, every fault healed) and ``stop``; a history
without them (older runs) has no end phase.

Not produced: faults naming only ZooKeeper servers; faults whose brokers led
no group's partition at T and weren't the controller; groups whose partition
had no recorded leader at T.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from kafkacommon.hashing import partition_for
from zk.paths import OFFSETS_TOPIC

#: The per-row stages summarize() reports, in table order.
STAGES = ("detect_ms", "elect_ms", "load_ms", "first_commit_ms", "unavailable_ms", "controller_failover_ms")

#: Ops of a group whose failure opens an unavailability window.
FAILED_OPS = frozenset({"commit", "heartbeat", "join", "sync", "fetch-committed", "poll"})
#: Ops of a group whose success closes it (a poll proves nothing about the coordinator).
RECOVERED_OPS = frozenset({"commit", "join", "sync", "heartbeat", "fetch-committed"})
#: Leader moves that are not failovers.
NOT_FAILOVER_REASONS = frozenset({"preferred_admin", "auto_rebalance"})
#: The only fault kind that makes a broker ask for a controlled shutdown (SIGTERM).
SHUTDOWN_KINDS = frozenset({"terminate"})
#: ``cause`` of a row: a fault of the schedule; a move during the run's end phase; a move no fault explains.
CAUSE_FAULT, CAUSE_END, CAUSE_NONE = "fault", "end phase", "none in schedule"
#: ``value.phase`` of the runner's end-phase marks in the history (nemesis lines, ``f`` the same word):
#: ``end`` when it stops the workload (every fault healed), ``stop`` when it stops the brokers.
END_PHASE, STOP_PHASE = "end", "stop"

ROW_FIELDS = (
    "fault", "cause", "kind", "target", "nodes", "time_ns", "heal_ms",
    "group", "partition", "old_leader", "new_leader", "moved",
    "detect_ms", "detect_by", "elect_ms", "elect_reason",
    "load_ms", "load_duration_ms", "records_replayed", "records",
    "first_commit_ms", "unavailable_ms", "unavailable_from_ms", "unavailable_to_ms",
    "old_controller", "new_controller", "controller_failover_ms",
)

_INF = math.inf


def ms_since(t_ns: int | None, t0_ns: int) -> float | None:
    return None if t_ns is None else round((t_ns - t0_ns) / 1e6, 3)


def _is_broker(node: Any) -> bool:
    return isinstance(node, int) and not isinstance(node, bool)


def first_of(items: Iterable[dict], pred: Callable[[dict], bool]) -> dict | None:
    for item in items:
        if pred(item):
            return item
    return None


# ---------------------------------------------------------------- the history

@dataclass(frozen=True)
class _Fault:
    id: Any
    kind: str | None
    target: str | None
    nodes: tuple
    brokers: frozenset
    zk: bool
    time: int
    heal: int | None

    def hits(self, broker: int) -> bool:
        return broker in self.brokers or self.zk


class TimelineHistory:
    """Fault starts (with their heals), client completions, and the run's groups."""

    def __init__(self, ops: Sequence[dict]) -> None:
        starts: list[tuple[int, dict]] = []
        heals: list[tuple[int, dict]] = []
        self.completions: list[dict] = []
        self.groups: set[str] = set()
        open_ops: dict[Any, dict] = {}
        #: The runner's end phase: ``end`` when it stops the workload, ``stop`` when it stops the brokers.
        self.end_ns: int | None = None
        self.stop_ns: int | None = None
        for pos, op in enumerate(ops):
            if op.get("process") == "nemesis":
                value = op.get("value") or {}
                if value.get("phase") == "start":
                    starts.append((pos, op))
                elif value.get("phase") == "heal":
                    heals.append((pos, op))
                elif value.get("phase") == END_PHASE and self.end_ns is None:
                    self.end_ns = op["time"]
                elif value.get("phase") == STOP_PHASE and self.stop_ns is None:
                    self.stop_ns = op["time"]
                continue
            if op.get("group") is not None:
                self.groups.add(op["group"])
            if op.get("type") == "invoke":
                open_ops[op.get("process")] = op
                continue
            inv = open_ops.pop(op.get("process"), None) or {}
            if op.get("final") or inv.get("final"):
                continue
            self.completions.append({
                "time": op["time"], "type": op.get("type"),
                "f": op.get("f") or inv.get("f"),
                "group": op.get("group") if op.get("group") is not None else inv.get("group"),
                "node": op.get("node"), "error": op.get("error"),
                "inv_time": inv.get("time"), "offsets": (op.get("value") or {}).get("offsets")
                if isinstance(op.get("value"), dict) else None})
        self.faults: list[_Fault] = []
        for pos, op in starts:
            value = op["value"]
            nodes = tuple(value.get("nodes") or ())
            heal = first_of((h for p, h in heals if p > pos),
                          lambda h: h["value"].get("fault") == value.get("fault"))
            self.faults.append(_Fault(
                id=value.get("fault"), kind=value.get("kind", op.get("f")), target=value.get("target"),
                nodes=nodes, brokers=frozenset(n for n in nodes if _is_broker(n)),
                zk=any(isinstance(n, str) and n.startswith("zk") for n in nodes), time=op["time"],
                heal=heal["time"] if heal else None))


# ----------------------------------------------------------------- the events

class TimelineEvents:
    """The events this report reads, indexed; partition states carry their landing time as ``_landed``."""

    def __init__(self, events: Iterable[dict], topic: str = OFFSETS_TOPIC, load_event: str = "coordinator_loaded") -> None:
        """``topic``: whose partitions' states are kept (the offsets topic, or ``__transaction_state`` for the
        transaction coordinators); ``load_event``: the coordinator's load events kept in ``loads``."""
        evs = sorted(events, key=lambda e: e["mono_ns"])  # stable: ties keep their merged order
        self.offsets_partitions: int | None = None
        self.states: dict[int, list[dict]] = {}
        self.controller_log: list[tuple[int, str, int]] = []
        self.broker_changes: list[dict] = []
        self.shutdown_requests: list[dict] = []
        self.offline_replicas: list[dict] = []      # replicas_offline: a log directory failed
        self.stops: list[tuple[int, int]] = []      # (mono_ns, broker): a clean stop (SIGTERM) began
        self.loads: list[dict] = []
        pending: dict[int, list[dict]] = {}
        states: list[dict] = []
        for e in evs:
            t = e.get("type")
            if t == "partition_state_written":
                s = dict(e, _landed=e["mono_ns"])
                pending.setdefault(e["broker"], []).append(s)
                if e.get("topic") == topic:
                    states.append(s)
            elif t == "partition_states_written":
                written = e.get("mono_ns_written")
                for s in pending.pop(e["broker"], []):
                    if isinstance(written, int):
                        s["_landed"] = written
            elif t == "topic_created" and e.get("topic") == OFFSETS_TOPIC and self.offsets_partitions is None:
                self.offsets_partitions = e.get("partitions")
            elif t == "controller_elected":
                self.controller_log.append((e["mono_ns"], "elected", e["broker"]))
            elif t == "controller_resigned":
                self.controller_log.append((e["mono_ns"], "resigned", e["broker"]))
            elif t == "broker_change":
                self.broker_changes.append(e)
            elif t == "controlled_shutdown_requested":
                self.shutdown_requests.append(e)
            elif t == "replicas_offline":
                self.offline_replicas.append(e)
            elif t == "broker_stopping":
                self.stops.append((e["mono_ns"], e["broker"]))
            elif t == load_event:
                self.loads.append(e)
        for s in sorted(states, key=lambda s: s["_landed"]):
            self.states.setdefault(s["partition"], []).append(s)

    def leader_at(self, partition: int, t_ns: int) -> int | None:
        leader = None
        for s in self.states.get(partition, ()):
            if s["_landed"] > t_ns:
                break
            leader = s.get("leader")
        return leader

    def controller_at(self, t_ns: int) -> int | None:
        current = None
        for t, what, broker in self.controller_log:
            if t > t_ns:
                break
            if what == "elected":
                current = broker
            elif broker == current:
                current = None
        return current

    def election_after(self, t_ns: int, end: float, not_by: int) -> dict | None:
        for t, what, broker in self.controller_log:
            if t_ns < t < end and what == "elected" and broker != not_by:
                return {"mono_ns": t, "broker": broker}
        return None


# ------------------------------------------------------------------ the rows

def _blank_row(fault: _Fault) -> dict:
    row: dict[str, Any] = dict.fromkeys(ROW_FIELDS)
    row.update(fault=fault.id, cause=CAUSE_FAULT, kind=fault.kind, target=fault.target, nodes=list(fault.nodes),
               time_ns=fault.time, heal_ms=ms_since(fault.heal, fault.time), moved=False)
    return row


def detections(ev: TimelineEvents, old: int, lo: int, hi: float, *, shutdown: bool, elected_not_by: int | None,
               hi_inclusive: bool = False, partition: int | None = None,
               topic: str = OFFSETS_TOPIC) -> list[tuple[int, str]]:
    """The ways the controller learned that ``old`` was gone, in (lo, hi): ``broker_change`` (``old`` dead or
    bounced: it lost its session or restarted), ``controlled_shutdown_requested`` (only with ``shutdown``: a
    SIGTERM), ``replicas_offline`` of ``old`` listing ``topic``'s ``partition`` (the offsets topic's unless
    told; its log directory failed),
    ``controller_elected`` by another broker than ``elected_not_by`` (the new controller learns by
    winning; None: not looked for).  ``hi_inclusive`` makes it (lo, hi]."""
    def inside(t: int) -> bool:
        return lo < t and (t <= hi if hi_inclusive else t < hi)

    found = [(e["mono_ns"], "broker_change") for e in ev.broker_changes if inside(e["mono_ns"])
             and (old in (e.get("dead") or ()) or old in (e.get("bounced") or ()))]
    if shutdown:
        found += [(e["mono_ns"], "controlled_shutdown_requested") for e in ev.shutdown_requests
                  if inside(e["mono_ns"]) and e.get("broker_id") == old]
    if partition is not None:
        name = f"{topic}-{partition}"
        found += [(e["mono_ns"], "replicas_offline") for e in ev.offline_replicas
                  if inside(e["mono_ns"]) and e.get("broker_id") == old and name in (e.get("replicas") or ())]
    if elected_not_by is not None:
        found += [(t, "controller_elected") for t, what, broker in ev.controller_log
                  if inside(t) and what == "elected" and broker != elected_not_by]
    return found


def is_failover(s: dict, old: int | None) -> bool:
    return s.get("leader", -1) >= 0 and s.get("leader") != old and s.get("reason") not in NOT_FAILOVER_REASONS


def _load_after(ev: TimelineEvents, elected: dict) -> dict | None:
    """The new leader's ``coordinator_loaded`` for the partition, at or after its election landed."""
    new, epoch = elected["leader"], elected.get("leader_epoch")
    return first_of(ev.loads, lambda e: e["mono_ns"] >= elected["_landed"] and e["broker"] == new
                  and e.get("partition") == elected["partition"]
                  and (epoch is None or e.get("leader_epoch") is None or e["leader_epoch"] >= epoch))


def _observed_commit(mine: list[dict], floor: int) -> dict | None:
    """For a group whose commits are only observed (the user's application, polled with OffsetFetch): the
    first ok fetch-committed F, invoked after ``floor``, whose offsets differ from those of an ok fetch invoked
    after ``floor`` and completed before F was invoked.  A commit landed between the two, after ``floor``."""
    base = None
    for c in mine:
        if c["f"] != "fetch-committed" or c["type"] != "ok" or (c["inv_time"] or 0) <= floor:
            continue
        if base is not None and base["time"] < c["inv_time"] and c["offsets"] != base["offsets"]:
            return c
        if base is None or base["time"] < c["inv_time"]:
            base = c
    return None


def _after_stages(row: dict, group: str, t0: int, detect_ns: int | None, elected: dict | None,
                  loaded: dict | None, any_end: float, hist: TimelineHistory, observed: bool = False) -> None:
    """Fills the move's stages, the first commit (after every earlier stage: the stages are in order) and the
    unavailability window (from t0).  ``observed``: the group's commits are not in the history, only seen by
    fetches (:func:`_observed_commit`)."""
    floor = t0
    if detect_ns is not None:
        floor = max(floor, detect_ns)
    if elected is not None:
        floor = max(floor, elected["_landed"])
        row.update(moved=True, new_leader=elected["leader"], elect_ms=ms_since(elected["_landed"], t0),
                   elect_reason=elected.get("reason"))
    if loaded is not None:
        floor = max(floor, loaded["mono_ns"])
        row.update(load_ms=ms_since(loaded["mono_ns"], t0), load_duration_ms=loaded.get("duration_ms"),
                   records_replayed=loaded.get("replayed"), records=loaded.get("records"))

    mine = [c for c in hist.completions if c["group"] == group]
    if observed:
        commit = _observed_commit(mine, floor)
    else:
        commit = first_of(mine, lambda c: c["time"] > floor and c["type"] == "ok" and c["f"] == "commit")
    row["first_commit_ms"] = ms_since(commit["time"], t0) if commit else None

    failed_at = next((i for i, c in enumerate(mine) if t0 < c["time"] < any_end
                      and c["type"] in ("fail", "info") and c["f"] in FAILED_OPS), None)
    if failed_at is None:
        row["unavailable_ms"] = 0.0
    else:
        failed = mine[failed_at]
        back = first_of(mine[failed_at + 1:], lambda c: c["type"] == "ok" and c["f"] in RECOVERED_OPS)
        row.update(unavailable_from_ms=ms_since(failed["time"], t0),
                   unavailable_to_ms=ms_since(back["time"], t0) if back else None,
                   unavailable_ms=ms_since(back["time"], failed["time"]) if back else None)


def _group_row(fault: _Fault, group: str, partition: int, old: int, controller: int | None,
               lead_end: float, any_end: float, ev: TimelineEvents, hist: TimelineHistory,
               observed: bool = False) -> tuple[dict, dict | None]:
    """The row, and the state whose move it took (None: it took none)."""
    t0 = fault.time
    row = _blank_row(fault)
    row.update(group=group, partition=partition, old_leader=old)

    # detect: the first way the controller could have learned that this fault took `old` away
    found = detections(ev, old, t0, lead_end, shutdown=fault.kind in SHUTDOWN_KINDS,
                        elected_not_by=controller if controller is not None and controller in fault.brokers
                        else None, partition=partition)
    elected = loaded = None
    detect_ns = None
    if found:
        detect_ns, by = min(found)
        row.update(detect_ms=ms_since(detect_ns, t0), detect_by=by)
        # elect: the partition's first change of leader after T, if it is a failover and follows the detection
        change = first_of(ev.states.get(partition, ()), lambda s: t0 < s["_landed"] < lead_end
                        and s.get("leader", -1) >= 0 and s.get("leader") != old)
        if change is not None and change["_landed"] >= detect_ns and is_failover(change, old):
            elected = change
            loaded = _load_after(ev, elected)
    _after_stages(row, group, t0, detect_ns, elected, loaded, any_end, hist, observed)
    return row, elected


def _unattributed_rows(groups: Sequence[str], n: int, taken: set[int], faults: Sequence[_Fault],
                       ev: TimelineEvents, hist: TimelineHistory, observed: frozenset[str] = frozenset()) -> list[dict]:
    """A row per (leader move of a group's offsets partition that no fault row took, group): ``cause`` is
    ``end phase`` when it landed after the run's end phase began, else ``none in schedule``.  Its time origin
    is the controller's last detection of the old leader before the move (else the move itself)."""
    by_partition: dict[int, list[str]] = {}
    for g in groups:
        by_partition.setdefault(partition_for(g, n), []).append(g)
    end = hist.end_ns if hist.end_ns is not None else hist.stop_ns
    rows = []
    for p, gs in sorted(by_partition.items()):
        old, since = None, None
        for s in ev.states.get(p, ()):
            leader = s.get("leader", -1)
            if old is not None and id(s) not in taken and is_failover(s, old):
                found = detections(ev, old, since, s["_landed"], shutdown=True, elected_not_by=old,
                                   hi_inclusive=True, partition=p)
                detect_ns, by = max(found) if found else (None, None)
                t0 = detect_ns if detect_ns is not None else s["_landed"]
                any_end = min((f.time for f in faults if f.time > t0), default=_INF)
                for g in sorted(gs):
                    row: dict[str, Any] = dict.fromkeys(ROW_FIELDS)
                    row.update(cause=CAUSE_END if end is not None and s["_landed"] > end else CAUSE_NONE,
                               nodes=[], time_ns=t0, group=g, partition=p, old_leader=old,
                               detect_ms=ms_since(detect_ns, t0), detect_by=by)
                    _after_stages(row, g, t0, detect_ns, s, _load_after(ev, s), any_end, hist, g in observed)
                    rows.append(row)
            if leader >= 0 and leader != old:
                old, since = leader, s["_landed"]
    return rows


def _order(row: dict) -> tuple:
    """Rows by time; at one time fault rows after unattributed ones, by fault; the controller row first, then
    groups by name."""
    fault, group = row.get("fault"), row.get("group")
    return (row["time_ns"], fault is not None, fault if fault is not None else 0, group is not None, group or "")


def failover_timeline(ops: Sequence[dict], events: Iterable[dict], *,
                      offsets_partitions: int | None = None, observed_groups: Iterable[str] = ()) -> list[dict]:
    """One row per (fault start, group it hit), one controller row per fault that hit the controller, and one
    row per (leader move of a group's offsets partition that no fault explains, group).

    ``ops``: the history (client and nemesis ops, ``time`` in CLOCK_MONOTONIC
    ns); ``events``: every broker's events (``mono_ns``, same clock), merged
    or not (they are sorted here, stably). ``offsets_partitions`` defaults to
    the ``partitions`` of the ``topic_created`` event of __consumer_offsets.
    Rows come in time order (a fault's rows at its start, an unattributed move's at its origin); within a
    fault the controller row first, then groups by name. Every row has every key of :data:`ROW_FIELDS`.
    ``observed_groups``: groups whose commits the history does not have, only fetches of their committed
    offsets (a chaos run's user application); their first commit is the first change those fetches saw.
    """
    hist = TimelineHistory(ops)
    ev = TimelineEvents(events)
    observed = frozenset(observed_groups)
    n = offsets_partitions if offsets_partitions is not None else ev.offsets_partitions
    if hist.groups and not n:
        raise ValueError("the number of __consumer_offsets partitions is unknown (no topic_created event): "
                         "pass offsets_partitions")
    groups = sorted(hist.groups)
    stop = hist.stop_ns if hist.stop_ns is not None else _INF
    rows: list[dict] = []
    taken: set[int] = set()
    for i, fault in enumerate(hist.faults):
        if not fault.brokers:
            continue  # ZooKeeper servers only
        t0 = fault.time
        later = [f for f in hist.faults[i + 1:] if f.time > t0]
        any_end = min((f.time for f in later), default=_INF)

        def end_for(broker: int) -> float:
            ends = [f.time for f in later if f.hits(broker)] + [stop]
            if fault.kind not in SHUTDOWN_KINDS:   # a clean stop of the broker is not this fault's doing
                ends += [t for t, b in ev.stops if b == broker and t > t0]
            return min(ends)

        controller = ev.controller_at(t0)
        if controller is not None and controller in fault.brokers:
            row = _blank_row(fault)
            row["old_controller"] = controller
            won = ev.election_after(t0, end_for(controller), not_by=controller)
            if won:
                row.update(moved=True, new_controller=won["broker"],
                           controller_failover_ms=ms_since(won["mono_ns"], t0))
            rows.append(row)
        for group in groups:
            p = partition_for(group, n)
            old = ev.leader_at(p, t0)
            if old is None or old not in fault.brokers:
                continue
            row, elected = _group_row(fault, group, p, old, controller, end_for(old), any_end, ev, hist,
                                      group in observed)
            rows.append(row)
            if elected is not None:
                taken.add(id(elected))
    if groups:
        rows += _unattributed_rows(groups, n, taken, hist.faults, ev, hist, observed)
    rows.sort(key=_order)
    return rows
