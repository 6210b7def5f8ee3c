"""Topic-level configs: Kafka 2.8's 26 keys (``LogConfig``), their parsing, validation and broker defaults.

Each key has Kafka's name, type, default and validator, the Kafka broker key that gives its default
(``server_key``, Kafka's ``LogConfig.TopicConfigSynonyms``), and the cluster.yaml key that does so
here when kafkasim has one (``broker_key``).  Values are parsed as Kafka's ``ConfigDef`` parses them
(strings, trimmed; ints, longs, doubles, booleans, comma-separated lists) and refused with Kafka's
messages.  A value kafkasim cannot enforce is refused with the reason (``refusal``), never accepted
and then ignored; docs/deviations.md lists each.  :func:`log_config` resolves one topic's overrides
over the broker's defaults into a :class:`LogConfig`, which every part of the broker reads.
Pure: no I/O.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

__all__ = ["TopicKey", "TOPIC_KEYS", "LogConfig", "log_config", "parse_value", "to_string", "validate",
           "ConfigValueError", "UnknownTopicConfig", "ConfigConflict", "ConfigRefused", "describe_topic_configs",
           "LONG_MAX", "INT_MAX", "MESSAGE_FORMAT_VERSIONS"]

INT_MAX = (1 << 31) - 1
LONG_MAX = (1 << 63) - 1
_INT = re.compile(r"[+-]?[0-9]+\Z")


class ConfigValueError(ValueError):
    """A value Kafka's ConfigDef refuses (a ConfigException): ``Invalid value V for configuration K: why``."""

    def __init__(self, key: str, value: Any, why: str) -> None:
        super().__init__(f"Invalid value {value} for configuration {key}: {why}")
        self.key, self.value, self.why = key, value, why


