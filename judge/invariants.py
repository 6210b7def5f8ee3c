"""The checkers that hold at every instant of a run, as invariants checked while it runs (the simulator checks
them after every simulated event: docs/simulation.md, "Invariants at every step").

End-of-run checkers (judge/checkers.py) read a finished run; a violation that heals before the end (a high
watermark above a lagging ISR member's log end, which the member then catches up with) leaves nothing for them
to find.  :class:`Invariants` is fed what a run produces as it happens (each event a broker logs, each history
line) and asked about the cluster's live state through :class:`ClusterView`; each check returns the first
:class:`Violation`, named as the checkers name their anomalies:

* ``multiple-controllers``: two brokers elected for one controller epoch (``controller_elected``);
* ``leader-not-in-isr``: a partition state whose leader is not in its ISR (``partition_state_written``), or a
  broker that became leader outside the ISR it was given (``became_leader``);
* ``unclean-election``: a leader elected from outside the previous ISR while unclean elections are off;
* ``hw-above-isr-leo``: a leader's high watermark above the log end of a member of its ISR (the HW is what every
  ISR member has: Kafka's ``maybeIncrementLeaderHW`` takes the minimum over the maximal ISR); a member whose
  log lost records to a crash (``log_recovered`` with bytes cut: a torn tail, a power loss) is excused until it
  reaches the HW again, Kafka keeping acknowledged records in the ISR's memory, not on its disks;
* ``lost-write``: a broker that became leader without a record a producer had acknowledged (acks=all), at the
  partition's current leader epoch.  A broker paused across its ZooKeeper session's expiry can take up, when it
  resumes, a LeaderAndIsr sent to it before it was replaced, and become leader at a leader epoch ZooKeeper has
  already superseded, as Kafka 2.8 does (docs/chaos.md, "Zombie leaders"): such a fenced leader is not judged
  here.  It cannot acknowledge what its ISR's other members do not fetch from it; what it did acknowledge alone
  is judged by the end-of-run ``lost-write`` and ``lost-commit`` checkers;
* ``multiple-coordinators``: two brokers loading one group's offsets partition in the same leader epoch.

Pure: no clock, no I/O.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Protocol

TP = tuple[str, int]

KINDS = ("multiple-controllers", "leader-not-in-isr", "unclean-election", "hw-above-isr-leo", "lost-write",
         "multiple-coordinators")
#: the events after which a partition's high watermark is checked against its ISR's log ends
HW_EVENTS = frozenset({"hw_changed", "replica_isr_changed", "became_leader", "isr_updated", "log_truncated",
                       "log_recovered"})


@dataclass(frozen=True)
class Violation:
    kind: str
    message: str
    details: dict = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, **self.details}


class ClusterView(Protocol):
    """What the invariants read of a running cluster's state (the simulator's brokers, live)."""

    def leaders(self, tp: TP) -> Iterable[tuple[int, int, tuple[int, ...]]]:
        """Each running broker that acts as the leader of ``tp``: (broker, high watermark, its ISR)."""

    def log_end(self, broker: int, tp: TP) -> int | None:
        """``broker``'s log end offset of ``tp`` (on its disk, running or not), None when it has no log of it."""

    def record(self, broker: int, tp: TP, offset: int) -> Any:
        """The value at ``offset`` of ``broker``'s log of ``tp`` (as the history writes it), None past its end."""


