"""Requests and responses of the group coordinator, as plain dataclasses.

They carry what Kafka 2.8's GroupCoordinator receives and returns (the
KafkaApis layer's job — versions, authorisation, throttling — is the shell's).
Error fields are Kafka error codes (:mod:`kafkacommon.errors`). Field names follow
Kafka's request/response schemas, simplified:

* ``member_id`` "" is Kafka's UNKNOWN_MEMBER_ID (a member without an id yet).
* ``group_instance_id`` None = a dynamic member; a string = a static member (KIP-345).
* ``protocols`` / ``assignments`` are (name, bytes) pairs in the client's order.
* A JoinGroup from a v0 client has no rebalance timeout: the shell passes the
  session timeout (as KafkaApis does). ``require_known_member_id`` is Kafka's
  ``version >= 4``; the coordinator ignores it for static members.
* OffsetCommit ``retention_time_ms`` -1 = the broker's retention; otherwise the
  offset gets ``expire_timestamp = now + retention`` and is written as a v1 value.

Each request's ``error_response(code)`` is its answer when the whole request
fails with ``code`` (Kafka's ``AbstractRequest.getErrorResponse``): what the
core answers while its partition is loading or not its own, and what a door
answers when no coordinator here takes the request.

FindCoordinator is answered by the broker from its metadata cache, not by a
core; its messages are here so that both doors speak the same types.
"""
from __future__ import annotations

from dataclasses import dataclass, field


# ---------------------------------------------------------------- JoinGroup

@dataclass
class JoinGroupRequest:
    group_id: str
    member_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    require_known_member_id: bool = True

    def error_response(self, code: int) -> "JoinGroupResponse":
        return JoinGroupResponse(code, member_id=self.member_id)


@dataclass
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass
class JoinGroupResponse:
    error_code: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[JoinMember] = field(default_factory=list)   # only the leader gets them


# ---------------------------------------------------------------- SyncGroup

@dataclass
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None     # v5+: checked against the group's when set
    protocol_name: str | None = None
    assignments: list[tuple[str, bytes]] = field(default_factory=list)   # (member id, assignment); leader only

    def error_response(self, code: int) -> "SyncGroupResponse":
        return SyncGroupResponse(code)


@dataclass
class SyncGroupResponse:
    error_code: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


# ---------------------------------------------------------------- Heartbeat

@dataclass
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None

    def error_response(self, code: int) -> "HeartbeatResponse":
        return HeartbeatResponse(code)


@dataclass
class HeartbeatResponse:
    error_code: int


# ---------------------------------------------------------------- LeaveGroup

@dataclass
class LeaveGroupRequest:
    group_id: str
    members: list[tuple[str, str | None]]   # (member id, group instance id); v0-v2 send one (id, None)

    def error_response(self, code: int) -> "LeaveGroupResponse":
        return LeaveGroupResponse(code, [])


@dataclass
class LeaveGroupResponse:
    error_code: int                                                  # top-level error
    members: list[tuple[str, str | None, int]] = field(default_factory=list)   # (member id, instance id, error)


# ---------------------------------------------------------------- OffsetCommit

@dataclass
class CommitOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""             # None is stored as ""


@dataclass
class OffsetCommitRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    retention_time_ms: int = -1
    offsets: list[CommitOffset] = field(default_factory=list)

    def error_response(self, code: int) -> "OffsetCommitResponse":
        return OffsetCommitResponse([(o.topic, o.partition, code) for o in self.offsets])


@dataclass
class OffsetCommitResponse:
    partitions: list[tuple[str, int, int]]   # (topic, partition, error code), in request order


@dataclass
class TxnOffsetCommitRequest:
    """TxnOffsetCommit: a transactional producer's offsets for a group, held pending until its transaction's
    marker commits or discards them."""
    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    offsets: list[CommitOffset] = field(default_factory=list)

    def error_response(self, code: int) -> "OffsetCommitResponse":
        return OffsetCommitResponse([(o.topic, o.partition, code) for o in self.offsets])


# ---------------------------------------------------------------- OffsetFetch

@dataclass
class OffsetFetchRequest:
    group_id: str
    partitions: list[tuple[str, int]] | None = None   # None = every committed partition of the group
    require_stable: bool = False

    def error_response(self, code: int) -> "OffsetFetchResponse":
        return OffsetFetchResponse(code, [])


@dataclass
class FetchedOffset:
    topic: str
    partition: int
    offset: int            # -1 = no committed offset
    leader_epoch: int      # -1 = none
    metadata: str
    error_code: int


@dataclass
class OffsetFetchResponse:
    error_code: int
    partitions: list[FetchedOffset] = field(default_factory=list)


# ---------------------------------------------------------------- DescribeGroups

@dataclass
class DescribeGroupsRequest:
    group_ids: list[str]

    def error_response(self, code: int) -> "DescribeGroupsResponse":
        return DescribeGroupsResponse([DescribedGroup(code, g, "", "", "", []) for g in self.group_ids])


@dataclass
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes        # only in Stable (Kafka's MemberSummary), else b""
    assignment: bytes


@dataclass
class DescribedGroup:
    error_code: int
    group_id: str
    state: str             # "Empty" | "PreparingRebalance" | "CompletingRebalance" | "Stable" | "Dead" | "" on error
    protocol_type: str
    protocol: str          # the protocol name, only in Stable
    members: list[DescribedMember] = field(default_factory=list)
    generation_id: int = -1  # not in Kafka's DescribeGroups; kafkasim shows it (consumer-groups --state)


@dataclass
class DescribeGroupsResponse:
    groups: list[DescribedGroup]


# ---------------------------------------------------------------- ListGroups

@dataclass
class ListGroupsRequest:
    states_filter: list[str] = field(default_factory=list)   # empty = every state

    def error_response(self, code: int) -> "ListGroupsResponse":
        return ListGroupsResponse(code, [])


@dataclass
class ListGroupsResponse:
    error_code: int
    groups: list[tuple[str, str, str]] = field(default_factory=list)   # (group id, protocol type, state)


# ---------------------------------------------------------------- DeleteGroups

@dataclass
class DeleteGroupsRequest:
    group_ids: list[str]

    def error_response(self, code: int) -> "DeleteGroupsResponse":
        return DeleteGroupsResponse([(g, code) for g in self.group_ids])


@dataclass
class DeleteGroupsResponse:
    results: list[tuple[str, int]]   # (group id, error code), in request order


# ---------------------------------------------------------------- OffsetDelete

@dataclass
class OffsetDeleteRequest:
    group_id: str
    partitions: list[tuple[str, int]]    # (topic, partition), the metadata cache knowing each

    def error_response(self, code: int) -> "OffsetDeleteResponse":
        return OffsetDeleteResponse(code, [])


@dataclass
class OffsetDeleteResponse:
    error_code: int                                   # a group-level error: no partitions then
    partitions: list[tuple[str, int, int]] = field(default_factory=list)   # (topic, partition, error code)


# ---------------------------------------------------------------- FindCoordinator (the broker's, not a core's)

@dataclass
class FindCoordinatorRequest:
    key: str                 # the group id (kafkasim has no transaction coordinator)

    def error_response(self, code: int) -> "FindCoordinatorResponse":
        return FindCoordinatorResponse(code)


@dataclass
class FindCoordinatorResponse:
    error_code: int
    node_id: int = -1
    host: str = ""           # the broker's gRPC address (the Kafka listener answers with its own)
    port: int = 0
    partition: int = -1      # the group's __consumer_offsets partition; -1 while there is no offsets topic
