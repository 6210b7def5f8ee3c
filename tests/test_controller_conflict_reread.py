"""A refused write's re-read (controller/handlers.py ``execute``), driven command by command: while a failover's
states come from the broker's metadata cache, a conflict re-reads only the plan's own partitions, and every other
stale state is still read and sent as read by the verification before the failover ends; otherwise every state is
read again.  The states live in a dict, the commands are answered in place (a sans-IO handler's unit test)."""
from __future__ import annotations

from controller import handlers
from controller.core import ControllerCore, ControllerSettings, LeaderAndIsrCmd
from kafkacommon.metadata import BrokerRegistration, LeaderAndIsr, TopicAssignment
from zk import paths
from zk.exceptions import StateVersionConflict

DEAD = 3
TOPIC = "t"
REPLICAS = {p: ((p % 3) + 1, ((p + 1) % 3) + 1, ((p + 2) % 3) + 1) for p in range(9)}


class Zk:
    """Partition states with zkVersions; conditional writes refused all together on a stale version."""

    def __init__(self, states):
        self.states = dict(states)
        self.reads: list[tuple] = []
        self.sent: list[dict] = []
        self.events: list[tuple[str, dict]] = []

    def do(self, cmd):
        if isinstance(cmd, handlers.ReadSnapshot):
            brokers = {b: BrokerRegistration(b, "127.0.0.1", 9000 + b, 1, epoch=b) for b in (1, 2)}
            return handlers.Snapshot(2, 2, brokers, {TOPIC: TopicAssignment(TOPIC, dict(REPLICAS))}, 2, {}, ())
        if isinstance(cmd, handlers.CachedStates):
            return self.cache
        if isinstance(cmd, handlers.ReadStates):
            self.reads.append(cmd.tps)
            return {tp: self.states[tp] for tp in cmd.tps if tp in self.states}
        if isinstance(cmd, handlers.WriteStates):
            for w in cmd.writes:
                if self.states[(w.topic, w.partition)][1] != w.zk_version:
                    raise StateVersionConflict(paths.partition_state(w.topic, w.partition))
            out = {}
            for w in cmd.writes:
                tp = (w.topic, w.partition)
                self.states[tp] = (w.state, self.states[tp][1] + 1)
                out[tp] = self.states[tp][1]
            return out
        if isinstance(cmd, handlers.Send):
            self.sent.append(cmd.requests)
        elif isinstance(cmd, handlers.Emit):
            self.events.append((cmd.name, cmd.fields))
        elif isinstance(cmd, (handlers.MonoNs, handlers.Clock)):
            return 0
        return None


def cluster():
    """ZooKeeper after a controlled shutdown of broker 3 (out of every ISR); a cache that missed its ISR
    shrinks (``loud``: the failover rewrites them from stale versions) and a leader moved behind its back
    (``quiet``: no write needed from the cache's view, but it is stale all the same)."""
    zk, cache = {}, {}
    for p, r in REPLICAS.items():
        isr = tuple(b for b in r if b != DEAD)
        zk[(TOPIC, p)] = (LeaderAndIsr(isr[0], 1, isr, 1), 1)
        cache[(TOPIC, p)] = (LeaderAndIsr(isr[0], 0, r, 1), 0) if p in (0, 1, 2) else zk[(TOPIC, p)]
    quiet = (TOPIC, 5)
    s, v = zk[quiet]
    zk[quiet] = (LeaderAndIsr(s.isr[1], s.leader_epoch + 1, s.isr, 1), v + 1)
    return zk, cache, [(TOPIC, p) for p in (0, 1, 2)], quiet


def sent_states(zk: Zk) -> dict:
    out = {}
    for requests in zk.sent:
        for cmds in requests.values():
            for c in cmds:
                if isinstance(c, LeaderAndIsrCmd):
                    for v in c.partitions:
                        out[(v.topic, v.partition)] = v.state
    return out


def test_a_failover_from_the_cache_re_reads_only_its_refused_partitions_and_still_sends_every_stale_state():
    states, cache, loud, quiet = cluster()
    zk = Zk(states)
    zk.cache = cache
    h = handlers.ControllerHandlers(ControllerCore(ControllerSettings(broker_id=1, auto_leader_rebalance=False)), 1)
    handlers.run(h.failover(2, 2), zk.do)
    conflicts = [f for n, f in zk.events if n == "zk_write_conflict"]
    assert len(conflicts) == 1 and conflicts[0]["states_read"] == len(loud)
    assert zk.reads[0] == tuple(loud), "the refused plan's own partitions, not every state"
    assert len(zk.reads[1]) == len(REPLICAS), "then the verification reads them all"
    verified = [f for n, f in zk.events if n == "controller_cache_verified"]
    assert verified[0]["stale"] == 1
    assert h.core.states == zk.states, "the context ends as ZooKeeper has it"
    last = sent_states(zk)
    for tp in loud + [quiet]:
        assert last[tp] == zk.states[tp][0], f"{tp}: stale in the cache, sent as read"
    assert not h.unverified


def test_a_conflict_outside_a_failover_from_the_cache_reads_every_state():
    states, cache, _loud, _quiet = cluster()
    zk = Zk(states)
    zk.cache = {}   # no cache: the failover reads ZooKeeper
    h = handlers.ControllerHandlers(ControllerCore(ControllerSettings(broker_id=1, auto_leader_rebalance=False)), 1)
    handlers.run(h.failover(2, 2), zk.do)
    assert not h.unverified and not [n for n, _ in zk.events if n == "zk_write_conflict"]
    # the controller believes (TOPIC, 7) led by 1, its preferred leader 2 alive; ZooKeeper has it moved on
    tp = (TOPIC, 7)
    s, v = zk.states[tp]
    assert REPLICAS[7][0] == 2 and s.isr == (2, 1)
    h.core.states[tp] = (LeaderAndIsr(1, s.leader_epoch, s.isr, 2), v)
    zk.states[tp] = (LeaderAndIsr(1, s.leader_epoch + 1, s.isr, 2), v + 1)
    zk.reads.clear()
    handlers.run(h.elect_leaders([tp]), zk.do)
    conflicts = [f for n, f in zk.events if n == "zk_write_conflict"]
    assert conflicts and conflicts[0]["states_read"] == len(REPLICAS)
    assert len(zk.reads[0]) == len(REPLICAS), "every state read again"
    assert h.core.states == zk.states, "the context as ZooKeeper has it"
