"""Checkers of the topic logs: lost writes, inconsistent offsets and duplicates, unseen messages.

They read only the history (docs/chaos.md, "Checkers", gives each rule and
its limits).  Each takes ``(ops, events=None, **options)`` and returns a
:class:`~judge.check_model.CheckResult`.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from judge.check_model import (TP, CheckResult, Op, Report, as_events, as_history, FinalCommitted, log_start_offsets,
                               offsets_of, parse_tp, poll_records, sent_record)


def _acks_not_all(op: Op) -> bool:
    v = op.invoke.get("value")
    acks = v.get("acks") if isinstance(v, dict) else None
    return acks is not None and str(acks) not in ("-1", "all")


def check_lost_writes(ops: Any, events: Any = None, *, final_reads_required: bool = True, **_: Any) -> CheckResult:
    """``lost-write``: an ok send that the final read of its partition lacks (at its offset, with its value);
    one below its partition's log start offset (retention deleted it: ``log_segments_deleted``) is not."""
    h = as_history(ops)
    retained = log_start_offsets(as_events(events))
    r = Report("lost-write", "acknowledged_sends", "judged", "final_read_records")
    finals: dict[TP, dict[str, Any]] = {}
    for op in h.of("poll", "ok"):
        if not op.final:
            continue
        v = op.invoke.get("value") or {}
        tps = {(v.get("topic"), v.get("partition"))} if isinstance(v, dict) and "topic" in v else set()
        recs = poll_records(op)
        tps |= {(t, p) for t, p, _o, _v in recs}
        for tp in tps:
            fr = finals.setdefault(tp, {"ops": [], "at": defaultdict(set), "hw": None})
            fr["ops"].append(op)
            hw = op.value.get("high_watermark") if isinstance(op.value, dict) else None
            if isinstance(hw, int) and (fr["hw"] is None or hw > fr["hw"]):
                fr["hw"] = hw
        for t, p, o, val in recs:
            finals[(t, p)]["at"][o].add(val)
        r.count("final_read_records", len(recs))
    r.stats["final_read_partitions"] = len(finals)
    unjudged: dict[TP, int] = defaultdict(int)
    for op in h.of("send", "ok"):
        rec = sent_record(op)
        r.count("acknowledged_sends")
        if rec is None:
            r.count("skipped_incomplete")
            continue
        if _acks_not_all(op):
            r.count("skipped_acks_not_all")
            continue
        t, p, o, val = rec
        fr = finals.get((t, p))
        if fr is None:
            unjudged[(t, p)] += 1
            continue
        r.count("judged")
        found = fr["at"].get(o, set())
        if val in found:
            continue
        if not found and o < retained.get((t, p), 0):
            r.count("retained_away")
            continue
        final_op = max(fr["ops"], key=lambda x: x.done_index)
        if found:
            why = f"the final read has {sorted(map(str, found))} there"
        elif fr["hw"] is not None and o >= fr["hw"]:
            why = f"beyond the final high watermark {fr['hw']}"
        else:
            why = "the final read has no record at that offset"
        r.add("lost-write", f"acknowledged send {val!r} to {t}/{p} at offset {o} is not in the final read: {why}",
              [op.done, final_op.done], topic=t, partition=p, offset=o, value=val)
    r.stats["unjudged_no_final_read"] = sum(unjudged.values())
    if unjudged:
        missing = ", ".join(f"{t}/{p} ({n} sends)" for (t, p), n in sorted(unjudged.items()))
        if final_reads_required:
            r.unknown(f"lost-write: no final read of {missing}, which had acknowledged sends")
    return r.result()


def check_offsets(ops: Any, events: Any = None, **_: Any) -> CheckResult:
    """``inconsistent-offset``: two values at one offset; ``duplicate-value``: one value at two offsets.

    Observations: every ok send's (topic, partition, offset, value) and every
    record of every ok poll, final or not."""
    h = as_history(ops)
    r = Report("offsets", "observations")
    at: dict[tuple[str, int, int], dict[Any, Op]] = defaultdict(dict)
    where: dict[Any, dict[tuple[str, int, int], Op]] = defaultdict(dict)

    def observe(t: str, p: int, o: int, val: Any, op: Op) -> None:
        r.count("observations")
        if val is None or val == "":
            return  # a null value (the workload never sends one) says nothing about uniqueness
        at[(t, p, o)].setdefault(val, op)
        where[val].setdefault((t, p, o), op)

    for op in h.ops:
        if op.type != "ok":
            continue
        if op.f == "send":
            rec = sent_record(op)
            if rec is not None:
                observe(*rec, op)
        elif op.f == "poll":
            for rec in poll_records(op):
                observe(*rec, op)
    r.stats["offsets"] = len(at)
    r.stats["values"] = len(where)
    for (t, p, o), vals in at.items():
        if len(vals) > 1:
            shown = sorted(map(str, vals))
            r.add("inconsistent-offset", f"{t}/{p} offset {o} was observed with {len(vals)} values: {shown}",
                  [op.done for op in vals.values()], topic=t, partition=p, offset=o, values=shown)
    for val, places in where.items():
        if len(places) > 1:
            shown = sorted(f"{t}/{p}@{o}" for t, p, o in places)
            t, p, o = min(places)
            r.add("duplicate-value", f"value {val!r} was observed at {len(places)} offsets: {shown}",
                  [op.done for op in places.values()], value=val, places=shown, topic=t, partition=p, offset=o)
    return r.result()


