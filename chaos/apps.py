"""The user's own application in a chaos run (``workload.command``): its processes, an observer of its
group's commits, and what it wrote.

* :class:`AppProcesses` starts each command line as its own OS process (a session of its own, so a
  signal reaches its children too), with the bootstrap servers and the topic names in its environment
  (:data:`ENV`), its output in ``<run>/app/app-<n>.log``.  Faults aimed at ``app`` or ``app:<n>`` kill,
  terminate (SIGTERM, then SIGKILL after ``stop.timeout.ms``), pause and resume them, and their heal
  starts them again.  An app that exits on its own is started again after ``restart.after.ms``, as a
  supervisor would; every exit is recorded (``exits``).
* :class:`CommitObserver` polls the group's committed offsets (OffsetFetch, outside the group, through
  the fault proxy like every client) every ``observe.interval.ms`` and records each poll as a
  ``fetch-committed`` of the group: what judge/checks_app.py judges and the failover timeline measures.
* :func:`read_output` reads what the app wrote (every record of its output topic, or the lines of its
  output file) once it has stopped.
"""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import grpc

from chaos.scenario import CommandSpec
from chaos.workload import GroupRecorder, Processes, Worker, read_partition
from client.admin import GroupAdmin
from client.group import ClientError, GroupMember
from client.metadata import ClusterClient
from util.procs import process_state
from util.waiting import wait_for

log = logging.getLogger(__name__)

#: The environment each app process gets (besides the runner's own and the scenario's ``env``).
ENV = {
    "bootstrap": "KAFKA_BOOTSTRAP_SERVERS",   # the brokers' Kafka listeners, through the fault proxy
    "group": "KAFKA_GROUP_ID",
    "input": "KAFKA_INPUT_TOPIC",
    "output_topic": "KAFKA_OUTPUT_TOPIC",
    "output_file": "KAFKA_OUTPUT_FILE",       # an absolute path
    "instance": "KAFKASIM_APP_INSTANCE",      # n of app:<n>, 1-based
}


class AppProcesses:
    """The app's processes, ``app:1`` .. ``app:<n>``: started, signalled and supervised (chaos.nemesis's
    ``AppProcesses``)."""

    def __init__(self, spec: CommandSpec, out: Path, bootstrap: str):
        self.spec = spec
        self.dir = out / "app"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.bootstrap = bootstrap
        f = spec.output_file
        self.output_file = None if f is None else (Path(f) if os.path.isabs(f) else self.dir / f).resolve()
        self.procs: dict[int, subprocess.Popen | None] = {n: None for n in self.numbers()}
        self.held: set[int] = set()          # stopped by a fault (or the end): not restarted by the supervisor
        self.exits: list[dict[str, Any]] = []
        self.starts: dict[int, int] = {n: 0 for n in self.numbers()}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._supervisor: threading.Thread | None = None

    def numbers(self) -> list[int]:
        return list(range(1, self.spec.instances + 1))

    def env(self, n: int) -> dict[str, str]:
        s = self.spec
        env = dict(os.environ, PYTHONUNBUFFERED="1", **dict(s.env))
        env[ENV["bootstrap"]] = self.bootstrap
        env[ENV["group"]] = s.group
        env[ENV["input"]] = s.input
        env[ENV["instance"]] = str(n)
        if s.output_topic:
            env[ENV["output_topic"]] = s.output_topic
        if self.output_file is not None:
            env[ENV["output_file"]] = str(self.output_file)
        return env

    # ------------------------------------------------------------------ one process

    def start(self, n: int) -> None:
        with self._lock:
            self.held.discard(n)
            p = self.procs.get(n)
            if p is not None and p.poll() is None:
                return
            with open(self.dir / f"app-{n}.log", "ab") as out:
                out.write(f"--- kafkasim: start {self.starts[n] + 1} of app:{n}: {' '.join(self.spec.run[n - 1])}\n"
                          .encode())
                out.flush()
                try:
                    self.procs[n] = subprocess.Popen(list(self.spec.run[n - 1]), stdout=out, stderr=subprocess.STDOUT,
                                                     stdin=subprocess.DEVNULL, start_new_session=True,
                                                     cwd=self.spec.cwd or None, env=self.env(n))
                except OSError as e:
                    raise RuntimeError(f"workload.command: cannot start app:{n} ({' '.join(self.spec.run[n - 1])}): "
                                       f"{e}") from None
            self.starts[n] += 1

    def _signal(self, n: int, sig: signal.Signals) -> subprocess.Popen | None:
        p = self.procs.get(n)
        if p is None or p.poll() is not None:
            return None
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            return None
        return p

    def _reap(self, n: int, p: subprocess.Popen, cause: str) -> None:
        """An exit: ``cause`` ``fault`` (a kill or terminate aimed at it), ``self`` (it exited on its own), ``end``."""
        self.exits.append({"app": n, "pid": p.pid, "code": p.returncode, "cause": cause,
                           "mono_ns": time.monotonic_ns()})

    def kill(self, n: int) -> None:
        with self._lock:
            self.held.add(n)
            p = self._signal(n, signal.SIGKILL)
            if p is not None:
                p.wait(10)
                self._reap(n, p, "fault")

    def terminate(self, n: int, cause: str = "fault") -> None:
        with self._lock:
            self.held.add(n)
            self._signal(n, signal.SIGCONT)
            p = self._signal(n, signal.SIGTERM)
            if p is None:
                return
            try:
                p.wait(self.spec.stop_timeout_ms / 1000)
            except subprocess.TimeoutExpired:
                self._signal(n, signal.SIGKILL)
                p.wait(10)
            self._reap(n, p, cause)

    def pause(self, n: int) -> None:
        self._signal(n, signal.SIGSTOP)

    def resume(self, n: int) -> None:
        self._signal(n, signal.SIGCONT)

    # ------------------------------------------------------------------ all of them

    def start_all(self) -> None:
        for n in self.numbers():
            self.start(n)
        self._supervisor = threading.Thread(target=self._supervise, name="app-supervisor", daemon=True)
        self._supervisor.start()

    def _supervise(self) -> None:
        """An app that exits by itself (a crash, an unhandled error) starts again after restart.after.ms."""
        due: dict[int, float] = {}
        while not self._stop.wait(0.05):
            with self._lock:
                for n, p in self.procs.items():
                    if n in self.held or p is None:
                        due.pop(n, None)
                        continue
                    if p.poll() is not None and n not in due:
                        self._reap(n, p, "self")
                        log.info("app:%d exited by itself (code %s); restarting", n, p.returncode)
                        due[n] = time.monotonic() + self.spec.restart_after_ms / 1000
                    if n in due and time.monotonic() >= due[n]:
                        del due[n]
                        self.start(n)

    def stop_all(self) -> None:
        """The end of the run: SIGTERM each (a paused one resumed first), SIGKILL after stop.timeout.ms."""
        self._stop.set()
        if self._supervisor is not None:
            self._supervisor.join(timeout=5)
        for n in self.numbers():
            self.terminate(n, "end")

    def running(self) -> list[int]:
        return [n for n, p in self.procs.items() if p is not None and process_state(p.pid) != "dead"
                and p.poll() is None]


