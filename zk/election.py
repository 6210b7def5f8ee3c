"""The controller election's side of kafkasim's ZooKeeper door (a mixin of ``ZkClient``): /controller and
/controller_epoch read, the election multi (Kafka's registerControllerAndIncrementControllerEpoch), an orphan
/controller deleted.

A failover's reads are pipelined where ZooKeeper's order allows it (one session's requests are answered in the
order they were sent): /controller and /controller_epoch are read in one round trip, and the reads a new
controller makes first (:meth:`ControllerElection.try_elect_controller`'s ``then``) go out right behind the
election multi, so that they see the state after it, as Kafka's reads after its election do, without a round
trip of their own.
"""
from __future__ import annotations

from typing import Any, Callable

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from zk import codecs, paths, rules
from zk.batch import GET_DATA
from zk.errors import translate_errors
from zk.retry import until_connected
from zk.stat import WatchEvent, watcher


@translate_errors
class ControllerElection:
    """Every public method raises zk/errors.py's exceptions, never kazoo's."""

    kz: Any
    read_many: Callable[..., list]
    session_id: int

    @until_connected
    def read_controller(self, watch: Callable[[WatchEvent], None] | None = None) -> int | None:
        """The active controller's broker id (None when absent); sets a watch when given."""
        return self._read_controller(watch, with_epoch=False)[0]

    @until_connected
    def read_controller_with_epoch(self, watch: Callable[[WatchEvent], None] | None = None
                                   ) -> tuple[int | None, tuple[int, int] | None]:
        """(the active controller's broker id or None, (epoch, zkVersion) of /controller_epoch or None when it is
        missing) in one round trip; sets the /controller watch when given."""
        return self._read_controller(watch, with_epoch=True)

    def _read_controller(self, watch: Callable[[WatchEvent], None] | None, with_epoch: bool
                         ) -> tuple[int | None, tuple[int, int] | None]:
        # pipelined: the exists (its watch fires on a creation too), /controller's data, /controller_epoch's
        exists_r = self.kz.exists_async(paths.CONTROLLER, watch=watcher(watch))
        controller_r = self.kz.get_async(paths.CONTROLLER)
        epoch_r = self.kz.get_async(paths.CONTROLLER_EPOCH) if with_epoch else None
        stat = exists_r.get()   # bounded waits (zk/bounded.py)
        controller = epoch = None
        try:
            data, _ = controller_r.get()
            controller = codecs.decode_controller(data).broker_id if stat is not None else None
        except NoNodeError:
            pass
        if epoch_r is not None:
            try:
                edata, estat = epoch_r.get()
                epoch = (codecs.decode_controller_epoch(edata), estat.version)
            except NoNodeError:
                pass
        return controller, epoch

    @until_connected
    def read_controller_and_epoch(self) -> tuple[int | None, int]:
        """(active controller id or None, controller epoch), read together in one multiRead."""
        ctl, epoch = self.read_many([(GET_DATA, paths.CONTROLLER), (GET_DATA, paths.CONTROLLER_EPOCH)])
        controller = None if isinstance(ctl, Exception) else codecs.decode_controller(ctl[0]).broker_id
        return controller, 0 if isinstance(epoch, Exception) else codecs.decode_controller_epoch(epoch[0])

    def delete_controller_if_ours(self) -> bool:
        """Delete /controller when our session owns it (an orphan: we are not acting on it)."""
        try:
            _, stat = self.kz.get(paths.CONTROLLER)
        except NoNodeError:
            return False
        if stat.ephemeralOwner != self.session_id:
            return False
        try:
            self.kz.delete(paths.CONTROLLER, version=stat.version)
        except (NoNodeError, BadVersionError):
            return False
        return True

    @until_connected
    def read_controller_epoch(self) -> tuple[int, int]:
        """(epoch, zkVersion) of /controller_epoch, creating it with 0 when missing."""
        try:
            data, stat = self.kz.get(paths.CONTROLLER_EPOCH)
        except NoNodeError:
            try:
                self.kz.create(paths.CONTROLLER_EPOCH, codecs.encode_controller_epoch(0))
            except NodeExistsError:
                pass
            data, stat = self.kz.get(paths.CONTROLLER_EPOCH)
        return codecs.decode_controller_epoch(data), stat.version

    def try_elect_controller(self, broker_id: int, timestamp_ms: int, epoch: tuple[int, int] | None = None,
                             then: Callable[[], Any] | None = None) -> tuple[bool, int, int]:
        """Kafka's registerControllerAndIncrementControllerEpoch -> (won, epoch, epoch_zk_version).

        One multi: create the ephemeral /controller and set /controller_epoch to epoch+1 at its zkVersion.
        ``epoch``: /controller_epoch's (epoch, zkVersion) as the caller read it (with /controller); None: read
        it here first (created with 0 when missing).  ``then()`` sends requests right behind the multi (their
        answers are the caller's to collect), so that they see the state after it and share its round trip;
        it runs whether the election is won or not.  When lost, epoch is the current one as read.
        """
        current, version = self.read_controller_epoch() if epoch is None else epoch
        new_epoch = current + 1
        tx = self.kz.transaction()
        for op in rules.election_ops(broker_id, timestamp_ms, current, version):
            if op[0] == "create":
                tx.create(op[1], op[2], ephemeral=op[3])
            else:
                tx.set_data(op[1], op[2], op[3])
        pending = tx.commit_async()
        if then is not None:
            then()
        results = pending.get()   # bounded (zk/bounded.py)
        if not any(isinstance(r, Exception) for r in results):
            return True, new_epoch, version + 1
        try:
            cdata, _ = self.kz.get(paths.CONTROLLER)
            edata, estat = self.kz.get(paths.CONTROLLER_EPOCH)
        except NoNodeError:
            return False, current, version
        if rules.won_after_failure(broker_id, new_epoch, cdata, edata):
            return True, new_epoch, estat.version
        return False, codecs.decode_controller_epoch(edata), estat.version
