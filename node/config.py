"""Cluster configuration: one YAML file, Kafka's own key names.

The file is a FLAT mapping of dotted keys (as in server.properties) plus a
``brokers`` list.  Unknown or misspelt keys, wrong types, out-of-range values
and invalid combinations are all errors (:class:`ConfigError`) that name the
offending key; nothing is silently ignored.  See :func:`describe_schema`.
"""
from __future__ import annotations

import copy
import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

import yaml

from listener.limits import LimitError, parse_overrides
from node.config_keys import BROKER_SCHEMA, REQUIRED_BROKER_KEYS, SCHEMA, KeySpec, describe_schema
from node.listeners import Endpoint, check_advertised, parse_listeners, parse_protocol_map

__all__ = ["ConfigError", "KeySpec", "BrokerSpec", "ClusterConfig", "SCHEMA", "BROKER_SCHEMA",
           "parse_config", "load_config", "default_config", "describe_schema"]

# the running cluster's state file in its run directory (the embedded ZooKeeper's address, the brokers'
# processes, the effective config): `cluster up` writes it, the brokers and the commands read it
STATE_FILE = "cluster.json"


class ConfigError(ValueError):
    """One line per problem, ``"<source>: <key>: <what is wrong>"``; ``problems``: (key, message) pairs."""

    def __init__(self, message: str, *, source: str | None = None,
                 problems: tuple[tuple[str, str], ...] | list = ()):
        super().__init__(message)
        self.source = source
        self.problems = tuple(problems)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self.problems)


def _fail(source: str, problems: list[tuple[str, str]]) -> None:
    msg = "\n".join(f"{source}: {key}: {text}" for key, text in problems)
    raise ConfigError(msg, source=source, problems=problems)


KAFKA_PORT_OFFSET = 10000  # the default Kafka listener is on the gRPC port + 10000 (19091 -> 29091), or - 10000
_TOP_KNOWN = tuple(SCHEMA) + ("brokers",)
_UNDERSCORED = {name.replace(".", "_"): name for name in SCHEMA}
#: Kafka keys kafkasim does not implement: an error naming them, never accepted and ignored
_UNSUPPORTED = {"ssl.keystore.location": "kafkasim's listeners speak PLAINTEXT only; remove it",
                "sasl.enabled.mechanisms": "kafkasim's listeners speak PLAINTEXT only; remove it",
                "authorizer.class.name": "kafkasim has no ACLs; remove it"}
_PER_BROKER = {"broker.id": "id", "broker.rack": "rack", "log.dirs": "log.dirs", "log.dir": "log.dirs", "id": "id",
               "rack": "rack", "host": "host", "port": "port", "host.name": "host", "listeners": "listeners",
               "advertised.listeners": "advertised.listeners"}


def _suggest(key: Any, known: tuple[str, ...], aliases: Mapping[str, str] = MappingProxyType({})) -> str:
    """The 'unknown key' message, with the closest known key if there is one."""
    if not isinstance(key, str):
        return f"unknown key {key!r} (keys are strings)"
    if key in aliases:
        return f"unknown key '{key}'; use '{aliases[key]}'"
    normal = key.replace("_", ".").replace("-", ".")
    close = [normal] if normal in known else difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    return f"unknown key '{key}'" + (f"; did you mean '{close[0]}'?" if close else "")


def _check(spec: KeySpec, value: Any) -> str | None:
    """Error text for a value that does not fit ``spec``, else None."""
    if value is None:
        return None if spec.nullable else f"expected {spec.type_name}, got null"
    if not isinstance(value, spec.type) or (spec.type is int and isinstance(value, bool)):
        hint = " (write true or false, unquoted)" if spec.type is bool else ""
        if spec.type is str and isinstance(value, (int, float, bool)):
            hint = " (quote it to make it a string)"
        return f"expected {spec.type_name}, got {type(value).__name__} {value!r}{hint}"
    if (spec.choices is not None and value not in spec.choices or spec.min is not None and value < spec.min
            or spec.max is not None and value > spec.max):
        return f"must be {spec.allowed}, got {value!r}"
    if spec.type is str and not value.strip():
        return "must not be empty"
    return None


