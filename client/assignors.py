"""Kafka's consumer partition assignors as pure functions (the group leader runs them).

Every assignor has ``name``, ``supported_protocols`` and ``rebalance_protocol``
(``"EAGER"`` or ``"COOPERATIVE"``) and
``assign(partitions_per_topic, subscriptions) -> {member_id: [(topic, partition)]}``.
Every member in ``subscriptions`` gets an entry (possibly empty); topics no
member subscribes to, and subscribed topics missing from
``partitions_per_topic``, are ignored, as in ``AbstractPartitionAssignor``.
Each member's list is returned sorted by (topic, partition).

* ``range`` (``RangeAssignor``): per topic, members ordered (static members by
  ``group.instance.id`` first, then the rest by member id); the partitions are
  cut into contiguous ranges, and the first ``n % m`` members get one extra.
* ``roundrobin`` (``RoundRobinAssignor``): every subscribed partition sorted by
  (topic, partition) is dealt round the ordered members, skipping members not
  subscribed to that partition's topic.
* ``sticky`` (``StickyAssignor``, eager): balanced first, then as sticky as
  possible.  Previous ownership and generation come only from the user data
  (:class:`client.protocol.StickyAssignorUserData`, V1: previous assignment
  and generation; V0: no generation); no user data is no previous assignment,
  unreadable user data is none at the default generation, like Kafka.
* ``cooperative-sticky`` (``CooperativeStickyAssignor``): the same algorithm
  on the subscription's ``owned_partitions``, with the generation the member
  put in its user data (a 4-byte int32, :meth:`encode_generation`; no user
  data: no generation; fewer than 4 bytes: the default -1); then every
  partition marked as changing hands is withheld this round; its owner
  revokes it and a follow-up rebalance hands it to the new owner.

The sticky algorithm is Kafka 2.8.2's ``AbstractStickyAssignor``.  When every
member has the same subscription the *constrained* algorithm runs: only the
members of the highest generation keep their claims (a member without a
generation counts while nobody has one), a partition two of them claim is
owned by nobody; each member keeps up to ``ceil(P/M)`` of what it owns, in the
order it listed them; members short of ``floor(P/M)`` are filled in sorted
order from the free partitions (sorted), then take from members at the max
quota, and what is left goes one each to the members at the min quota.  A
partition kept over the quota or claimed twice that lands elsewhere is
"transferring".  Otherwise the *general* algorithm runs: each partition's
owner is its claimant of the highest generation (the first met at a tie),
its previous owner the claimant one generation down; keep valid ownership,
give each free partition to the least-loaded eligible member, then move
partitions while that improves the balance (moving back to a partition's
previous owner first), keeping the result only if the balance score improved.

Where Kafka walks a ``HashMap`` of members or takes the first of a
``HashSet``, we follow Java's iteration order (:mod:`client.java_order`), so
the outcome is Kafka's for the same member ids.  Two knowing differences: a
claimed partition number the topic does not have is dropped (Kafka checks
only the topic), and a partition is never moved back to a previous owner
that no longer subscribes to its topic (Kafka would, and so assign it to a
member not subscribed, or fail with a NullPointerException).
"""
from __future__ import annotations

import struct
from collections import deque
from typing import Mapping

from client.java_order import JavaHashSet, hash_map_order, topic_partition_hash
from client.protocol import ProtocolError, StickyAssignorUserData, Subscription

TP = tuple[str, int]
EAGER, COOPERATIVE = "EAGER", "COOPERATIVE"
DEFAULT_GENERATION = -1


def _member_order(member_id: str, sub: Subscription) -> tuple:
    """Kafka's MemberInfo order: static members by instance id first, then dynamic ones by member id."""
    if sub.group_instance_id is not None:
        return (0, sub.group_instance_id, member_id)
    return (1, member_id)


def _live_topics(partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]) -> dict[str, int]:
    wanted = {t for s in subscriptions.values() for t in s.topics}
    return {t: n for t, n in partitions_per_topic.items() if t in wanted}


def _sorted(assignment: dict[str, list[TP]]) -> dict[str, list[TP]]:
    return {m: sorted(tps) for m, tps in assignment.items()}


