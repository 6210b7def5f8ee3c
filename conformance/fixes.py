"""The differences this suite found in kafkasim and that were fixed to match Kafka 2.8.2: (what, the cases that
show it, the commit).  ``kafkasim conformance`` prints them in its "fixed" section."""
from __future__ import annotations

FIXES: list[tuple[str, str, str]] = [
    ("FindCoordinator v1+ answers error_message 'NONE' (Errors.NONE.message()), not null",
     "FindCoordinator.*.group", "b1d6e64"),
    ("ApiVersions v3's finalized_features_epoch is 0, not -1", "ApiVersions.v3.advertised", "b1d6e64"),
    ("ApiVersions above the maximum lists only ApiVersions' own range", "ApiVersions.v4.unsupported_version",
     "b1d6e64"),
    ("OffsetCommit to a topic the metadata cache lacks: UNKNOWN_TOPIC_OR_PARTITION, nothing committed",
     "OffsetCommit.*.unknown_topic, OffsetFetch.*.all_topics", "822ebc2"),
    ("Fetch answered OFFSET_OUT_OF_RANGE has high watermark, last stable and log start offsets -1",
     "Fetch.*.offset_out_of_range", "822ebc2"),
    ("Produce over max.message.bytes (MESSAGE_TOO_LARGE) has no error message", "Produce.v8-9.record_too_large",
     "822ebc2"),
    ("DescribeConfigs' error_message is '' (never null)", "DescribeConfigs.*", "822ebc2"),
    ("CreateTopics NOT_CONTROLLER's error_message is ''", "CreateTopics.*.not_controller", "3d79acd"),
    ("An invalid list config names the refused item ('Invalid value bogus ...'), not the list",
     "CreateTopics.*.invalid_config", "3d79acd"),
    ("ELECTION_NOT_NEEDED and NO_REASSIGNMENT_IN_PROGRESS carry their default messages (ApiError(error))",
     "ElectLeaders.*.preferred_not_needed, ElectLeaders.*.unclean_not_needed, AlterPartitionReassignments.v0.cancel_none",
     "8877215"),
    ("Reassignment replica lists print as ArrayBuffer(...), as Kafka's Scala Buffer does, not List(...)",
     "AlterPartitionReassignments.v0.duplicate_replicas, AlterPartitionReassignments.v0.unknown_broker", "8877215"),
    ("The reassignment APIs' top-level error_message is '' for NONE and the error's default message otherwise",
     "AlterPartitionReassignments.*, ListPartitionReassignments.*", "8877215"),
]
