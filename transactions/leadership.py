"""Which __transaction_state partitions this broker coordinates, and the order of a load and an unload, sans-IO.

Kafka's TransactionStateManager on a leadership change of a transaction state partition: a gain loads the
partition (a new :class:`transactions.core.TxnCoordinator` answers COORDINATOR_LOAD_IN_PROGRESS meanwhile,
then replays the log and owns the partition, its coordinator epoch being the leader epoch), a loss unloads
it; each only if its leader epoch is not older than the latest seen for that partition.  The broker's
transaction coordinator shell (node/shells/txn_shell.py) and the simulator's hold one
:class:`TxnCoordinatorship` and carry out its steps with their own I/O; :func:`start_appends` is how both
hand a core's appends to the partition.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from kafkacommon.hashing import partition_for
from transactions.config import TxnConfig
from transactions.core import AppendCmd, Output, TxnCoordinator


@dataclass(eq=False)
class TxnSlot:
    core: TxnCoordinator
    epoch: int
    io: Any = None


class TxnCoordinatorship:
    def __init__(self, config: TxnConfig, new_producer_id: Callable[[], int]) -> None:
        self.config = config
        self.new_producer_id = new_producer_id
        self.slots: dict[int, TxnSlot] = {}
        self.epochs: dict[int, int] = {}

    def slot_for(self, transactional_id: str, num_partitions: int) -> TxnSlot | None:
        return self.slots.get(partition_for(transactional_id, num_partitions))

    def is_current(self, slot: TxnSlot) -> bool:
        return self.slots.get(slot.core.partition) is slot

    def begin_load(self, partition: int, epoch: int, now_ms: int, io: Any = None) -> tuple[TxnSlot, Output] | None:
        """Leadership gained: a new slot, loading; None when the epoch is older than the latest seen.  A newer
        epoch of a partition already here loads it again (Kafka's onElection always reloads, with the new
        coordinator epoch its markers carry)."""
        if epoch < self.epochs.get(partition, -1) or (partition in self.slots and self.slots[partition].epoch == epoch):
            return None
        self.epochs[partition] = epoch
        slot = TxnSlot(TxnCoordinator(partition, self.config, self.new_producer_id), epoch, io)
        out = slot.core.begin_load(epoch, now_ms)
        old = self.slots.get(partition)
        if old is not None:
            out = old.core.unload(now_ms).extend(out)
        self.slots[partition] = slot
        return slot, out

    def finish_load(self, slot: TxnSlot, now_ms: int) -> Output:
        return slot.core.finish_load(now_ms)

    def release(self, partition: int, epoch: int) -> TxnSlot | None:
        if epoch < self.epochs.get(partition, -1):
            return None
        self.epochs[partition] = max(epoch, self.epochs.get(partition, -1))
        return self.slots.pop(partition, None)

    def unload(self, slot: TxnSlot, now_ms: int) -> tuple[int, Output]:
        count = len(slot.core.txns)
        return count, slot.core.unload(now_ms)


def start_appends(core: TxnCoordinator, out: Output, append: Callable[[AppendCmd], int | None],
                  clock: Callable[[], int]) -> None:
    """The core's appends, in the order it emitted them: ``append(cmd)`` -> the outcome when known at once (an
    error), else None (``core.on_append_done`` is the shell's to call later); what an outcome known at once
    outputs joins ``out``."""
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
