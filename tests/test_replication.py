"""replication/partition.py: one partition's replication rules (reference §3 "Replication"), sans-IO.

Pure unit tests: time is an explicit ``now_ms``; the log is a small fake value
whose epoch lookups use the real LeaderEpochCache semantics (no checkpoint file).
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from kafkacommon import errors
from kafkacommon.errors import INVALID_REQUIRED_ACKS, OFFSET_OUT_OF_RANGE
from node.storage.log import LeaderEpochCache
from replication.partition import INELIGIBLE_BACKOFF_MS, ISR_CHANGE_GIVE_UP, PartitionReplication
from replication.partition_types import AlterIsrProposal, ReplicaSettings

ME = 1
LAG = 10_000
T0 = 1_700_000_000_000  # a wall-clock-like start: lastCaughtUp = 0 is far outside the lag
EPOCH = 5
ZK = 7


class FakeLog:
    """log_end_offset + end_offset_for_epoch, as PartitionLog offers them."""

    def __init__(self, leo: int = 10, epochs: tuple[tuple[int, int], ...] = ((EPOCH - 1, 0),), start: int = 0) -> None:
        self.leo = leo
        self.start = start
        self.cache = LeaderEpochCache()
        for epoch, start in epochs:
            self.cache.assign(epoch, start)

    @property
    def log_start_offset(self) -> int:
        return self.start

    @property
    def log_end_offset(self) -> int:
        return self.leo

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.cache.end_offset_for(epoch, self.leo)

    def append(self, n: int, epoch: int = EPOCH) -> int:
        self.cache.assign(epoch, self.leo)
        self.leo += n
        return self.leo


def make_leader(isr=(1, 2, 3), replicas=(1, 2, 3), leo: int = 10, hw: int = 0, min_isr: int = 1,
                now: int = T0, log: FakeLog | None = None, epoch: int = EPOCH, kip841: bool = False):
    log = log or FakeLog(leo)
    p = PartitionReplication("t", 0, ME, ReplicaSettings(LAG, min_isr, kip841=kip841), high_watermark=hw)
    p.become_leader(epoch, isr, replicas, ZK, log, now)
    log.cache.assign(epoch, log.leo)  # what the shell does on becoming leader
    return p, log


def fetch(p: PartitionReplication, log: FakeLog, fid: int, offset: int, now: int, last_epoch: int | None = None,
          current_epoch: int | None = EPOCH):
    return p.on_follower_fetch(fid, offset, last_epoch, current_epoch, log, now)


def hw_events(events):
    return [f for name, f in events if name == "hw_changed"]


# ---------------------------------------------------------------------- leader HW

def test_hw_is_min_leo_over_isr_followers():
    p, log = make_leader()
    assert p.high_watermark == 0
    out = fetch(p, log, 2, 10, T0 + 1)
    assert p.high_watermark == 0 and not hw_events(out.events)  # 3's LEO is still unknown
    out = fetch(p, log, 3, 6, T0 + 2)
    assert p.high_watermark == 6 and out.high_watermark == 6
    assert hw_events(out.events) == [{"topic": "t", "partition": 0, "old": 0, "new": 6, "reason": "leader",
                                      "decreased": False}]
    fetch(p, log, 3, 10, T0 + 3)
    assert p.high_watermark == 10


def test_hw_never_decreases_and_never_passes_leader_leo():
    p, log = make_leader()
    fetch(p, log, 2, 10, T0 + 1)
    fetch(p, log, 3, 10, T0 + 1)
    assert p.high_watermark == 10 == log.leo
    out = fetch(p, log, 3, 4, T0 + 2)  # e.g. after the follower truncated
    assert p.high_watermark == 10 and not hw_events(out.events)
    log.append(5)
    assert p.on_leader_append(log, T0 + 3) == [] and p.high_watermark == 10
    fetch(p, log, 3, 15, T0 + 4)
    fetch(p, log, 2, 15, T0 + 4)
    assert p.high_watermark == 15


def test_hw_with_leader_alone_in_isr_follows_appends():
    p, log = make_leader(isr=(1,), replicas=(1, 2, 3))
    assert p.high_watermark == 10  # the others were caught up at time 0: outside the lag
    log.append(5)
    events = p.on_leader_append(log, T0 + 1)
    assert hw_events(events)[0]["old"] == 10 and hw_events(events)[0]["new"] == 15 == p.high_watermark


def test_hw_counts_a_non_isr_replica_caught_up_within_the_lag():
    p, log = make_leader(isr=(1,), replicas=(1, 2))
    assert p.high_watermark == 10
    out = fetch(p, log, 2, 10, T0 + 1)
    assert out.alter_isr is not None  # keep 2 out of the ISR for this test: the controller refuses, and a
    p.on_alter_isr_result(errors.INVALID_UPDATE_VERSION)    # newer state without 2 settles the pending expand
    p.apply_isr_update((1,), ZK + 1, EPOCH)
    log.append(5)
    p.on_leader_append(log, T0 + 2)
    assert p.high_watermark == 10  # 2 caught up at T0+1, within the lag, LEO 10
    p.on_leader_append(log, T0 + 1 + LAG)
    assert p.high_watermark == 10  # exactly the lag: still counted
    p.on_leader_append(log, T0 + 2 + LAG)
    assert p.high_watermark == 15


# ---------------------------------------------------------------------- lastCaughtUpTime

def test_last_caught_up_is_the_fetch_time_at_the_leader_leo():
    p, log = make_leader()
    fetch(p, log, 2, 10, T0 + 500)
    assert p.remotes[2].last_caught_up_ms == T0 + 500
    assert p.remotes[2].log_end_offset == 10


def test_last_caught_up_is_the_previous_fetch_time_when_past_the_previous_leader_leo():
    p, log = make_leader()
    fetch(p, log, 2, 5, T0 + 100)  # behind; the leader LEO was 10 at this fetch
    assert p.remotes[2].last_caught_up_ms == T0
    log.append(10)
    fetch(p, log, 2, 12, T0 + 300)  # 12 < 20 but >= 10, the LEO at the previous fetch
    assert p.remotes[2].last_caught_up_ms == T0 + 100


def test_last_caught_up_unchanged_when_behind_both():
    p, log = make_leader()
    fetch(p, log, 2, 5, T0 + 100)
    fetch(p, log, 2, 8, T0 + 200)
    assert p.remotes[2].last_caught_up_ms == T0
    assert p.remotes[2].last_fetch_leader_leo == 10 and p.remotes[2].last_fetch_ms == T0 + 200


def _idle(p, log, fid, offset, now, epoch=EPOCH):
    return p.on_idle_follower_fetch(fid, offset, epoch, log.log_end_offset, now)


def test_an_idle_session_fetch_records_exactly_what_a_full_fetch_at_the_log_end_would():
    """A fetch-session partition the follower did not list (replication.fetch_session): at the log end,
    in the ISR, HW at the log end, the fetch only moves the fetch times, as on_follower_fetch does."""
    p, log = make_leader(isr=(1, 2, 3))
    q, qlog = make_leader(isr=(1, 2, 3))
    for r in (2, 3):
        fetch(p, log, r, 10, T0)
        fetch(q, qlog, r, 10, T0)
    assert p.high_watermark == 10
    assert _idle(p, log, 2, 10, T0 + 4000) is True
    fetch(q, qlog, 2, 10, T0 + 4000)
    assert vars(p.remotes[2]) == vars(q.remotes[2]) and p.remotes[2].last_caught_up_ms == T0 + 4000
    assert p.high_watermark == q.high_watermark == 10 and p.isr == q.isr
    # so an idle follower stays caught up: the next append does not find it lagging since T0
    assert _idle(p, log, 3, 10, T0 + 4000) is True
    log.append(5)
    assert p.maybe_shrink_isr(log, T0 + LAG + 1) is None
    assert p.maybe_shrink_isr(log, T0 + 4000 + LAG + 1) is not None


@pytest.mark.parametrize("case", ["behind", "hw_behind", "not_in_isr", "old_epoch", "not_leader", "unknown"])
def test_an_idle_session_fetch_is_refused_when_it_could_change_anything(case):
    """Refused (False: the caller handles the partition as listed, with every rule) whenever a full
    fetch could do more than record the time: a follower behind, a HW below the log end (it may
    move), a follower outside the ISR (it may be added), another leader epoch, not the leader."""
    p, log = make_leader(isr=(1, 2) if case == "not_in_isr" else (1, 2, 3))
    for r in (2, 3):
        fetch(p, log, r, 10, T0)
    before = {r: dict(vars(x)) for r, x in p.remotes.items()}
    offset, epoch, fid = 10, EPOCH, 3
    if case == "behind":
        offset = 8
    elif case == "hw_behind":
        log.append(2)           # the leader's LEO moves on: HW 10 < LEO 12 (and the follower is behind)
        offset = 12
    elif case == "old_epoch":
        epoch = EPOCH - 1
    elif case == "not_leader":
        p.become_follower(2, EPOCH + 1, (2, 3), (1, 2, 3), ZK + 1)
    elif case == "unknown":
        fid = 9
    assert _idle(p, log, fid, offset, T0 + 4000, epoch) is False
    if case != "not_leader":
        assert {r: vars(x) for r, x in p.remotes.items()} == before


# ---------------------------------------------------------------------- shrink

def _caught_up_then_append(isr=(1, 2, 3)):
    p, log = make_leader(isr=isr)
    for r in isr[1:]:
        fetch(p, log, r, 10, T0)
    assert p.high_watermark == 10
    log.append(5)
    return p, log


def test_shrink_after_the_lag_time_and_not_before():
    p, log = _caught_up_then_append()
    fetch(p, log, 3, 15, T0 + LAG // 2)
    assert p.maybe_shrink_isr(log, T0 + LAG) is None  # now - lastCaughtUp == lag: not yet
    prop = p.maybe_shrink_isr(log, T0 + LAG + 1)
    assert prop == AlterIsrProposal("t", 0, (1, 3), EPOCH, ZK, "shrink", (2,))
    assert p.pending_isr_change == prop and p.isr == (1, 2, 3)


def test_no_shrink_when_the_follower_leo_equals_the_leader_leo():
    p, log = make_leader(isr=(1, 2))
    fetch(p, log, 2, 10, T0)
    assert p.maybe_shrink_isr(log, T0 + 50 * LAG) is None


def test_shrink_never_removes_the_leader():
    p, log = make_leader(isr=(1,))
    assert p.maybe_shrink_isr(log, T0 + 50 * LAG) is None
    p, log = make_leader(isr=(1, 2))  # 2 never fetched
    prop = p.maybe_shrink_isr(log, T0 + LAG + 1)
    assert prop is not None and prop.new_isr == (1,) and prop.changed == (2,)


def test_no_shrink_while_a_change_is_in_flight():
    p, log = _caught_up_then_append()
    assert p.maybe_shrink_isr(log, T0 + LAG + 1) is not None
    assert p.maybe_shrink_isr(log, T0 + 5 * LAG) is None
    p, log = make_leader(isr=(1, 2), replicas=(1, 2, 3))
    fetch(p, log, 2, 10, T0)
    assert fetch(p, log, 3, 10, T0).alter_isr is not None  # an expand in flight
    log.append(5)
    assert p.maybe_shrink_isr(log, T0 + 5 * LAG) is None


def test_shrink_only_by_the_leader():
    p = PartitionReplication("t", 0, ME, ReplicaSettings(LAG))
    p.become_follower(2, EPOCH, (1, 2), (1, 2), ZK)
    assert p.maybe_shrink_isr(FakeLog(), T0 + 5 * LAG) is None


# ---------------------------------------------------------------------- expand

def test_expand_when_follower_leo_reaches_the_hw():
    p, log = make_leader(isr=(1, 2))
    fetch(p, log, 2, 10, T0)
    assert p.high_watermark == 10
    assert fetch(p, log, 3, 5, T0 + 1).alter_isr is None  # 5 < HW
    prop = fetch(p, log, 3, 10, T0 + 2).alter_isr
    assert prop == AlterIsrProposal("t", 0, (1, 2, 3), EPOCH, ZK, "expand", (3,))
    assert p.isr == (1, 2) and p.maximal_isr == (1, 2, 3)


def test_expand_requires_the_leader_epoch_start_offset():
    p, log = make_leader(isr=(1, 2), hw=0)  # 2's LEO unknown: the HW stays 0 < the epoch start 10
    assert p.high_watermark == 0 and p.leader_epoch_start_offset == 10
    assert fetch(p, log, 3, 5, T0 + 1).alter_isr is None  # >= HW, but below the epoch start
    assert fetch(p, log, 3, 10, T0 + 2).alter_isr is not None


def test_at_most_one_expand_in_flight():
    p, log = make_leader(isr=(1,), replicas=(1, 2, 3, 4))
    first = fetch(p, log, 2, 10, T0 + 1).alter_isr
    assert first is not None and first.new_isr == (1, 2)
    assert fetch(p, log, 3, 10, T0 + 1).alter_isr is None
    assert p.pending_isr_change == first


def test_no_expand_for_an_isr_member():
    p, log = make_leader(isr=(1, 2))
    assert fetch(p, log, 2, 10, T0).alter_isr is None


# ---------------------------------------------------------------------- maximal ISR and the HW

def test_a_pending_expand_already_counts_for_the_hw():
    p, log = make_leader(isr=(1, 2))
    fetch(p, log, 2, 10, T0)
    assert fetch(p, log, 3, 10, T0).alter_isr is not None
    log.append(10)
    fetch(p, log, 2, 20, T0 + 3 * LAG)  # 3 is long out of the lag, but in the maximal ISR
    assert p.high_watermark == 10
    p.on_alter_isr_result(errors.NOT_CONTROLLER)  # dropped: 3 no longer counts
    fetch(p, log, 2, 20, T0 + 3 * LAG + 1)
    assert p.high_watermark == 20


def test_a_pending_shrink_still_counts_the_old_isr():
    p, log = _caught_up_then_append()
    fetch(p, log, 3, 15, T0 + LAG + 1)
    prop = p.maybe_shrink_isr(log, T0 + LAG + 1)
    assert prop is not None and prop.new_isr == (1, 3)
    assert p.maximal_isr == (1, 2, 3)
    assert p.on_leader_append(log, T0 + LAG + 2) == [] and p.high_watermark == 10
    out = p.on_alter_isr_result(errors.NONE, (1, 3), ZK + 1, EPOCH, proposal=prop, log=log, now_ms=T0 + LAG + 3)
    assert out.applied and p.isr == (1, 3) and p.zk_version == ZK + 1
    assert p.high_watermark == 15 and hw_events(out.events)[0]["new"] == 15


# ---------------------------------------------------------------------- fetch errors, divergence

def _diverging_leader():
    log = FakeLog(30, ((1, 0), (3, 10), (5, 20)))
    return make_leader(log=log, epoch=6)  # the epoch cache then holds (6, 30)


@pytest.mark.parametrize("last_epoch, offset, expected", [
    (2, 12, (1, 10)),   # epoch 2 unknown: the largest epoch below is 1, ending at 10
    (4, 20, (3, 20)),   # a smaller epoch, even with the end offset equal
    (3, 25, (3, 20)),   # the same epoch, but it ended before the fetch offset
])   # above every epoch the leader knows: OFFSET_OUT_OF_RANGE (test_a_last_fetched_epoch_above_every_known_...)
def test_diverging_epoch(last_epoch, offset, expected):
    p, log = _diverging_leader()
    out = fetch(p, log, 2, offset, T0 + 1, last_epoch=last_epoch, current_epoch=6)
    assert out.error == errors.NONE and out.diverging_epoch == expected and out.read_offset is None
    assert out.alter_isr is None
    assert p.remotes[2].log_end_offset == -1 and p.remotes[2].last_caught_up_ms == T0  # not updated


@pytest.mark.parametrize("last_epoch, offset", [(3, 20), (3, 15), (5, 30), (6, 30), (-1, 25), (None, 25)])
def test_no_divergence(last_epoch, offset):
    p, log = _diverging_leader()
    out = fetch(p, log, 2, offset, T0 + 1, last_epoch=last_epoch, current_epoch=6)
    assert out.error == errors.NONE and out.diverging_epoch is None and out.read_offset == offset
    assert p.remotes[2].log_end_offset == offset


@pytest.mark.parametrize("current, error", [(EPOCH - 1, errors.FENCED_LEADER_EPOCH),
                                            (EPOCH + 1, errors.UNKNOWN_LEADER_EPOCH),
                                            (EPOCH, errors.NONE), (-1, errors.NONE), (None, errors.NONE)])
def test_current_leader_epoch_checked(current, error):
    p, log = make_leader()
    out = fetch(p, log, 2, 10, T0 + 1, current_epoch=current)
    assert out.error == error
    assert (p.remotes[2].log_end_offset == 10) == (error == errors.NONE)


def test_fetch_from_a_follower_replica_is_not_leader_or_follower():
    p = PartitionReplication("t", 0, ME, ReplicaSettings(LAG))
    p.become_follower(2, EPOCH, (1, 2), (1, 2), ZK)
    assert fetch(p, FakeLog(), 3, 0, T0).error == errors.NOT_LEADER_OR_FOLLOWER
    assert fetch(p, FakeLog(), 3, 0, T0, current_epoch=EPOCH - 1).error == errors.FENCED_LEADER_EPOCH


def test_fetch_from_outside_the_replicas_gets_no_records_and_changes_nothing():
    p, log = make_leader(isr=(1,), replicas=(1, 2))
    before = p.snapshot()
    out = fetch(p, log, 9, 10, T0 + 1)
    assert out.error == errors.NONE and out.read_offset is None and out.alter_isr is None
    assert [n for n, _ in out.events] == ["unknown_follower_fetch"]
    assert p.snapshot() == before


def test_fetch_below_the_leader_log_start_is_out_of_range():
    """Kafka 2.8: a follower fetching below the leader's log start offset (retention deleted it) gets
    OFFSET_OUT_OF_RANGE, and its position is not recorded."""
    p, log = make_leader()
    log.start = 5
    out = fetch(p, log, 2, 4, T0 + 1)
    assert out.error == OFFSET_OUT_OF_RANGE and p.remotes[2].log_end_offset == -1
    assert fetch(p, log, 2, 5, T0 + 2).error == errors.NONE


def test_fetch_past_the_leader_leo_is_out_of_range():
    p, log = make_leader()
    out = fetch(p, log, 2, 11, T0 + 1)
    assert out.error == OFFSET_OUT_OF_RANGE and p.remotes[2].log_end_offset == -1


def test_a_last_fetched_epoch_above_every_known_epoch_is_out_of_range():
    """Kafka 2.8's Partition.readRecords: the leader cannot tell where the follower's last fetched epoch
    ends (it is above every epoch it knows), so the answer is OFFSET_OUT_OF_RANGE, not a diverging epoch."""
    p, log = make_leader()
    latest = log.end_offset_for_epoch(99)
    out = p.on_follower_fetch(2, 10, 99, None, log, T0 + 1)
    assert latest == (-1, -1) and out.error == OFFSET_OUT_OF_RANGE and out.diverging_epoch is None
    assert out.leader_log_end_offset == 10 and p.remotes[2].log_end_offset == -1


def test_fetch_outcome_reports_read_offset_and_hw():
    p, log = make_leader(isr=(1, 2))
    out = fetch(p, log, 2, 7, T0 + 1)
    assert (out.read_offset, out.high_watermark, out.leader_log_end_offset) == (7, 7, 10)


# ---------------------------------------------------------------------- acks=all

def test_acks_all_needs_min_isr_before_the_append():
    p, _ = make_leader(isr=(1, 2), min_isr=2)
    assert p.check_produce(-1, T0) == errors.NONE
    p, _ = make_leader(isr=(1, 2), min_isr=3)
    assert p.check_produce(-1, T0) == errors.NOT_ENOUGH_REPLICAS


def test_acks_0_and_1_ignore_min_isr():
    p, _ = make_leader(isr=(1,), min_isr=3)
    assert p.check_produce(1, T0) == errors.NONE
    assert p.check_produce(0, T0) == errors.NONE
    assert p.check_produce(-1, T0) == errors.NOT_ENOUGH_REPLICAS
    assert p.check_produce(2, T0) == INVALID_REQUIRED_ACKS


def test_min_isr_before_append_uses_the_committed_isr():
    p, log = make_leader(isr=(1,), replicas=(1, 2), min_isr=2)
    assert fetch(p, log, 2, 10, T0 + 1).alter_isr is not None  # pending expand: not yet committed
    assert p.check_produce(-1) == errors.NOT_ENOUGH_REPLICAS


def test_acks_all_completes_when_the_hw_reaches_the_offset():
    p, log = make_leader(isr=(1, 2, 3), min_isr=2)
    required = log.append(5)
    p.on_leader_append(log, T0 + 1)
    assert p.check_acks_all(required) is None  # still waiting (the shell times out with 7)
    fetch(p, log, 2, 15, T0 + 2)
    assert p.check_acks_all(required) is None
    fetch(p, log, 3, 15, T0 + 3)
    assert p.high_watermark == 15 and p.check_acks_all(required) == errors.NONE


def test_acks_all_not_enough_replicas_after_append():
    p, log = make_leader(isr=(1, 2), min_isr=2)
    fetch(p, log, 2, 10, T0)
    assert p.check_produce(-1, T0) == errors.NONE
    required = log.append(5)
    p.on_leader_append(log, T0 + 1)
    assert p.check_acks_all(required) is None
    prop = p.maybe_shrink_isr(log, T0 + LAG + 1)
    assert prop is not None and prop.new_isr == (1,)
    assert p.check_acks_all(required) is None  # the pending shrink still counts 2
    p.on_alter_isr_result(errors.NONE, (1,), ZK + 1, EPOCH, log=log, now_ms=T0 + LAG + 2)
    assert p.high_watermark == 15
    assert p.check_acks_all(required) == errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert p.check_produce(-1) == errors.NOT_ENOUGH_REPLICAS


def test_acks_all_on_a_deposed_leader():
    p, log = make_leader(isr=(1, 2))
    required = log.append(5)
    p.become_follower(2, EPOCH + 1, (2,), (1, 2), ZK + 1)
    assert p.check_acks_all(required) == errors.NOT_LEADER_OR_FOLLOWER
    assert p.check_produce(1) == errors.NOT_LEADER_OR_FOLLOWER


def test_an_acks_all_wait_outlives_a_new_epoch_of_the_same_leader():
    """The controller bumps the leader epoch when it takes a dead follower out of the ISR (Kafka 2.8);
    the leader stays, and so do its acks=all waits (DelayedProduce checks leadership, not the epoch)."""
    p, log = make_leader(isr=(1, 2, 3))
    required = log.append(5)
    p.on_leader_append(log, T0 + 1)
    fetch(p, log, 2, 15, T0 + 2)
    assert p.check_acks_all(required, EPOCH) is None
    p.become_leader(EPOCH + 1, (1, 2), (1, 2, 3), ZK + 1, log, T0 + 3)  # 3 removed by the controller
    assert p.high_watermark == 15 and p.check_acks_all(required, EPOCH) == errors.NONE


def test_an_acks_all_wait_fails_when_the_leadership_was_lost_in_between():
    p, log = make_leader(isr=(1, 2))
    required = log.append(5)
    p.become_follower(2, EPOCH + 1, (2, 1), (1, 2), ZK + 1)
    p.become_leader(EPOCH + 2, (1, 2), (1, 2), ZK + 2, log, T0 + 1)
    fetch(p, log, 2, 15, T0 + 2, current_epoch=EPOCH + 2)
    assert p.high_watermark == 15
    assert p.check_acks_all(required, EPOCH) == errors.NOT_LEADER_OR_FOLLOWER
    assert p.check_acks_all(required, EPOCH + 2) == errors.NONE


# ---------------------------------------------------------------------- follower HW

def _follower(hw: int = 0) -> PartitionReplication:
    p = PartitionReplication("t", 0, ME, ReplicaSettings(LAG), high_watermark=hw)
    p.become_follower(2, EPOCH, (1, 2), (1, 2), ZK)
    return p


def test_follower_hw_is_min_of_leader_hw_and_own_leo():
    p, log = _follower(), FakeLog(8)
    assert hw_events(p.on_fetch_response(5, log))[0]["new"] == 5 and p.high_watermark == 5
    p.on_fetch_response(12, log)
    assert p.high_watermark == 8
    log.leo = 20
    p.on_fetch_response(12, log)
    assert p.high_watermark == 12
    assert p.on_fetch_response(12, log) == []


def test_follower_hw_follows_a_lower_leader_hw_like_kafka():
    p, log = _follower(hw=12), FakeLog(20)
    ev = hw_events(p.on_fetch_response(9, log))
    assert p.high_watermark == 9 and ev[0]["decreased"] is True


def test_truncation_caps_the_hw():
    p = _follower(hw=12)
    assert hw_events(p.on_truncate(7))[0] == {"topic": "t", "partition": 0, "old": 12, "new": 7,
                                              "reason": "truncated", "decreased": True}
    assert p.on_truncate(10) == [] and p.high_watermark == 7


# ---------------------------------------------------------------------- AlterIsr answers

def _with_expand_pending():
    p, log = make_leader(isr=(1, 2))
    fetch(p, log, 2, 10, T0)
    prop = fetch(p, log, 3, 10, T0).alter_isr
    assert prop is not None
    return p, log, prop


def test_alter_isr_success_applies_the_isr():
    p, log, prop = _with_expand_pending()
    out = p.on_alter_isr_result(errors.NONE, (1, 2, 3), ZK + 1, EPOCH, proposal=prop)
    assert out.applied and not out.retry and not out.fenced
    assert p.isr == (1, 2, 3) and p.zk_version == ZK + 1 and p.pending_isr_change is None
    assert [f["settled"] for n, f in out.events if n == "replica_isr_changed"] == ["expand"]


@pytest.mark.parametrize("error", [errors.FENCED_LEADER_EPOCH, errors.INVALID_UPDATE_VERSION,
                                   errors.STALE_BROKER_EPOCH, errors.NOT_CONTROLLER])
def test_alter_isr_errors_keep_the_change_pending_after_a_give_up_and_clear_it_otherwise(error):
    """Kafka 2.8.2's Partition.handleAlterIsrResponse: after FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION or
    UNKNOWN_TOPIC_OR_PARTITION it gives up and the ISR state stays pending (a pending expand's member still
    counts for the HW); other errors are retried."""
    p, log, prop = _with_expand_pending()
    out = p.on_alter_isr_result(error, proposal=prop)
    assert p.isr == (1, 2) and p.zk_version == ZK and not out.applied
    assert out.fenced == (error == errors.FENCED_LEADER_EPOCH)
    assert out.retry == (error not in ISR_CHANGE_GIVE_UP)
    if error in ISR_CHANGE_GIVE_UP:
        assert p.pending_isr_change == prop and p.maximal_isr == (1, 2, 3)
    else:
        assert p.pending_isr_change is None
    again = fetch(p, log, 3, 10, T0 + 1).alter_isr
    if error in ISR_CHANGE_GIVE_UP:  # stale state: wait for a newer one before proposing again
        assert again is None
        p.apply_isr_update((1, 2), ZK + 1, EPOCH)
        assert p.pending_isr_change is None
        again = fetch(p, log, 3, 10, T0 + 2).alter_isr
        assert again is not None and again.zk_version == ZK + 1
    else:
        assert again == prop


def test_alter_isr_stale_success_is_ignored():
    p, log, prop = _with_expand_pending()
    out = p.on_alter_isr_result(errors.NONE, (1, 2, 3), ZK, EPOCH)
    assert not out.applied and p.isr == (1, 2) and p.pending_isr_change is None
    assert [n for n, _ in out.events] == ["alter_isr_result_ignored"]


def test_alter_isr_answer_to_another_proposal_is_ignored():
    p, log, prop = _with_expand_pending()
    other = AlterIsrProposal("t", 0, (1,), EPOCH, ZK - 1, "shrink", (2,))
    out = p.on_alter_isr_result(errors.NOT_CONTROLLER, proposal=other)
    assert p.pending_isr_change == prop and not out.retry
    p2, _ = make_leader()
    assert [n for n, _ in p2.on_alter_isr_result(errors.NONE, (1, 2), ZK + 1).events] == ["alter_isr_result_ignored"]


def test_newer_isr_update_settles_the_pending_change():
    p, log, prop = _with_expand_pending()
    assert [n for n, _ in p.apply_isr_update((1, 2, 3), ZK, EPOCH)] == ["isr_update_ignored"]
    assert [n for n, _ in p.apply_isr_update((1, 2, 3), ZK + 1, EPOCH + 1)] == ["isr_update_ignored"]
    assert p.pending_isr_change == prop
    events = p.apply_isr_update((1, 2, 3), ZK + 1, EPOCH)
    assert p.pending_isr_change is None and p.isr == (1, 2, 3) and p.zk_version == ZK + 1
    assert events[0][1]["settled"] == "expand"
    # the late answer to the settled proposal changes nothing
    assert not p.on_alter_isr_result(errors.INVALID_UPDATE_VERSION, proposal=prop).fenced
    assert fetch(p, log, 3, 10, T0 + 1).alter_isr is None and p.isr == (1, 2, 3)


# ---------------------------------------------------------------------- role changes

def test_become_leader_resets_remote_replica_state():
    p, log = make_leader(isr=(1, 2, 3), replicas=(1, 2, 3, 4), leo=10, now=T0)
    assert p.is_leader and p.leader_epoch == EPOCH and p.zk_version == ZK and p.leader_epoch_start_offset == 10
    assert {r: s.last_caught_up_ms for r, s in p.remotes.items()} == {2: T0, 3: T0, 4: 0}
    assert all(s.log_end_offset == -1 for s in p.remotes.values())


def test_become_leader_keeps_the_hw_capped_at_the_leo():
    p, _ = make_leader(isr=(1, 2), hw=5, leo=30)
    assert p.high_watermark == 5  # kept: 2's LEO is unknown
    log = FakeLog(30)
    p = PartitionReplication("t", 0, ME, ReplicaSettings(LAG), high_watermark=50)
    events = p.become_leader(EPOCH, (1, 2), (1, 2), ZK, log, T0)
    assert p.high_watermark == 30 and hw_events(events)[0]["reason"] == "capped_at_leo"


def test_reelected_leader_keeps_remote_leos_and_drops_the_pending_change():
    p, log = make_leader(isr=(1, 2), replicas=(1, 2, 3))
    fetch(p, log, 2, 10, T0 + 1)
    assert fetch(p, log, 3, 10, T0 + 1).alter_isr is not None
    log.append(5)
    p.become_leader(EPOCH + 1, (1, 2), (1, 2, 3), ZK + 1, log, T0 + 50)
    assert p.pending_isr_change is None and p.leader_epoch_start_offset == 15
    assert p.remotes[2].log_end_offset == 10 and p.remotes[2].last_caught_up_ms == T0 + 50
    assert p.remotes[3].log_end_offset == 10 and p.remotes[3].last_caught_up_ms == 0  # not in the ISR: reset to 0


def test_become_follower_drops_leader_state():
    p, log, prop = _with_expand_pending()
    events = p.become_follower(2, EPOCH + 1, (2, 3), (1, 2, 3), ZK + 3)
    assert [n for n, _ in events] == ["leadership_lost"]
    assert not p.is_leader and p.leader_id == 2 and p.remotes == {} and p.pending_isr_change is None
    assert p.high_watermark == 10 and p.isr == (2, 3)
    with pytest.raises(ValueError):
        p.become_follower(ME, EPOCH + 2, (1,), (1, 2), ZK + 4)


def test_snapshot_is_a_plain_dict():
    p, log, prop = _with_expand_pending()
    snap = p.snapshot()
    assert snap["pending_isr_change"]["kind"] == "expand" and snap["maximal_isr"] == [1, 2, 3]
    assert snap["remotes"][3]["log_end_offset"] == 10 and snap["high_watermark"] == 10


# ---------------------------------------------------------------------- property: the HW under random traffic

op = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 5)),
    st.tuples(st.just("fetch"), st.sampled_from([2, 3, 4]), st.integers(0, 6)),
    st.tuples(st.just("tick"), st.integers(0, 2 * LAG)),
    st.tuples(st.just("shrink")),
    st.tuples(st.just("answer"), st.sampled_from([errors.NONE, errors.NOT_CONTROLLER,
                                                  errors.INVALID_UPDATE_VERSION])),
)


@hsettings(max_examples=300, deadline=None)
@given(isr_rest=st.sets(st.sampled_from([2, 3, 4])), leo=st.integers(0, 20), hw=st.integers(0, 25),
       ops=st.lists(op, max_size=60))
def test_hw_monotonic_and_bounded_under_random_fetches(isr_rest, leo, hw, ops):
    p, log = make_leader(isr=(1, *sorted(isr_rest)), replicas=(1, 2, 3, 4), leo=leo, hw=hw)
    assert p.high_watermark <= log.leo
    now, zk = T0, ZK
    for o in ops:
        before = p.high_watermark
        events = []
        if o[0] == "append":
            log.append(o[1])
            events = p.on_leader_append(log, now)
        elif o[0] == "fetch":
            out = fetch(p, log, o[1], max(0, log.leo - o[2]), now)
            assert out.error == errors.NONE and out.high_watermark == p.high_watermark
            events = out.events
        elif o[0] == "tick":
            now += o[1]
        elif o[0] == "shrink":
            prop = p.maybe_shrink_isr(log, now)
            assert prop is None or ME in prop.new_isr
        elif p.pending_isr_change is not None:
            prop = p.pending_isr_change
            if o[1] == errors.NONE:
                zk += 1
                res = p.on_alter_isr_result(o[1], prop.new_isr, zk, EPOCH, proposal=prop, log=log, now_ms=now)
                assert res.applied and p.isr == prop.new_isr
            else:
                res = p.on_alter_isr_result(o[1], proposal=prop)
            events = res.events
            if o[1] == errors.INVALID_UPDATE_VERSION:  # then the newer state arrives
                zk += 1
                events += p.apply_isr_update(p.isr, zk, EPOCH, log=log, now_ms=now)
        after = p.high_watermark
        assert after >= before and after <= log.leo
        assert ME in p.isr
        for f in hw_events(events):
            assert f["old"] < f["new"] == after
        if after != before:
            assert hw_events(events)
            for r, rep in p.remotes.items():
                if r in p.maximal_isr or now - rep.last_caught_up_ms <= LAG:
                    assert rep.log_end_offset >= after, (r, p.snapshot())


def test_an_ineligible_follower_neither_joins_the_isr_nor_holds_the_hw_back():
    """KIP-841: the controller refuses to add a shutting-down or gone broker (INELIGIBLE_REPLICA).
    Its recent fetches made it 'caught up', which would hold the HW at its LEO for the lag time."""
    p, log = make_leader(isr=(1, 2), leo=10, kip841=True)
    fetch(p, log, 2, 10, T0)
    out = fetch(p, log, 3, 10, T0 + 1)  # caught up: an expand is proposed
    assert out.alter_isr is not None and out.alter_isr.new_isr == (1, 2, 3)
    assert p.high_watermark == 10
    log.append(5)
    fetch(p, log, 2, 15, T0 + 2)
    assert p.high_watermark == 10, "held back by follower 3, caught up within the lag time"
    res = p.on_alter_isr_result(errors.INELIGIBLE_REPLICA, proposal=out.alter_isr, log=log, now_ms=T0 + 3)
    assert not res.retry and p.high_watermark == 15 and p.isr == (1, 2)
    assert fetch(p, log, 3, 15, T0 + 4).alter_isr is None, "no new proposal for it within the backoff"
    # after the backoff it is proposed again (a restarted broker is eligible once the controller saw it)
    assert fetch(p, log, 3, 15, T0 + 3 + INELIGIBLE_BACKOFF_MS).alter_isr is not None


def test_by_default_a_recently_caught_up_follower_holds_the_hw_back_registered_or_not():
    """Kafka 2.8's maybeIncrementLeaderHW: the maximal ISR and every replica caught up within the lag."""
    p, log = make_leader(isr=(1, 2), leo=10)
    fetch(p, log, 2, 10, T0)
    fetch(p, log, 3, 10, T0 + 1)
    p.on_alter_isr_result(errors.NOT_CONTROLLER, proposal=p.pending_isr_change, log=log, now_ms=T0 + 1)
    log.append(5)
    fetch(p, log, 2, 15, T0 + 2)
    p.set_live_brokers({1, 2}, log, T0 + 4)
    assert p.high_watermark == 10, "no KIP-841 eligibility by default"
    assert p.on_leader_append(log, T0 + 1 + LAG + 1) and p.high_watermark == 15, "until the lag time passes"


