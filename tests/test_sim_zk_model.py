"""sim/zk_model.py: unit tests of the model, and a differential test against the real ZooKeeper.

The differential test (``zookeeper`` fixture: tier cluster) runs hypothesis-generated operation
sequences (three sessions; creates, ephemeral and sequential ones included, with makepath; ensure_path;
multiRead; sets and deletes at right and wrong versions; multis with checks; watches from get, exists and
get_children; a session closed, or expired as a chaos fault expires one) on the model and, through kazoo, on a real
server in a chroot of its own per example.  Every answer must match: results, errors, Stat fields
(version, cversion, data length, child count, the owning session), the children's order, and each
session's watch events in order.  zxids are compared by order: the model's and the server's must be
order-isomorphic (same equalities, same inequalities) over every zxid the example saw, which includes
the zxid of every write step (kazoo's ``last_zxid`` after it), so a stat naming the wrong write fails.
Their absolute values are not compared: other tests' sessions may write (expire) meanwhile.
"""
from __future__ import annotations

import logging
import re
import threading
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st
from kazoo.client import KazooClient
from kazoo.protocol.states import Callback

from sim.javahash import JavaHashSet
from sim.zk_watchers import ClientWatchers
from sim.zk_model import (
    CHILD, CHANGED, CREATED, DELETED, GET_CHILDREN, GET_DATA, NONE, Check, Create, Delete, SetData, WatchEvent,
    ZkModel,
)
from zk.batch import multi_read
from zk.client import expire_session
from zk.errors import (
    BadArguments, BadVersion, NoChildrenForEphemerals, NodeExists, NoNode, NotEmpty, RolledBack,
    RuntimeInconsistency, SessionExpired, translate,
)
from zk.stat import Stat

# ---------------------------------------------------------------- unit tests of the model


def test_negotiated_timeout_is_clamped_to_the_tick_bounds():
    m = ZkModel(tick_ms=2000)
    assert [m.connect(0, t)[1] for t in (100, 4000, 6000, 40000, 90000)] == [4000, 4000, 6000, 40000, 40000]
    m = ZkModel(tick_ms=100, max_session_timeout_ms=60000)
    assert [m.connect(0, t)[1] for t in (50, 3000, 100000)] == [200, 3000, 60000]


def test_a_session_expires_at_the_end_of_its_tick_bucket_unless_touched():
    m = ZkModel(tick_ms=100)
    sid, timeout = m.connect(0, 1000)
    assert m.expires_at(sid) == 1100                       # (0 + 1000) rounded up to the next tick
    assert m.expire_due(1099) == [] and m.alive(sid)
    m.touch(sid, 550)                                      # a ping: 550 + 1000 -> bucket 1600
    assert m.expires_at(sid) == 1600 == m.next_expiry()
    m.touch(sid, 10)                                       # an older time never pulls expiry earlier
    assert m.expires_at(sid) == 1600
    assert m.expire_due(1599) == [] and m.alive(sid)
    assert m.expire_due(1600) == [WatchEvent(sid, NONE, "")]
    assert not m.alive(sid)
    with pytest.raises(SessionExpired):
        m.touch(sid, 1700)
    with pytest.raises(SessionExpired):
        m.get(sid, "/")


def test_expiry_deletes_ephemerals_and_fires_the_other_sessions_watches():
    m = ZkModel(tick_ms=100)
    owner, _ = m.connect(0, 1000)
    watcher, _ = m.connect(0, 5000)
    m.create(owner, "/brokers/ids", makepath=True)
    m.create(owner, "/brokers/ids/1", b"b1", ephemeral=True)
    m.create(owner, "/controller", b"1", ephemeral=True)
    m.create(owner, "/persistent", b"p")
    assert m.exists(watcher, "/controller", watch=True)[0].ephemeral_owner == owner
    assert m.get_children(watcher, "/brokers/ids", watch=True)[0] == ["1"]
    m.get(owner, "/persistent", watch=True)               # the expiring session's own watch: dropped
    events = m.expire_due(1100)
    assert events[0] == WatchEvent(owner, NONE, "")
    assert sorted(events[1:], key=lambda e: e.path) == [
        WatchEvent(watcher, CHILD, "/brokers/ids"), WatchEvent(watcher, DELETED, "/controller")]
    assert m.exists(watcher, "/controller")[0] is None
    assert m.get_children(watcher, "/brokers/ids")[0] == []
    assert m.get(watcher, "/persistent")[0][0] == b"p"
    assert m.watches(owner) == {"data": [], "child": []}
    # one-shot: the watches fired and are gone
    assert m.watches(watcher) == {"data": [], "child": []}


