"""Where a diverging follower truncates: Kafka 2.8's AbstractFetcherThread.getOffsetTruncationState.

The leader answers a fetch whose last fetched epoch it does not share with ``(epoch, end offset)``
(LeaderEpochFileCache.endOffsetFor).  The follower looks that epoch up in its own epoch cache:
when it has the same epoch it truncates to min(leader's end, its own end for that epoch, LEO);
when its largest epoch at or below it is another one it truncates to min(its end for that one,
LEO) and fetches again (the exchange repeats while they still diverge).
"""
from __future__ import annotations

from hypothesis import given, settings as hsettings, strategies as st

from kafkacommon import errors
from replication.partition import PartitionReplication
from replication.partition_types import ReplicaSettings
from replication.truncation import follower_truncation
from node.storage.log import LeaderEpochCache


class EpochLog:
    """A log as the epochs of its records (record i has epoch ``epochs[i]``) and its epoch cache."""

    def __init__(self, epochs: list[int] = (), cache: list[tuple[int, int]] | None = None) -> None:
        self.epochs = list(epochs)
        self.cache = LeaderEpochCache()
        if cache is None:
            cache = [(e, i) for i, e in enumerate(self.epochs) if i == 0 or self.epochs[i - 1] != e]
        for e, start in cache:
            self.cache.assign(e, start)

    @property
    def log_end_offset(self) -> int:
        return len(self.epochs)

    log_start_offset = 0   # no retention here

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.cache.end_offset_for(epoch, len(self.epochs))

    def truncate_to(self, offset: int) -> None:
        del self.epochs[offset:]
        self.cache.truncate_from_end(offset)

    def append(self, epochs: list[int]) -> None:  # as append_as_follower: each batch's epoch enters the cache
        for e in epochs:
            self.cache.assign(e, len(self.epochs))
            self.epochs.append(e)


def test_the_issue_case_truncates_to_the_followers_own_end_of_the_epoch():
    # leader [(1,0),(3,10)]; the follower led epoch 2 briefly from offset 5 and wrote 5..7 no one else saw
    leader = EpochLog([1] * 10)
    leader.cache.assign(3, 10)
    follower = EpochLog([1] * 5 + [2] * 3)
    assert leader.end_offset_for_epoch(2) == (1, 10)   # the leader's answer to last fetched epoch 2
    assert follower_truncation(1, 10, follower, high_watermark=0) == (5, True)


def test_an_epoch_the_follower_does_not_have_truncates_to_its_floor_epoch_end_and_asks_again():
    # the leader answers epoch 2; the follower's largest epoch <= 2 is 1, which ends at 5 here
    follower = EpochLog([1] * 5 + [3] * 4)
    assert follower_truncation(2, 7, follower, high_watermark=0) == (5, False)


def test_the_truncation_never_passes_the_leo_nor_the_leaders_end():
    follower = EpochLog([1] * 4)
    assert follower_truncation(1, 10, follower, high_watermark=0) == (4, True)
    assert follower_truncation(1, 2, follower, high_watermark=0) == (2, True)


def test_an_undefined_leader_answer_truncates_to_the_high_watermark():
    follower = EpochLog([1] * 4 + [2] * 2)
    assert follower_truncation(-1, -1, follower, high_watermark=3) == (3, True)


def test_an_epoch_below_every_follower_epoch_ends_where_the_followers_first_epoch_starts():
    # endOffsetFor with no floor entry answers (the requested epoch, the first entry's start)
    follower = EpochLog([4] * 6, cache=[(4, 2)])
    assert follower_truncation(2, 3, follower, high_watermark=0) == (2, True)


def test_a_follower_without_epochs_takes_the_leaders_end():
    follower = EpochLog([4] * 6, cache=[])
    assert follower_truncation(2, 3, follower, high_watermark=0) == (3, True)


def sync(leader: EpochLog, follower: EpochLog, leader_epoch: int, rounds: int = 64) -> list[int]:
    """Fetch as the follower from the leader (the real leader rule) until it is caught up; returns the
    truncation offsets taken on the way."""
    p = PartitionReplication("t", 0, 1, ReplicaSettings(10_000, 1))
    p.become_leader(leader_epoch, (1,), (1, 2), 0, leader, 0)
    cuts = []
    for _ in range(rounds):
        out = p.on_follower_fetch(2, follower.log_end_offset, follower.cache.latest_epoch, leader_epoch, leader, 0)
        assert out.error == errors.NONE, errors.name(out.error)
        if out.diverging_epoch is not None:
            cut, _ = follower_truncation(*out.diverging_epoch, follower, high_watermark=0)
            assert cut < follower.log_end_offset, "a diverging answer must make progress"
            cuts.append(cut)
            follower.truncate_to(cut)
            continue
        assert out.read_offset == follower.log_end_offset
        if out.read_offset == leader.log_end_offset:
            return cuts
        follower.append(leader.epochs[out.read_offset:])
    raise AssertionError(f"no convergence in {rounds} rounds: leader {leader.epochs}, follower {follower.epochs}")


def test_the_issue_case_converges_through_the_real_leader_rule():
    leader = EpochLog([1] * 10)
    leader.cache.assign(3, 10)
    leader.append([3, 3])
    follower = EpochLog([1] * 5 + [2] * 3)
    assert sync(leader, follower, 3) == [5]
    assert follower.epochs == leader.epochs and follower.cache.entries == leader.cache.entries


@st.composite
def diverged_logs(draw):
    """Two replicas' logs as Kafka's history can leave them: a common prefix, then one of them may hold
    more records of the last common epoch (its leader wrote them, the other never fetched them), then
    each its own later epochs (epochs are unique to a leader, so those sets are disjoint), the leader's
    current epoch being the largest of all (its cache entry may carry no records yet)."""
    epochs = draw(st.lists(st.integers(0, 30), min_size=1, max_size=5, unique=True).map(sorted))
    common = [e for e in epochs for _ in range(draw(st.integers(1, 4)))]
    last = common[-1]
    later = draw(st.lists(st.integers(last + 1, 40), max_size=6, unique=True))
    split = draw(st.integers(0, len(later)))
    mine, theirs = sorted(later[:split]), sorted(later[split:])
    extra = [last] * draw(st.integers(0, 3))
    leader_more = draw(st.booleans())
    leader = common + (extra if leader_more else []) + [e for e in mine for _ in range(draw(st.integers(1, 3)))]
    follower = common + ([] if leader_more else extra) + [e for e in theirs for _ in range(draw(st.integers(1, 3)))]
    current = max([last] + later) + 1
    return leader, follower, current, draw(st.integers(0, 2)), len(common)


@hsettings(max_examples=300, deadline=None)
@given(diverged_logs())
def test_after_truncation_and_catch_up_the_follower_is_the_leaders_copy(case):
    leader_epochs, follower_epochs, current, new_records, common = case
    leader = EpochLog(leader_epochs)
    leader.cache.assign(current, leader.log_end_offset)  # the shell's become_leader
    leader.append([current] * new_records)
    follower = EpochLog(follower_epochs)
    cuts = sync(leader, follower, current)
    assert follower.epochs == leader.epochs
    # the same epoch entries, but for the leader's current one while it has no records
    assert follower.cache.entries == [(e, o) for e, o in leader.cache.entries if o < leader.log_end_offset]
    # a record both had (same offset, same epoch: the same record) is never cut
    assert all(cut >= common for cut in cuts)
