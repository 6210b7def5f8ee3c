"""Kafka's consumer protocol: the bytes inside JoinGroup metadata and SyncGroup assignments.

A consumer joins a group with protocol type ``"consumer"``; for every assignor it
supports it sends a *subscription* (``ConsumerProtocolSubscription``), and the
leader answers each member with an *assignment* (``ConsumerProtocolAssignment``).
The broker stores both as opaque bytes.  Layouts (Kafka 2.4+, non-flexible
encoding: big-endian integers, ``string`` = int16 length + UTF-8, arrays = int32
count, nullable ``bytes`` = int32 length with -1 for null)::

    Subscription => Version:int16 Topics:[string] UserData:nullable_bytes
                    OwnedPartitions:[Topic:string Partitions:[int32]]   (v1+)
                    GenerationId:int32                                   (v2+)
    Assignment   => Version:int16 AssignedPartitions:[Topic:string Partitions:[int32]]
                    UserData:nullable_bytes                              (same in v0..v2)

We write subscription version 1 by default (``encode(version=0|1|2)`` is also
possible) and assignment version 1.  We read versions 0..2 exactly; like Kafka,
a newer version is read with the newest layout we know and any further fields
are ignored.  For versions we know, trailing bytes are an error.

Owned/assigned partitions are grouped by topic in order of first appearance
(Kafka keeps them in an insertion-ordered collection keyed by topic), so a
decode returns them grouped: ``[(a,0),(b,0),(a,1)]`` comes back as
``[(a,0),(a,1),(b,0)]``.

:class:`StickyAssignorUserData` is the user data the eager ``"sticky"``
assignor puts in its subscription (``StickyAssignor``'s schema V1: the
previous assignment grouped by topic, then the generation as int32; V0 had no
generation).  Every malformed input raises :class:`ProtocolError`.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

TP = tuple[str, int]
INT16_MAX = 2**15 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
SUBSCRIPTION_VERSION = 1
ASSIGNMENT_VERSION = 1
KNOWN_VERSIONS = (0, 1, 2)


class ProtocolError(ValueError):
    """Bytes (or values) that do not fit the consumer protocol; the message says what is wrong."""


# ------------------------------------------------------------------ primitive writers

def _int16(v: int) -> bytes:
    return struct.pack(">h", v)


def _int32(v: int, what: str) -> bytes:
    if not INT32_MIN <= v <= INT32_MAX:
        raise ProtocolError(f"{what} {v} does not fit in an int32")
    return struct.pack(">i", v)


def _string(s: str, what: str) -> bytes:
    raw = s.encode("utf-8")
    if len(raw) > INT16_MAX:
        raise ProtocolError(f"{what} is {len(raw)} bytes long; at most {INT16_MAX} fit in a string")
    return struct.pack(">h", len(raw)) + raw


def _nullable_bytes(b: bytes | None) -> bytes:
    if b is None:
        return struct.pack(">i", -1)
    return struct.pack(">i", len(b)) + bytes(b)


def _topic_partitions(tps: list[TP], what: str) -> bytes:
    grouped: dict[str, list[int]] = {}
    for topic, partition in tps:
        grouped.setdefault(topic, []).append(partition)
    out = [struct.pack(">i", len(grouped))]
    for topic, partitions in grouped.items():
        out.append(_string(topic, f"{what} topic name"))
        out.append(struct.pack(">i", len(partitions)))
        out.extend(_int32(p, f"{what} partition of {topic!r}") for p in partitions)
    return b"".join(out)


# ------------------------------------------------------------------ reader

class _Reader:
    """A cursor over bytes whose every read names the field it was reading when it fails."""

    def __init__(self, data: bytes, what: str) -> None:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise ProtocolError(f"{what}: expected bytes, got {type(data).__name__}")
        self.data = bytes(data)
        self.pos = 0
        self.what = what

    def _take(self, n: int, field_name: str) -> bytes:
        if self.pos + n > len(self.data):
            raise ProtocolError(f"{self.what}: truncated reading {field_name} at offset {self.pos}: "
                                f"need {n} bytes, have {len(self.data) - self.pos}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int16(self, field_name: str) -> int:
        return struct.unpack(">h", self._take(2, field_name))[0]

    def int32(self, field_name: str) -> int:
        return struct.unpack(">i", self._take(4, field_name))[0]

    def string(self, field_name: str) -> str:
        n = self.int16(f"{field_name} length")
        if n < 0:
            raise ProtocolError(f"{self.what}: {field_name} has negative length {n} (strings are not nullable here)")
        raw = self._take(n, field_name)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolError(f"{self.what}: {field_name} is not valid UTF-8 ({e.reason})") from None

    def nullable_bytes(self, field_name: str) -> bytes | None:
        n = self.int32(f"{field_name} length")
        if n == -1:
            return None
        if n < 0:
            raise ProtocolError(f"{self.what}: {field_name} has invalid length {n}")
        return self._take(n, field_name)

    def array_len(self, field_name: str) -> int:
        n = self.int32(f"{field_name} count")
        if n < 0:
            raise ProtocolError(f"{self.what}: {field_name} has negative count {n} (arrays are not nullable here)")
        # every element takes at least two bytes: reject absurd counts before looping
        if n > (len(self.data) - self.pos):
            raise ProtocolError(f"{self.what}: {field_name} count {n} exceeds the {len(self.data) - self.pos} "
                                f"bytes left")
        return n

    def topic_partitions(self, field_name: str) -> list[TP]:
        out: list[TP] = []
        for _ in range(self.array_len(field_name)):
            topic = self.string(f"{field_name} topic name")
            for _ in range(self.array_len(f"{field_name} partitions of {topic!r}")):
                out.append((topic, self.int32(f"{field_name} partition of {topic!r}")))
        return out

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def version(self) -> int:
        v = self.int16("version")
        if v < 0:
            raise ProtocolError(f"{self.what}: unsupported version {v}")
        return v

    def finish(self, version: int) -> None:
        """Known versions must be consumed exactly; newer ones may carry fields we skip."""
        if version in KNOWN_VERSIONS and self.remaining():
            raise ProtocolError(f"{self.what}: {self.remaining()} trailing bytes after a version {version} body")


def _check_version(version: int, what: str) -> None:
    if version not in KNOWN_VERSIONS:
        raise ProtocolError(f"{what}: can only write versions {KNOWN_VERSIONS}, not {version}")


# ------------------------------------------------------------------ messages

@dataclass
class Subscription:
    """A member's JoinGroup metadata for one assignor.

    ``generation_id`` is carried on the wire only from version 2 (Kafka 3.x; 2.8 knows versions 0 and 1, and its
    assignors never read this field: the cooperative-sticky member sends its generation in the user data);
    ``group_instance_id`` is never encoded here: in Kafka it comes with the
    member in the JoinGroup response, and the range and round-robin assignors
    order static members by it.
    """
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TP] = field(default_factory=list)
    generation_id: int = -1
    group_instance_id: str | None = None

    def encode(self, version: int = SUBSCRIPTION_VERSION) -> bytes:
        _check_version(version, "subscription")
        out = [_int16(version), _int32(len(self.topics), "topic count")]
        out.extend(_string(t, "subscribed topic name") for t in self.topics)
        out.append(_nullable_bytes(self.user_data))
        if version >= 1:
            out.append(_topic_partitions(list(self.owned_partitions), "owned"))
        if version >= 2:
            out.append(_int32(self.generation_id, "generation id"))
        return b"".join(out)

    @classmethod
    def decode(cls, data: bytes) -> "Subscription":
        r = _Reader(data, "subscription")
        version = r.version()
        topics = [r.string("subscribed topic name") for _ in range(r.array_len("topics"))]
        user_data = r.nullable_bytes("user data")
        owned = r.topic_partitions("owned partitions") if version >= 1 else []
        generation = r.int32("generation id") if version >= 2 else -1
        r.finish(version)
        return cls(topics, user_data, owned, generation)


@dataclass
class Assignment:
    """What the leader hands one member in SyncGroup."""
    partitions: list[TP]
    user_data: bytes | None = None

    def encode(self, version: int = ASSIGNMENT_VERSION) -> bytes:
        _check_version(version, "assignment")
        return _int16(version) + _topic_partitions(list(self.partitions), "assigned") + \
            _nullable_bytes(self.user_data)

    @classmethod
    def decode(cls, data: bytes) -> "Assignment":
        r = _Reader(data, "assignment")
        version = r.version()
        partitions = r.topic_partitions("assigned partitions")
        user_data = r.nullable_bytes("user data")
        r.finish(version)
        return cls(partitions, user_data)


@dataclass
class StickyAssignorUserData:
    """The eager sticky assignor's user data: the member's previous assignment and generation.

    Kafka writes V1 (partitions then generation).  On read it tries V1 and
    falls back to V0 (no generation, ``generation`` None).
    """
    partitions: list[TP]
    generation: int | None = None

    def encode(self) -> bytes:
        body = _topic_partitions(list(self.partitions), "previous assignment")
        if self.generation is None:  # V0
            return body
        return body + _int32(self.generation, "generation")

    @classmethod
    def decode(cls, data: bytes, strict: bool = True) -> "StickyAssignorUserData":
        """``strict=False`` reads as Kafka's Struct does: V1 when a generation follows, else V0, and bytes after
        that are ignored."""
        r = _Reader(data, "sticky assignor user data")
        partitions = r.topic_partitions("previous assignment")
        if r.remaining() == 0 or not strict and r.remaining() < 4:
            return cls(partitions, None)  # V0
        generation = r.int32("generation")
        if r.remaining() and strict:
            raise ProtocolError(f"sticky assignor user data: {r.remaining()} trailing bytes")
        return cls(partitions, generation)
