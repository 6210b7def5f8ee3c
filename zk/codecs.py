"""JSON codecs for the znodes of Kafka 2.8's ZooKeeper layout.

Each codec is a pair of pure functions, ``encode_*`` returning bytes and
``decode_*`` taking bytes.  Decoders raise :class:`CodecError` naming the
znode kind on malformed data instead of a bare KeyError/ValueError, so a
corrupt znode is reported clearly.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Mapping

from kafkacommon.metadata import BrokerRegistration, LeaderAndIsr, TopicAssignment


class CodecError(ValueError):
    """A znode's content does not match the expected format."""


def _dump(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _load(kind: str, data: bytes | None) -> dict[str, Any]:
    if data is None:
        raise CodecError(f"{kind}: empty znode")
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise CodecError(f"{kind}: not JSON: {e}") from None
    if not isinstance(obj, dict):
        raise CodecError(f"{kind}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _digits(s: str) -> bool:
    return s.isascii() and s.isdigit()


def _field(kind: str, obj: Mapping[str, Any], name: str, typ: type | tuple[type, ...]) -> Any:
    if name not in obj:
        raise CodecError(f"{kind}: missing field {name!r}")
    value = obj[name]
    if not isinstance(value, typ) or (isinstance(value, bool) and bool not in (typ if isinstance(typ, tuple) else (typ,))):
        raise CodecError(f"{kind}: field {name!r} has type {type(value).__name__}")
    return value


# ------------------------------------------------------------------ /controller

@dataclass(frozen=True)
class ControllerZNode:
    broker_id: int
    timestamp_ms: int


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    return _dump({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})


def decode_controller(data: bytes | None) -> ControllerZNode:
    obj = _load("/controller", data)
    ts = obj.get("timestamp", "0")
    return ControllerZNode(_field("/controller", obj, "brokerid", int), int(ts) if _digits(str(ts)) else 0)


# ------------------------------------------------------------------ /controller_epoch

def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes | None) -> int:
    try:
        return int((data or b"").decode())
    except ValueError:
        raise CodecError(f"/controller_epoch: not an integer: {data!r}") from None


# ------------------------------------------------------------------ /brokers/ids/<id>

#: the extra field holding kafkasim's gRPC address (Kafka reads only the fields it knows, so it ignores it)
GRPC_KEY = "kafkasim_grpc"


def encode_broker(reg: BrokerRegistration) -> bytes:
    """JSON v5, as Kafka 2.8 (IBP >= 2.7) writes it (``BrokerIdZNode.encode``): ``endpoints`` are the Kafka
    listeners, ``host``/``port`` the first PLAINTEXT one (null and -1 without one), ``rack`` only when set;
    plus kafkasim's gRPC address under ``kafkasim_grpc``, where its controller and peers reach the broker."""
    protocols = dict(reg.protocols)
    plain = next(((h, p) for name, h, p in reg.listeners if protocols.get(name, name) == "PLAINTEXT"), (None, -1))
    obj: dict[str, Any] = {
        "version": 5,
        "host": plain[0],
        "port": plain[1],
        "jmx_port": -1,
        "timestamp": str(reg.timestamp_ms),
        "endpoints": [f"{name}://{h}:{p}" for name, h, p in reg.listeners],
        "listener_security_protocol_map": {name: protocols.get(name, name) for name, _, _ in reg.listeners},
        "features": {},
        GRPC_KEY: f"{reg.host}:{reg.port}",
    }
    if reg.rack is not None:
        obj["rack"] = reg.rack
    return _dump(obj)


def _endpoint(kind: str, text: Any) -> tuple[str, str, int]:
    """``NAME://host:port`` -> (name, host, port)."""
    name, sep, rest = str(text).partition("://")
    host, _, port = rest.rpartition(":")
    if not sep or not name or not port.isdigit():
        raise CodecError(f"{kind}: bad endpoint {text!r}")
    return name, host.strip("[]"), int(port)


def decode_broker(broker_id: int, data: bytes | None, czxid: int = -1) -> BrokerRegistration:
    """A registration as kafkasim writes it (the gRPC address in ``kafkasim_grpc``) or as Kafka does
    (no gRPC address: ``host``/``port`` stand in)."""
    kind = f"/brokers/ids/{broker_id}"
    obj = _load(kind, data)
    ts = obj.get("timestamp", "0")
    grpc = obj.get(GRPC_KEY)
    if grpc is not None:
        if not isinstance(grpc, str):
            raise CodecError(f"{kind}: field {GRPC_KEY!r} has type {type(grpc).__name__}")
        host, _, p = grpc.rpartition(":")
        if not p.isascii() or not p.isdigit():
            raise CodecError(f"{kind}: field {GRPC_KEY!r} is not host:port: {grpc!r}")
        port = int(p)
    elif obj.get("host", "") is None:   # Kafka's registration with no PLAINTEXT listener: null, -1
        host, port = "", _field(kind, obj, "port", int)
    else:
        host, port = _field(kind, obj, "host", str), _field(kind, obj, "port", int)
    raw = obj.get("endpoints") or []
    protocols = obj.get("listener_security_protocol_map") or {}
    if not isinstance(raw, list) or not isinstance(protocols, dict):
        raise CodecError(f"{kind}: bad endpoints or listener_security_protocol_map")
    listeners = tuple(_endpoint(kind, e) for e in raw)
    return BrokerRegistration(
        broker_id=broker_id,
        host=host,
        port=port,
        timestamp_ms=int(ts) if _digits(str(ts)) else 0,
        rack=obj.get("rack"),
        epoch=czxid,
        listeners=listeners,
        protocols=tuple((str(k), str(v)) for k, v in protocols.items()),
    )


# ------------------------------------------------------------------ /brokers/topics/<t>

def encode_topic(a: TopicAssignment) -> bytes:
    return _dump({
        "version": 3,
        "topic_id": a.topic_id,
        "partitions": {str(p): list(r) for p, r in sorted(a.partitions.items())},
        "adding_replicas": {str(p): list(r) for p, r in sorted(a.adding.items()) if r},
        "removing_replicas": {str(p): list(r) for p, r in sorted(a.removing.items()) if r},
    })


def decode_topic(topic: str, data: bytes | None) -> TopicAssignment:
    kind = f"/brokers/topics/{topic}"
    obj = _load(kind, data)
    raw = _field(kind, obj, "partitions", dict)
    # checked in bulk (C-level passes; a 1,000-partition topic is decoded on every controller failover),
    # and entry by entry only to name a bad one
    if (set(map(type, raw.values())) - {list} or not all(map(str.isascii, raw)) or not all(map(str.isdigit, raw))
            or set(map(type, chain.from_iterable(raw.values()))) - {int}):
        for p, replicas in raw.items():
            if type(replicas) is not list or not p.isascii() or not p.isdigit() \
                    or any(type(r) is not int for r in replicas):
                raise CodecError(f"{kind}: bad partition entry {p!r}: {replicas!r}")
    parts: dict[int, tuple[int, ...]] = {}
    shared: dict[tuple[int, ...], tuple[int, ...]] = {}  # replica lists repeat: one tuple each
    for p, replicas in raw.items():
        t = tuple(replicas)
        parts[int(p)] = shared.setdefault(t, t)
    return TopicAssignment(topic, parts, str(obj.get("topic_id", "")),
                           adding=_replica_lists(kind, obj, "adding_replicas"),
                           removing=_replica_lists(kind, obj, "removing_replicas"))


def _replica_lists(kind: str, obj: Mapping[str, Any], name: str) -> dict[int, tuple[int, ...]]:
    """A topic znode's ``adding_replicas`` or ``removing_replicas`` (absent or null: none), empty lists left out."""
    raw = obj.get(name) or {}
    if not isinstance(raw, dict):
        raise CodecError(f"{kind}: field {name!r} has type {type(raw).__name__}")
    out: dict[int, tuple[int, ...]] = {}
    for p, replicas in raw.items():
        if not (isinstance(p, str) and _digits(p)) or type(replicas) is not list \
                or any(type(r) is not int for r in replicas):
            raise CodecError(f"{kind}: bad {name} entry {p!r}: {replicas!r}")
        if replicas:
            out[int(p)] = tuple(replicas)
    return out


def topic_reassigning(topic: str, data: bytes | None) -> bool:
    """Whether /brokers/topics/<t> names adding or removing replicas (Kafka 2.8's isBeingReassigned)."""
    obj = _load(f"/brokers/topics/{topic}", data)
    return any(bool(obj.get(k)) for k in ("adding_replicas", "removing_replicas"))


# ------------------------------------------------------------------ /admin/reassign_partitions

def encode_reassignment(partitions: Mapping[tuple[str, int], tuple[int, ...]]) -> bytes:
    """Kafka's ReassignPartitionsZNode (version 1): each partition's target replicas."""
    return _dump({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": list(r)}
                                               for (t, p), r in sorted(partitions.items())]})


