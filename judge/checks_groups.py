"""Checkers of consumer groups: committed offsets, generations, and who coordinated.

Rules and limits: docs/chaos.md, "Checkers".  Operations are ordered by
``index`` (the history's order is its time order); an operation's effect
lies between its invoke and its completion, and an ``info`` or open
operation may take effect at any time after its invoke.
"""
from __future__ import annotations

import bisect
from collections import defaultdict
from typing import Any

from judge.check_model import (INF, OFFSETS_TOPIC, TP, CheckResult, Events, Op, Report, as_events, as_history,
                               fetched_partitions, is_int, offsets_of)
from kafkacommon.hashing import partition_for


def _generation(op: Op) -> int | None:
    for v in (op.value, op.invoke.get("value")):
        if isinstance(v, dict) and is_int(v.get("generation")):
            return v["generation"]
    return None


def _commits(h: Any, types: tuple[str, ...]) -> dict[tuple[str, TP], list[tuple[Op, int]]]:
    """(group, partition) -> [(commit op, offset)] for commits of the given types."""
    out: dict[tuple[str, TP], list[tuple[Op, int]]] = defaultdict(list)
    for op in h.of("commit"):
        if op.type not in types or op.group is None:
            continue
        for tp, o in offsets_of(op.value).items():
            if o is not None:
                out[(op.group, tp)].append((op, o))
    return out


# ---------------------------------------------------------------------- commit-went-backwards

def check_commit_order(ops: Any, events: Any = None, **_: Any) -> CheckResult:
    """``commit-went-backwards``: an ok commit below the highest ok commit of the same group and
    partition that completed before it was invoked.  A generation -1 (admin) commit is not
    judged and starts a new baseline: commits invoked before it completed no longer count."""
    h = as_history(ops)
    r = Report("commit-order", "commits_judged", "admin_commits_not_judged")
    for (group, (t, p)), entries in sorted(_commits(h, ("ok",)).items(), key=lambda kv: kv[0]):
        by_done = sorted(entries, key=lambda e: e[0].done_index)
        by_inv = sorted(entries, key=lambda e: e[0].inv_index)
        i = 0
        best: tuple[Op, int] | None = None
        reset_done: float | None = None
        for op, o in by_inv:
            while i < len(by_done) and by_done[i][0].done_index < op.inv_index:
                d_op, d_o = by_done[i]
                i += 1
                if _generation(d_op) == -1:
                    best, reset_done = (d_op, d_o), d_op.done_index
                elif (reset_done is None or d_op.inv_index > reset_done) and (best is None or d_o > best[1]):
                    best = (d_op, d_o)
            if _generation(op) == -1:
                r.count("admin_commits_not_judged")
                continue
            r.count("commits_judged")
            if best is not None and o < best[1]:
                r.add("commit-went-backwards",
                      f"group {group} committed {t}/{p} = {o} (index {op.done_index}) after a commit of "
                      f"{best[1]} had completed (index {best[0].done_index})",
                      [best[0].done, op.invoke, op.done], group=group, topic=t, partition=p, offset=o,
                      previous=best[1])
    return r.result()


# ---------------------------------------------------------------------- lost-commit

def check_lost_commits(ops: Any, events: Any = None, **_: Any) -> CheckResult:
    """``lost-commit``: an ok fetch-committed, invoked after an ok commit C completed, that returns
    less than C's offset (or nothing) for C's partition, unless another commit of that partition
    with a lower offset, not failed, could have landed after C (it overlaps C or follows it and
    was invoked before the fetch completed).  Which partitions a fetch tells about:
    :func:`~judge.check_model.fetched_partitions`.  Unknown when the last ok commit of a partition
    was never read back."""
    h = as_history(ops)
    r = Report("lost-commit", "fetches_checked", "partitions_checked")
    ok = _commits(h, ("ok",))
    not_failed = _commits(h, ("ok", "info", "open"))
    # per (group, tp): ok commits in completion order, with the running max of their offsets
    ordered: dict[tuple[str, TP], tuple[list[float], list[tuple[Op, int]], list[int]]] = {}
    for key, entries in ok.items():
        es = sorted(entries, key=lambda e: e[0].done_index)
        run, m = [], -1
        for _op, o in es:
            m = max(m, o)
            run.append(m)
        ordered[key] = ([e[0].done_index for e in es], es, run)
    r.stats["ok_commits"] = sum(len(v) for v in ok.values())
    known: dict[str, set[TP]] = defaultdict(set)
    for group, tp in ok:
        known[group].add(tp)
    read_back: dict[tuple[str, TP], float] = {}   # the last invoke of a fetch that told about the partition
    for f in h.of("fetch-committed", "ok"):
        if f.group not in known:
            continue
        r.count("fetches_checked")
        for tp, got in sorted(fetched_partitions(f, known[f.group]).items()):
            key = (f.group, tp)
            read_back[key] = max(read_back.get(key, -1), f.inv_index)
            if key not in ordered:
                continue
            dones, es, run = ordered[key]
            n = bisect.bisect_left(dones, f.inv_index)   # ok commits completed before the fetch was invoked
            if n == 0:
                continue
            r.count("partitions_checked")
            if got is not None and got >= run[n - 1]:
                continue
            for c_op, c_o in sorted(es[:n], key=lambda e: -e[1]):
                if got is not None and got >= c_o:
                    break
                if _overwritten(c_op, c_o, f, not_failed[key]):
                    r.count("explained_by_lower_commit")
                    continue
                t, p = tp
                r.add("lost-commit",
                      f"group {f.group}: fetch-committed (index {f.done_index}) returned "
                      f"{'no offset' if got is None else got} for {t}/{p} after a commit of {c_o} "
                      f"had completed (index {c_op.done_index})",
                      [c_op.done, f.invoke, f.done], group=f.group, topic=t, partition=p, offset=c_o, fetched=got)
                break
    unread: dict[str, list[str]] = defaultdict(list)
    for (group, (t, p)), (dones, _es, _run) in sorted(ordered.items(), key=lambda kv: kv[0]):
        if read_back.get((group, (t, p)), -1) < dones[-1]:
            unread[group].append(f"{t}/{p}")
    for group, tps in sorted(unread.items()):
        r.count("partitions_not_read_back", len(tps))
        r.unknown(f"lost-commit: group {group} had acknowledged commits but no final fetch-committed: "
                  f"nothing read {', '.join(tps)} back after the last commit")
    return r.result()


