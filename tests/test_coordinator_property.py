"""Property: the coordinator's durable state is exactly the replay of its committed records.

Random request sequences from several members of several groups, random time
advances and random append outcomes (completed late, out of order, or failed).
At the end, a fresh coordinator that loads the log (every successfully
appended record, in order) has the same durable_view(), and every group it
loads from a GroupMetadataValue equals that value.  Along the way nothing may
raise (an illegal state transition is a bug) and every handle is answered
exactly once by the end.
"""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st

from coordinator.core import GroupConfig
from coordinator.group import EMPTY, STABLE
from coordinator.messages import CommitOffset, JoinGroupResponse
from coordinator.testing import Driver
from kafkacommon import errors

GROUPS = ("g1", "g2")
SLOTS = 3                      # slot 2 of every group is a static member
PROTOCOLS = ([("range", b"a")], [("range", b"b")], [("roundrobin", b""), ("range", b"a")])
APPEND_ERRORS = (0, 0, 0, 0, errors.REQUEST_TIMED_OUT, errors.NOT_ENOUGH_REPLICAS,
                 errors.NOT_LEADER_OR_FOLLOWER, 10)

group_i = st.integers(0, len(GROUPS) - 1)
slot_i = st.integers(0, SLOTS - 1)

join_a = st.tuples(st.just("join"), group_i, slot_i, st.booleans(), st.booleans(),
                   st.integers(0, len(PROTOCOLS) - 1), st.sampled_from([6000, 10000]), st.sampled_from([3000, 10000]))
sync_a = st.tuples(st.just("sync"), group_i, slot_i, st.integers(-1, 0))
heartbeat_a = st.tuples(st.just("heartbeat"), group_i, slot_i)
leave_a = st.tuples(st.just("leave"), group_i, slot_i)
commit_a = st.tuples(st.just("commit"), group_i, slot_i, st.booleans(), st.integers(0, 2), st.integers(0, 99))
fetch_a = st.tuples(st.just("fetch"), group_i, st.booleans())
admin_a = st.tuples(st.just("admin"), group_i, st.sampled_from(["describe", "list", "delete"]))
advance_a = st.tuples(st.just("advance"), st.sampled_from([0, 1, 200, 700, 700, 1500, 3000]))
long_advance_a = st.tuples(st.just("advance"), st.sampled_from([6000, 10000, 600000]))
resolve_a = st.tuples(st.just("resolve"), st.integers(0, 5), st.sampled_from(APPEND_ERRORS))
# whole-group moves, so that groups get through rebalances to Stable
sync_all_a = st.tuples(st.just("sync_all"), group_i)
heartbeat_all_a = st.tuples(st.just("heartbeat_all"), group_i)
rejoin_all_a = st.tuples(st.just("rejoin_all"), group_i, st.integers(0, len(PROTOCOLS) - 1))
resolve_all_a = st.tuples(st.just("resolve_all"), st.sampled_from(APPEND_ERRORS))
healthy_a = st.tuples(st.just("healthy"), st.sampled_from([1000, 4000, 20000]))   # live clients, working log
# transactional producers 7 and 8: offsets for a group, then the marker that decides them
txn_commit_a = st.tuples(st.just("txn_commit"), group_i, st.sampled_from([7, 8]), st.integers(0, 99),
                         st.booleans())
marker_a = st.tuples(st.just("marker"), st.sampled_from([7, 8]), st.booleans())

actions = st.one_of(
    join_a, join_a, join_a, sync_a, heartbeat_a, leave_a, commit_a, commit_a, fetch_a, admin_a,
    advance_a, advance_a, advance_a, long_advance_a, resolve_a, sync_all_a, sync_all_a, sync_all_a, heartbeat_all_a,
    heartbeat_all_a, rejoin_all_a, resolve_all_a, resolve_all_a, healthy_a, healthy_a, txn_commit_a, marker_a, marker_a,
)