def partitions_to_revoke(owned: list[TP], assigned: list[TP]) -> list[TP]:
    """What a member must give up: the partitions it owns that its new assignment lacks."""
    keep = set(assigned)
    return sorted({tp for tp in owned if tp not in keep})


class Assignor:
    name = ""
    supported_protocols: tuple[str, ...] = (EAGER,)

    @property
    def rebalance_protocol(self) -> str:
        return self.supported_protocols[0]

    def user_data(self, last_assignment: list[TP] | None, last_generation: int) -> bytes | None:
        """The subscription's user data, given the member's last assignment and its generation (None before)."""
        return None

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, list[TP]]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class RangeAssignor(Assignor):
    name = "range"

    def assign(self, partitions_per_topic, subscriptions):
        topics = _live_topics(partitions_per_topic, subscriptions)
        out: dict[str, list[TP]] = {m: [] for m in subscriptions}
        for topic in sorted(topics):
            members = sorted((m for m, s in subscriptions.items() if topic in s.topics),
                             key=lambda m: _member_order(m, subscriptions[m]))
            per_member, extra = divmod(topics[topic], len(members))
            for i, m in enumerate(members):
                start = per_member * i + min(i, extra)
                length = per_member + (1 if i < extra else 0)
                out[m].extend((topic, p) for p in range(start, start + length))
        return _sorted(out)


class RoundRobinAssignor(Assignor):
    name = "roundrobin"

    def assign(self, partitions_per_topic, subscriptions):
        topics = _live_topics(partitions_per_topic, subscriptions)
        out: dict[str, list[TP]] = {m: [] for m in subscriptions}
        ring = sorted(subscriptions, key=lambda m: _member_order(m, subscriptions[m]))
        i = 0
        for topic in sorted(topics):
            for p in range(topics[topic]):
                while topic not in subscriptions[ring[i % len(ring)]].topics:
                    i += 1
                out[ring[i % len(ring)]].append((topic, p))
                i += 1
        return _sorted(out)


class _Movements:
    """Kafka's PartitionMovements: moves per topic, so a move A->B can undo an earlier B->A instead."""

    def __init__(self) -> None:
        self.pair_of: dict[TP, tuple[str, str]] = {}
        self.by_topic: dict[str, dict[tuple[str, str], JavaHashSet]] = {}

    def _add(self, tp: TP, pair: tuple[str, str]) -> None:
        self.pair_of[tp] = pair
        self.by_topic.setdefault(tp[0], {}).setdefault(pair, JavaHashSet(topic_partition_hash)).add(tp)

    def move(self, tp: TP, old: str, new: str) -> None:
        if tp in self.pair_of:
            src, _ = pair = self.pair_of.pop(tp)
            moves = self.by_topic[tp[0]]
            moves[pair].discard(tp)
            if not moves[pair]:
                del moves[pair]
            if not moves:
                del self.by_topic[tp[0]]
            if src != new:
                self._add(tp, (src, new))
        else:
            self._add(tp, (old, new))

    def actual_partition_to_move(self, tp: TP, old: str, new: str) -> TP:
        moves = self.by_topic.get(tp[0])
        if not moves:
            return tp
        if tp in self.pair_of:
            old = self.pair_of[tp][0]
        reverse = moves.get((new, old))
        return reverse.first() if reverse else tp  # Kafka: the first of a HashSet


