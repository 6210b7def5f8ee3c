"""The client side of the fault proxy (chaos/proxy.py): start the process, then drive it.

    with ProxyProcess.start(workdir, seed=7) as proxy:
        port = proxy.add_link("b1->b2", "127.0.0.1:40001")   # b1 dials 127.0.0.1:port
        proxy.set("b1->b2", direction="out", blocked=True)    # partition b1 -> b2
        proxy.clear("b1->b2")                                  # heal

Every method sends one JSON line on the control connection and waits for the
answer; a ``{"ok": false}`` answer raises :class:`ProxyError` with the proxy's
message.  The methods are thread-safe (one lock around the control socket).
This module imports nothing of the proxy itself, so it is cheap to import.
"""
from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
POLL_S = 0.01


DIRECTIONS = ("out", "back")
RULE_FIELDS = ("blocked", "latency_ms", "jitter_ms", "loss")
OPS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {  # op: (required fields, optional fields)
    "add_link": (("name", "upstream"), ("listen_port",)),
    "set": (("link",), ("direction",) + RULE_FIELDS),
    "clear": (("link",), ()),
    "clear_all": ((), ()),
    "reset": (("link",), ()),
    "stats": ((), ()),
    "shutdown": ((), ()),
}


class BadRequest(ValueError):
    """A control request of the wrong shape; the message is what the proxy answers."""


def parse_request(req: Any) -> dict[str, Any]:
    """Check one decoded control request; return it normalised, or raise BadRequest.

    ``add_link`` gains ``host``, ``port`` (from ``upstream``) and ``listen_port``
    (default 0); ``set`` becomes ``{op, link, directions: ("out",...), rules: {...}}``.
    Whether a link exists is the proxy's business, not this function's.
    """
    if not isinstance(req, dict):
        raise BadRequest(f"a request must be a JSON object, got {type(req).__name__}")
    op = req.get("op")
    if op not in OPS:
        raise BadRequest(f"unknown op {op!r} (expected {', '.join(OPS)})")
    required, optional = OPS[op]
    for k in required:
        if k not in req:
            raise BadRequest(f"{op}: missing field {k!r}")
    unknown = sorted(set(req) - set(required) - set(optional) - {"op"})
    if unknown:
        raise BadRequest(f"{op}: unknown field {unknown[0]!r} (expected {', '.join(required + optional) or 'none'})")
    out = dict(req)
    for k in ("name", "link"):
        if k in req and (not isinstance(req[k], str) or not req[k]):
            raise BadRequest(f"{op}: {k} must be a non-empty string, got {req[k]!r}")
    if op == "add_link":
        up = req["upstream"]
        host, _, port = up.rpartition(":") if isinstance(up, str) else ("", "", "")
        host = host.strip("[]")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise BadRequest(f"add_link: upstream must be \"host:port\" with a port in 1..65535, got {up!r}")
        lp = req.get("listen_port", 0)
        if isinstance(lp, bool) or not isinstance(lp, int) or not 0 <= lp < 65536:
            raise BadRequest(f"add_link: listen_port must be an integer in 0..65535, got {lp!r}")
        out.update(host=host, port=int(port), listen_port=lp)
    elif op == "set":
        d = req.get("direction", "both")
        if d not in ("out", "back", "both"):
            raise BadRequest(f"set: direction must be \"out\", \"back\" or \"both\", got {d!r}")
        rules: dict[str, Any] = {}
        for k in RULE_FIELDS:
            if k not in req:
                continue
            v = req[k]
            if k == "blocked":
                if not isinstance(v, bool):
                    raise BadRequest(f"set: blocked must be true or false, got {v!r}")
                rules[k] = v
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise BadRequest(f"set: {k} must be a number, got {v!r}")
            hi = 1.0 if k == "loss" else math.inf
            if not 0 <= v <= hi:
                raise BadRequest(f"set: {k} must be " + ("between 0 and 1" if k == "loss" else ">= 0")
                                 + f", got {v!r}")
            rules[k] = float(v)
        out = {"op": op, "link": req["link"], "directions": DIRECTIONS if d == "both" else (d,), "rules": rules}
    return out


class ProxyError(RuntimeError):
    """The proxy answered ``{"ok": false}``, or could not be started or reached."""


