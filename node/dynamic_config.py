"""A broker's dynamic configs (Kafka 2.8's DynamicBrokerConfig): ``/config/brokers/<id>`` over
``/config/brokers/<default>`` over cluster.yaml over Kafka's defaults.

kafkasim applies at run time the broker keys that are topic-config defaults (Kafka's DynamicLogConfig:
``log.retention.ms``, ``log.segment.bytes``, ``min.insync.replicas``, ``unclean.leader.election.enable``,
``compression.type``, ...): every hosted log takes them at once, and the controller the unclean-election
default.  Kafka's other dynamic keys are refused here with the reason (``REFUSED``); a static key gets
Kafka's own error ("Cannot update these configs dynamically"), and an unknown key (which Kafka would keep
as a custom config, unused) is refused too, naming it.  The listener's DescribeConfigs and AlterConfigs
ask this object (``ListenerContext.broker_config``); the broker's config-change listener updates it.
"""
from __future__ import annotations

import threading
from typing import Any, Mapping

from kafkacommon import errors
from kafkacommon.topic_config import TOPIC_KEYS, ConfigRefused, ConfigValueError, TopicKey, to_string
from node.config import BROKER_SCHEMA, SCHEMA, ClusterConfig

DEFAULT_ENTITY = "<default>"
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 2, 3, 4, 5

#: Kafka's DynamicLogConfig.ReconfigurableConfigs (LogConfig's broker synonyms but the message format):
#: the broker keys kafkasim changes at run time, each the default of a topic config
LOG_KEYS: Mapping[str, TopicKey] = {k.server_key: k for k in TOPIC_KEYS.values() if k.server_key not in (
    "log.message.format.version", "leader.replication.throttled.replicas", "follower.replication.throttled.replicas")}
_CLEANER = "kafkasim's log cleaner is one thread with fixed buffers; only log.cleaner.backoff.ms is a setting, " \
           "read at start-up"
_LISTENER = "kafkasim's Kafka listeners are bound and their limits set at the broker's start (cluster.yaml)"
_THREADS = "kafkasim sizes its threads itself"
_THROTTLE = "kafkasim does not throttle replication (the throttled-replica topic configs have no rate to apply)"
#: Kafka 2.8's other dynamic broker configs: refused here, with the reason (docs/deviations.md)
REFUSED: Mapping[str, str] = {
    **{k: _CLEANER for k in ("log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.size",
                             "log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second",
                             "log.cleaner.backoff.ms")},
    **{k: _LISTENER for k in ("max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
                              "max.connection.creation.rate", "listeners", "advertised.listeners",
                              "listener.security.protocol.map", "principal.builder.class")},
    **{k: _THREADS for k in ("num.io.threads", "num.network.threads", "num.replica.fetchers",
                             "num.recovery.threads.per.data.dir", "background.threads")},
    "metric.reporters": "kafkasim has no metrics reporters",
    **{k: _THROTTLE for k in ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                              "replica.alter.log.dirs.io.max.bytes.per.second")},
}
_RATIO_PERCENT = "log.cleaner.min.cleanable.ratio.percent"   # cluster.yaml's form of log.cleaner.min.cleanable.ratio


