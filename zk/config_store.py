"""The admin side of kafkasim's ZooKeeper door (a mixin of ``ZkClient``): what kafka-topics.sh, Kafka's
AdminZkClient and its DynamicConfigManager read and write.

Topics are created as Kafka 2.8 creates them: the config overrides at ``/config/topics/<t>`` first, then
``/brokers/topics/<t>``.  A config change writes the entity's whole config (``/config/topics/<t>``,
``/config/brokers/<id>`` or ``/config/brokers/<default>``) and then a sequential change notification
under ``/config/changes``, which every broker's listener applies.  CreatePartitions rewrites the topic's
assignment; the controller's watch on the topic znode elects the new partitions.
"""
from __future__ import annotations

from typing import Any, Callable

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from kafkacommon.metadata import TopicAssignment
from zk import codecs, paths, rules
from zk.batch import GET_DATA
from zk.errors import NoNode, translate_errors
from zk.retry import until_connected
from zk.stat import WatchEvent, watcher


@translate_errors
class ConfigStore:
    """Every public method raises zk/errors.py's exceptions, never kazoo's."""

    kz: Any
    read_many: Callable[..., list]
    fenced_multi: Callable[..., list]

    def create_topic_znode(self, assignment: TopicAssignment, config: dict[str, Any] | None = None) -> None:
        """Admin side (kafka-topics.sh, Kafka's AdminZkClient.createTopicWithAssignment): write the topic's
        config overrides to /config/topics/<t> (always, if only ``{}``), then /brokers/topics/<t>; the
        controller does the rest.  Raises NodeExists when the topic exists."""
        if self.kz.exists(paths.topic(assignment.topic)) is not None:
            raise NodeExistsError()
        self._set_or_create(paths.config_topic(assignment.topic),
                            codecs.encode_entity_config(assignment.config if config is None else config))
        self.kz.create(paths.topic(assignment.topic), codecs.encode_topic(assignment))

    def _set_or_create(self, path: str, data: bytes) -> None:
        """Kafka's setOrCreateEntityConfigs: set the znode, or create it (and its parents) when absent."""
        try:
            self.kz.set(path, data)
        except NoNodeError:
            try:
                self.kz.create(path, data, makepath=True)
            except NodeExistsError:
                self.kz.set(path, data)

    @until_connected
    def read_topic(self, topic: str) -> tuple[TopicAssignment, int, bool] | None:
        """/brokers/topics/<t>, its zkVersion, and whether a reassignment is under way in it (adding or
        removing replicas); None: no such topic."""
        try:
            data, stat = self.kz.get(paths.topic(topic))
        except NoNodeError:
            return None
        return codecs.decode_topic(topic, data), stat.version, codecs.topic_reassigning(topic, data)

    def set_topic_assignment(self, assignment: TopicAssignment, version: int) -> None:
        """Admin side (CreatePartitions): the topic's whole assignment, conditional on the zkVersion read
        with it (BadVersion when another change came first); the controller's partition-modification watch
        elects the new partitions' leaders."""
        self.kz.set(paths.topic(assignment.topic), codecs.encode_topic(assignment), version=version)

    def write_topic_assignment(self, epoch_zk_version: int, assignment: TopicAssignment) -> None:
        """Controller side (a reassignment's steps): /brokers/topics/<t> with the assignment's replicas, adding and
        removing replicas, at any version, fenced by the controller epoch (Kafka's setTopicAssignmentRaw)."""
        self.fenced_multi(epoch_zk_version, lambda tx: _add_ops(tx, [rules.topic_assignment_op(assignment)]))

    @until_connected
    def read_zk_reassignment(self, watch: Callable[[WatchEvent], None] | None = None
                             ) -> dict[tuple[str, int], tuple[int, ...]] | None:
        """/admin/reassign_partitions (the ZooKeeper-era tools' reassignments), arming an exists-watch: None when
        absent; {} when it does not decode (Kafka ignores it then: "invalid json")."""
        if self.kz.exists(paths.REASSIGN_PARTITIONS, watch=watcher(watch)) is None:
            return None
        try:
            data, _ = self.kz.get(paths.REASSIGN_PARTITIONS)
            return codecs.decode_reassignment(data)
        except NoNodeError:
            return None
        except codecs.CodecError:
            return {}

    def write_zk_reassignment(self, epoch_zk_version: int, partitions: dict[tuple[str, int], tuple[int, ...]]) -> None:
        """Controller side: /admin/reassign_partitions set to ``partitions``, or deleted when there are none,
        fenced (Kafka's setOrCreatePartitionReassignment and deletePartitionReassignment)."""
        ops = rules.zk_reassignment_ops(partitions, self.kz.exists(paths.REASSIGN_PARTITIONS) is not None)
        if ops:
            try:
                self.fenced_multi(epoch_zk_version, lambda tx: _add_ops(tx, ops))
            except NoNode:   # deleted meanwhile
                pass

    def request_reassignment(self, partitions: dict[tuple[str, int], tuple[int, ...]]) -> None:
        """Admin side, as the ZooKeeper-era kafka-reassign-partitions does: create /admin/reassign_partitions
        (NodeExists while one is under way)."""
        self.kz.create(paths.REASSIGN_PARTITIONS, codecs.encode_reassignment(partitions))

    @until_connected
    def read_entity_config(self, entity_path: str) -> dict[str, str]:
        """``/config/topics/<t>`` or ``/config/brokers/<id|<default>>``: the overrides ({} when absent)."""
        path = paths.config_entity(entity_path)
        try:
            data, _ = self.kz.get(path)
        except NoNodeError:
            return {}
        return codecs.decode_entity_config(path, data)

    def change_entity_config(self, entity_path: str, config: dict[str, Any]) -> str:
        """Kafka's AdminZkClient.changeEntityConfig: write the whole config of ``topics/<t>`` or
        ``brokers/<id|<default>>``, then a change notification every broker's listener picks up;
        -> the notification's name."""
        self._set_or_create(paths.config_entity(entity_path), codecs.encode_entity_config(config))
        created = self.kz.create(f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}",
                                 codecs.encode_config_change(entity_path), sequence=True, makepath=True)
        return created.rsplit("/", 1)[-1]

    @until_connected
    def read_config_changes(self, watch: Callable[[WatchEvent], None] | None = None) -> list[str]:
        """The change notifications under /config/changes (names), arming a children watch."""
        return sorted(self.kz.get_children(paths.CONFIG_CHANGES, watch=watcher(watch)))

    @until_connected
    def read_config_change(self, name: str) -> tuple[str, int] | None:
        """A notification's entity path and creation time (ms), or None when it is gone."""
        path = f"{paths.CONFIG_CHANGES}/{name}"
        try:
            data, stat = self.kz.get(path)
        except NoNodeError:
            return None
        return codecs.decode_config_change(path, data), stat.ctime

    def delete_config_change(self, name: str) -> None:
        """Purge an obsolete notification (any broker may; a gone one is fine)."""
        try:
            self.kz.delete(f"{paths.CONFIG_CHANGES}/{name}")
        except NoNodeError:
            pass

    def allocate_producer_id_block(self, broker_id: int, size: int = 1000) -> tuple[int, int]:
        """Kafka's ProducerIdManager in ZooKeeper mode: claim the next ``size`` producer ids with a
        conditional update of /latest_producer_id_block (JSON version 1, as Kafka writes it);
        returns (first id, last id).  A concurrent claim by another broker makes this one retry."""
        for _ in range(100):
            try:
                data, stat = self.kz.get(paths.PRODUCER_ID_BLOCK)
            except NoNodeError:
                try:
                    self.kz.create(paths.PRODUCER_ID_BLOCK, codecs.encode_producer_id_block(broker_id, 0, size - 1))
                    return 0, size - 1
                except NodeExistsError:
                    continue
            start = codecs.decode_producer_id_block(data) + 1 if data else 0
            try:
                self.kz.set(paths.PRODUCER_ID_BLOCK, codecs.encode_producer_id_block(broker_id, start, start + size - 1),
                            version=stat.version)
                return start, start + size - 1
            except BadVersionError:
                continue
        raise RuntimeError("could not claim a producer id block: too much contention")

    def request_topic_deletion(self, topic: str) -> None:
        """Admin side: /admin/delete_topics/<t>; the controller deletes the topic and the marker."""
        try:
            self.kz.create(paths.delete_topic(topic), b"")
        except NodeExistsError:
            pass

    @until_connected
    def read_deletion_requests(self, watch: Callable[[WatchEvent], None] | None = None) -> list[str]:
        return sorted(self.kz.get_children(paths.DELETE_TOPICS, watch=watcher(watch)))

    @until_connected
    def read_topic_config(self, topic: str) -> dict[str, str] | None:
        """The topic's config overrides from /config/topics/<t> (None: no such topic), read again across a
        lost connection (``until_connected``).  A session expiry, a read still failing at the retry deadline,
        or a znode that does not decode raises (ZkError / ValueError): the caller reports it."""
        topic_r, config_r = self.read_many([(GET_DATA, paths.topic(topic)), (GET_DATA, paths.config_topic(topic))])
        if isinstance(topic_r, NoNode):
            return None
        if isinstance(topic_r, Exception):
            raise topic_r
        if isinstance(config_r, NoNode):
            return {}
        if isinstance(config_r, Exception):
            raise config_r
        return codecs.decode_entity_config(paths.config_topic(topic), config_r[0])


def _add_ops(tx: Any, ops: list) -> None:
    """zk/rules.py's ops into a kazoo transaction."""
    for op in ops:
        if op[0] == "set":
            tx.set_data(op[1], op[2], op[3])
        elif op[0] == "create":
            tx.create(op[1], op[2], ephemeral=op[3])
        elif op[0] == "delete":
            tx.delete(op[1], op[2])
        else:
            tx.check(op[1], op[2])
