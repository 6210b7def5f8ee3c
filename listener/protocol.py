"""The server side of Kafka's wire protocol, on kafka-python's schema-generated messages.

kafka-python (pinned) ships Kafka's JSON message specs and generates
encoders and decoders for every version of every API, flexible versions and
tagged fields included, but only for the client side.  This module walks its
request and response classes to build the ``api_key -> (request, response)``
registry a server needs, reads request headers (v1 or v2 by the API
version's flexibility) and frames responses (header v0 or v1; ApiVersions
always v0).  Handlers return plain dicts; :func:`build` turns them into the
generated data classes, so no field layout is written by hand here.
"""
from __future__ import annotations

import importlib
import pkgutil
import re
import struct
from dataclasses import dataclass
from typing import Any, Callable

import kafka.errors as kerrors
import kafka.protocol as _kp
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.schemas.fields.codecs.encode_buffer import EncodeBufferPool

from kafkacommon import errors

_HEAD = struct.Struct(">hhi")  # request_api_key, request_api_version, correlation_id


def _walk() -> tuple[dict[int, type], dict[int, type]]:
    requests: dict[int, type] = {}
    responses: dict[int, type] = {}
    for info in pkgutil.walk_packages(_kp.__path__, _kp.__name__ + "."):
        if ".old" in info.name or info.name.endswith((".generate_stubs", ".parser")):
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if (isinstance(obj, type) and issubclass(obj, ApiMessage) and obj is not ApiMessage
                    and getattr(obj, "_json", None) is not None and obj._class_version is None):
                (requests if obj.is_request() else responses)[obj.API_KEY] = obj
    return requests, responses


REQUESTS, RESPONSES = _walk()


# Kafka 2.8's versions of the APIs this listener implements: exactly what ApiVersions advertises.
SUPPORTED: dict[int, tuple[int, int]] = {
    0: (3, 9),    # Produce
    1: (4, 12),   # Fetch
    2: (1, 6),    # ListOffsets
    3: (0, 11),   # Metadata
    8: (2, 8),    # OffsetCommit
    9: (1, 7),    # OffsetFetch
    10: (0, 3),   # FindCoordinator
    11: (0, 7),   # JoinGroup
    12: (0, 4),   # Heartbeat
    13: (0, 4),   # LeaveGroup
    14: (0, 5),   # SyncGroup
    15: (0, 5),   # DescribeGroups
    16: (0, 4),   # ListGroups
    18: (0, 3),   # ApiVersions
    19: (2, 7),   # CreateTopics
    20: (1, 6),   # DeleteTopics
    21: (0, 2),   # DeleteRecords (the leader moves its log start offset; waits for the low watermark)
    22: (0, 4),   # InitProducerId (idempotent and transactional producers)
    23: (0, 4),   # OffsetForLeaderEpoch (consumers validating positions after a leader change)
    24: (0, 3),   # AddPartitionsToTxn
    25: (0, 3),   # AddOffsetsToTxn
    26: (0, 3),   # EndTxn
    28: (0, 3),   # TxnOffsetCommit
    32: (1, 4),   # DescribeConfigs (topics, this broker, the cluster-wide broker defaults)
    33: (0, 2),   # AlterConfigs
    35: (1, 2),   # DescribeLogDirs (Kafka 2.8: 0-2; v0, the same as v1, is not in kafka-python's specs)
    37: (0, 3),   # CreatePartitions (the controller)
    42: (0, 2),   # DeleteGroups
    43: (0, 2),   # ElectLeaders (the controller: preferred and unclean)
    44: (0, 1),   # IncrementalAlterConfigs
    45: (0, 0),   # AlterPartitionReassignments (the controller)
    46: (0, 0),   # ListPartitionReassignments (the controller)
    47: (0, 0),   # OffsetDelete
}
API_VERSIONS = 18


def api_name(api_key: int) -> str:
    cls = REQUESTS.get(api_key)
    return cls.name.removesuffix("Request") if cls is not None else f"Unknown({api_key})"


