"""The controller's side of log directory failures (Kafka 2.8's KIP-112), sans-IO: a part of ControllerCore.

* A broker whose log directory failed writes ``/log_dir_event_notification/log_dir_event_<seq>``; the
  controller's ``LogDirEventNotification`` (``on_log_dir_event``) sends that broker a LeaderAndIsr for
  every replica it hosts, with the states as they are (Kafka's onBrokerLogDirFailure: the OnlineReplica
  transition), to learn which are offline.
* The broker answers KAFKA_STORAGE_ERROR for each replica in an offline directory.  Every LeaderAndIsr
  answer is a ``LeaderAndIsrResponseReceived`` (``on_leader_and_isr_response``): replicas answered
  KAFKA_STORAGE_ERROR join the broker's offline replicas, those answered NONE leave them; the newly
  offline ones go through onReplicasBecomeOffline: a partition they led gets a new leader from its ISR
  without them, they leave ISRs (each removal a write with the leader epoch + 1), and the broker is sent
  StopReplica (delete=false) for them.
* An offline replica is not online for any election (``isReplicaOnline``) until its broker registers
  again: a broker that dies, restarts or is replaced loses its offline replicas (onBrokerFailure,
  onBrokerStartup), as does every broker when a new controller takes over (it learns them again from
  the answers to its LeaderAndIsr).
"""
from __future__ import annotations

from typing import Iterable, Mapping

from controller.plan import TP, Plan
from kafkacommon.errors import KAFKA_STORAGE_ERROR, NONE
from kafkacommon.event import Event


class LogDirFailures:
    """ControllerCore's offline replicas (Kafka's ``replicasOnOfflineDirs``) and the two events; the core gives
    the context they read."""

    offline_replicas: dict[int, set[TP]]

    def on_log_dir_event(self, brokers: Iterable[int]) -> Plan:
        """Notifications from ``brokers``: a LeaderAndIsr to each live one for all its replicas."""
        plan = Plan()
        if not self.active:   # type: ignore[attr-defined]
            return plan
        brokers = list(brokers)
        asked = sorted(set(brokers) & set(self.live))   # type: ignore[attr-defined]
        plan.query_replicas = set(asked)
        replicas = sum(1 for tp in self.states for b in asked if b in self._replicas(tp))   # type: ignore
        plan.observed.append(Event("log_dir_event_handled", {"brokers": sorted(set(brokers)), "asked": asked,
                                                             "partitions": replicas}))
        return plan

    def on_leader_and_isr_response(self, broker_id: int, broker_epoch: int, errors: Mapping[TP, int]) -> Plan:
        """A broker's answer to a LeaderAndIsr (``errors``: each partition of the request with its error)
        sent to it at ``broker_epoch``: Kafka's processLeaderAndIsrResponseReceived."""
        plan = Plan()
        reg = self.live.get(broker_id)   # type: ignore[attr-defined]
        if not self.active or reg is None or reg.epoch != broker_epoch:   # type: ignore[attr-defined]
            return plan   # a dead or earlier incarnation's answer
        offline = {tp for tp, c in errors.items() if c == KAFKA_STORAGE_ERROR}
        online = {tp for tp, c in errors.items() if c == NONE}
        before = self.offline_replicas.get(broker_id, set())
        now = (before - online) | offline
        if now:
            self.offline_replicas[broker_id] = now
        else:
            self.offline_replicas.pop(broker_id, None)
        new = sorted(now - before)
        if not new:
            return plan
        plan.observed.append(Event("replicas_offline", {
            "broker_id": broker_id, "replicas": [f"{t}-{p}" for t, p in new],
            "led": [f"{t}-{p}" for t, p in new if t in self.topics   # type: ignore[attr-defined]
                    and (t, p) in self.states and self.states[(t, p)][0].leader == broker_id]}))   # type: ignore
        self._reconcile(plan)   # type: ignore[attr-defined]
        plan.stop_replicas[broker_id] = [tp for tp in new if tp in self.states]   # type: ignore[attr-defined]
        if not any(w.previous is not None and w.previous.leader == broker_id for w in plan.writes):
            plan.metadata_to_all = True   # no leader moved: tell everyone (onReplicasBecomeOffline)
        return plan

    def response_matters(self, broker_id: int, errors: Mapping[TP, int]) -> bool:
        """Whether a LeaderAndIsr answer can change anything (a storage error, or a broker with offline
        replicas): the shell queues only those as events."""
        return broker_id in self.offline_replicas or KAFKA_STORAGE_ERROR in errors.values()

    def offline_brokers(self, tp: TP) -> frozenset[int]:
        """The brokers holding ``tp`` on an offline log directory: not online for its elections (Kafka's
        isReplicaOnline), as the ElectLeaders and reassignment elections ask."""
        if not self.offline_replicas:
            return frozenset()
        return frozenset(b for b, tps in self.offline_replicas.items() if tp in tps)

    def _offline_by_partition(self) -> dict[TP, frozenset[int]]:
        """The brokers each partition has offline replicas on (empty in the common case)."""
        out: dict[TP, set[int]] = {}
        for b, tps in self.offline_replicas.items():
            for tp in tps:
                out.setdefault(tp, set()).add(b)
        return {tp: frozenset(bs) for tp, bs in out.items()}

    def _forget_offline(self, brokers: Iterable[int]) -> None:
        """Brokers that died or registered again: their offline replicas are forgotten."""
        for b in brokers:
            self.offline_replicas.pop(b, None)