class Clients:
    """What the simulated clients know: member ids and generations, learned from responses."""

    def __init__(self, d: Driver) -> None:
        self.d = d
        self.member: dict[tuple[int, int], str] = {}
        self.generation: dict[tuple[int, int], int] = {}
        self.leader: dict[tuple[int, int], bool] = {}
        self.joins: dict[int, tuple[int, int]] = {}
        self.handles: list[int] = []

    def learn(self) -> None:
        """Read the join answers; like real clients, sync after a join and rejoin after MEMBER_ID_REQUIRED."""
        follow_ups = []
        for handle, who in list(self.joins.items()):
            r = self.d.response(handle)
            if r is None:
                continue
            del self.joins[handle]
            assert isinstance(r, JoinGroupResponse)
            if r.error_code in (errors.NONE, errors.MEMBER_ID_REQUIRED):
                self.member[who] = r.member_id
            elif r.error_code in (errors.UNKNOWN_MEMBER_ID, errors.FENCED_INSTANCE_ID):
                self.member.pop(who, None)
            if r.error_code == errors.NONE:
                self.generation[who] = r.generation_id
                self.leader[who] = r.leader == r.member_id
                follow_ups.append(("sync", who[0], who[1], 0))
            elif r.error_code == errors.MEMBER_ID_REQUIRED:
                follow_ups.append(("join", who[0], who[1], True, True, 0, 10000, 10000))
        for action in follow_ups:
            self.step(action)

    def step(self, action: tuple) -> None:
        d, kind = self.d, action[0]
        handle = None
        if kind == "join":
            _, g, s, known, require, p, session, rebalance = action
            who = (g, s)
            member_id = self.member.get(who, "") if known else ""
            handle = d.join(GROUPS[g], member_id, protocols=PROTOCOLS[p], session_ms=session,
                            rebalance_ms=rebalance, instance=f"i{g}" if s == 2 else None,
                            client_id=f"c{s}", require_known=require)
            self.joins[handle] = who
        elif kind == "sync":
            _, g, s, skew = action
            who = (g, s)
            mid = self.member.get(who, "x")
            assignments = []
            if self.leader.get(who):
                assignments = [(m, f"{m}@{self.generation.get(who)}".encode())
                               for (gg, _), m in self.member.items() if gg == g]
            handle = d.sync(GROUPS[g], self.generation.get(who, 0) + skew, mid, assignments,
                            instance=f"i{g}" if s == 2 else None)
        elif kind == "heartbeat":
            _, g, s = action
            handle = d.heartbeat(GROUPS[g], self.generation.get((g, s), 0), self.member.get((g, s), "x"),
                                 f"i{g}" if s == 2 else None)
        elif kind == "leave":
            _, g, s = action
            handle = d.leave(GROUPS[g], (self.member.get((g, s), "x"), f"i{g}" if s == 2 else None))
        elif kind == "commit":
            _, g, s, as_member, n, offset = action
            offsets = [CommitOffset("t", i, offset + i, metadata="m" * (offset % 7)) for i in range(n + 1)]
            if as_member:
                handle = d.commit(GROUPS[g], offsets, self.generation.get((g, s), 0),
                                  self.member.get((g, s), "x"), instance=f"i{g}" if s == 2 else None,
                                  retention_ms=-1 if offset % 5 else 3600000)
            else:
                handle = d.commit(GROUPS[g], offsets)
        elif kind == "txn_commit":
            _, g, pid, offset, as_member = action
            who = (g, 0)
            handle = d.txn_commit(GROUPS[g], pid, {("t", 0): offset, ("t", 1): offset + 1},
                                  generation=self.generation.get(who, -1) if as_member else -1,
                                  member_id=self.member.get(who, "") if as_member else "")
        elif kind == "marker":
            while d.pending:         # the transaction coordinator writes markers once TxnOffsetCommit answered
                d.complete(None, 0)
                self.learn()
            d.marker(action[1], action[2])
        elif kind == "fetch":
            _, g, stable = action
            handle = d.fetch(GROUPS[g], None, stable)
        elif kind == "admin":
            _, g, what = action
            handle = d.describe(GROUPS[g]) if what == "describe" else d.list() if what == "list" \
                else d.delete(GROUPS[g])
        elif kind == "advance":
            d.advance(action[1])
        elif kind in ("sync_all", "heartbeat_all", "rejoin_all"):
            g = action[1]
            for s in range(SLOTS):
                if (g, s) not in self.member:
                    continue
                if kind == "sync_all":
                    self.step(("sync", g, s, 0))
                elif kind == "heartbeat_all":
                    self.step(("heartbeat", g, s))
                    reply = d.response(self.handles[-1])
                    if len(action) > 2 and reply.error_code == errors.REBALANCE_IN_PROGRESS:
                        self.step(("join", g, s, True, False, 0, 10000, 10000))
                else:
                    self.step(("join", g, s, True, False, action[2], 10000, 10000))
        elif kind == "healthy":
            for _ in range(action[1] // 1000):
                while d.pending:
                    d.complete(None, 0)
                    self.learn()
                for g in range(len(GROUPS)):
                    self.step(("heartbeat_all", g, "rejoin on 27"))
                d.advance(1000)
                self.learn()
        elif kind == "resolve_all":
            while d.pending:
                d.complete(None, action[1])
                self.learn()
        elif kind == "resolve":
            _, index, code = action
            if d.pending:
                pending = sorted(d.pending)
                d.complete(pending[index % len(pending)], code)
        if handle is not None:
            self.handles.append(handle)
        self.learn()


def check_counts(d: Driver) -> None:
    """The counts a group keeps as members come, go and park (awaiting join, members per protocol)
    equal a scan of its members."""
    for group_id in d.core.group_ids():
        group = d.core.get_group(group_id)
        members = list(group.members.values())
        assert group.num_awaiting_join == sum(m.is_awaiting_join for m in members), group
        scanned: dict = {}
        for m in members:
            for name in {n for n, _ in m.protocols}:
                scanned[name] = scanned.get(name, 0) + 1
        assert group._protocol_counts == scanned, group
        assert all(m._group is group for m in members), group


def check_reload(d: Driver) -> None:
    fresh = d.reloaded(entries=d.applied_entries())   # = d.entries() once nothing is pending
    view = d.core.durable_view()
    assert fresh.core.durable_view() == view
    for group_id, value in view["groups"].items():
        group = fresh.core.get_group(group_id)
        assert group is not None and group.state == (STABLE if value.members else EMPTY)
        assert group.snapshot_value() == value if value.members else group.to_value({}) == value
    for group_id in fresh.core.group_ids():
        if group_id not in view["groups"]:
            assert fresh.core.get_group(group_id).state == EMPTY
            assert fresh.core.get_group(group_id).protocol_type is None


CONFIG = GroupConfig(initial_rebalance_delay_ms=700, max_size=3, offset_metadata_max_bytes=4,
                     offsets_retention_ms=3600000, offsets_retention_check_interval_ms=600000)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(actions, min_size=5, max_size=60), st.booleans())
def test_durable_state_is_the_replay_of_the_log(steps, settle):
    d = Driver(CONFIG, auto_complete=False)
    clients = Clients(d)
    for action in steps:
        clients.step(action)
        check_counts(d)
    check_reload(d)               # with appends still pending: the core has replayed the log before them
    if settle:
        d.complete_all()
        clients.learn()
        assert d.applied_log() == d.log()
        check_reload(d)
        d.advance(600000)
        check_reload(d)
    d.apply(d.core.unload(d.now))
    d.complete_all()              # appends still pending at the unload (orphans) answer NOT_COORDINATOR
    for handle in clients.handles:
        assert len(d.responses.get(handle, [])) == 1, (handle, d.responses.get(handle))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(actions, min_size=5, max_size=40), st.lists(actions, max_size=20))
def test_failover_then_more_traffic(before, after):
    d = Driver(CONFIG, auto_complete=False)
    clients = Clients(d)
    for action in before:
        clients.step(action)
        check_counts(d)
    e = d.reloaded()
    check_counts(e)              # the new leader loads whatever was committed
    clients.d = e
    clients.joins.clear()
    for action in after:
        clients.step(action)
        check_counts(e)
    e.complete_all()
    check_reload(e)
