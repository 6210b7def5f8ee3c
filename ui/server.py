"""``kafkasim ui``: a local web server (Starlette on uvicorn) for one page, fed by Server-Sent Events.

Live: the run's event logs are followed every 25 ms and what ZooKeeper, the processes and the brokers say
is polled; each batch goes through the reducer (ui/state.py) and the page gets one SSE message per batch:
the new events and the rows they changed.  Replay: a finished run's lines are replayed through the same
reducer up to the instant the page asks for.
"""
from __future__ import annotations

import asyncio
import bisect
import contextlib
import json
import pickle
import queue
import secrets
import socket
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ui.guard import TOKEN_HEADER, Guard
from ui.sources import UI_LOG, LivePoller, LogTail, events_dir, load_run, offsets_partitions
from ui.state import ClusterState

STATIC = Path(__file__).resolve().parent / "static"
TICK_S = 0.025
KEEP_EVENTS = 2000
#: Observations the server makes itself: they change the state but are not shown as events.
OBSERVATIONS = frozenset({"ui_zk", "ui_procs", "ui_replicas", "ui_group"})
LOOPBACK = "127.0.0.1"
#: Bound to one of these (the default), the served page carries the controls' token; bound anywhere else, even
#: to another loopback address, the user types in the token the server printed.
PAGE_TOKEN_HOSTS = frozenset({LOOPBACK, "localhost", "::1"})


def own_names() -> frozenset[str]:
    """This machine's own names (a Host naming it is this server when it is bound to every address)."""
    names = {socket.gethostname().lower(), socket.getfqdn().lower()}
    return frozenset(n for n in names if n)


def _dumps(doc: Any) -> str:
    return json.dumps(doc, separators=(",", ":"), default=str)


class LiveHub:
    """The live state: one reducer, fed on the event loop; every subscriber gets each batch."""

    def __init__(self, cluster: Any, run_dir: Path):
        self.cluster = cluster
        self.dir = run_dir / "events"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.tail = LogTail(self.dir)
        self.state = ClusterState(cluster.cfg.get("offsets.topic.num.partitions"))
        self.observed: "queue.SimpleQueue[dict[str, Any]]" = queue.SimpleQueue()
        self.recent: deque[dict[str, Any]] = deque(maxlen=KEEP_EVENTS)
        self.subscribers: set[asyncio.Queue[str]] = set()
        self.poller = LivePoller(cluster, self.observed.put, groups=lambda: sorted(self.state.groups))
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        self._step()          # the logs so far, before anyone subscribes
        self.state.take_patch()
        self.poller.start()
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
        await run_in_threadpool(self.poller.stop)

    def _step(self) -> dict[str, Any] | None:
        new = self.tail.poll()
        while True:
            try:
                new.append(self.observed.get_nowait())
            except queue.Empty:
                break
        if not new:
            return None
        shown = []
        for e in new:
            self.state.apply(e)
            if e.get("type") not in OBSERVATIONS:
                shown.append(e)
        self.recent.extend(shown)
        patch = self.state.take_patch()
        if not shown and patch is None:
            return None
        return {"events": shown, "patch": patch, "sent_ms": round(time.time() * 1000.0, 3)}

    async def _run(self) -> None:
        while True:
            try:
                batch = self._step()
            except Exception:  # a bad line must not stop the view
                batch = None
            if batch is not None and self.subscribers:
                msg = "event: batch\ndata: " + _dumps(batch) + "\n\n"
                for q in list(self.subscribers):
                    q.put_nowait(msg)
            await asyncio.sleep(TICK_S)

    def snapshot(self) -> dict[str, Any]:
        snap = self.state.snapshot()
        snap["events"] = list(self.recent)[-500:]
        return snap


