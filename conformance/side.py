"""One cluster as the suite drives it: its brokers' Kafka listeners, where a request goes, and the setup steps.

Both sides get the same steps through the same Kafka-protocol calls (CreateTopics to the controller, Produce to
the leader, JoinGroup and SyncGroup to the coordinator, ...).  A step's results that differ by nature between the
sides (a member id is a random UUID) are kept as the side's variables; a request's field written ``"$name"``
takes the side's value of ``name``.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable

from kafkacommon.record_batch import encode_batch
from util.waiting import wait_for

from conformance.wire import Conn

# the records' timestamps (fixed, so both sides' answers carry the same ones): in 2096, so no retention.ms
# ever deletes them while a run lasts (with a past one, each side's first retention pass, 30 s after its
# brokers start, deleted every segment at its own moment: a race between the sides)
BASE_TIMESTAMP = 4_000_000_000_000


class SetupError(RuntimeError):
    pass


class Side:
    def __init__(self, name: str, listeners: dict[int, tuple[str, int]]) -> None:
        self.name = name
        self.listeners = dict(sorted(listeners.items()))
        self.vars: dict[str, Any] = {}
        self.done: set[Any] = set()          # setup steps already applied (shared by cases)
        self._conns: dict[int, Conn] = {}
        self.held: list[Conn] = []           # connections kept open by a step (a join left pending)
        self._corr = itertools.count(1000)

    # ------------------------------------------------------------------ connections

    def conn(self, broker_id: int) -> Conn:
        c = self._conns.get(broker_id)
        if c is None or c.closed:
            c = self._conns[broker_id] = Conn(*self.listeners[broker_id])
        return c

    def fresh(self, broker_id: int) -> Conn:
        return Conn(*self.listeners[broker_id])

    def call(self, broker_id: int, api_key: int, version: int, fields: dict[str, Any]) -> dict[str, Any]:
        """A setup call (its own correlation ids, not the cases')."""
        return self.conn(broker_id).request(api_key, version, fields, next(self._corr))

    def close(self) -> None:
        for c in list(self._conns.values()) + self.held:
            c.close()
        self._conns.clear()
        self.held.clear()

    # ------------------------------------------------------------------ routing

    @property
    def first(self) -> int:
        return next(iter(self.listeners))

    def metadata(self, topics: list[str] | None, broker_id: int | None = None) -> dict[str, Any]:
        return self.call(self.first if broker_id is None else broker_id, 3, 1,
                         {"topics": None if topics is None else [{"name": t} for t in topics]})

    def controller(self) -> int:
        return self.metadata([])["controller_id"]

    def leader(self, topic: str, partition: int) -> int:
        md = self.metadata([topic])
        for t in md["topics"]:
            for p in t["partitions"]:
                if p["partition_index"] == partition and p["leader_id"] >= 0:
                    return p["leader_id"]
        raise SetupError(f"{self.name}: no leader for {topic}-{partition}: {md['topics']}")

    def coordinator(self, group: str) -> int:
        def found() -> int | None:
            r = self.call(self.first, 10, 1, {"key": group, "key_type": 0})
            return r["node_id"] if r["error_code"] == 0 else None
        return wait_for(found, 30, f"{self.name}: a coordinator for group {group}", 0.1)

    def txn_coordinator(self, transactional_id: str) -> int:
        """FindCoordinator v1 with key type 1, asked until it answers (the first asking creates
        ``__transaction_state``)."""
        def found() -> int | None:
            r = self.call(self.first, 10, 1, {"key": transactional_id, "key_type": 1})
            return r["node_id"] if r["error_code"] == 0 else None
        return wait_for(found, 60, f"{self.name}: a transaction coordinator for {transactional_id}", 0.1)

    def other(self, broker_id: int) -> int:
        return next(b for b in self.listeners if b != broker_id)

    def target(self, spec: str) -> int:
        """``any`` (the lowest id), ``broker:N``, ``controller``, ``leader:TOPIC:P``, ``coordinator:GROUP``,
        ``txn:TRANSACTIONAL_ID`` (its transaction coordinator), and ``other:...`` of the last four (a broker that
        is not it)."""
        if spec.startswith("other:"):
            return self.other(self.target(spec[len("other:"):]))
        kind, _, rest = spec.partition(":")
        if kind == "any":
            return self.first
        if kind == "broker":
            return int(rest)
        if kind == "controller":
            return self.controller()
        if kind == "leader":
            topic, _, p = rest.rpartition(":")
            return self.leader(topic, int(p))
        if kind == "coordinator":
            return self.coordinator(rest)
        if kind == "txn":
            return self.txn_coordinator(rest)
        raise ValueError(f"unknown target {spec!r}")

    def resolve(self, value: Any) -> Any:
        if isinstance(value, str) and value.startswith("$"):
            if value[1:] not in self.vars:
                raise SetupError(f"{self.name}: no value for {value} (a setup step sets it)")
            return self.vars[value[1:]]
        if isinstance(value, dict):
            return {k: self.resolve(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        return value

    # ------------------------------------------------------------------ setup steps

    def apply(self, step: "Step") -> None:
        if step.key in self.done:
            return
        step.run(self)
        self.done.add(step.key)

    def wait_topic(self, topic: str, partitions: int) -> None:
        def ready() -> bool:
            for b in self.listeners:
                md = self.metadata([topic], b)
                t = md["topics"][0]
                if t["error_code"] or len(t["partitions"]) != partitions or \
                        any(p["leader_id"] < 0 or p["error_code"] for p in t["partitions"]):
                    return False
            return True
        wait_for(ready, 30, f"{self.name}: every broker to know {topic}'s {partitions} leaders", 0.05)

        def leading() -> bool:   # the leaders act as leaders (ListOffsets v1 answered without error)
            for p in range(partitions):
                r = self.call(self.leader(topic, p), 2, 1, {"replica_id": -1, "topics": [{"name": topic, "partitions": [
                    {"partition_index": p, "timestamp": -1}]}]})
                if r["topics"][0]["partitions"][0]["error_code"]:
                    return False
            return True
        wait_for(leading, 30, f"{self.name}: {topic}'s leaders to answer as leaders", 0.05)


class Step:
    """A setup step; ``key`` names it, so steps shared by several cases run once per side."""

    key: Any = None

    def run(self, side: Side) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class Topic(Step):
    """CreateTopics v4 to the controller with a fixed assignment (partition p's replicas start at broker
    p mod n, so leaders are the same on both sides), then every broker's Metadata names every leader."""

    def __init__(self, name: str, partitions: int = 1, rf: int = 1, configs: dict[str, str] | None = None) -> None:
        self.name, self.partitions, self.rf, self.configs = name, partitions, rf, configs or {}
        self.key = ("topic", name)

    def run(self, side: Side) -> None:
        ids = list(side.listeners)
        assignments = [{"partition_index": p, "broker_ids": [ids[(p + i) % len(ids)] for i in range(self.rf)]}
                       for p in range(self.partitions)]
        r = side.call(side.controller(), 19, 4, {"topics": [{
            "name": self.name, "num_partitions": -1, "replication_factor": -1, "assignments": assignments,
            "configs": [{"name": k, "value": v} for k, v in self.configs.items()]}],
            "timeout_ms": 30000, "validate_only": False})
        if r["topics"][0]["error_code"]:
            raise SetupError(f"{side.name}: CreateTopics {self.name}: {r['topics'][0]}")
        side.wait_topic(self.name, self.partitions)


def batch(count: int, start: int = 0, key: bytes | None = b"k") -> bytes:
    return encode_batch(0, -1, [(key, b"value-%d" % (start + i), BASE_TIMESTAMP + start + i) for i in range(count)])


class Produce(Step):
    """``count`` records in one batch (fixed keys, values and timestamps) to ``topic``-``partition``'s leader,
    Produce v7, acks=-1."""

    def __init__(self, topic: str, partition: int = 0, count: int = 5, tag: str = "") -> None:
        self.topic, self.partition, self.count = topic, partition, count
        self.key = ("produce", topic, partition, count, tag)

    def run(self, side: Side) -> None:
        r = side.call(side.leader(self.topic, self.partition), 0, 7, {
            "transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [{
                "name": self.topic, "partition_data": [{"index": self.partition, "records": batch(self.count)}]}]})
        err = r["responses"][0]["partition_responses"][0]["error_code"]
        if err:
            raise SetupError(f"{side.name}: Produce to {self.topic}-{self.partition}: error {err}")


def protocols(topic: str) -> list[dict[str, Any]]:
    # ConsumerProtocolSubscription v0: version, topics, user data
    meta = b"\x00\x00" + b"\x00\x00\x00\x01" + len(topic).to_bytes(2, "big") + topic.encode() + b"\xff\xff\xff\xff"
    return [{"name": "range", "metadata": meta}]


def assignment(topic: str, partitions: list[int]) -> bytes:
    # ConsumerProtocolAssignment v0: version, [topic, [partition]], user data
    body = b"\x00\x00" + b"\x00\x00\x00\x01" + len(topic).to_bytes(2, "big") + topic.encode()
    body += len(partitions).to_bytes(4, "big") + b"".join(p.to_bytes(4, "big") for p in partitions)
    return body + b"\xff\xff\xff\xff"


SESSION_MS = 300_000      # no member expires while the suite runs


def join_fields(group: str, topic: str, member_id: str = "", session_ms: int = SESSION_MS,
                rebalance_ms: int = SESSION_MS, protocol_type: str = "consumer") -> dict[str, Any]:
    return {"group_id": group, "session_timeout_ms": session_ms, "rebalance_timeout_ms": rebalance_ms,
            "member_id": member_id, "group_instance_id": None, "protocol_type": protocol_type,
            "protocols": protocols(topic)}


class Group(Step):
    """One member joins ``group`` (JoinGroup v5: MEMBER_ID_REQUIRED, then again with the id) and, unless
    ``sync`` is false, syncs with ``topic``'s partition 0 assigned (SyncGroup v3): the group is Stable.
    ``protocol_type`` other than ``consumer`` makes a group that is not a consumer group (Kafka Connect's).
    Variables: ``GROUP.member``, ``GROUP.generation``."""

    def __init__(self, group: str, topic: str, sync: bool = True, protocol_type: str = "consumer") -> None:
        self.group, self.topic, self.sync, self.protocol_type = group, topic, sync, protocol_type
        self.key = ("group", group)

    def run(self, side: Side) -> None:
        coord = side.coordinator(self.group)
        first = join_fields(self.group, self.topic, protocol_type=self.protocol_type)
        r = side.call(coord, 11, 5, first)
        if r["error_code"] != 79:   # MEMBER_ID_REQUIRED
            raise SetupError(f"{side.name}: first JoinGroup of {self.group}: {r}")
        r = side.call(coord, 11, 5, {**first, "member_id": r["member_id"]})
        if r["error_code"]:
            raise SetupError(f"{side.name}: JoinGroup of {self.group}: {r}")
        member, gen = r["member_id"], r["generation_id"]
        side.vars[f"{self.group}.member"] = member
        side.vars[f"{self.group}.generation"] = gen
        if self.sync:
            s = side.call(coord, 14, 3, {"group_id": self.group, "generation_id": gen, "member_id": member,
                                         "group_instance_id": None, "assignments": [
                                             {"member_id": member, "assignment": assignment(self.topic, [0])}]})
            if s["error_code"]:
                raise SetupError(f"{side.name}: SyncGroup of {self.group}: {s}")


class Commit(Step):
    """OffsetCommit v7 of ``offset`` for ``topic``-``partition``: as the group's member (after :class:`Group`),
    or as a standalone consumer (generation -1, no member) of an empty group."""

    def __init__(self, group: str, topic: str, partition: int = 0, offset: int = 3, member: bool = False) -> None:
        self.group, self.topic, self.partition, self.offset, self.member = group, topic, partition, offset, member
        self.key = ("commit", group, topic, partition, offset)

    def run(self, side: Side) -> None:
        gen = side.vars[f"{self.group}.generation"] if self.member else -1
        mid = side.vars[f"{self.group}.member"] if self.member else ""
        r = side.call(side.coordinator(self.group), 8, 7, {
            "group_id": self.group, "generation_id_or_member_epoch": gen, "member_id": mid, "group_instance_id": None,
            "topics": [{"name": self.topic, "partitions": [{"partition_index": self.partition,
                                                            "committed_offset": self.offset,
                                                            "committed_leader_epoch": -1,
                                                            "committed_metadata": "m"}]}]})
        err = r["topics"][0]["partitions"][0]["error_code"]
        if err:
            raise SetupError(f"{side.name}: OffsetCommit to {self.group}: error {err}")


class PendingJoin(Step):
    """A second member's JoinGroup v3 to a Stable group, sent and left waiting on a connection held open: the
    group is PreparingRebalance until the first member rejoins (it never does) or its rebalance timeout."""

    def __init__(self, group: str, topic: str) -> None:
        self.group, self.topic = group, topic
        self.key = ("pending", group)

    def run(self, side: Side) -> None:
        from conformance.wire import encode_request
        c = side.fresh(side.coordinator(self.group))
        c.send(encode_request(11, 3, {k: v for k, v in join_fields(self.group, self.topic).items()
                                      if k != "group_instance_id"}, 1))
        side.held.append(c)

        def rebalancing() -> bool:
            d = side.call(side.coordinator(self.group), 15, 0, {"groups": [self.group]})
            return d["groups"][0]["group_state"] == "PreparingRebalance"
        wait_for(rebalancing, 30, f"{side.name}: {self.group} to be PreparingRebalance", 0.05)


class Call(Step):
    """Any request as a setup step (to ``target``), its answer checked by ``ok`` (default: no error_code)."""

    def __init__(self, key: str, target: str, api_key: int, version: int, fields: dict[str, Any],
                 ok: Callable[[dict[str, Any]], bool] | None = None) -> None:
        self.key = ("call", key)
        self.target, self.api_key, self.version, self.fields, self.ok = target, api_key, version, fields, ok

    def run(self, side: Side) -> None:
        r = side.call(side.target(self.target), self.api_key, self.version, side.resolve(self.fields))
        if self.ok is not None and not self.ok(r):
            raise SetupError(f"{side.name}: setup {self.key}: {r}")