class _StickyBase(Assignor):
    """The shared sticky algorithm (Kafka 2.8.2's AbstractStickyAssignor); subclasses say where ownership comes from."""

    def member_data(self, sub: Subscription) -> tuple[list[TP], int | None]:
        """(previously owned partitions, generation or None when the member sent none)."""
        raise NotImplementedError

    def assign(self, partitions_per_topic, subscriptions):
        return self.assign_with_transfers(partitions_per_topic, subscriptions)[0]

    def assign_with_transfers(self, partitions_per_topic, subscriptions):
        """(assignment, {partition: new owner} for partitions changing hands, or None if not tracked)."""
        assignment, transferring = self._assign(partitions_per_topic, subscriptions)
        return _sorted(assignment), transferring

    def _assign(self, partitions_per_topic, subscriptions):
        if not subscriptions:
            return {}, {}
        topics = _live_topics(partitions_per_topic, subscriptions)
        order = hash_map_order(subscriptions)  # Kafka walks a HashMap of the members
        data = {m: self.member_data(subscriptions[m]) for m in order}
        owned, multi = self._equal_subscriptions(topics, subscriptions, order, data)
        if owned is not None:
            return self._constrained(topics, order, owned, multi)
        owned, prev = self._prepopulate(topics, order, data)
        return self._general(topics, subscriptions, owned, prev), None

    @staticmethod
    def _equal_subscriptions(topics, subscriptions, order, data):
        """2.8.2's allSubscriptionsEqual: (owned per member, partitions claimed twice), or (None, None).

        Only members of the highest generation keep their claims (a member with
        no generation counts only while no generation has been seen); a
        partition claimed twice in that generation is owned by nobody.
        """
        subscribed: set[str] = set()
        owned: dict[str, list[TP]] = {}
        multi: set[TP] = set()
        first_owner: dict[TP, str] = {}
        top: list[str] = []
        max_gen = DEFAULT_GENERATION
        for m in order:
            wanted = subscriptions[m].topics
            if not subscribed:
                subscribed = set(wanted)
            elif not (len(wanted) == len(subscribed) and subscribed.issuperset(wanted)):
                return None, None
            claimed, gen = data[m]
            mine: list[TP] = []
            owned[m] = mine
            if not (gen is not None and gen >= max_gen or gen is None and max_gen == DEFAULT_GENERATION):
                continue
            if gen is not None and gen > max_gen:
                first_owner.clear()
                multi.clear()
                for dropped in top:
                    owned[dropped].clear()
                top.clear()
                max_gen = gen
            top.append(m)
            for tp in claimed:
                # Kafka checks only the topic; a partition number it does not have is dropped here too
                if tp[0] not in topics or not 0 <= tp[1] < topics[tp[0]]:
                    continue
                if tp not in first_owner:
                    first_owner[tp] = m
                    mine.append(tp)
                else:
                    other = owned[first_owner[tp]]
                    if tp in other:
                        other.remove(tp)
                    multi.add(tp)
        return owned, multi

    @staticmethod
    def _constrained(topics, order, owned, multi):
        """2.8.2's constrainedAssign: keep up to the max quota, fill to the min quota, steal, deal the rest."""
        pending = deque((t, p) for t in sorted(topics) for p in range(topics[t]))
        n = len(order)
        min_q, max_q = len(pending) // n, -(-len(pending) // n)
        assignment: dict[str, list[TP]] = {m: [] for m in order}
        revoked: set[TP] = set()
        unfilled: list[str] = []
        max_cap: deque[str] = deque()
        min_cap: deque[str] = deque()
        transferring: dict[TP, str] = {}
        kept: set[TP] = set()
        for m in order:
            mine = [tp for tp in owned[m] if tp not in multi]
            for i, tp in enumerate(mine):
                if i < max_q:
                    assignment[m].append(tp)
                    kept.add(tp)
                else:
                    revoked.add(tp)
            if len(mine) < min_q:
                unfilled.append(m)
            else:
                if len(assignment[m]) == min_q:
                    min_cap.append(m)
                if len(assignment[m]) == max_q:
                    max_cap.append(m)
        pending = deque(tp for tp in pending if tp not in kept)
        unfilled.sort()
        while unfilled and pending:
            for m in list(unfilled):
                if not pending:
                    break
                tp = pending.popleft()
                assignment[m].append(tp)
                if tp in revoked or tp in multi:
                    transferring[tp] = m
                if len(assignment[m]) == min_q:
                    min_cap.append(m)
                    unfilled.remove(m)
        for m in unfilled:  # out of partitions with members still short: take from those at the max quota
            for _ in range(min_q - len(assignment[m])):
                if not max_cap:
                    raise RuntimeError("sticky assignor: some consumers are under capacity but all partitions "
                                       "have been assigned")
                tp = assignment[max_cap.popleft()].pop(0)
                assignment[m].append(tp)
                transferring[tp] = m
            min_cap.append(m)
        for tp in pending:  # one each to the members at the min quota, in queue order
            if not min_cap:
                raise RuntimeError("sticky assignor: some partitions are unassigned but all consumers are at "
                                   "maximum capacity")
            m = min_cap.popleft()
            assignment[m].append(tp)
            if tp in revoked or tp in multi:
                transferring[tp] = m
        return assignment, transferring

    @staticmethod
    def _prepopulate(topics, order, data):
        """2.8.2's prepopulateCurrentAssignments: each partition's owner is its claimant of the highest generation
        (the first one met at that generation; a claim without a generation replaces an earlier one at -1), and
        its previous owner the claimant of the next generation down."""
        claims: dict[TP, dict[int, str]] = {}
        for m in order:
            claimed, gen = data[m]
            for tp in claimed:
                by_gen = claims.setdefault(tp, {})
                if gen is not None and gen in by_gen:
                    continue
                by_gen[DEFAULT_GENERATION if gen is None else gen] = m
        owned: dict[str, list[TP]] = {m: [] for m in order}
        prev: dict[TP, str] = {}
        for tp, by_gen in claims.items():
            gens = sorted(by_gen, reverse=True)
            if tp[0] in topics and 0 <= tp[1] < topics[tp[0]]:
                owned[by_gen[gens[0]]].append(tp)
            if len(gens) > 1:
                prev[tp] = by_gen[gens[1]]
        return owned, prev

    @staticmethod
    def _general(topics, subscriptions, owned, prev):
        members = sorted(subscriptions)
        subs = {m: sorted(t for t in set(subscriptions[m].topics) if t in topics) for m in members}
        consumers_of = {t: [m for m in members if t in subs[m]] for t in topics}
        max_size = {m: sum(topics[t] for t in subs[m]) for m in members}
        current: dict[str, list[TP]] = {m: [] for m in members}
        owner: dict[TP, str] = {}
        revocation_required = False
        for m in members:
            for tp in owned[m]:
                if tp[0] in subs[m]:
                    current[m].append(tp)
                    owner[tp] = m
                else:
                    revocation_required = True
        order = sorted(topics, key=lambda t: (len(consumers_of[t]), t))
        all_sorted = [(t, p) for t in order for p in range(topics[t])]
        unassigned = [tp for tp in all_sorted if tp not in owner]
        initializing = not owner

        def load(m: str) -> tuple[int, str]:
            return len(current[m]), m

        def put(tp: TP, m: str) -> None:
            if tp in owner:
                current[owner[tp]].remove(tp)
            current[m].append(tp)
            owner[tp] = m

        for tp in unassigned:
            if consumers_of[tp[0]]:
                put(tp, min(consumers_of[tp[0]], key=load))

        movable = lambda tp: len(consumers_of[tp[0]]) >= 2  # noqa: E731
        active = [m for m in members if len(current[m]) < max_size[m] or any(movable(tp) for tp in current[m])]

        def balanced() -> bool:
            counts = [len(current[m]) for m in active]
            if not counts or min(counts) >= max(counts) - 1:
                return True
            for m in sorted(active, key=load):
                n = len(current[m])
                if n == max_size[m]:
                    continue
                for t in subs[m]:
                    for p in range(topics[t]):
                        other = owner.get((t, p))
                        # Kafka 2.8.2 says "unbalanced" already at n < other; that only makes it scan on without
                        # moving anything (a move needs a gap of 2), so the outcome is the same
                        if other is not None and other != m and n + 1 < len(current[other]):
                            return False
            return True

        def score() -> int:
            counts = [len(current[m]) for m in active]
            return sum(abs(a - b) for i, a in enumerate(counts) for b in counts[i + 1:])

        movements = _Movements()

        def reassign(tp: TP, new: str) -> None:
            actual = movements.actual_partition_to_move(tp, owner[tp], new)
            movements.move(actual, owner[actual], new)
            put(actual, new)

        def perform(partitions: list[TP]) -> bool:
            performed = False
            for _ in range(len(partitions) * max(len(active), 1) + 1):  # Kafka loops until stable; we bound it
                modified = False
                for tp in partitions:
                    if balanced():
                        break
                    cur = owner[tp]
                    back = prev.get(tp)
                    if back in active and tp[0] in subs[back] and len(current[cur]) > len(current[back]) + 1:
                        reassign(tp, back)
                        performed = modified = True
                        continue
                    if any(len(current[cur]) > len(current[o]) + 1 for o in consumers_of[tp[0]]):
                        reassign(tp, min(consumers_of[tp[0]], key=load))
                        performed = modified = True
                if not modified:
                    break
            return performed

        before = {m: list(current[m]) for m in members}
        before_score = score()
        if not revocation_required:
            perform([tp for tp in unassigned if movable(tp)])
        performed = perform([tp for tp in all_sorted if movable(tp)])
        if not initializing and performed and score() >= before_score:
            current = before
        return current


