"""How a broker dials another broker over gRPC.

gRPC shares one connection (a "subchannel") between every channel a process opens to the same address,
and with it the reconnect backoff: after a peer has been down for a while, a new channel to it waits out
the backoff grown by the failed attempts (1 s, times 1.6 each time, up to 120 s), so a controller could
not reach a restarted broker for seconds.  Kafka's NetworkClient keeps a connection per client and
backs off from ``reconnect.backoff.ms`` (50) to ``reconnect.backoff.max.ms`` (1000); broker-to-broker
channels here do the same: their own connection, and a backoff in Kafka's bounds.
"""
from __future__ import annotations

import grpc

RECONNECT_BACKOFF_MS = 50        # Kafka's reconnect.backoff.ms default
RECONNECT_BACKOFF_MAX_MS = 1000  # Kafka's reconnect.backoff.max.ms default

PEER_CHANNEL_OPTIONS = (
    ("grpc.use_local_subchannel_pool", 1),
    ("grpc.initial_reconnect_backoff_ms", RECONNECT_BACKOFF_MS),
    ("grpc.max_reconnect_backoff_ms", RECONNECT_BACKOFF_MAX_MS),
)


def peer_channel(target: str) -> grpc.Channel:
    """A channel to another broker at ``target``, with a connection and a backoff of its own."""
    return grpc.insecure_channel(target, options=PEER_CHANNEL_OPTIONS)