def test_close_deletes_ephemerals_without_telling_the_closing_session():
    m = ZkModel()
    a, _ = m.connect(0, 6000)
    b, _ = m.connect(0, 6000)
    m.create(a, "/e", ephemeral=True)
    m.exists(a, "/e", watch=True)
    m.exists(b, "/e", watch=True)
    assert m.close(a, 10) == [WatchEvent(b, DELETED, "/e")]
    assert m.close(a, 20) == []                            # already closed: nothing
    with pytest.raises(SessionExpired):
        m.create(a, "/x")


def test_sequence_numbers_count_child_creations_and_cversion_counts_creations_and_deletions():
    m = ZkModel()
    s, _ = m.connect(0, 6000)
    m.create(s, "/q")
    assert m.create(s, "/q/n-", sequence=True)[0] == "/q/n-0000000000"
    m.create(s, "/q/other")
    assert m.create(s, "/q/n-", sequence=True)[0] == "/q/n-0000000002"
    m.delete(s, "/q/n-0000000000")
    assert m.create(s, "/q/n-", sequence=True, ephemeral=True)[0] == "/q/n-0000000003"
    stat = m.exists(s, "/q")[0]
    assert (stat.num_children, stat.cversion) == (3, 5)   # 4 creations + 1 deletion
    # a failed multi changes nothing, not even the sequence
    results, events = m.multi(s, [Create("/q/n-", sequence=True), Create("/missing/x")])
    assert [type(r) for r in results] == [RolledBack, NoNode] and events == []
    assert m.create(s, "/q/n-", sequence=True)[0] == "/q/n-0000000004"


def test_versions_and_the_order_of_checks():
    m = ZkModel()
    s, _ = m.connect(0, 6000)
    m.create(s, "/a", b"1")
    m.create(s, "/a/b")
    with pytest.raises(BadVersion):
        m.set(s, "/a", b"2", version=3)
    stat, _ = m.set(s, "/a", b"22", version=0)
    assert (stat.version, stat.data_length, stat.num_children) == (1, 2, 1)
    with pytest.raises(BadVersion):                        # the version is checked before the children
        m.delete(s, "/a", version=0)
    with pytest.raises(NotEmpty):
        m.delete(s, "/a", version=1)
    with pytest.raises(NodeExists):
        m.create(s, "/a")
    with pytest.raises(NoNode):
        m.create(s, "/x/y")
    m.create(s, "/e", ephemeral=True)
    with pytest.raises(NoChildrenForEphemerals):
        m.create(s, "/e/child")
    for bad in ("a", "/a/", "/a//b", "/a/./b", "/a/../b", "/a\x01"):
        with pytest.raises(BadArguments):
            m.create(s, bad)
    with pytest.raises(BadArguments):
        m.delete(s, "/")


def test_multi_is_all_or_nothing_with_kazoos_per_op_results():
    m = ZkModel()
    s, _ = m.connect(0, 6000)
    w, _ = m.connect(0, 6000)
    m.create(s, "/c", b"0")
    m.exists(w, "/c", watch=True)
    m.get_children(w, "/", watch=True)
    zxid = m.zxid
    results, events = m.multi(s, [Check("/c", 0), Create("/n", b"x"), SetData("/c", b"1", 0), Delete("/n")])
    assert results[0] is True and results[1] == "/n" and isinstance(results[2], Stat) and results[3] is True
    assert results[2].mzxid == zxid + 1 and m.zxid == zxid + 1  # one zxid for the whole multi
    assert events == [WatchEvent(w, CHILD, "/"), WatchEvent(w, CHANGED, "/c")]
    results, events = m.multi(s, [SetData("/c", b"2"), Check("/c", 0), Create("/n")])
    assert [type(r) for r in results] == [RolledBack, BadVersion, RuntimeInconsistency] and events == []
    assert m.get(s, "/c")[0][0] == b"1" and m.exists(s, "/n")[0] is None