class StickyAssignor(_StickyBase):
    name = "sticky"
    supported_protocols = (EAGER,)

    def member_data(self, sub: Subscription) -> tuple[list[TP], int | None]:
        if not sub.user_data:
            return [], None  # Kafka 2.8.2 does not look at the subscription's owned partitions here
        try:
            data = StickyAssignorUserData.decode(sub.user_data, strict=False)
        except ProtocolError:
            return [], DEFAULT_GENERATION  # Kafka ignores a previous assignment it cannot parse
        return data.partitions, data.generation

    @staticmethod
    def subscription_user_data(partitions: list[TP], generation: int | None) -> bytes:
        """What a member sends after being assigned ``partitions`` in ``generation``."""
        return StickyAssignorUserData(list(partitions), generation).encode()

    def user_data(self, last_assignment: list[TP] | None, last_generation: int) -> bytes | None:
        # Kafka's subscriptionUserData: nothing before the first assignment (onAssignment), then that assignment
        return None if last_assignment is None else self.subscription_user_data(last_assignment, last_generation)


class CooperativeStickyAssignor(_StickyBase):
    name = "cooperative-sticky"
    supported_protocols = (COOPERATIVE, EAGER)

    @staticmethod
    def encode_generation(generation: int) -> bytes:
        """The user data: the generation of the member's last assignment as an int32 (-1 before any)."""
        return struct.pack(">i", generation)

    def user_data(self, last_assignment: list[TP] | None, last_generation: int) -> bytes | None:
        return self.encode_generation(last_generation)

    def member_data(self, sub: Subscription) -> tuple[list[TP], int | None]:
        if sub.user_data is None:
            return list(sub.owned_partitions), None
        if len(sub.user_data) < 4:
            return list(sub.owned_partitions), DEFAULT_GENERATION  # unreadable: Kafka's default generation
        return list(sub.owned_partitions), struct.unpack(">i", bytes(sub.user_data[:4]))[0]

    def assign_with_transfers(self, partitions_per_topic, subscriptions):
        """(assignment with moving partitions withheld, {withheld partition: its next owner})."""
        assignment, transferring = self._assign(partitions_per_topic, subscriptions)
        if transferring is None:  # general case: a partition moves if one member gains what another loses
            added = {tp: m for m, tps in assignment.items() for tp in tps
                     if tp not in set(subscriptions[m].owned_partitions)}
            lost = {tp for m, tps in assignment.items()
                    for tp in partitions_to_revoke(subscriptions[m].owned_partitions, tps)}
            transferring = {tp: m for tp, m in added.items() if tp in lost}
        for tp, m in transferring.items():
            assignment[m].remove(tp)
        return _sorted(assignment), transferring


ASSIGNORS: dict[str, Assignor] = {a.name: a for a in (RangeAssignor(), RoundRobinAssignor(), StickyAssignor(),
                                                      CooperativeStickyAssignor())}


def get_assignor(name: str) -> Assignor:
    try:
        return ASSIGNORS[name]
    except KeyError:
        raise ValueError(f"unknown partition assignor {name!r}; known: {', '.join(ASSIGNORS)}") from None
