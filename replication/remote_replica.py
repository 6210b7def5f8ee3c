"""The leader's view of one follower of one partition, and the fetch clock of a follower's fetch session.

A follower fetches every partition of its fetch session (KIP-227) on every fetch, listed or not
(``replication.fetch_session``).  For a partition it left unlisted, at the log end, in the ISR, with
nothing new (``PartitionReplication.on_idle_follower_fetch``), such a fetch only moves two times:
lastCaughtUpTime and the last fetch time (Kafka 2.8's ``Replica.updateFetchState``).  Rather than writing
them into every idle partition on every fetch, the partition's :class:`RemoteReplica` is *bound* to its
session's :class:`FetchClock`, which each fetch stamps once, and reads both times from it while it
stays bound: an idle fetch then costs nothing per idle partition.  The first change that may make the
partition not idle (an append, an HW move, a role, leader epoch or ISR change, a log start move, the
replica's stop: its :meth:`RemoteReplica.touch`), or a fetch of it otherwise than idle, writes the
times the clock gives into the replica (*unbinds* it) and puts the partition in the clock's inbox, so that the session's next fetch, and the
fetch now parked, look at it again (``replication.long_poll.LeaderFetch``).  What the times read is the
same as with a write per fetch; only when they are written differs.
"""
from __future__ import annotations

from typing import Any

UNKNOWN_OFFSET = -1


class FetchClock:
    """One follower fetch session's fetch times at the leader, as its bound partitions read them.

    ``last_fetch_ms``: the session's last fetch time; ``peak_ms``: the latest of its fetch times (the
    wall clock may step back: lastCaughtUpTime never goes back, so a bound replica reads the peak);
    ``inbox``: the bound partitions touched since the session's last fetch drained it (appends only, so a
    partition lock's holder on any thread may add to it); ``gen``: how many times it was drained (a fetch
    parked across the next one's arrival sees it change); ``stamps``: how many fetches stamped it (a replica
    bound at a fetch reads its own times until the next one)."""

    __slots__ = ("last_fetch_ms", "peak_ms", "inbox", "gen", "stamps")

    def __init__(self) -> None:
        self.last_fetch_ms = 0
        self.peak_ms: int | None = None
        self.inbox: list[Any] = []
        self.gen = 0
        self.stamps = 0

    def stamp(self, now_ms: int) -> bool:
        """A fetch of the session at ``now_ms``: every bound replica has now been fetched at the log end
        then.  -> whether replicas may bind at this fetch (the clock is at its peak: a replica bound now
        reads exactly the fetch times it would have written)."""
        self.last_fetch_ms = now_ms
        if self.peak_ms is None or now_ms >= self.peak_ms:
            self.peak_ms = now_ms
            self.stamps += 1      # last: a reader meanwhile reads the bound replicas' own times
            return True
        self.stamps += 1
        return False

    def drain(self) -> list[Any]:
        """The partitions touched since the last drain (a fetch's arrival), oldest first."""
        self.gen += 1          # first: a parked fetch reading the inbox meanwhile sees the generation move
        inbox = self.inbox
        n = len(inbox)
        out = inbox[:n]
        del inbox[:n]
        return out

    def since(self, gen: int, pos: int) -> list[Any] | None:
        """The partitions touched since position ``pos`` of generation ``gen``; None when the inbox was
        drained since (the caller then takes every partition it had bound as touched)."""
        if self.gen != gen:
            return None
        out = self.inbox[pos:]
        return out if self.gen == gen else None