class UnknownTopicConfig(ValueError):
    """A key that is no topic config (Kafka: InvalidConfigurationException, INVALID_CONFIG)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"Unknown topic config name: {key}")
        self.key = key


class ConfigConflict(ValueError):
    """Values that are each valid but not together (Kafka's ``LogConfig.validateValues``; INVALID_CONFIG)."""


class ConfigRefused(ValueError):
    """A value Kafka accepts and kafkasim cannot enforce, refused with the reason (INVALID_CONFIG;
    docs/deviations.md lists each)."""

    def __init__(self, key: str, value: Any, why: str) -> None:
        super().__init__(f"kafkasim does not support {key}={value}: {why}")
        self.key = key


# ---------------------------------------------------------------------- Kafka's ConfigDef types

def _parse_int(key: str, raw: str, lo: int, hi: int, kind: str) -> int:
    s = raw.strip()
    if not _INT.match(s) or not lo <= int(s) <= hi:
        raise ConfigValueError(key, raw, f"Not a number of type {kind}")
    return int(s)


def _parse(kind: str, key: str, raw: Any) -> Any:
    """Kafka's ``ConfigDef.parseType`` of a string (a value already typed is checked and kept)."""
    if kind == "boolean":
        if isinstance(raw, bool):
            return raw
        s = str(raw).strip().lower()
        if s not in ("true", "false"):
            raise ConfigValueError(key, raw, "Expected value to be either true or false")
        return s == "true"
    if kind in ("int", "long"):
        if isinstance(raw, bool):
            raise ConfigValueError(key, raw, f"Not a number of type {kind.upper()}")
        if isinstance(raw, int):
            raw = str(raw)
        lo, hi = (-(1 << 31), INT_MAX) if kind == "int" else (-(1 << 63), LONG_MAX)
        return _parse_int(key, str(raw), lo, hi, kind.upper())
    if kind == "double":
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            return float(raw)
        s = str(raw).strip()
        try:
            if not re.match(r"[+-]?(NaN|Infinity|[0-9]*\.?[0-9]*([eE][+-]?[0-9]+)?)[dDfF]?\Z", s) or s in ("", "."):
                raise ValueError(s)
            return float(s.rstrip("dDfF").replace("Infinity", "inf"))
        except ValueError:
            raise ConfigValueError(key, raw, "Not a number of type DOUBLE") from None
    if kind == "list":
        if isinstance(raw, (list, tuple)):
            return tuple(str(x).strip() for x in raw)
        s = str(raw).strip()
        return () if not s else tuple(re.split(r"\s*,\s*", s))
    return str(raw).strip()


def to_string(key: str, value: Any) -> str:
    """Kafka's ``ConfigDef.convertToString``: how DescribeConfigs shows a value."""
    kind = TOPIC_KEYS[key].type
    if kind == "boolean":
        return "true" if value else "false"
    if kind == "list":
        return ",".join(value)
    if kind == "double":
        return _java_double(value)
    return str(value)


def _java_double(v: float) -> str:
    """Java's ``Double.toString`` for the values a ratio takes (``0.5``, ``1.0``, ``1.0E-4``)."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0 or 1e-3 <= abs(v) < 1e7:
        s = repr(float(v))
        return s if "e" not in s else f"{v:.10f}".rstrip("0")
    mantissa, exp = f"{v:e}".split("e")
    mantissa = mantissa.rstrip("0")
    return f"{mantissa}{'0' if mantissa.endswith('.') else ''}E{int(exp)}"


# ---------------------------------------------------------------------- validators (Kafka's messages)

def _at_least(n: int) -> Callable[[Any], str | None]:
    return lambda v: None if v >= n else f"Value must be at least {n}"


def _between(lo: int, hi: int) -> Callable[[Any], str | None]:
    return lambda v: (f"Value must be no less than {lo}" if v < lo else
                      f"Value must be no more than {hi}" if v > hi else None)


def _one_of(*choices: str) -> Callable[[Any], str | None]:
    return lambda v: None if v in choices else f"String must be one of: {', '.join(choices)}"


def _list_of(*choices: str) -> Callable[[Any], str | None]:
    def check(v: tuple) -> str | None:
        bad = [x for x in v if x not in choices]
        return None if not bad else f"String must be one of: {', '.join(choices)}"
    return check


def _throttled(key: str) -> Callable[[Any], str | None]:
    def check(v: tuple) -> str | None:
        if all(re.fullmatch(r"([0-9]+:[0-9]+)?", x.strip()) for x in v) or "".join(v).strip() == "*":
            return None
        return (f"{key} must be the literal '*' or a list of replicas in the following format: "
                f"[partitionId]:[brokerId],[partitionId]:[brokerId],...")
    return check


def _none(_v: Any) -> str | None:
    return None


#: Kafka 2.8's ``ApiVersion`` strings; the record version of each (0, 1 or 2) decides what kafkasim takes
MESSAGE_FORMAT_VERSIONS: Mapping[str, int] = {v: 0 if i < 4 else 1 if i < 10 else 2 for i, v in enumerate((
    "0.8.0", "0.8.1", "0.8.2", "0.9.0", "0.10.0-IV0", "0.10.0-IV1", "0.10.1-IV0", "0.10.1-IV1", "0.10.1-IV2",
    "0.10.2-IV0", "0.11.0-IV0", "0.11.0-IV1", "0.11.0-IV2", "1.0-IV0", "1.1-IV0", "2.0-IV0", "2.0-IV1",
    "2.1-IV0", "2.1-IV1", "2.1-IV2", "2.2-IV0", "2.2-IV1", "2.3-IV0", "2.3-IV1", "2.4-IV0", "2.4-IV1",
    "2.5-IV0", "2.6-IV0", "2.7-IV0", "2.7-IV1", "2.7-IV2", "2.8-IV0", "2.8-IV1"))}


def _api_version_key(value: str) -> str | None:
    """Kafka's ``ApiVersion.apply``: the known version a string names (``2.8.2`` -> ``2.8``), or None."""
    parts = value.split(".")
    key = ".".join(parts[:3 if value.startswith("0.") else 2])
    if key in MESSAGE_FORMAT_VERSIONS:
        return key
    shorts = [v for v in MESSAGE_FORMAT_VERSIONS if v.split("-")[0] == key]
    return shorts[-1] if shorts else None


def _api_version(v: str) -> str | None:
    return None if _api_version_key(v) is not None else f"Version `{v}` is not a valid version"


def _format_refusal(v: str) -> str | None:
    key = _api_version_key(v)
    if key is not None and MESSAGE_FORMAT_VERSIONS[key] < 2:
        return ("kafkasim stores record batches of format v2 only; a message format below 0.11.0 (v0 or v1) "
                "would need the broker to convert every batch it appends")
    return None


def _preallocate_refusal(v: bool) -> str | None:
    return ("kafkasim does not preallocate segment files; a preallocated segment is a sparse file of "
            "segment.bytes that recovery must scan to its logical end") if v else None


# ---------------------------------------------------------------------- the keys

@dataclass(frozen=True)
class TopicKey:
    name: str
    type: str                      # Kafka's ConfigDef type: int, long, double, boolean, string, list
    default: Any                   # Kafka 2.8's default, typed
    check: Callable[[Any], str | None]
    server_key: str                # Kafka's broker key giving the default (LogConfig's serverDefaultConfigName)
    broker_key: str | None         # the cluster.yaml key giving it here; None: Kafka's default
    doc: str
    refusal: Callable[[Any], str | None] = _none   # a value kafkasim cannot enforce -> why

    def parse(self, raw: Any) -> Any:
        """A value of this key, typed and checked (ConfigValueError); not the refusal."""
        value = _parse(self.type, self.name, raw)
        why = self.check(value)
        if why is not None:
            shown = raw
            if self.type == "list":
                # Kafka's ValidList checks item by item and names the first item it refuses (conformance
                # CreateTopics.*.invalid_config: "Invalid value bogus for configuration cleanup.policy: ...")
                shown = next((item for item in value if self.check([item]) is not None), list(value))
            raise ConfigValueError(self.name, shown, why)
        return value

    @property
    def allowed(self) -> str:
        return _ALLOWED.get(self.name, self.type)


def _key(name: str, type_: str, default: Any, check: Callable[[Any], str | None], server_key: str,
         broker_key: str | None, doc: str, refusal: Callable[[Any], str | None] = _none) -> TopicKey:
    return TopicKey(name, type_, default, check, server_key, broker_key, doc, refusal)


TOPIC_KEYS: Mapping[str, TopicKey] = {k.name: k for k in (
    _key("cleanup.policy", "list", ("delete",), _list_of("compact", "delete"), "log.cleanup.policy", None,
         "`delete`: retention deletes old segments; `compact`: the log cleaner keeps the last record per key; "
         "both: both; empty: neither"),
    _key("compression.type", "string", "producer",
         _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), "compression.type", None,
         "The codec batches are stored with: `producer` keeps the producer's; any other recompresses a batch "
         "whose codec differs (`uncompressed`: none) on the leader"),
    _key("delete.retention.ms", "long", 86_400_000, _at_least(0), "log.cleaner.delete.retention.ms",
         "log.cleaner.delete.retention.ms", "`compact` policy: how long tombstones are kept"),
    _key("file.delete.delay.ms", "long", 60_000, _at_least(0), "log.segment.delete.delay.ms", None,
         "How long a segment retention deleted stays on disk as `.deleted` files before they are removed"),
    _key("flush.messages", "long", LONG_MAX, _at_least(0), "log.flush.interval.messages", None,
         "A replica's log is fsynced once this many records were appended to it since the last fsync"),
    _key("flush.ms", "long", LONG_MAX, _at_least(0), "log.flush.interval.ms", None,
         "A log not fsynced for this long is fsynced by the broker's flusher (Kafka's: once, 30 s after the "
         "start, then every `log.flush.scheduler.interval.ms`, whose default is never)"),
    _key("follower.replication.throttled.replicas", "list", (),
         _throttled("follower.replication.throttled.replicas"), "follower.replication.throttled.replicas", None,
         "Replicas (`partition:broker`, or `*`) whose fetching is throttled on the follower side, by "
         "`follower.replication.throttled.rate` (unlimited here: see docs/deviations.md)"),
    _key("index.interval.bytes", "int", 4096, _at_least(0), "log.index.interval.bytes",
         "log.index.interval.bytes", "An offset-index entry is added after more than this many bytes since the last "
         "one"),
    _key("leader.replication.throttled.replicas", "list", (),
         _throttled("leader.replication.throttled.replicas"), "leader.replication.throttled.replicas", None,
         "Replicas (`partition:broker`, or `*`) whose fetching is throttled on the leader side, by "
         "`leader.replication.throttled.rate` (unlimited here: see docs/deviations.md)"),
    _key("max.compaction.lag.ms", "long", LONG_MAX, _at_least(1), "log.cleaner.max.compaction.lag.ms", None,
         "`compact` policy: a record is compacted at most this long after it was written: the active segment "
         "rolls at this age, and a log whose oldest dirty record is older is cleaned whatever its dirty ratio"),
    _key("max.message.bytes", "int", 1_048_588, _at_least(0), "message.max.bytes", "message.max.bytes",
         "A produced batch larger than this is refused with MESSAGE_TOO_LARGE"),
    _key("message.downconversion.enable", "boolean", True, _none, "log.message.downconversion.enable", None,
         "Whether a fetch of an older version may have batches converted to its format; kafkasim serves Fetch "
         "v4 and up only, which never need it"),
    _key("message.format.version", "string", "2.8-IV1", _api_version, "log.message.format.version", None,
         "The record format batches are stored in: 0.11.0 and up is v2 (the only format kafkasim stores)",
         _format_refusal),
    _key("message.timestamp.difference.max.ms", "long", LONG_MAX, _at_least(0),
         "log.message.timestamp.difference.max.ms", None,
         "`CreateTime`: a produced batch holding a record whose timestamp is further than this from the broker's "
         "clock is refused with INVALID_TIMESTAMP"),
    _key("message.timestamp.type", "string", "CreateTime", _one_of("CreateTime", "LogAppendTime"),
         "log.message.timestamp.type", None,
         "`CreateTime`: the producer's timestamps; `LogAppendTime`: the leader stamps each batch with its clock "
         "on append"),
    _key("min.cleanable.dirty.ratio", "double", 0.5, _between(0, 1), "log.cleaner.min.cleanable.ratio",
         "log.cleaner.min.cleanable.ratio.percent",
         "`compact` policy: the dirty share of the log that makes the cleaner clean it"),
    _key("min.compaction.lag.ms", "long", 0, _at_least(0), "log.cleaner.min.compaction.lag.ms", None,
         "`compact` policy: records younger than this are not compacted"),
    _key("min.insync.replicas", "int", 1, _at_least(1), "min.insync.replicas", "min.insync.replicas",
         "Min ISR size for acks=all produces"),
    _key("preallocate", "boolean", False, _none, "log.preallocate", None,
         "Preallocate a new segment's file (only `false` here)", _preallocate_refusal),
    _key("retention.bytes", "long", -1, _none, "log.retention.bytes", "log.retention.bytes",
         "`delete` policy: the oldest segments are deleted while the log is larger than this; negative = no limit"),
    _key("retention.ms", "long", 604_800_000, _at_least(-1), "log.retention.ms", "log.retention.ms",
         "`delete` policy: segments whose largest timestamp is older than this are deleted; -1 = no limit"),
    _key("segment.bytes", "int", 1 << 30, _at_least(14), "log.segment.bytes", "log.segment.bytes",
         "A segment rolls before an append would take it past this size"),
    _key("segment.index.bytes", "int", 10_485_760, _at_least(0), "log.index.size.max.bytes", None,
         "The largest offset index of a segment (8 bytes an entry; the time index has 12): a segment whose "
         "index is full rolls"),
    _key("segment.jitter.ms", "long", 0, _at_least(0), "log.roll.jitter.ms", None,
         "A random amount below this (and below `segment.ms`) drawn for each segment and taken off its "
         "`segment.ms`"),
    _key("segment.ms", "long", 604_800_000, _at_least(1), "log.roll.ms", "log.roll.ms",
         "A non-empty segment rolls when a new batch's max timestamp is more than this (less the segment's "
         "jitter) past the segment's first batch's"),
    _key("unclean.leader.election.enable", "boolean", False, _none, "unclean.leader.election.enable",
         "unclean.leader.election.enable", "An out-of-sync replica may become leader"),
)}

