"""The controller's decisions as a sans-IO state machine.

The shell (node/shells/controller_shell.py) owns ZooKeeper and gRPC.  It feeds the
core facts (a loaded snapshot, the live brokers after a watch fired, a tick
with ``now_ms``) and gets back a :class:`Plan`: topic creations and
partition-state writes to make in ZooKeeper, fenced by the controller epoch,
plus events to log.  Once the writes have landed, ``commit(plan, versions)``
applies them to the core's context and returns the per-broker requests
(LeaderAndIsr, UpdateMetadata) to send.

Every event handler only updates the context and then calls one idempotent
function, :meth:`ControllerCore._reconcile` (controller/reconcile.py), which derives every needed
write from the context: partitions with no state get an initial election,
partitions whose leader is gone get an offline election, and dead replicas
leave ISRs.  After a BADVERSION the shell re-reads the states and calls
:meth:`reload_states`, and the same function decides again.
"""
from __future__ import annotations

import base64
import dataclasses
from typing import Callable, Iterable, Mapping

from controller import election
from controller.failover import FailoverSteps
from controller.reconcile import Reconciler
from controller.elect_request import LeaderElectionRequests
from controller.log_dirs import LogDirFailures
from controller.reassignment import ReassignmentSteps
from controller.plan import (  # re-exported: the shells and the simulator take them from here
    TP, Command, ControllerSettings, LeaderAndIsrCmd, PartitionView, Plan, StateChange, StateMap, StopReplicaCmd,
    UpdateMetadataCmd,
)
from kafkacommon.assignment import assign_replicas
from kafkacommon.metadata import BrokerRegistration, LeaderAndIsr, TopicAssignment
from kafkacommon.errors import (  # the Kafka error codes the core answers with (a constants table, no I/O)
    BROKER_NOT_AVAILABLE, FENCED_LEADER_EPOCH, INELIGIBLE_REPLICA, INVALID_REQUEST, INVALID_UPDATE_VERSION, NONE,
    NOT_CONTROLLER, NOT_LEADER_OR_FOLLOWER, STALE_BROKER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION,
)
from kafkacommon.event import Event

__all__ = ["Command", "ControllerCore", "ControllerSettings", "LeaderAndIsrCmd", "PartitionView", "Plan", "StateChange",
           "StopReplicaCmd", "UpdateMetadataCmd"]


def _boolean(value: object) -> bool | None:
    """A stored boolean config (a string, or a bool from an older znode); None when absent or not one."""
    text = str(value).strip().lower() if value is not None else ""
    return True if text == "true" else False if text == "false" else None


