"""The cluster.yaml keys: each key's type, allowed values, default and Kafka 2.8's default (:class:`KeySpec`),
the top-level table (:data:`SCHEMA`) and a ``brokers`` entry's (:data:`BROKER_SCHEMA`), and the Markdown that
docs/config.md shows (:func:`describe_schema`).  node/config.py parses and checks a file against them."""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

from kafkacommon.topic_config import describe_topic_configs

__all__ = ["KeySpec", "SCHEMA", "BROKER_SCHEMA", "REQUIRED_BROKER_KEYS", "describe_schema"]


@dataclass(frozen=True)
class KeySpec:
    name: str
    type: type                 # int, bool or str
    default: Any
    doc: str
    kafka_default: Any = None  # Kafka 2.8's default where it differs from ours, else None
    nullable: bool = False
    min: int | None = None
    max: int | None = None
    choices: tuple | None = None
    extension: bool = False    # kafkasim-only key, not in Kafka

    @property
    def types(self) -> tuple[type, ...]:
        return (self.type, type(None)) if self.nullable else (self.type,)

    @property
    def type_name(self) -> str:
        return self.type.__name__ + (" or null" if self.nullable else "")

    @property
    def allowed(self) -> str:
        if self.type is not int:
            return "true, false" if self.type is bool else "non-empty"
        if self.choices is not None:
            return " or ".join(str(c) for c in self.choices)
        if self.min is not None and self.max is not None:
            return f"{self.min}..{self.max}"
        if self.min is not None:
            return "> 0" if self.min == 1 else f">= {self.min}"
        return ""


def _k(name, type_, default, doc, min=1, **kw) -> KeySpec:
    """Table helper: ints are > 0 unless told otherwise."""
    return KeySpec(name, type_, default, doc, min=min if type_ is int else None, **kw)