def _overwritten(c_op: Op, c_o: int, f: Op, others: list[tuple[Op, int]]) -> bool:
    return any(d_op is not c_op and d_o < c_o and d_op.inv_index < f.done_index and d_op.done_index > c_op.inv_index
               for d_op, d_o in others)


# ---------------------------------------------------------------------- fenced-generation-commit

def check_fenced_generations(ops: Any, events: Any = None, **_: Any) -> CheckResult:
    """``fenced-generation-commit``: an ok commit of generation g >= 0, invoked after an ok sync of
    the same group with a generation above g had completed."""
    h = as_history(ops)
    r = Report("fenced-generation", "commits_judged", "not_judged_generation_-1")
    syncs: dict[str, list[tuple[float, int, Op]]] = defaultdict(list)
    for op in h.of("sync", "ok"):
        g = _generation(op)
        if op.group is not None and g is not None:
            syncs[op.group].append((op.done_index, g, op))
    prefix: dict[str, tuple[list[float], list[int], list[tuple[float, int, Op]]]] = {}
    for group, ss in syncs.items():
        ss.sort(key=lambda s: s[0])
        run, m = [], -1
        for _d, g, _op in ss:
            m = max(m, g)
            run.append(m)
        prefix[group] = ([s[0] for s in ss], run, ss)
    for op in h.of("commit", "ok"):
        gen = _generation(op)
        if gen is None or gen < 0:
            r.count("not_judged_generation_-1")
            continue
        r.count("commits_judged")
        if op.group not in prefix:
            continue
        dones, run, ss = prefix[op.group]
        n = bisect.bisect_left(dones, op.inv_index)
        if n == 0 or run[n - 1] <= gen:
            continue
        s_op = next(s for s in ss[:n] if s[1] > gen)[2]
        r.add("fenced-generation-commit",
              f"group {op.group}: a commit of generation {gen} (index {op.done_index}) was acknowledged though "
              f"generation {_generation(s_op)} had synced (index {s_op.done_index}) before it was invoked",
              [s_op.done, op.invoke, op.done], group=op.group, generation=gen, synced=_generation(s_op))
    return r.result()


# ---------------------------------------------------------------------- split-coordinator

def offsets_partition_count(ev: Events, override: int | None = None) -> int | None:
    if override is not None:
        return override
    for e in ev.of("topic_created"):
        if e.get("topic") == OFFSETS_TOPIC and is_int(e.get("partitions")):
            return e["partitions"]
    return None