def _check_zk_connect(value: str) -> str | None:
    """Validate 'host:port[,host:port...][/chroot]' as Kafka/ZooKeeper would parse it."""
    hosts, slash, chroot = value.partition("/")
    if slash:
        chroot = "/" + chroot
        if chroot.endswith("/"):
            return f"chroot {chroot!r} must not end with '/'"
        if "//" in chroot or any(c.isspace() for c in chroot):
            return f"chroot {chroot!r} is not a valid ZooKeeper path"
    if not hosts:
        return f"{value!r} has no host:port before the chroot"
    for entry in hosts.split(","):
        host, colon, port = entry.strip().rpartition(":")
        if not colon or not host or any(c.isspace() or c in "[]@" for c in host):
            return f"{entry!r} in {value!r} is not host:port"
        if not (port.isascii() and port.isdigit()) or not 1 <= int(port) <= 65535:
            return f"port {port!r} in {value!r} is not an integer in 1..65535"
    return None


def _abspath(base: Path, value: str) -> Path:
    return Path(os.path.normpath(base / Path(value).expanduser()))


@dataclass(frozen=True)
class BrokerSpec:
    id: int
    host: str
    port: int
    rack: str | None
    log_dir: Path                                    # the first of ``log_dirs`` (where zk-session.json lives)
    listeners: tuple[Endpoint, ...] | None = None    # the Kafka listeners' (name, bind host, port); None: default
    advertised: tuple[Endpoint, ...] | None = None   # what clients are told, per listener name; None: ``listeners``
    listeners_raw: str | None = None            # as given (to_yaml writes it back)
    advertised_raw: str | None = None
    log_dirs: tuple[Path, ...] = ()                  # every data directory, in log.dirs' order; () = (log_dir,)

    def __post_init__(self) -> None:
        if not self.log_dirs:
            object.__setattr__(self, "log_dirs", (self.log_dir,))

    @property
    def log_dirs_raw(self) -> str:
        """``log.dirs`` as cluster.yaml writes it back."""
        return ",".join(str(d) for d in self.log_dirs)

    @property
    def kafka_listeners(self) -> tuple[Endpoint, ...]:
        if self.listeners is not None:
            return self.listeners
        port = self.port + KAFKA_PORT_OFFSET
        return (("PLAINTEXT", self.host, port if port <= 65535 else self.port - KAFKA_PORT_OFFSET),)

    @property
    def kafka_listener(self) -> tuple[str, int]:
        """The first listener's bind address."""
        _, host, port = self.kafka_listeners[0]
        return host, port

    def advertised_on(self, name: str) -> tuple[str, int] | None:
        """What a client that came in on listener ``name`` is told to dial for this broker; None: this broker
        has no such listener."""
        for n, host, port in (self.advertised or ()):
            if n == name:
                return host, port
        for n, host, port in self.kafka_listeners:
            if n == name:
                return host, port
        return None

    @property
    def advertised_endpoints(self) -> tuple[Endpoint, ...]:
        """Every Kafka listener as a client that comes in on it is told to dial this broker: (name, host, port)."""
        return tuple((name, *self.advertised_on(name)) for name, _, _ in self.kafka_listeners)  # type: ignore[misc]

    @property
    def kafka_advertised(self) -> tuple[str, int]:
        """The first listener's advertised address."""
        return self.advertised_on(self.kafka_listeners[0][0])  # type: ignore[return-value]


