"""Checkers of the control plane and replication, from the brokers' event logs alone.

Controllers (one per epoch; no write from a deposed controller), leader
elections (clean unless allowed), and high watermarks (never backwards within
a broker process).  Rules and limits: docs/chaos.md, "Checkers".
"""
from __future__ import annotations

import bisect
from typing import Any

from judge.check_model import CheckResult, Events, Report, as_events, is_int

BROKER_PARTITION_EVENTS = ("became_leader", "became_follower", "isr_updated")
ROUNDING_SLACK_NS = 1_000   # write_ms is rounded to the µs


def _no_events(r: Report, ev: Events) -> bool:
    if len(ev):
        return False
    r.unknown(f"{r.name}: no broker events")
    return True


def _summaries(ev: Events) -> dict[int, dict]:
    """id(partition_state_written) -> the plan's partition_states_written line (same broker and
    process, the next one after it), when the controller lived to write it."""
    out: dict[int, dict] = {}
    pending: dict[tuple[Any, int], list[dict]] = {}
    for e in ev.all:
        key = (e.get("broker"), ev.process(e))
        if e.get("type") == "partition_state_written":
            pending.setdefault(key, []).append(e)
        elif e.get("type") == "partition_states_written":
            for w in pending.pop(key, []):
                out[id(w)] = e
    return out


def check_controllers(ops: Any, events: Any, **_: Any) -> CheckResult:
    """``multiple-controllers``: two brokers elected for one controller epoch.
    ``zombie-controller-write``: (ZooKeeper) a partition state written by a controller of epoch e
    whose writes began after a ``controller_elected`` of a higher epoch had been logged; (brokers)
    a ``became_leader``/``became_follower``/``isr_updated`` whose ``request_controller_epoch`` is
    below the highest controller epoch that broker process had already applied."""
    ev = as_events(events)
    r = Report("controllers", "states_written", "states_without_write_window", "broker_states_with_request_epoch")
    if _no_events(r, ev):
        return r.result()
    elected = ev.of("controller_elected")
    r.stats["elections"] = len(elected)
    by_epoch: dict[int, dict[Any, dict]] = {}
    for e in elected:
        if is_int(e.get("epoch")):
            by_epoch.setdefault(e["epoch"], {}).setdefault(e.get("broker"), e)
    for epoch, winners in sorted(by_epoch.items()):
        if len(winners) > 1:
            r.add("multiple-controllers", f"controller epoch {epoch} was won by brokers {sorted(winners)}",
                  events=list(winners.values()), epoch=epoch, brokers=sorted(winners))

    # ZooKeeper side: writes that landed after a newer controller's election
    el = sorted((e["mono_ns"], e["epoch"], e) for e in elected if is_int(e.get("epoch")))
    el_ns = [x[0] for x in el]
    run_max: list[tuple[int, dict]] = []
    for _ns, epoch, e in el:
        run_max.append((epoch, e) if not run_max or epoch > run_max[-1][0] else run_max[-1])
    summaries = _summaries(ev)
    for w in ev.of("partition_state_written"):
        r.count("states_written")
        s = summaries.get(id(w))
        if s is None or not is_int(s.get("mono_ns_written")) or not isinstance(s.get("write_ms"), (int, float)):
            r.count("states_without_write_window")
            continue
        began = s["mono_ns_written"] - round(s["write_ms"] * 1e6) - ROUNDING_SLACK_NS
        epochs = [x for x in (w.get("controller_epoch"), s.get("epoch")) if is_int(x)]
        if not epochs:
            continue
        writer = max(epochs)   # the writing controller's epoch (the plan's), as stored in the state
        i = bisect.bisect_left(el_ns, began)
        if i and run_max[i - 1][0] > writer:
            newer = next(x[2] for x in el[:i] if x[1] > writer)
            r.add("zombie-controller-write",
                  f"{w.get('topic')}/{w.get('partition')}: broker {w.get('broker')} wrote a state as controller epoch "
                  f"{writer} after broker {newer.get('broker')} had been elected with epoch {newer['epoch']}",
                  events=[w, newer, s], side="zookeeper", topic=w.get("topic"), partition=w.get("partition"),
                  epoch=writer, newer_epoch=newer["epoch"])

    # broker side: a stale controller's request applied
    latest: dict[tuple[Any, int], tuple[int, dict]] = {}
    for e in ev.all:
        t = e.get("type")
        key = (e.get("broker"), ev.process(e))
        if t == "leader_and_isr_unchanged" and is_int(e.get("controller_epoch")):
            if key not in latest or e["controller_epoch"] > latest[key][0]:
                latest[key] = (e["controller_epoch"], e)
        elif t in BROKER_PARTITION_EVENTS and is_int(e.get("request_controller_epoch")):
            r.count("broker_states_with_request_epoch")
            rce = e["request_controller_epoch"]
            if key in latest and rce < latest[key][0]:
                r.add("zombie-controller-write",
                      f"broker {e.get('broker')} applied a {t} for {e.get('topic')}/{e.get('partition')} from "
                      f"controller epoch {rce} after applying epoch {latest[key][0]}",
                      events=[e, latest[key][1]], side="broker", topic=e.get("topic"), partition=e.get("partition"),
                      epoch=rce, newer_epoch=latest[key][0])
            if key not in latest or rce > latest[key][0]:
                latest[key] = (rce, e)
    return r.result()


