"""The ElectLeaders request (KIP-460) as Kafka 2.8's controller answers it (processReplicaLeaderElection), sans-IO:
a mixin of :class:`controller.core.ControllerCore`.

Each partition asked for gets, in Kafka's order: UNKNOWN_TOPIC_OR_PARTITION (not in the controller's context),
INVALID_TOPIC_EXCEPTION (its topic's deletion waits), ELECTION_NOT_NEEDED (a preferred election where the
preferred replica leads; an unclean one where the leader is live), else an election:

* **preferred** (``PREFERRED``): the first replica of the assignment, if it is live and in the ISR; the ISR is
  kept; else PREFERRED_LEADER_NOT_AVAILABLE;
* **unclean** (``UNCLEAN``, Kafka's ``OfflinePartitionLeaderElectionStrategy(allowUnclean = true)``): the
  first replica that is live and in the ISR, with the live ISR; when the ISR has no live replica, the first
  live replica, with the ISR [it] (an unclean election, whatever the topic's
  ``unclean.leader.election.enable`` says); else ELIGIBLE_LEADERS_NOT_AVAILABLE.

A replica on an offline log directory (controller/log_dirs.py) is not live for either election (Kafka's
isReplicaOnline).  A state written by a newer controller is not touched (the election fails as above).  Successful elections
are one :class:`Plan`; the request's broker then waits until its metadata cache shows each new leader.
"""
from __future__ import annotations

from typing import Iterable

from controller import election
from controller.plan import Plan, StateChange
from kafkacommon.errors import (
    ELECTION_NOT_NEEDED, ELIGIBLE_LEADERS_NOT_AVAILABLE, INVALID_TOPIC_EXCEPTION, NONE, PREFERRED_LEADER_NOT_AVAILABLE,
    UNKNOWN_TOPIC_OR_PARTITION, message,
)
from kafkacommon.event import Event
from kafkacommon.metadata import LeaderAndIsr, TopicAssignment

TP = tuple[str, int]
PREFERRED, UNCLEAN = 0, 1       # ElectLeaders' election_type (Kafka's ElectionType)
STRATEGY = {PREFERRED: "PreferredReplicaPartitionLeaderElectionStrategy",
            UNCLEAN: "OfflinePartitionLeaderElectionStrategy(true)"}
#: one partition's answer: (error, message or None, the new leader or -1)
Answer = tuple[int, "str | None", int]


class LeaderElectionRequests:
    """The ElectLeaders decisions of :class:`controller.core.ControllerCore` (its context, its epoch)."""

    active: bool
    epoch: int
    topics: dict[str, TopicAssignment]
    states: dict[TP, tuple[LeaderAndIsr, int]]
    deletion_deferred: set[str]

    def _live_ids(self, excluded: set[int] = frozenset()) -> set[int]: ...  # type: ignore[assignment]

    def _replicas(self, tp: TP) -> tuple[int, ...]: ...  # type: ignore[empty-body]

    def elect_leaders_on_request(self, tps: Iterable[TP], election_type: int) -> tuple[Plan, dict[TP, Answer]]:
        """An ElectLeaders request for ``tps``: (the plan of its elections, each partition's answer)."""
        if election_type not in STRATEGY:
            raise ValueError(f"unknown election type {election_type}")
        plan = Plan()
        answers: dict[TP, Answer] = {}
        live = self._live_ids()
        for tp in dict.fromkeys(tps):
            replicas = self._replicas(tp)
            cur = self.states.get(tp)
            if not replicas or cur is None:
                answers[tp] = (UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.", -1)
                continue
            if tp[0] in self.deletion_deferred:
                answers[tp] = (INVALID_TOPIC_EXCEPTION, "The topic is being deleted", -1)
                continue
            state, ver = cur
            if (state.leader == replicas[0]) if election_type == PREFERRED else (state.leader in live):
                answers[tp] = (ELECTION_NOT_NEEDED, message(ELECTION_NOT_NEEDED), -1)   # ApiError(error)
                continue
            failed = PREFERRED_LEADER_NOT_AVAILABLE if election_type == PREFERRED else ELIGIBLE_LEADERS_NOT_AVAILABLE
            name = f"{tp[0]}-{tp[1]}"
            if state.controller_epoch > self.epoch:
                answers[tp] = (failed, f"Aborted leader election for partition {name} since the LeaderAndIsr path "
                                       f"was already written by another controller. This probably means that the "
                                       f"current controller went through a soft failure and another controller was "
                                       f"elected with epoch {state.controller_epoch}.", -1)
                continue
            unclean = False
            online = live - self.offline_brokers(tp)   # type: ignore[attr-defined]  # (controller/log_dirs.py)
            if election_type == PREFERRED:
                new = election.preferred(state, replicas, online, self.epoch)
            else:
                new, unclean = election.offline(state, replicas, online, self.epoch, True)
            if new is None:
                answers[tp] = (failed, f"Failed to elect leader for partition {name} under strategy "
                                       f"{STRATEGY[election_type]}", -1)
                continue
            reason = "preferred_admin" if election_type == PREFERRED else (
                "unclean_election_admin" if unclean else "offline_election_admin")
            plan.writes.append(StateChange(tp[0], tp[1], new, ver, reason, state))
            if unclean:
                plan.events.append(Event("unclean_leader_election", {
                    "topic": tp[0], "partition": tp[1], "leader": new.leader, "previous_isr": list(state.isr),
                    "leader_epoch": new.leader_epoch}))
            answers[tp] = (NONE, None, new.leader)
        return plan, answers

    def preferred_results(self, tps: Iterable[TP] | None, moved: set[TP]) -> dict[TP, int]:
        """Kafka 2.8's ElectLeaders (preferred) answer for each partition asked (None: every partition): NONE
        when its leader moved, ELECTION_NOT_NEEDED when the preferred replica already leads it,
        PREFERRED_LEADER_NOT_AVAILABLE when it could not (not live, or not in the ISR),
        UNKNOWN_TOPIC_OR_PARTITION for a partition the controller does not know."""
        out: dict[TP, int] = {}
        for tp in (sorted(self.states) if tps is None else tps):
            cur, replicas = self.states.get(tp), self._replicas(tp)
            if tp in moved:
                out[tp] = NONE
            elif cur is None or not replicas:
                out[tp] = UNKNOWN_TOPIC_OR_PARTITION
            elif cur[0].leader == replicas[0]:
                out[tp] = ELECTION_NOT_NEEDED
            else:
                out[tp] = PREFERRED_LEADER_NOT_AVAILABLE
        return out