@dataclass(frozen=True)
class ClusterConfig:
    """A validated cluster.  Equality compares ``settings`` and ``brokers`` only."""
    source: str = field(compare=False)
    settings: Mapping[str, Any] = field(repr=False)
    brokers: tuple[BrokerSpec, ...]
    raw: Mapping[str, Any] = field(compare=False, repr=False)
    base_dir: Path = field(default=Path("."), compare=False, repr=False)  # resolves relative paths on re-validation

    def get(self, key: str) -> Any:
        if key not in SCHEMA:
            raise KeyError(_suggest(key, tuple(SCHEMA)))
        return self.settings[key]

    def broker(self, broker_id: int) -> BrokerSpec:
        for b in self.brokers:
            if b.id == broker_id:
                return b
        known = ", ".join(str(b.id) for b in self.brokers)
        _fail(self.source, [("brokers", f"no broker with id {broker_id!r} (ids: {known})")])

    @property
    def run_dir(self) -> Path:
        return Path(self.settings["run.dir"])

    @property
    def zookeeper_connect(self) -> str | None:
        return self.settings["zookeeper.connect"]

    @property
    def embedded(self) -> bool:
        return self.settings["zookeeper.connect"] is None

    @property
    def session_timeout_ms(self) -> int:
        return self.settings["zookeeper.session.timeout.ms"]

    @property
    def connection_timeout_ms(self) -> int:
        value = self.settings["zookeeper.connection.timeout.ms"]
        return self.session_timeout_ms if value is None else value

    def with_overrides(self, **flat: Any) -> "ClusterConfig":
        """``cfg.with_overrides(zookeeper_session_timeout_ms=9000)``; None resets a key to its default."""
        updates, problems = {}, []
        for key, value in flat.items():
            dotted = _UNDERSCORED.get(key)
            if dotted is None:
                problems.append((key, _suggest(key, tuple(_UNDERSCORED))))
            else:
                updates[dotted] = value
        if problems:
            _fail(self.source, problems)
        return self.with_settings(updates)

    def with_settings(self, updates: Mapping[str, Any]) -> "ClusterConfig":
        """A re-validated copy with dotted ``updates`` applied (``brokers`` replaces the list;
        None resets a key to its default)."""
        merged = dict(self.raw)
        for key, value in updates.items():
            if value is None and key in SCHEMA:
                merged.pop(key, None)
            else:
                merged[key] = value
        return parse_config(merged, self.source, self.base_dir)

    def with_brokers(self, n: int, base_port: int | None = None, host: str = "127.0.0.1") -> "ClusterConfig":
        """A re-validated copy with brokers 1..n on ports base_port..base_port+n-1 (no rack or log.dirs)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            _fail(self.source, [("brokers", f"with_brokers needs at least 1 broker, got {n!r}")])
        if base_port is None:
            base_port = self.brokers[0].port if self.brokers else 19091
        entries = [{"id": i, "host": host, "port": base_port + i - 1} for i in range(1, n + 1)]
        return self.with_settings({"brokers": entries})

    def to_yaml(self) -> str:
        """YAML that load_config reads back to an equal config: run.dir (absolute), every key
        given explicitly, then the brokers."""
        doc: dict[str, Any] = {"run.dir": str(self.run_dir)}
        for key in self.raw:
            if key in SCHEMA and key != "run.dir":
                doc[key] = self.settings[key]
        doc["brokers"] = []
        for b in self.brokers:
            entry: dict[str, Any] = {"id": b.id, "host": b.host, "port": b.port}
            if b.rack is not None:
                entry["rack"] = b.rack
            if b.log_dirs != (self.run_dir / "data" / f"broker-{b.id}",):
                entry["log.dirs"] = b.log_dirs_raw
            if b.listeners_raw is not None:
                entry["listeners"] = b.listeners_raw
            if b.advertised_raw is not None:
                entry["advertised.listeners"] = b.advertised_raw
            doc["brokers"].append(entry)
        header = f"# kafkasim cluster config (generated from {self.source})\n"
        return header + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None)


def _parse_brokers(value: Any, run_dir: Path, base: Path, problems: list,
                   protocols: dict[str, str]) -> list[tuple[int, BrokerSpec]]:
    if value is None:
        problems.append(("brokers", "required: a list of at least one {id, port} mapping"))
        return []
    if not isinstance(value, (list, tuple)):
        problems.append(("brokers", f"expected a list of brokers, got {type(value).__name__}"))
        return []
    if not value:
        problems.append(("brokers", "must list at least one broker"))
    out = []
    for i, entry in enumerate(value):
        where = f"brokers[{i}]"
        if not isinstance(entry, Mapping):
            problems.append((where, f"expected a mapping with id and port, got {type(entry).__name__}"))
            continue
        vals, before = {}, len(problems)
        for key, val in entry.items():
            val = os.fspath(val) if key == "log.dirs" and isinstance(val, os.PathLike) else val
            if key not in BROKER_SCHEMA:
                problems.append((f"{where}.{key}", _suggest(key, tuple(BROKER_SCHEMA), _PER_BROKER)))
            elif (err := _check(BROKER_SCHEMA[key], val)) is not None:
                problems.append((f"{where}.{key}", err))
            else:
                vals[key] = val
        for key in REQUIRED_BROKER_KEYS:
            if key not in entry:
                problems.append((f"{where}.{key}", "required"))
        log_dirs = vals.get("log.dirs")
        dirs: tuple[Path, ...] = ()
        if log_dirs is not None:
            parts = [d.strip() for d in log_dirs.split(",")]
            if any(not d for d in parts):
                problems.append((f"{where}.log.dirs", f"{log_dirs!r} has an empty directory (comma-separated paths)"))
            else:
                dirs = tuple(_abspath(base, d) for d in parts)
                if len(set(dirs)) != len(dirs):
                    problems.append((f"{where}.log.dirs", f"{log_dirs!r} lists a directory twice"))
        parsed: dict[str, tuple[Endpoint, ...] | None] = {}
        for key in ("listeners", "advertised.listeners"):
            try:
                parsed[key] = parse_listeners(vals[key], protocols) if vals.get(key) is not None else None
            except ValueError as e:
                problems.append((f"{where}.{key}", str(e)))
        if parsed.get("advertised.listeners") and (why := check_advertised(
                parsed.get("listeners") or (("PLAINTEXT", "", 0),), parsed["advertised.listeners"])):
            problems.append((f"{where}.advertised.listeners", why))
        if len(problems) > before:
            continue
        dirs = dirs or (run_dir / "data" / f"broker-{vals['id']}",)
        out.append((i, BrokerSpec(vals["id"], vals.get("host", "127.0.0.1"), vals["port"], vals.get("rack"),
                                  dirs[0], parsed["listeners"], parsed["advertised.listeners"],
                                  vals.get("listeners"), vals.get("advertised.listeners"), dirs)))
    return out


def _check_combinations(s: Mapping[str, Any], brokers: list[tuple[int, BrokerSpec]], problems: list) -> None:
    n = len(brokers)
    for key in ("offsets.topic.replication.factor", "default.replication.factor"):
        if s[key] > n:
            problems.append((key, f"{s[key]} exceeds the number of brokers ({n} in 'brokers')"))
    ids: dict[int, int] = {}
    addrs: dict[tuple[str, int], str] = {}   # host:port -> the key that took it (gRPC port or Kafka listener)
    dirs: dict[Path, int] = {}
    for i, b in brokers:
        used = [d for d in b.log_dirs if d in dirs]
        if b.id in ids:
            problems.append((f"brokers[{i}].id", f"duplicate broker id {b.id} (also brokers[{ids[b.id]}].id)"))
        if (b.host, b.port) in addrs:
            problems.append((f"brokers[{i}].port", f"{b.host}:{b.port} is also used by {addrs[b.host, b.port]}"))
        if used:
            problems.append((f"brokers[{i}].log.dirs", f"{used[0]} is also used by brokers[{dirs[used[0]]}]"))
        ids.setdefault(b.id, i)
        addrs.setdefault((b.host, b.port), f"brokers[{i}]")
        for _, host, port in b.kafka_listeners:
            kafka = (host, port)
            if kafka in addrs:
                problems.append((f"brokers[{i}].listeners", f"{host}:{port} is also used by {addrs[kafka]}"))
            addrs.setdefault(kafka, f"brokers[{i}].listeners")
        for d in b.log_dirs:
            dirs.setdefault(d, i)
    if s["zookeeper.connect"] is None:
        tick, session = s["zookeeper.embedded.tick.time.ms"], s["zookeeper.session.timeout.ms"]
        if session < 2 * tick:
            problems.append(("zookeeper.session.timeout.ms", f"{session} is below 2 * zookeeper.embedded.tick.time.ms"
                             f" ({2 * tick}), ZooKeeper's minimum session timeout"))
        port = s["zookeeper.embedded.port"]
        if port is not None and any(b.port == port for _, b in brokers):
            problems.append(("zookeeper.embedded.port", f"{port} is also a broker port in 'brokers'"))
    if s["group.min.session.timeout.ms"] > s["group.max.session.timeout.ms"]:
        problems.append(("group.min.session.timeout.ms", f"{s['group.min.session.timeout.ms']} exceeds "
                         f"group.max.session.timeout.ms ({s['group.max.session.timeout.ms']})"))
    if s["replica.fetch.wait.max.ms"] > s["replica.lag.time.max.ms"]:
        problems.append(("replica.fetch.wait.max.ms", f"{s['replica.fetch.wait.max.ms']} exceeds "
                         f"replica.lag.time.max.ms ({s['replica.lag.time.max.ms']})"))
    try:
        overrides = parse_overrides(s["max.connections.per.ip.overrides"])
    except LimitError as e:
        problems.append(("max.connections.per.ip.overrides", str(e).split(": ", 1)[1]))
    else:
        if s["max.connections.per.ip"] == 0 and not overrides:
            problems.append(("max.connections.per.ip", "0 refuses every address: it needs "
                             "max.connections.per.ip.overrides"))


def parse_config(data: Mapping[str, Any] | None, source: str = "<config>",
                 base_dir: Path | None = None) -> ClusterConfig:
    """Validate a mapping (as read from YAML); relative paths resolve against base_dir (default: cwd)."""
    base = Path(os.path.abspath(base_dir if base_dir is not None else Path.cwd()))
    data = {} if data is None else data
    if not isinstance(data, Mapping):
        _fail(source, [("<top level>", f"expected a mapping of config keys, got {type(data).__name__}")])
    problems: list[tuple[str, str]] = []
    settings: dict[str, Any] = {}
    for key, value in data.items():
        if key == "brokers":
            continue
        value = os.fspath(value) if key == "run.dir" and isinstance(value, os.PathLike) else value
        if not isinstance(key, str) or key not in SCHEMA:
            msg = _suggest(key, _TOP_KNOWN)
            if key in _UNSUPPORTED:
                msg = f"'{key}' is not supported: {_UNSUPPORTED[key]}"
            elif key in _PER_BROKER:
                msg += f"; set it per broker as '{_PER_BROKER[key]}' under 'brokers'"
            elif isinstance(value, Mapping):
                msg += " (keys are flat and dotted, e.g. 'zookeeper.connect: ...')"
            problems.append((str(key), msg))
        elif (err := _check(SCHEMA[key], value)) is not None:
            problems.append((key, err))
        else:
            settings[key] = value
    for spec in SCHEMA.values():
        settings.setdefault(spec.name, spec.default)
    if settings["zookeeper.connect"] is not None:
        if (err := _check_zk_connect(settings["zookeeper.connect"])) is not None:
            problems.append(("zookeeper.connect", err))
    run_dir = _abspath(base, settings["run.dir"])
    settings["run.dir"] = str(run_dir)
    try:
        protocols = parse_protocol_map(settings["listener.security.protocol.map"])
    except ValueError as e:
        problems.append(("listener.security.protocol.map", str(e)))
        protocols = {"PLAINTEXT": "PLAINTEXT"}
    brokers = _parse_brokers(data.get("brokers"), run_dir, base, problems, protocols)
    if not problems:
        _check_combinations(settings, brokers, problems)
    if not settings["kafkasim.offsets.topic.eager.create"] and "kafkasim.offsets.topic.create.grace.ms" in data:
        problems.append(("kafkasim.offsets.topic.create.grace.ms", "has no effect with "
                         "kafkasim.offsets.topic.eager.create: false (the controller creates no offsets topic)"))
    if problems:
        _fail(source, problems)
    return ClusterConfig(source, MappingProxyType(settings), tuple(b for _, b in brokers),
                         MappingProxyType(copy.deepcopy(dict(data))), base)


class _Loader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys instead of keeping the last one."""


