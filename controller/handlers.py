"""The controller's event handlers, sans-IO: for each event, what it reads from ZooKeeper and in what order,
what it writes (every write fenced by /controller_epoch's zkVersion), what it logs and what it sends.

Each handler is a generator of commands (:mod:`controller.commands`).  A shell runs one with :func:`run`, carrying out
each command with its own I/O and sending back the result, or throwing in the exception the I/O raised (a
``ControllerMovedError``, a ``StateVersionConflict``, a lost connection), exactly where the handler would have
made the call.  The real broker's shell (node/shells/controller_shell.py: one event thread over kazoo and
gRPC) and the simulator's (sim/controller.py: the simulated ZooKeeper and network) run the same handlers, so
the order of steps exists once; the decisions themselves are :class:`controller.core.ControllerCore`'s.
"""
from __future__ import annotations

from typing import Any

from controller.commands import (  # noqa: F401 - the commands, re-exported for the shells
    ReadController, ReadControllerAndEpoch, DeleteControllerIfOurs, TryElect, Snapshot, ReadSnapshot,
    CachedStates, ReadBrokers, ReadStates, ReadDeletionRequests, ReadLogDirEvents, DeleteLogDirEvents,
    CreateTopic, WriteStates, DeleteTopic, DropDeletionMarker, WriteAssignment, ReadZkReassignment,
    WriteZkReassignment, Send, CloseChannels, Emit, Clock, MonoNs, Later, run, Steps, FAILOVER_LOAD)
from controller.event_names import REASSIGNMENT_ISR_CHANGE
from controller.core import ControllerCore, Plan
from kafkacommon import errors
from zk.exceptions import ControllerMovedError, StateVersionConflict

# ---------------------------------------------------------------------- the handlers


