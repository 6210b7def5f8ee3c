"""judge.checkers on synthetic runs: one clean run, then one planted anomaly per kind.

The clean run (:func:`clean_run`): brokers 1-3, topic ``t`` with partitions 0
(led by 1) and 1 (led by 2), ``__consumer_offsets`` with 4 partitions, group
``g1`` and the probe group on offsets partition P (led by 1).  Broker 1 is
killed: broker 2 becomes controller (epoch 2), leads t/0 and P, loads P; a
commit invoked before that load is answered late by broker 1.  The group
rejoins (generation 2); broker 1 comes back with an older checkpointed HW; a
follower's HW goes down with ``decreased: true``; t/1's leadership moves
within its ISR.  At the end: final reads, the group drains, final
fetch-committed.  Hooks plant anomalies at three points of that story.
"""
from __future__ import annotations

import itertools
import json
from typing import Any, Callable

import pytest

from judge.checkers import check, check_controllers, check_lost_commits, check_split_coordinator
from judge.registry import KINDS
from judge.history import HistoryWriter, read_history
from kafkacommon.hashing import partition_for

OFFSETS = "__consumer_offsets"
N_OFFSETS = 4
G = "g1"
P = partition_for(G, N_OFFSETS)
PROBE = next(n for n in (f"probe-{i}" for i in range(100)) if partition_for(n, N_OFFSETS) == P)
T0, T1 = ("t", 0), ("t", 1)


