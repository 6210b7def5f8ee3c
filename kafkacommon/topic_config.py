"""Topic-level configs (``kafka-topics.sh --config k=v``): their parsers, docs and broker defaults.

Each key has Kafka's name and bounds, and the broker key (``cluster.yaml``)
whose value applies when a topic does not set it.  :func:`log_config`
resolves one topic's overrides against the broker's settings into a
:class:`LogConfig`, which every part of the broker reads: no topic key is
accepted and then ignored.  Pure: no I/O.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

__all__ = ["TopicKey", "TOPIC_KEYS", "LogConfig", "log_config", "parse_value", "describe_topic_configs"]


def _bool(v: str) -> bool:
    if v.lower() not in ("true", "false"):
        raise ValueError("expected true or false")
    return v.lower() == "true"


def _int(minimum: int) -> Callable[[str], int]:
    def parse(v: str) -> int:
        n = int(v)
        if n < minimum:
            raise ValueError(f"must be >= {minimum}")
        return n
    return parse


def _policy(v: str) -> str:
    parts = sorted(p.strip() for p in v.split(","))
    if not parts or any(p not in ("compact", "delete") for p in parts):
        raise ValueError("expected delete, compact, or compact,delete")
    return ",".join(parts)


@dataclass(frozen=True)
class TopicKey:
    name: str
    parse: Callable[[str], Any]
    allowed: str
    broker_key: str | None  # the cluster.yaml key giving the default, None: a fixed default
    default: Any            # used when broker_key is None
    doc: str


TOPIC_KEYS: Mapping[str, TopicKey] = {k.name: k for k in (
    TopicKey("cleanup.policy", _policy, "delete, compact, compact,delete", None, "delete",
             "`delete`: retention deletes old segments; `compact`: the log cleaner keeps the last record per key; "
             "both: both"),
    TopicKey("min.insync.replicas", _int(1), ">= 1", "min.insync.replicas", None,
             "Min ISR size for acks=all produces"),
    TopicKey("unclean.leader.election.enable", _bool, "true, false", "unclean.leader.election.enable", None,
             "An out-of-sync replica may become leader"),
    TopicKey("segment.bytes", _int(14), ">= 14", "log.segment.bytes", None,
             "A segment rolls before an append would take it past this size"),
    TopicKey("segment.ms", _int(1), ">= 1", "log.roll.ms", None,
             "A non-empty segment rolls when a new batch's max timestamp is more than this past the segment's "
             "first batch's (no jitter)"),
    TopicKey("index.interval.bytes", _int(0), ">= 0", "log.index.interval.bytes", None,
             "An offset-index entry is added after more than this many bytes since the last one"),
    TopicKey("retention.ms", _int(-1), ">= -1", "log.retention.ms", None,
             "`delete` policy: segments whose largest timestamp is older than this are deleted; -1 = no limit"),
    TopicKey("retention.bytes", _int(-1), ">= -1", "log.retention.bytes", None,
             "`delete` policy: the oldest segments are deleted while the log is larger than this; -1 = no limit"),
    TopicKey("max.message.bytes", _int(0), ">= 0", "message.max.bytes", None,
             "A produced batch larger than this is refused with MESSAGE_TOO_LARGE"),
    TopicKey("delete.retention.ms", _int(0), ">= 0", "log.cleaner.delete.retention.ms", None,
             "`compact` policy: how long tombstones are kept"),
    TopicKey("min.compaction.lag.ms", _int(0), ">= 0", None, 0,
             "`compact` policy: records younger than this are not compacted"),
)}


def parse_value(key: str, value: str) -> Any:
    """One ``key=value`` of a topic config, typed; ValueError for a bad value (KeyError: unknown key)."""
    return TOPIC_KEYS[key].parse(value)


@dataclass(frozen=True)
class LogConfig:
    """The effective configuration of one partition's log (topic override, else the broker's default)."""

    cleanup_policy: str = "delete"
    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    max_message_bytes: int = 1048588
    delete_retention_ms: int = 86_400_000
    min_compaction_lag_ms: int = 0
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")


def log_config(overrides: Mapping[str, Any], broker: Mapping[str, Any] | Callable[[str], Any]) -> LogConfig:
    """``overrides`` (a topic's config as stored in ZooKeeper) over the broker's settings.

    ``broker`` maps cluster.yaml keys to values (a mapping, or ``ClusterConfig.get``);
    an unknown key in ``overrides`` is a ValueError naming it."""
    get = broker if callable(broker) else broker.__getitem__
    values: dict[str, Any] = {}
    for name, spec in TOPIC_KEYS.items():
        if name in overrides:
            raw = overrides[name]
            values[name] = spec.parse(str(raw).lower() if isinstance(raw, bool) else str(raw))
        else:
            values[name] = spec.default if spec.broker_key is None else get(spec.broker_key)
    unknown = sorted(set(overrides) - set(TOPIC_KEYS))
    if unknown:
        raise ValueError(f"unknown topic config {unknown[0]!r}")
    return LogConfig(**{name.replace(".", "_"): v for name, v in values.items()})


def describe_topic_configs() -> str:
    """The Markdown table of topic configs for docs/config.md."""
    lines = ["| Key | Allowed | Default | Meaning |", "|---|---|---|---|"]
    for k in TOPIC_KEYS.values():
        default = f"`{k.broker_key}`" if k.broker_key else f"`{k.default}`"
        lines.append(f"| `{k.name}` | {k.allowed} | {default} | {k.doc} |")
    return "\n".join(lines) + "\n"
