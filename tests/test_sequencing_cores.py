"""The order of steps the broker's shells and the simulator share: controller/handlers.py (a controller event's
ZooKeeper reads, fenced writes, requests and log lines), coordinator/leadership.py (an offsets partition's load
and unload) and replication/roles.py (a LeaderAndIsr's role change).  Pure code, driven here with scripted
answers where a shell would do I/O: no processes."""
from __future__ import annotations

from controller import handlers as h
from controller.core import ControllerCore, ControllerSettings
from coordinator.core import GroupConfig
from coordinator.leadership import Coordinatorship
from replication import roles
from replication.partition import PartitionReplication
from replication.partition_types import ReplicaSettings
from kafkacommon.metadata import BrokerRegistration, TopicAssignment
from zk.exceptions import ControllerMovedError

LIVE = {b: BrokerRegistration(b, "127.0.0.1", 9000 + b, 0, epoch=100 + b) for b in (1, 2)}
TOPICS = {"t": TopicAssignment("t", {0: (1, 2)})}


class World:
    """Scripted answers to the handlers' commands, and what they asked for, in order."""

    def __init__(self, controller=None, fence_write: bool = False, log_dir_events: tuple = ()) -> None:
        self.controller = controller
        self.fence_write = fence_write
        self.log_dir_events = log_dir_events
        self.done: list = []

    def do(self, cmd):
        self.done.append(cmd)
        if isinstance(cmd, h.ReadController):
            return self.controller
        if isinstance(cmd, h.ReadControllerAndEpoch):
            return self.controller, (6, 2)
        if isinstance(cmd, h.TryElect):
            self.controller = 1
            return True, 7, 3
        if isinstance(cmd, h.ReadSnapshot):
            return h.Snapshot(6, 3, dict(LIVE), dict(TOPICS), 2, log_dir_events=self.log_dir_events)
        if isinstance(cmd, (h.CachedStates, h.ReadStates)):
            return {}
        if isinstance(cmd, h.WriteStates):
            if self.fence_write:
                raise ControllerMovedError("/controller_epoch moved")
            return {(w.topic, w.partition): 0 for w in cmd.writes}
        if isinstance(cmd, (h.Clock, h.MonoNs)):
            return 0
        return None

    def emitted(self) -> list[str]:
        return [c.name for c in self.done if isinstance(c, h.Emit)]


def handlers(zombie: bool = False) -> h.ControllerHandlers:
    settings = ControllerSettings(broker_id=1, offsets_replication_factor=100)   # no offsets topic
    return h.ControllerHandlers(ControllerCore(settings), 1, zombie=zombie)


def test_a_won_election_loads_the_context_sends_it_then_writes_fenced_then_sends_then_logs() -> None:
    ctl, world = handlers(), World()
    h.run(ctl.elect(), world.do)
    kinds = [type(c).__name__ for c in world.done if not isinstance(c, (h.Emit, h.Clock, h.MonoNs))]
    # Kafka's onControllerFailover: the log dir event notifications read (with the context, in its first round
    # trip, which goes out behind the election multi), UpdateMetadata (and the unchanged states) to every broker
    # before deciding, then the decisions; after acting, /admin/reassign_partitions read (its watch armed), then
    # the deletions resumed
    assert kinds == ["ReadControllerAndEpoch", "TryElect", "ReadSnapshot", "CachedStates", "ReadStates",
                     "Send", "WriteStates", "Send", "ReadZkReassignment", "Later"]
    elect = next(c for c in world.done if isinstance(c, h.TryElect))
    load = next(c for c in world.done if isinstance(c, h.ReadSnapshot))
    assert elect == h.TryElect((6, 2), then=load) and load.log_dir_events and load.watch_brokers
    write = next(c for c in world.done if isinstance(c, h.WriteStates))
    assert write.fence == 3 and [(w.topic, w.partition, w.state.leader) for w in write.writes] == [("t", 0, 1)]
    names = world.emitted()   # the core's own events (controller_context_loaded, ...) come between
    assert names[0] == "controller_elected" and names[-1] == "controller_failover_done"
    assert names.index("partition_state_written") < names.index("partition_states_written")
    assert ctl.core.active and ctl.active_controller_id == 1 and world.done[-1] == h.Later("topic_deletion")