class Run:
    """A history (through HistoryWriter) and event logs on one fake clock (+1 µs per reading)."""

    def __init__(self, tmp_path) -> None:
        self._ticks = itertools.count(1_000_000_000, 1_000)
        self.path = tmp_path / "history.jsonl"
        self.h = HistoryWriter(self.path, clock=self.clock)
        self.events: list[dict] = []
        self._procs = itertools.count()
        self._values = itertools.count()
        self.log: dict[tuple, list[str]] = {T0: [], T1: []}
        self.leader = {T0: 1, T1: 2}
        self.isr = {T0: [1, 2, 3], T1: [2, 3, 1]}
        self.alive = {1, 2, 3}
        self.hw: dict[tuple, int] = {}
        self.zk_version: dict[tuple, int] = {}
        self.positions: dict[tuple, int] = {T0: 0, T1: 0}
        self.committed: dict[str, dict[str, int]] = {G: {}, PROBE: {}}
        self.hidden: set[str] = set()     # values the group's polls never return

    def clock(self) -> int:
        return next(self._ticks)

    # ------------------------------------------------------------------ events
    def ev(self, broker: int, type_: str, **fields: Any) -> dict:
        e = {"ts_ms": 0.0, "mono_ns": self.clock(), "broker": broker, "type": type_, **fields}
        self.events.append(e)
        return e

    def states(self, controller: int, epoch: int, *writes: dict) -> list[dict]:
        """One controller plan: its writes land, then their lines and the plan's summary."""
        began = self.clock()
        landed = self.clock()
        lines = []
        for w in writes:
            tp = (w["topic"], w["partition"])
            self.zk_version[tp] = self.zk_version.get(tp, -1) + 1
            lines.append(self.ev(controller, "partition_state_written", controller_epoch=epoch,
                                 zk_version=self.zk_version[tp], **w))
        self.ev(controller, "partition_states_written", epoch=epoch, count=len(writes),
                write_ms=(landed - began) / 1e6, mono_ns_written=landed)
        return lines

    def apply(self, tp: tuple, leader: int, epoch: int, isr: list[int], cepoch: int, brokers) -> None:
        for b in brokers:
            self.ev(b, "became_leader" if b == leader else "became_follower", topic=tp[0], partition=tp[1],
                    leader=leader, leader_epoch=epoch, isr=isr, zk_version=self.zk_version.get(tp, 0),
                    controller_epoch=cepoch, request_controller_epoch=cepoch)
        if tp in self.log:
            self.leader[tp], self.isr[tp] = leader, isr

    def set_hw(self, broker: int, tp: tuple, new: int, reason: str = "leader") -> dict | None:
        old = self.hw.get((broker, tp), 0)
        self.hw[(broker, tp)] = new
        if new == old:
            return None
        return self.ev(broker, "hw_changed", topic=tp[0], partition=tp[1], old=old, new=new, reason=reason,
                       decreased=new < old)

    # ------------------------------------------------------------------ history
    def op(self, f: str, value: Any = None, out: Any = None, result: str = "ok", *, group: str | None = None,
           node: int | None = None, error: str | None = None, final: bool = False) -> tuple[dict, dict]:
        inv = self.h.invoke(next(self._procs), f, value, group=group, final=final)
        return inv, self.h.complete(inv, result, out, node=node, error=error)

    def join_sync(self, member: str, gen: int, node: int) -> None:
        self.op("join", {"member": member}, {"member": "m1", "generation": gen, "leader": True, "protocol": "range"},
                group=G, node=node)
        self.op("sync", {"member": "m1", "generation": gen},
                {"member": "m1", "generation": gen, "assignment": ["t/0", "t/1"]}, group=G, node=node)

    def begin(self, f: str, value: Any, *, group: str | None = None) -> dict:
        return self.h.invoke(next(self._procs), f, value, group=group)

    def send(self, tp: tuple) -> dict:
        value = f"v{next(self._values)}"
        inv = self.h.invoke(next(self._procs), "send", {"topic": tp[0], "value": value})
        offset = len(self.log[tp])
        self.log[tp].append(value)
        leader = self.leader[tp]
        self.set_hw(leader, tp, offset + 1)
        for b in self.isr[tp]:
            if b != leader and b in self.alive:
                self.set_hw(b, tp, offset + 1, reason="follower")
        return self.h.complete(inv, "ok", {"topic": tp[0], "partition": tp[1], "offset": offset, "value": value},
                               node=leader)

    def consume(self, member: str, gen: int) -> dict:
        records = []
        for tp in (T0, T1):
            for o in range(self.positions[tp], len(self.log[tp])):
                if self.log[tp][o] not in self.hidden:
                    records.append([tp[0], tp[1], o, self.log[tp][o]])
            self.positions[tp] = len(self.log[tp])
        return self.op("poll", {"member": member, "generation": gen},
                       {"member": member, "generation": gen, "records": records}, group=G)[1]

    def commit(self, member: str, gen: int, node: int, offsets: dict | None = None, result: str = "ok",
               group: str = G) -> tuple[dict, dict]:
        offsets = offsets or {f"{t}/{p}": pos for (t, p), pos in self.positions.items()}
        pair = self.op("commit", {"member": member, "generation": gen, "offsets": offsets}, result=result,
                       group=group, node=node, error=None if result == "ok" else "REQUEST_TIMED_OUT")
        if result == "ok":
            self.committed[group].update(offsets)
        return pair

    def fetch(self, node: int, group: str = G, final: bool = False, offsets: dict | None = None) -> dict:
        got = dict(self.committed[group]) if offsets is None else offsets
        return self.op("fetch-committed", {}, {"offsets": got}, group=group, node=node, final=final)[1]

    def final_read(self, tp: tuple) -> dict:
        records = [[tp[0], tp[1], o, v] for o, v in enumerate(self.log[tp])]
        return self.op("poll", {"topic": tp[0], "partition": tp[1]},
                       {"topic": tp[0], "partition": tp[1], "records": records, "high_watermark": len(records)},
                       final=True)[1]

    def finish(self) -> tuple[list[dict], list[dict]]:
        self.h.close()
        return read_history(self.path), self.events


def state(tp: tuple, reason: str, leader: int, epoch: int, isr: list[int], prev: int | None,
          prev_isr: list[int] | None) -> dict:
    return {"topic": tp[0], "partition": tp[1], "reason": reason, "leader": leader, "leader_epoch": epoch,
            "isr": isr, "previous_leader": prev, "previous_isr": prev_isr}


Hook = Callable[[Run], None] | None


