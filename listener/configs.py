"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs on the Kafka listener, as Kafka 2.8's
ConfigHelper and ZkAdminManager serve them (any broker answers).

A topic's configs are its overrides (``/config/topics/<t>``) over the broker's defaults; each entry says
where its value comes from (``config_source``) and, asked for, the whole chain of synonyms (the topic's
override, then the broker key's dynamic per-broker, dynamic cluster-wide, static and default values).
A change writes the resource's whole new config to ZooKeeper with a change notification under
``/config/changes`` (zk/admin.py), which every broker then applies (node/shells/config_listener.py).
Broker resources are this broker's (``1``) or the cluster-wide defaults (``""``): node/dynamic_config.py
says which keys may change at run time.
"""
from __future__ import annotations

from typing import Any

from listener.context import ListenerContext
from listener.protocol import Request
from listener.server import Connection
from kafkacommon import errors
from kafkacommon.topic_config import (TOPIC_KEYS, ConfigConflict, ConfigRefused, ConfigValueError, UnknownTopicConfig,
                                      log_config, to_string, validate)
from zk.admin import TopicError, validate_name
from zk.errors import CONNECTION_ERRORS, ZkError

#: what a resource's ZooKeeper I/O may raise: that resource gets an error, the others their answers (Kafka's
#: ApiError.fromThrowable: UNKNOWN_SERVER_ERROR for what is not an ApiException)
IO_ERRORS = (ZkError, *CONNECTION_ERRORS, ValueError)


def io_error(e: BaseException) -> tuple[int, str]:
    if isinstance(e, TopicError):
        return e.code, str(e)
    return errors.UNKNOWN_SERVER_ERROR, f"{type(e).__name__}: {e}"

TOPIC, BROKER = 2, 4
TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5           # DescribeConfigsResponse.ConfigSource
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3    # AlterConfigOp.OpType
OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}
CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7}


class ResourceError(Exception):
    def __init__(self, code: int, message: str | None) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def resource_label(kind: int, name: str) -> str:
    """Kafka's ConfigResource.toString, as its error messages quote it."""
    return f"ConfigResource(type={'TOPIC' if kind == TOPIC else 'BROKER' if kind == BROKER else kind}, name='{name}')"


def topic_entries(ctx: ListenerContext, overrides: dict, keys: list[str] | None, synonyms: bool,
                  documentation: bool) -> list[dict[str, Any]]:
    """ConfigHelper.createTopicConfigEntry for every topic config (or ``keys``), sorted by name."""
    broker = ctx.broker_config
    lc = log_config(overrides, broker.lookup)
    out = []
    for name, spec in sorted(TOPIC_KEYS.items()):
        if keys and name not in keys:
            continue
        value = to_string(name, getattr(lc, name.replace(".", "_")) if name != "cleanup.policy"
                          else tuple(x for x in lc.cleanup_policy.split(",") if x))
        chain = [dict(name=n, value=v, source=src) for n, v, src in broker.synonyms(spec.server_key)]
        if name in overrides:
            chain.insert(0, dict(name=name, value=value, source=TOPIC_CONFIG))
        out.append(dict(name=name, value=value, read_only=False, config_source=chain[0]["source"] if chain
                        else DEFAULT_CONFIG, is_default=not chain or chain[0]["source"] == DEFAULT_CONFIG,
                        is_sensitive=False, synonyms=chain if synonyms else [], config_type=CONFIG_TYPES[spec.type],
                        documentation=spec.doc if documentation else None))
    return out


def broker_id_of(ctx: ListenerContext, name: str, describe: bool) -> bool:
    """A BROKER resource's name: -> per-broker (this broker) or False (the cluster-wide defaults, "")."""
    if not name:
        return False
    try:
        bid = int(name)
    except ValueError:
        raise ResourceError(errors.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}") from None
    if bid != ctx.broker_id:
        raise ResourceError(errors.INVALID_REQUEST, f"Unexpected broker id, expected {ctx.broker_id}"
                            f"{' or empty string' if describe else ''}, but received {name}")
    return True


def handlers(ctx: ListenerContext) -> dict[int, Any]:
    def describe_topic(name: str, keys: list[str] | None, synonyms: bool, docs: bool) -> list[dict[str, Any]]:
        try:
            validate_name(name)
        except TopicError as e:
            raise ResourceError(e.code, str(e)) from None
        if name not in ctx.state.topic_partitions:
            raise ResourceError(errors.UNKNOWN_TOPIC_OR_PARTITION, None)
        return topic_entries(ctx, ctx.zk.read_entity_config(f"topics/{name}"), keys, synonyms, docs)

    def describe_broker(name: str, keys: list[str] | None, synonyms: bool, docs: bool) -> list[dict[str, Any]]:
        per_broker = broker_id_of(ctx, name, describe=True)
        return [dict(name=e["name"], value=e["value"], read_only=e["read_only"], config_source=e["source"],
                     is_default=e["source"] == DEFAULT_CONFIG, is_sensitive=False,
                     synonyms=[dict(name=n, value=v, source=s) for n, v, s in e["synonyms"]] if synonyms else [],
                     config_type=CONFIG_TYPES.get(e["type"], 0), documentation=None)
                for e in ctx.broker_config.describe(per_broker) if not keys or e["name"] in keys]

    def describe_one(r: Any, synonyms: bool, docs: bool) -> dict[str, Any]:
        keys = list(r.configuration_keys) if r.configuration_keys else None
        try:
            if r.resource_type == TOPIC:
                configs = describe_topic(r.resource_name, keys, synonyms, docs)
            elif r.resource_type == BROKER:
                configs = describe_broker(r.resource_name, keys, synonyms, docs)
            else:
                raise ResourceError(errors.INVALID_REQUEST, f"kafkasim describes TOPIC and BROKER resources, "
                                                            f"not type {r.resource_type}")
        except ResourceError as e:
            # Kafka 2.8.2 answers an empty message, never a null one (conformance DescribeConfigs.*)
            return dict(error_code=e.code, error_message=e.message or "", configs=[])
        except IO_ERRORS as e:
            code, msg = io_error(e)
            return dict(error_code=code, error_message=msg or "", configs=[])
        return dict(error_code=errors.NONE, error_message="", configs=configs)

    async def describe_configs(req: Request, conn: Connection) -> dict[str, Any]:
        v = req.api_version
        synonyms = bool(req.body.include_synonyms) if v >= 1 else False
        docs = bool(req.body.include_documentation) if v >= 3 else False
        results = []
        for r in req.body.resources or []:
            res = await ctx.blocking(describe_one, r, synonyms, docs)
            results.append(dict(resource_type=r.resource_type, resource_name=r.resource_name, **res))
        return dict(throttle_time_ms=0, results=results)

    # ------------------------------------------------------------------ changes

    def change_topic(name: str, new: dict[str, str], validate_only: bool) -> None:
        """ZkAdminManager.alterTopicConfigs: the topic's whole new config, checked and (unless
        ``validate_only``) written with its change notification."""
        if name not in ctx.state.topic_partitions:
            raise ResourceError(errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        try:
            validate_name(name)
            validate(new)
        except TopicError as e:
            raise ResourceError(e.code, str(e)) from None
        except ConfigValueError as e:
            raise ResourceError(errors.INVALID_REQUEST, f"Invalid config value for resource "
                                                        f"{resource_label(TOPIC, name)}: {e}") from None
        except (UnknownTopicConfig, ConfigConflict, ConfigRefused) as e:
            raise ResourceError(errors.INVALID_CONFIG, str(e)) from None
        if not validate_only:
            ctx.zk.change_entity_config(f"topics/{name}", new)

    def change_broker(per_broker: bool, new: dict[str, str], validate_only: bool) -> None:
        try:
            ctx.broker_config.check(new, per_broker)
        except ValueError as e:
            code = getattr(e, "code", errors.INVALID_REQUEST)
            msg = str(e)
            if code == errors.INVALID_REQUEST:
                label = resource_label(BROKER, str(ctx.broker_id) if per_broker else "")
                msg = f"Invalid config value for resource {label}: {msg}"
            raise ResourceError(code, msg) from None
        if not validate_only:
            entity = str(ctx.broker_id) if per_broker else "<default>"
            ctx.zk.change_entity_config(f"brokers/{entity}", new)

    def alter_one(r: Any, validate_only: bool) -> tuple[int, str | None]:
        """AlterConfigs: the resource's whole config replaced."""
        try:
            nulls = [c.name for c in r.configs if c.value is None]
            if nulls:
                raise ResourceError(errors.INVALID_REQUEST, f"Null value not supported for : {','.join(nulls)}")
            new = {c.name: c.value for c in r.configs}
            if r.resource_type == TOPIC:
                change_topic(r.resource_name, new, validate_only)
            elif r.resource_type == BROKER:
                change_broker(broker_id_of(ctx, r.resource_name, describe=False), new, validate_only)
            else:
                raise ResourceError(errors.INVALID_REQUEST, f"AlterConfigs is only supported for topics and brokers, "
                                                            f"but resource type is {r.resource_type}")
        except ResourceError as e:
            return e.code, e.message
        except IO_ERRORS as e:
            return io_error(e)
        return errors.NONE, None

    def incremental_one(r: Any, validate_only: bool) -> tuple[int, str | None]:
        """IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on the resource's current config."""
        try:
            names = [c.name for c in r.configs]
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise ResourceError(errors.INVALID_REQUEST, f"Error due to duplicate config keys : {','.join(dupes)}")
            nulls = [f"{OP_NAMES.get(c.config_operation, c.config_operation)}:{c.name}" for c in r.configs
                     if c.value is None and c.config_operation != DELETE]
            if nulls:
                raise ResourceError(errors.INVALID_REQUEST, f"Null value not supported for : {','.join(nulls)}")
            if r.resource_type == TOPIC:
                current = ctx.zk.read_entity_config(f"topics/{r.resource_name}")
                change_topic(r.resource_name, apply_ops(current, r.configs, _topic_list_default), validate_only)
            elif r.resource_type == BROKER:
                per_broker = broker_id_of(ctx, r.resource_name, describe=False)
                entity = str(ctx.broker_id) if per_broker else "<default>"
                current = ctx.zk.read_entity_config(f"brokers/{entity}")
                change_broker(per_broker, apply_ops(current, r.configs, _broker_list_default), validate_only)
            else:
                raise ResourceError(errors.INVALID_REQUEST, f"IncrementalAlterConfigs is only supported for topics "
                                                            f"and brokers, but resource type is {r.resource_type}")
        except ResourceError as e:
            return e.code, e.message
        except IO_ERRORS as e:
            return io_error(e)
        return errors.NONE, None

    async def alter_configs(req: Request, conn: Connection) -> dict[str, Any]:
        out = []
        for r in req.body.resources or []:
            code, msg = await ctx.blocking(alter_one, r, bool(req.body.validate_only))
            out.append(dict(error_code=code, error_message=msg, resource_type=r.resource_type,
                            resource_name=r.resource_name))
        return dict(throttle_time_ms=0, responses=out)

    async def incremental_alter_configs(req: Request, conn: Connection) -> dict[str, Any]:
        out = []
        for r in req.body.resources or []:
            code, msg = await ctx.blocking(incremental_one, r, bool(req.body.validate_only))
            out.append(dict(error_code=code, error_message=msg, resource_type=r.resource_type,
                            resource_name=r.resource_name))
        return dict(throttle_time_ms=0, responses=out)

    return {32: describe_configs, 33: alter_configs, 44: incremental_alter_configs}


def _topic_list_default(name: str) -> str | None:
    """A topic config's Kafka default as a list string (None: not a list config; KeyError: unknown)."""
    spec = TOPIC_KEYS.get(name)
    if spec is None:
        raise ResourceError(errors.INVALID_CONFIG, f"Unknown topic config name: {name}")
    return ",".join(spec.default) if spec.type == "list" else None


def _broker_list_default(name: str) -> str | None:
    if name == "log.cleanup.policy":
        return "delete"
    return None


def apply_ops(current: dict[str, str], ops: Any, list_default: Any) -> dict[str, str]:
    """ZkAdminManager.prepareIncrementalConfigs: each op on the resource's stored config, in order."""
    props = dict(current)
    for op in ops:
        name, kind, value = op.name, op.config_operation, op.value
        if kind == SET:
            props[name] = value
        elif kind == DELETE:
            props.pop(name, None)
        elif kind in (APPEND, SUBTRACT):
            default = list_default(name)
            if default is None:
                verb = "append" if kind == APPEND else "subtract"
                raise ResourceError(errors.INVALID_REQUEST, f"Config value {verb} is not allowed for config key: {name}")
            old = props.get(name, default).split(",")
            new = value.split(",")
            if kind == APPEND:
                props[name] = ",".join(old + new)
            else:
                for x in new:
                    if x in old:
                        old.remove(x)
                props[name] = ",".join(old)
        else:
            raise ResourceError(errors.INVALID_REQUEST, f"Unknown config operation {kind} for {name}")
    return props
