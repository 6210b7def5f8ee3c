"""Partition reassignment as Kafka 2.8's controller does it in ZooKeeper mode (KafkaController's
onPartitionReassignment), sans-IO: a mixin of :class:`controller.core.ControllerCore`.

A reassignment lives in the topic znode (``/brokers/topics/<t>``): while it is under way, a partition's
replicas are RS = TRS + ORS (the target replicas first, then the original ones not among them), with
``adding_replicas`` = RS - ORS and ``removing_replicas`` = RS - TRS.  That is the only place ORS is kept, so
a new controller resumes every reassignment it finds there.  Each trigger (the AlterPartitionReassignments
API, ``/admin/reassign_partitions``, an ISR that now holds every target replica, a target broker starting,
a controller failover) runs the same steps, each a :class:`Plan` whose writes are fenced by the controller
epoch:

* **U** (:meth:`ReassignmentSteps.reassignment_update`): the topic znode takes RS, AR and RR; replicas of a
  reassignment being replaced or cancelled that are no longer wanted leave the ISR and are stopped (U3);
* **A** (:meth:`ReassignmentSteps.reassignment_progress`, while TRS is not within the ISR): the leader epoch
  is bumped and every replica in RS gets a LeaderAndIsr, which starts the new ones (AR's with isNew, so a
  broker with an offline log directory creates their logs in an online one); the leader takes them into
  the ISR through AlterIsr once they have caught up;
* **B** (once TRS is within the ISR): RS = TRS in the controller's context; the leader is moved into TRS if
  it is not there or not online (the first online target replica in the ISR: live, and not on an offline
  log directory) and the epoch bumped, one write; then (:meth:`ReassignmentSteps.reassignment_remove`) each
  removed replica in turn leaves the ISR (a write and a leader epoch of its own, as removeReplicasFromIsr)
  and gets StopReplica, then StopReplica with deletion; then
  (:meth:`ReassignmentSteps.reassignment_finish`) the topic znode takes RS = TRS with no adding or removing
  replicas, and ``/admin/reassign_partitions`` forgets the partition.

The handlers (controller/handlers.py) carry out these plans in this order, each once the one before landed.
"""
from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping, Sequence

from controller import election
from controller.plan import Plan, StateChange
from kafkacommon.errors import (INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS, UNKNOWN_TOPIC_OR_PARTITION,
                                message)
from kafkacommon.event import Event
from kafkacommon.metadata import LeaderAndIsr, TopicAssignment

TP = tuple[str, int]
#: a partition's full assignment while reassigned: (RS, AR, RR)
Full = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]
NO_PARTITION = "The partition does not exist."


def reassign_to(a: TopicAssignment, partition: int, target: Sequence[int]) -> Full:
    """Kafka's ReplicaAssignment.reassignTo: RS = (TRS ++ ORS).distinct, AR = RS - ORS, RR = RS - TRS."""
    origin = a.origin(partition)
    full = tuple(dict.fromkeys([*target, *origin]))
    return full, tuple(r for r in full if r not in origin), tuple(r for r in full if r not in target)


def with_partition(a: TopicAssignment, partition: int, full: Full) -> TopicAssignment:
    """``a`` with one partition's replicas, adding and removing replicas replaced."""
    replicas, adding, removing = full
    add = {p: r for p, r in a.adding.items() if p != partition}
    rem = {p: r for p, r in a.removing.items() if p != partition}
    if adding:
        add[partition] = tuple(adding)
    if removing:
        rem[partition] = tuple(removing)
    return dataclasses.replace(a, partitions={**a.partitions, partition: tuple(replicas)}, adding=add, removing=rem)


def validate_replicas(a: TopicAssignment | None, partition: int, replicas: Sequence[int],
                      live: Iterable[int]) -> tuple[int, str] | None:
    """KafkaController.validateReplicas: (error, message), or None when the target replicas are acceptable."""
    if not replicas:
        return INVALID_REPLICA_ASSIGNMENT, "Empty replica list specified in partition reassignment."
    if len(set(replicas)) != len(replicas):
        return INVALID_REPLICA_ASSIGNMENT, f"Duplicate replica ids in partition reassignment replica list: {_seq(replicas)}"
    if any(r < 0 for r in replicas):
        return INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in replica list: {_seq(replicas)}"
    current = a if a is not None and partition in a.partitions else TopicAssignment("", {})
    adding = reassign_to(current, partition, replicas)[1]
    alive = sorted(set(live))
    if not set(adding) <= set(alive):
        return (INVALID_REPLICA_ASSIGNMENT, f"Replica assignment has brokers that are not alive. Replica list: "
                                            f"{_seq(adding)}, live broker list: {_seq(alive, 'Set')}")
    return None


def _seq(xs: Iterable[int], kind: str = "ArrayBuffer") -> str:
    """A Scala Seq or Set as Kafka's messages print it (the request's replicas are a Java list as a Scala Buffer,
    printed ``ArrayBuffer(...)``, as is their difference with the current replicas)."""
    return f"{kind}({', '.join(map(str, xs))})"


