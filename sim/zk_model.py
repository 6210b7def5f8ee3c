"""A model of ZooKeeper (3.8, one server) as kafkasim uses it, for the deterministic simulator.

Pure and synchronous: no clock, no randomness, no threads, no I/O.  Time comes in as
``now_ms`` arguments; the simulator delivers the returned watch events over its own
simulated network.  tests/test_sim_zk_model.py runs hypothesis-generated operation
sequences against this model and against the real server and requires the same answers.

What is modelled, as the real server does it:

* the tree: persistent, ephemeral and sequential znodes (the sequence number is the
  parent's count of child creations, ``%010d``), ``makepath`` as kazoo does it (each
  missing parent its own persistent create, after a first create that failed);
* ``Stat`` (zk/stat.py): czxid, mzxid, pzxid, version, cversion (creations plus
  deletions of children: ZooKeeper keeps the creation count and reports
  ``2 * creations - numChildren``), ephemeral_owner, data_length, num_children;
  ctime/mtime are the model's clock (the last ``now_ms`` it was given);
* the zxid: one per write request, failed ones included (a failed write is logged as
  an error transaction), one per multi, one per session creation and per close/expiry;
* conditional writes: ``version=-1`` matches any version; errors in ZooKeeper's order
  of checks (create: parent, then existing node, then ephemeral parent; delete: node,
  version, children);
* multi: all or nothing; kazoo's per-op results (the created path, the new ``Stat``
  of a set, True for a delete or check), or on failure one exception per op:
  ``RolledBack`` before the failing op, its error, ``RuntimeInconsistency`` after;
* one-shot watches, one per (session, path, kind) as the server keeps them: a data
  watch (``get``, and ``exists`` even on a missing node) fires CREATED, CHANGED or
  DELETED; a child watch (``get_children``) fires CHILD, or DELETED when the node
  itself goes (one DELETED per session when it held both).  A failed ``get`` or
  ``get_children`` sets no watch.  Events come back in the order the server sends
  them; for one trigger, sessions in id order;
* sessions: the timeout negotiated into [min, max] (default [2, 20] ticks), expiry
  at the end of the tick bucket after ``timeout`` without a request or ping
  (ZooKeeper's ExpiryQueue rounds up to the next tick), close and expiry deleting
  the session's ephemerals in the order the server does (a Java ``HashSet`` clone of
  its paths, sim/javahash.py), ``get_children`` in the server's order too;
* an expired or closed session's requests raise ``SessionExpired``; its own watches
  are dropped (it is told with one ``NONE`` event on expiry, none on close).

Not modelled: ACLs and auth, quotas, containers and TTL nodes, the 4-letter words,
observers and ensembles (one server: no leader election, no stale reads), connection
loss without expiry (the simulator's network decides what a client hears and when),
``sync``, persistent/recursive watches, ``/zookeeper``: the model's ``/`` is like a
chroot.  The client side (which callback a notification reaches; kazoo calls every
registered callback with ``NONE`` when the session expires) is the caller's.

Paths are the model's own (``/`` is its root).  ``root`` names where that root lies in
the server's namespace (a chroot): it only matters for the order of an expiry's
deletions, which hashes the server's full paths.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from sim.javahash import JavaHashSet
from sim.zk_ops import Check, Create, Delete, Op, SetData, parent_of, validate
from zk.exceptions import (
    BadArguments, BadVersion, NoChildrenForEphemerals, NodeExists, NoNode, NotEmpty, RolledBack,
    RuntimeInconsistency, SessionExpired, ZkError,
)
from zk.stat import Stat, WatchEvent as ClientEvent

CREATED, DELETED, CHANGED, CHILD, NONE = "CREATED", "DELETED", "CHANGED", "CHILD", "NONE"
GET_DATA, GET_CHILDREN = 4, 8      # ZooKeeper's opcodes, as zk/batch.py names them for multiRead
FIRST_SESSION_ID = 0x1000000000000  # ids count up from here: deterministic, non-zero, large like ZooKeeper's


@dataclass(frozen=True)
class WatchEvent:
    """One notification the server sends to ``session_id``: ``type`` is kazoo's EventType name
    (CREATED, DELETED, CHANGED, CHILD; NONE with path "" tells an expired session)."""

    session_id: int
    type: str
    path: str

    def event(self) -> ClientEvent:
        """As zk/stat.py's WatchEvent, what ZkClient's watch callbacks receive (path None for NONE)."""
        return ClientEvent(self.type, self.path if self.type != NONE else None)  # type: ignore[arg-type]




class Transaction:
    """kazoo's Transaction API over the model (``create``, ``set_data``, ``delete``, ``check``,
    ``operations``), so code that builds a kazoo transaction can build this one;
    ``commit()`` returns ``(results, events)`` like every model operation."""

    def __init__(self, model: "ZkModel", session_id: int) -> None:
        self.model, self.session_id = model, session_id
        self.operations: list[Op] = []

    def create(self, path: str, value: bytes = b"", acl: Any = None, ephemeral: bool = False,
               sequence: bool = False) -> None:
        self.operations.append(Create(path, value, ephemeral, sequence))

    def set_data(self, path: str, value: bytes, version: int = -1) -> None:
        self.operations.append(SetData(path, value, version))

    def delete(self, path: str, version: int = -1) -> None:
        self.operations.append(Delete(path, version))

    def check(self, path: str, version: int) -> None:
        self.operations.append(Check(path, version))

    def commit(self) -> tuple[list[Any], list[WatchEvent]]:
        return self.model.multi(self.session_id, self.operations)


class _Node:
    __slots__ = ("data", "czxid", "mzxid", "pzxid", "ctime", "mtime", "version", "creates", "owner", "children")

    def __init__(self, data: bytes, zxid: int, now_ms: int, owner: int) -> None:
        self.data = data
        self.czxid = self.mzxid = self.pzxid = zxid
        self.ctime = self.mtime = now_ms
        self.version = 0
        self.creates = 0            # ZooKeeper's stored cversion: children created, ever
        self.owner = owner
        self.children = JavaHashSet(8)

    def copy(self) -> "_Node":
        out = _Node.__new__(_Node)
        for name in _Node.__slots__:
            setattr(out, name, getattr(self, name))
        out.children = self.children.copy()
        return out

    def stat(self) -> Stat:
        n = len(self.children)
        return Stat(self.czxid, self.mzxid, self.pzxid, self.ctime, self.mtime, self.version,
                    2 * self.creates - n, 0, self.owner, len(self.data), n)


class _Session:
    __slots__ = ("session_id", "timeout_ms", "expires_at", "ephemerals")

    def __init__(self, session_id: int, timeout_ms: int, expires_at: int) -> None:
        self.session_id, self.timeout_ms, self.expires_at = session_id, timeout_ms, expires_at
        self.ephemerals = JavaHashSet()   # the server's full paths, as DataTree keeps them


class _View:
    """A copy-on-write view of the tree for one write request: applied only when every op passed."""

    def __init__(self, nodes: dict[str, _Node]) -> None:
        self.nodes = nodes
        self.changed: dict[str, _Node | None] = {}
        self.triggers: list[tuple[str, str]] = []          # (CREATED|DELETED|CHANGED, path)
        self.ephemerals: list[tuple[int, str, bool]] = []  # (owner, path, added)

    def get(self, path: str) -> _Node | None:
        return self.changed[path] if path in self.changed else self.nodes.get(path)

    def mutable(self, path: str) -> _Node:
        node = self.get(path)
        assert node is not None
        if path not in self.changed:
            node = self.changed[path] = node.copy()
        return node


class ZkModel:
    """One ZooKeeper server's state.  Every operation takes the calling ``session_id`` and
    returns ``(result, events)``: ``events`` are the watch notifications it fired, in order.
    Errors are zk/exceptions.py's (NoNode, NodeExists, BadVersion, NotEmpty, SessionExpired...)."""

    def __init__(self, tick_ms: int = 2000, min_session_timeout_ms: int | None = None,
                 max_session_timeout_ms: int | None = None, root: str = "") -> None:
        self.tick_ms = tick_ms
        self.min_session_timeout_ms = min_session_timeout_ms or 2 * tick_ms
        self.max_session_timeout_ms = max_session_timeout_ms or 20 * tick_ms
        self.root = root.rstrip("/")
        self.zxid = 0
        self.now_ms = 0
        self.nodes: dict[str, _Node] = {"/": _Node(b"", 0, 0, 0)}
        self.sessions: dict[int, _Session] = {}
        self._next_session = FIRST_SESSION_ID
        self._data_watches: dict[str, set[int]] = {}
        self._child_watches: dict[str, set[int]] = {}
        # called with (zxid, path, data or None for a delete, created) for each znode a committed transaction
        # changed, in the transaction's order (a multi's path once, with its last value): the simulator's
        # transaction log (sim/compare_run.py records a run as compare/runner.py reads a real side's).  None: off
        self.on_write: Callable[[int, str, bytes | None, bool], None] | None = None

    # ------------------------------------------------------------ sessions

    def _bucket(self, t: int) -> int:
        """ZooKeeper's ExpiryQueue.roundToNextInterval: the end of ``t``'s tick."""
        return (t // self.tick_ms + 1) * self.tick_ms

    def _clock(self, now_ms: int) -> None:
        self.now_ms = max(self.now_ms, now_ms)

    def negotiate(self, timeout_ms: int) -> int:
        return min(max(timeout_ms, self.min_session_timeout_ms), self.max_session_timeout_ms)

    def connect(self, now_ms: int, timeout_ms: int) -> tuple[int, int]:
        """A new session: ``(session_id, negotiated_timeout_ms)``.  Costs a zxid (createSession)."""
        self._clock(now_ms)
        negotiated = self.negotiate(timeout_ms)
        sid = self._next_session
        self._next_session += 1
        self.zxid += 1
        self.sessions[sid] = _Session(sid, negotiated, self._bucket(now_ms + negotiated))
        return sid, negotiated

    def alive(self, session_id: int) -> bool:
        return session_id in self.sessions

    def expires_at(self, session_id: int) -> int | None:
        """When the session expires unless renewed (None: not alive)."""
        s = self.sessions.get(session_id)
        return None if s is None else s.expires_at

    def next_expiry(self) -> int | None:
        """The earliest expiry time of any live session (for the scheduler's next timer)."""
        return min((s.expires_at for s in self.sessions.values()), default=None)

    def touch(self, session_id: int, now_ms: int) -> None:
        """A ping or any request: the session lives ``timeout`` more (rounded up to a tick).
        SessionExpired when it is gone."""
        self._clock(now_ms)
        s = self._session(session_id)
        s.expires_at = max(s.expires_at, self._bucket(now_ms + s.timeout_ms))

    def expire_due(self, now_ms: int) -> list[WatchEvent]:
        """Expire every session whose time has come (in expiry-time, then id, order): each gets a
        NONE event, loses its watches, and its ephemerals are deleted (firing others' watches)."""
        self._clock(now_ms)
        due = sorted((s.expires_at, sid) for sid, s in self.sessions.items() if s.expires_at <= now_ms)
        events: list[WatchEvent] = []
        for _, sid in due:
            events.append(WatchEvent(sid, NONE, ""))
            events += self._end_session(sid)
        return events

    def expire(self, session_id: int, now_ms: int) -> list[WatchEvent]:
        """Expire one session now (a fault: what zk.client.expire_session does to a real one)."""
        self._clock(now_ms)
        self._session(session_id)
        return [WatchEvent(session_id, NONE, "")] + self._end_session(session_id)

    def close(self, session_id: int, now_ms: int) -> list[WatchEvent]:
        """The client closes its session: its ephemerals go at once.  Closing a session that is
        already gone does nothing."""
        self._clock(now_ms)
        if session_id not in self.sessions:
            return []
        return self._end_session(session_id)

    def _end_session(self, sid: int) -> list[WatchEvent]:
        session = self.sessions.pop(sid)
        for table in (self._data_watches, self._child_watches):
            for path in [p for p, sids in table.items() if sid in sids]:
                table[path].discard(sid)
                if not table[path]:
                    del table[path]
        self.zxid += 1
        view = _View(self.nodes)
        cut = len(self.root)
        for server_path in session.ephemerals.clone().ordered():
            path = server_path[cut:] or "/"
            node = view.get(path)
            if node is not None and node.owner == sid:
                self._remove(view, path, self.zxid)
        return self._apply(view)

    def _session(self, session_id: int) -> _Session:
        s = self.sessions.get(session_id)
        if s is None:
            raise SessionExpired(f"session 0x{session_id:x} has expired or was closed")
        return s

    # ------------------------------------------------------------ reads

    def get(self, session_id: int, path: str, watch: bool = False) -> tuple[tuple[bytes, Stat], list[WatchEvent]]:
        """``((data, Stat), [])``; NoNode (and no watch) when the znode is missing."""
        self._session(session_id)
        validate(path)
        node = self._existing(path)
        if watch:
            self._data_watches.setdefault(path, set()).add(session_id)
        return (node.data, node.stat()), []

    def exists(self, session_id: int, path: str, watch: bool = False) -> tuple[Stat | None, list[WatchEvent]]:
        """``(Stat or None, [])``; the watch is set even when the znode is missing (it fires CREATED)."""
        self._session(session_id)
        validate(path)
        if watch:
            self._data_watches.setdefault(path, set()).add(session_id)
        node = self.nodes.get(path)
        return (None if node is None else node.stat()), []

    def get_children(self, session_id: int, path: str,
                     watch: bool = False) -> tuple[list[str], list[WatchEvent]]:
        """``(child names in the server's order, [])``; NoNode (and no watch) when missing."""
        self._session(session_id)
        validate(path)
        node = self._existing(path)
        if watch:
            self._child_watches.setdefault(path, set()).add(session_id)
        return node.children.ordered(), []

    def read_many(self, session_id: int, ops: Sequence[tuple[int, str]]) -> tuple[list[Any], list[WatchEvent]]:
        """multiRead (opcode 22, zk/batch.py): ops are (GET_DATA, path) or (GET_CHILDREN, path); per op
        ``(data, Stat)``, the children, or the op's error as a value (NoNode).  Not atomic, sets no watch."""
        self._session(session_id)
        out: list[Any] = []
        for code, path in ops:
            if code not in (GET_DATA, GET_CHILDREN):
                raise BadArguments(f"multiRead takes GET_DATA ({GET_DATA}) or GET_CHILDREN ({GET_CHILDREN}), not {code}")
            try:
                validate(path)
                node = self._existing(path)
            except ZkError as e:
                out.append(e)
                continue
            out.append((node.data, node.stat()) if code == GET_DATA else node.children.ordered())
        return out, []

    def _existing(self, path: str) -> _Node:
        node = self.nodes.get(path)
        if node is None:
            raise NoNode(path)
        return node

    # ------------------------------------------------------------ writes

    def create(self, session_id: int, path: str, data: bytes = b"", ephemeral: bool = False,
               sequence: bool = False, makepath: bool = False) -> tuple[str, list[WatchEvent]]:
        """``(the created path, events)``.  With ``makepath``, as kazoo: on NoNode, each missing
        parent is created (persistent, empty; one request each) and the create sent again."""
        try:
            return self._write(session_id, lambda v, z: self._create(v, z, session_id, Create(
                path, data, ephemeral, sequence)))
        except NoNode:
            if not makepath:
                raise
        parent = path.rstrip("/") if sequence and path.endswith("/") else parent_of(path)[0]
        events = self._ensure_path(session_id, parent)
        created, more = self.create(session_id, path, data, ephemeral, sequence, makepath=False)
        return created, events + more

    def ensure_path(self, session_id: int, path: str) -> tuple[str | bool, list[WatchEvent]]:
        """kazoo's ensure_path: every missing znode on the way, top down, persistent and empty.
        The result is kazoo's: the path when this call created it, else True."""
        if path == "/" or self.exists(session_id, path)[0] is not None:
            return True, []
        events = self._ensure_path(session_id, parent_of(path)[0])
        try:
            created, more = self.create(session_id, path)
        except NodeExists:
            return True, events
        return created, events + more

    def _ensure_path(self, session_id: int, path: str) -> list[WatchEvent]:
        return self.ensure_path(session_id, path)[1]

    def set(self, session_id: int, path: str, data: bytes, version: int = -1) -> tuple[Stat, list[WatchEvent]]:
        """``(the new Stat, events)``; NoNode, BadVersion."""
        return self._write(session_id, lambda v, z: self._set(v, z, SetData(path, data, version)))

    def delete(self, session_id: int, path: str, version: int = -1) -> tuple[bool, list[WatchEvent]]:
        """``(True, events)``; NoNode, BadVersion, NotEmpty (in that order of checks)."""
        return self._write(session_id, lambda v, z: self._delete(v, z, Delete(path, version)))

    def transaction(self, session_id: int) -> Transaction:
        return Transaction(self, session_id)

    def multi(self, session_id: int, ops: Sequence[Op]) -> tuple[list[Any], list[WatchEvent]]:
        """All ops or none, at one zxid.  Per op, as kazoo reports: the created path, the new Stat,
        True (delete, check); or, when one failed, exceptions: RolledBack before it, its error,
        RuntimeInconsistency after it (and no events)."""
        self._session(session_id)
        self.zxid += 1
        zxid = self.zxid
        view = _View(self.nodes)
        results: list[Any] = []
        for i, op in enumerate(ops):
            try:
                results.append(self._op(view, zxid, session_id, op))
            except (NoNode, NodeExists, BadVersion, NotEmpty, NoChildrenForEphemerals, BadArguments) as e:
                return ([RolledBack() for _ in range(i)] + [e]
                        + [RuntimeInconsistency() for _ in range(len(ops) - i - 1)]), []
        return results, self._apply(view)

    def _write(self, session_id: int, fn: Any) -> Any:
        """One write request: its own zxid (spent even when it fails), applied when it passes."""
        self._session(session_id)
        self.zxid += 1
        view = _View(self.nodes)
        result = fn(view, self.zxid)
        return result, self._apply(view)

    def _op(self, view: _View, zxid: int, sid: int, op: Op) -> Any:
        if isinstance(op, Create):
            return self._create(view, zxid, sid, op)
        if isinstance(op, SetData):
            return self._set(view, zxid, op)
        if isinstance(op, Delete):
            return self._delete(view, zxid, op)
        if isinstance(op, Check):
            validate(op.path)
            self._check_version(view, op.path, op.version)
            return True
        raise BadArguments(f"not a multi op: {op!r}")

    @staticmethod
    def _check_version(view: _View, path: str, version: int) -> _Node:
        node = view.get(path)
        if node is None:
            raise NoNode(path)
        if version != -1 and version != node.version:
            raise BadVersion(path)
        return node

    def _create(self, view: _View, zxid: int, sid: int, op: Create) -> str:
        if not isinstance(op.data, (bytes, bytearray)):
            raise BadArguments(f"data must be bytes, not {type(op.data).__name__}")
        validate(op.path, op.sequence)
        if op.path == "/":
            raise NodeExists("/")
        parent_path, _ = parent_of(op.path)
        parent = view.get(parent_path)
        if parent is None:
            raise NoNode(parent_path)
        path = f"{op.path}{parent.creates:010d}" if op.sequence else op.path
        if view.get(path) is not None:
            raise NodeExists(path)
        if parent.owner:
            raise NoChildrenForEphemerals(path)
        owner = sid if op.ephemeral else 0
        parent = view.mutable(parent_path)
        parent.creates += 1
        parent.pzxid = zxid
        parent.children.add(parent_of(path)[1])
        view.changed[path] = _Node(bytes(op.data), zxid, self.now_ms, owner)
        if owner:
            view.ephemerals.append((owner, path, True))
        view.triggers.append((CREATED, path))
        return path

    def _set(self, view: _View, zxid: int, op: SetData) -> Stat:
        if not isinstance(op.data, (bytes, bytearray)):
            raise BadArguments(f"data must be bytes, not {type(op.data).__name__}")
        validate(op.path)
        self._check_version(view, op.path, op.version)
        node = view.mutable(op.path)
        node.data = bytes(op.data)
        node.version += 1
        node.mzxid = zxid
        node.mtime = self.now_ms
        view.triggers.append((CHANGED, op.path))
        return node.stat()

    def _delete(self, view: _View, zxid: int, op: Delete) -> bool:
        validate(op.path)
        if op.path == "/":
            raise BadArguments("cannot delete /")
        node = self._check_version(view, op.path, op.version)
        if len(node.children):
            raise NotEmpty(op.path)
        self._remove(view, op.path, zxid)
        return True

    @staticmethod
    def _remove(view: _View, path: str, zxid: int) -> None:
        node = view.get(path)
        assert node is not None
        parent_path, name = parent_of(path)
        parent = view.mutable(parent_path)
        parent.children.discard(name)
        parent.pzxid = max(parent.pzxid, zxid)
        view.changed[path] = None
        if node.owner:
            view.ephemerals.append((node.owner, path, False))
        view.triggers.append((DELETED, path))

    def _apply(self, view: _View) -> list[WatchEvent]:
        """Make the view's changes real and fire the watches they trigger, in order."""
        if self.on_write is not None:
            self._report(view)
        for path, node in view.changed.items():
            if node is None:
                self.nodes.pop(path, None)
            else:
                self.nodes[path] = node
        for owner, path, added in view.ephemerals:
            session = self.sessions.get(owner)
            if session is not None:
                if added:
                    session.ephemerals.add(self.root + path)
                else:
                    session.ephemerals.discard(self.root + path)
        events: list[WatchEvent] = []
        for kind, path in view.triggers:
            if kind == CHANGED:
                events += self._fire(self._data_watches, path, CHANGED)
                continue
            if kind == CREATED:
                events += self._fire(self._data_watches, path, CREATED)
            else:
                fired = self._fire(self._data_watches, path, DELETED)
                done = {e.session_id for e in fired}
                fired += self._fire(self._child_watches, path, DELETED, skip=done)
                events += sorted(fired, key=lambda e: e.session_id)
            events += self._fire(self._child_watches, parent_of(path)[0], CHILD)
        return events

    def _report(self, view: _View) -> None:
        """``on_write`` for each znode the view created, set or deleted (a parent's changed child list and
        counters are not a write, as ZooKeeper's log has none), once per znode with its value at the end."""
        seen: set[str] = set()
        for _kind, path in view.triggers:
            if path in seen:
                continue
            seen.add(path)
            node = view.changed.get(path)
            self.on_write(self.zxid, path, None if node is None else node.data, path not in self.nodes)

    @staticmethod
    def _fire(table: dict[str, set[int]], path: str, kind: str, skip: set[int] | None = None) -> list[WatchEvent]:
        sids = table.pop(path, None)
        if not sids:
            return []
        return [WatchEvent(sid, kind, path) for sid in sorted(sids) if not skip or sid not in skip]

    # ------------------------------------------------------------ inspection

    def watches(self, session_id: int) -> dict[str, list[str]]:
        """The session's pending watches: {"data": [paths], "child": [paths]} (for tests and debugging)."""
        return {"data": sorted(p for p, s in self._data_watches.items() if session_id in s),
                "child": sorted(p for p, s in self._child_watches.items() if session_id in s)}


__all__ = ["CHANGED", "CHILD", "CREATED", "DELETED", "GET_CHILDREN", "GET_DATA", "NONE", "Check", "Create", "Delete", "Op", "SetData",
           "Transaction", "WatchEvent", "ZkError", "ZkModel", "parent_of", "validate"]
