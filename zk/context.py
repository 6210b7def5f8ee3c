"""A new controller's context, the reading side of kafkasim's ZooKeeper door (a mixin of ``ZkClient``): the
brokers, the topics with their configs and data watches, the log dir event notifications and the partition
states, in a constant number of round trips whatever the partition count.

The first round trip (the epoch and the children lists) can be sent ahead, right behind the election multi, and
the second (the registrations, the assignments, the configs) with it, on a guess of the names the children will
give (the broker's metadata cache): one session's requests are answered in order, so those reads see the state
after the multi, as Kafka's reads after its election do.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from kazoo.exceptions import NoNodeError

from kafkacommon.metadata import BrokerRegistration, LeaderAndIsr, TopicAssignment
from zk import codecs, paths
from zk.batch import GET_DATA, multi_read_async, multi_read_numbered
from zk.errors import translate, translate_errors
from zk.retry import until_connected
from zk.rules import ControllerMovedError
from zk.stat import Stat, WatchEvent, watcher

TopicPartition = tuple[str, int]

@dataclass
class ClusterSnapshot:
    """Everything a new controller loads, read in a constant number of round trips."""

    controller_epoch: int
    epoch_zk_version: int
    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    topics: dict[str, TopicAssignment] = field(default_factory=dict)
    states: dict[TopicPartition, tuple[LeaderAndIsr, int]] = field(default_factory=dict)
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)  # "<default>" and the reader's id
    round_trips: int = 0      # waits for ZooKeeper, one after the other
    requests: int = 0         # requests sent (several may share a round trip)
    log_dir_events: list[str] | None = None   # the log dir event notifications' sequence numbers, when asked


@dataclass
class SnapshotRequests:
    """:meth:`ZkClient.read_snapshot`'s first round trip, sent: its pending answers (kazoo's async results)."""

    epoch: Any
    broker_ids: Any
    topics: Any
    log_dirs: Any
    watches: tuple
    used: bool = False
    context: "ContextRequests | None" = None   # the second round trip, sent on a guess of the names


@dataclass
class ContextRequests:
    """:meth:`ZkClient.read_snapshot`'s second round trip, sent: the registrations of ``brokers``, the
    assignments and configs of ``topics`` and this broker's dynamic configs (``entities``).  A topic not
    watched yet is read on its own with its data watch (Kafka arms the partition-modification watch with the
    topic's getData): ``gets``; the rest share one multiRead, ``reads``."""

    brokers: tuple
    topics: tuple
    entities: tuple
    reads: Any
    gets: dict
    newly_watched: tuple
    answered: bool = False


@translate_errors
class ControllerContext:
    """Every public method raises zk/errors.py's exceptions, never kazoo's."""

    kz: Any
    read_many: Callable[..., list]
    read_data: Callable[..., list]

    def snapshot_requests(self, broker_watch: Callable[[WatchEvent], None] | None = None,
                          topic_watch: Callable[[WatchEvent], None] | None = None,
                          log_dir_watch: Callable[[WatchEvent], None] | None = None,
                          guess: tuple[Iterable[int], Iterable[str]] | None = None,
                          topic_data_watch: Callable[[WatchEvent], None] | None = None,
                          watched: set[str] | None = None, broker_id: int | None = None) -> "SnapshotRequests":
        """The snapshot's first round trip, sent and not waited for: /controller_epoch, the children of
        /brokers/ids and /brokers/topics (their watches armed when given) and, with ``log_dir_watch``, those of
        /log_dir_event_notification (its watch armed).  Hand it to :meth:`read_snapshot` (``first``), which
        waits for the answers; sent right behind the election multi (``try_elect_controller``'s ``then``), it
        shares the multi's round trip.

        ``guess``: (broker ids, topics) the children are expected to name (the caller's metadata cache): the
        second round trip goes out too, for those names, with :meth:`read_snapshot`'s ``topic_data_watch``,
        ``watched`` and ``broker_id``, before the children have answered.  When the children name nothing
        outside the guess, :meth:`read_snapshot` takes its answers and makes no round trip of its own; a name
        guessed and absent is read for nothing (and its data watch is not armed: a getData on a missing znode
        leaves none)."""
        first = SnapshotRequests(
            multi_read_async(self.kz, [(GET_DATA, paths.CONTROLLER_EPOCH)]),
            self.kz.get_children_async(paths.BROKER_IDS, watch=watcher(broker_watch)),
            self.kz.get_children_async(paths.TOPICS, watch=watcher(topic_watch)),
            None if log_dir_watch is None else
            self.kz.get_children_async(paths.LOG_DIR_EVENT_NOTIFICATION, watch=watcher(log_dir_watch)),
            (broker_watch, topic_watch, log_dir_watch))
        if guess is not None:
            first.context = self._context_requests(sorted(set(guess[0])), sorted(set(guess[1])), topic_data_watch,
                                                   watched, broker_id)
        return first

    def _context_requests(self, ids: list[int], topics: list[str],
                          topic_data_watch: Callable[[WatchEvent], None] | None, watched: set[str] | None,
                          broker_id: int | None) -> ContextRequests:
        """The snapshot's second round trip, sent and not waited for (:class:`ContextRequests`).  Each topic not in
        ``watched`` is added to it before its data watch is armed (the watch's callback takes it out again)."""
        entities = () if broker_id is None else (paths.DEFAULT_ENTITY, str(broker_id))
        new = tuple(t for t in topics if topic_data_watch is not None and t not in watched)
        for t in new:
            watched.add(t)
        gets = {t: self.kz.get_async(paths.topic(t), watch=watcher(topic_data_watch)) for t in new}
        reads = multi_read_async(self.kz, [(GET_DATA, paths.broker(b)) for b in ids]
                                 + [(GET_DATA, paths.topic(t)) for t in topics if t not in gets]
                                 + [(GET_DATA, paths.config_topic(t)) for t in topics]
                                 + [(GET_DATA, paths.config_broker(e)) for e in entities])
        return ContextRequests(tuple(ids), tuple(topics), entities, reads, gets, new)

    def _context_answers(self, ctx: ContextRequests, watched: set[str] | None
                         ) -> tuple[dict[int, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
        """Wait for :meth:`_context_requests`' answers -> per broker, topic, topic config and entity its (data,
        Stat) or error.  A topic whose data watch was to be armed and whose getData failed (missing, or the
        connection lost) is taken out of ``watched`` again: no watch was left."""
        ctx.answered = True
        topics: dict[str, Any] = {}
        lost: Exception | None = None
        for t, pending in ctx.gets.items():
            try:
                data, stat = pending.get()
                topics[t] = (data, Stat.of(stat))
            except Exception as e:  # noqa: BLE001 - NoNode is an answer; anything else is raised below
                if watched is not None:
                    watched.discard(t)
                if not isinstance(e, NoNodeError):
                    lost = lost or e
                topics[t] = translate(e)
        if lost is not None:
            raise lost
        res = [translate(r) if isinstance(r, Exception) else (r[0], Stat.of(r[1])) for r in ctx.reads.get()]
        n, in_reads = len(ctx.brokers), [t for t in ctx.topics if t not in ctx.gets]
        brokers = dict(zip(ctx.brokers, res[:n]))
        topics.update(zip(in_reads, res[n:n + len(in_reads)]))
        n += len(in_reads)
        configs = dict(zip(ctx.topics, res[n:n + len(ctx.topics)]))
        entities = dict(zip(ctx.entities, res[n + len(ctx.topics):]))
        return brokers, topics, configs, entities

    @until_connected
    def read_snapshot(self, broker_watch: Callable[[WatchEvent], None] | None = None,
                      topic_watch: Callable[[WatchEvent], None] | None = None,
                      with_states: bool = True, topic_data_watch: Callable[[WatchEvent], None] | None = None,
                      watched: set[str] | None = None, broker_id: int | None = None,
                      log_dir_watch: Callable[[WatchEvent], None] | None = None,
                      first: "SnapshotRequests | None" = None) -> ClusterSnapshot:
        """The controller's context in a constant number of round trips, whatever the partition count.

        Each topic comes with its config overrides (``/config/topics/<t>``), read in the same multiRead.
        ``with_states=False`` skips the partition states (the caller has them cached).
        ``topic_data_watch``: armed on every topic znode not in ``watched`` (the controller's
        partition-modification watch), in the same round trip as the reads; each topic is added to
        ``watched`` before its watch is armed (the watch's callback takes it out again).  ``broker_id``: also read
        the dynamic broker configs (``/config/brokers/<default>`` and ``/config/brokers/<id>``).
        ``log_dir_watch``: also list the log dir event notifications (``log_dir_events``, their sequence
        numbers), in the first round trip, arming its watch.  ``first``: that round trip, already sent
        (:meth:`snapshot_requests`, with the same watches); used once (a retry after a lost connection sends it
        again), and not counted in ``round_trips`` (it shared an earlier request's).
        """
        # three or four requests in one round trip (watches need the regular API; children come back with them)
        watches = (broker_watch, topic_watch, log_dir_watch)
        sent = first is not None and not first.used and first.watches == watches
        if sent:
            first.used = True
        else:
            if first is not None and first.context is not None and not first.context.answered:
                try:   # (a retry: only for the watches it armed)
                    self._context_answers(first.context, watched)
                except Exception:  # noqa: BLE001 - the snapshot is read again below
                    pass
            first = self.snapshot_requests(broker_watch, topic_watch, log_dir_watch)
        epoch_r = first.epoch.get()[0]   # bounded waits (zk/bounded.py)
        broker_ids = first.broker_ids.get()
        topics = first.topics.get()
        try:
            log_dirs = None if first.log_dirs is None else first.log_dirs.get()
        except NoNodeError:
            log_dirs = []
        if isinstance(epoch_r, Exception):
            raise ControllerMovedError("/controller_epoch is missing")
        snap = ClusterSnapshot(codecs.decode_controller_epoch(epoch_r[0]), epoch_r[1].version,
                               round_trips=0 if sent else 1, requests=0 if sent else 3 + (log_dirs is not None))
        if log_dirs is not None:
            snap.log_dir_events = sorted(paths.log_dir_event_sequence(n) for n in log_dirs
                                         if n.startswith(paths.LOG_DIR_EVENT_PREFIX))
        ids = sorted(int(i) for i in broker_ids if i.isdigit())
        topics = sorted(topics)
        watched = set() if watched is None else watched
        ctx = first.context if sent else None
        if ctx is not None and set(ids) <= set(ctx.brokers) and set(topics) <= set(ctx.topics) \
                and ctx.entities == (() if broker_id is None else (paths.DEFAULT_ENTITY, str(broker_id))):
            answers = self._context_answers(ctx, watched)   # the guess held: no round trip of its own
        else:
            if ctx is not None:   # a name outside the guess: its answers only for the watches they armed
                self._context_answers(ctx, watched)
            answers = self._context_answers(self._context_requests(ids, topics, topic_data_watch, watched,
                                                                   broker_id), watched)
            snap.round_trips += 1
            snap.requests += 1
        brokers, topic_data, configs, entity_configs = answers
        for bid in ids:
            r = brokers[bid]
            if not isinstance(r, Exception):
                snap.brokers[bid] = codecs.decode_broker(bid, r[0], r[1].czxid)
        for t in topics:
            r, c = topic_data[t], configs[t]
            if not isinstance(r, Exception):
                config = {} if isinstance(c, Exception) else codecs.decode_entity_config(paths.config_topic(t), c[0])
                snap.topics[t] = dataclasses.replace(codecs.decode_topic(t, r[0]), config=config)
        for e, r in entity_configs.items():
            snap.broker_configs[e] = {} if isinstance(r, Exception) else \
                codecs.decode_entity_config(paths.config_broker(e), r[0])
        if with_states:
            snap.states = self.read_states([(t, p) for t, a in snap.topics.items() for p in a.partitions])
            snap.round_trips += 1
            snap.requests += 1
        return snap

    @until_connected
    def read_states(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[LeaderAndIsr, int]]:
        """The partition states that exist among ``tps``, with their zkVersions, in one multiRead."""
        tps = list(tps)
        # (the paths are paths.partition_state's; an op's error, a missing state, comes back as an exception
        # instance, a state as (data, version))
        res = multi_read_numbered(self.kz, _partitions_prefix, tps, "/state")
        found = [(tp, r) for tp, r in zip(tps, res) if r.__class__ is tuple]
        decoded = codecs.decode_state_contents([r[0] for _tp, r in found])
        return {tp: (decoded.get(r[0]) or codecs.decode_partition_state(paths.partition_state(*tp), r[0]), r[1])
                for tp, r in found}


def _partitions_prefix(topic: str) -> str:
    return paths.partitions(topic) + "/"