def test_a_deleted_controller_znode_is_read_once_before_the_election() -> None:
    ctl, world = handlers(), World()
    h.run(ctl.controller_change(), world.do)
    kinds = [type(c).__name__ for c in world.done if not isinstance(c, (h.Emit, h.Clock, h.MonoNs))]
    assert kinds[:3] == ["ReadControllerAndEpoch", "TryElect", "ReadSnapshot"] and ctl.core.active
    assert next(c for c in world.done if isinstance(c, h.TryElect)).epoch == (6, 2)   # read with /controller
    elected = next(c for c in world.done if isinstance(c, h.Emit) and c.name == "controller_elected")
    assert elected.fields["event_mono_ns"] == 0   # the instant the event was taken up (World's clock)


def test_the_log_dir_notifications_read_with_the_context_are_deleted_fenced() -> None:
    ctl, world = handlers(), World(log_dir_events=("0000000003", "0000000004"))
    h.run(ctl.elect(), world.do)
    kinds = [type(c).__name__ for c in world.done if not isinstance(c, (h.Emit, h.Clock, h.MonoNs))]
    assert kinds[:4] == ["ReadControllerAndEpoch", "TryElect", "ReadSnapshot", "DeleteLogDirEvents"]
    assert h.DeleteLogDirEvents(3, ("0000000003", "0000000004")) in world.done and ctl.core.active


def test_a_fenced_write_resigns_and_a_zombie_writes_unfenced() -> None:
    ctl, world = handlers(), World(fence_write=True)
    h.run(ctl.elect(), world.do)
    assert not ctl.core.active
    names = world.emitted()
    assert names.index("zk_write_fenced") + 1 == names.index("controller_resigned")
    assert "partition_state_written" not in names and world.done[-1] != h.Later("topic_deletion")
    assert any(isinstance(c, h.CloseChannels) for c in world.done)
    zombie, world = handlers(zombie=True), World()
    h.run(zombie.elect(), world.do)
    assert next(c for c in world.done if isinstance(c, h.WriteStates)).fence == -1


def test_someone_elses_controller_is_followed_and_our_orphan_deleted() -> None:
    ctl, world = handlers(), World(controller=2)
    h.run(ctl.elect(), world.do)
    io = [c for c in world.done if not isinstance(c, (h.Clock, h.MonoNs))]   # the clocks are not I/O
    assert ctl.active_controller_id == 2 and not ctl.core.active and io == [h.ReadControllerAndEpoch()]
    ctl, world = handlers(), World(controller=1)      # /controller says us, but we do not act (KAFKA-13407)
    h.run(ctl.elect(), world.do)
    io = [c for c in world.done if not isinstance(c, (h.Clock, h.MonoNs))]
    assert isinstance(io[1], h.DeleteControllerIfOurs) and ctl.orphan_suspected   # not deleted: retried


def test_an_offsets_partition_loads_once_per_leadership_and_older_epochs_are_ignored() -> None:
    cs = Coordinatorship(GroupConfig(), lambda: "x")
    slot, _out = cs.begin_load(3, 5, now_ms=0)
    assert slot.core.status == "loading" and cs.is_current(slot)
    assert cs.begin_load(3, 6, now_ms=0) is None and slot.epoch == 6    # a newer epoch of the same leadership
    assert cs.release(3, 4) is None and cs.is_current(slot)             # an older loss is ignored
    cs.finish_load(slot, now_ms=0)
    assert slot.core.status == "active"
    assert cs.release(3, 6) is slot and not cs.is_current(slot)
    assert cs.begin_load(3, 5, now_ms=0) is None                        # older than the latest seen
    assert cs.load_end_offset(lambda: 42) is None
    assert Coordinatorship(GroupConfig(), lambda: "x", planted_load_to_hw=True).load_end_offset(lambda: 42) == 42