TABLE = (
    _k("run.dir", str, "run", "Directory for data, logs and pid files; relative to the config file", extension=True),
    _k("zookeeper.connect", str, None, "External ZooKeeper `host:port[,...][/chroot]`; null = embedded", nullable=True),
    _k("zookeeper.embedded.servers", int, 1, "Size of the embedded ZooKeeper ensemble", choices=(1, 3), extension=True),
    _k("zookeeper.embedded.tick.time.ms", int, 200, "tickTime of the embedded ZooKeeper", extension=True),
    _k("zookeeper.embedded.port", int, None, "Embedded ZooKeeper client port; null = any free port", nullable=True,
       max=65535, extension=True),
    _k("zookeeper.session.timeout.ms", int, 6000, "Brokers' ZooKeeper session timeout", kafka_default=18000),
    _k("zookeeper.connection.timeout.ms", int, None, "Max wait to connect; null = session timeout", nullable=True),
    _k("offsets.topic.num.partitions", int, 50, "Partitions of `__consumer_offsets`"),
    _k("offsets.topic.replication.factor", int, 3, "Replication factor of `__consumer_offsets` (<= broker count)"),
    _k("offsets.topic.segment.bytes", int, 104857600, "Segment size of `__consumer_offsets`"),
    _k("offsets.commit.timeout.ms", int, 5000, "Max wait for an offset commit to be replicated"),
    _k("offsets.commit.required.acks", int, -1, "Acks required for an offset commit", choices=(-1, 1)),
    _k("offsets.retention.minutes", int, 10080, "How long committed offsets of an empty group are kept"),
    _k("offsets.retention.check.interval.ms", int, 600000, "How often stale offsets are looked for"),
    _k("offsets.load.buffer.size", int, 5242880, "Read batch size when loading offsets into the cache"),
    _k("transaction.state.log.num.partitions", int, 50, "Partitions of `__transaction_state`"),
    _k("transaction.state.log.replication.factor", int, 3, "Replication factor of `__transaction_state`; it is "
       "created only with at least this many live brokers"),
    _k("transaction.state.log.min.isr", int, 2, "min.insync.replicas of `__transaction_state`"),
    _k("transaction.state.log.segment.bytes", int, 104857600, "Segment size of `__transaction_state`"),
    _k("transaction.state.log.load.buffer.size", int, 5242880, "Read batch size when loading transactions"),
    _k("transaction.max.timeout.ms", int, 900000, "Max transaction.timeout.ms a producer may ask for"),
    _k("transactional.id.expiration.ms", int, 604800000, "How long an idle transactional id is kept"),
    _k("transaction.abort.timed.out.transaction.cleanup.interval.ms", int, 10000,
       "How often transactions past their timeout are looked for (and aborted)"),
    _k("transaction.remove.expired.transaction.cleanup.interval.ms", int, 3600000,
       "How often expired transactional ids are looked for"),
    _k("offset.metadata.max.bytes", int, 4096, "Max size of the metadata string of an offset commit"),
    _k("controller.socket.timeout.ms", int, 5000, "Timeout of controller-to-broker requests", kafka_default=30000),
    _k("controlled.shutdown.enable", bool, True, "Brokers ask the controller to move leadership away before stopping"),
    _k("controlled.shutdown.max.retries", int, 3, "Controlled shutdown attempts before an unclean shutdown", min=0),
    _k("controlled.shutdown.retry.backoff.ms", int, 500, "Backoff between those attempts", kafka_default=5000),
    _k("auto.leader.rebalance.enable", bool, True, "Controller moves leadership back to preferred replicas"),
    _k("leader.imbalance.check.interval.seconds", int, 30, "How often leader imbalance is checked", kafka_default=300),
    _k("leader.imbalance.per.broker.percentage", int, 10, "Imbalance (%) that triggers a rebalance", min=0, max=100),
    _k("delete.topic.enable", bool, True, "Topic deletion is allowed"),
    _k("replica.lag.time.max.ms", int, 10000, "A follower behind this long leaves the ISR", kafka_default=30000),
    _k("replica.fetch.wait.max.ms", int, 500, "Max wait of a follower fetch (<= replica.lag.time.max.ms)"),
    _k("replica.fetch.max.bytes", int, 1048576, "Bytes per partition a follower fetch asks for"),
    _k("replica.high.watermark.checkpoint.interval.ms", int, 5000, "How often high watermarks are checkpointed"),
    _k("min.insync.replicas", int, 1, "Min ISR size for acks=all writes"),
    _k("default.replication.factor", int, 1, "Replication factor of `topics --create` without "
       "--replication-factor (<= broker count)"),
    _k("num.partitions", int, 1, "Partitions of `topics --create` without --partitions"),
    _k("unclean.leader.election.enable", bool, False, "An out-of-sync replica may become leader"),
    _k("log.segment.bytes", int, 1073741824, "Max size of a log segment (topic: `segment.bytes`)", min=14),
    _k("log.roll.ms", int, 604800000, "A non-empty segment rolls on age past this (topic: `segment.ms`; Kafka's "
       "log.roll.hours 168)"),
    _k("log.index.interval.bytes", int, 4096, "Bytes between offset index entries (topic: `index.interval.bytes`)",
       min=0),
    _k("log.retention.ms", int, 604800000, "Segments older than this are deleted (topic: `retention.ms`; "
       "Kafka's log.retention.hours 168); -1 = no limit", min=-1),
    _k("log.retention.bytes", int, -1, "Oldest segments are deleted while a log is larger (topic: "
       "`retention.bytes`); -1 = no limit", min=-1),
    _k("log.retention.check.interval.ms", int, 300000, "How often brokers apply retention (the first pass 30 s after "
       "start, as Kafka, or after one interval when that is shorter)"),
    _k("message.max.bytes", int, 1048588, "Largest batch a produce may append (topic: `max.message.bytes`)",
       min=0),
    _k("auto.create.topics.enable", bool, True, "Metadata from a Kafka client for an unknown topic creates it "
       "(num.partitions, default.replication.factor; an internal topic with its own settings)"),
    _k("listener.security.protocol.map", str, "PLAINTEXT:PLAINTEXT", "Each listener name's security protocol, "
       "`NAME:PLAINTEXT[,...]` (kafkasim speaks PLAINTEXT only); names the brokers' `listeners` use",
       kafka_default="PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"),
    _k("socket.request.max.bytes", int, 104857600, "Largest request frame the Kafka listener reads; a larger "
       "size prefix closes the connection", min=1),
    _k("connections.max.idle.ms", int, 600000, "A Kafka-listener connection with no reads, writes or requests in "
       "progress for this long is closed", min=1),
    _k("max.connections", int, 2147483647, "Kafka-listener connections of the broker; at the limit it accepts no "
       "more until one closes", min=1),
    _k("max.connections.per.ip", int, 2147483647, "Kafka-listener connections from one address; one more is closed "
       "at once (0 needs max.connections.per.ip.overrides)", min=0),
    _k("max.connections.per.ip.overrides", str, None, "Per-address limits, `host:count[,...]` (names resolved at the "
       "broker's start); null = none", kafka_default="", nullable=True),
    _k("queued.max.requests", int, 500, "Requests read and not yet taken up, over the broker's Kafka listeners; at "
       "the limit no connection is read from", min=1),
    _k("request.timeout.ms", int, 30000, "A request frame still not whole this long after its first bytes is "
       "dropped with its connection (kafkasim's rule: docs/deviations.md)", min=1),
    _k("log.cleaner.enable", bool, True, "Run the log cleaner (needed by compacted `__consumer_offsets`)"),
    _k("log.cleaner.delete.retention.ms", int, 86400000, "How long tombstones are kept in compacted logs"),
    _k("log.cleaner.backoff.ms", int, 5000, "Pause between log cleaner passes", kafka_default=15000),
    _k("log.cleaner.min.cleanable.ratio.percent", int, 50, "Dirty share (%) of a compacted log that makes it "
       "cleanable (Kafka's log.cleaner.min.cleanable.ratio 0.5, as a percentage)", min=0, max=100, extension=True),
    _k("group.min.session.timeout.ms", int, 6000, "Min session timeout a consumer may ask for"),
    _k("group.max.session.timeout.ms", int, 1800000, "Max session timeout a consumer may ask for"),
    _k("group.initial.rebalance.delay.ms", int, 3000, "Delay of the first rebalance of an empty group", min=0),
    _k("group.max.size", int, 2147483647, "Max members of one consumer group"),
    _k("kafkasim.offsets.topic.eager.create", bool, True, "true: the controller creates __consumer_offsets at "
       "start-up (the lab's way); false: Kafka's way, the first FindCoordinator creates it", extension=True),
    _k("kafkasim.controller.metadata.resend.interval.ms", int, 2000, "Controller re-sends UpdateMetadata to all live "
       "brokers this often; 0 = never", min=0, extension=True),
    _k("kafkasim.isr.kip841.enable", bool, False, "Kafka 3.3's KIP-841 ISR eligibility: the controller answers "
       "INELIGIBLE_REPLICA to an AlterIsr adding a broker that is shutting down or not registered, and a leader "
       "stops counting such a follower for the HW; false = Kafka 2.8's rules", extension=True),
    _k("kafkasim.offsets.topic.create.grace.ms", int, 3000, "The controller creates __consumer_offsets once "
       "every listed broker has registered, or after this long with at least its replication factor", min=0,
       extension=True),
)
SCHEMA: Mapping[str, KeySpec] = MappingProxyType({spec.name: spec for spec in TABLE})

