"""Which __consumer_offsets partitions this broker coordinates, and the order of a load and an unload, sans-IO.

Kafka's GroupMetadataManager on a leadership change of an offsets partition: a gain loads the partition
(a new :class:`coordinator.core.PartitionCoordinator` answers "loading" meanwhile, then replays the log and
owns the partition), a loss unloads it; each only if its leader epoch is not older than the latest seen for
that partition (KAFKA-10614).  The broker's coordinator shell (node/shells/coordinator_shell.py) and the
simulator's (sim/coordinators.py) hold one :class:`Coordinatorship` and carry out its steps with their own
I/O (the log read, threads or simulated time); :func:`start_appends` is how both hand a core's appends to the
offsets partition.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from coordinator.core import AppendCmd, GroupConfig, Output, PartitionCoordinator
from kafkacommon.hashing import partition_for


@dataclass(eq=False)
class Slot:
    """One offsets partition this broker coordinates: its core, the leader epoch it was loaded for, and
    whatever the shell keeps with it (the broker's lock)."""
    core: PartitionCoordinator
    epoch: int
    io: Any = None


class Coordinatorship:
    def __init__(self, config: GroupConfig, new_member_suffix: Callable[[], str],
                 planted_load_to_hw: bool = False) -> None:
        self.config = config
        self.new_member_suffix = new_member_suffix
        # a planted bug only the simulator sets (sim/bugs.py "load-to-hw"): the load stops at the HW checkpoint
        self.planted_load_to_hw = planted_load_to_hw
        self.slots: dict[int, Slot] = {}
        self.epochs: dict[int, int] = {}   # the latest leader epoch seen per partition (load/unload fencing)

    def slot_for(self, group_id: str, num_partitions: int) -> Slot | None:
        """The group's offsets partition's slot here; None: this broker is not its coordinator."""
        return self.slots.get(partition_for(group_id, num_partitions))

    def is_current(self, slot: Slot) -> bool:
        return self.slots.get(slot.core.partition) is slot

    def begin_load(self, partition: int, epoch: int, now_ms: int, io: Any = None) -> tuple[Slot, Output] | None:
        """Leadership gained: a new slot, loading (its core's output to carry out); None when there is
        nothing to load: the epoch is older than the latest seen, or the partition is already here (still
        the leader in a newer epoch, e.g. after an ISR change: the cached groups stay, as Kafka keeps the
        groups already in its cache on a repeated load)."""
        if epoch < self.epochs.get(partition, -1):
            return None
        self.epochs[partition] = epoch
        old = self.slots.get(partition)
        if old is not None:
            old.epoch = epoch
            return None
        slot = Slot(PartitionCoordinator(partition, self.config, self.new_member_suffix), epoch, io)
        out = slot.core.begin_load(now_ms)
        self.slots[partition] = slot
        return slot, out

    def load_end_offset(self, checkpointed_hw: Callable[[], int]) -> int | None:
        """Where the load's read stops: None, the log end offset (as Kafka's); only with the planted bug
        load-to-hw, the partition's last HW checkpoint (``checkpointed_hw()``)."""
        return checkpointed_hw() if self.planted_load_to_hw else None

    def finish_load(self, slot: Slot, now_ms: int, end_offset: int | None = None) -> Output:
        """Every record replayed, up to ``end_offset`` (or the read failed: as Kafka, the partition becomes
        owned anyway)."""
        return slot.core.finish_load(now_ms, end_offset)

    def release(self, partition: int, epoch: int) -> Slot | None:
        """Leadership lost: the slot to unload (no longer routed to), or None (an older epoch, or none here)."""
        if epoch < self.epochs.get(partition, -1):
            return None
        self.epochs[partition] = max(epoch, self.epochs.get(partition, -1))
        return self.slots.pop(partition, None)

    def unload(self, slot: Slot, now_ms: int) -> tuple[int, Output]:
        """(groups it had, the core's output): parked requests are answered NOT_COORDINATOR."""
        groups = len(slot.core.group_ids())
        return groups, slot.core.unload(now_ms)


def start_appends(core: PartitionCoordinator, out: Output, append: Callable[[AppendCmd], int | None],
                  clock: Callable[[], int]) -> None:
    """The core's appends to its offsets partition, in the order it emitted them: ``append(cmd)`` -> the
    outcome when known at once (an error, acks 0/1), else None (``core.on_append_done`` is the shell's to
    call later).  An outcome known at once is fed back at once; what that outputs joins ``out``."""
    pending = list(out.appends)
    out.appends = []
    while pending:
        cmd = pending.pop(0)
        code = append(cmd)
        if code is not None:
            more = core.on_append_done(cmd.append_id, code, clock())
            pending.extend(more.appends)
            more.appends = []
            out.extend(more)
