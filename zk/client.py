"""kafkasim's only door to ZooKeeper.

Everything that touches a znode goes through :class:`ZkClient`: broker
registration (checked ephemeral create), the controller election multi,
controller writes fenced by /controller_epoch's zkVersion, and batched reads
through multiRead.  The callers (node/) never see kazoo: they get
zk/errors.py's exceptions and zk/stat.py's types.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NodeExistsError, NoNodeError

from kafkacommon.metadata import BrokerRegistration, LeaderAndIsr, TopicAssignment
from zk import codecs, paths, rules
from zk import retry
from zk.bounded import BoundedHandler
from zk.config_store import ConfigStore
from zk.context import ClusterSnapshot, ControllerContext
from zk.election import ControllerElection
from zk.errors import CONNECTION_ERRORS, NoNode, ZkError, translate, translate_errors, translated
from zk.stat import Stat, WatchEvent, watcher
from zk.batch import (CREATE, DELETE, GET_DATA, SET_DATA, multi_read, multi_read_data, multi_write,
                      multi_write_async)
from zk.rules import ControllerMovedError, StateVersionConflict

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
MULTI_CHUNK = 1000  # ops per multi; well under jute.maxbuffer for our znodes
__all__ = ["CONNECTION_ERRORS", "ClusterSnapshot", "ControllerMovedError", "StateVersionConflict", "StateWrite", "ZkClient",
           "expire_session", "quiet_client_logs"]
RETRIED_ERRORS = retry.RETRIED_ERRORS
until_connected = retry.until_connected


class BrokerRegistrationTimeout(ZkError):
    """An old session's /brokers/ids/<id> did not go away in time."""


def split_connect(connect: str) -> tuple[str, str]:
    """'h:p,h:p/chroot' -> ('h:p,h:p', '/chroot'); chroot '' when absent."""
    if "/" in connect:
        hosts, chroot = connect.split("/", 1)
        return hosts, "/" + chroot.rstrip("/") if chroot.strip("/") else ""
    return connect, ""


@dataclass(frozen=True)
class StateWrite:
    """One partition-state write: create when ``zk_version`` is None, else a conditional set."""

    topic: str
    partition: int
    state: LeaderAndIsr
    zk_version: int | None