class Invariants:
    """The invariants of one run.  ``unclean_election``: unclean elections are allowed (not a violation then)."""

    def __init__(self, view: ClusterView, unclean_election: bool = False) -> None:
        self.view = view
        self.unclean = unclean_election
        self._controllers: dict[int, int] = {}             # epoch -> broker
        self._coordinators: dict[tuple[int, int], int] = {}   # (offsets partition, leader epoch) -> broker
        self._acked: dict[TP, dict[int, Any]] = {}          # acknowledged records: tp -> {offset: value}
        self._excused: set[tuple[int, TP]] = set()          # (broker, tp) whose log lost records to a crash
        self._written_epoch: dict[TP, int] = {}             # the latest leader epoch written to ZooKeeper
        self.fenced_leaders = 0                             # became_leader events at a superseded leader epoch

    # ------------------------------------------------------------------ feeding

    def history(self, line: dict[str, Any]) -> None:
        """A history line: an acknowledged acks=all send is remembered (judge/checks_log.py's ``lost-write``
        judges the same sends)."""
        if line.get("f") != "send" or line.get("type") != "ok":
            return
        v = line.get("value")
        if not isinstance(v, dict) or not isinstance(v.get("topic"), str) or not isinstance(v.get("offset"), int):
            return
        if v.get("acks") not in (None, -1, "-1", "all"):
            return
        self._acked.setdefault((v["topic"], v["partition"]), {})[v["offset"]] = v.get("value")

    def event(self, e: dict[str, Any]) -> Violation | None:
        """One broker event, as logged: the invariants it can break, checked on the state after it."""
        t = e.get("type")
        if t == "controller_elected":
            return self._controller(e)
        if t == "partition_state_written":
            return self._state_written(e)
        if t == "coordinator_loaded":
            return self._coordinator(e)
        if t == "log_recovered" and e.get("truncated_bytes"):
            self._excused.add((e["broker"], (e["topic"], e["partition"])))
        if t == "became_leader":
            v = self._became_leader(e)
            if v is not None:
                return v
        if t in HW_EVENTS and "topic" in e:
            return self.hw((e["topic"], e["partition"]))
        return None

    # ------------------------------------------------------------------ the invariants

    def _controller(self, e: dict[str, Any]) -> Violation | None:
        epoch, broker = e.get("epoch"), e.get("broker")
        other = self._controllers.setdefault(epoch, broker)
        if other != broker:
            return Violation("multiple-controllers", f"controller epoch {epoch} was won by brokers "
                             f"{sorted((other, broker))}", {"epoch": epoch, "brokers": sorted((other, broker))})
        return None

    def _state_written(self, e: dict[str, Any]) -> Violation | None:
        leader, isr = e.get("leader"), e.get("isr") or []
        epoch = e.get("leader_epoch")
        if isinstance(epoch, int):
            key = (e.get("topic"), e.get("partition"))
            fresh = e.get("reason") == "new_partition"       # a topic created again starts from epoch 0
            self._written_epoch[key] = epoch if fresh else max(epoch, self._written_epoch.get(key, epoch))
        tp = f"{e.get('topic')}/{e.get('partition')}"
        if isinstance(leader, int) and leader >= 0 and leader not in isr:
            return Violation("leader-not-in-isr", f"{tp}: leader {leader} written with ISR {list(isr)} "
                             f"(leader epoch {e.get('leader_epoch')})", {"topic": e.get("topic"),
                             "partition": e.get("partition"), "leader": leader, "isr": list(isr)})
        prev_isr, prev_leader = e.get("previous_isr"), e.get("previous_leader")
        if not self.unclean and isinstance(leader, int) and leader >= 0 and prev_isr is not None \
                and prev_leader != leader and (leader not in prev_isr or e.get("reason") == "unclean_election"):
            return Violation("unclean-election", f"{tp}: broker {leader} became leader (leader epoch "
                             f"{e.get('leader_epoch')}, reason {e.get('reason')}) though it was not in the previous "
                             f"ISR {list(prev_isr)}", {"topic": e.get("topic"), "partition": e.get("partition"),
                             "leader": leader, "previous_isr": list(prev_isr)})
        return None

    def _coordinator(self, e: dict[str, Any]) -> Violation | None:
        key = (e.get("partition"), e.get("leader_epoch"))
        other = self._coordinators.setdefault(key, e.get("broker"))
        if other != e.get("broker"):
            return Violation("multiple-coordinators", f"__consumer_offsets/{key[0]} was loaded in leader epoch "
                             f"{key[1]} by brokers {sorted((other, e.get('broker')))}: two coordinators of its "
                             "groups", {"partition": key[0], "leader_epoch": key[1],
                                        "brokers": sorted((other, e.get("broker")))})
        return None

    def _became_leader(self, e: dict[str, Any]) -> Violation | None:
        broker, tp = e.get("broker"), (e.get("topic"), e.get("partition"))
        isr = e.get("isr") or []
        if broker not in isr:
            return Violation("leader-not-in-isr", f"{tp[0]}/{tp[1]}: broker {broker} became leader (leader epoch "
                             f"{e.get('leader_epoch')}) with ISR {list(isr)}", {"topic": tp[0], "partition": tp[1],
                             "leader": broker, "isr": list(isr)})
        epoch = e.get("leader_epoch")
        if isinstance(epoch, int) and epoch < self._written_epoch.get(tp, epoch):
            self.fenced_leaders += 1       # a zombie: a stale LeaderAndIsr, the partition has moved on
            return None
        acked = self._acked.get(tp)
        if not acked:
            return None
        end = self.view.log_end(broker, tp) or 0
        for offset in sorted(acked):
            value = acked[offset]
            got = self.view.record(broker, tp, offset) if offset < end else None
            if got != value:
                why = "its log ends at %d" % end if offset >= end else f"its log has {got!r} there"
                return Violation("lost-write", f"{tp[0]}/{tp[1]}: broker {broker} became leader (leader epoch "
                                 f"{e.get('leader_epoch')}) without the acknowledged send {value!r} at offset "
                                 f"{offset}: {why}", {"topic": tp[0], "partition": tp[1], "offset": offset,
                                                      "value": value, "leader": broker})
        return None

    def hw(self, tp: TP) -> Violation | None:
        """Every broker acting as ``tp``'s leader: its HW at most the log end of each member of its ISR."""
        for leader, hw, isr in self.view.leaders(tp):
            for m in isr:
                if m == leader:
                    continue
                leo = self.view.log_end(m, tp)
                leo = 0 if leo is None else leo
                if hw <= leo:
                    self._excused.discard((m, tp))
                    continue
                if (m, tp) in self._excused:
                    continue
                return Violation("hw-above-isr-leo", f"{tp[0]}/{tp[1]}: leader {leader}'s high watermark {hw} is "
                                 f"above the log end {leo} of ISR member {m} (ISR {list(isr)})",
                                 {"topic": tp[0], "partition": tp[1], "leader": leader, "high_watermark": hw,
                                  "member": m, "log_end_offset": leo, "isr": list(isr)})
        return None

    def all_partitions(self, tps: Iterable[TP]) -> Violation | None:
        """The state invariants over every partition (``hw``), not only those an event named."""
        for tp in tps:
            v = self.hw(tp)
            if v is not None:
                return v
        return None

