"""A cluster.yaml translated into each reference broker's ``server.properties`` (Kafka 2.8.2's keys).

Every key of the cluster.yaml schema (``node.config.SCHEMA``) is in exactly one of these tables:

- :data:`SAME`: a Kafka 2.8 broker key of the same name and meaning, written as it is (with its value in
  the cluster.yaml, or kafkasim's default: both sides run with the same effective value, not each its own
  default);
- :data:`TRANSLATED`: a Kafka key under another name or unit;
- :data:`LAUNCHER`: read by the launcher itself (where ZooKeeper is, the run directory), not by a broker;
- :data:`KAFKASIM_ONLY`: a kafkasim extension Kafka 2.8 has no key for, with the reason it is left out,
  and the values that Kafka 2.8 cannot reproduce, which are errors naming the key.

A schema key in none of them is an error naming it (:class:`TranslationError`), so a new cluster.yaml key
cannot be silently dropped from the reference runs: it has to be placed in a table first.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from node.config import SCHEMA, ClusterConfig, ConfigError

SAME: frozenset[str] = frozenset({
    "zookeeper.session.timeout.ms", "zookeeper.connection.timeout.ms",
    "offsets.topic.num.partitions", "offsets.topic.replication.factor", "offsets.topic.segment.bytes",
    "offsets.commit.timeout.ms", "offsets.commit.required.acks", "offsets.retention.minutes",
    "offsets.retention.check.interval.ms", "offsets.load.buffer.size", "offset.metadata.max.bytes",
    "transaction.state.log.num.partitions", "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr", "transaction.state.log.segment.bytes", "transaction.state.log.load.buffer.size",
    "transaction.max.timeout.ms", "transactional.id.expiration.ms",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    "transaction.remove.expired.transaction.cleanup.interval.ms",
    "controller.socket.timeout.ms", "controlled.shutdown.enable", "controlled.shutdown.max.retries",
    "controlled.shutdown.retry.backoff.ms", "auto.leader.rebalance.enable",
    "leader.imbalance.check.interval.seconds", "leader.imbalance.per.broker.percentage", "delete.topic.enable",
    "replica.lag.time.max.ms", "replica.fetch.wait.max.ms", "replica.fetch.max.bytes",
    "replica.high.watermark.checkpoint.interval.ms", "min.insync.replicas", "default.replication.factor",
    "num.partitions", "unclean.leader.election.enable", "log.segment.bytes", "log.roll.ms",
    "log.index.interval.bytes", "log.retention.ms", "log.retention.bytes", "log.retention.check.interval.ms",
    "message.max.bytes", "auto.create.topics.enable", "listener.security.protocol.map",
    "socket.request.max.bytes", "log.cleaner.enable", "log.cleaner.delete.retention.ms",
    "log.cleaner.backoff.ms", "group.min.session.timeout.ms", "group.max.session.timeout.ms",
    "group.initial.rebalance.delay.ms", "group.max.size", "connections.max.idle.ms", "max.connections",
    "max.connections.per.ip", "max.connections.per.ip.overrides", "queued.max.requests",
    # Kafka's broker bounds its own requests to other brokers with it; kafkasim's listener, a half-sent frame
    "request.timeout.ms",
})

#: cluster.yaml key -> (Kafka key, value converter)
TRANSLATED: Mapping[str, tuple[str, Callable[[Any], Any]]] = {
    "log.cleaner.min.cleanable.ratio.percent": ("log.cleaner.min.cleanable.ratio", lambda pct: pct / 100),
}

#: cluster.yaml key -> what the launcher does with it
LAUNCHER: Mapping[str, str] = {
    "run.dir": "the reference's files go under <run.dir>/reference/",
    "zookeeper.connect": "the brokers' zookeeper.connect, with the reference's own chroot appended",
    "zookeeper.embedded.servers": "the size of the reference's own embedded ZooKeeper, when there is one",
    "zookeeper.embedded.tick.time.ms": "the tickTime of the reference's own embedded ZooKeeper",
    "zookeeper.embedded.port": "not used: that port is kafkasim's ZooKeeper's; the reference's own embedded "
                               "ZooKeeper takes a free port",
    "kafkasim.offsets.topic.eager.create": "true: `up` asks for a coordinator once every broker has registered, "
                                           "which makes Kafka create __consumer_offsets then (Kafka's own, "
                                           "lazy way); false: nothing is asked",
}

#: cluster.yaml key -> (why Kafka 2.8.2 has no such key, the values Kafka 2.8.2 cannot reproduce)
KAFKASIM_ONLY: Mapping[str, tuple[str, tuple[Any, ...]]] = {
    "kafkasim.controller.metadata.resend.interval.ms": (
        "kafkasim's controller re-sends UpdateMetadata periodically; Kafka 2.8's sends it only on changes, "
        "which is what the reference shows", ()),
    "kafkasim.offsets.topic.create.grace.ms": (
        "how long kafkasim's controller waits for brokers before it creates __consumer_offsets; the reference's "
        "`up` waits for every broker", ()),
    "kafkasim.isr.kip841.enable": (
        "Kafka 3.3's KIP-841 ISR rules; Kafka 2.8.2 has 2.8's rules only (false)", (True,)),
}

#: the reference's brokers' own keys, set by the launcher for every broker
PER_BROKER = ("broker.id", "listeners", "advertised.listeners", "inter.broker.listener.name", "log.dirs",
              "zookeeper.connect", "broker.rack")


class TranslationError(ConfigError):
    """A cluster.yaml key that Kafka 2.8.2 cannot be given: ``"<source>: <key>: <why>"``."""

    def __init__(self, key: str, why: str, source: str = "<config>"):
        super().__init__(f"{source}: {key}: {why}", source=source, problems=[(key, why)])


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def cluster_properties(cfg: ClusterConfig) -> dict[str, str]:
    """The cluster-wide Kafka keys every reference broker gets, from ``cfg``'s effective settings."""
    out: dict[str, str] = {}
    for key in SCHEMA:
        value = cfg.settings[key]
        if key in SAME:
            if value is not None:          # null: Kafka's own default for the key (connection timeout)
                out[key] = _render(value)
        elif key in TRANSLATED:
            kafka_key, convert = TRANSLATED[key]
            out[kafka_key] = _render(convert(value))
        elif key in KAFKASIM_ONLY:
            why, impossible = KAFKASIM_ONLY[key]
            if any(type(value) is type(v) and value == v for v in impossible):
                raise TranslationError(key, f"{_render(value)} cannot run on Kafka 2.8.2: {why}", cfg.source)
        elif key not in LAUNCHER:
            raise TranslationError(key, "no translation to a Kafka 2.8.2 key (add it to reference/properties.py)",
                                   cfg.source)
    return out


