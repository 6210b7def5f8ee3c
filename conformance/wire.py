"""Requests and responses on kafka-python's protocol classes (the generated messages the listener serves with).

:func:`encode_request` builds the request message of an API at a version from a dict of its fields (snake_case,
nested dicts and lists of dicts) and frames it with its header: the same correlation id and client id for both
sides, so both get the same bytes.  :class:`Conn` sends frames to one broker and decodes the answer into a plain
dict; a broker that closes the connection instead of answering (Kafka's answer to a request it cannot parse, an
unsupported version for one) is the dict ``{"connection": "closed"}``.
"""
from __future__ import annotations

import socket
import struct
from typing import Any

from listener.protocol import REQUESTS, RESPONSES, build

CLIENT_ID = "kafkasim-conformance"
CLOSED = {"connection": "closed"}
API_VERSIONS = 18


class WireError(Exception):
    pass


def encode_request(api_key: int, version: int, fields: dict[str, Any], correlation_id: int,
                   client_id: str | None = CLIENT_ID) -> bytes:
    cls = REQUESTS[api_key]
    msg = build(cls, fields, version)
    msg.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(msg.encode(header=True, framed=True))


def decode_response(api_key: int, version: int, frame: bytes) -> tuple[int, dict[str, Any]]:
    """(correlation id, the body as a dict) of a response frame without its size prefix.  ApiVersions above
    the broker's maximum is answered with a v0 body (Kafka's rule): decoded as v0 when the asked version does
    not fit."""
    cls = RESPONSES[api_key]
    try:
        msg = cls.decode(frame, version=version, header=True)
    except Exception:
        if api_key != API_VERSIONS:
            raise
        msg = cls.decode(frame, version=0, header=True)
    return msg.header.correlation_id, msg.to_dict()


class Conn:
    """One connection to one broker; requests one at a time (or sent ahead: :meth:`send`, :meth:`receive`)."""

    def __init__(self, host: str, port: int, timeout_s: float = 30.0) -> None:
        self.addr = (host, port)
        self.sock = socket.create_connection(self.addr, timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.closed = False

    def send(self, frame: bytes) -> None:
        self.sock.sendall(frame)

    def _exact(self, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def receive(self) -> bytes | None:
        """One response frame (without its size), or None when the broker closed the connection."""
        head = self._exact(4)
        if head is None:
            self.closed = True
            return None
        (size,) = struct.unpack(">i", head)
        body = self._exact(size)
        if body is None:
            self.closed = True
        return body

    def request(self, api_key: int, version: int, fields: dict[str, Any], correlation_id: int = 1,
                client_id: str | None = CLIENT_ID, frame: bytes | None = None) -> dict[str, Any]:
        self.send(frame if frame is not None else encode_request(api_key, version, fields, correlation_id, client_id))
        got = self.receive()
        if got is None:
            return dict(CLOSED)
        corr, body = decode_response(api_key, version, got)
        if corr != correlation_id:
            raise WireError(f"{self.addr}: correlation id {corr} answered request {correlation_id}")
        return body

    def close(self) -> None:
        try:
            self.sock.close()
        finally:
            self.closed = True