def clean_run(tmp_path, *, after_failover: Hook = None, middle: Hook = None, final_reads=(T0, T1),
              drain: bool = True, final_fetch: bool = True) -> Run:
    r = Run(tmp_path)
    for b in (1, 2, 3):
        r.ev(b, "broker_starting", host="127.0.0.1", port=9090 + b, pid=100 + b)
    r.ev(1, "controller_elected", epoch=1, epoch_zk_version=1, elect_ms=1.0)
    r.states(1, 1, state(T0, "new_partition", 1, 0, [1, 2, 3], None, None),
             state(T1, "new_partition", 2, 0, [2, 3, 1], None, None),
             state((OFFSETS, P), "new_partition", 1, 0, [1, 2, 3], None, None))
    r.ev(1, "topic_created", controller_epoch=1, topic=OFFSETS, partitions=N_OFFSETS, replication_factor=3)
    r.apply((OFFSETS, P), 1, 0, [1, 2, 3], 1, (1, 2, 3))
    r.apply(T0, 1, 0, [1, 2, 3], 1, (1, 2, 3))
    r.apply(T1, 2, 0, [2, 3, 1], 1, (1, 2, 3))
    r.ev(1, "coordinator_load_started", partition=P, leader_epoch=0)
    r.ev(1, "coordinator_loaded", partition=P, leader_epoch=0, records=0, groups=0)
    for i in range(4):
        r.send((T0, T1)[i % 2])
    r.join_sync("", 1, node=1)
    r.consume("m1", 1)
    r.commit("m1", 1, node=1)
    r.fetch(node=1)
    r.commit("", -1, node=1, offsets={"t/0": 1}, group=PROBE)     # a probe: simple commits
    r.fetch(node=1, group=PROBE)
    r.send(T0)
    r.consume("m1", 1)
    spanning = r.begin("commit", {"member": "m1", "generation": 1, "offsets": {"t/0": 3, "t/1": 2}}, group=G)

    # broker 1 dies; broker 2 takes the controller, t/0 and the offsets partition
    r.h.nemesis("kill", {"fault": 0, "phase": "start", "kind": "kill", "target": "coordinator:g1", "nodes": [1]})
    r.alive.discard(1)
    r.ev(2, "controller_elected", epoch=2, epoch_zk_version=2, elect_ms=1.0)
    r.states(2, 2, state((OFFSETS, P), "offline_election", 2, 1, [2, 3], 1, [1, 2, 3]),
             state(T0, "offline_election", 2, 1, [2, 3], 1, [1, 2, 3]))
    r.apply((OFFSETS, P), 2, 1, [2, 3], 2, (2, 3))
    r.apply(T0, 2, 1, [2, 3], 2, (2, 3))
    r.ev(3, "leader_and_isr_unchanged", partitions=1, controller_epoch=2)
    r.ev(2, "coordinator_load_started", partition=P, leader_epoch=1)
    r.ev(2, "coordinator_loaded", partition=P, leader_epoch=1, records=3, groups=2)
    # the commit sent to broker 1 before the failover: its answer is recorded only now
    done = r.h.complete(spanning, "ok", node=1)
    r.committed[G].update(done["value"]["offsets"])
    if after_failover:
        after_failover(r)

    # the group moves to the new coordinator: generation 2
    r.join_sync("m1", 2, node=2)
    r.op("heartbeat", {"member": "m1", "generation": 2}, group=G, node=2)
    for i in range(4):
        r.send((T0, T1)[i % 2])
    r.consume("m1", 2)
    r.commit("m1", 2, node=2)
    r.commit("", -1, node=2, offsets={"t/0": 2}, group=PROBE)
    r.fetch(node=2, group=PROBE)
    # a follower's HW goes down to its new leader's (decreased), then up again
    top = r.hw[(3, T1)]
    r.set_hw(3, T1, top - 1, reason="follower")
    r.set_hw(3, T1, top, reason="follower")

    # broker 1 comes back with an older checkpointed HW and follows t/0
    r.h.nemesis("heal", {"fault": 0, "phase": "heal", "kind": "kill", "target": "coordinator:g1", "nodes": [1]})
    r.ev(1, "broker_starting", host="127.0.0.1", port=9091, pid=201)
    r.hw[(1, T0)] = 0
    r.set_hw(1, T0, 1, reason="follower")
    r.apply(T0, 2, 1, [2, 3], 2, (1,))
    r.alive.add(1)
    r.set_hw(1, T0, len(r.log[T0]), reason="follower")
    r.states(2, 2, state(T0, "isr_expand", 2, 1, [2, 3, 1], 2, [2, 3]))
    r.isr[T0] = [2, 3, 1]
    # t/1 moves to broker 3, within its ISR
    r.states(2, 2, state(T1, "preferred_admin", 3, 1, [2, 3, 1], 2, [2, 3, 1]))
    r.apply(T1, 3, 1, [2, 3, 1], 2, (1, 2, 3))
    r.hw[(3, T1)] = r.hw[(2, T1)]
    if middle:
        middle(r)
    r.send(T1)
    r.consume("m1", 2)
    r.commit("m1", 2, node=2)
    r.send(T0)   # consumed only by the drain

    # end of run: final reads, the drain, the final committed offsets
    for tp in final_reads:
        r.final_read(tp)
    if drain:
        r.consume("m1", 2)
        r.commit("m1", 2, node=2)
    if final_fetch:
        r.fetch(node=2, final=True)
    r.fetch(node=2, group=PROBE, final=True)
    return r


