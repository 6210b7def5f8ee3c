"""A controller failover's decisions after the context is loaded, in Kafka 2.8's order (a part of
ControllerCore), sans-IO.

Kafka's ``onControllerFailover`` first sends every live broker the whole state as it is (UpdateMetadata, then
LeaderAndIsr with the unchanged states: :meth:`ControllerCore.on_failover`'s plan), then starts its state
machines one after the other: ``replicaStateMachine.startup`` takes each dead broker's replicas offline (out
of the ISR, leader -1 where it led, a new leader epoch), and only then ``partitionStateMachine.startup``
elects (a second new epoch for a partition whose leader died).  Each step is one plan, carried out before
the next is decided (``controller/handlers.py``'s failover loop), so its writes land in that order.
"""
from __future__ import annotations

from typing import Any

from controller.plan import Plan, StateChange, StateMap
from kafkacommon.event import Event
from kafkacommon.metadata import LeaderAndIsr


class FailoverSteps:
    """ControllerCore's failover steps; the core gives the context they read and decide from."""

    _failover_dead: list[int]    # dead brokers whose replicas the failover still takes offline
    _failover_elect: bool        # the failover's elections are still to come
    _failover_now_ms: int
    # the core's context
    active: bool
    epoch: int
    live: dict[int, Any]
    topics: dict[str, Any]
    states: StateMap
    _reconcile: Any
    _replicas: Any
    _maybe_create_offsets_topic: Any

    def _begin_failover_steps(self, now_ms: int) -> None:
        """After the context is loaded: every broker hosting a replica that is not live is dead."""
        replicas = {r for a in self.topics.values() for rs in a.partitions.values() for r in rs}
        self._failover_dead = sorted(replicas - set(self.live))
        self._failover_elect = True
        self._failover_now_ms = now_ms

    @property
    def failover_pending(self) -> bool:
        """Whether :meth:`failover_next` has a plan left."""
        return self.active and (bool(self._failover_dead) or self._failover_elect)

    def failover_next(self) -> Plan | None:
        """The failover's next plan, once the previous one is carried out (None: the failover is done), in
        Kafka 2.8's order (``replicaStateMachine.startup`` then ``partitionStateMachine.startup``):

        1. each dead broker's replicas go offline, one broker after the other (:meth:`_offline_replicas`):
           a partition whose ISR holds it loses it (the ISR is never emptied) and, if it led, its leader
           (-1), a new leader epoch each time;
        2. then every partition without a live leader is elected (offline election: a second new epoch
           for one whose leader died), new partitions get their first leaders, and the offsets topic
           may be created.
        """
        if not self.active:
            return None
        while self._failover_dead:
            plan = self._offline_replicas(self._failover_dead.pop(0))
            if plan.writes or plan.events:
                return plan
        if self._failover_elect:
            self._failover_elect = False
            plan = Plan()
            self._reconcile(plan)
            # a partition the failover left without a leader, and that nobody could take: offline, as Kafka's
            # partitionStateMachine.startup reports the election it could not make
            elected = {(w.topic, w.partition) for w in plan.writes if w.state.leader >= 0}
            noted = {(f["topic"], f["partition"]) for n, f in plan.events if n == "partition_offline"}
            # (those without a leader picked out first, then sorted: the same order, without sorting them all)
            for tp, (state, _) in sorted(item for item in self.states.items() if item[1][0].leader == -1):
                if tp not in elected and tp not in noted and self._replicas(tp):
                    plan.events.append(Event("partition_offline", {
                        "topic": tp[0], "partition": tp[1], "reason": "no live replica in the ISR",
                        "isr": list(state.isr)}))
            self._maybe_create_offsets_topic(plan, self._failover_now_ms)
            return plan
        return None

    def _offline_replicas(self, broker_id: int) -> Plan:
        """Kafka's OfflineReplica transition of a dead broker's replicas (``removeReplicasFromIsr``): each
        partition whose ISR holds it gets the ISR without it (a last member stays), leader -1 if it led,
        and a new leader epoch.  A state written by a newer controller is left alone."""
        plan = Plan()
        # (the partitions whose ISR holds it picked out first, then sorted: the same order, without sorting them all)
        for tp in sorted(tp for tp, (state, _) in self.states.items() if broker_id in state.isr):
            state, ver = self.states[tp]
            if state.controller_epoch > self.epoch:
                plan.events.append(Event("election_aborted", {
                    "topic": tp[0], "partition": tp[1], "state_controller_epoch": state.controller_epoch}))
                continue
            leader = -1 if state.leader == broker_id else state.leader
            isr = state.isr if len(state.isr) == 1 else tuple(b for b in state.isr if b != broker_id)
            plan.writes.append(StateChange(tp[0], tp[1], LeaderAndIsr(leader, state.leader_epoch + 1, isr, self.epoch),
                                           ver, "offline_replica", state))
        return plan
