"""Property: the transaction coordinator's durable state is exactly the replay of its committed records.

Random requests from producers of several transactional ids (each producer knows what its answers told
it), random time advances (timeouts, expiry), random append outcomes (late, failed) and marker outcomes
(retriable errors).  At the end a fresh coordinator that loads the log has the same durable view; along
the way nothing raises (an illegal transition is a bug), and once everything in flight is resolved every
request has exactly one answer.
"""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st

from kafkacommon import errors
from transactions.config import TxnConfig
from transactions.testing import TxnDriver

IDS = ("a", "b")
PARTS = (("x", 0), ("x", 1), ("y", 0))
APPEND_ERRORS = (0, 0, 0, errors.REQUEST_TIMED_OUT, errors.NOT_ENOUGH_REPLICAS, errors.NOT_LEADER_OR_FOLLOWER)
MARKER_ERRORS = (0, 0, 0, errors.NOT_LEADER_OR_FOLLOWER, errors.REQUEST_TIMED_OUT)

txn_i = st.integers(0, len(IDS) - 1)
actions = st.one_of(
    st.tuples(st.just("init"), txn_i, st.booleans()),
    st.tuples(st.just("add"), txn_i, st.sets(st.integers(0, len(PARTS) - 1), min_size=1)),
    st.tuples(st.just("add"), txn_i, st.sets(st.integers(0, len(PARTS) - 1), min_size=1)),
    st.tuples(st.just("offsets"), txn_i, st.integers(0, 3)),
    st.tuples(st.just("end"), txn_i, st.booleans()),
    st.tuples(st.just("end"), txn_i, st.booleans()),
    st.tuples(st.just("stale"), txn_i, st.booleans()),
    st.tuples(st.just("advance"), st.sampled_from([0, 50, 100, 1000, 10_000, 70_000])),
    st.tuples(st.just("resolve"), st.integers(0, 3), st.sampled_from(APPEND_ERRORS)),
    st.tuples(st.just("markers"), st.integers(0, 3), st.sampled_from(MARKER_ERRORS)),
)
healthy = st.tuples(st.just("healthy"),)    # every append in flight succeeds, every marker is written
script_s = st.lists(st.one_of(actions, healthy, healthy, healthy, st.tuples(st.just("init"), txn_i, st.just(False)),
                              st.tuples(st.just("add"), txn_i, st.just({0})),
                              st.tuples(st.just("end"), txn_i, st.booleans())), min_size=10, max_size=80)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script_s)
def test_state_after_writes_equals_replay_of_the_log(script):
    config = TxnConfig(abort_timed_out_interval_ms=1000, transactional_id_expiration_ms=60_000,
                       remove_expired_interval_ms=30_000, retry_backoff_ms=50)
    d = TxnDriver(config, auto_complete=False, auto_markers=False)
    known: dict[str, tuple[int, int]] = {}       # what each producer was told: (pid, epoch)
    inits: dict[int, str] = {}
    handles: list[int] = []

    def learn() -> None:
        for h, txn in list(inits.items()):
            r = d.response(h)
            if r is not None:
                del inits[h]
                if r.error_code == 0:
                    known[txn] = (r.producer_id, r.producer_epoch)

    for action in script:
        kind = action[0]
        if kind == "init":
            _, i, kip360 = action
            txn = IDS[i]
            pid, epoch = known.get(txn, (-1, -1)) if kip360 else (-1, -1)
            h = d.init(txn, timeout_ms=5000, producer_id=pid, producer_epoch=epoch)
            inits[h] = txn
            handles.append(h)
        elif kind in ("add", "offsets", "end", "stale"):
            txn = IDS[action[1]]
            pid, epoch = known.get(txn, (7, 0))
            if kind == "add":
                handles.append(d.add(txn, pid, epoch, *(PARTS[j] for j in sorted(action[2]))))
            elif kind == "offsets":
                handles.append(d.add_offsets(txn, pid, epoch, "g", action[2]))
            elif kind == "end":
                handles.append(d.end(txn, pid, epoch, action[2]))
            else:
                handles.append(d.end(txn, pid, max(epoch - 1, 0), action[2]))
        elif kind == "advance":
            d.advance(action[1])
        elif kind == "resolve":
            if d.pending:
                ids = sorted(d.pending)
                d.complete(ids[action[1] % len(ids)], action[2])
        elif kind == "markers":
            if d.markers:
                m = d.markers.pop(action[1] % len(d.markers))
                tp = m.partitions[0]
                d.marker_errors[tp] = [action[2]]
                d.markers.insert(0, m)
                d._write(d.markers.pop(0))
        elif kind == "healthy":
            d.complete_all(0)
            d.write_markers()
            d.complete_all(0)
        learn()

    # resolve everything in flight: appends succeed, markers are written
    for _ in range(50):
        if not d.pending and not d.markers:
            break
        d.complete_all(0)
        d.write_markers()
        d.advance(100)
    learn()
    assert not d.pending and not d.markers
    for h in handles:
        assert d.response(h) is not None, f"request {h} never answered"
    reloaded = d.reloaded()
    assert reloaded.core.durable_view() == d.core.durable_view()