def run_check(r: Run, **kw) -> Any:
    ops, events = r.finish()
    result = check(ops, events, **kw)
    json.dumps(result.to_json())   # always serialisable
    return result


def assert_only(result, kind: str) -> None:
    assert result.verdict == "invalid" and result.exit_code == 1, result.to_json()
    assert result.kinds() == {kind}, [(a.kind, a.message) for a in result.anomalies]


# ---------------------------------------------------------------------- the clean run

def test_the_clean_run_is_valid(tmp_path):
    result = run_check(clean_run(tmp_path))
    assert result.anomalies == [] and result.unknowns == [], result.to_json()
    assert result.verdict == "valid" and result.exit_code == 0
    s = result.stats
    assert s["lost-write"]["acknowledged_sends"] == 11 and s["lost-write"]["judged"] == 11
    assert s["lost-write"]["final_read_records"] == 11
    assert s["split-coordinator"]["commits_judged"] == 7 and s["split-coordinator"]["commits_without_node"] == 0
    assert s["fenced-generation"]["commits_judged"] == 5
    assert s["hw"]["legitimate_decreases"] == 1
    assert s["unseen-message"]["sends_judged"] == 11
    assert s["controllers"]["broker_states_with_request_epoch"] > 0
    assert set(KINDS) == {"lost-write", "inconsistent-offset", "duplicate-value", "commit-went-backwards",
                          "lost-commit", "fenced-generation-commit", "split-coordinator", "multiple-controllers",
                          "zombie-controller-write", "unclean-election", "hw-regression", "unseen-message"}


# ---------------------------------------------------------------------- one planted anomaly per kind

def final_read_of(ops: list[dict], partition: int) -> dict:
    return next(op for op in ops if op.get("final") and op["type"] == "ok" and op["value"].get("partition") == partition)


@pytest.mark.parametrize("beyond_hw", [False, True])
def test_lost_write(tmp_path, beyond_hw):
    """The final read of t/0 lacks offset 1, or that of t/1 ends one record early (its HW too)."""
    ops, events = clean_run(tmp_path).finish()
    final = final_read_of(ops, 1 if beyond_hw else 0)
    if beyond_hw:
        final["value"]["records"].pop()
        final["value"]["high_watermark"] -= 1
    else:
        final["value"]["records"] = [rec for rec in final["value"]["records"] if rec[2] != 1]
    result = check(ops, events)
    assert_only(result, "lost-write")
    (a,) = result.anomalies
    lost = next(op for op in ops if op["f"] == "send" and op["type"] == "ok"
                and (op["value"]["partition"], op["value"]["offset"]) == (a.details["partition"], a.details["offset"]))
    assert lost in a.ops and final in a.ops
    assert a.details["offset"] == (len(final["value"]["records"]) if beyond_hw else 1)
    assert ("high watermark" in a.message) == beyond_hw


def plant(tmp_path, kind: str, make: Callable[[Run], Any], where: str = "middle") -> tuple[Any, Any]:
    """Run the clean run with ``make(r)`` (it returns what it planted) at ``where``: the verdict is
    invalid with exactly one anomaly, of ``kind``.  Returns (what was planted, the anomaly)."""
    box: list = []
    result = run_check(clean_run(tmp_path, **{where: lambda r: box.append(make(r))}))
    assert_only(result, kind)
    (a,) = result.anomalies
    return box[0], a