def test_watches_are_one_shot_one_per_session_and_a_deleted_node_fires_once():
    m = ZkModel()
    s, _ = m.connect(0, 6000)
    m.create(s, "/p")
    m.get(s, "/p", watch=True)
    m.exists(s, "/p", watch=True)                          # the same data watch, not a second one
    m.get_children(s, "/p", watch=True)
    _, events = m.delete(s, "/p")
    assert events == [WatchEvent(s, DELETED, "/p")]
    _, events = m.create(s, "/p")
    assert events == []
    with pytest.raises(NoNode):                           # a failed get sets no watch
        m.get(s, "/gone", watch=True)
    m.exists(s, "/gone", watch=True)                      # a failed exists does
    assert m.create(s, "/gone")[1] == [WatchEvent(s, CREATED, "/gone")]


def test_java_hash_set_order():
    """The expected orders were printed by Java 17 (``new ArrayList<>(set)``, and of ``set.clone()``)."""
    s = JavaHashSet(8)                                     # a DataNode's children: new HashSet<>(8)
    for name in ["1", "2", "3", "10", "11", "0000000000", "s-0000000001", "x", "y"]:
        s.add(name)
    assert s.ordered() == ["11", "1", "0000000000", "2", "3", "x", "y", "s-0000000001", "10"]
    paths = JavaHashSet()                                  # a session's ephemerals: new HashSet<>()
    for i in range(40):
        paths.add(f"/simzk-abc/brokers/ids/{i}")
    for i in range(40):
        if i % 8 != 1:
            paths.discard(f"/simzk-abc/brokers/ids/{i}")
    assert paths.ordered() == [f"/simzk-abc/brokers/ids/{i}" for i in (9, 17, 1, 33, 25)]
    # clone() sizes its table for 5 entries (8 buckets, not 64): the order changes
    assert paths.clone().ordered() == [f"/simzk-abc/brokers/ids/{i}" for i in (33, 9, 1, 25, 17)]


def test_client_watchers_dispatch_as_kazoo_does():
    m = ZkModel()
    s, _ = m.connect(0, 6000)
    w = ClientWatchers()
    got: list[tuple[str, str, str]] = []

    def cb(name: str) -> Any:
        return lambda ev: got.append((name, ev.type, ev.path))

    data_cb, child_cb, other = cb("data"), cb("child"), cb("other")
    m.create(s, "/n")
    for fn in (data_cb, data_cb, other):                   # the same callback twice is kept once
        m.get(s, "/n", watch=True)
        w.add_data("/n", fn)
    m.get_children(s, "/n", watch=True)
    w.add_child("/n", child_cb)
    _, events = m.delete(s, "/n")
    assert events == [WatchEvent(s, DELETED, "/n")]        # one notification ...
    for fn, ev in w.dispatch(events[0]):                   # ... reaches every callback for the path
        fn(ev)
    assert got == [("data", DELETED, "/n"), ("other", DELETED, "/n"), ("child", DELETED, "/n")]
    assert w.pending() == 0
    w.add_data("/x", data_cb)
    w.add_child("/", child_cb)
    assert [(fn, ev.type, ev.path) for fn, ev in w.expire()] == [(child_cb, NONE, None), (data_cb, NONE, None)]
    assert w.pending() == 0 and w.dispatch(WatchEvent(s, CHILD, "/")) == []


# ---------------------------------------------------------------- the differential test

SEQ_PREFIXES = ["/a/s-", "/s-"]
# child names whose Java HashSet order is not their sorted order (11 before 10, s-... before 10 and x)
PATHS = ["/a", "/b", "/a/x", "/a/10", "/a/11", "/a/x/z", "/b/x", "/a/s-0000000000", "/a/s-0000000001",
         "/s-0000000000"]
DATA = [b"", b"v", b"value-2"]
VERSIONS = [-1, 0, 1, 2]
SESSIONS = 3
sessions = st.integers(0, SESSIONS - 1)


@st.composite
def creates(draw: Any) -> tuple[Any, ...]:
    seq = draw(st.booleans())
    path = draw(st.sampled_from(SEQ_PREFIXES if seq else PATHS))
    return ("create", draw(sessions), path, draw(st.sampled_from(DATA)), draw(st.booleans()), seq,
            draw(st.booleans()))


