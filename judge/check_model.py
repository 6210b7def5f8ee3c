"""What the chaos checkers share: results, anomalies, and indexed views of a history and event logs.

Pure and deterministic: no clock, no I/O.  ``History`` pairs a history's lines
into operations (:class:`Op`); ``Events`` sorts merged event-log lines by
``mono_ns`` and numbers each broker's processes (a ``broker_starting`` line
begins a new one).  Checkers accept raw lists or these views, so ``check``
builds them once.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable


OFFSETS_TOPIC = "__consumer_offsets"
MAX_ANOMALIES_PER_KIND = 100   # more are counted in stats["anomalies"], not listed
MAX_EVIDENCE = 4               # ops, and events, kept per anomaly
MAX_RECORDS_SHOWN = 20         # a poll's records kept in an anomaly's JSON
INF = math.inf

TP = tuple[str, int]


# ---------------------------------------------------------------------- results

@dataclass
class Anomaly:
    """One violation: ``kind`` (the contract, e.g. ``lost-write``), a sentence, and the
    history lines and event-log lines that show it (a few, not thousands)."""
    kind: str
    message: str
    ops: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict; long ``records`` lists of polls are cut to the ones around the anomaly."""
        return {"kind": self.kind, "message": self.message, "details": dict(self.details),
                "ops": [_trim_op(op, self.details) for op in self.ops], "events": list(self.events)}