def group_poll(r: Run, *records: list) -> dict:
    return r.op("poll", {"member": "m1", "generation": 2}, {"member": "m1", "generation": 2,
                                                             "records": list(records)}, group=G)[1]


def test_inconsistent_offset(tmp_path):
    poll, a = plant(tmp_path, "inconsistent-offset", lambda r: group_poll(r, ["t", 0, 0, "intruder"]))
    assert poll in a.ops and a.details["offset"] == 0


def test_duplicate_value(tmp_path):
    poll, a = plant(tmp_path, "duplicate-value", lambda r: group_poll(r, ["t", 1, 99, r.log[T0][0]]))
    assert poll in a.ops


def test_commit_went_backwards(tmp_path):
    (inv, done), a = plant(tmp_path, "commit-went-backwards", lambda r: r.commit("m1", 2, node=2, offsets={"t/0": 1}))
    assert inv in a.ops and done in a.ops and a.details["previous"] == 5


@pytest.mark.parametrize("group, offsets", [(G, None), (PROBE, {"t/0": -1})], ids=["lower", "gone"])
def test_lost_commit(tmp_path, group, offsets):
    ops, events = clean_run(tmp_path).finish()
    final = [op for op in ops if op["f"] == "fetch-committed" and op["type"] == "ok" and op["group"] == group][-1]
    if offsets is None:
        final["value"]["offsets"]["t/0"] -= 1
    else:
        final["value"]["offsets"] = offsets
    result = check(ops, events)
    assert_only(result, "lost-commit")
    (a,) = result.anomalies
    assert final in a.ops and a.details["group"] == group and ("no offset" in a.message) == (offsets is not None)


def test_fenced_generation_commit(tmp_path):
    (_inv, done), a = plant(tmp_path, "fenced-generation-commit", lambda r: r.commit("m1", 1, node=2))
    assert done in a.ops and a.details["synced"] == 2


def test_split_coordinator_deposed(tmp_path):
    (_inv, done), a = plant(tmp_path, "split-coordinator", lambda r: r.commit("m1", 1, node=1), "after_failover")
    assert a.details["reason"] == "deposed" and a.details["broker"] == 1 and a.details["deposer"] == 2
    assert done in a.ops and any(e["type"] == "coordinator_loaded" and e["broker"] == 2 for e in a.events)


@pytest.mark.parametrize("node", [3, 1], ids=["never-loaded", "restarted-without-a-reload"])
def test_split_coordinator_without_a_load(tmp_path, node):
    """Broker 3 never loaded P; broker 1 loaded it in its first process only."""
    (_inv, done), a = plant(tmp_path, "split-coordinator", lambda r: r.commit("m1", 2, node=node))
    assert a.details["reason"] == "no-load" and done in a.ops


def commit_after_unload(r: Run) -> tuple[dict, dict]:
    """Broker 1 loads P, takes a commit, unloads P, then takes another: (the unload, the late commit).
    Shared with the Spark checkers' cases (tests/analysis_cases.py)."""
    r.ev(1, "broker_starting", host="h", port=1, pid=1)
    r.ev(1, "topic_created", controller_epoch=1, topic=OFFSETS, partitions=N_OFFSETS, replication_factor=1)
    r.ev(1, "coordinator_load_started", partition=P, leader_epoch=0)
    r.ev(1, "coordinator_loaded", partition=P, leader_epoch=0)
    r.commit("m", -1, node=1, offsets={"t/0": 1})
    unload = r.ev(1, "coordinator_unloaded", partition=P, leader_epoch=1, groups=1)
    _inv, late = r.commit("m", -1, node=1, offsets={"t/0": 2})
    return unload, late


def test_split_coordinator_after_an_unload(tmp_path):
    r = Run(tmp_path)
    unload, late = commit_after_unload(r)
    ops, events = r.finish()
    result = check_split_coordinator(ops, events)
    assert result.kinds() == {"split-coordinator"}
    (a,) = result.anomalies
    assert a.details["reason"] == "unloaded" and late in a.ops and unload in a.events