@st.composite
def multi_ops(draw: Any) -> Any:
    kind = draw(st.sampled_from(["create", "set", "delete", "check"]))
    path = draw(st.sampled_from(PATHS))
    if kind == "create":
        seq = draw(st.booleans())
        return Create(draw(st.sampled_from(SEQ_PREFIXES)) if seq else path, draw(st.sampled_from(DATA)),
                      draw(st.booleans()), seq)
    if kind == "set":
        return SetData(path, draw(st.sampled_from(DATA)), draw(st.sampled_from(VERSIONS)))
    if kind == "delete":
        return Delete(path, draw(st.sampled_from(VERSIONS)))
    return Check(path, draw(st.sampled_from(VERSIONS)))


STEP = st.one_of(
    creates(), creates(),
    st.tuples(st.sampled_from(["get", "exists", "children"]), sessions, st.sampled_from(PATHS + ["/"]),
              st.sampled_from([True, True, True, False])),
    st.tuples(st.just("set"), sessions, st.sampled_from(PATHS), st.sampled_from(DATA), st.sampled_from(VERSIONS)),
    st.tuples(st.just("delete"), sessions, st.sampled_from(PATHS), st.sampled_from(VERSIONS)),
    st.tuples(st.just("multi"), sessions, st.lists(multi_ops(), min_size=1, max_size=4)),
    st.tuples(st.just("ensure"), sessions, st.sampled_from(PATHS)),
    st.tuples(st.just("read_many"), sessions,
              st.lists(st.tuples(st.sampled_from([GET_DATA, GET_CHILDREN]), st.sampled_from(PATHS + ["/"])),
                       min_size=1, max_size=4)),
)
END = st.tuples(st.sampled_from(["close", "expire"]), sessions)
SCRIPTS = st.builds(lambda prelude, steps: prelude + steps,
                    st.sampled_from([[], [("create", 0, "/a", b"", False, False, False)]]),
                    st.lists(st.one_of(STEP, STEP, STEP, STEP, STEP, STEP, STEP, STEP, END), min_size=4, max_size=24))


def c(s: int, path: str, eph: bool = False, seq: bool = False) -> tuple[Any, ...]:
    return ("create", s, path, b"", eph, seq, False)


# the subtle cases, always run besides the generated ones
SEQUENCE_AFTER_DELETE = [c(0, "/a"), c(0, "/a/s-", seq=True), ("delete", 0, "/a/s-0000000000", -1),
                         ("exists", 2, "/a", False), c(1, "/a/s-", seq=True), ("set", 2, "/a", b"v", 1),
                         c(1, "/a/s-", seq=True), ("get", 0, "/a", False)]
CHILDREN_ORDER = [c(0, "/a"), c(0, "/a/x"), c(1, "/a/10"), c(0, "/a/11"), c(2, "/a/s-", seq=True),
                  ("children", 1, "/a", True), ("delete", 0, "/a/x", -1), c(0, "/a/x"), ("children", 0, "/a", False),
                  ("delete", 1, "/a", 7), ("delete", 1, "/a", -1), ("multi", 2, [Delete("/a/x"), Delete("/a")])]
DELETED_ONCE = [c(0, "/a"), c(0, "/a/x"), ("get", 1, "/a/x", True), ("children", 1, "/a/x", True),
                ("exists", 1, "/a/x", True), ("children", 2, "/a/x", True), ("children", 1, "/a", True),
                ("delete", 0, "/a/x", -1)]
EPHEMERALS = [c(0, "/a"), c(1, "/a/x", eph=True), c(1, "/a/10", eph=True), c(1, "/a/11", eph=True),
              c(1, "/s-", eph=True, seq=True), ("exists", 0, "/a/x", True), ("get", 0, "/a/10", True),
              ("exists", 0, "/a/11", True), ("exists", 0, "/s-0000000000", True), ("children", 2, "/a", True)]


@dataclass
class Z:
    """A zxid inside a normalised answer: compared by order across the example, not by value."""
    value: int