def check_unclean_elections(ops: Any, events: Any, *, unclean_election: bool = False, **_: Any) -> CheckResult:
    """``unclean-election``: a state with reason ``unclean_election``, or a leader change to a
    leader outside the previous ISR.  Not judged when unclean election is enabled."""
    ev = as_events(events)
    r = Report("unclean-election", "states_checked")
    if unclean_election:
        r.stats["skipped"] = "unclean.leader.election.enable is true"
        return r.result()
    if _no_events(r, ev):
        return r.result()
    announced = {(e.get("topic"), e.get("partition"), e.get("leader_epoch")): e
                 for e in ev.of("unclean_leader_election")}
    for w in ev.of("partition_state_written"):
        r.count("states_checked")
        leader, prev_isr, prev_leader = w.get("leader"), w.get("previous_isr"), w.get("previous_leader")
        changed = is_int(leader) and leader >= 0 and prev_isr is not None and prev_leader != leader
        if w.get("reason") == "unclean_election" or (changed and leader not in prev_isr):
            tp = f"{w.get('topic')}/{w.get('partition')}"
            r.add("unclean-election",
                  f"{tp}: broker {leader} became leader (epoch {w.get('leader_epoch')}, reason {w.get('reason')}) "
                  f"though it was not in the previous ISR {prev_isr}",
                  events=[w, announced.get((w.get("topic"), w.get("partition"), w.get("leader_epoch")))],
                  topic=w.get("topic"), partition=w.get("partition"), leader=leader, previous_isr=prev_isr)
    return r.result()


def check_hw(ops: Any, events: Any, **_: Any) -> CheckResult:
    """``hw-regression``: within one broker process, an ``hw_changed`` of a partition whose ``new`` is
    below the largest ``new`` seen before, unless the line says ``decreased: true`` (a follower
    lowered to its new leader's HW, or a truncation), which also becomes the new baseline."""
    ev = as_events(events)
    r = Report("hw", "hw_changes", "legitimate_decreases")
    if _no_events(r, ev):
        return r.result()
    top: dict[tuple[Any, int, Any, Any], tuple[int, dict]] = {}
    for e in ev.all:
        t = e.get("type")
        key = (e.get("broker"), ev.process(e), e.get("topic"), e.get("partition"))
        if t == "replica_stopped":
            top.pop(key, None)   # a replica hosted again starts from its checkpoint
        elif t == "hw_changed" and is_int(e.get("new")):
            r.count("hw_changes")
            new = e["new"]
            if e.get("decreased"):
                r.count("legitimate_decreases")
                top[key] = (new, e)
                continue
            if key in top and new < top[key][0]:
                r.add("hw-regression",
                      f"broker {e.get('broker')}: the HW of {e.get('topic')}/{e.get('partition')} went from "
                      f"{top[key][0]} back to {new} (not flagged as a follower's decrease)",
                      events=[e, top[key][1]], broker=e.get("broker"), topic=e.get("topic"),
                      partition=e.get("partition"), new=new, previous=top[key][0])
                top[key] = (new, e)   # report each regression once
                continue
            if key not in top or new >= top[key][0]:
                top[key] = (new, e)
    return r.result()
