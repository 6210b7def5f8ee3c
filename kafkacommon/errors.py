"""Kafka 2.8's error codes: every entry of ``org.apache.kafka.common.protocol.Errors``.

Each code is a module constant (``errors.NOT_COORDINATOR == 16``), so responses
carry plain ints.  :data:`ERRORS` maps every code to its :class:`KafkaError`:
the name, whether Kafka's exception for it is a ``RetriableException``, and
Kafka's default message (None for NONE).  The table is Kafka 2.8.2's, code -1
to 104, plus the codes from later Kafka versions listed under "Beyond 2.8"
(each one a deviation named in docs/architecture.md's deviations).

Pure: no I/O.
"""
from __future__ import annotations

from dataclasses import dataclass

UNKNOWN_SERVER_ERROR = -1
NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_FETCH_SIZE = 4
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
BROKER_NOT_AVAILABLE = 8
REPLICA_NOT_AVAILABLE = 9
MESSAGE_TOO_LARGE = 10
STALE_CONTROLLER_EPOCH = 11
OFFSET_METADATA_TOO_LARGE = 12
NETWORK_EXCEPTION = 13
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
INVALID_TOPIC_EXCEPTION = 17
RECORD_LIST_TOO_LARGE = 18
NOT_ENOUGH_REPLICAS = 19
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
INVALID_REQUIRED_ACKS = 21
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
INVALID_COMMIT_OFFSET_SIZE = 28
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
INVALID_TIMESTAMP = 32
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
NOT_CONTROLLER = 41
INVALID_REQUEST = 42
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
POLICY_VIOLATION = 44
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
TRANSACTION_COORDINATOR_FENCED = 52
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
SECURITY_DISABLED = 54
OPERATION_NOT_ATTEMPTED = 55
KAFKA_STORAGE_ERROR = 56
LOG_DIR_NOT_FOUND = 57
SASL_AUTHENTICATION_FAILED = 58
UNKNOWN_PRODUCER_ID = 59
REASSIGNMENT_IN_PROGRESS = 60
DELEGATION_TOKEN_AUTH_DISABLED = 61
DELEGATION_TOKEN_NOT_FOUND = 62
DELEGATION_TOKEN_OWNER_MISMATCH = 63
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
DELEGATION_TOKEN_EXPIRED = 66
INVALID_PRINCIPAL_TYPE = 67
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
LISTENER_NOT_FOUND = 72
TOPIC_DELETION_DISABLED = 73
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
UNSUPPORTED_COMPRESSION_TYPE = 76
STALE_BROKER_EPOCH = 77
OFFSET_NOT_AVAILABLE = 78
MEMBER_ID_REQUIRED = 79
PREFERRED_LEADER_NOT_AVAILABLE = 80
GROUP_MAX_SIZE_REACHED = 81
FENCED_INSTANCE_ID = 82
ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
ELECTION_NOT_NEEDED = 84
NO_REASSIGNMENT_IN_PROGRESS = 85
GROUP_SUBSCRIBED_TO_TOPIC = 86
INVALID_RECORD = 87
UNSTABLE_OFFSET_COMMIT = 88
THROTTLING_QUOTA_EXCEEDED = 89
PRODUCER_FENCED = 90
RESOURCE_NOT_FOUND = 91
DUPLICATE_RESOURCE = 92
UNACCEPTABLE_CREDENTIAL = 93
INCONSISTENT_VOTER_SET = 94
INVALID_UPDATE_VERSION = 95
FEATURE_UPDATE_FAILED = 96
PRINCIPAL_DESERIALIZATION_FAILURE = 97
SNAPSHOT_NOT_FOUND = 98
POSITION_OUT_OF_RANGE = 99
UNKNOWN_TOPIC_ID = 100
DUPLICATE_BROKER_REGISTRATION = 101
BROKER_ID_NOT_REGISTERED = 102
INCONSISTENT_TOPIC_ID = 103
INCONSISTENT_CLUSTER_ID = 104

# ---------------------------------------------------------------- beyond 2.8
INELIGIBLE_REPLICA = 107  # Kafka 3.3+ (KIP-841): an ISR expansion to a fenced or shutting-down broker

# every code above, by value (built before any other upper-case int is defined)
_NAMES = {v: k for k, v in list(globals().items()) if k.isupper() and isinstance(v, int)}

KAFKA_2_8_LAST_CODE = INCONSISTENT_CLUSTER_ID  # the last entry of Kafka 2.8.2's Errors.java