class ControllerCore(Reconciler, FailoverSteps, ReassignmentSteps, LeaderElectionRequests, LogDirFailures):
    def __init__(self, settings: ControllerSettings, rng: Callable[[int], int] | None = None):
        self.settings = settings
        self._rng = rng or (lambda n: 0)
        self.active = False
        self.epoch = 0
        self.epoch_zk_version = -1
        self.live: dict[int, BrokerRegistration] = {}
        self.shutting_down: set[int] = set()
        self.offline_replicas: dict[int, set[TP]] = {}   # replicas on offline log dirs (controller/log_dirs.py)
        self.topics: dict[str, TopicAssignment] = {}
        self.states: StateMap = {}
        self.broker_configs: dict[str, Mapping[str, str]] = {}   # this broker's dynamic configs ("<default>", id)
        self._next_imbalance_ms = 0
        self._next_resend_ms = 0
        self._views: dict[TP, PartitionView] = {}   # the last view built of each partition (see _kept_view)
        self._offsets_deadline_ms = 0
        self._failover_dead: list[int] = []   # the failover's steps (controller/failover.py)
        self._failover_elect = False
        self._failover_now_ms = 0
        self.zk_reassigning: dict[TP, tuple[int, ...]] = {}   # those /admin/reassign_partitions asked for
        self.resumable: list[TP] = []     # reassignments a broker's start-up lets go on (the handler takes them)
        self.deletion_deferred: set[str] = set()   # topics whose deletion waits for their reassignment

    # ------------------------------------------------------------------ lifecycle

    def on_failover(self, epoch: int, epoch_zk_version: int, brokers: Mapping[int, BrokerRegistration],
                    topics: Mapping[str, TopicAssignment], states: StateMap, now_ms: int,
                    broker_configs: Mapping[str, Mapping[str, str]] | None = None) -> Plan:
        """This broker won the election: load the context (Kafka's onControllerFailover).  ``topics`` carry
        their config overrides; ``broker_configs`` are this broker's dynamic configs (``<default>`` and its
        id), whose ``unclean.leader.election.enable`` is the default here.

        The plan returned writes nothing: it tells every live broker the whole state as it is (Kafka sends
        UpdateMetadata, then LeaderAndIsr with the unchanged states, before its state machines decide
        anything).  The decisions come after it, one plan at a time, from :meth:`failover_next`."""
        self.active = True
        self.epoch, self.epoch_zk_version = epoch, epoch_zk_version
        self.live = dict(brokers)
        self.topics = dict(topics)
        self.broker_configs = dict(broker_configs or {})
        self.states = dict(states)
        self._views.clear()
        self.shutting_down.clear()
        self.offline_replicas.clear()
        plan = Plan(full_sync=set(self.live), metadata_to_all=True)
        plan.events.append(Event("controller_context_loaded", {
            "epoch": epoch, "live_brokers": sorted(self.live), "topics": len(self.topics),
            "partitions": sum(len(a.partitions) for a in self.topics.values())}))
        self._begin_failover_steps(now_ms)
        self._offsets_deadline_ms = now_ms + self.settings.offsets_create_grace_ms
        self._next_imbalance_ms = now_ms + 5_000  # Kafka: the first check runs 5 s after failover
        self._next_resend_ms = now_ms + self.settings.metadata_resend_interval_ms
        return plan

    def on_resign(self) -> None:
        self.active = False
        self._failover_dead, self._failover_elect = [], False
        self.live.clear()
        self.topics.clear()
        self.states.clear()
        self._views.clear()
        self.shutting_down.clear()
        self.zk_reassigning.clear()
        self.resumable.clear()
        self.deletion_deferred.clear()
        self.offline_replicas.clear()

    # ------------------------------------------------------------------ events

    def on_broker_change(self, brokers: Mapping[int, BrokerRegistration]) -> Plan:
        """/brokers/ids changed: tell new, dead and bounced brokers apart (processBrokerChange)."""
        plan = Plan()
        if not self.active:
            return plan
        known = self.live
        new = sorted(set(brokers) - set(known))
        dead = sorted(set(known) - set(brokers))
        bounced = sorted(b for b in set(brokers) & set(known) if brokers[b].epoch > known[b].epoch)
        if not (new or dead or bounced):
            return plan
        plan.observed.append(Event("broker_change", {
            "new": new, "dead": dead, "bounced": bounced,
            "epochs": {str(b): brokers[b].epoch for b in new + bounced}}))
        self.live = dict(brokers)
        self.shutting_down -= set(dead) | set(bounced)
        self._forget_offline(new + dead + bounced)
        plan.full_sync = set(new) | set(bounced)
        plan.metadata_to_all = True
        plan.brokers_started = bool(new or bounced)
        # A bounced broker is handled as a failure then a start-up: it lost its
        # replica state, so it leaves leaderships and ISRs first; then, live
        # again, it can be elected where it is the only ISR member left.
        if bounced:
            self._reconcile(plan, excluded=set(bounced))
        self._reconcile(plan)
        self._maybe_create_offsets_topic(plan)
        started = set(new) | set(bounced)
        # onBrokerStartup: reassignments whose target replicas include a started broker go on
        self.resumable = [tp for tp in self.reassigning() if started & set(self.topics[tp[0]].target(tp[1]))]
        return plan

    def on_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[int, Plan, list[TP]]:
        """Kafka's doControlledShutdown: returns (error code, plan, partitions it will still lead).

        Led partitions (RF > 1) elect the first replica that is live, in the
        ISR and not shutting down, with the ISR minus shutting-down brokers;
        followed partitions drop the broker from the ISR and get StopReplica.
        A replicated partition with nobody else to lead stays with the broker
        and is reported back, so the broker can retry; an RF-1 partition is
        left alone and not reported (Kafka acts on, and reports, only
        partitions with more than one replica).
        """
        plan = Plan()
        if not self.active:
            return NOT_CONTROLLER, plan, []
        reg = self.live.get(broker_id)
        if reg is None:
            return BROKER_NOT_AVAILABLE, plan, []
        if broker_epoch != -1 and broker_epoch < reg.epoch:
            return STALE_BROKER_EPOCH, plan, []
        self.shutting_down.add(broker_id)
        eligible = set(self.live) - self.shutting_down
        offline = self._offline_by_partition() if self.offline_replicas else None
        remaining: list[TP] = []
        stopped: list[TP] = []
        for tp in sorted(self.states):
            replicas = self._replicas(tp)
            if broker_id not in replicas:
                continue
            state, ver = self.states[tp]
            if state.controller_epoch > self.epoch:
                continue
            if len(replicas) <= 1:
                continue
            if state.leader == broker_id:
                off = offline.get(tp) if offline else None
                new = election.controlled_shutdown(state, replicas, eligible - off if off else eligible,
                                                   self.shutting_down, self.epoch)
                if new is None:
                    remaining.append(tp)
                    continue
                plan.writes.append(StateChange(tp[0], tp[1], new, ver, "controlled_shutdown", state))
            else:
                stopped.append(tp)
                new = election.remove_from_isr(state, {broker_id}, self.epoch)
                if new is not None:
                    plan.writes.append(StateChange(tp[0], tp[1], new, ver, "controlled_shutdown_isr", state))
        if stopped:
            plan.stop_replicas[broker_id] = stopped
        plan.observed.append(Event("controlled_shutdown_requested", {
            "broker_id": broker_id, "broker_epoch": broker_epoch, "moved": sum(
                w.reason == "controlled_shutdown" for w in plan.writes), "remaining": len(remaining)}))
        return NONE, plan, remaining

    def on_alter_isr(self, broker_id: int, broker_epoch: int,
                     items: Iterable[tuple[TP, int, tuple[int, ...], int]]) -> tuple[int, Plan, dict[TP, int]]:
        """Kafka's processAlterIsr: items are (tp, leader_epoch, new_isr, zk_version known to the leader).

        Returns (top-level error, plan, per-partition error); a partition's
        answer state is read from ``self.states`` after the plan commits.
        """
        plan = Plan(metadata_to_all=True, leader_and_isr=False)
        if not self.active:
            return NOT_CONTROLLER, plan, {}
        reg = self.live.get(broker_id)
        if reg is None or reg.epoch != broker_epoch:
            return STALE_BROKER_EPOCH, plan, {}
        results: dict[TP, int] = {}
        for tp, leader_epoch, new_isr, zk_version in items:
            cur = self.states.get(tp)
            replicas = self._replicas(tp)
            if cur is None or not replicas:
                results[tp] = UNKNOWN_TOPIC_OR_PARTITION
                continue
            state, ver = cur
            if leader_epoch < state.leader_epoch:
                results[tp] = FENCED_LEADER_EPOCH
                continue
            if state.leader != broker_id:
                results[tp] = NOT_LEADER_OR_FOLLOWER
                continue
            isr = tuple(new_isr)
            if broker_id not in isr or not set(isr) <= set(replicas) or len(set(isr)) != len(isr):
                results[tp] = INVALID_REQUEST
                continue
            if isr == state.isr:
                results[tp] = NONE  # the same state: success, nothing to write
                continue
            if zk_version != ver:
                results[tp] = INVALID_UPDATE_VERSION
                continue
            added = set(isr) - set(state.isr)
            if self.settings.kip841_enable and (added & self.shutting_down or not added <= set(self.live)):
                # Kafka 3.3's KIP-841 check (2.8 lacks it; kafkasim.isr.kip841.enable): a broker in
                # controlled shutdown still fetches until it stops, and a leader may not have heard yet
                # that a broker died; taking either into the ISR would undo that ISR removal
                results[tp] = INELIGIBLE_REPLICA
                continue
            reason = "isr_expand" if len(isr) > len(state.isr) else "isr_shrink"
            plan.writes.append(StateChange(tp[0], tp[1], LeaderAndIsr(state.leader, state.leader_epoch, isr, self.epoch),
                                           ver, reason, state))
            results[tp] = NONE
        return NONE, plan, results

    def on_alter_isr_conflict(self, plan: Plan, results: dict[TP, int],
                              states: StateMap) -> tuple[dict[TP, int], Plan]:
        """The AlterIsr plan's write met BADVERSION (our cached state was stale; a request's own change
        cannot be re-derived): its changes that the re-read ``states`` do not hold answer
        INVALID_UPDATE_VERSION, the others keep their answers (a change in a multi that did apply answers
        NONE, as each partition's write in Kafka is answered on its own), and the re-read states are decided
        again (the returned plan)."""
        refused = {(w.topic, w.partition) for w in plan.writes
                   if (states.get((w.topic, w.partition)) or (None,))[0] != w.state}
        return ({tp: INVALID_UPDATE_VERSION if tp in refused else c for tp, c in results.items()},
                self.reload_states(states))

    def alter_isr_answer(self, results: dict[TP, int]) -> dict[TP, tuple[int, LeaderAndIsr | None, int]]:
        """Each partition's AlterIsr answer: (error, the state as now known or None, its zkVersion or -1)."""
        return {tp: (c, *self.states[tp]) if tp in self.states else (c, None, -1) for tp, c in results.items()}

    def on_topic_deletion(self, requested: Iterable[str]) -> Plan:
        """/admin/delete_topics/<t> appeared: delete the topic (or, if disabled, drop the request)."""
        plan = Plan()
        if not self.active:
            return plan
        for topic in sorted(set(requested)):
            a = self.topics.get(topic)
            if a is not None and any(a.reassigning(p) for p in a.partitions):
                # Kafka marks it ineligible for deletion: it is deleted once its reassignment completes
                if topic not in self.deletion_deferred:
                    self.deletion_deferred.add(topic)
                    plan.observed.append(Event("topic_deletion_deferred", {
                        "topic": topic, "reason": "topic reassignment in progress"}))
                continue
            self.deletion_deferred.discard(topic)
            if not self.settings.delete_topic_enable or topic == self.settings.offsets_topic or a is None:
                plan.markers_to_drop.append(topic)
                plan.observed.append(Event("topic_deletion_refused", {"topic": topic, "reason": (
                    "delete.topic.enable is false" if not self.settings.delete_topic_enable else
                    "internal topic" if a is not None else "no such topic")}))
                continue
            plan.topic_deletes.append(a)
        if plan.topic_deletes:
            plan.metadata_to_all = True
        return plan

    def on_topics_change(self, topics: Mapping[str, TopicAssignment],
                         broker_configs: Mapping[str, Mapping[str, str]] | None = None) -> Plan:
        """The topics as ZooKeeper has them now, each with its config overrides (after a change of
        /brokers/topics, of a topic znode, or of a config): new topics' partitions get their first leaders
        (TopicChange); partitions added to a known topic too (Kafka's processPartitionModifications and
        onNewPartitionCreation: the new partitions' assignment joins the context, the existing ones' stays
        as the context has it); changed configs are taken (an unclean election newly allowed happens now,
        as Kafka's TopicUncleanLeaderElectionEnable)."""
        plan = Plan()
        if not self.active:
            return plan
        if broker_configs is not None:
            self.broker_configs = dict(broker_configs)
        added = sorted(set(topics) - set(self.topics))
        for t in added:
            self.topics[t] = topics[t]
        if added:
            plan.events.append(Event("topics_added", {"topics": added}))
        for t in sorted(set(topics) & set(self.topics) - set(added)):
            cur, new = self.topics[t], topics[t]
            more = {p: r for p, r in new.partitions.items() if p not in cur.partitions}
            if more:
                plan.events.append(Event("partitions_added", {
                    "topic": t, "partitions": sorted(more), "replicas": {str(p): list(r) for p, r in sorted(more.items())},
                    "partition_count": len(cur.partitions) + len(more)}))
            if more or dict(cur.config) != dict(new.config):
                self.topics[t] = dataclasses.replace(cur, partitions={**cur.partitions, **more}, config=new.config)
        self._reconcile(plan)
        return plan

    def reload_states(self, states: StateMap) -> Plan:
        """After a BADVERSION, or a check of the cache a failover decided from: take the re-read states and
        decide again.  The states that differ from the context's are sent to the brokers as they are now
        (``Plan.resync``): the failover had sent the stale ones."""
        resync = [tp for tp, st in states.items() if self.states.get(tp) != st]
        self.states.update(states)
        plan = Plan(metadata_to_all=True, resync=resync)
        self._reconcile(plan)
        return plan

    def elect_preferred(self, tps: Iterable[TP] | None = None, reason: str = "preferred") -> Plan:
        plan = Plan()
        if not self.active:
            return plan
        targets = list(tps) if tps is not None else sorted(self.states)
        live = self._live_ids()
        for tp in targets:
            cur = self.states.get(tp)
            replicas = self._replicas(tp)
            if cur is None or not replicas:
                continue
            state, ver = cur
            if state.controller_epoch > self.epoch:
                plan.events.append(Event("election_aborted", {
                    "topic": tp[0], "partition": tp[1], "state_controller_epoch": state.controller_epoch}))
                continue
            off = self._offline_by_partition().get(tp) if self.offline_replicas else None
            new = election.preferred(state, replicas, live - off if off else live, self.epoch)
            if new is not None:
                self._write(plan, tp, new, ver, reason, state)
        return plan

    def on_tick(self, now_ms: int) -> Plan:
        """Timers: the automatic preferred-leader check and the metadata resend."""
        plan = Plan()
        if not self.active:
            return plan
        if self.settings.auto_leader_rebalance and now_ms >= self._next_imbalance_ms:
            self._next_imbalance_ms = now_ms + self.settings.imbalance_check_interval_ms
            imbalanced = self.imbalanced_partitions()
            if imbalanced:
                plan = self.elect_preferred(imbalanced, reason="auto_rebalance")
        if self.settings.offsets_topic not in self.topics:
            self._maybe_create_offsets_topic(plan, now_ms)
        if self.settings.metadata_resend_interval_ms > 0 and now_ms >= self._next_resend_ms:
            self._next_resend_ms = now_ms + self.settings.metadata_resend_interval_ms
            plan.resend_metadata = True
        return plan

    def imbalanced_partitions(self) -> list[TP]:
        """Kafka's checkAndTriggerAutoLeaderRebalance: per preferred broker, above the threshold."""
        by_pref: dict[int, list[TP]] = {}
        if self.reassigning():   # Kafka: only while no partition is being reassigned
            return []
        for tp in sorted(self.states):
            replicas = self._replicas(tp)
            if replicas:
                by_pref.setdefault(replicas[0], []).append(tp)
        live = self._live_ids()
        out: list[TP] = []
        for broker, tps in by_pref.items():
            if broker not in live:
                continue
            not_led = [tp for tp in tps if self.states[tp][0].leader != broker]
            if len(not_led) * 100 > self.settings.imbalance_percentage * len(tps):
                out.extend(not_led)
        return out

    # ------------------------------------------------------------------ commit

    def commit(self, plan: Plan, versions: Mapping[TP, int]) -> dict[int, list[Command]]:
        """The plan's writes landed with these zkVersions: apply them and return the requests."""
        for a in plan.topic_creates:
            self.topics[a.topic] = a
        for a in plan.assignment_writes + plan.topic_updates:   # a reassignment's steps (before the views)
            self.topics[a.topic] = a
        deleted_views: list[PartitionView] = []
        deleted_by: dict[int, list[TP]] = {}
        for a in plan.topic_deletes:
            for p, replicas in sorted(a.partitions.items()):
                tp = (a.topic, p)
                st = self.states.pop(tp, None)
                self._views.pop(tp, None)
                # Kafka's LeaderDuringDelete: leader -2 tells every broker the partition is gone
                deleted_views.append(PartitionView(a.topic, p, LeaderAndIsr(-2, st[0].leader_epoch if st else 0,
                                                                             (), self.epoch), -1, replicas))
                for r in replicas:
                    if r in self.live:
                        deleted_by.setdefault(r, []).append(tp)
            self.topics.pop(a.topic, None)
        changed: dict[TP, None] = {}  # ordered and de-duplicated: a partition may be written twice
        new_tps: set[TP] = set()
        for w in plan.writes:
            tp = (w.topic, w.partition)
            self.states[tp] = (w.state, versions[tp])
            changed[tp] = None
            if w.zk_version is None:
                new_tps.add(tp)
        for tp in plan.resync:   # re-read and found stale: sent as they are (a write of the plan comes first)
            if tp in self.states:
                changed[tp] = None
        live_regs = tuple(self.live[b] for b in sorted(self.live))
        requests: dict[int, list[Command]] = {}
        changed_views = [self._view(tp, tp in new_tps) for tp in changed]
        need_all = bool((plan.full_sync | plan.query_replicas) & set(self.live)) or plan.resend_metadata
        by_tp = {(v.topic, v.partition): v for v in changed_views}
        all_views = [by_tp.get(tp) or self._kept_view(tp) for tp in sorted(self.states)] if need_all else []
        changed_by = self._by_replica(changed_views)
        all_by = self._by_replica(all_views) if plan.full_sync or plan.query_replicas else {}
        leaders = tuple(self.live[b] for b in sorted({v.state.leader for v in changed_views} & set(self.live)))
        # one command for every broker that gets the whole metadata (a shell sends a command it has seen once)
        everything = UpdateMetadataCmd(tuple(all_views), live_regs) if plan.resend_metadata else None
        full = UpdateMetadataCmd(tuple(all_views), live_regs) if plan.full_sync else None
        changed_md = UpdateMetadataCmd(tuple(changed_views), live_regs)
        for b in sorted(self.live):
            cmds: list[Command] = []
            if b in plan.full_sync:
                # Kafka's onBrokerStartup / onControllerFailover order: the full UpdateMetadata first, so the
                # broker's metadata cache (live brokers, controller id) is filled before it opens its logs
                cmds.append(full)
                mine = tuple(all_by.get(b, ()))
                if mine:
                    all_leaders = tuple(self.live[x] for x in sorted({v.state.leader for v in mine} & set(self.live)))
                    cmds.append(LeaderAndIsrCmd(mine, all_leaders))
            elif b in plan.query_replicas:
                # every replica the broker hosts, as they are (Kafka's onBrokerLogDirFailure): its answer tells
                # which are on an offline log directory (controller/log_dirs.py)
                mine = tuple(all_by.get(b, ()))
                if mine:
                    cmds.append(LeaderAndIsrCmd(mine, tuple(self.live[x] for x in sorted(
                        {v.state.leader for v in mine} & set(self.live)))))
            else:
                mine = tuple(changed_by.get(b, ())) if plan.leader_and_isr else ()
                if mine and b in plan.stop_replicas:
                    # Kafka's OfflineReplica transition: a replica told to stop is not sent the state
                    # that removed it from the ISR (it would follow again in the new epoch)
                    stopping = set(plan.stop_replicas[b])
                    mine = tuple(v for v in mine if (v.topic, v.partition) not in stopping)
                if mine and plan.new_replicas:
                    mine = tuple(v._replace(is_new=True) if b in plan.new_replicas.get((v.topic, v.partition), ())
                                 else v for v in mine)
                if mine and plan.brokers_started:
                    # Kafka's onBrokerStartup: the existing brokers learn the new live set first, with no
                    # partition states, before the LeaderAndIsr that follows (which may open many logs)
                    cmds.append(UpdateMetadataCmd((), live_regs))
                if mine:
                    cmds.append(LeaderAndIsrCmd(mine, leaders))
                if everything is not None:
                    cmds.append(everything)
                elif changed_views or plan.metadata_to_all:
                    cmds.append(changed_md)
            if deleted_views:
                cmds.append(UpdateMetadataCmd(tuple(deleted_views), live_regs))
            if b in plan.stop_replicas:
                cmds.append(StopReplicaCmd(tuple(plan.stop_replicas[b])))
            if b in plan.delete_replicas:
                cmds.append(StopReplicaCmd(tuple(plan.delete_replicas[b]), delete=True))
            if b in deleted_by:
                cmds.append(StopReplicaCmd(tuple(deleted_by[b]), delete=True))
            if cmds:
                requests[b] = cmds
        return requests

    @staticmethod
    def _by_replica(views: list[PartitionView]) -> dict[int, list[PartitionView]]:
        out: dict[int, list[PartitionView]] = {}
        for v in views:
            for r in v.replicas:
                out.setdefault(r, []).append(v)
        return out

    # ------------------------------------------------------------------ decisions

    def _live_ids(self, excluded: set[int] = frozenset()) -> set[int]:  # type: ignore[assignment]
        return set(self.live) - self.shutting_down - excluded

    def _replicas(self, tp: TP) -> tuple[int, ...]:
        a = self.topics.get(tp[0])
        return a.partitions.get(tp[1], ()) if a else ()

    def _unclean(self, topic: str) -> bool:
        """``unclean.leader.election.enable``: the topic's override, else this broker's dynamic config
        (its own, then ``<default>``), else its static setting."""
        a = self.topics.get(topic)
        for source in (a.config if a else {}, self.broker_configs.get(str(self.settings.broker_id), {}),
                       self.broker_configs.get("<default>", {})):
            value = _boolean(source.get("unclean.leader.election.enable"))
            if value is not None:
                return value
        return self.settings.unclean_leader_election

    def _view(self, tp: TP, is_new: bool = False) -> PartitionView:
        state, ver = self.states[tp]
        return PartitionView(tp[0], tp[1], state, ver, self._replicas(tp), is_new)

    def _kept_view(self, tp: TP) -> PartitionView:
        """:meth:`_view` (not new), the same object as last time while the partition's state, zkVersion and
        replicas are: the periodic resend of every state builds nothing for the partitions that did not change
        (views are immutable; an equal view is the same request)."""
        state, ver = self.states[tp]
        replicas = self._replicas(tp)
        v = self._views.get(tp)
        if v is None or v.state is not state or v.zk_version != ver or v.replicas != replicas:
            v = self._views[tp] = PartitionView(tp[0], tp[1], state, ver, replicas, False)
        return v

    def _write(self, plan: Plan, tp: TP, new: LeaderAndIsr, ver: int | None, reason: str,
               previous: LeaderAndIsr | None) -> None:
        plan.writes.append(StateChange(tp[0], tp[1], new, ver, reason, previous))

    def _maybe_create_offsets_topic(self, plan: Plan, now_ms: int | None = None) -> None:
        """Create __consumer_offsets once every listed broker is live, or, after the grace
        period (checked on ticks), with the live brokers if there are at least RF of them."""
        s = self.settings
        live = sorted(self._live_ids())
        if not s.offsets_eager_create:
            return
        if s.offsets_topic in self.topics or any(a.topic == s.offsets_topic for a in plan.topic_creates):
            return
        if len(live) < s.offsets_replication_factor:
            return
        if len(live) < s.expected_brokers and (now_ms is None or now_ms < self._offsets_deadline_ms):
            return
        n = len(live)
        assignment = assign_replicas(s.offsets_partitions, s.offsets_replication_factor, live,
                                     start_index=self._rng(n), shift=self._rng(n))
        topic_id = base64.urlsafe_b64encode(bytes(self._rng(256) for _ in range(16))).rstrip(b"=").decode()
        # Kafka's GroupMetadataManager.offsetsTopicConfigs, written to /config/topics/__consumer_offsets
        topic = TopicAssignment(s.offsets_topic, assignment, topic_id=topic_id, config={
            "cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": str(s.offsets_segment_bytes)})
        plan.topic_creates.append(topic)
        plan.events.append(Event("topic_created", {"topic": s.offsets_topic, "partitions": s.offsets_partitions,
                                              "replication_factor": s.offsets_replication_factor}))
        for p, replicas in sorted(assignment.items()):
            new = election.initial(replicas, set(live), self.epoch)
            if new is not None:
                self._write(plan, (s.offsets_topic, p), new, None, "new_partition", None)