def test_a_follower_that_is_gone_stops_holding_the_hw_back():
    """KIP-841: a caught-up follower outside the ISR counts for the HW only while it is registered."""
    p, log = make_leader(isr=(1, 2), leo=10, kip841=True)
    fetch(p, log, 2, 10, T0)
    proposal = fetch(p, log, 3, 10, T0 + 1).alter_isr
    # the controller moved: the expand is to be retried, and is no longer pending
    assert p.on_alter_isr_result(errors.NOT_CONTROLLER, proposal=proposal, log=log, now_ms=T0 + 1).retry
    log.append(5)
    fetch(p, log, 2, 15, T0 + 2)
    assert p.high_watermark == 10
    p.set_live_brokers({1, 2, 3}, log, T0 + 3)
    assert p.high_watermark == 10, "still registered: it may yet join"
    p.set_live_brokers({1, 2}, log, T0 + 4)
    assert p.high_watermark == 15


def test_the_low_watermark_is_the_smallest_log_start_over_the_registered_replicas():
    """Kafka 2.8's Partition.lowWatermarkIfLeader: the leader's log start offset and each follower's (as its last
    fetch said; unknown, -1, until it fetches) on a registered broker; a follower whose broker is gone does not
    count.  DeleteRecords waits for it."""
    p, log = make_leader()
    log.start = 6
    assert p.low_watermark(log) == -1                      # the followers have not said yet
    p.on_follower_fetch(2, 10, None, EPOCH, log, T0 + 1, log_start_offset=6)
    p.on_follower_fetch(3, 10, None, EPOCH, log, T0 + 1, log_start_offset=2)
    assert p.low_watermark(log) == 2
    p.on_follower_fetch(3, 10, None, EPOCH, log, T0 + 2, log_start_offset=6)
    assert p.low_watermark(log) == 6
    p.on_follower_fetch(3, 10, None, EPOCH, log, T0 + 3)   # not sent: the last value stays
    assert p.remotes[3].log_start_offset == 6
    p.on_follower_fetch(2, 10, None, EPOCH, log, T0 + 4, log_start_offset=1)
    p.set_live_brokers({1, 3})                             # broker 2 unregistered: it no longer holds it back
    assert p.low_watermark(log) == 6