class CommitObserver(Worker):
    """Polls the group's committed offsets of the input topic; each poll is a ``fetch-committed`` of the group."""

    def __init__(self, history, procs: Processes, cluster: ClusterClient, group: str, topic: str | None,
                 partitions: int, interval_ms: int, stop: threading.Event):
        super().__init__(f"observer-{group}", stop)
        self.process = procs.new()
        self.recorder = GroupRecorder(history, group, self.process, procs.new())
        self.member = GroupMember(cluster, group, [], retry_timeout_s=1.0, on_op=self.recorder)
        # the input topic's partitions; with no topic, whatever the group has committed
        self.tps = [(topic, p) for p in range(partitions)] if topic is not None else None
        self.interval_s = interval_ms / 1000

    def body(self) -> None:
        while not self.stop_event.wait(self.interval_s):
            self.fetch()

    def fetch(self) -> dict | None:
        try:
            return self.member.committed(self.tps)
        except (ClientError, grpc.RpcError) as e:
            log.debug("observer fetch failed: %s", e)
            return None

    def final(self, attempts: int = 5) -> dict | None:
        """The group's committed offsets once the app has stopped: the ``final`` fetch-committed."""
        self.recorder.final = True
        for _ in range(attempts):
            got = self.fetch()
            if got is not None:
                return got
        return None

    def close(self) -> None:
        self.member.close(leave=False)


def drain(admin: GroupAdmin, group: str, ends: dict[tuple[str, int], int], timeout_s: float) -> bool:
    """Wait until the group has committed up to ``ends`` (the input topic's log end offsets)."""
    def caught_up() -> bool:
        try:
            got = admin.committed(group)
        except (ClientError, grpc.RpcError):
            return False
        return all(got.get(tp, -1) >= end for tp, end in ends.items())
    try:
        wait_for(caught_up, timeout_s, f"the app's group {group} to commit up to the end of its input", interval=0.5)
        return True
    except TimeoutError:
        return False