class Replayer:
    """A finished run replayed through the reducer: ``at(t)`` is the state after every line up to ``t``.
    Moving forward applies only the lines in between; moving back starts from the nearest checkpoint."""

    EVERY = 5000

    def __init__(self, run_dir: Path):
        run = load_run(run_dir)
        self.items: list[tuple[int, dict[str, Any]]] = run["items"]
        self.times = [t for t, _ in self.items]
        self.results = run["results"]
        self.wall_offset_ms = run["wall_offset_ms"]
        self.n_offsets = offsets_partitions(self.items)
        self.checkpoints: list[tuple[int, bytes]] = []
        state = ClusterState(self.n_offsets)
        for i, (_, e) in enumerate(self.items):
            if i % self.EVERY == 0:
                self.checkpoints.append((i, pickle.dumps(state)))
            state.apply(e)
        self.final = state
        self._state, self._idx = ClusterState(self.n_offsets), 0
        self._lock = threading.Lock()

    def at(self, t_ns: int) -> dict[str, Any]:
        with self._lock:   # requests run on a thread pool; one cursor
            return self._at(t_ns)

    def _at(self, t_ns: int) -> dict[str, Any]:
        end = bisect.bisect_right(self.times, t_ns)
        if end < self._idx:
            i, blob = self.checkpoints[max(0, bisect.bisect_right([c[0] for c in self.checkpoints], end) - 1)]
            self._state, self._idx = pickle.loads(blob), i
        for _, e in self.items[self._idx:end]:
            self._state.apply(e)
        self._idx = end
        snap = self._state.snapshot()
        snap["t_ns"] = t_ns
        snap["events"] = [e for _, e in self.items[max(0, end - 300):end]
                          if "mono_ns" in e and e.get("type") not in OBSERVATIONS]
        return snap

    def meta(self) -> dict[str, Any]:
        stages = []
        rows = (self.results or {}).get("timeline", {}).get("rows") if isinstance(
            (self.results or {}).get("timeline"), dict) else (self.results or {}).get("timeline")
        if rows:
            for r in rows:
                stages.append({k: r.get(k) for k in ("fault", "kind", "group", "partition", "old_leader",
                                                    "new_leader", "detect_ms", "elect_ms", "load_ms",
                                                    "first_commit_ms", "controller_failover_ms")}
                              | {"t0": r.get("time_ns"), "source": "results.json"})
        else:
            stages = [dict(r, source="events") for r in self.final.failovers]
        return {"start_ns": self.times[0] if self.times else 0, "end_ns": self.times[-1] if self.times else 0,
                "wall_offset_ms": self.wall_offset_ms, "faults": self.final.faults, "stages": stages,
                "lines": len(self.items)}