def test_multiple_controllers(tmp_path):
    e, a = plant(tmp_path, "multiple-controllers", lambda r: r.ev(3, "controller_elected", epoch=2,
                                                                  epoch_zk_version=2, elect_ms=1.0), "after_failover")
    assert e in a.events and a.details["brokers"] == [2, 3]


def test_zombie_controller_write_to_zookeeper(tmp_path):
    lines, a = plant(tmp_path, "zombie-controller-write",
                     lambda r: r.states(1, 1, state(T1, "isr_shrink", 2, 0, [2, 3], 2, [2, 3, 1])), "after_failover")
    assert a.details["side"] == "zookeeper" and lines[0] in a.events and a.details["newer_epoch"] == 2


def test_zombie_controller_request_applied_by_a_broker(tmp_path):
    e, a = plant(tmp_path, "zombie-controller-write", lambda r: r.ev(
        3, "became_follower", topic="t", partition=1, leader=2, leader_epoch=0, isr=[2, 3], zk_version=1,
        controller_epoch=1, request_controller_epoch=1))
    assert a.details["side"] == "broker" and e in a.events


def test_unclean_election_outside_the_previous_isr(tmp_path):
    lines, a = plant(tmp_path, "unclean-election",
                     lambda r: r.states(2, 2, state(T1, "offline_election", 1, 2, [1], 3, [3])))
    assert lines[0] in a.events


def test_unclean_election_by_reason_and_when_it_is_allowed(tmp_path):
    r = clean_run(tmp_path, middle=lambda r: r.states(2, 2, state(T1, "unclean_election", 3, 2, [3], 3, [3])))
    ops, events = r.finish()
    assert_only(check(ops, events), "unclean-election")
    allowed = check(ops, events, unclean_election=True)
    assert allowed.verdict == "valid" and allowed.stats["unclean-election"]["skipped"]


def test_hw_regression(tmp_path):
    def back(r: Run) -> dict:
        r.hw[(2, T0)] -= 1   # the HW moves back with no "decreased" flag
        return r.ev(2, "hw_changed", topic="t", partition=0, old=r.hw[(2, T0)] + 1, new=r.hw[(2, T0)],
                    reason="leader", decreased=False)
    e, a = plant(tmp_path, "hw-regression", back)
    assert e in a.events and a.details["broker"] == 2


def test_unseen_message(tmp_path):
    def hidden(r: Run) -> dict:
        done = r.send(T1)
        r.hidden.add(done["value"]["value"])
        return done
    done, a = plant(tmp_path, "unseen-message", hidden)
    assert a.details["reason"] == "unseen" and done in a.ops


def test_unseen_message_not_drained(tmp_path):
    result = run_check(clean_run(tmp_path, drain=False))
    assert_only(result, "unseen-message")
    (a,) = result.anomalies
    assert a.details["reason"] == "not-drained" and "not-drained" in a.message
    assert a.details["topic"] == "t" and a.details["partition"] == 0 and a.details["count"] == 1


# ---------------------------------------------------------------------- unknown verdicts

def test_a_partition_without_a_final_read_is_unknown(tmp_path):
    r = clean_run(tmp_path, final_reads=(T0,))
    ops, events = r.finish()
    result = check(ops, events)
    assert result.verdict == "unknown" and result.exit_code == 2 and result.anomalies == []
    assert any("t/1" in u for u in result.unknowns)
    assert check(ops, events, final_reads_required=False).verdict == "valid"


def test_a_group_without_a_final_fetch_committed_is_unknown(tmp_path):
    result = run_check(clean_run(tmp_path, final_fetch=False))
    assert result.verdict == "unknown" and result.anomalies == []
    assert any(f"group {G}" in u for u in result.unknowns)


def test_missing_events_or_a_malformed_history_is_unknown(tmp_path):
    ops, events = clean_run(tmp_path).finish()
    assert check(ops, []).verdict == "unknown"
    bad = check(ops + [{"index": len(ops), "type": "ok", "process": 999, "time": 0, "f": "send"}], events)
    assert bad.verdict == "unknown" and "malformed" in bad.unknowns[0]