def decode_reassignment(data: bytes | None) -> dict[tuple[str, int], tuple[int, ...]]:
    """/admin/reassign_partitions: {(topic, partition): target replicas}."""
    kind = "/admin/reassign_partitions"
    obj = _load(kind, data)
    out: dict[tuple[str, int], tuple[int, ...]] = {}
    for entry in _field(kind, obj, "partitions", list):
        if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str) \
                or type(entry.get("partition")) is not int or type(entry.get("replicas")) is not list \
                or any(type(r) is not int for r in entry["replicas"]):
            raise CodecError(f"{kind}: bad entry {entry!r}")
        out[(entry["topic"], entry["partition"])] = tuple(entry["replicas"])
    return out


# ------------------------------------------------------------------ partition state

_ISR_JSON: dict[tuple[int, ...], bytes] = {}


def encode_partition_state(s: LeaderAndIsr) -> bytes:
    # The same bytes as json.dumps of {"version","leader","leader_epoch","controller_epoch","isr"}
    # with compact separators, ~10x faster: a controller writes one per partition.  ISRs repeat
    # (a cluster has few distinct ones), so their JSON is kept; %d, like the int() it replaces,
    # takes numbers only.
    isr = _ISR_JSON.get(s.isr)
    if isr is None:
        isr = ",".join(str(int(b)) for b in s.isr).encode()
        if len(_ISR_JSON) < 10_000:
            _ISR_JSON[s.isr] = isr
    return (b'{"version":1,"leader":%d,"leader_epoch":%d,"controller_epoch":%d,"isr":[%b]}'
            % (s.leader, s.leader_epoch, s.controller_epoch, isr))


