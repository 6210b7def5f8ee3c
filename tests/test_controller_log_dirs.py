"""The controller's side of log directory failures (controller/log_dirs.py, controller/handlers.py): pure, scripted."""
from __future__ import annotations

from controller import handlers as h
from controller.core import ControllerCore, ControllerSettings, LeaderAndIsrCmd, StopReplicaCmd, UpdateMetadataCmd
from kafkacommon.errors import KAFKA_STORAGE_ERROR, NONE
from kafkacommon.metadata import BrokerRegistration, LeaderAndIsr, TopicAssignment

LIVE = {b: BrokerRegistration(b, "127.0.0.1", 9000 + b, 0, epoch=100 + b) for b in (1, 2, 3)}
# t-0 led by 2 (ISR 2,3,1), t-1 led by 3 (2 a follower), u-0 not on broker 2
TOPICS = {"t": TopicAssignment("t", {0: (2, 3, 1), 1: (3, 2, 1)}), "u": TopicAssignment("u", {0: (1, 3)})}
STATES = {("t", 0): (LeaderAndIsr(2, 4, (2, 3, 1), 1), 7), ("t", 1): (LeaderAndIsr(3, 2, (3, 2, 1), 1), 3),
          ("u", 0): (LeaderAndIsr(1, 0, (1, 3), 1), 0)}


def core() -> ControllerCore:
    c = ControllerCore(ControllerSettings(broker_id=1, offsets_replication_factor=100))
    c.on_failover(1, 0, LIVE, TOPICS, dict(STATES), 0)
    return c


def test_a_log_dir_event_asks_the_broker_about_every_replica_it_hosts():
    c = core()
    plan = c.on_log_dir_event([2, 9])   # 9: not registered
    assert not plan.writes and plan.query_replicas == {2}
    assert [e.name for e in plan.observed] == ["log_dir_event_handled"]
    reqs = c.commit(plan, {})
    (lai,) = [cmd for cmd in reqs[2] if isinstance(cmd, LeaderAndIsrCmd)]
    assert sorted((v.topic, v.partition, v.state.leader_epoch) for v in lai.partitions) == [("t", 0, 4), ("t", 1, 2)]
    assert not any(isinstance(cmd, LeaderAndIsrCmd) for b in (1, 3) for cmd in reqs.get(b, ()))


def test_storage_errors_in_the_answer_move_leaders_shrink_isrs_and_stop_the_replicas():
    c = core()
    plan = c.on_leader_and_isr_response(2, 102, {("t", 0): KAFKA_STORAGE_ERROR, ("t", 1): NONE})
    assert c.offline_replicas == {2: {("t", 0)}}
    (w,) = plan.writes
    # 2 led t-0: the first replica online and in the ISR leads, 2 leaves the ISR (leader epoch + 1)
    assert (w.topic, w.partition, w.state.leader, w.state.isr, w.state.leader_epoch) == ("t", 0, 3, (3, 1), 5)
    assert plan.stop_replicas == {2: [("t", 0)]}
    assert [e.name for e in plan.observed] == ["replicas_offline"]
    assert plan.observed[0].fields == {"broker_id": 2, "replicas": ["t-0"], "led": ["t-0"]}
    reqs = c.commit(plan, {("t", 0): 8})
    assert StopReplicaCmd((("t", 0),)) in reqs[2]
    assert not any(isinstance(cmd, LeaderAndIsrCmd) for cmd in reqs[2])   # not told the state that removed it
    assert any(isinstance(cmd, LeaderAndIsrCmd) for cmd in reqs[3])
    # the same answer again changes nothing; an election never picks the offline replica
    assert c.on_leader_and_isr_response(2, 102, {("t", 0): KAFKA_STORAGE_ERROR}).empty
    c.states[("t", 0)] = (LeaderAndIsr(3, 5, (3, 2), 1), 8)   # (as if 2 had come back into the ISR)
    assert c.elect_preferred([("t", 0)]).writes == []        # 2 is preferred, but offline there


def test_a_follower_replica_going_offline_only_leaves_the_isr_and_everyone_hears():
    c = core()
    plan = c.on_leader_and_isr_response(2, 102, {("t", 1): KAFKA_STORAGE_ERROR})
    (w,) = plan.writes
    assert (w.state.leader, w.state.isr, w.reason) == (3, (3, 1), "isr_shrink_dead_replica")
    assert plan.metadata_to_all


def test_offline_replicas_are_forgotten_when_the_broker_restarts_and_stale_answers_are_ignored():
    c = core()
    assert c.on_leader_and_isr_response(2, 99, {("t", 0): KAFKA_STORAGE_ERROR}).empty   # an earlier incarnation
    c.on_leader_and_isr_response(2, 102, {("t", 0): KAFKA_STORAGE_ERROR})
    assert c.response_matters(2, {("t", 1): NONE}) and not c.response_matters(3, {("t", 1): NONE})
    bounced = dict(LIVE) | {2: BrokerRegistration(2, "127.0.0.1", 9002, 0, epoch=200)}
    c.on_broker_change(bounced)
    assert c.offline_replicas == {}
    # an answer of NONE brings a replica back (Kafka's onlineReplicas)
    c.on_leader_and_isr_response(2, 200, {("t", 0): KAFKA_STORAGE_ERROR})
    c.on_leader_and_isr_response(2, 200, {("t", 0): NONE})
    assert c.offline_replicas == {}


class World:
    def __init__(self, notes):
        self.notes, self.done = notes, []

    def do(self, cmd):
        self.done.append(cmd)
        if isinstance(cmd, h.ReadLogDirEvents):
            return self.notes
        if isinstance(cmd, h.WriteStates):
            return {(w.topic, w.partition): 0 for w in cmd.writes}
        if isinstance(cmd, (h.Clock, h.MonoNs)):
            return 0
        return None


def test_the_handler_asks_then_deletes_what_it_read_fenced():
    ctl = h.ControllerHandlers(core(), 1)
    world = World([("0000000003", 2), ("0000000004", None)])
    h.run(ctl.log_dir_event(), world.do)
    kinds = [type(c).__name__ for c in world.done if not isinstance(c, (h.Emit, h.Clock, h.MonoNs))]
    assert kinds == ["ReadLogDirEvents", "Send", "DeleteLogDirEvents"]
    assert world.done[-1] == h.DeleteLogDirEvents(0, ("0000000003", "0000000004"))
    send = next(c for c in world.done if isinstance(c, h.Send))
    assert set(send.requests) == {2} and isinstance(send.requests[2][0], (LeaderAndIsrCmd, UpdateMetadataCmd))
    world = World([])
    h.run(ctl.log_dir_event(), world.do)
    assert [type(c).__name__ for c in world.done] == ["ReadLogDirEvents"]
