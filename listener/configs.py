"""DescribeConfigs on the Kafka listener: topic configs (the topic's overrides over the broker's
defaults, as zk/admin.py knows them) and this broker's own configs (cluster.yaml)."""
from __future__ import annotations

from typing import Any

from listener.context import ListenerContext
from listener.protocol import Request
from listener.server import Connection
from kafkacommon import errors
from kafkacommon.topic_config import TOPIC_KEYS

TOPIC, BROKER = 2, 4
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5

# a topic config -> (the broker key its default comes from, or None, and the fixed default): kafkacommon/topic_config.py
TOPIC_DEFAULTS: dict[str, tuple[str | None, Any]] = {k.name: (k.broker_key, k.default) for k in TOPIC_KEYS.values()}


def text(value: Any) -> str | None:
    if value is None:
        return None
    return str(value).lower() if isinstance(value, bool) else str(value)


def handlers(ctx: ListenerContext) -> dict[int, Any]:
    broker_setting, broker_settings = ctx.broker_setting, ctx.broker_settings

    def entry(name: str, value: Any, source: int, synonyms: bool) -> dict[str, Any]:
        return dict(name=name, value=text(value), read_only=source != DYNAMIC_TOPIC_CONFIG, config_source=source,
                    is_default=source == DEFAULT_CONFIG, is_sensitive=False,
                    synonyms=[dict(name=name, value=text(value), source=source)] if synonyms else [],
                    config_type=0, documentation=None)

    def topic_configs(name: str, keys: list[str] | None, synonyms: bool) -> dict[str, Any]:
        if name not in ctx.state.topic_partitions:
            return dict(error_code=errors.UNKNOWN_TOPIC_OR_PARTITION, error_message=f"unknown topic {name!r}",
                        configs=[])
        overrides = ctx.topic_config(name)
        out = []
        for key, (broker_key, kafka_default) in sorted(TOPIC_DEFAULTS.items()):
            if keys is not None and key not in keys:
                continue
            if key in overrides:
                out.append(entry(key, overrides[key], DYNAMIC_TOPIC_CONFIG, synonyms))
            elif broker_key is not None:
                value, explicit = broker_setting(broker_key)
                out.append(entry(key, value, STATIC_BROKER_CONFIG if explicit else DEFAULT_CONFIG, synonyms))
            else:
                out.append(entry(key, kafka_default, DEFAULT_CONFIG, synonyms))
        return dict(error_code=errors.NONE, error_message=None, configs=out)

    def broker_configs(name: str, keys: list[str] | None, synonyms: bool) -> dict[str, Any]:
        if name not in ("", str(ctx.broker_id)):
            return dict(error_code=errors.INVALID_REQUEST, error_message=f"this is broker {ctx.broker_id}, not "
                        f"{name!r}", configs=[])
        out = [entry(k, v, STATIC_BROKER_CONFIG if explicit else DEFAULT_CONFIG, synonyms)
               for k, v, explicit in broker_settings() if keys is None or k in keys]
        return dict(error_code=errors.NONE, error_message=None, configs=out)

    async def describe_configs(req: Request, conn: Connection) -> dict[str, Any]:
        synonyms = bool(req.body.include_synonyms) if req.api_version >= 1 else False
        results = []
        for r in req.body.resources:
            keys = None if r.configuration_keys is None else list(r.configuration_keys)
            if r.resource_type == TOPIC:
                res = await ctx.blocking(topic_configs, r.resource_name, keys, synonyms)
            elif r.resource_type == BROKER:
                res = broker_configs(r.resource_name, keys, synonyms)
            else:
                res = dict(error_code=errors.INVALID_REQUEST, error_message=f"resource type {r.resource_type} is "
                           f"not supported", configs=[])
            results.append(dict(resource_type=r.resource_type, resource_name=r.resource_name, **res))
        return dict(throttle_time_ms=0, results=results)

    return {32: describe_configs}