def decode_partition_states(items: list[tuple[str, bytes | None]]) -> list[LeaderAndIsr]:
    """Decode many partition states at once: each distinct content once (one JSON parse for them all; a
    cluster's states repeat, few leaders, ISRs and epochs for thousands of partitions); falls back to one at a
    time so that a malformed znode is reported by path."""
    decoded = decode_state_contents([data for _, data in items])
    return [decoded.get(data) or decode_partition_state(path, data) for path, data in items]


def decode_state_contents(contents: list[bytes | None]) -> dict[bytes | None, LeaderAndIsr | None]:
    """Each distinct content of ``contents`` decoded as a partition state, in one JSON parse: {content: state},
    None for a content that is not a state, {} when any is not JSON (the caller decodes those one at a time, by
    :func:`decode_partition_state`, which names the znode)."""
    distinct = list(dict.fromkeys(contents))
    try:
        objs = json.loads(b"[" + b",".join(d or b"null" for d in distinct) + b"]")
        if len(objs) != len(distinct):  # a znode held more than one JSON value
            raise ValueError("misaligned")
        return {d: LeaderAndIsr(o["leader"], o["leader_epoch"], tuple(o["isr"]), o["controller_epoch"])
                if _is_state(o) else None for o, d in zip(objs, distinct)}
    except (ValueError, TypeError, KeyError):
        return {}


