"""The runs the analysis tests share (tests/conftest.py ``analysed``): small synthetic runs built with the
builders of tests/test_chaos_checkers.py, one per anomaly kind (and reason), the unknown verdicts, the near
misses and a clean one (``CASES``), and a real run with anomalies planted in its history (``doctor``)."""
from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from test_chaos_checkers import (
    PROBE,
    T0,
    T1,
    G,
    P,
    Run,
    admin_commits,
    clean_run,
    commit_after_unload,
    controller_race,
    group_poll,
    info_commit,
    open_lower_commit,
    state,
)

from judge.history import read_history
from node.events import read_run_events

# ---------------------------------------------------------------------- synthetic runs


def write_run(d: Path, ops: list[dict], events: list[dict]) -> None:
    """A run directory: history.jsonl and cluster/events/broker-<id>.jsonl (no events: no directory)."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "history.jsonl").write_text("".join(json.dumps(op, separators=(",", ":")) + "\n" for op in ops))
    by_broker: dict[int, list[dict]] = defaultdict(list)
    for e in events:
        by_broker[e["broker"]].append(e)
    for b, es in by_broker.items():
        (d / "cluster" / "events").mkdir(parents=True, exist_ok=True)
        (d / "cluster" / "events" / f"broker-{b}.jsonl").write_text(
            "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in sorted(es, key=lambda e: e["mono_ns"])))


def finished(r: Run) -> tuple[list[dict], list[dict]]:
    return r.finish()


def hook(where: str, fn: Callable[[Run], Any]) -> Callable[[Path], tuple[list, list]]:
    return lambda d: finished(clean_run(d, **{where: fn}))


def lost_write(beyond_hw: bool) -> Callable[[Path], tuple[list, list]]:
    def make(d: Path):
        ops, events = finished(clean_run(d))
        part = 1 if beyond_hw else 0
        final = next(op for op in ops if op.get("final") and op["type"] == "ok" and op["f"] == "poll"
                     and op["value"].get("partition") == part)
        if beyond_hw:
            final["value"]["records"].pop()
            final["value"]["high_watermark"] -= 1
        else:
            final["value"]["records"] = [rec for rec in final["value"]["records"] if rec[2] != 1]
        return ops, events
    return make


def lost_commit(group: str, offsets: dict | None) -> Callable[[Path], tuple[list, list]]:
    def make(d: Path):
        ops, events = finished(clean_run(d))
        final = [op for op in ops if op["f"] == "fetch-committed" and op["type"] == "ok" and op["group"] == group][-1]
        if offsets is None:
            final["value"]["offsets"]["t/0"] -= 1
        else:
            final["value"]["offsets"] = offsets
        return ops, events
    return make


def unloaded(d: Path):
    r = Run(d)
    commit_after_unload(r)
    r.fetch(node=1, final=True)
    return finished(r)


def hw_back(r: Run) -> None:
    r.hw[(2, T0)] -= 1
    r.ev(2, "hw_changed", topic="t", partition=0, old=r.hw[(2, T0)] + 1, new=r.hw[(2, T0)], reason="leader",
         decreased=False)


def hidden_send(r: Run) -> None:
    r.hidden.add(r.send(T1)["value"]["value"])


def reloaded(r: Run) -> None:
    inv = r.begin("commit", {"member": "m1", "generation": 2, "offsets": dict(r.committed[G])}, group=G)
    r.ev(1, "coordinator_load_started", partition=P, leader_epoch=2)
    r.ev(1, "coordinator_loaded", partition=P, leader_epoch=2)
    r.h.complete(inv, "ok", node=1)
    r.ev(2, "coordinator_unloaded", partition=P, leader_epoch=2, groups=2)
    r.ev(2, "coordinator_load_started", partition=P, leader_epoch=3)
    r.ev(2, "coordinator_loaded", partition=P, leader_epoch=3)


def partial_fetch(r: Run) -> None:
    r.fetch(node=2, offsets={"t/1": r.committed[G]["t/1"]})
    r.op("fetch-committed", {"partitions": ["t/0"]}, {"offsets": {}}, group=G, node=2)


def client_keys(d: Path):
    r = Run(d)
    r.commit("", -1, node=None, offsets={"my-topic-3": 5}, group=PROBE)
    r.fetch(node=None, group=PROBE, final=True, offsets={"my-topic-3": 4})
    return finished(r)


def capped(d: Path):
    r = Run(d)
    for _ in range(130):
        r.send(T0)
    r.op("poll", {"topic": "t", "partition": 0}, {"topic": "t", "partition": 0, "records": [], "high_watermark": 0},
         final=True)
    return finished(r)


def unmarked_finals(d: Path):
    ops, events = finished(clean_run(d))
    for op in ops:
        if op["f"] == "fetch-committed":
            op.pop("final", None)
    return ops, events


def without(types: tuple[str, ...]) -> Callable[[Path], tuple[list, list]]:
    def make(d: Path):
        ops, events = finished(clean_run(d))
        return ops, [e for e in events if e["type"] not in types]
    return make


def retained(with_event: bool) -> Callable[[Path], tuple[list, list]]:
    """t/1's records below its log start offset were deleted by retention (``log_segments_deleted``): the
    final read and the group never see them; without the event they are lost and unseen."""
    def make(d: Path):
        def deleted(r: Run) -> None:
            done = r.send(T1)
            r.hidden.add(done["value"]["value"])
            r.ev(3, "log_segments_deleted", topic="t", partition=1, segments=[0], reasons=["retention_ms"],
                 log_start_offset=done["value"]["offset"] + 1, is_leader=True)
        ops, events = finished(clean_run(d, middle=deleted))
        lso = next(e["log_start_offset"] for e in events if e["type"] == "log_segments_deleted")
        final = next(op for op in ops if op.get("final") and op["type"] == "ok" and op["f"] == "poll"
                     and op["value"].get("partition") == 1)
        final["value"]["records"] = [rec for rec in final["value"]["records"] if rec[2] >= lso]
        return ops, events if with_event else [e for e in events if e["type"] != "log_segments_deleted"]
    return make


def malformed(d: Path):
    ops, events = finished(clean_run(d))
    return ops + [{"index": len(ops), "type": "ok", "process": 999, "time": ops[-1]["time"] + 1, "f": "send",
                   "value": None, "error": None, "node": None, "group": None}], events


# case -> (builder of (ops, events), the kinds both checkers must find, the verdict)
CASES: dict[str, tuple[Callable[[Path], tuple[list, list]], set[str], str]] = {
    "syn-clean": (lambda d: finished(clean_run(d)), set(), "valid"),
    "syn-lost-write": (lost_write(False), {"lost-write"}, "invalid"),
    "syn-lost-write-beyond-hw": (lost_write(True), {"lost-write"}, "invalid"),
    "syn-inconsistent-offset": (hook("middle", lambda r: group_poll(r, ["t", 0, 0, "intruder"])),
                                {"inconsistent-offset"}, "invalid"),
    "syn-duplicate-value": (hook("middle", lambda r: group_poll(r, ["t", 1, 99, r.log[T0][0]])),
                            {"duplicate-value"}, "invalid"),
    "syn-commit-went-backwards": (hook("middle", lambda r: r.commit("m1", 2, node=2, offsets={"t/0": 1})),
                                  {"commit-went-backwards"}, "invalid"),
    "syn-lost-commit-lower": (lost_commit(G, None), {"lost-commit"}, "invalid"),
    "syn-lost-commit-gone": (lost_commit(PROBE, {"t/0": -1}), {"lost-commit"}, "invalid"),
    "syn-lost-commit-partial-fetch": (hook("middle", partial_fetch), {"lost-commit"}, "invalid"),
    "syn-lost-commit-client-keys": (client_keys, {"lost-commit"}, "invalid"),
    "syn-fenced-generation-commit": (hook("middle", lambda r: r.commit("m1", 1, node=2)),
                                     {"fenced-generation-commit"}, "invalid"),
    "syn-split-deposed": (hook("after_failover", lambda r: r.commit("m1", 1, node=1)), {"split-coordinator"},
                          "invalid"),
    "syn-split-never-loaded": (hook("middle", lambda r: r.commit("m1", 2, node=3)), {"split-coordinator"},
                               "invalid"),
    "syn-split-restarted": (hook("middle", lambda r: r.commit("m1", 2, node=1)), {"split-coordinator"}, "invalid"),
    "syn-split-unloaded": (unloaded, {"split-coordinator"}, "invalid"),
    "syn-multiple-controllers": (hook("after_failover", lambda r: r.ev(3, "controller_elected", epoch=2,
                                                                       epoch_zk_version=2, elect_ms=1.0)),
                                 {"multiple-controllers"}, "invalid"),
    "syn-zombie-zookeeper": (hook("after_failover", lambda r: r.states(
        1, 1, state(T1, "isr_shrink", 2, 0, [2, 3], 2, [2, 3, 1]))), {"zombie-controller-write"}, "invalid"),
    "syn-zombie-broker": (hook("middle", lambda r: r.ev(
        3, "became_follower", topic="t", partition=1, leader=2, leader_epoch=0, isr=[2, 3], zk_version=1,
        controller_epoch=1, request_controller_epoch=1)), {"zombie-controller-write"}, "invalid"),
    "syn-unclean-outside-isr": (hook("middle", lambda r: r.states(
        2, 2, state(T1, "offline_election", 1, 2, [1], 3, [3]))), {"unclean-election"}, "invalid"),
    "syn-unclean-by-reason": (hook("middle", lambda r: r.states(
        2, 2, state(T1, "unclean_election", 3, 2, [3], 3, [3]))), {"unclean-election"}, "invalid"),
    "syn-hw-regression": (hook("middle", hw_back), {"hw-regression"}, "invalid"),
    "syn-unseen": (hook("middle", hidden_send), {"unseen-message"}, "invalid"),
    "syn-not-drained": (lambda d: finished(clean_run(d, drain=False)), {"unseen-message"}, "invalid"),
    "syn-capped": (capped, {"lost-write"}, "invalid"),
    # unknown verdicts
    "syn-no-final-read": (lambda d: finished(clean_run(d, final_reads=(T0,))), set(), "unknown"),
    "syn-no-final-fetch": (lambda d: finished(clean_run(d, final_fetch=False)), set(), "unknown"),
    "syn-no-events": (lambda d: (finished(clean_run(d))[0], []), set(), "unknown"),
    "syn-no-offsets-count": (without(("topic_created",)), set(), "unknown"),
    "syn-malformed": (malformed, set(), "unknown"),
    # near misses: not anomalies
    "syn-info-commit": (hook("middle", info_commit), set(), "valid"),
    "syn-admin-commits": (hook("middle", admin_commits), set(), "valid"),
    "syn-open-lower-commit": (hook("middle", open_lower_commit), set(), "valid"),
    "syn-race-summary": (hook("middle", controller_race(True)), set(), "valid"),
    # no write window: not a zombie; but broker 2 restarted without reloading: split-coordinator
    "syn-race-no-summary": (hook("middle", controller_race(False)), {"split-coordinator"}, "invalid"),
    "syn-reloaded-coordinator": (hook("middle", reloaded), set(), "valid"),
    "syn-unmarked-final-fetches": (unmarked_finals, set(), "valid"),
    "syn-retained": (retained(True), set(), "valid"),
    "syn-retained-without-event": (retained(False), {"lost-write", "unseen-message"}, "invalid"),
}


def doctor(src: Path, d: Path) -> Path:
    """The real clean run with two anomalies planted in its history: a record left out of a final read
    (``lost-write``) and a group's final committed offset lowered (``lost-commit``)."""
    ops = read_history(src / "history.jsonl")
    final = max((op for op in ops if op.get("final") and op["f"] == "poll" and op["type"] == "ok"),
                key=lambda op: len(op["value"].get("records", [])))
    recs = final["value"]["records"]
    del recs[len(recs) // 2]
    fetch = [op for op in ops if op["f"] == "fetch-committed" and op["type"] == "ok" and op.get("final")
             and any(isinstance(o, int) and o > 0 for o in op["value"].get("offsets", {}).values())][-1]
    key = next(k for k, o in sorted(fetch["value"]["offsets"].items()) if isinstance(o, int) and o > 0)
    fetch["value"]["offsets"][key] -= 1
    write_run(d, ops, read_run_events(src / "cluster"))
    return d