_ALLOWED = {
    "cleanup.policy": "list of delete, compact", "compression.type": "uncompressed, zstd, lz4, snappy, gzip, "
    "producer", "message.timestamp.type": "CreateTime, LogAppendTime", "min.cleanable.dirty.ratio": "0..1",
    "message.format.version": "0.11.0 and up", "preallocate": "false", "retention.bytes": "any long",
    "follower.replication.throttled.replicas": "`*` or p:b,...", "leader.replication.throttled.replicas":
    "`*` or p:b,...", "retention.ms": ">= -1", "segment.bytes": ">= 14", "segment.ms": ">= 1",
    "max.compaction.lag.ms": ">= 1", "min.insync.replicas": ">= 1", "message.downconversion.enable": "true, false",
    "unclean.leader.election.enable": "true, false"}
for _k in TOPIC_KEYS.values():
    _ALLOWED.setdefault(_k.name, ">= 0")


def parse_value(key: str, value: Any) -> Any:
    """One value of a topic config, typed; ConfigValueError for a bad value (KeyError: unknown key)."""
    return TOPIC_KEYS[key].parse(value)


def validate(props: Mapping[str, Any]) -> dict[str, Any]:
    """Kafka's ``LogConfig.validate`` of a topic's overrides, then kafkasim's refusals: -> the typed values.

    Raises UnknownTopicConfig (a key that is no topic config), ConfigValueError (a bad value),
    ConfigConflict (``min.compaction.lag.ms`` > ``max.compaction.lag.ms``) or ConfigRefused."""
    for key in props:
        if key not in TOPIC_KEYS:
            raise UnknownTopicConfig(key)
    typed = {k: TOPIC_KEYS[k].parse(v) for k, v in props.items()}
    lo = typed.get("min.compaction.lag.ms", TOPIC_KEYS["min.compaction.lag.ms"].default)
    hi = typed.get("max.compaction.lag.ms", TOPIC_KEYS["max.compaction.lag.ms"].default)
    if lo > hi:
        raise ConfigConflict(f"conflict topic config setting min.compaction.lag.ms ({lo}) > "
                             f"max.compaction.lag.ms ({hi})")
    for k, v in typed.items():
        why = TOPIC_KEYS[k].refusal(v)
        if why is not None:
            raise ConfigRefused(k, props[k], why)
    return typed