def broker_properties(cfg: ClusterConfig, broker_id: int, *, listeners: Mapping[str, int], zk_connect: str,
                      log_dir: str, extra: Mapping[str, Any] | None = None) -> dict[str, str]:
    """One broker's server.properties: ``listeners`` maps each of its listener names to a 127.0.0.1 port;
    ``extra`` adds Kafka keys (or replaces translated ones) as given."""
    spec = cfg.broker(broker_id)
    props = {"broker.id": str(broker_id)}
    names = list(listeners)
    endpoints = ",".join(f"{name}://127.0.0.1:{port}" for name, port in listeners.items())
    props["listeners"] = endpoints
    props["advertised.listeners"] = endpoints
    props["inter.broker.listener.name"] = names[0]
    props["log.dirs"] = log_dir
    props["zookeeper.connect"] = zk_connect
    if spec.rack is not None:
        props["broker.rack"] = spec.rack
    props.update(cluster_properties(cfg))
    for key, value in (extra or {}).items():
        props[key] = _render(value)
    return props


def render(props: Mapping[str, str]) -> str:
    """server.properties text (keys in the order given; a value's backslashes and line ends escaped)."""
    lines = ["# generated by kafkasim (reference/properties.py) from a cluster.yaml: do not edit"]
    for key, value in props.items():
        escaped = value.replace("\\", "\\\\").replace("\n", "\\n")
        lines.append(f"{key}={escaped}")
    return "\n".join(lines) + "\n"