BROKER_SCHEMA: Mapping[str, KeySpec] = MappingProxyType({spec.name: spec for spec in (
    _k("id", int, None, "broker.id: required, unique", min=0),
    _k("host", str, "127.0.0.1", "Host the broker listens on and advertises"),
    _k("port", int, None, "Listener port: required, unique per host", max=65535),
    _k("rack", str, None, "broker.rack; null = no rack", nullable=True),
    _k("log.dirs", str, None, "The broker's data directories, comma-separated as Kafka's (`/d1,/d2`); a new "
       "partition goes to the one holding the fewest; null = `<run.dir>/data/broker-<id>`", nullable=True),
    _k("listeners", str, None, "The Kafka-protocol listeners, `NAME://host:port[,...]` (names from "
       "listener.security.protocol.map); null = `PLAINTEXT://<host>:<port + 10000>` (port - 10000 above 55535)",
       nullable=True),
    _k("advertised.listeners", str, None, "What Metadata and FindCoordinator tell a client that came in on a "
       "listener, `NAME://host:port[,...]` (names from `listeners`); null = `listeners`", nullable=True),
)})
REQUIRED_BROKER_KEYS = ("id", "port")


def _fmt(value: Any) -> str:
    if value is None:
        return "`null`"
    return f"`{str(value).lower()}`" if isinstance(value, bool) else f"`{value}`"


def describe_schema() -> str:
    """Markdown tables of every top-level key and every broker-entry key."""
    lines = ["| Key | Type | Allowed | Default | Kafka 2.8 default | Meaning |", "|---|---|---|---|---|---|"]
    for s in TABLE:
        kafka = "n/a (kafkasim)" if s.extension else "same" if s.kafka_default is None else _fmt(s.kafka_default)
        lines.append(f"| `{s.name}` | {s.type_name} | {s.allowed} | {_fmt(s.default)} | {kafka} | {s.doc} |")
    lines += ["", "Each entry of the required `brokers` list (at least one):", "",
              "| Key | Type | Allowed | Default | Meaning |", "|---|---|---|---|---|"]
    for s in BROKER_SCHEMA.values():
        default = "required" if s.name in REQUIRED_BROKER_KEYS else _fmt(s.default)
        lines.append(f"| `{s.name}` | {s.type_name} | {s.allowed} | {default} | {s.doc} |")
    lines += ["", "Topic configs (Kafka 2.8's 26: `kafkasim topics --create --topic T --config KEY=VALUE`, CreateTopics, "
              "and on a live topic AlterConfigs and IncrementalAlterConfigs, e.g. `kafka-configs --alter`); the default "
              "is the broker key named (its dynamic value first, docs/kafka-listener.md), else Kafka's:", "",
              describe_topic_configs().rstrip("\n")]
    return "\n".join(lines) + "\n"