class ControllerHandlers:
    """One broker's controller events.  ``zombie``: the planted bug of chaos runs (never in a real
    deployment): a controller whose session expired keeps acting, and its writes are not fenced."""

    def __init__(self, core: ControllerCore, broker_id: int, zombie: bool = False) -> None:
        self.core = core
        self.broker_id = broker_id
        self.zombie = zombie
        self.active_controller_id = -1
        self.orphan_suspected = False   # /controller may be ours while we do not act: re-checked on ticks
        self.failovers = 0
        self.last_write_ms = 0.0
        # a failover decided from its broker's metadata cache, whose every state verify_states reads again
        # right after it (the same event): until then a refused write re-reads only the states it was writing
        self.unverified = False

    def _emit(self, name: str, **fields: Any) -> Emit:
        return Emit(name, fields)

    # ------------------------------------------------------------------ election

    def elect(self, absent: bool = False, event_ns: int | None = None, epoch: tuple | None = None) -> Steps:
        """Kafka's elect(): /controller read (its watch armed), and the election when it is absent.  /controller_epoch
        is read in the same round trip (Kafka reads it after /controller, in registerControllerAndIncrement-
        ControllerEpoch; pipelined, ZooKeeper sees the same order).  ``absent``: the caller has just read both
        (watch armed) and found no /controller, so the election starts at once with the ``epoch`` it read (a
        second read in the same instant is one more round trip on the failover's critical path, and answers the
        same: if another broker has won meanwhile, the election multi fails and the winner is read).
        ``event_ns``: when the caller's event was taken up (``controller_elected``'s ``event_mono_ns``; default:
        now)."""
        if event_ns is None:
            event_ns = yield MonoNs()
        if absent:
            current = None
        else:
            current, epoch = yield ReadControllerAndEpoch()
        if current is not None:
            self.active_controller_id = current
            if current == self.broker_id and not self.core.active:
                # /controller names us but we are not acting (KAFKA-13407): delete it, which
                # fires everyone's watch (ours too) and runs the election again.
                deleted = yield DeleteControllerIfOurs()
                yield self._emit("controller_znode_orphaned", controller_id=current, deleted=deleted)
                self.orphan_suspected = not deleted
            else:
                self.orphan_suspected = False
            return
        t0 = yield MonoNs()
        # the context's first reads go out behind the multi (FAILOVER_LOAD, read by failover())
        won, epoch, version = yield TryElect(epoch, then=FAILOVER_LOAD)
        if not won:
            winner = yield ReadController()
            self.active_controller_id = -1 if winner is None else winner
            yield self._emit("controller_election_lost", controller_id=self.active_controller_id, epoch=epoch)
            return
        self.active_controller_id = self.broker_id
        t1 = yield MonoNs()
        yield self._emit("controller_elected", epoch=epoch, epoch_zk_version=version,
                         elect_ms=round((t1 - t0) / 1e6, 3), event_mono_ns=event_ns)
        try:
            yield from self.failover(epoch, version)
        except ControllerMovedError:
            raise
        except Exception:
            # We won but could not act: give the role back rather than hold /controller idle.
            yield from self.resign("failover failed")
            self.orphan_suspected = True
            try:
                self.orphan_suspected = not (yield DeleteControllerIfOurs())
            except Exception:  # noqa: BLE001 - retried from the tick once ZooKeeper answers
                pass
            raise

    def controller_change(self) -> Steps:
        taken_up = yield MonoNs()
        current, epoch = yield ReadControllerAndEpoch()
        if self.core.active and current != self.broker_id and not self.zombie:
            yield from self.resign("controller znode changed" if current is not None else "controller znode deleted")
        if current is None:
            yield from self.elect(absent=True, event_ns=taken_up, epoch=epoch)
        else:
            self.active_controller_id = current

    def failover(self, epoch: int, version: int) -> Steps:
        """Load the context and act on it.

        The partition states come from this broker's metadata cache when it covers every partition
        (every broker gets them all through UpdateMetadata), which keeps the 1,000-znode read off the
        critical path.  That is safe: every write is conditional on the cached zkVersion, so a stale
        entry fails the atomic multi (BADVERSION) and the states are read again; and right after
        acting, :meth:`verify_states` reads every state again and reconciles any difference.
        """
        t0 = yield MonoNs()
        snap = yield FAILOVER_LOAD
        if snap.epoch_zk_version != version:
            raise ControllerMovedError(f"epoch moved to {snap.controller_epoch} while loading")
        # Kafka's onControllerFailover deletes the log dir event notifications left (their watch armed, in the
        # snapshot's first round trip here): the answers to its LeaderAndIsr tell the new controller which
        # replicas are offline
        if snap.log_dir_events:
            yield DeleteLogDirEvents(version, tuple(snap.log_dir_events))
        wanted = [(t, p) for t, a in snap.topics.items() for p in a.partitions]
        cache = yield CachedStates()
        from_cache = bool(wanted) and all(tp in cache for tp in wanted)
        round_trips = snap.round_trips
        if from_cache:
            states = {tp: cache[tp] for tp in wanted}
        else:
            states = yield ReadStates(tuple(wanted))
            round_trips += 1
        t1 = yield MonoNs()
        self.failovers += 1
        self.unverified = from_cache
        plan = self.core.on_failover(epoch, version, snap.brokers, snap.topics, states, (yield Clock()),
                                     snap.broker_configs)
        decide_ns = (yield MonoNs()) - t1
        written = yield from self.execute(plan)   # the whole state to every broker, before any decision
        write_ms = self.last_write_ms
        acted = Plan()
        while self.core.active:   # then the decisions, one plan after the other, as Kafka's state machines
            t = yield MonoNs()
            step = self.core.failover_next()
            decide_ns += (yield MonoNs()) - t
            if step is None:
                break
            written += yield from self.execute(step)
            write_ms += self.last_write_ms
            acted.writes.extend(step.writes)
        t3 = yield MonoNs()
        yield self._emit("controller_failover_done", epoch=epoch, load_ms=round((t1 - t0) / 1e6, 3),
                         decide_ms=round(decide_ns / 1e6, 3), write_ms=round(write_ms, 3),
                         zk_round_trips=round_trips, partitions=len(states), states_from_cache=from_cache,
                         states_written=written, total_ms=round((t3 - t0) / 1e6, 3))
        if from_cache and self.core.active:
            yield from self.verify_states(acted)
        if self.core.active:   # initializePartitionReassignments: the znode's first (it supplants), then the rest
            resumed = yield from self.zk_partition_reassignment()
            for tp in self.core.reassigning():
                if tp not in resumed:
                    yield from self.reassign(tp)
        if self.core.active:
            yield Later("topic_deletion")   # resume deletions requested before (and arm the watch)

    def verify_states(self, acted: Plan) -> Steps:
        """Read every partition state again; where the cache we decided from was stale, decide again."""
        written = {(w.topic, w.partition) for w in acted.writes}
        fresh = yield ReadStates(tuple(self.core.states))
        self.unverified = False
        stale = {tp: st for tp, st in fresh.items() if tp not in written and st != self.core.states.get(tp)}
        missing = [tp for tp in self.core.states if tp not in fresh]
        yield self._emit("controller_cache_verified", epoch=self.core.epoch, partitions=len(fresh),
                         stale=len(stale), missing=len(missing))
        if stale:
            yield from self.execute(self.core.reload_states(stale))

    def resign(self, reason: str) -> Steps:
        epoch, was_active = self.core.epoch, self.core.active
        self.core.on_resign()
        self.unverified = False
        yield CloseChannels()
        if was_active:
            yield self._emit("controller_resigned", epoch=epoch, reason=reason)

    def fenced(self, detail: str) -> Steps:
        """A ``ControllerMovedError`` out of any handler: another controller was elected."""
        yield self._emit("controller_fenced", epoch=self.core.epoch, detail=detail)
        yield from self.resign("fenced")

    # ------------------------------------------------------------------ ZooKeeper watches and the session

    def broker_change(self) -> Steps:
        if self.core.active:
            yield from self.execute(self.core.on_broker_change((yield ReadBrokers())))
            resumable, self.core.resumable = self.core.resumable, []
            for tp in resumable:   # onBrokerStartup: a target replica's broker started
                yield from self.reassign(tp)

    def topic_change(self) -> Steps:
        """A topic was created (/brokers/topics' children), a topic's assignment changed (its znode: Kafka's
        PartitionModifications), or a config changed (a broker's config-change listener, on the controller:
        Kafka's TopicUncleanLeaderElectionEnable): read the topics again, with their configs, and decide."""
        if self.core.active:
            snap = yield ReadSnapshot(watch_brokers=False)
            yield from self.execute(self.core.on_topics_change(snap.topics, snap.broker_configs))

    partition_modifications = topic_change
    config_change = topic_change

    def topic_deletion(self) -> Steps:
        if self.core.active:
            requested = yield ReadDeletionRequests()
            if requested:
                yield from self.execute(self.core.on_topic_deletion(requested))

    def log_dir_event(self) -> Steps:
        """/log_dir_event_notification changed (Kafka's processLogDirEventNotification): ask the brokers that
        wrote a notification which replicas they lost (controller/log_dirs.py), then delete what was read."""
        if not self.core.active:
            return
        pending = yield ReadLogDirEvents()
        if not pending:
            return
        yield from self.execute(self.core.on_log_dir_event(b for _seq, b in pending if b is not None))
        if self.core.active:
            yield DeleteLogDirEvents(self.fence(), tuple(seq for seq, _b in pending))

    def leader_and_isr_response(self, broker_id: int, broker_epoch: int, errors_by_tp: dict) -> Steps:
        """A broker's answer to a LeaderAndIsr (Kafka's LeaderAndIsrResponseReceived): replicas on offline log
        directories leave their leaderships and ISRs."""
        if self.core.active:
            yield from self.execute(self.core.on_leader_and_isr_response(broker_id, broker_epoch, errors_by_tp))

    def expire(self) -> Steps:
        """Kafka's Expire (after the shell dropped its queued work): resign (unless a zombie); the shell then
        registers the broker anew and runs :meth:`reelect`, which decides everything again."""
        if self.core.active and not self.zombie:
            yield from self.resign("session expired")
        yield self._emit("zk_session_expired")

    def reelect(self) -> Steps:
        if self.zombie and self.core.active:
            yield from self.broker_change()   # the planted bug: carry on as controller, unfenced
        else:
            yield from self.elect()

    def shutdown(self) -> Steps:
        if self.core.active:
            yield from self.resign("shutdown")

    def tick(self, connected: bool) -> Steps:
        """The periodic work (every 100 ms): the core's timers; a suspected orphan /controller re-checked."""
        if self.core.active:
            plan = self.core.on_tick((yield Clock()))
            if not plan.empty:
                yield from self.execute(plan)
        elif self.orphan_suspected and connected:
            yield from self.elect()

    # ------------------------------------------------------------------ requests

    def elect_leaders(self, tps: list | None) -> Steps:
        if not self.core.active:
            return {tp: errors.NOT_CONTROLLER for tp in (tps or [])} or {("", -1): errors.NOT_CONTROLLER}
        plan = self.core.elect_preferred(tps, reason="preferred_admin")
        yield from self.execute(plan)
        return self.core.preferred_results(tps, {(w.topic, w.partition) for w in plan.writes})

    def elect_leaders_request(self, tps: list, election_type: int) -> Steps:
        """The Kafka ElectLeaders request (processReplicaLeaderElection) -> {tp: (error, message, new leader)}."""
        if not self.core.active:
            return {tp: (errors.NOT_CONTROLLER, None, -1) for tp in tps}
        plan, answers = self.core.elect_leaders_on_request(tps, election_type)
        yield from self.execute(plan)
        if not self.core.active:   # fenced while writing: ControllerMovedException, as Kafka's ApiError has it
            answers = {tp: (errors.NOT_CONTROLLER, None, -1) if a[0] == errors.NONE else a for tp, a in answers.items()}
        return answers

    # ------------------------------------------------------------------ partition reassignment

    def alter_reassignments(self, requested: dict) -> Steps:
        """AlterPartitionReassignments (processApiPartitionReassignment): {tp: target replicas or None (cancel)}
        -> (top-level error, {tp: (error, message)})."""
        if not self.core.active:
            return errors.NOT_CONTROLLER, {}
        refused, started = self.core.on_alter_reassignments(requested)
        # the latest reassignment takes precedence over one /admin/reassign_partitions asked for
        yield from self.execute(self.core.forget_zk_reassignments(started))
        results = dict(refused)
        for tp, full in started.items():
            if not self.core.active:
                results[tp] = (errors.NOT_CONTROLLER, None)
                continue
            yield from self.reassign(tp, full)
            results[tp] = (errors.NONE, None) if self.core.active else (errors.NOT_CONTROLLER, None)
        return errors.NONE, {tp: results[tp] for tp in requested}

    def list_reassignments(self, tps: list | None) -> Steps:
        """ListPartitionReassignments -> (top-level error, {tp: (replicas, adding, removing)})."""
        if not self.core.active:
            return errors.NOT_CONTROLLER, {}
        return errors.NONE, self.core.list_reassignments(tps)
        yield  # a generator, as every handler

    def reassign(self, tp: tuple, full: tuple | None = None) -> Steps:
        """Kafka's onPartitionReassignment for one partition (``full``: its new (RS, AR, RR); None: the current
        one, resumed): phase U, then A, or B with its last write (controller/reassignment.py)."""
        current = self.core.current_reassignment(tp)
        if current is None:
            return
        yield from self.execute(self.core.reassignment_update(tp, full or current))
        removing = (self.core.current_reassignment(tp) or ((), (), ()))[2]
        plan, complete = self.core.reassignment_progress(tp)
        yield from self.execute(plan)
        if complete and self.core.active:
            for r in removing:   # B4: one replica after the other, each write landed before the next
                if self.core.active:
                    yield from self.execute(self.core.reassignment_remove(tp, r))
            yield from self.execute(self.core.reassignment_finish(tp))
            if tp[0] in self.core.deletion_deferred and not any(t == tp[0] for t, _ in self.core.reassigning()):
                yield Later("topic_deletion")   # resumeDeletionForTopics

    def reassignment_isr_change(self) -> Steps:
        """An ISR changed through AlterIsr (processAlterIsr's maybeCompleteReassignment): each reassignment whose
        target replicas are all in the ISR now completes."""
        for tp in self.core.reassigning() if self.core.active else ():
            a, cur = self.core.topics[tp[0]], self.core.states.get(tp)
            if cur is not None and set(a.target(tp[1])) <= set(cur[0].isr):
                yield from self.reassign(tp)

    def zk_partition_reassignment(self) -> Steps:
        """/admin/reassign_partitions appeared (or the controller took over): its reassignments start; those
        that cannot are taken out of it -> the partitions started."""
        if not self.core.active:
            return set()
        asked = yield ReadZkReassignment()
        if not asked:
            return set()
        started, failed = self.core.on_zk_reassignment(asked)
        if failed:
            yield self._emit("reassignment_refused", controller_epoch=self.core.epoch, source="zookeeper",
                             partitions=[f"{t}-{p}" for t, p in failed])
            rest = {tp: r for tp, r in asked.items() if tp not in failed}
            yield from self.execute(Plan(zk_reassignment=rest))
        for tp, full in started.items():
            yield from self.reassign(tp, full)
        return set(started)

    def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> Steps:
        code, plan, remaining = self.core.on_controlled_shutdown(broker_id, broker_epoch)
        if code == errors.NONE:
            # Kafka's doControlledShutdown: the led partitions' batch (written and sent), then the followed ones'
            for batch in plan.controlled_shutdown_batches():
                yield from self.execute(batch)
                if not self.core.active:  # fenced while writing
                    break
            if not self.core.active:
                code = errors.NOT_CONTROLLER
        return code, remaining

    def alter_isr(self, broker_id: int, broker_epoch: int, items: list) -> Steps:
        """An AlterIsr from a partition leader -> (top error, {tp: (error, state, zkVersion)})."""
        code, plan, results = self.core.on_alter_isr(broker_id, broker_epoch, items)
        try:
            if code == errors.NONE and plan.writes:
                try:
                    yield from self.execute(plan, retry_conflicts=False)
                except StateVersionConflict as e:
                    yield self._emit("zk_write_conflict", path=e.path)
                    fresh = yield ReadStates(tuple(sorted(self.core.states)))
                    results, retry = self.core.on_alter_isr_conflict(plan, results, fresh)
                    yield from self.execute(retry)
                if not self.core.active:
                    code = errors.NOT_CONTROLLER
                elif any(self.core.topics[w.topic].reassigning(w.partition) for w in plan.writes
                         if results.get((w.topic, w.partition)) == errors.NONE and w.topic in self.core.topics):
                    yield Later(REASSIGNMENT_ISR_CHANGE)   # after the answer, as Kafka's processAlterIsr
        except ControllerMovedError as e:
            yield from self.fenced(str(e))
            code = errors.NOT_CONTROLLER
        return code, self.core.alter_isr_answer(results)

    # ------------------------------------------------------------------ carrying out a plan

    def fence(self) -> int:
        """The /controller_epoch version every write is conditional on (-1, which matches any
        version, only with the planted zombie bug)."""
        return -1 if self.zombie else self.core.epoch_zk_version

    def execute(self, plan: Plan, depth: int = 0, retry_conflicts: bool = True) -> Steps:
        """Make the plan's fenced writes, then send its requests and log its events -> states written.

        On BADVERSION the states are read again and decided again, unless ``retry_conflicts`` is False
        (a request's own change, such as AlterIsr, cannot be re-derived): then StateVersionConflict
        reaches the caller.
        """
        if not self.core.active:
            return 0
        for name, fields in plan.observed:
            yield Emit(name, dict(controller_epoch=self.core.epoch, **fields))
        self.last_write_ms = write_ms = 0.0
        t0 = yield MonoNs()
        versions: dict = {}
        if plan.has_writes:
            try:
                for topic in plan.topic_creates:
                    yield CreateTopic(self.fence(), topic)
                writes = plan.writes
                if self.zombie:  # the planted bug: no fencing at all, not even the states' zkVersions
                    writes = [w._replace(zk_version=-1) if w.zk_version is not None else w for w in writes]
                versions = yield WriteStates(self.fence(), tuple(writes))
                for a in plan.assignment_writes:
                    yield WriteAssignment(self.fence(), a)
                if plan.zk_reassignment is not None:
                    yield WriteZkReassignment(self.fence(), plan.zk_reassignment)
                for a in plan.topic_deletes:
                    yield DeleteTopic(self.fence(), a)
                for topic in plan.markers_to_drop:
                    yield DropDeletionMarker(self.fence(), topic)
            except ControllerMovedError as e:
                yield self._emit("zk_write_fenced", epoch=self.core.epoch, writes=len(plan.writes), detail=str(e))
                yield from self.resign("fenced by a newer controller epoch")
                return 0
            except StateVersionConflict as e:
                if depth >= 3 or not retry_conflicts:
                    raise
                own = tuple(dict.fromkeys((w.topic, w.partition) for w in plan.writes))
                if not (self.unverified and depth == 0 and own):
                    own = tuple((t, p) for t in self.core.topics for p in self.core.topics[t].partitions)
                # (a failover's states from the cache: the plan's own partitions, as Kafka re-reads the states
                # whose update failed; every other state is read by verify_states right after the failover, and
                # one that differs is sent as read there; a second refusal reads them all)
                yield self._emit("zk_write_conflict", path=e.path, states_read=len(own))
                states = yield ReadStates(own)
                retry = self.core.reload_states(states)
                retry.full_sync |= plan.full_sync
                retry.resync = list(dict.fromkeys(plan.resync + retry.resync))   # a refused retry's too
                return (yield from self.execute(retry, depth + 1))
            write_ms = ((yield MonoNs()) - t0) / 1e6
            self.last_write_ms = write_ms
        requests = self.core.commit(plan, versions)
        yield Send(requests)  # first: brokers learn their new roles before we write the log lines
        for w in plan.writes:
            s = w.state
            yield self._emit("partition_state_written", topic=w.topic, partition=w.partition, reason=w.reason,
                             leader=s.leader, leader_epoch=s.leader_epoch, isr=list(s.isr),
                             controller_epoch=s.controller_epoch, zk_version=versions[(w.topic, w.partition)],
                             previous_leader=w.previous.leader if w.previous else None,
                             previous_isr=list(w.previous.isr) if w.previous else None)
        if plan.writes:
            yield self._emit("partition_states_written", epoch=self.core.epoch, count=len(plan.writes),
                             write_ms=round(write_ms, 3), mono_ns_written=t0 + int(write_ms * 1e6))
        for a in plan.topic_deletes:
            yield self._emit("topic_deleted", controller_epoch=self.core.epoch, topic=a.topic,
                             partitions=len(a.partitions))
        for name, fields in plan.events:
            yield Emit(name, dict(controller_epoch=self.core.epoch, **fields))
        return len(plan.writes)