def _construct_mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first given on line {seen[key]})", key_node.start_mark)
            seen[key] = key_node.start_mark.line + 1
        except TypeError:  # unhashable key: construct_mapping reports it
            pass
    return loader.construct_mapping(node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_config(path: str | Path) -> ClusterConfig:
    """Read and validate one YAML file; relative paths in it resolve against its directory."""
    source, p = str(path), Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(f"{source}: config file not found ({p.absolute()})", source=source) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{source}: cannot read config file: {exc}", source=source) from exc
    try:
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark, ctx = getattr(exc, "problem_mark", None), getattr(exc, "context_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        what = getattr(exc, "problem", None) or str(exc)
        if getattr(exc, "context", None):
            what += f" ({exc.context}" + (f" started on line {ctx.line + 1})" if ctx else ")")
        raise ConfigError(f"{source}: {where}invalid YAML: {what}", source=source) from exc
    return parse_config(data, source, p.absolute().parent)


def default_config(brokers: int = 3, base_port: int = 19091, run_dir: str | Path = "run") -> ClusterConfig:
    """The lab cluster (as in cluster.yaml); the internal topics' replication factors (and the transaction log's
    min ISR) are capped at ``brokers``."""
    if isinstance(brokers, bool) or not isinstance(brokers, int) or brokers < 1:
        _fail("<config>", [("brokers", f"default_config needs at least 1 broker, got {brokers!r}")])
    data: dict[str, Any] = {"run.dir": str(run_dir)}
    if brokers < SCHEMA["offsets.topic.replication.factor"].default:
        data["offsets.topic.replication.factor"] = brokers
    if brokers < SCHEMA["transaction.state.log.replication.factor"].default:
        data["transaction.state.log.replication.factor"] = brokers
        data["transaction.state.log.min.isr"] = min(brokers, SCHEMA["transaction.state.log.min.isr"].default)
    data["brokers"] = [{"id": i, "host": "127.0.0.1", "port": base_port + i - 1} for i in range(1, brokers + 1)]
    return parse_config(data)