def consumed_topics(h: Any) -> dict[str, set[str]]:
    """Topics each group consumes: from its ok syncs' assignments, its member commits
    (generation >= 0) and its non-final ok polls."""
    out: dict[str, set[str]] = defaultdict(set)
    for op in h.ops:
        g = op.group
        if g is None or op.type != "ok":
            continue
        v = op.value if isinstance(op.value, dict) else {}
        if op.f == "sync":
            for key in v.get("assignment") or []:
                tp = parse_tp(key) if isinstance(key, str) else (
                    (key[0], key[1]) if isinstance(key, (list, tuple)) and len(key) == 2 else None)
                if tp is not None:
                    out[g].add(tp[0])
        elif op.f == "commit" and isinstance(v.get("generation"), int) and v["generation"] >= 0:
            out[g] |= {t for t, _p in offsets_of(v)}
        elif op.f == "poll" and not op.final:
            out[g] |= {t for t, _p, _o, _v in poll_records(op)}
    return out


def check_unseen(ops: Any, events: Any = None, **_: Any) -> CheckResult:
    """``unseen-message``: an ok send to a topic a group consumes that no non-final poll of the group returned.

    Judged against the group's final committed offset of the send's partition
    (:class:`~judge.check_model.FinalCommitted`), for sends completed before
    that fetch was invoked: at or past offset+1 the message is ``unseen``;
    below it (or none) the messages are ``not-drained``, reported once per
    group and partition.  A send below its partition's log start offset
    (``log_segments_deleted``) was deleted by retention: ``retained_away``."""
    h = as_history(ops)
    retained = log_start_offsets(as_events(events))
    r = Report("unseen-message", "sends_judged", "unseen", "not_drained")
    topics = consumed_topics(h)
    finals = FinalCommitted(h)
    seen: dict[str, set[Any]] = defaultdict(set)
    for op in h.of("poll", "ok"):
        if op.group is not None and not op.final:
            seen[op.group] |= {val for _t, _p, _o, val in poll_records(op)}
    sends: dict[TP, list[tuple[Op, tuple[str, int, int, Any]]]] = defaultdict(list)
    for op in h.of("send", "ok"):
        rec = sent_record(op)
        if rec is not None:
            sends[(rec[0], rec[1])].append((op, rec))
    for group in sorted(topics):
        unread: list[str] = []
        for (t, p), items in sorted(sends.items()):
            if t not in topics[group]:
                continue
            final = finals.lookup(group, (t, p))
            if final is None:
                unread.append(f"{t}/{p}")
                continue
            c, fetch = final
            r.count("partitions_judged")
            not_drained = []
            for op, (_t, _p, o, val) in items:
                if op.done_index >= fetch.inv_index:
                    r.count("sends_after_final_fetch")
                    continue
                r.count("sends_judged")
                if val in seen[group]:
                    continue
                if o < retained.get((t, p), 0):
                    r.count("retained_away")
                    continue
                if c is not None and c >= o + 1:
                    r.count("unseen")
                    r.add("unseen-message", f"group {group} committed {t}/{p} up to {c} but never polled "
                          f"{val!r} (offset {o}): unseen", [op.done, fetch.done],
                          reason="unseen", group=group, topic=t, partition=p, offset=o, value=val, committed=c)
                else:
                    not_drained.append((op, o))
            if not_drained:
                r.count("not_drained", len(not_drained))
                offs = sorted(o for _op, o in not_drained)
                r.add("unseen-message", f"group {group} never polled {len(not_drained)} acknowledged messages of "
                      f"{t}/{p} (offsets {offs[0]}..{offs[-1]}) and its final committed offset is "
                      f"{'none' if c is None else c}: not-drained (the drain did not finish)",
                      [op.done for op, _o in not_drained[:3]] + [fetch.done], reason="not-drained", group=group,
                      topic=t, partition=p, offset=offs[0], count=len(not_drained), committed=c)
        if unread:
            r.unknown(f"unseen-message: group {group} consumes {', '.join(unread)} but has no final "
                      "fetch-committed telling its committed offset there")
    return r.result()
