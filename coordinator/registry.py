"""The groups of one __consumer_offsets partition: the live group objects and their stored metadata.

:class:`GroupRegistry` is the group metadata the membership manager and the coordinator share (Kafka's
GroupMetadataManager's group cache and its GroupMetadataValue view):

* the live :class:`~coordinator.group.GroupMetadata` objects, with their transient rebalance state,
  created by a JoinGroup or a simple consumer's OffsetCommit, built from the stored values by a load, and
  removed when a Dead group is cleaned up;
* each group's last stored GroupMetadataValue: durable state, changed only by :meth:`replay`;
* every state change of a group (:meth:`transition`, logged as ``group_state_changed``);
* the read-only group APIs' answers (DescribeGroups, ListGroups).
"""
from __future__ import annotations

from typing import Iterable

from coordinator import records as rec
from coordinator.group import DEAD, EMPTY, STABLE, GroupMetadata
from coordinator.messages import DescribedGroup, DescribedMember
from coordinator.result import Result
from kafkacommon import errors


class GroupRegistry:
    def __init__(self) -> None:
        self._groups: dict[str, GroupMetadata] = {}      # insertion order (the load's, then creation's)
        self._stored: dict[str, rec.GroupValue] = {}     # durable: the replay of the group records

    # ------------------------------------------------------------------ live groups

    def get(self, group_id: str | None) -> GroupMetadata | None:
        return self._groups.get(group_id)  # type: ignore[arg-type]

    def ids(self) -> list[str]:
        return sorted(self._groups)

    def groups(self) -> list[GroupMetadata]:
        """The live groups, in the order they came (a copy: the caller may remove some)."""
        return list(self._groups.values())

    def __len__(self) -> int:
        return len(self._groups)

    def create(self, out: Result, group_id: str, reason: str) -> GroupMetadata:
        """A new Empty group (``reason``: "join" or "commit")."""
        group = GroupMetadata(group_id, out.now_ms, EMPTY)
        self._groups[group_id] = group
        out.event("group_created", group=group_id, reason=reason)
        return group

    def remove(self, group: GroupMetadata) -> bool:
        """Forget ``group``; False when it is not the group registered under its id."""
        if self._groups.get(group.group_id) is not group:
            return False
        del self._groups[group.group_id]
        return True

    def transition(self, out: Result, group: GroupMetadata, state: str, reason: str | None = None) -> None:
        """The group moves to ``state`` (a legal transition, else IllegalStateTransition); ``reason``: why a
        rebalance starts."""
        previous = group.transition_to(state, out.now_ms)
        out.event("group_state_changed", group=group.group_id, **{"from": previous, "to": state},
                  generation=group.generation, reason=reason)

    def clear(self) -> None:
        self._groups.clear()
        self._stored.clear()

    # ------------------------------------------------------------------ durable: stored group metadata

    def replay(self, key: rec.GroupMetadataKey, value: rec.GroupValue | None) -> None:
        if value is None:
            self._stored.pop(key.group, None)
        else:
            self._stored[key.group] = value

    def stored(self) -> dict[str, rec.GroupValue]:
        """{group: its last stored GroupMetadataValue}, by group id."""
        return dict(sorted(self._stored.items()))

    def load(self, now_ms: int, offset_groups: Iterable[str]) -> list[GroupMetadata]:
        """The load's groups: one per stored value (Stable with members, else Empty), then an Empty one for
        each other group that has offsets (``offset_groups``, sorted); each in id order."""
        loaded = []
        for group_id in sorted(self._stored):
            group = GroupMetadata.from_value(group_id, self._stored[group_id], now_ms)
            self._groups[group_id] = group
            loaded.append(group)
        for group_id in offset_groups:
            if group_id not in self._groups:
                group = GroupMetadata(group_id, now_ms, EMPTY)
                self._groups[group_id] = group
                loaded.append(group)
        return loaded

    # ------------------------------------------------------------------ DescribeGroups / ListGroups

    def describe(self, group_id: str) -> DescribedGroup:
        group = self._groups.get(group_id)
        if group is None:
            return DescribedGroup(errors.NONE, group_id, DEAD, "", "", [])
        if group.is_(STABLE):
            members = [DescribedMember(mid, m.group_instance_id, m.client_id, m.client_host,
                                       m.metadata(group.protocol_name), m.assignment)
                       for mid, m in group.members.items()]
            return DescribedGroup(errors.NONE, group_id, group.state, group.protocol_type or "",
                                  group.protocol_name or "", members, group.generation)
        members = [DescribedMember(mid, m.group_instance_id, m.client_id, m.client_host, b"", b"")
                   for mid, m in group.members.items()]
        return DescribedGroup(errors.NONE, group_id, group.state, group.protocol_type or "", "", members,
                              group.generation)

    def listed(self, states: Iterable[str]) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of each group in one of ``states`` (none given: every group)."""
        wanted = set(states)
        return [(gid, g.protocol_type or "", g.state) for gid, g in sorted(self._groups.items())
                if not wanted or g.state in wanted]
