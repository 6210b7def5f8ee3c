"""Clusters bigger than a machine: the simulator's run of many brokers, partitions and groups through a controller
failover and a coordinator failover (bench/sim_scale.py measures it; docs/simulation.md, "Clusters bigger than a
machine").

The load grows with the brokers: ``partitions_per_broker`` partitions of a topic with no traffic (``bulk``, three
replicas each: the control plane's load, every one led, followed and in the controller's context) and
``groups_per_broker`` consumer groups of one member each, committing their offsets of the workload's topic every
``commit_interval_ms`` to ``offsets_partitions`` partitions of ``__consumer_offsets``.  Once every group has
formed, the controller is killed (SIGKILL: its ZooKeeper session ends after the session timeout, and another
broker is elected and loads every partition's state), then, once the new controller is in place, the broker
coordinating ``g1`` (with the other groups of its offsets partitions, and those of the other partitions it
leads).  Each broker comes back ``down_ms`` later.

Kafka's periodic metadata resend is kafkasim's own deviation (docs/deviations.md), off here as in Kafka
(``kafkasim.controller.metadata.resend.interval.ms`` 0): with it, every broker would get every partition's state
every 2 s.
"""
from __future__ import annotations

from dataclasses import dataclass

from chaos.schedule import Fault
from sim.run import SimOptions

BULK = "bulk"


@dataclass(frozen=True)
class Scale:
    brokers: int
    partitions_per_broker: int = 1000
    groups_per_broker: int = 100
    offsets_partitions: int = 50
    seed: int = 1
    controller_kill_at_ms: int = 10_000      # after the workload starts (every group formed by then)
    coordinator_kill_at_ms: int = 25_000
    down_ms: int = 8_000
    duration_s: float = 40.0
    commit_interval_ms: int = 5_000
    heartbeat_interval_ms: int = 3_000
    session_timeout_ms: int = 30_000
    poll_interval_ms: float = 5_000.0
    rate: float = 20.0
    invariants: bool = True
    judge: bool = False        # the end-of-run checkers over the whole history (minutes at 100 brokers)

    @property
    def partitions(self) -> int:
        return self.brokers * self.partitions_per_broker

    @property
    def groups(self) -> int:
        return self.brokers * self.groups_per_broker


def options(s: Scale) -> SimOptions:
    """The simulated run of ``s``: its cluster, workload and the two failovers."""
    faults = [Fault(id=0, at_ms=s.controller_kill_at_ms, heal_at_ms=s.controller_kill_at_ms + s.down_ms,
                    kind="kill", target="controller", seed=1),
              Fault(id=1, at_ms=s.coordinator_kill_at_ms, heal_at_ms=s.coordinator_kill_at_ms + s.down_ms,
                    kind="kill", target="coordinator:g1", seed=2)]
    return SimOptions(seed=s.seed, brokers=s.brokers, groups=s.groups, members=1, duration_s=s.duration_s,
                      partitions=1, producers=1, rate=s.rate, stall_every_ms=None,
                      offsets_partitions=s.offsets_partitions, commit_interval_ms=s.commit_interval_ms,
                      session_timeout_ms=s.session_timeout_ms, heartbeat_interval_ms=s.heartbeat_interval_ms,
                      poll_interval_ms=s.poll_interval_ms, schedule=faults, extra_topics={BULK: s.partitions},
                      config={"metadata_resend_interval_ms": 0, "min_session_timeout_ms": 500},
                      invariants=s.invariants, judge=s.judge)
