"""Kafka-protocol requests to one broker, as a client library sends them: the same bytes to Kafka 2.8.2 and
to kafkasim, the decoded answers as plain dicts.

Requests and responses are kafka-python's schema-generated classes (the same ones kafkasim's listener is
built on), so no field layout is written here.  Each call opens a connection, sends one request and reads
its answer: slow next to a client library, and exactly one request on the wire.

    probe = Probe("127.0.0.1", 9092)
    probe.metadata()                       # MetadataResponse v9 as a dict
    probe.produce("t", 0, [b"a", b"b"], acks=-1)
"""
from __future__ import annotations

import socket
import struct
import time
from typing import Any, Iterable

from kafka.record.default_records import DefaultRecordBatchBuilder

from listener.protocol import REQUESTS, RESPONSES, build

#: the version of each API a probe speaks: what both Kafka 2.8.2 and kafkasim's listener take
VERSIONS = {"Produce": (0, 8), "ListOffsets": (2, 6), "Metadata": (3, 9), "OffsetFetch": (9, 7),
            "FindCoordinator": (10, 3), "DescribeGroups": (15, 5), "CreateTopics": (19, 5), "DeleteTopics": (20, 4),
            "CreatePartitions": (37, 1), "ElectLeaders": (43, 2), "IncrementalAlterConfigs": (44, 0),
            "AlterPartitionReassignments": (45, 0)}
#: IncrementalAlterConfigs' resource types
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
CLIENT_ID = "kafkasim-compare"


class ProbeError(OSError):
    """The broker could not be reached, or closed the connection without an answer."""


