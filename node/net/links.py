"""Where this process dials its peers: the advertised address, or a per-link override.

A chaos run routes every broker-to-broker and broker-to-ZooKeeper connection
through a fault proxy, one listening port per (source, destination) link.
Brokers still advertise their real listener in ``/brokers/ids``; each process
rewrites the addresses it dials through its own link map, so that broker 1
reaches broker 2 through the ``b1->b2`` link while broker 3 uses ``b3->b2``.

The map is a JSON file passed with ``kafkasim broker --links FILE``::

    {"brokers": {"2": "127.0.0.1:41001", "3": "127.0.0.1:41002"},
     "zookeeper": "127.0.0.1:41010,127.0.0.1:41011"}

``zookeeper``, when present, replaces the ZooKeeper connect string (the chroot,
if any, is kept).  Without a map, every address is dialled as advertised.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping


class LinkMapError(ValueError):
    pass


@dataclass(frozen=True)
class LinkMap:
    brokers: Mapping[int, str] = field(default_factory=dict)
    zookeeper: str | None = None

    def dial(self, broker_id: int, advertised: str) -> str:
        """The address to dial for ``broker_id``, whose advertised address is ``advertised``."""
        return self.brokers.get(broker_id, advertised)

    def zookeeper_connect(self, connect: str) -> str:
        if not self.zookeeper:
            return connect
        chroot = connect[connect.index("/"):] if "/" in connect else ""
        return self.zookeeper + chroot

    def to_json(self) -> dict[str, Any]:
        return {"brokers": {str(b): a for b, a in sorted(self.brokers.items())}, "zookeeper": self.zookeeper}

    def write(self, path: Path | str) -> None:
        path = Path(path)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2))
        tmp.replace(path)

    @classmethod
    def parse(cls, data: Any, source: str = "links") -> "LinkMap":
        if not isinstance(data, dict):
            raise LinkMapError(f"{source}: expected a JSON object")
        unknown = set(data) - {"brokers", "zookeeper"}
        if unknown:
            raise LinkMapError(f"{source}: unknown key {sorted(unknown)[0]!r} (expected brokers, zookeeper)")
        brokers: dict[int, str] = {}
        for k, v in (data.get("brokers") or {}).items():
            try:
                bid = int(k)
            except ValueError:
                raise LinkMapError(f"{source}: brokers: key {k!r} is not a broker id") from None
            if not isinstance(v, str) or ":" not in v:
                raise LinkMapError(f"{source}: brokers.{k}: expected \"host:port\", got {v!r}")
            brokers[bid] = v
        zk = data.get("zookeeper")
        if zk is not None and (not isinstance(zk, str) or not zk):
            raise LinkMapError(f"{source}: zookeeper: expected a connect string, got {zk!r}")
        return cls(brokers, zk)

    @classmethod
    def load(cls, path: Path | str) -> "LinkMap":
        try:
            data = json.loads(Path(path).read_text())
        except OSError as e:
            raise LinkMapError(f"{path}: cannot read: {e.strerror}") from None
        except ValueError as e:
            raise LinkMapError(f"{path}: not JSON: {e}") from None
        return cls.parse(data, str(path))


DIRECT = LinkMap()