@dataclass(frozen=True)
class KafkaError:
    """One error code: its name, Kafka's retriable flag and default message."""

    code: int
    name: str
    retriable: bool
    message: str | None


# code: (retriable, default message), in Errors.java's order
_DETAILS: dict[int, tuple[bool, str | None]] = {
    UNKNOWN_SERVER_ERROR: (False, "The server experienced an unexpected error when processing the request."),
    NONE: (False, None),
    OFFSET_OUT_OF_RANGE: (False,
        "The requested offset is not within the range of offsets maintained by the server."),
    CORRUPT_MESSAGE: (True,
        "This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted "
        "topic, or is otherwise corrupt."),
    UNKNOWN_TOPIC_OR_PARTITION: (True, "This server does not host this topic-partition."),
    INVALID_FETCH_SIZE: (False, "The requested fetch size is invalid."),
    LEADER_NOT_AVAILABLE: (True,
        "There is no leader for this topic-partition as we are in the middle of a leadership election."),
    NOT_LEADER_OR_FOLLOWER: (True,
        "For requests intended only for the leader, this error indicates that the broker is not the current "
        "leader. For requests intended for any replica, this error indicates that the broker is not a replica "
        "of the topic partition."),
    REQUEST_TIMED_OUT: (True, "The request timed out."),
    BROKER_NOT_AVAILABLE: (False, "The broker is not available."),
    REPLICA_NOT_AVAILABLE: (True,
        "The replica is not available for the requested topic-partition. Produce/Fetch requests and other "
        "requests intended only for the leader or follower return NOT_LEADER_OR_FOLLOWER if the broker is not "
        "a replica of the topic-partition."),
    MESSAGE_TOO_LARGE: (False,
        "The request included a message larger than the max message size the server will accept."),
    STALE_CONTROLLER_EPOCH: (False, "The controller moved to another broker."),
    OFFSET_METADATA_TOO_LARGE: (False, "The metadata field of the offset request was too large."),
    NETWORK_EXCEPTION: (True, "The server disconnected before a response was received."),
    COORDINATOR_LOAD_IN_PROGRESS: (True, "The coordinator is loading and hence can't process requests."),
    COORDINATOR_NOT_AVAILABLE: (True, "The coordinator is not available."),
    NOT_COORDINATOR: (True, "This is not the correct coordinator."),
    INVALID_TOPIC_EXCEPTION: (False, "The request attempted to perform an operation on an invalid topic."),
    RECORD_LIST_TOO_LARGE: (False,
        "The request included message batch larger than the configured segment size on the server."),
    NOT_ENOUGH_REPLICAS: (True, "Messages are rejected since there are fewer in-sync replicas than required."),
    NOT_ENOUGH_REPLICAS_AFTER_APPEND: (True,
        "Messages are written to the log, but to fewer in-sync replicas than required."),
    INVALID_REQUIRED_ACKS: (False, "Produce request specified an invalid value for required acks."),
    ILLEGAL_GENERATION: (False, "Specified group generation id is not valid."),
    INCONSISTENT_GROUP_PROTOCOL: (False,
        "The group member's supported protocols are incompatible with those of existing members or first "
        "group member tried to join with empty protocol type or empty protocol list."),
    INVALID_GROUP_ID: (False, "The configured groupId is invalid."),
    UNKNOWN_MEMBER_ID: (False, "The coordinator is not aware of this member."),
    INVALID_SESSION_TIMEOUT: (False,
        "The session timeout is not within the range allowed by the broker (as configured by "
        "group.min.session.timeout.ms and group.max.session.timeout.ms)."),
    REBALANCE_IN_PROGRESS: (False, "The group is rebalancing, so a rejoin is needed."),
    INVALID_COMMIT_OFFSET_SIZE: (False, "The committing offset data size is not valid."),
    TOPIC_AUTHORIZATION_FAILED: (False, "Topic authorization failed."),
    GROUP_AUTHORIZATION_FAILED: (False, "Group authorization failed."),
    CLUSTER_AUTHORIZATION_FAILED: (False, "Cluster authorization failed."),
    INVALID_TIMESTAMP: (False, "The timestamp of the message is out of acceptable range."),
    UNSUPPORTED_SASL_MECHANISM: (False, "The broker does not support the requested SASL mechanism."),
    ILLEGAL_SASL_STATE: (False, "Request is not valid given the current SASL state."),
    UNSUPPORTED_VERSION: (False, "The version of API is not supported."),
    TOPIC_ALREADY_EXISTS: (False, "Topic with this name already exists."),
    INVALID_PARTITIONS: (False, "Number of partitions is below 1."),
    INVALID_REPLICATION_FACTOR: (False,
        "Replication factor is below 1 or larger than the number of available brokers."),
    INVALID_REPLICA_ASSIGNMENT: (False, "Replica assignment is invalid."),
    INVALID_CONFIG: (False, "Configuration is invalid."),
    NOT_CONTROLLER: (True, "This is not the correct controller for this cluster."),
    INVALID_REQUEST: (False,
        "This most likely occurs because of a request being malformed by the client library or the message "
        "was sent to an incompatible broker. See the broker logs for more details."),
    UNSUPPORTED_FOR_MESSAGE_FORMAT: (False,
        "The message format version on the broker does not support the request."),
    POLICY_VIOLATION: (False, "Request parameters do not satisfy the configured policy."),
    OUT_OF_ORDER_SEQUENCE_NUMBER: (False, "The broker received an out of order sequence number."),
    DUPLICATE_SEQUENCE_NUMBER: (False, "The broker received a duplicate sequence number."),
    INVALID_PRODUCER_EPOCH: (False, "Producer attempted to produce with an old epoch."),
    INVALID_TXN_STATE: (False, "The producer attempted a transactional operation in an invalid state."),
    INVALID_PRODUCER_ID_MAPPING: (False,
        "The producer attempted to use a producer id which is not currently assigned to its transactional id."),
    INVALID_TRANSACTION_TIMEOUT: (False,
        "The transaction timeout is larger than the maximum value allowed by the broker (as configured by "
        "transaction.max.timeout.ms)."),
    CONCURRENT_TRANSACTIONS: (False,
        "The producer attempted to update a transaction while another concurrent operation on the same "
        "transaction was ongoing."),
    TRANSACTION_COORDINATOR_FENCED: (False,
        "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current "
        "coordinator for a given producer."),
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED: (False, "Transactional Id authorization failed."),
    SECURITY_DISABLED: (False, "Security features are disabled."),
    OPERATION_NOT_ATTEMPTED: (False,
        "The broker did not attempt to execute this operation. This may happen for batched RPCs where some "
        "operations in the batch failed, causing the broker to respond without trying the rest."),
    KAFKA_STORAGE_ERROR: (True, "Disk error when trying to access log file on the disk."),
    LOG_DIR_NOT_FOUND: (False, "The user-specified log directory is not found in the broker config."),
    SASL_AUTHENTICATION_FAILED: (False, "SASL Authentication failed."),
    UNKNOWN_PRODUCER_ID: (False,
        "This exception is raised by the broker if it could not locate the producer metadata associated with "
        "the producerId in question. This could happen if, for instance, the producer's records were deleted "
        "because their retention time had elapsed. Once the last records of the producerId are removed, the "
        "producer's metadata is removed from the broker, and future appends by the producer will return this "
        "exception."),
    REASSIGNMENT_IN_PROGRESS: (False, "A partition reassignment is in progress."),
    DELEGATION_TOKEN_AUTH_DISABLED: (False, "Delegation Token feature is not enabled."),
    DELEGATION_TOKEN_NOT_FOUND: (False, "Delegation Token is not found on server."),
    DELEGATION_TOKEN_OWNER_MISMATCH: (False, "Specified Principal is not valid Owner/Renewer."),
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: (False,
        "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token "
        "authenticated channels."),
    DELEGATION_TOKEN_AUTHORIZATION_FAILED: (False, "Delegation Token authorization failed."),
    DELEGATION_TOKEN_EXPIRED: (False, "Delegation Token is expired."),
    INVALID_PRINCIPAL_TYPE: (False, "Supplied principalType is not supported."),
    NON_EMPTY_GROUP: (False, "The group is not empty."),
    GROUP_ID_NOT_FOUND: (False, "The group id does not exist."),
    FETCH_SESSION_ID_NOT_FOUND: (True, "The fetch session ID was not found."),
    INVALID_FETCH_SESSION_EPOCH: (True, "The fetch session epoch is invalid."),
    LISTENER_NOT_FOUND: (True,
        "There is no listener on the leader broker that matches the listener on which metadata request was "
        "processed."),
    TOPIC_DELETION_DISABLED: (False, "Topic deletion is disabled."),
    FENCED_LEADER_EPOCH: (True, "The leader epoch in the request is older than the epoch on the broker."),
    UNKNOWN_LEADER_EPOCH: (True, "The leader epoch in the request is newer than the epoch on the broker."),
    UNSUPPORTED_COMPRESSION_TYPE: (False,
        "The requesting client does not support the compression type of given partition."),
    STALE_BROKER_EPOCH: (False, "Broker epoch has changed."),
    OFFSET_NOT_AVAILABLE: (True,
        "The leader high watermark has not caught up from a recent leader election so the offsets cannot be "
        "guaranteed to be monotonically increasing."),
    MEMBER_ID_REQUIRED: (False,
        "The group member needs to have a valid member id before actually entering a consumer group."),
    PREFERRED_LEADER_NOT_AVAILABLE: (True, "The preferred leader was not available."),
    GROUP_MAX_SIZE_REACHED: (False, "The consumer group has reached its max size."),
    FENCED_INSTANCE_ID: (False,
        "The broker rejected this static consumer since another consumer with the same group.instance.id has "
        "registered with a different member.id."),
    ELIGIBLE_LEADERS_NOT_AVAILABLE: (True, "Eligible topic partition leaders are not available."),
    ELECTION_NOT_NEEDED: (True, "Leader election not needed for topic partition."),
    NO_REASSIGNMENT_IN_PROGRESS: (False, "No partition reassignment is in progress."),
    GROUP_SUBSCRIBED_TO_TOPIC: (False,
        "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it."),
    INVALID_RECORD: (False, "This record has failed the validation on broker and hence will be rejected."),
    UNSTABLE_OFFSET_COMMIT: (True, "There are unstable offsets that need to be cleared."),
    THROTTLING_QUOTA_EXCEEDED: (True, "The throttling quota has been exceeded."),
    PRODUCER_FENCED: (False,
        "There is a newer producer with the same transactionalId which fences the current one."),
    RESOURCE_NOT_FOUND: (False, "A request illegally referred to a resource that does not exist."),
    DUPLICATE_RESOURCE: (False, "A request illegally referred to the same resource twice."),
    UNACCEPTABLE_CREDENTIAL: (False, "Requested credential would not meet criteria for acceptability."),
    INCONSISTENT_VOTER_SET: (False,
        "Indicates that the either the sender or recipient of a voter-only request is not one of the expected "
        "voters"),
    INVALID_UPDATE_VERSION: (False, "The given update version was invalid."),
    FEATURE_UPDATE_FAILED: (False, "Unable to update finalized features due to an unexpected server error."),
    PRINCIPAL_DESERIALIZATION_FAILURE: (False,
        "Request principal deserialization failed during forwarding. This indicates an internal error on the "
        "broker cluster security setup."),
    SNAPSHOT_NOT_FOUND: (False, "Requested snapshot was not found"),
    POSITION_OUT_OF_RANGE: (False,
        "Requested position is not greater than or equal to zero, and less than the size of the snapshot."),
    UNKNOWN_TOPIC_ID: (True, "This server does not host this topic ID."),
    DUPLICATE_BROKER_REGISTRATION: (False, "This broker ID is already in use."),
    BROKER_ID_NOT_REGISTERED: (False, "The given broker ID was not registered."),
    INCONSISTENT_TOPIC_ID: (True, "The log's topic ID did not match the topic ID in the request"),
    INCONSISTENT_CLUSTER_ID: (False, "The clusterId in the request does not match that found on the server"),
    # beyond 2.8
    INELIGIBLE_REPLICA: (False, "The new ISR contains at least one ineligible replica."),
}

ERRORS: dict[int, KafkaError] = {code: KafkaError(code, _NAMES[code], retriable, message)
                                 for code, (retriable, message) in _DETAILS.items()}


def name(code: int) -> str:
    """The error's name, ``UNKNOWN(<code>)`` for a code Kafka does not define."""
    error = ERRORS.get(code)
    return error.name if error else f"UNKNOWN({code})"


def is_retriable(code: int) -> bool:
    """Whether Kafka's exception for ``code`` is retriable (False for an unknown code)."""
    error = ERRORS.get(code)
    return error.retriable if error else False


def message(code: int) -> str | None:
    """Kafka's default message for ``code`` (None for NONE and for an unknown code)."""
    error = ERRORS.get(code)
    return error.message if error else None