class _Coordinators:
    """Loads and unloads of one offsets partition, from the event logs."""

    def __init__(self, ev: Events) -> None:
        # (broker, partition) -> [(mono_ns, leader_epoch, event)]: load started/finished, or an epoch
        # bump of a leadership whose partition was already loaded in that process
        self.held: dict[tuple[int, int], list[tuple[int, int, dict]]] = defaultdict(list)
        self.reloads: dict[tuple[int, int], list[int]] = defaultdict(list)   # load starts and finishes
        self.loaded: dict[int, list[tuple[int, int, int, dict]]] = defaultdict(list)  # p -> (ns, epoch, broker, e)
        self.unloads: dict[tuple[int, int], list[tuple[int, dict]]] = defaultdict(list)
        self.starts: dict[int, list[tuple[int, dict]]] = defaultdict(list)
        loaded_in: set[tuple[int, int, int]] = set()   # (broker, process, partition)
        for e in ev.all:
            t, b, ns = e.get("type"), e.get("broker"), e.get("mono_ns", 0)
            p, epoch = e.get("partition"), e.get("leader_epoch")
            if t == "broker_starting":
                self.starts[b].append((ns, e))
            elif t in ("coordinator_load_started", "coordinator_loaded") and is_int(p) and is_int(epoch):
                self.held[(b, p)].append((ns, epoch, e))
                self.reloads[(b, p)].append(ns)
                loaded_in.add((b, ev.process(e), p))
                if t == "coordinator_loaded":
                    self.loaded[p].append((ns, epoch, b, e))
            elif t == "coordinator_unloaded" and is_int(p):
                self.unloads[(b, p)].append((ns, e))
            elif (t == "became_leader" and e.get("topic") == OFFSETS_TOPIC and is_int(p) and is_int(epoch)
                  and (b, ev.process(e), p) in loaded_in):
                self.held[(b, p)].append((ns, epoch, e))

    def process_start(self, broker: int, before: float) -> tuple[float, dict | None]:
        best: tuple[float, dict | None] = (-INF, None)
        for ns, e in self.starts.get(broker, []):
            if ns <= before:
                best = (ns, e)
        return best


def check_split_coordinator(ops: Any, events: Any, *, offsets_partitions: int | None = None,
                            **_: Any) -> CheckResult:
    """``split-coordinator``: an ok commit answered by broker B (the completion's ``node``) when B was
    not the group's coordinator.  Three ways (``details.reason``):

    * ``deposed``: before the commit was invoked, another broker had finished loading the group's
      offsets partition at a higher leader epoch than any B held before the commit completed;
    * ``no-load``: B's process running at the invoke (or a later one) never started loading the
      partition before the commit completed;
    * ``unloaded``: B unloaded the partition before the invoke and did not load it again before
      the completion."""
    h = as_history(ops)
    ev = as_events(events)
    r = Report("split-coordinator", "commits_judged")
    commits = h.of("commit", "ok")
    with_node = [op for op in commits if is_int(op.node) and op.group is not None]
    r.stats["commits_without_node"] = len(commits) - len(with_node)
    if not with_node:
        return r.result()
    n = offsets_partition_count(ev, offsets_partitions)
    if not len(ev):
        r.unknown("split-coordinator: no broker events")
        return r.result()
    if n is None:
        r.unknown("split-coordinator: the number of __consumer_offsets partitions is unknown "
                  "(no topic_created event; pass offsets_partitions)")
        return r.result()
    co = _Coordinators(ev)
    for op in with_node:
        b, group = op.node, op.group
        p = partition_for(group, n)
        t_inv, t_done = op.inv_time, op.done_time
        r.count("commits_judged")
        held = [x for x in co.held.get((b, p), []) if x[0] < t_done]
        proc_ns, proc_e = co.process_start(b, t_inv)
        details = {"group": group, "broker": b, "partition": p}
        if not any(ns >= proc_ns for ns, _ep, _e in held):
            last = next((x[3] for x in reversed(co.loaded.get(p, [])) if x[0] < t_done), None)
            r.add("split-coordinator",
                  f"group {group}: broker {b} acknowledged a commit (index {op.done_index}) without having "
                  f"loaded offsets partition {p}", [op.invoke, op.done], [proc_e, last], reason="no-load", **details)
            continue
        ns_b, epoch_b, e_b = max(held, key=lambda x: (x[1], x[0]))
        deposer = next((x for x in co.loaded.get(p, []) if x[0] < t_inv and x[2] != b and x[1] > epoch_b), None)
        if deposer is not None:
            r.add("split-coordinator",
                  f"group {group}: broker {b} (offsets partition {p}, leader epoch {epoch_b}) acknowledged a commit "
                  f"(index {op.done_index}) invoked after broker {deposer[2]} had loaded it at leader epoch "
                  f"{deposer[1]}", [op.invoke, op.done], [deposer[3], e_b], reason="deposed",
                  epoch=epoch_b, deposer=deposer[2], deposer_epoch=deposer[1], **details)
            continue
        gone = [x for x in co.unloads.get((b, p), []) if x[0] < t_inv]
        if gone:
            u_ns, u_e = gone[-1]
            if not any(u_ns < ns < t_done for ns in co.reloads.get((b, p), [])):
                r.add("split-coordinator",
                      f"group {group}: broker {b} acknowledged a commit (index {op.done_index}) invoked after it "
                      f"had unloaded offsets partition {p}, without loading it again", [op.invoke, op.done],
                      [u_e], reason="unloaded", **details)
    return r.result()