def test_split_coordinator_needs_the_offsets_partition_count(tmp_path):
    ops, events = clean_run(tmp_path).finish()
    events = [e for e in events if e["type"] != "topic_created"]
    assert check_split_coordinator(ops, events).verdict == "unknown"
    assert check_split_coordinator(ops, events, offsets_partitions=N_OFFSETS).verdict == "valid"


# ---------------------------------------------------------------------- near misses: not anomalies

def info_commit(r: Run) -> None:
    r.commit("m1", 2, node=2, offsets={"t/0": 100}, result="info")   # its outcome is unknown: no baseline
    r.fetch(node=2)                                                     # without 100: fine


def admin_commits(r: Run) -> None:
    r.commit("", -1, node=2, offsets={"t/0": 1}, group=PROBE)   # a reset below the probe's 2
    r.commit("", -1, node=2, offsets={"t/0": 1, "t/1": 0})       # an admin reset of g1, after generation 2
    r.fetch(node=2, group=PROBE)
    r.commit("m1", 2, node=2)                                      # the member commits its positions again


def open_lower_commit(r: Run) -> None:
    r.begin("commit", {"member": "zombie", "generation": 2, "offsets": {"t/0": 1}}, group=G)   # never completes
    r.fetch(node=2, offsets={"t/0": 1, "t/1": r.committed[G]["t/1"]})   # it may have landed: not a lost commit


@pytest.mark.parametrize("hook, stat", [(info_commit, None),
                                        (admin_commits, ("commit-order", "admin_commits_not_judged", 5)),
                                        (open_lower_commit, ("lost-commit", "explained_by_lower_commit", 3))])
def test_commits_that_are_not_anomalies(tmp_path, hook, stat):
    result = run_check(clean_run(tmp_path, middle=hook))
    assert result.verdict == "valid", result.to_json()
    if stat:
        assert result.stats[stat[0]][stat[1]] == stat[2]


def controller_race(summary: bool):
    """Broker 2 (epoch 2) writes; broker 3 is elected (epoch 3) before broker 2 logs the lines; with
    ``summary`` broker 2 logs its write's landing, without it broker 2 restarts instead."""
    def race(r: Run) -> None:
        began, landed = r.clock(), r.clock()
        r.ev(3, "controller_elected", epoch=3, epoch_zk_version=3, elect_ms=1.0)
        r.ev(2, "partition_state_written", topic="t", partition=1, reason="isr_shrink", leader=3, leader_epoch=1,
             isr=[3, 2], controller_epoch=2, zk_version=9, previous_leader=3, previous_isr=[2, 3, 1])
        if summary:
            r.ev(2, "partition_states_written", epoch=2, count=1, write_ms=(landed - began) / 1e6,
                 mono_ns_written=landed)
        else:
            r.ev(2, "broker_starting", host="h", port=1, pid=2)
    return race


@pytest.mark.parametrize("summary", [True, False], ids=["landed-before-the-election", "no-summary"])
def test_stale_controller_lines_logged_after_an_election_are_not_always_zombies(tmp_path, summary):
    """Broker 2 (epoch 2) writes; broker 3 is elected (epoch 3) before broker 2 logs the lines: the
    write window began before the election, or is unknown (broker 2 died before its summary)."""
    ops, events = clean_run(tmp_path, middle=controller_race(summary)).finish()
    result = check_controllers(ops, events)
    assert result.verdict == "valid", result.to_json()
    assert result.stats["controllers"]["states_without_write_window"] == (0 if summary else 1)


def test_a_commit_answered_by_a_reloaded_coordinator_is_fine(tmp_path):
    """Broker 1 is deposed (epoch 1 on broker 2), then leads again at epoch 2 before the answer."""
    def back(r: Run) -> None:
        inv = r.begin("commit", {"member": "m1", "generation": 2, "offsets": dict(r.committed[G])}, group=G)
        r.ev(1, "coordinator_load_started", partition=P, leader_epoch=2)
        r.ev(1, "coordinator_loaded", partition=P, leader_epoch=2)
        r.h.complete(inv, "ok", node=1)
        r.ev(2, "coordinator_unloaded", partition=P, leader_epoch=2, groups=2)
        r.ev(2, "coordinator_load_started", partition=P, leader_epoch=3)   # and back to 2 (tidy for later commits)
        r.ev(2, "coordinator_loaded", partition=P, leader_epoch=3)
    ops, events = clean_run(tmp_path, middle=back).finish()
    assert check_split_coordinator(ops, events).verdict == "valid"


