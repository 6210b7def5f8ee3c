"""The controller's plans and commands: what ``ControllerCore`` decides (a :class:`Plan` of ZooKeeper
writes and events) and what it then tells the brokers (LeaderAndIsr, UpdateMetadata, StopReplica), and
its settings.  Pure data: no I/O."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from kafkacommon.event import Event
from kafkacommon.metadata import BrokerRegistration, LeaderAndIsr, TopicAssignment

TP = tuple[str, int]
StateMap = dict[TP, tuple[LeaderAndIsr, int]]


@dataclass(frozen=True)
class ControllerSettings:
    broker_id: int
    offsets_topic: str = "__consumer_offsets"
    offsets_partitions: int = 50
    offsets_replication_factor: int = 3
    unclean_leader_election: bool = False
    auto_leader_rebalance: bool = True
    imbalance_check_interval_ms: int = 30_000
    imbalance_percentage: int = 10
    metadata_resend_interval_ms: int = 2_000
    delete_topic_enable: bool = True
    expected_brokers: int = 0            # brokers listed in cluster.yaml; 0 = do not wait for them
    offsets_create_grace_ms: int = 3_000  # then create __consumer_offsets with whoever is live (>= RF)
    offsets_eager_create: bool = True     # False: not here; the first FindCoordinator has a broker create it
    offsets_segment_bytes: int = 104_857_600   # offsets.topic.segment.bytes: in the offsets topic's configs
    kip841_enable: bool = False          # Kafka 3.3's AlterIsr eligibility check (INELIGIBLE_REPLICA)
    # A planted bug (the simulator's sweeps; never in a real broker): with unclean election off, a partition
    # whose ISR has no live member elects the first live replica anyway, as if it were a clean election.
    planted_elect_outside_isr: bool = False


class StateChange(NamedTuple):
    """A partition-state write: create when ``zk_version`` is None, else set at that version."""

    topic: str
    partition: int
    state: LeaderAndIsr
    zk_version: int | None
    reason: str
    previous: LeaderAndIsr | None


class PartitionView(NamedTuple):
    """What a broker is told about one partition (NamedTuple: a controller builds thousands)."""

    topic: str
    partition: int
    state: LeaderAndIsr
    zk_version: int
    replicas: tuple[int, ...]
    is_new: bool = False


@dataclass(frozen=True)
class LeaderAndIsrCmd:
    partitions: tuple[PartitionView, ...]
    live_leaders: tuple[BrokerRegistration, ...]


@dataclass(frozen=True)
class UpdateMetadataCmd:
    partitions: tuple[PartitionView, ...]
    live_brokers: tuple[BrokerRegistration, ...]


@dataclass(frozen=True)
class StopReplicaCmd:
    partitions: tuple[TP, ...]
    delete: bool = False


Command = LeaderAndIsrCmd | UpdateMetadataCmd | StopReplicaCmd


@dataclass
class Plan:
    topic_creates: list[TopicAssignment] = field(default_factory=list)
    writes: list[StateChange] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)     # outcomes: log once the writes land
    observed: list[Event] = field(default_factory=list)   # observations: log when decided
    full_sync: set[int] = field(default_factory=set)   # brokers to send the full state to
    metadata_to_all: bool = False                      # tell everyone about changed partitions/brokers
    # brokers started (onBrokerStartup): the others get an UpdateMetadata of the live brokers before any
    # LeaderAndIsr of the same plan (Kafka sends it first, with no partition states)
    brokers_started: bool = False
    resend_metadata: bool = False                      # periodic full UpdateMetadata to all
    stop_replicas: dict[int, list[TP]] = field(default_factory=dict)  # StopReplica(delete=false), after LeaderAndIsr
    leader_and_isr: bool = True  # False for AlterIsr changes: the leader learns from the response
    query_replicas: set[int] = field(default_factory=set)   # LeaderAndIsr for all their replicas (log dir events)
    topic_deletes: list[TopicAssignment] = field(default_factory=list)  # delete these topics' znodes
    markers_to_drop: list[str] = field(default_factory=list)            # deletion requests refused
    # a reassignment's steps (controller/reassignment.py): topic znodes rewritten (fenced, any version; after
    # the states), the context's assignments changed without a write (applied before the requests are built),
    # StopReplica(delete=true) after stop_replicas, and /admin/reassign_partitions' new content ({}: delete it)
    assignment_writes: list[TopicAssignment] = field(default_factory=list)
    topic_updates: list[TopicAssignment] = field(default_factory=list)
    delete_replicas: dict[int, list[TP]] = field(default_factory=dict)
    zk_reassignment: dict[TP, tuple[int, ...]] | None = None
    # a reassignment's adding replicas, told with isNew (Kafka's updateLeaderEpochAndSendRequest): a broker with
    # an offline log directory may create their logs in an online one
    new_replicas: dict[TP, tuple[int, ...]] = field(default_factory=dict)
    # partitions whose state the controller read again and found other than it had (and had sent: a new
    # controller decides from its broker's metadata cache): their state as read goes to their replicas and to
    # every broker, as a failover reading them from ZooKeeper would have sent it
    resync: list[TP] = field(default_factory=list)

    @property
    def has_writes(self) -> bool:
        return bool(self.topic_creates or self.writes or self.topic_deletes or self.markers_to_drop
                    or self.assignment_writes or self.zk_reassignment is not None)

    @property
    def empty(self) -> bool:
        return not (self.has_writes or self.events or self.observed or self.full_sync or self.metadata_to_all
                    or self.resend_metadata or self.topic_updates or self.stop_replicas or self.delete_replicas
                    or self.query_replicas or self.resync)

    def controlled_shutdown_batches(self) -> list["Plan"]:
        """A controlled shutdown's plan (``ControllerCore.on_controlled_shutdown``) as Kafka 2.8's
        doControlledShutdown carries it out, in two batches: the partitions the broker led (their new leaders
        elected and written, then their LeaderAndIsr and UpdateMetadata sent), then the partitions it followed
        (StopReplica to it, their shrunk ISRs written and sent to the other replicas).  The first batch's
        requests go out before the second's writes: the moved leaders (a group coordinator's offsets partition
        among them) are taken up without waiting for the ISR shrinks.  Empty batches are left out."""
        led = Plan(writes=[w for w in self.writes if w.reason == "controlled_shutdown"], observed=self.observed)
        followed = Plan(writes=[w for w in self.writes if w.reason != "controlled_shutdown"],
                        stop_replicas=self.stop_replicas)
        return [p for p in (led, followed) if not p.empty]
