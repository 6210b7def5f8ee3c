"""The differences this suite found in kafkasim and that were fixed to match Kafka 2.8.2: (what, the cases that
show it, the commit).  ``kafkasim conformance`` prints them in its "fixed" section."""
from __future__ import annotations

FIXES: list[tuple[str, str, str]] = [
    ("FindCoordinator v1+ answers error_message 'NONE' (Errors.NONE.message()), not null",
     "FindCoordinator.*.group", "listener/meta.py, commit 'listener: FindCoordinator's error message'"),
    ("ApiVersions v3's finalized_features_epoch is 0, not -1", "ApiVersions.v3.advertised", "listener/meta.py"),
    ("ApiVersions above the maximum lists only ApiVersions' own range", "ApiVersions.v4.unsupported_version",
     "listener/meta.py"),
    ("OffsetCommit to a topic the metadata cache lacks: UNKNOWN_TOPIC_OR_PARTITION, nothing committed",
     "OffsetCommit.*.unknown_topic, OffsetFetch.*.all_topics", "listener/groups.py"),
    ("Fetch answered OFFSET_OUT_OF_RANGE has high watermark, last stable and log start offsets -1",
     "Fetch.*.offset_out_of_range", "listener/data.py"),
    ("Produce over max.message.bytes (MESSAGE_TOO_LARGE) has no error message", "Produce.v8-9.record_too_large",
     "listener/data.py"),
    ("DescribeConfigs' error_message is '' (never null)", "DescribeConfigs.*", "listener/configs.py"),
    ("CreateTopics NOT_CONTROLLER's error_message is ''", "CreateTopics.*.not_controller", "listener/admin.py"),
    ("An invalid list config names the refused item ('Invalid value bogus ...'), not the list",
     "CreateTopics.*.invalid_config", "kafkacommon/topic_config.py"),
]
