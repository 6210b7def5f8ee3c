"""Checkers of the user's own application (a chaos run's ``workload.command``), judged from outside.

We cannot see the application's commits or their answers; we see three things, all recorded by the
runner (docs/chaos.md, "The user's application"):

* the group's committed offsets, polled with OffsetFetch by an observer of our own: ``fetch-committed``
  operations of the app's group in the history.  An offset a fetch returns is an **acknowledged commit**:
  the coordinator answers OffsetFetch from its offsets cache, which a commit reaches only once its
  append to ``__consumer_offsets`` is acknowledged by the ISR (acks=all), so the commit was durable and
  the app's commit call was (or would have been) answered with success.  A commit superseded within
  one polling interval is never observed, and is not judged;
* the records our producers wrote to the app's input topic (ok ``send`` operations);
* what the app wrote to its output (a topic or a file named in the scenario), read at the end of the
  run once the app has stopped: the ``app`` option, chaos/apps.py's ``app.json``.

``app`` (a mapping): ``group``, ``input``, ``delivery`` (``at-least-once`` or ``exactly-once``), and, when
the app has an output, ``output`` (``{"topic": t}`` or ``{"file": path}``), ``output_records`` (the values
read, one per record or line) and ``output_error`` (why the output could not be read, else null).
Without ``app`` these checkers judge nothing.  Pure: no clock, no I/O.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Mapping

from judge.check_model import TP, CheckResult, Op, Report, as_events, as_history, fetched_partitions, sent_record
from judge.checks_groups import offsets_partition_count
from kafkacommon.hashing import partition_for


def _resets(h: Any, group: str) -> list[Op]:
    """Resets the user asked for through kafkasim (an admin commit: generation -1), not failed."""
    out = []
    for op in h.of("commit"):
        v = op.invoke.get("value")
        if op.group == group and op.type != "fail" and isinstance(v, dict) and v.get("generation") == -1:
            out.append(op)
    return out


def check_observed_commits(ops: Any, events: Any = None, *, app: Mapping[str, Any] | None = None,
                           offsets_partitions: int | None = None, **_: Any) -> CheckResult:
    """``app-commit-went-backwards`` and ``app-commit-lost``: an ok fetch-committed F2 of the app's group that
    returns, for a partition, less than (or nothing where) an ok fetch F1 returned that completed before F2
    was invoked, unless a reset the user asked for (an admin commit of the group, not failed) could have
    landed in between (invoked before F2 completed, not completed before F1 was invoked).  It is
    ``app-commit-lost`` when the group's coordinator was loaded anew (a ``coordinator_loaded`` of its offsets
    partition) between F1's invoke and F2's completion: an acknowledged commit did not survive the
    failover; else ``app-commit-went-backwards``.  One anomaly per partition and baseline fetch."""
    r = Report("observed-commits", "fetches_judged", "explained_by_reset")
    if not app or not app.get("group"):
        return r.result()
    group = app["group"]
    h = as_history(ops)
    ev = as_events(events)
    fetches = [op for op in h.of("fetch-committed", "ok") if op.group == group]
    r.stats["fetches"] = len(fetches)
    resets = _resets(h, group)
    n = offsets_partition_count(ev, offsets_partitions)
    loads = [] if n is None else [e for e in ev.of("coordinator_loaded") if e.get("partition") == partition_for(group, n)]
    by_tp: dict[TP, list[tuple[Op, int]]] = defaultdict(list)
    for f in fetches:
        for tp, got in fetched_partitions(f).items():
            by_tp[tp].append((f, -1 if got is None else got))
    for (t, p), seen in sorted(by_tp.items()):
        by_done = sorted(seen, key=lambda x: x[0].done_index)
        reported: set[int] = set()
        i, best = 0, None
        for f2, o2 in sorted(seen, key=lambda x: x[0].inv_index):
            while i < len(by_done) and by_done[i][0].done_index < f2.inv_index:
                if best is None or by_done[i][1] > best[1]:
                    best = by_done[i]
                i += 1
            r.count("fetches_judged")
            if best is None or o2 >= best[1]:
                continue
            floor = max((x.done_index for x in resets if x.inv_index < f2.done_index), default=-1)
            base = best
            if floor >= 0:   # only fetches invoked after the reset may have completed count against F2
                eligible = [x for x in by_done[:i] if x[0].inv_index > floor]
                base = max(eligible, key=lambda x: x[1], default=None)
                if base is None or o2 >= base[1]:
                    r.count("explained_by_reset")
                    continue
            f1, o1 = base
            if id(f1) in reported:
                continue
            reported.add(id(f1))
            moved = [e for e in loads if f1.inv_time < e.get("mono_ns", 0) < f2.done_time]
            got = "nothing" if o2 < 0 else str(o2)
            if moved:
                r.add("app-commit-lost",
                      f"group {group}: {t}/{p} was committed at {o1} (fetch index {f1.done_index}), then the "
                      f"coordinator moved and a fetch (index {f2.done_index}) returned {got}: an acknowledged "
                      f"commit did not survive the failover", [f1.done, f2.invoke, f2.done], moved[:2],
                      group=group, topic=t, partition=p, offset=o1, fetched=None if o2 < 0 else o2)
            else:
                r.add("app-commit-went-backwards",
                      f"group {group}: {t}/{p} was committed at {o1} (fetch index {f1.done_index}), and a later "
                      f"fetch (index {f2.done_index}) returned {got}, with no reset asked for in between",
                      [f1.done, f2.invoke, f2.done], group=group, topic=t, partition=p, offset=o1,
                      fetched=None if o2 < 0 else o2)
    return r.result()


def _final_committed(h: Any, group: str) -> tuple[dict[TP, int | None], Op] | None:
    """The group's offsets from its last ok ``final`` fetch-committed (the observer's, once the app stopped)."""
    finals = [op for op in h.of("fetch-committed", "ok") if op.group == group and op.final]
    if not finals:
        return None
    last = max(finals, key=lambda op: op.done_index)
    return fetched_partitions(last), last


def check_app_output(ops: Any, events: Any = None, *, app: Mapping[str, Any] | None = None,
                     **_: Any) -> CheckResult:
    """``app-record-lost``: an ok send to the app's input topic at an offset below the group's final committed
    offset of its partition (the app committed past it) whose value the app's output does not have.
    ``app-record-duplicated`` (``delivery: exactly-once`` only): a value the output has more than once; with
    at-least-once they are counted (``duplicates``).  Unknown when the output could not be read, when the
    group has no final committed offsets, or when sends lie at or past them (the app did not drain)."""
    r = Report("app-output", "records_judged", "not_committed", "duplicates", "unexpected")
    if not app or not app.get("output"):
        return r.result()
    group, topic = app["group"], app["input"]
    if app.get("output_error") or app.get("output_records") is None:
        r.unknown(f"app-output: the app's output could not be read: {app.get('output_error') or 'not recorded'}")
        return r.result()
    h = as_history(ops)
    output = Counter(str(v) for v in app["output_records"])
    r.stats["output_records"] = sum(output.values())
    final = _final_committed(h, group)
    sent = [(op, rec) for op in h.of("send", "ok") for rec in [sent_record(op)] if rec and rec[0] == topic]
    sent_values = {str(v) for op in h.of("send") for v in [(op.invoke.get("value") or {}).get("value")] if v}
    if sent and final is None:
        r.unknown(f"app-output: group {group} has no final fetch-committed: which records it committed is unknown")
        return r.result()
    committed, f_op = final if final is not None else ({}, None)
    left = 0
    for op, (t, p, o, v) in sorted(sent, key=lambda x: (x[1][1], x[1][2])):
        c = committed.get((t, p))
        if c is None or o >= c:
            left += 1
            continue
        r.count("records_judged")
        if str(v) not in output:
            r.add("app-record-lost",
                  f"group {group} committed {t}/{p} up to {c}, past offset {o} ({v!r}), but the app's output has "
                  f"no {v!r}", [op.done, f_op.done if f_op else None], group=group, topic=t, partition=p, offset=o,
                  value=v, committed=c)
    r.count("not_committed", left)
    for v, k in sorted(output.items()):
        if v not in sent_values:
            r.count("unexpected")
            continue
        if k > 1:
            r.count("duplicates", k - 1)
            if app.get("delivery") == "exactly-once":
                r.add("app-record-duplicated", f"the app's output has {v!r} {k} times (delivery: exactly-once)",
                      [], group=group, value=v, times=k)
    if left:
        r.unknown(f"app-output: {left} acknowledged records of {topic} lie at or past group {group}'s final "
                  f"committed offsets: the app did not drain, so whether it lost them is unknown")
    return r.result()