@translate_errors
class ZkClient(ControllerElection, ControllerContext, ConfigStore):
    """Every public method raises zk/errors.py's exceptions, never kazoo's."""

    def __init__(self, connect: str, session_timeout_ms: int, connection_timeout_ms: int | None = None):
        self.hosts, self.chroot = split_connect(connect)
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self.retry_deadline_s = max(30.0, 3 * session_timeout_ms / 1000.0)
        #: The longest any request waits for its answer (zk/bounded.py): the session timeout.
        self.request_timeout_s = session_timeout_ms / 1000.0
        self._closing = False
        self.kz = KazooClient(hosts=self.hosts, timeout=session_timeout_ms / 1000.0,
                              handler=BoundedHandler(self._wait_bound))
        self._listeners: list[Callable[[str], None]] = []
        self.kz.add_listener(self._on_state)

    # ------------------------------------------------------------ session

    def start(self) -> None:
        self.kz.start(timeout=self.connection_timeout_ms / 1000.0)
        if self.chroot:
            self.kz.ensure_path(self.chroot)
            self.kz.chroot = self.chroot

    def stop(self, timeout_s: float | None = None) -> bool:
        """Close the session: ZooKeeper deletes our ephemerals at once.

        Waits at most ``timeout_s`` (default: the session timeout, at least 1 s) for kazoo to
        finish; returns False when it did not (its threads are daemons and are left behind: a
        session we could not close expires on the server by itself).  Re-raises kazoo's error.
        """
        outcome: list[BaseException | None] = []

        def close() -> None:
            try:
                try:
                    self.kz.stop()
                finally:
                    self.kz.close()
            except BaseException as e:  # handed to the caller below
                outcome.append(e)
            else:
                outcome.append(None)

        closer = threading.Thread(target=close, name="zk-close", daemon=True)
        closer.start()
        closer.join(max(1.0, self.request_timeout_s) if timeout_s is None else timeout_s)
        if not outcome:
            log.warning("closing the ZooKeeper session did not finish in time; leaving it to expire")
            return False
        if outcome[0] is not None:
            raise outcome[0]
        return True

    def fail_fast(self) -> None:
        """From now on, don't wait for a ZooKeeper that may never come back (a stopping broker):
        a request made while there is no connection fails at once with a connection error, and
        reads are no longer retried until connected.  Requests made while connected still wait
        for their answer, up to ``request_timeout_s``."""
        self._closing = True

    def _wait_bound(self) -> float:
        """How long a request may wait for its answer now (zk/bounded.py); 0 = not at all."""
        if self._closing and not self.connected:
            return 0.0
        return self.request_timeout_s

    def _closing_stop(self, _retry_state: Any) -> bool:
        return self._closing

    def wait_connected(self, timeout_s: float, poll_s: float = 0.02) -> bool:
        """True as soon as the client is connected, False if it still is not after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while not self.connected:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            time.sleep(min(poll_s, remaining))
        return True

    @property
    def session_id(self) -> int:
        return self.kz.client_id[0] if self.kz.client_id else 0

    @property
    def session_password(self) -> bytes:
        return self.kz.client_id[1] if self.kz.client_id else b""

    @property
    def connected(self) -> bool:
        return self.kz.state == KazooState.CONNECTED

    def add_state_listener(self, fn: Callable[[str], None]) -> None:
        """fn('CONNECTED'|'SUSPENDED'|'LOST') from kazoo's thread; keep it short."""
        self._listeners.append(fn)

    def _on_state(self, state: str) -> None:
        for fn in self._listeners:
            try:
                fn(str(state))
            except Exception:  # a listener must never break kazoo's thread
                log.exception("state listener failed")

    @until_connected
    def ensure_persistent_paths(self) -> None:
        for p in paths.PERSISTENT_PATHS + paths.KAFKA_PERSISTENT_PATHS:
            self.kz.ensure_path(p)
        try:   # a Kafka 2.8 controller creates it at its failover; nothing reads it here
            self.kz.create(paths.FEATURE, codecs.encode_feature_znode())
        except NodeExistsError:
            pass

    @until_connected
    def ensure_cluster_id(self, cluster_id: str) -> str:
        """/cluster/id: create it with ``cluster_id`` when absent (Kafka's getOrGenerateClusterId); the id it
        holds."""
        try:
            self.kz.create(paths.CLUSTER_ID, codecs.encode_cluster_id(cluster_id), makepath=True)
            return cluster_id
        except NodeExistsError:
            data, _ = self.kz.get(paths.CLUSTER_ID)
            return codecs.decode_cluster_id(data)

    # ------------------------------------------------------------ generic

    @until_connected
    def get(self, path: str) -> tuple[bytes, Stat]:
        """The znode's data and stat; NoNode when it does not exist."""
        data, stat = self.kz.get(path)
        return data, Stat.of(stat)

    @until_connected
    def get_children(self, path: str) -> list[str]:
        return self.kz.get_children(path)

    @until_connected
    def exists(self, path: str, watch: Callable[[WatchEvent], None] | None = None) -> Stat | None:
        stat = self.kz.exists(path, watch=watcher(watch))
        return None if stat is None else Stat.of(stat)

    @until_connected
    def read_many(self, ops: Sequence[tuple[int, str]]) -> list[Any]:
        """One multiRead: per op ``(data, Stat)`` for GET_DATA, the children for GET_CHILDREN, or
        the op's error (NoNode, ...) as a value."""
        return [translate(r) if isinstance(r, Exception) else (r[0], Stat.of(r[1])) if isinstance(r, tuple) else r
                for r in multi_read(self.kz, ops)]

    @until_connected
    def read_data(self, paths_: Sequence[str]) -> list[Any]:
        """getData of every path in one multiRead: per path ``(data, zkVersion)``, or the op's error (NoNode,
        ...) as a value.  :meth:`read_many` without the stats, for the reads of every partition state."""
        return [translate(r) if isinstance(r, Exception) else r for r in multi_read_data(self.kz, paths_)]

    # ------------------------------------------------------------ brokers

    def register_broker(self, reg: BrokerRegistration, wait_s: float,
                        predecessor_session: int | None = None) -> int:
        """Create the ephemeral /brokers/ids/<id>; return the broker epoch (its czxid).

        When the node exists:
        - it is ours (our session created it before a connection loss: Kafka's
          checkedEphemeralCreate) -> keep it;
        - it belongs to ``predecessor_session``, a session that the caller has
          proved belonged to a dead earlier process of this broker -> replace it
          in one multi (delete at its version, create), so the controller sees
          the same id with a larger czxid: a bounced broker;
        - otherwise it belongs to a live or unknown session -> wait for that
          session to end, up to ``wait_s``, then create ours.
        """
        path = paths.broker(reg.broker_id)
        deadline = time.monotonic() + wait_s
        data = codecs.encode_broker(reg)
        while True:
            try:
                self.kz.create(path, data, ephemeral=True)
            except NodeExistsError:
                pass
            try:
                _, stat = self.kz.get(path)
            except NoNodeError:
                continue  # deleted between our create and get: try again
            if stat.ephemeralOwner == self.session_id:
                return stat.czxid
            if predecessor_session and stat.ephemeralOwner == predecessor_session:
                tx = self.kz.transaction()
                tx.delete(path, stat.version)
                tx.create(path, data, ephemeral=True)
                if not any(isinstance(r, Exception) for r in tx.commit()):
                    continue  # read it back: the loop returns its czxid
            gone = threading.Event()
            if self.kz.exists(path, watch=lambda _e: gone.set()) is None:
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not gone.wait(remaining):
                raise BrokerRegistrationTimeout(
                    f"{path} is held by session 0x{stat.ephemeralOwner:x} and did not expire in {wait_s:.1f}s")

    @until_connected
    def read_brokers(self, watch: Callable[[WatchEvent], None] | None = None) -> dict[int, BrokerRegistration]:
        """The live brokers with their epochs: two round trips."""
        ids = self.kz.get_children(paths.BROKER_IDS, watch=watcher(watch))
        ids = sorted(int(i) for i in ids if i.isdigit())
        out: dict[int, BrokerRegistration] = {}
        for bid, res in zip(ids, self.read_many([(GET_DATA, paths.broker(b)) for b in ids])):
            if isinstance(res, Exception):
                continue  # went away between the two reads
            data, stat = res
            out[bid] = codecs.decode_broker(bid, data, stat.czxid)
        return out

    # ------------------------------------------------------------ controller state

    def fenced_multi(self, epoch_zk_version: int, build: Callable[[Any], None]) -> list[Any]:
        """multi(check /controller_epoch @ epoch_zk_version, *ops added by build(tx)).

        Raises ControllerMovedError when the check fails, StateVersionConflict
        (with the path) when another op hit BADVERSION, and re-raises any other
        failure.  Returns the per-op results after the check on success.
        """
        tx = self.kz.transaction()
        op = rules.fence_op(epoch_zk_version)
        tx.check(op[1], op[2])
        build(tx)
        results = tx.commit()
        error = rules.multi_failure([translate(r) if isinstance(r, Exception) else r for r in results],
                                    [getattr(o, "path", "?") for o in tx.operations[1:]], epoch_zk_version)
        if error is not None:
            raise error
        return results[1:]

    def write_states(self, epoch_zk_version: int, writes: Sequence[StateWrite]) -> dict[TopicPartition, int]:
        """Write partition states in batched multis fenced by the controller epoch.

        Returns the new zkVersion of each written state.  Each chunk of MULTI_CHUNK writes is atomic; the
        chunks are sent together (pipelined, as Kafka's ZooKeeperClient sends its conditional setData calls
        together) and applied in the order sent, each on its own: a chunk refused does not stop the ones after
        it, as one partition's refused write in Kafka does not stop the others.  The error raised, once every
        chunk has answered: ControllerMovedError if any chunk was fenced, else the first chunk's failure
        (the caller re-reads the states, and finds the chunks that did apply).
        """
        out: dict[TopicPartition, int] = {}
        sent = []
        for i in range(0, len(writes), MULTI_CHUNK):
            chunk = writes[i:i + MULTI_CHUNK]
            ops = [(CREATE, op[1], op[2], -1) if op[0] == "create" else (SET_DATA, op[1], op[2], op[3])
                   for op in rules.state_write_ops(chunk)]
            parents = self._missing_parents([w for w in chunk if w.zk_version is None])
            ops = [(CREATE, p, b"", -1) for p in parents] + ops
            sent.append((chunk, len(parents), ops,
                         multi_write_async(self.kz, (paths.CONTROLLER_EPOCH, epoch_zk_version), ops)))
        failures: list[BaseException] = []
        for chunk, n_parents, ops, pending in sent:
            results = pending.get(timeout=30.0)
            error = self._multi_error(results, [op[1] for op in ops], epoch_zk_version)
            if error is not None:
                failures.append(error)
                continue
            for w, version in zip(chunk, results[1 + n_parents:]):
                out[(w.topic, w.partition)] = version
        if failures:
            raise next((e for e in failures if isinstance(e, ControllerMovedError)), failures[0])
        return out

    def _missing_parents(self, creates: Sequence[StateWrite]) -> list[str]:
        """The partitions/ and partitions/<p> znodes a new state needs and that do not exist yet
        (an admin creating a topic writes only /brokers/topics/<t>, as in Kafka)."""
        if not creates:
            return []
        wanted = rules.state_parents(creates)
        found = self.read_many([(GET_DATA, p) for p in wanted])
        return [p for p, r in zip(wanted, found) if isinstance(r, NoNode)]

    @staticmethod
    def _multi_error(results: list[Any], op_paths: list[str], epoch_zk_version: int) -> BaseException | None:
        """A fenced multi's failure as zk/rules.py names it (None when it applied)."""
        return rules.multi_failure([translate(r) if isinstance(r, Exception) else r for r in results], op_paths,
                                   epoch_zk_version)

    def _raise_multi_failure(self, results: list[Any], op_paths: list[str], epoch_zk_version: int) -> None:
        error = self._multi_error(results, op_paths, epoch_zk_version)
        if error is not None:
            raise error

    def delete_topic(self, epoch_zk_version: int, assignment: TopicAssignment) -> None:
        """Controller side: remove the topic's znodes and its deletion marker, fenced."""
        t = assignment.topic
        ops: list[tuple[int, str, bytes | None, int]] = []
        existing = self.read_many([(GET_DATA, paths.partition_state(t, p)) for p in sorted(assignment.partitions)])
        for p, r in zip(sorted(assignment.partitions), existing):
            if not isinstance(r, Exception):
                ops.append((DELETE, paths.partition_state(t, p), None, -1))
        for p in sorted(assignment.partitions):
            if self.kz.exists(paths.partition(t, p)):
                ops.append((DELETE, paths.partition(t, p), None, -1))
        if self.kz.exists(paths.partitions(t)):
            ops.append((DELETE, paths.partitions(t), None, -1))
        if self.kz.exists(paths.topic(t)):
            ops.append((DELETE, paths.topic(t), None, -1))
        if self.kz.exists(paths.config_topic(t)):   # Kafka's completeDeleteTopic: the configs go too
            ops.append((DELETE, paths.config_topic(t), None, -1))
        if self.kz.exists(paths.delete_topic(t)):
            ops.append((DELETE, paths.delete_topic(t), None, -1))
        for i in range(0, len(ops), MULTI_CHUNK):
            chunk = ops[i:i + MULTI_CHUNK]
            results = multi_write(self.kz, (paths.CONTROLLER_EPOCH, epoch_zk_version), chunk)
            self._raise_multi_failure(results, [op[1] for op in chunk], epoch_zk_version)

    def delete_deletion_marker(self, epoch_zk_version: int, topic: str) -> None:
        """Controller side, with delete.topic.enable=false: drop the request, fenced."""
        results = multi_write(self.kz, (paths.CONTROLLER_EPOCH, epoch_zk_version),
                              [(DELETE, paths.delete_topic(topic), None, -1)])
        self._raise_multi_failure(results, [paths.delete_topic(topic)], epoch_zk_version)

    # ------------------------------------------------------------ log directory failures (KIP-112)

    def propagate_log_dir_event(self, broker_id: int) -> str:
        """A broker's side: ``/log_dir_event_notification/log_dir_event_<seq>`` (persistent sequential,
        Kafka 2.8's ``{"version":1,"broker":<id>,"event":1}``): the controller asks this broker which of its
        replicas are offline.  Returns the path created.  Not retried here: a retried create may make
        a second notification, which is harmless (the controller asks again); the caller retries."""
        return self.kz.create(paths.LOG_DIR_EVENT_NOTIFICATION + "/" + paths.LOG_DIR_EVENT_PREFIX,
                              codecs.encode_log_dir_event(broker_id), sequence=True)

    @until_connected
    def read_log_dir_events(self, watch: Callable[[WatchEvent], None] | None = None) -> list[tuple[str, int | None]]:
        """The controller's side: every notification as (sequence number, broker id or None when its data
        does not decode), in sequence order; arms the children watch."""
        try:
            names = self.kz.get_children(paths.LOG_DIR_EVENT_NOTIFICATION, watch=watcher(watch))
        except NoNodeError:
            return []
        seqs = sorted(paths.log_dir_event_sequence(n) for n in names if n.startswith(paths.LOG_DIR_EVENT_PREFIX))
        out: list[tuple[str, int | None]] = []
        for seq, res in zip(seqs, self.read_many([(GET_DATA, paths.log_dir_event(s)) for s in seqs])):
            if isinstance(res, Exception):
                continue   # deleted meanwhile
            try:
                out.append((seq, codecs.decode_log_dir_event(res[0])))
            except codecs.CodecError:
                out.append((seq, None))
        return out

    def delete_log_dir_events(self, epoch_zk_version: int, sequences: Sequence[str]) -> None:
        """Delete processed notifications, each in a multi fenced by the controller epoch; one already gone
        is no error (Kafka's deleteLogDirEventNotifications).  A failed fence raises ControllerMovedError."""
        for ops in rules.log_dir_event_delete_ops(epoch_zk_version, sequences):
            results = multi_write(self.kz, (ops[0][1], ops[0][2]), [(DELETE, op[1], None, op[2]) for op in ops[1:]])
            error = rules.multi_failure([translate(r) if isinstance(r, Exception) else r for r in results],
                                        [op[1] for op in ops[1:]], epoch_zk_version)
            if error is not None and not isinstance(error, NoNode):
                raise error

    def create_topic(self, epoch_zk_version: int, assignment: TopicAssignment) -> None:
        """Create /config/topics/<t> (set when left over), /brokers/topics/<t> and its partitions/<p>
        parents, fenced."""
        config_exists = self.kz.exists(paths.config_topic(assignment.topic)) is not None

        def build(tx: Any) -> None:
            for op in rules.topic_create_ops(assignment, config_exists):
                if op[0] == "set":
                    tx.set_data(op[1], op[2], op[3])
                else:
                    tx.create(op[1], op[2])

        self.fenced_multi(epoch_zk_version, build)


@translated
def expire_session(connect: str, session_id: int, password: bytes, timeout_s: float = 10.0) -> None:
    """End someone else's session on purpose, as Curator's KillSession does: attach to it
    with its credentials and close it.  Its owner then sees SESSION_EXPIRED, and its
    ephemeral znodes are gone.  (A chaos fault; nothing in a broker calls this.)"""
    kz = KazooClient(hosts=connect, client_id=(session_id, password), timeout=timeout_s,
                     connection_retry={"max_tries": 3, "delay": 0.05})
    try:
        kz.start(timeout=timeout_s)
        kz.stop()
    finally:
        kz.close()


def quiet_client_logs() -> None:
    """Only errors from the ZooKeeper client library's own logger (a chaos run expects faults)."""
    logging.getLogger("kazoo").setLevel(logging.ERROR)
