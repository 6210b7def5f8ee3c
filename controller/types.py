"""The controller's domain types: what a partition's state is, apart from how it is stored.

:mod:`zk.codecs` encodes these as Kafka's znode JSON; the controller core,
its election rules and the brokers' metadata caches decide with them.

Pure: no I/O.
"""
from __future__ import annotations

from typing import NamedTuple


class LeaderAndIsr(NamedTuple):
    """A partition's leader, leader epoch, ISR and the epoch of the controller that wrote them
    (Kafka's ``LeaderAndIsr``, minus the zkVersion, which callers pair with it).

    A NamedTuple rather than a frozen dataclass: a controller builds one per partition it
    changes, and this is 4x cheaper to construct."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int

    NO_LEADER = -1
