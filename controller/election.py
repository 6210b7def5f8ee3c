"""Partition leader election rules (Kafka's controller/Election.scala), as pure functions.

Each returns the new LeaderAndIsr, or None when no leader can be elected.
"""
from __future__ import annotations

from typing import AbstractSet, Sequence

from kafkacommon.metadata import LeaderAndIsr


def initial(replicas: Sequence[int], live: AbstractSet[int], controller_epoch: int) -> LeaderAndIsr | None:
    """A new partition: leader = first live replica, ISR = every live replica, epoch 0."""
    alive = [r for r in replicas if r in live]
    if not alive:
        return None
    return LeaderAndIsr(alive[0], 0, tuple(alive), controller_epoch)


def offline(current: LeaderAndIsr, replicas: Sequence[int], live: AbstractSet[int],
            controller_epoch: int, unclean: bool) -> tuple[LeaderAndIsr | None, bool]:
    """Leader = first replica in assignment order that is live and in the ISR.

    New ISR = the live ISR members.  With none alive and ``unclean``, the
    first live replica, ISR = [it].  Returns (state or None, was_unclean).
    """
    live_isr = tuple([b for b in current.isr if b in live])
    for r in replicas:
        if r in live and r in live_isr:
            return LeaderAndIsr(r, current.leader_epoch + 1, live_isr, controller_epoch), False
    if unclean:
        for r in replicas:
            if r in live:
                return LeaderAndIsr(r, current.leader_epoch + 1, (r,), controller_epoch), True
    return None, False


def controlled_shutdown(current: LeaderAndIsr, replicas: Sequence[int], live: AbstractSet[int],
                        shutting_down: AbstractSet[int], controller_epoch: int) -> LeaderAndIsr | None:
    """Leader = first replica live, in the ISR and not shutting down; ISR minus shutting-down brokers."""
    isr = tuple(b for b in current.isr if b not in shutting_down)
    for r in replicas:
        if r in live and r in isr and r not in shutting_down:
            return LeaderAndIsr(r, current.leader_epoch + 1, isr, controller_epoch)
    return None


def preferred(current: LeaderAndIsr, replicas: Sequence[int], live: AbstractSet[int],
              controller_epoch: int) -> LeaderAndIsr | None:
    """Leader = the assignment head if live and in the ISR; the ISR is unchanged."""
    if not replicas:
        return None
    head = replicas[0]
    if head == current.leader or head not in live or head not in current.isr:
        return None
    return LeaderAndIsr(head, current.leader_epoch + 1, current.isr, controller_epoch)


def remove_from_isr(current: LeaderAndIsr, gone: AbstractSet[int], controller_epoch: int) -> LeaderAndIsr | None:
    """Drop ``gone`` replicas from the ISR, never emptying it (Kafka 2.8's removeReplicasFromIsr).

    Kafka removes one replica at a time, in id order, and writes each removal
    as ``newLeaderAndIsr``: leader epoch + 1.  So the epoch goes up once per
    ``gone`` ISR member (the last member, which stays, included: it loses the
    leadership), and once for a gone leader outside its ISR.  A leader among
    them leaves the partition offline (leader -1).  None when nothing changes.
    """
    if current.leader not in gone and gone.isdisjoint(current.isr):
        return None
    isr = list(current.isr)
    writes = 0
    for b in (sorted(gone) if len(gone) > 1 else gone):
        if b in isr:
            writes += 1
            if len(isr) > 1:
                isr.remove(b)
    leader = -1 if current.leader in gone else current.leader
    if leader == current.leader and tuple(isr) == current.isr:
        return None
    if leader != current.leader and current.leader not in current.isr:
        writes += 1
    return LeaderAndIsr(leader, current.leader_epoch + writes, tuple(isr), controller_epoch)
