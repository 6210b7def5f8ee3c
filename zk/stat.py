"""The znode metadata and watch events ``ZkClient`` hands out: kafkasim's own types, not kazoo's."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Stat:
    """A znode's stat, as ZooKeeper keeps it."""

    czxid: int            # the zxid that created it (a broker znode's czxid is the broker epoch)
    mzxid: int
    pzxid: int
    ctime: int            # ms since the epoch
    mtime: int
    version: int          # the data's zkVersion: conditional writes name it
    cversion: int
    aversion: int
    ephemeral_owner: int  # the owning session's id; 0 for a persistent znode
    data_length: int
    num_children: int

    @classmethod
    def of(cls, s: Any) -> "Stat":
        """From kazoo's ZnodeStat."""
        return cls(s.czxid, s.mzxid, s.pzxid, s.ctime, s.mtime, s.version, s.cversion, s.aversion,
                   s.ephemeralOwner, s.dataLength, s.numChildren)


@dataclass(frozen=True)
class WatchEvent:
    """A one-shot watch fired: ``type`` is CREATED, DELETED, CHANGED, CHILD or NONE (a session event)."""

    type: str
    path: str


def watcher(fn: Callable[[WatchEvent], None] | None) -> Callable[[Any], None] | None:
    """A kazoo watch function that calls ``fn`` with our ``WatchEvent``."""
    if fn is None:
        return None
    return lambda e: fn(WatchEvent(str(e.type), e.path))
