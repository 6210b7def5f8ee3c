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
]
