"""One broker's Kafka listener: every implemented API's handler behind one dispatcher."""
from __future__ import annotations

from typing import Any, Callable

from listener import admin, configs, controller_admin, data, delete_records, groups, logdirs, meta, producers, txns
from listener.context import ListenerContext
from listener.limits import Limits, Quotas
from listener.protocol import SUPPORTED
from listener.server import Dispatcher, KafkaListener


def make_dispatcher(ctx: ListenerContext, emit: Callable[..., Any]) -> Dispatcher:
    table = {**meta.handlers(ctx), **data.handlers(ctx), **groups.handlers(ctx), **producers.handlers(ctx),
             **configs.handlers(ctx), **admin.handlers(ctx), **controller_admin.handlers(ctx),
             **delete_records.handlers(ctx), **txns.handlers(ctx), **logdirs.handlers(ctx)}
    missing = set(SUPPORTED) - set(table)
    if missing:  # advertise exactly what is implemented
        raise RuntimeError(f"APIs advertised without a handler: {sorted(missing)}")
    return Dispatcher(table, emit, meta.response_version)


def make_listener(ctx: ListenerContext, host: str, port: int, limits: Limits, emit: Callable[..., Any],
                  quotas: Quotas | None = None) -> KafkaListener:
    """One listener; the broker's listeners share ``quotas`` (max.connections and queued.max.requests are
    broker-wide)."""
    return KafkaListener(host, port, make_dispatcher(ctx, emit), limits, emit, quotas)