def create_app(*, mode: str, host: str, read_only: bool, cluster: Any = None, config_path: Path | None = None,
               run_dir: Path | None = None, token: str | None = None, port: int = 8080) -> Starlette:
    """The web view's app.  Controls always need ``token`` (made here when none is given): the page served on
    loopback carries it; bound elsewhere, the user types the one ``serve`` printed.  Every request must name
    this server in its Host and come from its own origin (ui/guard.py)."""
    hub: LiveHub | None = None
    replayer: Replayer | None = None
    controls = None
    token = token or secrets.token_urlsafe(16)
    token_in_page = host in PAGE_TOKEN_HOSTS
    guard = Guard(host, port, own_names())
    if mode == "live":
        hub = LiveHub(cluster, run_dir)
        if not read_only:
            from ui.controls import Controls
            controls = Controls(cluster, config_path, hub.dir / UI_LOG)
    else:
        replayer = Replayer(run_dir)
    page = (STATIC / "index.html").read_text()
    if token_in_page and controls is not None:
        page = page.replace("<head>", f'<head>\n<meta name="kafkasim-token" content="{token}">', 1)

    async def index(request: Request) -> Response:
        return HTMLResponse(page, headers={"Cache-Control": "no-store"})

    async def config(request: Request) -> Response:
        return JSONResponse({"mode": mode, "read_only": read_only or mode == "replay", "host": host,
                             "token_in_page": token_in_page, "run_dir": str(run_dir),
                             "brokers": [b.id for b in cluster.cfg.brokers] if cluster else None})

    async def state(request: Request) -> Response:
        if hub is not None:
            return Response(_dumps(hub.snapshot()), media_type="application/json")
        t = int(request.query_params.get("t", "0") or 0)
        snap = await run_in_threadpool(replayer.at, t)
        return Response(_dumps(snap), media_type="application/json")

    async def meta(request: Request) -> Response:
        if replayer is None:
            return JSONResponse({"error": "not a replay"}, status_code=404)
        return Response(_dumps(replayer.meta()), media_type="application/json")

    async def stream(request: Request) -> Response:
        if hub is None:
            return JSONResponse({"error": "replay has no stream"}, status_code=404)
        q: asyncio.Queue[str] = asyncio.Queue()

        async def gen():
            hub.subscribers.add(q)
            try:
                yield "event: snapshot\ndata: " + _dumps(hub.snapshot()) + "\n\n"
                while True:
                    try:
                        msg = await asyncio.wait_for(q.get(), 15)
                    except asyncio.TimeoutError:
                        msg = ": keep-alive\n\n"
                    # batches queued while the page was busy go out together
                    parts = [msg]
                    while not q.empty():
                        parts.append(q.get_nowait())
                    yield "".join(parts)
            finally:
                hub.subscribers.discard(q)
        return StreamingResponse(gen(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    async def control(request: Request) -> Response:
        if controls is None:
            return JSONResponse({"ok": False, "error": "controls are off (read-only or replay)"}, status_code=403)
        remote = request.client.host if request.client else None
        refusal = guard.body_refusal(request.headers.get("content-type"))
        if refusal is not None:
            await run_in_threadpool(controls.refused, None, remote, refusal)
            return JSONResponse({"ok": False, "error": refusal}, status_code=415)
        if not secrets.compare_digest(request.headers.get(TOKEN_HEADER, ""), token):
            try:
                action = (await request.json()).get("action")
            except (ValueError, AttributeError):
                action = None
            await run_in_threadpool(controls.refused, action, remote, "no valid token")
            hint = "the page's token" if token_in_page else "the token printed when it started"
            return JSONResponse({"ok": False, "error": f"controls need {hint} in {TOKEN_HEADER}"}, status_code=403)
        try:
            req = await request.json()
        except ValueError:
            return JSONResponse({"ok": False, "error": "the body must be a JSON object"}, status_code=400)
        if not isinstance(req, dict):
            return JSONResponse({"ok": False, "error": "the body must be a JSON object"}, status_code=400)
        from ui.controls import ControlError
        try:
            out = await run_in_threadpool(controls.run, req, remote)
        except ControlError as e:
            return JSONResponse({"ok": False, "error": str(e)}, status_code=400)
        return JSONResponse(out, status_code=200 if out["ok"] else 500)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        if hub is not None:
            await hub.start()
        try:
            yield
        finally:
            if hub is not None:
                await hub.stop()
            if controls is not None:
                await run_in_threadpool(controls.close)

    routes = [Route("/", index), Route("/api/config", config), Route("/api/state", state),
              Route("/api/meta", meta), Route("/api/stream", stream), Route("/api/control", control, methods=["POST"]),
              Mount("/static", StaticFiles(directory=STATIC), name="static")]
    app = Starlette(routes=routes, lifespan=lifespan)

    async def guarded(scope: dict, receive: Any, send: Any) -> None:
        """Refuse, before any route runs, a request that does not name this server or comes from another site."""
        if scope["type"] == "http":
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            refusal = guard.host_refusal(headers.get("host")) or guard.origin_refusal(
                headers.get("origin"), headers.get("host"), headers.get("sec-fetch-site"))
            if refusal is not None:
                if controls is not None and scope["path"] == "/api/control":
                    client = scope.get("client")
                    await run_in_threadpool(controls.refused, None, client[0] if client else None, refusal)
                await JSONResponse({"ok": False, "error": refusal}, status_code=403)(scope, receive, send)
                return
        await app(scope, receive, send)
    return guarded


def serve(*, host: str = LOOPBACK, port: int = 8080, read_only: bool = False, cluster: Any = None,
          config_path: Path | None = None, replay: Path | None = None, out: Any = None) -> int:
    import sys

    import uvicorn

    out = out or sys.stdout
    token = secrets.token_urlsafe(16)
    if replay is not None:
        events_dir(replay)  # a clear error for a directory that is no run
        app = create_app(mode="replay", host=host, read_only=True, run_dir=replay, port=port)
    else:
        app = create_app(mode="live", host=host, read_only=read_only, cluster=cluster, config_path=config_path,
                         run_dir=cluster.run_dir, token=token, port=port)
    print(f"kafkasim ui: http://{host}:{port}/ ({'replay of ' + str(replay) if replay else 'live'}"
          f"{', read-only' if read_only or replay else ''})", file=out)
    if replay is None and not read_only and host not in PAGE_TOKEN_HOSTS:
        print(f"kafkasim ui: bound to {host}, not {LOOPBACK}: controls need this token: {token}", file=out)
    out.flush()
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
    return 0