def read_output(spec: CommandSpec, apps: AppProcesses, cluster: ClusterClient) -> dict[str, Any]:
    """What the app wrote: ``{"output": {"topic"|"file": ...}, "output_records": [values], "output_error"}``."""
    if spec.output_topic:
        out: dict[str, Any] = {"output": {"topic": spec.output_topic}}
        try:
            values: list[str] = []
            for p in cluster.partitions_for(spec.output_topic, max_block_s=10.0):
                recs, _hw = read_partition(cluster, spec.output_topic, p)
                values += [(r.value or b"").decode("utf-8", "replace") for r in recs]
            return {**out, "output_records": values, "output_error": None}
        except (ClientError, TimeoutError, grpc.RpcError) as e:
            return {**out, "output_records": None, "output_error": str(e)[:300]}
    if apps.output_file is not None:
        out = {"output": {"file": str(apps.output_file)}}
        try:
            lines = apps.output_file.read_text(encoding="utf-8", errors="replace").splitlines()
        except FileNotFoundError:
            lines = []   # the app wrote nothing
        except OSError as e:
            return {**out, "output_records": None, "output_error": str(e)}
        return {**out, "output_records": [x.strip() for x in lines if x.strip()], "output_error": None}
    return {"output": None}


class AppRun:
    """The app's part of a chaos run: its processes and the observer, started with the workload; at the end,
    the drain, the stop, the final fetch and the read of its output (``app.json`` in the run directory)."""

    def __init__(self, spec: CommandSpec, out: Path, bootstrap: str, history, procs: Processes,
                 cluster: ClusterClient, input_partitions: int):
        self.spec, self.out = spec, out
        self.processes = AppProcesses(spec, out, bootstrap)
        self._observer_stop = threading.Event()
        self.observer = CommitObserver(history, procs, cluster, spec.group, spec.input, input_partitions,
                                       spec.observe_interval_ms, self._observer_stop)
        self.summary: dict[str, Any] = {"group": spec.group, "input": spec.input, "delivery": spec.delivery,
                                        "instances": spec.instances, "output": None, "output_records": None,
                                        "output_error": None, "drained": None}

    def start(self) -> None:
        self.processes.start_all()
        self.observer.start()

    def end(self, cluster: ClusterClient, ends: dict[tuple[str, int], int], timeout_s: float = 60.0) -> dict[str, Any]:
        """Drain (the group commits up to ``ends``), stop the processes, fetch the group's committed offsets a
        last time, read the output; write and return ``app.json``."""
        self.summary["drained"] = drain(GroupAdmin(cluster, timeout_s=5.0), self.spec.group, ends, timeout_s)
        self.stop()
        self.observer.final()
        self.summary.update(read_output(self.spec, self.processes, cluster))
        self.write()
        return self.summary

    def stop(self) -> None:
        """Every process stopped and the observer too (also on a failed run's way out)."""
        self.processes.stop_all()
        self._observer_stop.set()
        if self.observer.is_alive():
            self.observer.join(timeout=10)

    def write(self) -> None:
        import json
        p = self.processes
        self.summary.update(starts=p.starts, exits=p.exits,
                            self_exits=sum(1 for e in p.exits if e["cause"] == "self"))
        (self.out / "app.json").write_text(json.dumps(self.summary, indent=2) + "\n")


def load_app(run_dir: Path) -> dict[str, Any] | None:
    """A finished run's ``app.json`` (None: the run had no command: workload)."""
    import json
    try:
        return json.loads((run_dir / "app.json").read_text())
    except FileNotFoundError:
        return None


def app_results(app: dict[str, Any], result: Any) -> dict[str, Any]:
    """results.json's ``app``: what became of the user's application, from ``app.json`` and the checkers."""
    stats = result.stats
    out_stats = stats.get("app-output", {})
    counts = result.anomaly_counts()
    return {"group": app.get("group"), "delivery": app.get("delivery"), "output": app.get("output"),
            "output_records": len(app.get("output_records") or []), "output_error": app.get("output_error"),
            "drained": app.get("drained"), "starts": app.get("starts"), "self_exits": app.get("self_exits"),
            "records_lost": counts.get("app-record-lost", 0), "records_judged": out_stats.get("records_judged", 0),
            "duplicates": out_stats.get("duplicates", 0), "unexpected": out_stats.get("unexpected", 0),
            "commits_lost": counts.get("app-commit-lost", 0),
            "commits_went_backwards": counts.get("app-commit-went-backwards", 0),
            "observed_fetches": stats.get("observed-commits", {}).get("fetches", 0)}


def format_app(a: dict[str, Any]) -> str:
    out = a.get("output") or {}
    where = f"topic {out['topic']}" if "topic" in out else f"file {out['file']}" if "file" in out else "no output"
    starts = ", ".join(f"app:{n} x{k}" for n, k in sorted((a.get("starts") or {}).items()))
    return (f"app (group {a['group']}, {a.get('delivery')}): started {starts or '-'}, exited by itself "
            f"{a.get('self_exits') or 0}x; output ({where}): {a['output_records']} records; "
            f"records lost: {a['records_lost']} of {a['records_judged']} judged, duplicated: {a['duplicates']}; "
            f"commits lost: {a['commits_lost']}, went backwards: {a['commits_went_backwards']} "
            f"({a['observed_fetches']} fetches observed)")
