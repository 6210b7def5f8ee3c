"""A broker's log directories and what a failing one means (Kafka 2.8's KIP-112), sans-IO.

Kafka 2.8's LogManager and ReplicaManager, as rules:

* **Placement** (``LogManager.nextLogDirs``): a partition's log stays in the directory that holds it; a
  new one goes to the online directory holding the fewest logs, ties in ``log.dirs`` order (the order
  Kafka's stable sort keeps for up to four directories).  When some directory is offline, a replica
  that is not new (``is_new`` false in LeaderAndIsr) and is found nowhere cannot be created
  (``getOrCreateLog``'s KafkaStorageException): its log may be on the offline directory, and a fresh
  one elsewhere would lose it.
* **Failure** (``LogDirFailureChannel`` + ``ReplicaManager.handleLogDirFailure`` +
  ``LogManager.handleLogDirFailure``): the first I/O error in a directory takes it offline until the
  broker restarts; every replica whose log is there goes offline (it answers KAFKA_STORAGE_ERROR);
  with no directory left online the broker halts, before anything is written to ZooKeeper; otherwise
  the broker writes ``/log_dir_event_notification/log_dir_event_<seq>`` so that the controller asks
  it which replicas it lost.
* **LeaderAndIsr**: an offline replica answers KAFKA_STORAGE_ERROR before any other check.

The broker's replica manager (node/replicas/) and the simulator's (sim/) keep one :class:`LogDirs`
each and carry out what it returns.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from kafkacommon import errors
from kafkacommon.event import Event

TP = tuple[str, int]


@dataclass(frozen=True)
class Placement:
    """Where a replica's log is, or goes: ``dirs`` to try in order (the first that takes it); or ``error``."""

    dirs: tuple[str, ...] = ()
    existing: bool = False
    error: int = errors.NONE


@dataclass(frozen=True)
class DirFailure:
    """What an I/O error in ``dir`` makes the broker do."""

    dir: str
    first: bool                       # False: the directory was offline already (nothing more to do)
    partitions: tuple[TP, ...] = ()   # the replicas that go offline with it
    halt: bool = False                # no directory left online: the broker halts (Kafka's Exit.halt(1))
    notify: bool = False              # write the log directory event notification to ZooKeeper
    events: tuple[Event, ...] = ()


class LogDirs:
    """One broker's data directories: where each replica's log lives, and which directories are offline."""

    def __init__(self, dirs: Sequence[str]) -> None:
        if not dirs:
            raise ValueError("a broker needs at least one log directory")
        if len(set(dirs)) != len(dirs):
            raise ValueError(f"a log directory is listed twice: {list(dirs)}")
        self.dirs: tuple[str, ...] = tuple(dirs)
        self.offline: dict[str, str] = {}     # directory -> the error that took it offline
        self.placed: dict[TP, str] = {}       # replica -> the directory its log is in

    # ------------------------------------------------------------------ state

    def online(self) -> list[str]:
        return [d for d in self.dirs if d not in self.offline]

    def is_offline(self, tp: TP) -> bool:
        """Whether this replica's log is on an offline directory (Kafka's ``HostedPartition.Offline``)."""
        d = self.placed.get(tp)
        return d is not None and d in self.offline

    def offline_partitions(self) -> list[TP]:
        return sorted(tp for tp, d in self.placed.items() if d in self.offline)

    def partitions_in(self, d: str) -> list[TP]:
        return sorted(tp for tp, where in self.placed.items() if where == d)

    def found(self, tp: TP, d: str) -> None:
        """A log found in ``d`` (a start-up scan): the first directory listed wins a duplicate."""
        if d not in self.dirs:
            raise ValueError(f"{d} is not a log directory of this broker")
        self.placed.setdefault(tp, d)

    def created(self, tp: TP, d: str) -> None:
        self.placed[tp] = d

    def lost(self, tp: TP, d: str | None = None) -> None:
        """A replica whose log could not be opened or created (Kafka's ``markPartitionOffline``): it is
        offline, as if in ``d`` (the directory that failed; by default the first offline one)."""
        where = d if d is not None else next((x for x in self.dirs if x in self.offline), None)
        if where is None or where not in self.offline:
            raise ValueError(f"{tp} cannot be lost: {d or 'no directory'} is not offline")
        self.placed[tp] = where

    def removed(self, tp: TP) -> None:
        """The replica's log was deleted (StopReplica with delete)."""
        d = self.placed.get(tp)
        if d is not None and d not in self.offline:
            del self.placed[tp]

    # ------------------------------------------------------------------ rules

    def placement(self, tp: TP, is_new: bool = False) -> Placement:
        """Where ``tp``'s log is, or where to create it (Kafka's getOrCreateLog and nextLogDirs)."""
        d = self.placed.get(tp)
        if d is not None:
            if d in self.offline:
                return Placement(error=errors.KAFKA_STORAGE_ERROR)
            return Placement((d,), existing=True)
        online = self.online()
        if not online or (self.offline and not is_new):
            return Placement(error=errors.KAFKA_STORAGE_ERROR)
        counts = {x: 0 for x in online}
        for where in self.placed.values():
            if where in counts:
                counts[where] += 1
        return Placement(tuple(sorted(online, key=lambda x: counts[x])))   # stable: ties in log.dirs order

    def leader_and_isr_errors(self, tps: Iterable[TP]) -> dict[TP, int]:
        """The partitions of a LeaderAndIsr this broker answers KAFKA_STORAGE_ERROR, before any other check."""
        return {tp: errors.KAFKA_STORAGE_ERROR for tp in tps if self.is_offline(tp)}

    def fail(self, d: str, error: str, during: str) -> DirFailure:
        """An I/O error in ``d`` (``during`` says what was being done): the directory goes offline, with
        its replicas; the broker halts if no directory is left, else notifies the controller."""
        if d not in self.dirs:
            raise ValueError(f"{d} is not a log directory of this broker")
        if d in self.offline:
            return DirFailure(d, first=False)
        self.offline[d] = error
        lost = tuple(self.partitions_in(d))
        left = self.online()
        halt = not left
        event = Event("log_dir_failed", {
            "dir": d, "error": error, "during": during, "replicas": [f"{t}-{p}" for t, p in lost],
            "online_dirs": left, "offline_dirs": [x for x in self.dirs if x in self.offline], "halting": halt})
        return DirFailure(d, True, lost, halt=halt, notify=not halt, events=(event,))

    def describe(self) -> list[tuple[str, int, list[TP]]]:
        """Each directory in order: (dir, error code: KAFKA_STORAGE_ERROR when offline, its replicas)."""
        return [(d, errors.KAFKA_STORAGE_ERROR if d in self.offline else errors.NONE,
                 [] if d in self.offline else self.partitions_in(d)) for d in self.dirs]
