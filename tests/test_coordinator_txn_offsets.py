"""The group coordinator's transactional offsets (TxnOffsetCommit): pending until the marker, then committed or
discarded; through a reload, a marker during a load, and the real load's reading of control batches."""
from __future__ import annotations

from coordinator import records as rec
from coordinator.load import replay_log
from coordinator.testing import Driver, form_group, quick_config
from kafkacommon import errors
from kafkacommon.control import marker_batch
from kafkacommon.record_batch import encode_batch

TP = ("in", 0)


def fetched(d: Driver, group: str = "g", stable: bool = False):
    r = d.response(d.fetch(group, [TP], require_stable=stable))
    (f,) = r.partitions
    return f.offset, f.error_code


def test_pending_until_the_commit_marker():
    d = Driver(quick_config())
    h = d.txn_commit("g", 7, {TP: 10})
    assert d.response(h).partitions == [("in", 0, 0)]
    assert d.emitted[-1].producer == (7, 0)                    # a transactional batch of producer 7
    assert fetched(d) == (-1, 0)                               # invisible
    assert fetched(d, stable=True) == (-1, errors.UNSTABLE_OFFSET_COMMIT)
    assert d.core.durable_view()["txn_offsets"] == {7: {("g", "in", 0): d.core.offsets.txn_view()[7][("g", "in", 0)]}}
    d.marker(7, commit=True)
    assert fetched(d) == (10, 0)
    assert d.core.durable_view()["txn_offsets"] == {}
    assert d.events_named("txn_offsets_completed")[0] == {"partition": 0, "producer_id": 7, "commit": True,
                                                           "groups": ["g"], "offsets": 1}


def test_abort_discards_and_a_later_plain_commit_wins():
    d = Driver(quick_config())
    d.commit("g", {TP: 5})
    d.txn_commit("g", 7, {TP: 10})
    d.marker(7, commit=False)
    assert fetched(d) == (5, 0)
    d.txn_commit("g", 8, {TP: 20})
    d.commit("g", {TP: 30})                                    # after the transactional record in the log
    d.marker(8, commit=True)
    assert fetched(d) == (30, 0)                               # the older (in the log) transactional one loses


def test_reload_keeps_pending_offsets_and_the_marker_decides():
    d = Driver(quick_config())
    d.txn_commit("g", 7, {TP: 10})
    d2 = d.reloaded()
    assert d2.core.durable_view() == d.core.durable_view()
    assert fetched(d2) == (-1, 0) and "g" in d2.core.group_ids()
    d2.marker(7, commit=True)
    assert fetched(d2) == (10, 0)
    d3 = d2.reloaded()
    assert d3.core.durable_view() == d2.core.durable_view()


def test_a_marker_written_while_loading_applies_at_the_end_of_the_load():
    d = Driver(quick_config())
    d.txn_commit("g", 7, {TP: 10})
    entries = d.entries()
    other = Driver(quick_config(), load=False)
    other.apply(other.core.begin_load(0))
    for e in entries:
        other.core.replay(e[2], e[3], e[1], e[4])
    other.apply(other.core.complete_txn(7, True, 1, 0))     # written at offset 1, past what the load read
    other.apply(other.core.finish_load(0, end_offset=1))
    assert fetched(other) == (10, 0)


def test_txn_commit_checks_member_and_generation_when_given():
    d = Driver(quick_config())
    gen, ids = form_group(d, "g", 1)
    assert d.response(d.txn_commit("g", 7, {TP: 1}, generation=gen, member_id="nobody")).partitions[0][2] \
        == errors.UNKNOWN_MEMBER_ID
    assert d.response(d.txn_commit("g", 7, {TP: 1}, generation=gen + 1, member_id=ids[0])).partitions[0][2] \
        == errors.ILLEGAL_GENERATION
    assert d.response(d.txn_commit("g", 7, {TP: 1}, generation=gen, member_id=ids[0])).partitions[0][2] == 0
    assert d.response(d.txn_commit("h", 7, {TP: 1})).partitions[0][2] == 0   # a new group: created Empty


def test_the_load_reads_transactional_batches_and_markers():
    """coordinator/load.py over real batches: plain commits, a transaction committed, one aborted, one open."""
    key = rec.encode_key(rec.OffsetKey("g", "in", 0))

    def value(o: int) -> bytes:
        return rec.encode_value(rec.OffsetValue(o, -1, "", 1000))

    log = b"".join([
        encode_batch(0, 0, [(key, value(1), 1000)]),                                            # 0: plain
        encode_batch(1, 0, [(key, value(2), 1000)], producer_id=7, producer_epoch=0, base_sequence=0,
                     transactional=True),                                                       # 1: txn 7
        encode_batch(2, 0, [(key, value(3), 1000)], producer_id=8, producer_epoch=0, base_sequence=0,
                     transactional=True),                                                       # 2: txn 8
        marker_batch(3, 0, 7, 0, True, 0, 1000),                                                # 3: 7 commits
        marker_batch(4, 0, 8, 0, False, 0, 1000),                                               # 4: 8 aborts
        encode_batch(5, 0, [(key, value(4), 1000)], producer_id=9, producer_epoch=0, base_sequence=0,
                     transactional=True),                                                       # 5: 9 open
    ])
    d = Driver(quick_config(), load=False)
    d.apply(d.core.begin_load(0))
    stats = replay_log(d.core, lambda off: (log, 0, 6) if off == 0 else (b"", 0, 6))
    d.apply(d.core.finish_load(0, stats.end_offset))
    assert fetched(d) == (2, 0)
    assert list(d.core.offsets.txn_view()) == [9]
    d.marker(9, commit=True)
    assert fetched(d) == (4, 0)