class Log:
    log_start_offset, log_end_offset = 0, 10

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return epoch, self.log_end_offset


def test_a_leader_and_isr_is_an_isr_update_a_leadership_or_a_followership() -> None:
    repl = PartitionReplication("t", 0, 1, ReplicaSettings())
    assert roles.leader_and_isr_action(None, 1, 1, 0) == roles.LEADER
    assert roles.leader_and_isr_action(None, 1, 2, 0) == roles.FOLLOWER
    change = roles.become_leader(repl, Log(), latest_cached_epoch=2, leader_epoch=3, isr=(1, 2), replicas=(1, 2),
                                 zk_version=4, live=frozenset({1, 2}), now_ms=0)
    assert change.is_leader and change.epoch_start == (3, 10) and change.fetch_from is None
    assert roles.leader_and_isr_action(repl, 1, 1, 3) == roles.ISR
    assert roles.isr_update_is_newer(repl, 3, 5) and not roles.isr_update_is_newer(repl, 3, 4)
    assert roles.become_leader(repl, Log(), 3, 3, (1, 2), (1, 2), 5, None, 0).epoch_start is None
    change = roles.become_follower(repl, 2, 4, (1, 2), (1, 2), 6)
    assert not change.is_leader and change.fetch_from == (2, 4) and change.events[0][0] == "leadership_lost"
    assert roles.become_follower(repl, -1, 5, (1,), (1, 2), 7).fetch_from is None
    # a broker shutting down follows without fetching (Kafka's makeFollowers skips adding the fetcher)
    change = roles.become_follower(repl, 2, 6, (2,), (1, 2), 8, shutting_down=True)
    assert not change.is_leader and change.fetch_from is None and change.leader_epoch == 6
    assert ("follower_fetch_skipped", {"topic": "t", "partition": 0, "leader": 2, "leader_epoch": 6,
                                       "reason": "shutting_down"}) in change.events


def test_a_followers_fetch_answer_resets_backs_off_truncates_or_appends() -> None:
    repl = PartitionReplication("t", 0, 1, ReplicaSettings())
    roles.become_follower(repl, 2, 1, (1, 2), (1, 2), 1)
    log = Log()
    assert roles.follower_fetch_answer(1, None, 50, log, repl) == roles.FetchAnswer(roles.RESET, 50)  # 1: out of range
    assert roles.follower_fetch_answer(1, None, 5, log, repl).kind == roles.FAILED     # the leader has what we lack
    # out of range with our log past the leader's end (it knew no epoch at or below our last): cut to its end
    assert roles.follower_fetch_answer(1, None, 0, log, repl, leader_log_end=7) == roles.FetchAnswer(roles.TRUNCATE, 7)
    assert roles.follower_fetch_answer(1, None, 0, log, repl, leader_log_end=12).kind == roles.FAILED
    assert roles.follower_fetch_answer(6, None, None, log, repl).kind == roles.FAILED
    assert roles.follower_fetch_answer(0, (0, 4), None, log, repl) == roles.FetchAnswer(roles.TRUNCATE, 4, True)
    step = roles.follower_fetch_answer(0, None, 3, log, repl)
    assert step.kind == roles.APPEND
    # an answer to a fetch from another offset than where the log now ends is ignored, errors and all
    # (Kafka's fetcher processes an answer only at the partition's current fetch offset)
    assert roles.follower_fetch_answer(0, None, 3, log, repl, fetch_offset=10).kind == roles.APPEND
    assert roles.follower_fetch_answer(0, None, 3, log, repl, fetch_offset=12).kind == roles.STALE
    assert roles.follower_fetch_answer(0, (0, 4), None, log, repl, fetch_offset=8).kind == roles.STALE
    assert roles.follower_fetch_answer(1, None, 50, log, repl, fetch_offset=8).kind == roles.STALE
    _events, log_start = roles.follower_moved(step, repl, log, leader_hw=8, leader_log_start=3)
    assert repl.high_watermark == 8 and log_start == 3     # the leader's log start, never past our HW