# ---------------------------------------------------------------------- a log's effective config

@dataclass(frozen=True)
class LogConfig:
    """The effective configuration of one partition's log (topic override, else the broker's default)."""

    cleanup_policy: str = "delete"
    compression_type: str = "producer"
    delete_retention_ms: int = 86_400_000
    file_delete_delay_ms: int = 60_000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    follower_replication_throttled_replicas: tuple = ()
    index_interval_bytes: int = 4096
    leader_replication_throttled_replicas: tuple = ()
    max_compaction_lag_ms: int = LONG_MAX
    max_message_bytes: int = 1_048_588
    message_downconversion_enable: bool = True
    message_format_version: str = "2.8-IV1"
    message_timestamp_difference_max_ms: int = LONG_MAX
    message_timestamp_type: str = "CreateTime"
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    min_insync_replicas: int = 1
    preallocate: bool = False
    retention_bytes: int = -1
    retention_ms: int = 604_800_000
    segment_bytes: int = 1 << 30
    segment_index_bytes: int = 10_485_760
    segment_jitter_ms: int = 0
    segment_ms: int = 604_800_000
    unclean_leader_election_enable: bool = False

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def max_segment_ms(self) -> int:
        """Kafka's ``maxSegmentMs``: a compacted log rolls by ``max.compaction.lag.ms`` when it is sooner."""
        return min(self.max_compaction_lag_ms, self.segment_ms) if self.compact else self.segment_ms


