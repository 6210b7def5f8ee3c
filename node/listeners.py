"""Kafka's listener lists: ``listeners`` and ``advertised.listeners`` values, and the security protocol map.

A list is ``NAME://host:port[,NAME://host:port...]``, as in Kafka's server.properties.  Names are
case-insensitive (kept upper-case, as Kafka's ListenerName normalises them) and unique in a list;
every name must map to a security protocol in ``listener.security.protocol.map``, and kafkasim
speaks only PLAINTEXT.  A client is answered (Metadata, FindCoordinator) with the brokers' advertised
endpoints of the listener its request came in on, so one listener can serve the host and another a
container network.
"""
from __future__ import annotations

import re

Endpoint = tuple[str, str, int]   # (listener name, host, port)

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
SUPPORTED_PROTOCOLS = ("PLAINTEXT",)


def parse_protocol_map(value: str) -> dict[str, str]:
    """``NAME:PROTOCOL[,NAME:PROTOCOL...]`` -> {NAME: PROTOCOL}; ValueError says what is wrong."""
    out: dict[str, str] = {}
    for item in value.split(","):
        name, colon, proto = item.strip().partition(":")
        if not colon or not _NAME.match(name) or not proto:
            raise ValueError(f"{item.strip()!r} is not NAME:PROTOCOL (write INTERNAL:PLAINTEXT)")
        if proto.upper() not in SUPPORTED_PROTOCOLS:
            raise ValueError(f"{item.strip()!r}: only the PLAINTEXT protocol is supported, got {proto!r}")
        if name.upper() in out:
            raise ValueError(f"listener name {name.upper()} is mapped twice")
        out[name.upper()] = proto.upper()
    return out


def parse_listeners(value: str, protocols: dict[str, str]) -> tuple[Endpoint, ...]:
    """``NAME://host:port,...`` -> endpoints; ValueError says what is wrong."""
    out: list[Endpoint] = []
    for item in value.split(","):
        item = item.strip()
        name, sep, rest = item.partition("://")
        if not sep or not _NAME.match(name):
            raise ValueError(f"{item!r} is not of the form NAME://host:port (write PLAINTEXT://127.0.0.1:9092)")
        name = name.upper()
        if name not in protocols:
            raise ValueError(f"listener {name} has no security protocol: add {name}:PLAINTEXT to "
                             f"listener.security.protocol.map")
        host, colon, port = rest.rpartition(":")
        if not colon or not host or any(c.isspace() or c in "[]@/" for c in host):
            raise ValueError(f"{item!r} has no host:port (write {name}://127.0.0.1:9092)")
        if not (port.isascii() and port.isdigit()) or not 1 <= int(port) <= 65535:
            raise ValueError(f"port {port!r} in {item!r} is not an integer in 1..65535")
        if any(e[0] == name for e in out):
            raise ValueError(f"listener name {name} appears twice in {value!r}")
        out.append((name, host, int(port)))
    return tuple(out)


def check_advertised(listeners: tuple[Endpoint, ...], advertised: tuple[Endpoint, ...]) -> str | None:
    """Why ``advertised`` does not fit ``listeners`` (a name no listener has), else None."""
    names = {e[0] for e in listeners}
    extra = [e[0] for e in advertised if e[0] not in names]
    if extra:
        return f"advertises {', '.join(extra)}, which `listeners` does not have ({', '.join(sorted(names))})"
    return None


def format_endpoints(endpoints: tuple[Endpoint, ...]) -> str:
    return ",".join(f"{n}://{h}:{p}" for n, h, p in endpoints)
