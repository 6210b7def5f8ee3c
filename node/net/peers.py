"""How a broker dials another broker over gRPC.

gRPC shares one connection (a "subchannel") between every channel a process opens to the same address,
and with it the reconnect backoff: after a peer has been down for a while, a new channel to it waits out
the backoff grown by the failed attempts (1 s, times 1.6 each time, up to 120 s), so a controller could
not reach a restarted broker for seconds.  Kafka's NetworkClient keeps a connection per client and
backs off from ``reconnect.backoff.ms`` (50) to ``reconnect.backoff.max.ms`` (1000); broker-to-broker
channels here do the same: their own connection, and a backoff in Kafka's bounds.

A client that replaces its channel to cut a call short (a follower's fetcher: closing a channel cancels its
calls) names its connection (``share``): its channels to one address then share one connection and its
backoff, which outlives any one channel, so the replacement costs no new TCP and HTTP/2 set-up.  Closing
a channel cancels only its own calls; the connection lasts while any channel of its name is open.  Channels
of other names, or of none, never share it.
"""
from __future__ import annotations

import grpc

RECONNECT_BACKOFF_MS = 50        # Kafka's reconnect.backoff.ms default
RECONNECT_BACKOFF_MAX_MS = 1000  # Kafka's reconnect.backoff.max.ms default

_BACKOFF_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", RECONNECT_BACKOFF_MS),
    ("grpc.max_reconnect_backoff_ms", RECONNECT_BACKOFF_MAX_MS),
)
PEER_CHANNEL_OPTIONS = (("grpc.use_local_subchannel_pool", 1),) + _BACKOFF_OPTIONS


def peer_channel(target: str, share: str | None = None) -> grpc.Channel:
    """A channel to another broker at ``target``, with a connection and a backoff of its own; with ``share``, the
    connection (and its backoff) of every channel this process opened to ``target`` under the same name."""
    if share is None:
        return grpc.insecure_channel(target, options=PEER_CHANNEL_OPTIONS)
    return grpc.insecure_channel(target, options=_BACKOFF_OPTIONS + (("kafkasim.connection", share),))


def connecting(channel: grpc.Channel) -> grpc.Channel:
    """``channel``, its connection started now (one attempt: nothing keeps retrying it while it is unused; an idle
    channel holds no connection until its first call otherwise)."""
    channel.subscribe(_ignore, try_to_connect=True)
    channel.unsubscribe(_ignore)
    return channel


def _ignore(_state: grpc.ChannelConnectivity) -> None:
    pass