class RealSession:
    """A kazoo client on the example's chroot that records its watch notifications in order."""

    def __init__(self, connect: str, timeout_s: float) -> None:
        self.log: list[Any] = []     # kazoo's WatchedEvent objects, as the callbacks got them
        self.kz = KazooClient(hosts=connect, timeout=timeout_s)
        self.kz.start(timeout=30)
        self.sid, self.password = self.kz.client_id
        self.live = True

    def data_w(self, ev: Any) -> None:
        self.log.append(ev)

    def child_w(self, ev: Any) -> None:
        self.log.append(ev)

    def events(self) -> list[tuple[str, str]]:
        """One entry per notification: kazoo calls both callbacks with the same object on a DELETED
        that hit a data and a child watch."""
        out: list[tuple[str, str]] = []
        last = None
        for ev in self.log:
            if ev is not last:
                out.append((str(ev.type), ev.path))
            last = ev
        return out

    def drain(self) -> None:
        """Every notification the server sent before now has reached our callbacks: a round trip
        (the server answers after the notifications it queued for us), then a marker through
        kazoo's callback queue behind them."""
        self.kz.exists("/")
        done = threading.Event()
        self.kz.handler.dispatch_callback(Callback("watch", done.set, ()))
        assert done.wait(30), "kazoo's callback queue did not drain"

    def stop(self) -> None:
        self.live = False
        self.kz.stop()
        self.kz.close()


def model_step(m: ZkModel, sids: list[int], step: tuple[Any, ...], now: int) -> tuple[Any, list[WatchEvent]]:
    kind, s = step[0], sids[step[1]]
    if kind == "create":
        _, _, path, data, eph, seq, makepath = step
        return m.create(s, path, data, ephemeral=eph, sequence=seq, makepath=makepath)
    if kind == "get":
        return m.get(s, step[2], watch=step[3])
    if kind == "exists":
        return m.exists(s, step[2], watch=step[3])
    if kind == "children":
        return m.get_children(s, step[2], watch=step[3])
    if kind == "set":
        return m.set(s, step[2], step[3], version=step[4])
    if kind == "delete":
        return m.delete(s, step[2], version=step[3])
    if kind == "multi":
        return m.multi(s, step[2])
    if kind == "ensure":
        return m.ensure_path(s, step[2])
    if kind == "read_many":
        return m.read_many(s, step[2])
    if kind == "close":
        return None, m.close(s, now)
    assert kind == "expire"
    if not m.alive(s):
        return None, []
    return None, m.expire(s, now)


def real_step(r: RealSession, step: tuple[Any, ...], hosts: str) -> Any:
    kind, kz = step[0], r.kz
    if kind == "create":
        _, _, path, data, eph, seq, makepath = step
        return kz.create(path, data, ephemeral=eph, sequence=seq, makepath=makepath)
    if kind == "get":
        return kz.get(step[2], watch=r.data_w if step[3] else None)
    if kind == "exists":
        return kz.exists(step[2], watch=r.data_w if step[3] else None)
    if kind == "children":
        return kz.get_children(step[2], watch=r.child_w if step[3] else None)
    if kind == "set":
        return kz.set(step[2], step[3], version=step[4])
    if kind == "delete":
        return kz.delete(step[2], version=step[3])
    if kind == "multi":
        tx = kz.transaction()
        for op in step[2]:
            if isinstance(op, Create):
                tx.create(op.path, op.data, ephemeral=op.ephemeral, sequence=op.sequence)
            elif isinstance(op, SetData):
                tx.set_data(op.path, op.data, op.version)
            elif isinstance(op, Delete):
                tx.delete(op.path, op.version)
            else:
                tx.check(op.path, op.version)
        return tx.commit()
    if kind == "ensure":
        return kz.ensure_path(step[2])
    if kind == "read_many":
        return multi_read(kz, step[2])
    if kind == "close":
        if r.live:
            r.stop()
        return None
    assert kind == "expire"
    if r.live:
        expire_session(hosts, r.sid, r.password)
        r.stop()
    return None


def normalise(x: Any, owners: dict[int, int]) -> Any:
    """Answers as comparable values: errors by our class name, stats without times, zxids as Z."""
    if isinstance(x, BaseException):
        return ["error", type(translate(x)).__name__]
    if hasattr(x, "czxid"):
        s = x if isinstance(x, Stat) else Stat.of(x)
        return ["stat", s.version, s.cversion, s.aversion, s.data_length, s.num_children,
                owners.get(s.ephemeral_owner, s.ephemeral_owner), Z(s.czxid), Z(s.mzxid), Z(s.pzxid)]
    if isinstance(x, (list, tuple)):
        return [normalise(v, owners) for v in x]
    return x


def compare(model: Any, real: Any, pairs: list[tuple[int, int]], where: str) -> None:
    if isinstance(model, Z) and isinstance(real, Z):
        pairs.append((model.value, real.value))
        return
    if isinstance(model, list) and isinstance(real, list) and len(model) == len(real):
        for a, b in zip(model, real):
            compare(a, b, pairs, where)
        return
    assert model == real, f"{where}: model {model!r} != real {real!r}"