class BrokerConfigError(ValueError):
    """A broker config change refused: ``code`` is the Kafka error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class DynamicBrokerConfig:
    def __init__(self, cfg: ClusterConfig, broker_id: int) -> None:
        self.cfg = cfg
        self.broker_id = broker_id
        self._lock = threading.Lock()
        self.default: dict[str, str] = {}   # /config/brokers/<default>
        self.mine: dict[str, str] = {}      # /config/brokers/<id>

    def update(self, entity: str, config: Mapping[str, str]) -> bool:
        """A dynamic config znode read (again): -> whether it is this broker's (<default> or its id)."""
        with self._lock:
            if entity == DEFAULT_ENTITY:
                self.default = dict(config)
            elif entity == str(self.broker_id):
                self.mine = dict(config)
            else:
                return False
        return True

    # ------------------------------------------------------------------ values

    def static(self, key: str) -> tuple[Any, bool] | None:
        """cluster.yaml's value of a Kafka broker key and whether it was set there; None: not a key here."""
        if key == "log.cleaner.min.cleanable.ratio":
            return self.cfg.get(_RATIO_PERCENT) / 100, _RATIO_PERCENT in self.cfg.raw
        if key in SCHEMA and not SCHEMA[key].extension:
            return self.cfg.get(key), key in self.cfg.raw
        return None

    def lookup(self, key: str) -> Any:
        """A topic config's broker default by Kafka's broker key (``log_config``'s lookup): this broker's
        dynamic value, the cluster-wide one, cluster.yaml's; None: Kafka's default."""
        with self._lock:
            for layer in (self.mine, self.default):
                if key in layer:
                    return layer[key]
        got = self.static(key)
        return None if got is None else got[0]

    def synonyms(self, key: str) -> list[tuple[str, str, int]]:
        """Kafka's configSynonyms of a broker key, highest priority first: (name, value, source)."""
        out: list[tuple[str, str, int]] = []
        with self._lock:
            if key in self.mine:
                out.append((key, self.mine[key], DYNAMIC_BROKER_CONFIG))
            if key in self.default:
                out.append((key, self.default[key], DYNAMIC_DEFAULT_BROKER_CONFIG))
        got = self.static(key)
        spec = LOG_KEYS.get(key)
        if got is not None and got[1]:
            out.append((key, self._text(key, got[0]), STATIC_BROKER_CONFIG))
        default = (SCHEMA[key].default if key in SCHEMA else
                   SCHEMA[_RATIO_PERCENT].default / 100 if key == "log.cleaner.min.cleanable.ratio" else
                   spec.default if spec is not None else None)
        if default is not None:
            out.append((key, self._text(key, default), DEFAULT_CONFIG))
        return out

    @staticmethod
    def _text(key: str, value: Any) -> str:
        spec = LOG_KEYS.get(key)
        if spec is not None:
            return to_string(spec.name, spec.parse(value))
        return str(value).lower() if isinstance(value, bool) else str(value)

    def describe(self, per_broker: bool) -> list[dict[str, Any]]:
        """DescribeConfigs of a BROKER resource: this broker's (every key, with its source), or the
        cluster-wide dynamic ones (``per_broker`` False: only those set)."""
        if not per_broker:
            with self._lock:
                names = sorted(self.default)
        else:
            names = sorted({k for k in SCHEMA if not SCHEMA[k].extension} | set(LOG_KEYS) | set(self.mine)
                           | set(self.default))
        out = []
        for key in names:
            syn = [s for s in self.synonyms(key) if per_broker or s[2] == DYNAMIC_DEFAULT_BROKER_CONFIG]
            value = syn[0][1] if syn else None
            out.append(dict(name=key, value=value, source=syn[0][2] if syn else DEFAULT_CONFIG,
                            read_only=key not in LOG_KEYS, synonyms=syn,
                            type=LOG_KEYS[key].type if key in LOG_KEYS else _schema_type(key)))
        return out

    # ------------------------------------------------------------------ changes

    def check(self, props: Mapping[str, str], per_broker: bool) -> None:
        """Kafka's DynamicBrokerConfig.validateConfigs of a broker entity's whole new config, then
        kafkasim's refusals; raises BrokerConfigError."""
        static = sorted(k for k in props if k not in LOG_KEYS and k not in REFUSED and _kafka_key(k))
        if static:
            raise BrokerConfigError(errors.INVALID_REQUEST,
                                    f"Cannot update these configs dynamically: Set({', '.join(static)})")
        for key, value in props.items():
            if key in REFUSED:
                raise BrokerConfigError(errors.INVALID_CONFIG, f"kafkasim does not change {key} at run time: "
                                                               f"{REFUSED[key]}")
            spec = LOG_KEYS.get(key)
            if spec is None:
                raise BrokerConfigError(errors.INVALID_CONFIG, f"unknown broker config {key!r} (Kafka would keep it "
                                                               f"as a custom config; kafkasim takes no key it ignores)")
            try:
                typed = spec.parse(value)
            except ConfigValueError as e:
                raise BrokerConfigError(errors.INVALID_REQUEST, str(ConfigValueError(key, value, e.why))) from None
            why = spec.refusal(typed)
            if why is not None:
                raise BrokerConfigError(errors.INVALID_CONFIG, str(ConfigRefused(key, value, why)))

    def current(self, per_broker: bool) -> dict[str, str]:
        with self._lock:
            return dict(self.mine if per_broker else self.default)


def _kafka_key(key: str) -> bool:
    """A Kafka broker key kafkasim knows (cluster.yaml's, a broker entry's) that Kafka does not change
    dynamically: its error then is Kafka's."""
    return (key in SCHEMA and not SCHEMA[key].extension) or key in BROKER_SCHEMA or key in (
        "broker.id", "log.dirs", "log.dir", "broker.rack", "zookeeper.connect")


def _schema_type(key: str) -> str:
    spec = SCHEMA.get(key)
    if spec is None:
        return "string"
    return {bool: "boolean", int: "int", str: "string"}[spec.type]