def log_config(overrides: Mapping[str, Any], broker: Mapping[str, Any] | Callable[[str], Any]) -> LogConfig:
    """``overrides`` (a topic's config as stored in ZooKeeper) over the broker's defaults.

    ``broker`` maps a Kafka broker key (``TopicKey.server_key``) to its value here (a mapping, or a
    function such as ``ClusterConfig.get``); a key it does not have (KeyError, or None) takes Kafka's
    default.  An unknown key or a bad value in ``overrides`` is a ValueError naming it."""
    get = broker if callable(broker) else broker.__getitem__
    unknown = sorted(set(overrides) - set(TOPIC_KEYS))
    if unknown:
        raise UnknownTopicConfig(unknown[0])
    values: dict[str, Any] = {}
    for name, spec in TOPIC_KEYS.items():
        if name in overrides:
            values[name] = spec.parse(overrides[name])
            continue
        try:
            value = get(spec.server_key)
        except KeyError:
            value = None
        values[name] = spec.default if value is None else spec.parse(value)
    values["cleanup.policy"] = ",".join(values["cleanup.policy"])
    return LogConfig(**{name.replace(".", "_"): v for name, v in values.items()})


def describe_topic_configs() -> str:
    """The Markdown table of topic configs for docs/config.md."""
    lines = ["| Key | Allowed | Default | Meaning |", "|---|---|---|---|"]
    for k in TOPIC_KEYS.values():
        text = to_string(k.name, k.default)
        default = f"`{k.broker_key}`" if k.broker_key else f"`{text}`" if text else "empty"
        lines.append(f"| `{k.name}` | {k.allowed} | {default} | {k.doc} |")
    return "\n".join(lines) + "\n"
