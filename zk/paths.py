"""Path builders for every znode kafkasim reads or writes (Kafka 2.8's layout)."""
from __future__ import annotations

CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ADMIN = "/admin"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
DELETE_TOPICS = "/admin/delete_topics"

#: Persistent paths created once per cluster (Kafka's KafkaZkClient.createTopLevelPaths).
PERSISTENT_PATHS = (BROKERS, BROKER_IDS, TOPICS, ISR_CHANGE_NOTIFICATION, ADMIN, DELETE_TOPICS)

OFFSETS_TOPIC = "__consumer_offsets"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"  # Kafka's ProducerIdManager (ZooKeeper mode)
CONSUMERS = "/consumers"                          # the old (ZooKeeper) consumers' path
BROKER_SEQID = "/brokers/seqid"                   # broker id generation
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
CLUSTER_ID = "/cluster/id"
FEATURE = "/feature"                              # KIP-584's feature versioning (IBP >= 2.7)

#: The rest of Kafka 2.8's top-level paths (``ZkData.PersistentZkPaths``), created empty at start-up as Kafka
#: does, though kafkasim reads none of them: tools that look for them find them.
KAFKA_PERSISTENT_PATHS = (CONSUMERS, BROKER_SEQID, PRODUCER_ID_BLOCK, LOG_DIR_EVENT_NOTIFICATION)


def broker(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic(name: str) -> str:
    return f"{TOPICS}/{name}"


def partitions(name: str) -> str:
    return f"{TOPICS}/{name}/partitions"


def partition(name: str, p: int) -> str:
    return f"{TOPICS}/{name}/partitions/{p}"


def partition_state(name: str, p: int) -> str:
    return f"{TOPICS}/{name}/partitions/{p}/state"


def delete_topic(name: str) -> str:
    return f"{DELETE_TOPICS}/{name}"