class ProxyProcess:
    """A running ``python -m chaos.proxy`` process and its control connection."""

    def __init__(self, proc: subprocess.Popen, control_port: int, log_path: Path | None = None) -> None:
        self._proc = proc
        self.control_port = control_port
        self.log_path = log_path
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._rfile: Any = None

    @property
    def pid(self) -> int:
        return self._proc.pid

    @classmethod
    def start(cls, workdir: Path, seed: int, timeout_s: float = 10) -> "ProxyProcess":
        """Spawn the proxy (its own session) and wait until it is listening."""
        return cls.spawn(workdir, seed).wait(timeout_s)

    @classmethod
    def spawn(cls, workdir: Path, seed: int) -> "StartingProxy":
        """Spawn the proxy (its own session) and return at once: :meth:`StartingProxy.wait` waits until it is
        listening (meanwhile its interpreter starts beside whatever the caller starts, e.g. ZooKeeper)."""
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        token = uuid.uuid4().hex[:8]
        ready = workdir / f"proxy-{token}.ready.json"
        log_path = workdir / f"proxy-{token}.log"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        cmd = [sys.executable, "-m", "chaos.proxy", "--seed", str(seed), "--control-port", "0",
               "--ready-file", str(ready), "--parent-pid", str(os.getpid())]
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    env=env, start_new_session=True)
        return StartingProxy(proc, ready, log_path)

    # -- the control protocol -------------------------------------------------

    def request(self, req: dict[str, Any], timeout_s: float = 10.0) -> dict[str, Any]:
        """Send one request; return the answer (``ok`` is true) or raise ProxyError."""
        line = json.dumps(req).encode() + b"\n"
        with self._lock:
            try:
                if self._sock is None:
                    self._sock = socket.create_connection(("127.0.0.1", self.control_port), timeout=timeout_s)
                    self._rfile = self._sock.makefile("rb")
                self._sock.settimeout(timeout_s)
                self._sock.sendall(line)
                raw = self._rfile.readline()
                if not raw:
                    raise ConnectionError("the proxy closed the control connection")
            except OSError as e:
                self._disconnect()
                raise ProxyError(f"proxy control connection (port {self.control_port}): {e}") from None
        resp = json.loads(raw)
        if not resp.get("ok"):
            raise ProxyError(resp.get("error", f"request failed: {resp!r}"))
        return resp

    def add_link(self, name: str, upstream: str | tuple[str, int], listen_port: int = 0) -> int:
        """Listen on 127.0.0.1:listen_port (0: any free port), forward to upstream; returns the port."""
        if isinstance(upstream, tuple):
            upstream = f"{upstream[0]}:{upstream[1]}"
        return int(self.request({"op": "add_link", "name": name, "upstream": upstream,
                                 "listen_port": listen_port})["port"])

    def set(self, link: str, direction: str = "both", **rules: Any) -> None:
        """Change some of blocked, latency_ms, jitter_ms, loss on "out", "back" or "both"."""
        self.request({"op": "set", "link": link, "direction": direction, **rules})

    def clear(self, link: str) -> None:
        self.request({"op": "clear", "link": link})

    def clear_all(self) -> None:
        self.request({"op": "clear_all"})

    def reset(self, link: str) -> int:
        """Close (RST) every open connection of the link; returns how many."""
        return int(self.request({"op": "reset", "link": link})["closed"])

    def stats(self) -> dict[str, dict[str, Any]]:
        """{link name: {upstream, port, accepted, open, waiting, bytes_out, bytes_back,
        held_out, held_back, rules: {out: {...}, back: {...}}}}"""
        return self.request({"op": "stats"})["links"]

    # -- lifetime -----------------------------------------------------------------

    def alive(self) -> bool:
        return self._proc.poll() is None

    def stop(self, timeout_s: float = 5.0) -> int:
        """Ask the proxy to shut down; SIGKILL it if it has not exited by the deadline."""
        if self._proc.poll() is None:
            try:
                self.request({"op": "shutdown"}, timeout_s=timeout_s)
            except (ProxyError, ValueError):
                pass
            try:
                self._proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                try:
                    os.kill(self._proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self._proc.wait()
        with self._lock:
            self._disconnect()
        return self._proc.returncode

    def _disconnect(self) -> None:
        for f in (self._rfile, self._sock):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass
        self._sock = self._rfile = None

    def __enter__(self) -> "ProxyProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _tail(path: Path, n: int = 2000) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return text[-n:].strip() or "(empty log)"


class StartingProxy:
    """A proxy process spawned by :meth:`ProxyProcess.spawn`, not yet known to listen."""

    def __init__(self, proc: subprocess.Popen, ready: Path, log_path: Path) -> None:
        self._proc, self._ready, self.log_path = proc, ready, log_path

    def wait(self, timeout_s: float = 10) -> ProxyProcess:
        """The proxy once it listens (its ready file written); ProxyError if it exits or the deadline passes
        first (then it is killed)."""
        proc, ready, log_path = self._proc, self._ready, self.log_path
        deadline = time.monotonic() + timeout_s
        while True:
            if ready.exists():
                try:
                    info = json.loads(ready.read_text())
                    break
                except ValueError:  # cannot happen (atomic rename), but never trust a file blindly
                    pass
            if proc.poll() is not None:
                raise ProxyError(f"proxy exited with status {proc.returncode} before it was ready: "
                                 f"{_tail(log_path)}")
            if time.monotonic() > deadline:
                self.kill()
                raise ProxyError(f"proxy not ready after {timeout_s} s: {_tail(log_path)}")
            time.sleep(POLL_S)
        return ProxyProcess(proc, int(info["control_port"]), log_path)

    def kill(self) -> None:
        """SIGKILL the proxy (when what was started beside it failed) and reap it."""
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