def error_name(code: int) -> str | None:
    """Kafka's name of an error code, as the gRPC path's events name it (kafkacommon.errors), else as
    kafka-python does; None for no error."""
    if code == 0:
        return None
    ours = errors.name(code)
    if not ours.startswith("UNKNOWN("):
        return ours
    return getattr(kerrors.for_code(code), "message", None) or ours


class BadRequest(Exception):
    """A request that cannot be answered: Kafka closes the connection."""

    def __init__(self, reason: str, api_key: int = -1, api_version: int = -1, correlation_id: int = -1,
                 client_id: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id


@dataclass
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any                       # the decoded request message; None for ApiVersions above our maximum
    # called once the request is done with the broker's state (listener.server: the next request
    # on the connection may start); a Produce calls it once appended, before waiting for acks
    applied: Callable[[], None] = lambda: None

    @property
    def api(self) -> str:
        return api_name(self.api_key)


def peek_header(frame: bytes | memoryview) -> tuple[int, int, int]:
    """(api key, api version, correlation id): the fixed start of every request header."""
    if len(frame) < _HEAD.size:
        raise BadRequest(f"request of {len(frame)} bytes is shorter than a request header")
    return _HEAD.unpack_from(frame, 0)


def parse_request(frame: bytes) -> Request:
    """One request frame (without its size prefix) -> :class:`Request`.

    Raises :class:`BadRequest` for an unknown API, an unsupported version (but
    ApiVersions above our maximum, which Kafka answers with a v0 body), or a
    header or body that does not decode."""
    api_key, version, correlation_id = peek_header(frame)
    cls = REQUESTS.get(api_key)
    if cls is None or api_key not in SUPPORTED:
        raise BadRequest(f"unsupported API key {api_key}", api_key, version, correlation_id)
    lo, hi = SUPPORTED[api_key]
    if api_key == API_VERSIONS and version > hi:
        # the header is v2 for every flexible version; the body is unknown to us: not decoded
        client_id = _client_id(frame)
        return Request(api_key, version, correlation_id, client_id, None)
    if not lo <= version <= hi:
        raise BadRequest(f"{api_name(api_key)} v{version} is not supported (v{lo}-v{hi})", api_key, version,
                         correlation_id, _client_id(frame))
    try:
        client_id, msg = _decode(cls, frame, version)
    except Exception as e:  # any decoding failure of the generated codec: the request is garbage
        raise BadRequest(f"{api_name(api_key)} v{version} does not decode: {e!r}", api_key, version,
                         correlation_id, _client_id(frame)) from None
    null = _null_where_not_nullable(msg, version)
    if null is not None:   # Kafka's generated reader refuses it: the request does not parse
        raise BadRequest(f"{api_name(api_key)} v{version}: non-nullable field {null} was serialized as null",
                         api_key, version, correlation_id, client_id)
    return Request(api_key, version, correlation_id, client_id, msg)


_I16 = struct.Struct(">h")
_BODY_DECODERS: dict[tuple[type, int], tuple[bool, Callable[[Any, int], tuple[Any, int]]]] = {}


def _decode(cls: type, frame: bytes, version: int) -> tuple[str | None, Any]:
    """(client id, body) of a request frame.  The header is read here in its usual shape (a client id that fits
    in the frame and, in header v2, no tagged fields), and the body by the generated decoder of ``cls`` and
    ``version`` from where the header ends: what kafka-python's ``decode(header=True)`` reads, without its copy
    of the frame into a BytesIO for the header.  Any other header goes through kafka-python's own path (the
    body's ``header`` is then set; the fast path leaves it None: the request's fields carry it)."""
    entry = _BODY_DECODERS.get((cls, version))
    if entry is None:
        flexible = bool(cls.flexible_version_q(version))
        entry = _BODY_DECODERS[(cls, version)] = (flexible, cls._struct.compiled_decode_from(
            version, compact=flexible, tagged=flexible, data_class=cls[None]))
    flexible, decode_body = entry
    size = len(frame)
    if size >= _HEAD.size + 2:
        (n,) = _I16.unpack_from(frame, _HEAD.size)
        pos = _HEAD.size + 2
        if n < 0 or pos + n <= size:
            client_id = None if n < 0 else str(frame[pos:pos + n], "utf-8")
            pos += max(n, 0)
            if not flexible or (pos < size and frame[pos] == 0):   # header v2: no tagged fields
                body, _ = decode_body(memoryview(frame), pos + flexible)
                body._header = None
                return client_id, body
    msg = cls.decode(frame, version=version, header=True)
    return msg.header.client_id, msg


def _null_where_not_nullable(obj: Any, version: int, path: str = "") -> str | None:
    """The first string or array field (by its path) that decoded as null where ``version`` does not allow it
    (kafka-python's decoder takes a null length anywhere), else None."""
    return _first_null(obj, _null_checks(type(obj), version), path)


def _first_null(obj: Any, checks: tuple, path: str) -> str | None:
    for name, refuse_null, array, nested in checks:
        value = getattr(obj, name, None)
        if value is None:
            if refuse_null:
                return path + name
        elif nested is not None:
            if array:
                for i, item in enumerate(value):
                    found = _first_null(item, nested, f"{path}{name}[{i}].")
                    if found is not None:
                        return found
            else:
                found = _first_null(value, nested, f"{path}{name}.")
                if found is not None:
                    return found
    return None


_CHECKS: dict[tuple[type, int], tuple] = {}


def _null_checks(cls: type, version: int) -> tuple:
    """What :func:`_first_null` looks at in a ``cls`` of ``version``, in field order, worked out once per class
    and version: (field, null refused, an array, the nested struct's checks or None when nothing in it can be
    refused).  A field that can be neither refused nor hold a refusal is left out."""
    key = (cls, version)
    checks = _CHECKS.get(key)
    if checks is None:
        rows = []
        for name, f in cls._struct.fields.items():
            if not f.for_version_q(version) or f.tagged_field_q(version):
                continue
            refuse_null = (f.is_array() or f.type_str in ("string", "bytes")) and not f.nullable_for_version_q(version)
            nested = None
            if f.is_struct_array() or f.is_struct():
                nested = _null_checks(f.data_class, version) or None
            if refuse_null or nested is not None:
                rows.append((name, refuse_null, f.is_struct_array(), nested))
        checks = _CHECKS[key] = tuple(rows)
    return checks


def _client_id(frame: bytes) -> str | None:
    """The header's client id (a non-compact nullable string in header v1 and v2), if readable."""
    try:
        (n,) = struct.unpack_from(">h", frame, _HEAD.size)
        if n < 0:
            return None
        return bytes(frame[_HEAD.size + 2:_HEAD.size + 2 + n]).decode("utf-8", "replace")
    except struct.error:
        return None


def build(cls: type, values: dict[str, Any], version: int | None = None) -> Any:
    """A generated data class from a dict of its fields (snake_case), nested dicts and lists
    of dicts becoming the nested structs.  Unknown field names raise ValueError."""
    nested = _nested_fields(cls)
    kwargs: dict[str, Any] = {}
    for name, value in values.items():
        kind = nested.get(name)
        if kind is None:
            raise ValueError(f"{cls.__name__} has no field {name!r}")
        if value is not None and kind is not _PLAIN:
            sub, array = kind
            value = [build(sub, x) for x in value] if array else build(sub, value)
        kwargs[name] = value
    if version is not None:
        return cls(version=version, **kwargs)
    return cls(**kwargs)


_PLAIN = ()   # a field that is not a struct
_NESTED: dict[type, dict[str, Any]] = {}


def _nested_fields(cls: type) -> dict[str, Any]:
    """Each field of ``cls``: ``_PLAIN``, or (the nested struct's class, an array of them), worked out once."""
    kinds = _NESTED.get(cls)
    if kinds is None:
        kinds = _NESTED[cls] = {
            name: (f.data_class, f.is_struct_array()) if f.is_struct() or f.is_struct_array() else _PLAIN
            for name, f in cls._struct.fields.items()}
    return kinds


def encode_response(req: Request, values: dict[str, Any], version: int | None = None) -> bytes | list:
    """The framed response (size, header, body) to ``req``; ``version`` overrides the body's version
    (ApiVersions answers an unsupported version with a v0 body).

    Large byte fields (a Fetch's records) are not handed to the generated encoder, which copies
    them byte-slowly (about 10 ms per MiB).  Each is replaced by a 16-byte placeholder, and the
    response is encoded twice, with placeholders whose every byte differs between the two
    encodings.  The two encodings are equal everywhere else, so the placeholders are exactly the
    bytes where they differ: where a field goes is found by position, never by looking for a
    pattern in the bytes, and no content of a record (which is in neither encoding when it is
    large, and the same in both when it is not) can change how a response is framed.  Each
    placeholder is then replaced by its field with the length prefix re-encoded for its length.
    The frame is then a list of pieces (written in order, never joined; a consumer Fetch's records
    left in the segment files, an object whose ``stays_in_file`` is true, go with sendfile):
    :func:`joined`."""
    v = req.api_version if version is None else version
    cls = RESPONSES[req.api_key]
    if req.api_key not in _BLOB_APIS:   # no byte field to park: walking a large answer (Metadata) costs for nothing
        return _encode(cls, values, v, req.correlation_id)
    blobs: list[bytes | memoryview] = []
    parked = _park_blobs(values, blobs)
    if not blobs:
        return _encode(cls, parked, v, req.correlation_id)
    first = _encode(cls, _placeheld(parked, 0x00), v, req.correlation_id)
    second = _encode(cls, _placeheld(parked, 0xFF), v, req.correlation_id)
    return _splice(first, second, blobs, cls.flexible_version_q(v))


def _encode(cls: type, values: dict[str, Any], version: int, correlation_id: int) -> bytes:
    """The framed response: its size, the response header and the body from kafka-python's generated encoder
    for ``cls`` and ``version``.  The header (the correlation id, and in header v1 an empty tagged-field section)
    is packed here, without the header object and its generic struct encoder that ``encode(header=True)`` goes
    through; a class that encodes its own header (ApiVersions: always v0) or its own body keeps that path."""
    resp = build(cls, values, version)
    entry = _BODY_ENCODERS.get((cls, version))
    if entry is None:
        entry = _BODY_ENCODERS[(cls, version)] = _body_encoder(cls, version)
    header_tags, encode_body = entry
    if encode_body is None:
        resp.with_header(correlation_id=correlation_id)
        return bytes(resp.encode(header=True, framed=True))
    with EncodeBufferPool.acquire() as out:
        out.ensure(9)
        _HEADER.pack_into(out.buf, 4, correlation_id)
        if header_tags:
            out.buf[8] = 0
            out.pos = 9
        else:
            out.pos = 8
        encode_body(resp, out)
        _SIZE.pack_into(out.buf, 0, out.pos - 4)
        return bytes(out.result())


_HEADER = _SIZE = struct.Struct(">i")
_BODY_ENCODERS: dict[tuple[type, int], tuple[bool, Callable[[Any, Any], None] | None]] = {}


def _body_encoder(cls: type, version: int) -> tuple[bool, Callable[[Any, Any], None] | None]:
    """(whether the response header carries tagged fields, the body's generated encoder), or (False, None) for a
    class that overrides how it encodes (its header or its body): kafka-python's ``encode`` then does it all."""
    if (cls.encode is not ApiMessage.encode or cls.encode_header is not ApiMessage.encode_header
            or cls.encode_header_into is not ApiMessage.encode_header_into):
        return False, None
    flexible = bool(cls.flexible_version_q(version))
    return flexible, cls._struct.compiled_encode_into(version, compact=flexible, tagged=flexible)


def stays_in_file(value: Any) -> bool:
    """Whether ``value`` is records left in their segment files (the broker's
    ``node.storage.file_records.FileRecords``, known by its ``stays_in_file`` mark, so the listener imports
    nothing of the broker's storage): ``slices`` of (file, position, size), ``read()``, ``close()``."""
    return getattr(value, "stays_in_file", False)


_BLOB_MIN = 1 << 15
#: the responses with byte fields that can be large: Fetch's records (and records left in their files), and the
#: group APIs' member metadata and assignments (JoinGroup, SyncGroup, DescribeGroups)
_BLOB_APIS = frozenset({1, 11, 14, 15})
_HOLDER = 16        # a placeholder's length


class _Parked:
    """Where a large byte field was taken out of a response's values: its index in the blob list."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


def _park_blobs(values: Any, blobs: list) -> Any:
    if isinstance(values, dict):
        return {k: _park_blobs(v, blobs) for k, v in values.items()}
    if isinstance(values, list):
        return [_park_blobs(v, blobs) for v in values]
    in_file = getattr(values, "stays_in_file", False)   # node.storage.file_records.FileRecords
    if (in_file or isinstance(values, (bytes, bytearray, memoryview))) and len(values) >= _BLOB_MIN:
        blobs.append(values)
        return _Parked(len(blobs) - 1)
    if in_file:   # too small to be worth a sendfile of its own
        try:
            return values.read()
        finally:
            values.close()
    return values


def _placeheld(values: Any, mask: int) -> Any:
    """The values with each parked field as its placeholder: the field's index in 16 bytes, each byte
    XORed with ``mask``."""
    if isinstance(values, dict):
        return {k: _placeheld(v, mask) for k, v in values.items()}
    if isinstance(values, list):
        return [_placeheld(v, mask) for v in values]
    if isinstance(values, _Parked):
        return bytes(b ^ mask for b in values.index.to_bytes(_HOLDER, "big"))
    return values


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_DIFFERENT = re.compile(rb"[^\x00]+")


def _splice(first: bytes, second: bytes, blobs: list, flexible: bool) -> list:
    """The frame as pieces: ``first`` (placeholders of mask 0x00) with each placeholder replaced by its
    field.  The placeholders are the runs of bytes where ``first`` and ``second`` differ."""
    if len(first) != len(second):
        raise RuntimeError("the two encodings of a response differ in length")
    differ = (int.from_bytes(first, "big") ^ int.from_bytes(second, "big")).to_bytes(len(first), "big")
    marked = _varint(_HOLDER + 1) if flexible else struct.pack(">i", _HOLDER)   # the encoder's prefix of one
    pieces: list[bytes | memoryview] = []
    at = 0
    seen = set()
    for m in _DIFFERENT.finditer(differ):
        pos, end = m.span()
        i = int.from_bytes(first[pos:end], "big")
        start = pos - len(marked)
        if end - pos != _HOLDER or i >= len(blobs) or i in seen or first[start:pos] != marked:
            raise RuntimeError(f"a placeholder at {pos}..{end} of a response is not where its field goes")
        seen.add(i)
        n = len(blobs[i])
        pieces += [first[at:start], _varint(n + 1) if flexible else struct.pack(">i", n), blobs[i]]
        at = end
    if len(seen) != len(blobs):
        raise RuntimeError(f"{len(blobs) - len(seen)} of a response's large fields have no placeholder")
    pieces.append(first[at:])
    pieces[0] = struct.pack(">i", sum(map(len, pieces)) - 4) + pieces[0][4:]
    return pieces


def joined(frame: bytes | list) -> bytes:
    """A response frame as one bytes object (tests; the listener writes the pieces as they are, a
    records piece left in the segment files with sendfile)."""
    return frame if isinstance(frame, bytes) else b"".join(
        p if isinstance(p, (bytes, bytearray, memoryview)) else bytes(p) for p in frame)