class RemoteReplica:
    """The leader's view of one follower: its LEO (the offset of its last fetch), lastCaughtUpTime, the
    leader's LEO at its last fetch and that fetch's time, and its log start offset (as its last fetch
    said: the low watermark's input).  ``last_caught_up_ms`` and ``last_fetch_ms`` are read from the
    session's :class:`FetchClock` while the replica is bound to it (:meth:`bind`), from the clock's next
    stamp on (until then, its own: the fetch it was bound at recorded them); setting either unbinds it first."""

    def __init__(self, log_end_offset: int = UNKNOWN_OFFSET, last_caught_up_ms: int = 0,
                 last_fetch_leader_leo: int = UNKNOWN_OFFSET, last_fetch_ms: int = 0,
                 log_start_offset: int = UNKNOWN_OFFSET) -> None:
        self.log_end_offset = log_end_offset
        self.last_fetch_leader_leo = last_fetch_leader_leo
        self.log_start_offset = log_start_offset
        self._caught_up_ms = last_caught_up_ms
        self._fetch_ms = last_fetch_ms
        self._clock: FetchClock | None = None
        self._key: Any = None
        self._stamps = 0       # the clock's stamps when this replica was bound to it

    def __repr__(self) -> str:
        return f"RemoteReplica({self.state()})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RemoteReplica) and self.state() == other.state()

    __hash__ = None  # type: ignore[assignment]

    def state(self) -> dict[str, int]:
        """The five fields, as read now."""
        return {"log_end_offset": self.log_end_offset, "last_caught_up_ms": self.last_caught_up_ms,
                "last_fetch_leader_leo": self.last_fetch_leader_leo, "last_fetch_ms": self.last_fetch_ms,
                "log_start_offset": self.log_start_offset}

    @property
    def last_caught_up_ms(self) -> int:
        c = self._clock
        if c is None:
            return self._caught_up_ms
        peak = c.peak_ms
        return self._caught_up_ms if peak is None or peak < self._caught_up_ms else peak

    @last_caught_up_ms.setter
    def last_caught_up_ms(self, v: int) -> None:
        self.unbind()
        self._caught_up_ms = v

    @property
    def last_fetch_ms(self) -> int:
        c = self._clock
        return self._fetch_ms if c is None or c.stamps == self._stamps else c.last_fetch_ms

    @last_fetch_ms.setter
    def last_fetch_ms(self, v: int) -> None:
        self.unbind()
        self._fetch_ms = v

    @property
    def bound(self) -> bool:
        return self._clock is not None

    def bind(self, clock: FetchClock, key: Any) -> None:
        """Right after a fetch at the log end that ``clock`` stamped (and this replica recorded, at or after
        the clock's peak): its fetch times are the clock's from the clock's next stamp on, until :meth:`touch`
        or :meth:`unbind` (``key``: the partition, as the clock's inbox names it).  Until that stamp it reads
        the times it recorded (a partition the fetch listed records them at its own time, at or after the
        stamp's; one it did not list, at the stamp's: the same)."""
        self._stamps = clock.stamps
        self._clock, self._key = clock, key

    def unbind(self) -> None:
        """Write the fetch times the clock gives now, stop reading them from it, and tell the session (its
        inbox): a fetch of it still parked (even one of a session replaced since) looks at the partition
        again, as its session's next fetch does."""
        c = self._clock
        if c is None:
            return
        c.inbox.append(self._key)   # first: the session's fetch arriving meanwhile visits it (under its lock)
        self._caught_up_ms = self.last_caught_up_ms
        self._fetch_ms = self.last_fetch_ms
        self._clock = None     # last: a reader meanwhile reads the same times through the clock

    def touch(self) -> None:
        """Something changed that may make the partition not idle: :meth:`unbind`."""
        self.unbind()

    def record_fetch(self, fetch_offset: int, leader_leo: int, now_ms: int) -> None:
        """A fetch from ``fetch_offset`` at ``now_ms`` while the leader's LEO was ``leader_leo`` (Kafka 2.8's
        ``Replica.updateFetchState``): lastCaughtUpTime moves to this fetch's time when it reached the log end,
        or to the previous fetch's when it reached the leader's LEO of then; the fetch's LEO and time are
        kept.  The replica is unbound first (its times written from the clock), as setting either time does."""
        self.unbind()
        if fetch_offset >= leader_leo:
            if now_ms > self._caught_up_ms:
                self._caught_up_ms = now_ms
        elif fetch_offset >= self.last_fetch_leader_leo and self._fetch_ms > self._caught_up_ms:
            self._caught_up_ms = self._fetch_ms
        self.last_fetch_leader_leo, self._fetch_ms = leader_leo, now_ms
        self.log_end_offset = fetch_offset