def _trim_op(op: dict[str, Any], details: dict[str, Any]) -> dict[str, Any]:
    v = op.get("value")
    if not isinstance(v, dict) or not isinstance(v.get("records"), list) or len(v["records"]) <= MAX_RECORDS_SHOWN:
        return op
    recs = v["records"]
    t, p, o, val = details.get("topic"), details.get("partition"), details.get("offset"), details.get("value")

    def near(r: Any) -> bool:
        if not isinstance(r, list) or len(r) < 4:
            return False
        if val is not None and r[3] == val:
            return True
        return (t is None or r[0] == t) and (p is None or r[1] == p) and o is not None and abs(r[2] - o) <= 2

    keep = [r for r in recs if near(r)][:MAX_RECORDS_SHOWN] or recs[:MAX_RECORDS_SHOWN // 2]
    return {**op, "value": {**v, "records": keep, "records_omitted": len(recs) - len(keep)}}


VERDICT_EXIT = {"valid": 0, "invalid": 1, "unknown": 2}


@dataclass
class CheckResult:
    """The outcome of one checker, or of all of them (:meth:`merge`).

    ``verdict``: ``invalid`` if there is any anomaly, else ``unknown`` if some
    checker lacked the data it needs (``unknowns`` says why), else ``valid``.
    ``exit_code`` is 0, 1 or 2 accordingly (Jepsen's and Maelstrom's)."""
    anomalies: list[Anomaly] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    unknowns: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        if self.anomaly_counts():
            return "invalid"
        return "unknown" if self.unknowns else "valid"

    @property
    def exit_code(self) -> int:
        return VERDICT_EXIT[self.verdict]

    def anomaly_counts(self) -> dict[str, int]:
        """Anomalies by kind, including those past the listing cap."""
        listed: dict[str, int] = {}
        for a in self.anomalies:
            listed[a.kind] = listed.get(a.kind, 0) + 1
        counts = {k: n for k, n in self.stats.get("anomalies", {}).items() if n}
        for kind, n in listed.items():
            counts[kind] = max(counts.get(kind, 0), n)
        return counts

    def kinds(self) -> set[str]:
        return set(self.anomaly_counts())

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: verdict, exit_code, anomaly counts, anomalies, unknowns, stats."""
        return {"verdict": self.verdict, "exit_code": self.exit_code, "anomaly_counts": self.anomaly_counts(),
                "anomalies": [a.to_json() for a in self.anomalies], "unknowns": list(self.unknowns),
                "stats": self.stats}

    @classmethod
    def merge(cls, results: Iterable["CheckResult"]) -> "CheckResult":
        out = cls()
        counts: dict[str, int] = {}
        for r in results:
            out.anomalies.extend(r.anomalies)
            out.unknowns.extend(u for u in r.unknowns if u not in out.unknowns)
            for k, v in r.stats.items():
                if k != "anomalies":
                    out.stats[k] = v
            for kind, n in r.anomaly_counts().items():
                counts[kind] = counts.get(kind, 0) + n
        out.stats["anomalies"] = counts
        return out


class Report:
    """A checker's accumulator: caps the anomalies listed per kind, counts them all."""

    def __init__(self, name: str, *counters: str) -> None:
        self.name = name
        self.stats: dict[str, Any] = {c: 0 for c in counters}
        self._result = CheckResult(stats={name: self.stats, "anomalies": {}})

    def add(self, kind: str, message: str, ops: Iterable[dict[str, Any] | None] = (),
            events: Iterable[dict[str, Any] | None] = (), **details: Any) -> None:
        counts = self._result.stats["anomalies"]
        counts[kind] = counts.get(kind, 0) + 1
        if counts[kind] > MAX_ANOMALIES_PER_KIND:
            return
        self._result.anomalies.append(Anomaly(kind, message, _distinct(ops), _distinct(events), details))

    def unknown(self, why: str) -> None:
        if why not in self._result.unknowns:
            self._result.unknowns.append(why)

    def count(self, key: str, n: int = 1) -> None:
        self.stats[key] = self.stats.get(key, 0) + n

    def result(self) -> CheckResult:
        return self._result


def _distinct(items: Iterable[dict[str, Any] | None]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for x in items:
        if x is not None and not any(x is y for y in out):
            out.append(x)
    return out[:MAX_EVIDENCE]


# ---------------------------------------------------------------------- the history

COMPLETION_TYPES = frozenset({"ok", "fail", "info"})
NEMESIS = "nemesis"  # the process of fault lines


def pair_ops(ops: Iterable[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Client operations as (invoke, completion or None), in invoke order (Jepsen's pairing).

    Lines are taken in ``index`` order; a completion closes the open invoke of
    its process, and an invoke never completed pairs with None.  Nemesis lines
    are not paired (they have no invoke): they are left out.  A completion
    with no open invoke, or an invoke on a process that has one open, raises
    ValueError: the history is malformed.
    """
    pairs: list[list[Any]] = []
    open_: dict[Any, list[Any]] = {}
    for op in sorted(ops, key=lambda o: o["index"]):
        process = op.get("process")
        if process == NEMESIS:
            continue
        if op.get("type") == "invoke":
            if process in open_:
                raise ValueError(f"index {op['index']}: process {process} invoked while operation "
                                 f"{open_[process][0]['index']} is open")
            pair = [op, None]
            open_[process] = pair
            pairs.append(pair)
        elif op.get("type") in COMPLETION_TYPES:
            pair = open_.pop(process, None)
            if pair is None:
                raise ValueError(f"index {op['index']}: {op.get('type')} of process {process} with no open invoke")
            pair[1] = op
        else:
            raise ValueError(f"index {op.get('index')}: unknown type {op.get('type')!r}")
    return [(inv, done) for inv, done in pairs]


class Op:
    """One client operation: its invoke line and its completion line (None while open)."""
    __slots__ = ("invoke", "done")

    def __init__(self, invoke: dict[str, Any], done: dict[str, Any] | None) -> None:
        self.invoke, self.done = invoke, done

    @property
    def type(self) -> str:
        """ok, fail, info, or open (never completed: the same as info)."""
        return "open" if self.done is None else self.done["type"]

    @property
    def f(self) -> str:
        return self.invoke.get("f")

    @property
    def group(self) -> str | None:
        return self.invoke.get("group")

    @property
    def final(self) -> bool:
        return bool(self.invoke.get("final") or (self.done is not None and self.done.get("final")))

    @property
    def node(self) -> int | None:
        return None if self.done is None else self.done.get("node")

    @property
    def value(self) -> Any:
        """The completion's value (ok), else the invoke's (fail and info repeat it)."""
        if self.done is not None and self.done.get("value") is not None:
            return self.done["value"]
        return self.invoke.get("value")

    @property
    def inv_index(self) -> int:
        return self.invoke["index"]

    @property
    def inv_time(self) -> int:
        return self.invoke["time"]

    @property
    def done_index(self) -> float:
        return INF if self.done is None else self.done["index"]

    @property
    def done_time(self) -> float:
        return INF if self.done is None else self.done["time"]

    @property
    def line(self) -> dict[str, Any]:
        """The line to show as evidence: the completion, or the invoke of an open op."""
        return self.invoke if self.done is None else self.done

    def __repr__(self) -> str:
        return f"Op({self.f} {self.type} #{self.inv_index})"


class History:
    """A history's client operations, paired (raises ValueError if the history is malformed)."""

    def __init__(self, lines: Iterable[dict[str, Any]]) -> None:
        self.lines = sorted(lines, key=lambda o: o["index"])
        self.ops = [Op(i, d) for i, d in pair_ops(self.lines)]
        self.by_f: dict[str, list[Op]] = defaultdict(list)
        for op in self.ops:
            self.by_f[op.f].append(op)

    def of(self, f: str, type_: str | None = None) -> list[Op]:
        return [op for op in self.by_f.get(f, []) if type_ is None or op.type == type_]


def as_history(ops: "History | Iterable[dict[str, Any]]") -> History:
    return ops if isinstance(ops, History) else History(ops)


# ---------------------------------------------------------------------- the event logs

class Events:
    """Merged event-log lines in ``mono_ns`` order, each broker's processes numbered from 1."""

    def __init__(self, events: Iterable[dict[str, Any]]) -> None:
        self.all = sorted(events, key=lambda e: e.get("mono_ns", 0))
        self._proc: dict[int, int] = {}
        self.by_type: dict[str, list[dict[str, Any]]] = defaultdict(list)
        starts: dict[Any, int] = defaultdict(int)
        for e in self.all:
            if e.get("type") == "broker_starting":
                starts[e.get("broker")] += 1
            self._proc[id(e)] = starts[e.get("broker")]
            self.by_type[e.get("type")].append(e)

    def __len__(self) -> int:
        return len(self.all)

    def of(self, *types: str) -> list[dict[str, Any]]:
        if len(types) == 1:
            return self.by_type.get(types[0], [])
        return [e for e in self.all if e.get("type") in types]

    def process(self, e: dict[str, Any]) -> int:
        """Which process of its broker wrote ``e``: 0 before any ``broker_starting``, then 1, 2, ..."""
        return self._proc[id(e)]


def as_events(events: "Events | Iterable[dict[str, Any]] | None") -> Events:
    if isinstance(events, Events):
        return events
    return Events(events or [])


def log_start_offsets(events: Events) -> dict[TP, int]:
    """Each partition's highest log start offset from retention (``log_segments_deleted``, docs/events.md):
    records below it were deleted by retention, not lost."""
    out: dict[TP, int] = {}
    for e in events.of("log_segments_deleted"):
        tp, lso = (e.get("topic"), e.get("partition")), e.get("log_start_offset")
        if isinstance(lso, int) and lso > out.get(tp, -1):
            out[tp] = lso
    return out


# ---------------------------------------------------------------------- small helpers

def parse_tp(key: Any) -> TP | None:
    """``"t/p"`` (docs/chaos.md) or ``"t-p"`` (the client library's form) -> (topic, partition)."""
    if not isinstance(key, str):
        return None
    sep = "/" if "/" in key else "-"
    topic, _, part = key.rpartition(sep)
    if not topic:
        return None
    try:
        return topic, int(part)
    except ValueError:
        return None


def offsets_of(value: Any) -> dict[TP, int | None]:
    """``value["offsets"]`` as {(topic, partition): offset}; a negative offset (none committed) is None."""
    raw = value.get("offsets") if isinstance(value, dict) else None
    out: dict[TP, int | None] = {}
    if isinstance(raw, dict):
        for k, o in raw.items():
            tp = parse_tp(k)
            if tp is not None:
                out[tp] = o if isinstance(o, int) and not isinstance(o, bool) and o >= 0 else None
    return out


def is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def sent_record(op: Op) -> tuple[str, int, int, Any] | None:
    """An ok send's (topic, partition, offset, value), or None if it lacks them."""
    v = op.value
    if not isinstance(v, dict):
        return None
    t, p, o = v.get("topic"), v.get("partition"), v.get("offset")
    if not isinstance(t, str) or not is_int(p) or not is_int(o):
        return None
    return t, p, o, v.get("value")


def poll_records(op: Op) -> list[tuple[str, int, int, Any]]:
    v = op.value
    recs = v.get("records") if isinstance(v, dict) else None
    out = []
    for r in recs or []:
        if isinstance(r, (list, tuple)) and len(r) >= 4 and isinstance(r[0], str) and is_int(r[1]) and is_int(r[2]):
            out.append((r[0], r[1], r[2], r[3]))
    return out



def fetched_partitions(op: Op, known: Iterable[TP] = ()) -> dict[TP, int | None]:
    """The partitions an ok ``fetch-committed`` tells about, with their offsets (None: none committed).

    The partitions listed in the invoke's ``value.partitions``, if any; else,
    for a fetch marked ``final`` (it asks for all of the group's partitions),
    the ones it returned plus ``known``; else only the ones it returned (a
    member's fetch for the partitions it was just given says nothing of the
    others)."""
    got = offsets_of(op.value)
    asked = op.invoke.get("value")
    if isinstance(asked, dict) and isinstance(asked.get("partitions"), list):
        tps = [tp for tp in (parse_tp(k) for k in asked["partitions"]) if tp is not None]
        return {tp: got.get(tp) for tp in tps}
    if op.final:
        return {**{tp: None for tp in known}, **got}
    return got


class FinalCommitted:
    """Each group's committed offsets at the end of the run.

    If the history marks any ``fetch-committed`` ``final``, a group's final
    offsets are those of its last ok marked fetch (a partition it lacks has
    none).  Otherwise, per partition, the last ok fetch-committed of the group
    that returned that partition."""

    def __init__(self, h: History) -> None:
        fetches = sorted((op for op in h.of("fetch-committed", "ok") if op.group is not None),
                         key=lambda op: op.done_index)
        self.marked = any(op.final for op in fetches)
        self.final_op: dict[str, Op] = {}
        self.latest: dict[tuple[str, TP], tuple[int | None, Op]] = {}
        for op in fetches:
            if self.marked:
                if op.final:
                    self.final_op[op.group] = op
            else:
                for tp, o in fetched_partitions(op).items():
                    self.latest[(op.group, tp)] = (o, op)

    def lookup(self, group: str, tp: TP) -> tuple[int | None, Op] | None:
        """(offset or None, the fetch it comes from), or None when no final fetch tells."""
        if self.marked:
            f = self.final_op.get(group)
            return None if f is None else (offsets_of(f.value).get(tp), f)
        return self.latest.get((group, tp))