class Probe:
    def __init__(self, host: str, port: int, timeout_s: float = 10.0) -> None:
        self.host, self.port, self.timeout_s = host, port, timeout_s
        self._cid = 0

    def call(self, api: str, fields: dict[str, Any], timeout_s: float | None = None) -> dict[str, Any]:
        """Send ``api``'s request (at :data:`VERSIONS`) built from ``fields``; its response as a dict."""
        return self.call_message(api, fields, timeout_s).to_dict()

    def call_message(self, api: str, fields: dict[str, Any], timeout_s: float | None = None) -> Any:
        """The same, the response as kafka-python's generated message (bytes fields stay bytes)."""
        key, version = VERSIONS[api]
        req = build(REQUESTS[key], fields, version)
        self._cid += 1
        req.with_header(correlation_id=self._cid, client_id=CLIENT_ID)
        data = bytes(req.encode(header=True, framed=True))
        try:
            with socket.create_connection((self.host, self.port), timeout=timeout_s or self.timeout_s) as s:
                s.sendall(data)
                size = struct.unpack(">i", _read(s, 4))[0]
                body = _read(s, size)
        except OSError as e:
            raise ProbeError(f"{api} to {self.host}:{self.port}: {e}") from e
        return RESPONSES[key].decode(body, version=version, header=True)

    # ------------------------------------------------------------------ the requests

    def metadata(self, topics: list[str] | None = None, auto_create: bool = False) -> dict[str, Any]:
        return self.call("Metadata", {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": auto_create, "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False})

    def find_coordinator(self, group: str) -> dict[str, Any]:
        return self.call("FindCoordinator", {"key": group, "key_type": 0})

    def describe_groups(self, groups: list[str]) -> dict[str, Any]:
        """DescribeGroups, each member's assignment decoded (ConsumerProtocol) and its metadata left out."""
        r = self.call_message("DescribeGroups", {"groups": groups, "include_authorized_operations": False})
        out = r.to_dict()
        for g_obj, g in zip(r.groups, out["groups"]):
            for m_obj, m in zip(g_obj.members, g["members"]):
                m["member_assignment"] = decode_assignment(bytes(m_obj.member_assignment or b""))
                m.pop("member_metadata", None)
        return out

    def offset_fetch(self, group: str, partitions: dict[str, list[int]] | None = None) -> dict[str, Any]:
        topics = None if partitions is None else [{"name": t, "partition_indexes": ps}
                                                  for t, ps in sorted(partitions.items())]
        return self.call("OffsetFetch", {"group_id": group, "topics": topics, "require_stable": False})

    def list_offsets(self, topic: str, partitions: Iterable[int], timestamp: int) -> dict[str, Any]:
        """-2 earliest, -1 latest (the high watermark, read uncommitted)."""
        return self.call("ListOffsets", {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp}
                                           for p in partitions]}]})

    def produce(self, topic: str, partition: int, values: list[bytes], acks: int = -1,
                timeout_ms: int = 10_000) -> dict[str, Any] | None:
        """One batch of ``values`` (keys ``k0``, ``k1``...); None for acks=0 (no answer)."""
        b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                      producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
        now = int(time.time() * 1000)
        for i, v in enumerate(values):
            b.append(i, timestamp=now, key=b"k%d" % i, value=v, headers=[])
        fields = {"transactional_id": None, "acks": acks, "timeout_ms": timeout_ms, "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": bytes(b.build())}]}]}
        if acks == 0:
            key, version = VERSIONS["Produce"]
            req = build(REQUESTS[key], fields, version)
            req.with_header(correlation_id=1, client_id=CLIENT_ID)
            with socket.create_connection((self.host, self.port), timeout=self.timeout_s) as s:
                s.sendall(bytes(req.encode(header=True, framed=True)))
            return None
        return self.call("Produce", fields, timeout_s=timeout_ms / 1000 + 5)

    def create_topics(self, topic: str, partitions: int, rf: int, configs: dict[str, str] | None = None,
                      assignment: dict[int, list[int]] | None = None, timeout_ms: int = 30_000) -> dict[str, Any]:
        return self.call("CreateTopics", {"topics": [{
            "name": topic, "num_partitions": -1 if assignment else partitions,
            "replication_factor": -1 if assignment else rf,
            "assignments": [{"partition_index": p, "broker_ids": list(r)} for p, r in sorted((assignment or {}).items())],
            "configs": [{"name": k, "value": str(v)} for k, v in sorted((configs or {}).items())]}],
            "timeout_ms": timeout_ms, "validate_only": False}, timeout_s=timeout_ms / 1000 + 5)

    def delete_topics(self, topic: str, timeout_ms: int = 30_000) -> dict[str, Any]:
        return self.call("DeleteTopics", {"topic_names": [topic], "timeout_ms": timeout_ms},
                         timeout_s=timeout_ms / 1000 + 5)

    def create_partitions(self, topic: str, count: int, timeout_ms: int = 30_000) -> dict[str, Any]:
        """CreatePartitions: ``topic`` grows to ``count`` partitions, placed by the broker."""
        return self.call("CreatePartitions", {"topics": [{"name": topic, "count": count, "assignments": None}],
                                              "timeout_ms": timeout_ms, "validate_only": False},
                         timeout_s=timeout_ms / 1000 + 5)

    def alter_configs(self, resource_type: int, name: str, configs: dict[str, str]) -> dict[str, Any]:
        """IncrementalAlterConfigs: SET each of ``configs`` on one resource (a topic, a broker's id, or "" for
        the brokers' cluster-wide default)."""
        return self.call("IncrementalAlterConfigs", {"resources": [{
            "resource_type": resource_type, "resource_name": name,
            "configs": [{"name": k, "config_operation": 0, "value": v} for k, v in sorted(configs.items())]}],
            "validate_only": False})

    def alter_reassignments(self, targets: dict[tuple[str, int], list[int]], timeout_ms: int = 30_000) -> dict[str, Any]:
        """AlterPartitionReassignments: each partition to its target replicas."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (t, p), r in sorted(targets.items()):
            by_topic.setdefault(t, []).append({"partition_index": p, "replicas": list(r)})
        return self.call("AlterPartitionReassignments", {
            "timeout_ms": timeout_ms, "topics": [{"name": t, "partitions": ps} for t, ps in sorted(by_topic.items())]},
            timeout_s=timeout_ms / 1000 + 5)

    def elect_preferred(self, partitions: list[tuple[str, int]] | None, timeout_ms: int = 30_000) -> dict[str, Any]:
        """ElectLeaders (preferred) for ``partitions``, or every partition (None), as kafka-leader-election.sh."""
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions or ():
            by_topic.setdefault(t, []).append(p)
        return self.call("ElectLeaders", {
            "election_type": 0, "timeout_ms": timeout_ms,
            "topic_partitions": None if partitions is None else [{"topic": t, "partitions": ps}
                                                                  for t, ps in sorted(by_topic.items())]},
            timeout_s=timeout_ms / 1000 + 5)

    def api_versions(self) -> dict[int, tuple[int, int]]:
        """The APIs the broker advertises: key -> (min, max)."""
        key = 18
        req = build(REQUESTS[key], {"client_software_name": "kafkasim-compare", "client_software_version": "1"}, 3)
        req.with_header(correlation_id=1, client_id=CLIENT_ID)
        with socket.create_connection((self.host, self.port), timeout=self.timeout_s) as s:
            s.sendall(bytes(req.encode(header=True, framed=True)))
            body = _read(s, struct.unpack(">i", _read(s, 4))[0])
        r = RESPONSES[key].decode(body, version=3, header=True).to_dict()
        return {a["api_key"]: (a["min_version"], a["max_version"]) for a in r["api_keys"]}


def _read(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ProbeError(f"connection closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)


def decode_assignment(data: bytes | None) -> dict[str, list[int]]:
    """A consumer member's assignment (ConsumerProtocol: version, [topic, [partition]], user data)."""
    if not data:
        return {}
    pos = 2
    (n,) = struct.unpack_from(">i", data, pos)
    pos += 4
    out: dict[str, list[int]] = {}
    for _ in range(max(0, n)):
        (ln,) = struct.unpack_from(">h", data, pos)
        topic = data[pos + 2:pos + 2 + ln].decode()
        pos += 2 + ln
        (k,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out[topic] = sorted(struct.unpack_from(f">{k}i", data, pos)) if k > 0 else []
        pos += 4 * max(0, k)
    return out
