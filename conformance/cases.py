"""A case: setup steps, one request (API, version, fields, which broker), and the rules of its comparison.

The tables (``table_data``, ``table_groups``, ``table_admin``) are lists of :class:`Case` rows, written with
:func:`each_version` where one row stands for every version of an API.  The rules every case shares are
:data:`IGNORED` (what differs by nature between two clusters) and :data:`UNORDERED` (arrays whose order Kafka
does not define, compared sorted by key).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from conformance.side import Step

API_NAMES = {0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit", 9: "OffsetFetch",
             10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup",
             15: "DescribeGroups", 16: "ListGroups", 18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics",
             21: "DeleteRecords", 22: "InitProducerId", 23: "OffsetForLeaderEpoch", 24: "AddPartitionsToTxn",
             25: "AddOffsetsToTxn", 26: "EndTxn", 27: "WriteTxnMarkers", 28: "TxnOffsetCommit", 32: "DescribeConfigs",
             33: "AlterConfigs", 35: "DescribeLogDirs", 37: "CreatePartitions", 42: "DeleteGroups",
             43: "ElectLeaders", 44: "IncrementalAlterConfigs", 45: "AlterPartitionReassignments",
             46: "ListPartitionReassignments", 47: "OffsetDelete"}

# What differs by nature between two clusters, ignored in every case (a bare name: wherever it stands).
IGNORED: dict[str, str] = {
    "throttle_time_ms": "a throttle time is each broker's own quota state",
    "node_id": "node ids: the coordinator's and the brokers' entries name brokers whose placement Kafka randomises",
    "controller_id": "node ids: which broker wins the controller election is a race",
    "host": "hosts: each side's own listeners",
    "port": "ports: each side's own listeners",
    "cluster_id": "the cluster id is a random UUID per cluster",
    "member_id": "member ids are the client id and a random UUID",
    "leader": "JoinGroup's leader is a member id (a random UUID)",
    "generated_member_id": "a member id (a random UUID)",
}

# Arrays whose order Kafka does not define: sorted by these keys on both sides before they are compared.
UNORDERED: dict[str, tuple[str, ...]] = {
    "brokers": ("node_id",),                               # Metadata: the metadata cache's map
    "topics": ("name",),                                   # Metadata: the metadata cache's map
    "topics[*].partitions": ("partition_index",),          # Metadata: the same
    "groups": ("group_id",),                               # ListGroups: every coordinator partition's groups
    "results[*].configs": ("name",),                       # DescribeConfigs: a map's entries
    "topics[*].configs": ("name",),                        # CreateTopics v5+: the same
    "results[*].configs[*].synonyms": ("source", "name"),  # the same
    "results[*].topics": ("name",),                        # DescribeLogDirs: the log manager's map
    "results[*].topics[*].partitions": ("partition_index",),
    "api_keys": ("api_key",),                              # ApiVersions
    "members": ("member_id",),                             # JoinGroup's members (by a random id: see ignore)
    "replica_election_results": ("topic",),                # ElectLeaders: the controller's map of results
    "replica_election_results[*].partition_result": ("partition_id",),
    "results_by_topic_v3_and_below": ("name",),            # AddPartitionsToTxn: a map of results
    "results_by_topic_v3_and_below[*].results_by_partition": ("partition_index",),
}


# Known differences, each with the docs/deviations.md entry that explains it (the section "The Kafka listener").
OLD_VERSIONS = ("deviations.md, The Kafka listener: versions older than the listener's are not advertised "
                "(record batches v2 only; offsets in __consumer_offsets only)")
FOLLOWER_FETCH = ("deviations.md, The Kafka listener: a consumer's Fetch (v11+) is served by the leader only, "
                  "not by a follower (KIP-392)")
LOG_DIR_SIZE = ("deviations.md, The Kafka listener: DescribeLogDirs' partition_size is the log's bytes; Kafka 2.8.2 "
                "answered 0 for a partition holding one 136-byte batch")
ELECTION_TYPE = ("deviations.md, The Kafka listener: an unknown election type is INVALID_REQUEST; Kafka 2.8.2 "
                 "answers UNKNOWN_SERVER_ERROR (an unhandled exception)")
CROSS_SEGMENT = ("deviations.md, The Kafka listener: a Fetch reads across segments; Kafka 2.8 returns one segment's "
                 "batches (here the segment rolled at the transaction marker)")
TOPIC_IDS = "deviations.md, The Kafka listener: Metadata v10+ topic ids are zero UUIDs (kafkasim has no topic ids)"


@dataclass
class Case:
    id: str
    api_key: int
    version: int
    fields: dict[str, Any]
    target: str = "any"
    setup: list[Step] = field(default_factory=list)
    ignore: dict[str, str] = field(default_factory=dict)      # more fields ignored, each with its reason
    known: dict[str, str] = field(default_factory=dict)       # known differences: path -> docs/deviations.md reason
    view: Callable[[dict[str, Any]], dict[str, Any]] | None = None   # a projection applied to both answers
    view_reason: str = ""
    frame_version: int | None = None     # the header's version when it is not ``version`` (unsupported versions)
    # answer fields holding a value a side generated (path pattern -> the side's variable): where the answer has
    # the side's value, it is compared as "$variable" (a producer id in aborted_transactions)
    quoted: dict[str, str] = field(default_factory=dict)

    @property
    def api(self) -> str:
        return API_NAMES.get(self.api_key, str(self.api_key))


STATIC_IS_DEFAULT = ("STATIC_BROKER_CONFIG (4) is compared as DEFAULT_CONFIG (5), and static synonyms are left out: "
                     "the reference writes every effective broker key into server.properties (docs/reference.md), "
                     "where kafkasim's cluster.yaml leaves it at its default")


def static_is_default(r: dict[str, Any]) -> dict[str, Any]:
    for group in (r.get("results") or []) + (r.get("topics") or []):
        for c in group.get("configs") or ():
            if c.get("config_source") == 4:
                c["config_source"] = 5
            if c.get("synonyms"):
                c["synonyms"] = [s for s in c["synonyms"] if s.get("source") != 4]
    return r


def each_version(name: str, api_key: int, versions: Iterable[int], fields: Any, **kw: Any) -> list[Case]:
    """One case per version; ``fields`` (and ``setup``, ``target``, ``known``, ``ignore``, ``quoted``) may be
    callables of the version."""
    out = []
    for v in versions:
        args = {k: (val(v) if callable(val) and k not in ("view",) else val) for k, val in kw.items()}
        out.append(Case(f"{API_NAMES[api_key]}.v{v}.{name}", api_key, v, fields(v) if callable(fields) else fields,
                        **args))
    return out