def _is_state(o: Any) -> bool:
    return (type(o) is dict and type(o.get("leader")) is int and type(o.get("leader_epoch")) is int
            and type(o.get("controller_epoch")) is int and type(o.get("isr")) is list
            and all(type(b) is int for b in o["isr"]))


def decode_partition_state(path: str, data: bytes | None) -> LeaderAndIsr:
    obj = _load(path, data)
    isr = _field(path, obj, "isr", list)
    if not all(type(b) is int for b in isr):
        raise CodecError(f"{path}: isr holds a non-integer")
    return LeaderAndIsr(_field(path, obj, "leader", int), _field(path, obj, "leader_epoch", int),
                        tuple(isr), _field(path, obj, "controller_epoch", int))


def encode_producer_id_block(broker_id: int, start: int, end: int) -> bytes:
    """/latest_producer_id_block as Kafka writes it (ProducerIdBlockZNode, version 1)."""
    return _dump({"version": 1, "broker": broker_id, "block_start": str(start), "block_end": str(end)})


def decode_producer_id_block(data: bytes) -> int:
    """The last producer id already claimed (the block's end)."""
    obj = _load("/latest_producer_id_block", data)
    end = obj.get("block_end")
    if not isinstance(end, (str, int)) or not str(end).lstrip("-").isdigit():
        raise CodecError(f"/latest_producer_id_block: bad block_end {end!r}")
    return int(end)


# ------------------------------------------------------------------ /cluster/id and /feature

def encode_cluster_id(cluster_id: str) -> bytes:
    """/cluster/id as Kafka writes it (ClusterIdZNode: the version is a string)."""
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | None) -> str:
    return _field("/cluster/id", _load("/cluster/id", data), "id", str)


def encode_feature_znode() -> bytes:
    """/feature as a Kafka 2.8 controller (IBP >= 2.7) creates it: versioning enabled, no finalized features."""
    return _dump({"features": {}, "version": 1, "status": 1})


# ------------------------------------------------------------------ /config/<type>/<name> and /config/changes

def encode_entity_config(config: Mapping[str, Any]) -> bytes:
    """A topic's or broker's config overrides as Kafka's ConfigEntityZNode: every value a string."""
    return _dump({"version": 1, "config": {k: _config_text(v) for k, v in config.items()}})


def _config_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    return str(v)


def decode_entity_config(path: str, data: bytes | None) -> dict[str, str]:
    """The overrides of ``/config/<type>/<name>`` (an empty znode: none)."""
    if not data:
        return {}
    obj = _load(path, data)
    cfg = obj.get("config", {})
    if not isinstance(cfg, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in cfg.items()):
        raise CodecError(f"{path}: field 'config' is not an object of strings")
    return dict(cfg)


def encode_config_change(entity_path: str) -> bytes:
    """A change notification under /config/changes (version 2: ``topics/<t>``, ``brokers/<id>``)."""
    return _dump({"version": 2, "entity_path": entity_path})


def decode_config_change(path: str, data: bytes | None) -> str:
    """The entity path a change notification names."""
    obj = _load(path, data)
    if obj.get("version") != 2:
        raise CodecError(f"{path}: unsupported change notification version {obj.get('version')!r}")
    return _field(path, obj, "entity_path", str)


# ------------------------------------------------------------------ /log_dir_event_notification/log_dir_event_<seq>

LOG_DIR_FAILURE_EVENT = 1   # Kafka's LogDirEventNotificationSequenceZNode.LogDirFailureEvent


def encode_log_dir_event(broker_id: int) -> bytes:
    """Kafka 2.8's ``{"version":1,"broker":<id>,"event":1}`` (keys in its order)."""
    return _dump({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes | None) -> int:
    """The broker id of a log directory event notification."""
    obj = _load("log dir event notification", data)
    return _field("log dir event notification", obj, "broker", int)
