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
  possible.  Previous ownership and generation come from the user data
  (:class:`client.protocol.StickyAssignorUserData`); unreadable user data
  counts as nothing owned, like Kafka.  With no user data the subscription's
  ``owned_partitions``/``generation_id`` are used.
* ``cooperative-sticky`` (``CooperativeStickyAssignor``): the same algorithm
  on ``owned_partitions``/``generation_id``, then every partition that would
  move from one member to another is withheld this round; its owner revokes
  it and a follow-up rebalance hands it to the new owner.

The sticky algorithm follows Kafka 3.x's ``AbstractStickyAssignor``:
conflicting claims are settled first (the higher generation keeps the
partition; a tie at the highest generation invalidates every claim).  When
every member has the same subscription the *constrained* algorithm runs:
members keep up to their quota (at most ``ceil(P/M)`` for ``P % M`` of
them, ``floor(P/M)`` for the rest) of what they own, and the rest is dealt
round-robin, in sorted order, to the sorted members that are still short.
Otherwise the *general* algorithm runs: keep valid ownership, give each free
partition to the least-loaded eligible member, then move partitions while
that improves the balance (moving back to a partition's previous-generation
owner first), keeping the result only if the balance score improved.
"""
from __future__ import annotations

from collections import deque
from typing import Mapping

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
        self.by_topic: dict[str, dict[tuple[str, str], set[TP]]] = {}

    def _add(self, tp: TP, pair: tuple[str, str]) -> None:
        self.pair_of[tp] = pair
        self.by_topic.setdefault(tp[0], {}).setdefault(pair, set()).add(tp)

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
        return min(reverse) if reverse else tp


class _StickyBase(Assignor):
    """The shared sticky algorithm; subclasses say where previous ownership comes from."""

    def member_data(self, sub: Subscription) -> tuple[list[TP], int]:
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
        data = {m: self.member_data(s) for m, s in subscriptions.items()}
        owned, multi = self._resolve_claims(topics, data)
        first = set(next(iter(subscriptions.values())).topics)
        if all(set(s.topics) == first for s in subscriptions.values()):
            return self._constrained(topics, sorted(subscriptions), owned, multi)
        max_gen = max(g for _, g in data.values())
        prev: dict[TP, tuple[str, int]] = {}  # the newest claim older than the current generation
        for m, (tps, gen) in data.items():
            if gen < max_gen:
                for tp in tps:
                    if tp not in prev or gen > prev[tp][1]:
                        prev[tp] = (m, gen)
        return self._general(topics, subscriptions, owned, {tp: m for tp, (m, _) in prev.items()}), None

    @staticmethod
    def _resolve_claims(topics, data):
        """Each partition goes to its claimant with the highest generation; a tie there voids all claims."""
        claims: dict[TP, list[tuple[int, str]]] = {}
        for m in sorted(data):
            tps, gen = data[m]
            for tp in dict.fromkeys(tps):
                if tp[0] in topics and 0 <= tp[1] < topics[tp[0]]:
                    claims.setdefault(tp, []).append((gen, m))
        owned: dict[str, list[TP]] = {m: [] for m in data}
        multi: set[TP] = set()
        for tp, cl in claims.items():
            best = max(g for g, _ in cl)
            winners = [m for g, m in cl if g == best]
            if len(winners) == 1:
                owned[winners[0]].append(tp)
            else:
                multi.add(tp)
        return owned, multi

    @staticmethod
    def _constrained(topics, members, owned, multi):
        total, n = sum(topics.values()), len(members)
        min_q, max_q, expected_over = total // n, -(-total // n), total % n
        over = 0
        assignment: dict[str, list[TP]] = {m: [] for m in members}
        revoked: set[TP] = set()
        under: list[str] = []
        exact: list[str] = []
        for m in members:
            mine = sorted(owned[m], key=lambda tp: (tp[1], tp[0]))  # Kafka keeps the lowest partition numbers
            if len(mine) < min_q:
                keep = len(mine)
                under.append(m)
            elif len(mine) >= max_q and over < expected_over:
                keep = max_q
                over += 1
                if over == expected_over:
                    exact.clear()
            else:
                keep = min_q
                if over < expected_over:
                    exact.append(m)
            assignment[m].extend(mine[:keep])
            revoked.update(mine[keep:])
        taken = {tp for tps in assignment.values() for tp in tps}
        unassigned = [(t, p) for t in sorted(topics) for p in range(topics[t]) if (t, p) not in taken]
        exact_q = deque(sorted(exact))
        transferring: dict[TP, str] = {}
        i = 0
        for tp in unassigned:
            from_under = True
            if i < len(under):
                m = under[i]
                i += 1
            elif under:
                m, i = under[0], 1
            elif exact_q:
                m, from_under = exact_q.popleft(), False
            else:
                raise RuntimeError(f"sticky assignor: no member left for {tp}")
            assignment[m].append(tp)
            if tp in revoked or tp in multi:
                transferring[tp] = m
            count = len(assignment[m])
            if from_under and count == min_q:
                i -= 1
                under.pop(i)
                exact_q.append(m)
            elif count == max_q:
                over += 1
        short = [m for m in under if len(assignment[m]) != min_q]
        if short or (under and over != expected_over):
            raise RuntimeError(f"sticky assignor: members {short or under} left under quota")
        return assignment, transferring

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

    def member_data(self, sub: Subscription) -> tuple[list[TP], int]:
        if sub.user_data:
            try:
                data = StickyAssignorUserData.decode(sub.user_data)
            except ProtocolError:
                return [], DEFAULT_GENERATION  # Kafka ignores a previous assignment it cannot parse
            return data.partitions, DEFAULT_GENERATION if data.generation is None else data.generation
        return list(sub.owned_partitions), sub.generation_id

    @staticmethod
    def subscription_user_data(partitions: list[TP], generation: int | None) -> bytes:
        """What a member sends after being assigned ``partitions`` in ``generation``."""
        return StickyAssignorUserData(list(partitions), generation).encode()


class CooperativeStickyAssignor(_StickyBase):
    name = "cooperative-sticky"
    supported_protocols = (COOPERATIVE, EAGER)

    def member_data(self, sub: Subscription) -> tuple[list[TP], int]:
        return list(sub.owned_partitions), sub.generation_id

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