class ReassignmentSteps:
    """The reassignment decisions of :class:`controller.core.ControllerCore` (its context, its epoch)."""

    active: bool
    epoch: int
    topics: dict[str, TopicAssignment]
    states: dict[TP, tuple[LeaderAndIsr, int]]
    live: dict
    zk_reassigning: dict[TP, tuple[int, ...]]
    deletion_deferred: set[str]

    def _live_ids(self, excluded: set[int] = frozenset()) -> set[int]: ...  # type: ignore[assignment]

    # ------------------------------------------------------------------ what is under way

    def reassigning(self) -> list[TP]:
        """Every partition being reassigned (Kafka's partitionsBeingReassigned), sorted."""
        return sorted((t, p) for t, a in self.topics.items() if a.adding or a.removing
                      for p in a.partitions if a.reassigning(p))

    def list_reassignments(self, tps: Iterable[TP] | None = None) -> dict[TP, Full]:
        """ListPartitionReassignments: of ``tps`` (None: all), those being reassigned -> (RS, AR, RR)."""
        out: dict[TP, Full] = {}
        for tp in (self.reassigning() if tps is None else tps):
            a = self.topics.get(tp[0])
            if a is not None and a.reassigning(tp[1]):
                out[tp] = (a.partitions[tp[1]], a.adding.get(tp[1], ()), a.removing.get(tp[1], ()))
        return out

    # ------------------------------------------------------------------ the triggers

    def on_alter_reassignments(self, requested: Mapping[TP, Sequence[int] | None]
                               ) -> tuple[dict[TP, tuple[int, str | None]], dict[TP, Full]]:
        """processApiPartitionReassignment: each partition's target replicas (None: cancel) -> (the
        partitions refused, with (error, message); the reassignments to start, each its (RS, AR, RR))."""
        refused: dict[TP, tuple[int, str | None]] = {}
        started: dict[TP, Full] = {}
        live = self._live_ids()
        for tp, target in requested.items():
            a = self.topics.get(tp[0])
            if target is not None:
                bad = validate_replicas(a, tp[1], list(target), live)
                if bad is not None:
                    refused[tp] = bad
                    continue
            full = self._build(tp, target)
            if full is None:
                refused[tp] = (NO_REASSIGNMENT_IN_PROGRESS, message(NO_REASSIGNMENT_IN_PROGRESS))   # ApiError(error)
            elif tp[0] in self.deletion_deferred or a is None or tp[1] not in a.partitions:
                refused[tp] = (UNKNOWN_TOPIC_OR_PARTITION, NO_PARTITION)
            else:
                started[tp] = full
        return refused, started

    def on_zk_reassignment(self, requested: Mapping[TP, Sequence[int]]) -> tuple[dict[TP, Full], list[TP]]:
        """processZkPartitionReassignment (/admin/reassign_partitions): -> (the reassignments to start, the
        partitions that failed, to be taken out of the znode)."""
        started: dict[TP, Full] = {}
        failed: list[TP] = []
        for tp, target in sorted(requested.items()):
            a = self.topics.get(tp[0])
            full = self._build(tp, list(target))
            if full is None or tp[0] in self.deletion_deferred or a is None or tp[1] not in a.partitions:
                failed.append(tp)
            else:
                started[tp] = full
                self.zk_reassigning[tp] = tuple(target)
        return started, failed

    def _build(self, tp: TP, target: Sequence[int] | None) -> Full | None:
        """maybeBuildReassignment: the new (RS, AR, RR); a cancellation goes back to ORS; None: a
        cancellation with nothing under way."""
        a = self.topics.get(tp[0]) or TopicAssignment(tp[0], {})
        if a.reassigning(tp[1]):
            return reassign_to(a, tp[1], a.origin(tp[1]) if target is None else target)
        if target is None:
            return None
        return reassign_to(a, tp[1], target)

    def current_reassignment(self, tp: TP) -> Full | None:
        a = self.topics.get(tp[0])
        if a is None or tp[1] not in a.partitions:
            return None
        return a.partitions[tp[1]], a.adding.get(tp[1], ()), a.removing.get(tp[1], ())

    # ------------------------------------------------------------------ the steps

    def reassignment_update(self, tp: TP, full: Full) -> Plan:
        """Phase U: the topic znode takes (RS, AR, RR) when they change (then the context, once written);
        replicas no longer wanted (a reassignment replaced or cancelled) leave the ISR and stop."""
        plan = Plan()
        a = self.topics.get(tp[0])
        current = self.current_reassignment(tp)
        if not self.active or a is None or current is None or current == full:
            return plan
        plan.assignment_writes.append(with_partition(a, tp[1], full))
        plan.events.append(Event("reassignment_started", {
            "topic": tp[0], "partition": tp[1], "replicas": list(full[0]), "adding": list(full[1]),
            "removing": list(full[2]), "previous": list(current[0])}))
        unneeded = [r for r in current[0] if r not in full[0]]
        if unneeded:
            self._remove_replicas(plan, tp, unneeded, None, "reassignment_cancelled_replicas")
        return plan

    def reassignment_progress(self, tp: TP) -> tuple[Plan, bool]:
        """Phase A (TRS not within the ISR: bump the leader epoch, LeaderAndIsr to RS, which starts AR) or
        B1-B5 (RS = TRS, the leader into TRS, RR out of the ISR and deleted) -> (plan, B reached)."""
        plan = Plan()
        a = self.topics.get(tp[0])
        cur = self.states.get(tp)
        if not self.active or a is None or tp[1] not in a.partitions or cur is None:
            return plan, False
        state, ver = cur
        if state.controller_epoch > self.epoch:
            plan.events.append(Event("election_aborted", {
                "topic": tp[0], "partition": tp[1], "state_controller_epoch": state.controller_epoch}))
            return plan, False
        target = a.target(tp[1])
        if a.reassigning(tp[1]) and not set(target) <= set(state.isr):
            new = LeaderAndIsr(state.leader, state.leader_epoch + 1, state.isr, self.epoch)
            plan.writes.append(StateChange(tp[0], tp[1], new, ver, "reassignment", state))
            plan.new_replicas[tp] = a.adding.get(tp[1], ())
            return plan, False
        completed = with_partition(a, tp[1], (target, (), ()))
        plan.topic_updates.append(completed)
        live = self._live_ids() - self.offline_brokers(tp)   # type: ignore[attr-defined]  # isReplicaOnline
        new = LeaderAndIsr(state.leader, state.leader_epoch + 1, state.isr, self.epoch)
        if state.leader not in target or state.leader not in live:
            leader = next((r for r in target if r in live and r in state.isr), None)
            if leader is None:   # Kafka's ReassignPartitionLeaderElectionStrategy finds none: logged, left as is
                plan.events.append(Event("reassignment_leader_unavailable", {
                    "topic": tp[0], "partition": tp[1], "target": list(target), "isr": list(state.isr)}))
                new = state
            else:
                new = new._replace(leader=leader)
        if new != state:   # B3, a write of its own; the removed replicas leave after it (reassignment_remove)
            plan.writes.append(StateChange(tp[0], tp[1], new, ver, "reassignment_completed", state))
        return plan, True

    def reassignment_remove(self, tp: TP, replica: int) -> Plan:
        """B4 for one removed replica (Kafka's OfflineReplica then NonExistentReplica, one replica at a time):
        out of the ISR if it is there (a write of its own, the leader epoch + 1, as removeReplicasFromIsr),
        StopReplica, then StopReplica with deletion."""
        plan = Plan()
        if self.active:
            self._remove_replicas(plan, tp, [replica], None, "reassignment_removed_replica")
        return plan

    def reassignment_finish(self, tp: TP) -> Plan:
        """B6-B8: the topic znode takes RS = TRS with no adding or removing replicas; every broker's metadata
        learns it; ``/admin/reassign_partitions`` forgets the partition when it asked for these replicas."""
        plan = Plan(metadata_to_all=True)
        a = self.topics.get(tp[0])
        if not self.active or a is None or tp[1] not in a.partitions:
            return plan
        plan.assignment_writes.append(a)
        asked = self.zk_reassigning.pop(tp, None)
        if asked is not None and tuple(asked) == tuple(a.partitions[tp[1]]):
            plan.zk_reassignment = dict(self.zk_reassigning)
        elif asked is not None:
            self.zk_reassigning[tp] = asked
        plan.events.append(Event("reassignment_completed", {
            "topic": tp[0], "partition": tp[1], "replicas": list(a.partitions[tp[1]])}))
        return plan

    def forget_zk_reassignments(self, tps: Iterable[TP]) -> Plan:
        """maybeRemoveFromZkReassignment: ``/admin/reassign_partitions`` without ``tps`` (an API reassignment of
        the same partitions takes precedence; failed ones are dropped)."""
        plan = Plan()
        gone = [tp for tp in tps if tp in self.zk_reassigning]
        for tp in gone:
            del self.zk_reassigning[tp]
        if gone and self.active:
            plan.zk_reassignment = dict(self.zk_reassigning)
        return plan

    def _remove_replicas(self, plan: Plan, tp: TP, replicas: list[int], state: LeaderAndIsr | None, reason: str,
                         ver: int | None = None, previous: LeaderAndIsr | None = None) -> None:
        """Replicas leave a partition (Kafka's OfflineReplica, then NonExistentReplica): each one out of the
        ISR in turn (a leader epoch each, as removeReplicasFromIsr), StopReplica, then StopReplica with
        deletion.  ``state``: the state to start from (None: the partition's current one)."""
        cur = self.states.get(tp)
        if cur is not None:
            previous = previous or cur[0]
            ver = cur[1] if ver is None else ver
            new = state or cur[0]
            for r in replicas:
                after = election.remove_from_isr(new, {r}, self.epoch)
                if after is not None:
                    new = after
            if new != previous:
                plan.writes.append(StateChange(tp[0], tp[1], new, ver, reason, previous))
        for r in replicas:
            if r in self.live:
                plan.stop_replicas.setdefault(r, []).append(tp)
                plan.delete_replicas.setdefault(r, []).append(tp)
