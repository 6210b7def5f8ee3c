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
REASSIGN_PARTITIONS = "/admin/reassign_partitions"   # the ZooKeeper-era tools' reassignments (2.8 still watches it)
CONFIG = "/config"
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
CONFIG_CHANGES = "/config/changes"
CONFIG_CLIENTS = "/config/clients"           # quota entities (kafkasim has no quotas: created empty, never read)
CONFIG_USERS = "/config/users"
CONFIG_IPS = "/config/ips"
CONFIG_CHANGE_PREFIX = "config_change_"     # sequential children of /config/changes
DEFAULT_ENTITY = "<default>"                 # Kafka's ConfigEntityName.Default: the cluster-wide broker configs
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"   # Kafka's LogDirEventNotificationZNode
LOG_DIR_EVENT_PREFIX = "log_dir_event_"                      # its children: log_dir_event_<10-digit seq>

#: Persistent paths created once per cluster (Kafka's KafkaZkClient.createTopLevelPaths).
PERSISTENT_PATHS = (BROKERS, BROKER_IDS, TOPICS, ISR_CHANGE_NOTIFICATION, ADMIN, DELETE_TOPICS, CONFIG, CONFIG_TOPICS,
                    CONFIG_BROKERS, CONFIG_CHANGES, LOG_DIR_EVENT_NOTIFICATION)

OFFSETS_TOPIC = "__consumer_offsets"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"  # Kafka's ProducerIdManager (ZooKeeper mode)
CONSUMERS = "/consumers"                          # the old (ZooKeeper) consumers' path
BROKER_SEQID = "/brokers/seqid"                   # broker id generation
CLUSTER_ID = "/cluster/id"
FEATURE = "/feature"                              # KIP-584's feature versioning (IBP >= 2.7)

#: The rest of Kafka 2.8's top-level paths (``ZkData.PersistentZkPaths``: every ``ConfigType``'s
#: ``/config/<type>`` among them), created empty at start-up as Kafka does, though kafkasim reads none of them:
#: tools that look for them find them.
KAFKA_PERSISTENT_PATHS = (CONSUMERS, BROKER_SEQID, PRODUCER_ID_BLOCK, CONFIG_CLIENTS, CONFIG_USERS, CONFIG_IPS)


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


def config_topic(name: str) -> str:
    """A topic's config overrides (Kafka's ConfigEntityZNode for ``topics``)."""
    return f"{CONFIG_TOPICS}/{name}"


def config_broker(entity: str) -> str:
    """A broker's dynamic configs (``entity``: its id, or ``<default>`` for every broker)."""
    return f"{CONFIG_BROKERS}/{entity}"


def config_entity(entity_path: str) -> str:
    """``topics/<t>`` or ``brokers/<id>``, as a change notification names it, as a znode path."""
    return f"{CONFIG}/{entity_path}"


def log_dir_event(sequence: str) -> str:
    """``/log_dir_event_notification/log_dir_event_<sequence>``."""
    return f"{LOG_DIR_EVENT_NOTIFICATION}/{LOG_DIR_EVENT_PREFIX}{sequence}"


def log_dir_event_sequence(name: str) -> str:
    """The sequence number of a notification child (``log_dir_event_0000000003`` -> ``0000000003``), as
    Kafka's LogDirEventNotificationSequenceZNode.sequenceNumber takes it."""
    return name[name.rfind(LOG_DIR_EVENT_PREFIX) + len(LOG_DIR_EVENT_PREFIX):]