def test_a_checker_runs_alone(tmp_path):
    ops, events = clean_run(tmp_path).finish()
    result = check_lost_commits(ops, events)
    assert result.verdict == "valid" and result.stats["lost-commit"]["fetches_checked"] == 5   # g1: 2, probe: 3


def test_anomalies_listed_are_capped_but_all_counted(tmp_path):
    r = Run(tmp_path)
    sends = [r.send(T0) for _ in range(130)]
    r.op("poll", {"topic": "t", "partition": 0}, {"topic": "t", "partition": 0, "records": [], "high_watermark": 0},
         final=True)
    ops, events = r.finish()
    result = check(ops, events)
    assert result.anomaly_counts()["lost-write"] == 130 and len(result.anomalies) == 100
    assert sends[0] in result.anomalies[0].ops
    dumped = result.to_json()
    assert dumped["anomaly_counts"]["lost-write"] == 130 and len(json.dumps(dumped)) < 200_000


def test_a_fetch_tells_only_about_the_partitions_it_asked_for(tmp_path):
    """A member's fetch for its new partitions says nothing of the others; listed partitions that
    come back empty are judged."""
    def partial(r: Run) -> None:
        r.fetch(node=2, offsets={"t/1": r.committed[G]["t/1"]})                 # t/0 not asked: fine
        r.op("fetch-committed", {"partitions": ["t/0"]}, {"offsets": {}}, group=G, node=2)
    result = run_check(clean_run(tmp_path, middle=partial))
    assert_only(result, "lost-commit")
    (a,) = result.anomalies
    assert a.details["topic"] == "t" and a.details["partition"] == 0 and a.details["fetched"] is None


def test_client_style_partition_keys_are_read(tmp_path):
    r = Run(tmp_path)
    r.commit("", -1, node=None, offsets={"my-topic-3": 5}, group=PROBE)
    r.fetch(node=None, group=PROBE, final=True, offsets={"my-topic-3": 4})
    ops, events = r.finish()
    result = check_lost_commits(ops, events)
    assert result.kinds() == {"lost-commit"} and result.anomalies[0].details["topic"] == "my-topic"
    assert result.anomalies[0].details["partition"] == 3


def test_unmarked_final_fetches_fall_back_to_the_last_answer(tmp_path):
    """No fetch-committed is marked final: the last ok answer for each partition stands in."""
    r = clean_run(tmp_path)
    ops, events = r.finish()
    for op in ops:
        if op["f"] == "fetch-committed":
            op.pop("final", None)
    assert check(ops, events).verdict == "valid"


def test_records_below_the_log_start_offset_are_retained_away_not_lost(tmp_path):
    """Retention deletes records below a partition's log start offset (the event log_segments_deleted):
    the final read and the group never see them, and the run is still valid; without the event the
    same history has lost writes and an unseen message."""
    def retained(r: Run) -> None:
        done = r.send(T1)
        r.hidden.add(done["value"]["value"])  # deleted before the group polled it
        r.ev(3, "log_segments_deleted", topic="t", partition=1, segments=[0], reasons=["retention_ms"],
             log_start_offset=done["value"]["offset"] + 1, is_leader=True)
    ops, events = clean_run(tmp_path, middle=retained).finish()
    lso = next(e["log_start_offset"] for e in events if e["type"] == "log_segments_deleted")
    final = final_read_of(ops, 1)
    final["value"]["records"] = [rec for rec in final["value"]["records"] if rec[2] >= lso]
    result = check(ops, events)
    assert result.verdict == "valid" and result.anomalies == [], result.to_json()
    assert result.stats["lost-write"]["retained_away"] == lso
    assert result.stats["unseen-message"]["retained_away"] == 1
    without = check(ops, [e for e in events if e["type"] != "log_segments_deleted"])
    assert without.kinds() == {"lost-write", "unseen-message"}
