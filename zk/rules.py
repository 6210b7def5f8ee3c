"""kafkasim's rules over ZooKeeper's primitives, sans-IO: which ops the election and the fenced writes make,
and what their results mean.  ``ZkClient`` (zk/client.py, over kazoo) and the simulator's door
(sim/zkdoor.py, over sim/zk_model.py) both build their multis and read their results through these,
so the rules exist once.

An op is a plain tuple: ``("create", path, data, ephemeral)``, ``("set", path, data, version)``,
``("check", path, version)``, ``("delete", path, version)``; each primitive layer turns it into its own
transaction call.
"""
from __future__ import annotations

from typing import Any, Sequence

from kafkacommon.metadata import LeaderAndIsr
from zk import codecs, paths
from zk.exceptions import BadVersion, RolledBack, RuntimeInconsistency
from zk.exceptions import ControllerMovedError, StateVersionConflict  # noqa: F401 (re-exported: they live there)

Op = tuple




def election_ops(broker_id: int, timestamp_ms: int, epoch: int, epoch_version: int) -> list[Op]:
    """Kafka's registerControllerAndIncrementControllerEpoch: the ephemeral /controller and
    /controller_epoch at epoch + 1, conditional on the epoch's zkVersion, in one multi."""
    return [("create", paths.CONTROLLER, codecs.encode_controller(broker_id, timestamp_ms), True),
            ("set", paths.CONTROLLER_EPOCH, codecs.encode_controller_epoch(epoch + 1), epoch_version)]


def won_after_failure(broker_id: int, new_epoch: int, controller_data: bytes, epoch_data: bytes) -> bool:
    """After the election multi failed (NODEEXISTS or BADVERSION): we won only if both znodes say so
    (a retried commit that had landed)."""
    return (codecs.decode_controller(controller_data).broker_id == broker_id
            and codecs.decode_controller_epoch(epoch_data) == new_epoch)


def fence_op(epoch_zk_version: int) -> Op:
    """The first op of every controller multi: /controller_epoch still at our version."""
    return ("check", paths.CONTROLLER_EPOCH, epoch_zk_version)


def state_write_ops(writes: Sequence[Any]) -> list[Op]:
    """A partition-state write per ``StateWrite``-like item: a create (``zk_version`` None) or a conditional set."""
    out: list[Op] = []
    for w in writes:
        path = paths.partition_state(w.topic, w.partition)
        data = codecs.encode_partition_state(w.state)
        out.append(("create", path, data, False) if w.zk_version is None else ("set", path, data, w.zk_version))
    return out


def state_parents(creates: Sequence[Any]) -> list[str]:
    """The partitions/ and partitions/<p> znodes new states need (an admin-created topic has only
    /brokers/topics/<t>); the caller keeps those that do not exist."""
    wanted: list[str] = []
    for w in creates:
        for p in (paths.partitions(w.topic), paths.partition(w.topic, w.partition)):
            if p not in wanted:
                wanted.append(p)
    return wanted


def topic_create_ops(a: Any, config_exists: bool = False) -> list[Op]:
    """The controller's creation of a topic: its configs (``a.config``, at /config/topics/<t>, set at any
    version when a znode is left over), /brokers/topics/<t> and its partitions/<p> parents."""
    config = codecs.encode_entity_config(a.config)
    ops: list[Op] = [("set", paths.config_topic(a.topic), config, -1) if config_exists else
                     ("create", paths.config_topic(a.topic), config, False),
                     ("create", paths.topic(a.topic), codecs.encode_topic(a), False),
                     ("create", paths.partitions(a.topic), b"", False)]
    return ops + [("create", paths.partition(a.topic, p), b"", False) for p in sorted(a.partitions)]


def topic_assignment_op(a: Any) -> Op:
    """A reassignment's write of /brokers/topics/<t> (its replicas, adding and removing replicas), at any version:
    the controller epoch's check fences it (Kafka's setTopicAssignmentRaw)."""
    return ("set", paths.topic(a.topic), codecs.encode_topic(a), -1)


def zk_reassignment_ops(partitions: Any, exists: bool) -> list[Op]:
    """/admin/reassign_partitions set to ``partitions`` (created when absent), or deleted when there are none."""
    path = paths.REASSIGN_PARTITIONS
    if not partitions:
        return [("delete", path, -1)] if exists else []
    data = codecs.encode_reassignment(partitions)
    return [("set", path, data, -1) if exists else ("create", path, data, False)]


def log_dir_event_delete_ops(epoch_zk_version: int, sequences: Sequence[str]) -> list[list[Op]]:
    """Kafka's deleteLogDirEventNotifications: one fenced multi per notification (the fence, then the
    delete at any version); a notification already gone is no error (its result is not looked at)."""
    return [[fence_op(epoch_zk_version), ("delete", paths.log_dir_event(seq), -1)] for seq in sequences]


def multi_failure(results: Sequence[Any], op_paths: Sequence[str], epoch_zk_version: int) -> BaseException | None:
    """A fenced multi's outcome (its results, with zk/exceptions.py's errors): None when it applied, else
    the error to raise: ControllerMovedError when the fence failed, StateVersionConflict (with the
    path of the op after the fence) on BADVERSION, or the op's own error."""
    failed = [(i, r) for i, r in enumerate(results)
              if isinstance(r, BaseException) and not isinstance(r, (RolledBack, RuntimeInconsistency))]
    if not failed:
        return None
    index, err = failed[0]
    if index == 0:
        return ControllerMovedError(f"/controller_epoch is no longer at version {epoch_zk_version}")
    if isinstance(err, BadVersion):
        return StateVersionConflict(op_paths[index - 1] if 0 < index <= len(op_paths) else "?")
    return err


def decode_state(path: str, data: bytes, version: int) -> tuple[LeaderAndIsr, int]:
    return codecs.decode_partition_state(path, data), version


# ---------------------------------------------------------------------- config change notifications

#: Kafka's ZkNodeChangeNotificationListener: a notification older than this is purged by whoever sees it
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
CONFIG_ENTITY_TYPES = ("topics", "clients", "users", "brokers", "ips")


def change_sequence(name: str) -> int:
    """``config_change_0000000042`` -> 42 (-1 for a name that is no notification)."""
    tail = name[len(paths.CONFIG_CHANGE_PREFIX):] if name.startswith(paths.CONFIG_CHANGE_PREFIX) else ""
    return int(tail) if tail.isascii() and tail.isdigit() else -1


def changes_to_process(children: Sequence[str], last_sequence: int) -> list[str]:
    """The notifications after ``last_sequence``, oldest first (Kafka processes each once, in order)."""
    return sorted((c for c in children if change_sequence(c) > last_sequence), key=change_sequence)


def change_obsolete(ctime_ms: int, now_ms: int) -> bool:
    """Kafka's purgeObsoleteNotifications: older than 15 minutes."""
    return ctime_ms + CHANGE_EXPIRATION_MS < now_ms


def parse_entity_path(entity_path: str) -> tuple[str, str]:
    """``topics/<t>`` -> ("topics", t); ValueError for a path Kafka would refuse."""
    kind, sep, name = entity_path.partition("/")
    if not sep or not name or kind not in CONFIG_ENTITY_TYPES:
        raise ValueError(f"invalid entity path {entity_path!r}: expected <type>/<name> with a type of "
                         f"{', '.join(CONFIG_ENTITY_TYPES)}")
    return kind, name