def assert_order_isomorphic(pairs: list[tuple[int, int]]) -> None:
    forward: dict[int, int] = {}
    back: dict[int, int] = {}
    for a, b in pairs:
        assert forward.setdefault(a, b) == b and back.setdefault(b, a) == a, f"zxid {a} <-> {b} inconsistent"
    ordered = [forward[a] for a in sorted(forward)]
    assert ordered == sorted(ordered), f"zxid order differs: {sorted(forward.items())}"


TICK_MS, MAX_SESSION_MS, SESSION_MS = 100, 60000, 10000   # tests/conftest.py's ZooKeeper


@settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
@given(script=SCRIPTS)
@example(script=SEQUENCE_AFTER_DELETE)
@example(script=CHILDREN_ORDER)
@example(script=DELETED_ONCE)
@example(script=EPHEMERALS + [("close", 1)])
@example(script=EPHEMERALS + [("expire", 1), ("get", 1, "/a", False)])
def test_the_model_answers_as_the_real_server_does(zookeeper, script):
    chroot = f"/simzk-{uuid.uuid4().hex[:12]}"
    hosts = zookeeper.connect_string
    setup = KazooClient(hosts=hosts, timeout=SESSION_MS / 1000)
    setup.start(timeout=30)
    try:
        setup.create(chroot)
    finally:
        setup.stop()
        setup.close()
    model = ZkModel(tick_ms=TICK_MS, max_session_timeout_ms=MAX_SESSION_MS, root=chroot)
    real: list[RealSession] = []
    sids: list[int] = []
    try:
        for _ in range(SESSIONS):
            real.append(RealSession(hosts + chroot, SESSION_MS / 1000))
            sids.append(model.connect(0, SESSION_MS)[0])
        owners = {r.sid: i + 1 for i, r in enumerate(real)} | {s: i + 1 for i, s in enumerate(sids)}
        model_events: list[list[tuple[str, str]]] = [[] for _ in range(SESSIONS)]
        pairs: list[tuple[int, int]] = []
        for n, step in enumerate(script):
            where = f"step {n} {step!r}"
            i = step[1]
            try:
                m_result, fired = model_step(model, sids, step, now=n)
            except Exception as e:                          # noqa: BLE001 - compared below
                m_result, fired = e, []
            try:
                r_result = real_step(real[i], step, hosts)
            except Exception as e:                          # noqa: BLE001 - compared below
                r_result = e
            compare(normalise(m_result, owners), normalise(r_result, owners), pairs, where)
            if step[0] in ("create", "set", "delete", "multi") and real[i].live:
                pairs.append((model.zxid, real[i].kz.last_zxid))   # the zxid of the step's (last) write
            for ev in fired:
                j = sids.index(ev.session_id)
                if ev.type != NONE and real[j].live:
                    model_events[j].append((ev.type, ev.path))
            if step[0] in ("get", "exists", "children", "read_many"):
                continue                                    # a read fires nothing
            for j, r in enumerate(real):
                if r.live:
                    r.drain()
                    assert model_events[j] == r.events(), f"{where}: session {j}'s watch events differ"
        assert_order_isomorphic(pairs)
    finally:
        for r in real:
            if r.live:
                r.stop()


def test_the_negotiated_session_timeout_is_the_servers(zookeeper):
    model = ZkModel(tick_ms=TICK_MS, max_session_timeout_ms=MAX_SESSION_MS)
    for asked in (150, 3000, 100000):
        records: list[str] = []
        handler = logging.Handler(level=1)
        handler.emit = lambda rec: records.append(rec.getMessage())  # type: ignore[method-assign]
        logger = logging.getLogger(f"simzk.kazoo.{asked}")
        logger.setLevel(1)
        logger.addHandler(handler)
        kz = KazooClient(hosts=zookeeper.connect_string, timeout=asked / 1000, logger=logger)
        try:
            kz.start(timeout=30)
        finally:
            kz.stop()
            kz.close()
        negotiated = [int(x) for rec in records for x in re.findall(r"negotiated session timeout: (\d+)", rec)]
        assert negotiated and negotiated[0] == model.connect(0, asked)[1], (asked, negotiated)
