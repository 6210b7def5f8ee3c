"""The controller's one idempotent decision: every write the context needs, derived from the context.

``ControllerCore``'s event handlers update the context and call ``_reconcile``: partitions with no state get
an initial election, partitions whose leader is gone an offline election (unclean where the topic allows it),
and dead replicas leave ISRs.  Sans-IO, as the rest of the core.
"""
from __future__ import annotations

from typing import Any

from controller import election
from controller.plan import Plan, StateChange, StateMap
from kafkacommon.event import Event
from kafkacommon.metadata import LeaderAndIsr


class Reconciler:
    """ControllerCore's reconciliation; the core gives the context it reads and decides from."""

    # the core's context
    epoch: int
    live: dict[int, Any]
    shutting_down: set[int]
    topics: dict[str, Any]
    states: StateMap
    offline_replicas: Any
    settings: Any
    _offline_by_partition: Any
    _unclean: Any

    def _reconcile(self, plan: Plan, excluded: set[int] = frozenset()) -> None:  # type: ignore[assignment]
        # alive: registered (a shutting-down broker still is: it keeps what it could not hand over);
        # live: may take leadership (Kafka's isReplicaOnline without shutting-down brokers)
        alive = set(self.live) - excluded
        live = alive - self.shutting_down
        # Writes already in the plan are the current state for a second pass
        # (a bounced broker's start-up half): chain at the next zkVersion.
        pending = {(w.topic, w.partition): (w.state, 0 if w.zk_version is None else w.zk_version + 1)
                   for w in plan.writes}
        writes = plan.writes
        states = self.states
        offline_on = self._offline_by_partition() if self.offline_replicas else None   # (replicas on failed dirs)
        for topic in sorted(self.topics):
            unclean_allowed = self._unclean(topic)
            # The rules' outcome depends on a state only through (leader, isr, replicas), and a cluster has
            # few such shapes: a broker failure at 1,000 partitions is decided once per shape (and the
            # leader epoch carried over by the rule's own delta), not once per partition.
            shapes: dict[tuple, tuple[str, LeaderAndIsr | None, bool]] = {}
            epoch = self.epoch
            for p, replicas in sorted(self.topics[topic].partitions.items()):
                tp = (topic, p)
                cur = pending.get(tp) if pending else None
                if cur is None:
                    cur = states.get(tp)
                if cur is None:
                    new = election.initial(replicas, live, self.epoch)
                    if new is None:
                        plan.events.append(Event("partition_offline", {
                            "topic": topic, "partition": p, "reason": "no live replica for a new partition"}))
                    else:
                        writes.append(StateChange(topic, p, new, None, "new_partition", None))
                    continue
                state, ver = cur
                off = offline_on.get(tp) if offline_on else None
                here_alive, here_live = (alive - off, live - off) if off else (alive, live)
                if state.leader in here_alive and here_alive.issuperset(state.isr):
                    continue  # healthy: nothing to decide (the common case: checked without building sets)
                if state.controller_epoch > epoch:
                    plan.events.append(Event("election_aborted", {
                        "topic": topic, "partition": p, "state_controller_epoch": state.controller_epoch}))
                    continue
                key = (state.leader, state.isr, replicas if type(replicas) is tuple else tuple(replicas), off)
                shape = shapes.get(key)
                if shape is None:
                    shape = shapes[key] = self._decide_shape(state.leader, state.isr, replicas, here_alive,
                                                             here_live, unclean_allowed)
                reason, template, offline = shape
                new = None if template is None else LeaderAndIsr(
                    template.leader, state.leader_epoch + template.leader_epoch, template.isr, epoch)
                if new is not None:
                    writes.append(StateChange(topic, p, new, ver, reason, state))
                    if reason == "unclean_election":
                        plan.events.append(Event("unclean_leader_election", {
                            "topic": topic, "partition": p, "leader": new.leader,
                            "previous_isr": list(state.isr), "leader_epoch": new.leader_epoch}))
                if offline:
                    plan.events.append(Event("partition_offline", {
                        "topic": topic, "partition": p, "reason": "no live replica in the ISR",
                        "isr": list((new or state).isr)}))

    def _decide_shape(self, leader: int, isr: tuple[int, ...], replicas: tuple[int, ...], alive: set[int],
                      live: set[int], unclean_allowed: bool) -> tuple[str, LeaderAndIsr | None, bool]:
        """The election rules for one (leader, ISR, replicas) shape, decided on a template state at leader
        epoch 0: (reason, the new state with ``leader_epoch`` = the rule's epoch delta or None, whether the
        partition is left offline).  Only states that are not healthy reach here."""
        state = LeaderAndIsr(leader, 0, isr, self.epoch)
        gone = {b for b in isr if b not in alive}
        if leader in alive:
            return "isr_shrink_dead_replica", election.remove_from_isr(state, gone, self.epoch), False
        if leader != -1:
            gone.add(leader)
        blind = self.settings.planted_elect_outside_isr and not unclean_allowed
        new, unclean = election.offline(state, replicas, live, self.epoch, unclean_allowed or blind)
        if new is not None:
            return ("unclean_election" if unclean and not blind else "offline_election"), new, False
        return "offline_no_isr_alive", election.remove_from_isr(state, gone, self.epoch), leader != -1
