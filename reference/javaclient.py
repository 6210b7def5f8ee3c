"""Kafka 2.8.2's Java client and Kafka's own tools, run from the jar cache (reference/jars.py).

The Java programs are small source files beside this module (``reference/java/*.java``), compiled with ``javac``
against the cache the first time something needs them, into a directory outside the repository named by a
hash of the sources, the cache's pom and the JDK (``$KAFKASIM_CACHE/java-<hash>``).  Each speaks JSON lines:

* :class:`ToolRunner`: Kafka's command-line tools (``kafka.admin.TopicCommand``, ``ConsumerGroupCommand``,
  ``org.apache.kafka.tools.ProducerPerformance``, ...), several invocations in one JVM
  (``java/KafkaTools.java``): each gives the exit status and what the tool printed;
* :class:`JavaProducer`: a ``KafkaProducer`` that sends what it is told and reports each send's outcome from
  its callback (``java/JavaProducer.java``);
* :class:`JavaMember`: a ``KafkaConsumer`` in a group that polls, commits synchronously and fetches committed
  offsets when told, and reports its rebalances (``java/JavaMember.java``);
* :class:`JavaEosPipeline`: exactly-once consume-transform-produce with the Java client, a transactional
  producer and ``sendOffsetsToTransaction`` (``java/JavaEosPipeline.java``);
* :class:`JavaStreamsApp`: a Kafka Streams 2.8.2 application with ``processing.guarantee=exactly_once``
  (``streams/EosStreamsApp.java``, compiled against Kafka Streams' own cache, reference/jars.py).

:func:`tool_command` is a tool's plain command line (``kafkasim reference tool NAME ARGS``).
"""
from __future__ import annotations

import base64
import collections
import fcntl
import hashlib
import json
import os
import queue
import shutil
import signal
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from reference.jars import KAFKA_VERSION, MANIFEST, cache_dir, classpath, ensure_jars, ensure_streams_jars
from zk.server import find_java

JAVA_SOURCES = Path(__file__).resolve().parent / "java"
STREAMS_SOURCES = Path(__file__).resolve().parent / "streams"
TOOLS_LOG4J = Path(__file__).resolve().parent / "tools-log4j.properties"
#: a client or a tool is a short-lived JVM: a small heap, the serial collector, and C1 only (it starts faster)
CLIENT_JVM_FLAGS = ("-Xms32m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")
DEFAULT_HEAP_MB = 256
#: bin/*.sh's script names -> the class each runs (``kafkasim reference tool NAME``; a class name works too)
TOOLS = {
    "kafka-topics": "kafka.admin.TopicCommand",
    "kafka-consumer-groups": "kafka.admin.ConsumerGroupCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-leader-election": "kafka.admin.LeaderElectionCommand",
    "kafka-preferred-replica-election": "kafka.admin.PreferredReplicaLeaderElectionCommand",
    "kafka-reassign-partitions": "kafka.admin.ReassignPartitionsCommand",
    "kafka-delete-records": "kafka.admin.DeleteRecordsCommand",
    "kafka-log-dirs": "kafka.admin.LogDirsCommand",
    "kafka-broker-api-versions": "kafka.admin.BrokerApiVersionsCommand",
    "kafka-features": "kafka.admin.FeatureCommand",
    "kafka-console-producer": "kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "kafka.tools.ConsoleConsumer",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "kafka.tools.ConsumerPerformance",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-run-class": "",   # the class is the first argument
}
#: the tools that run again and again in one JVM (ToolRunner): their main returns when they are done, they add
#: no JVM shutdown hook, keep nothing in static fields from one run to the next, and exit through Kafka's Exit.
#: Any other runs in a JVM of its own (ConsoleConsumer counts messages in a static field; VerifiableProducer
#: flushes and reports in a shutdown hook; VerifiableConsumer calls System.exit).
SHARED_JVM_TOOLS = frozenset({
    "kafka.admin.TopicCommand", "kafka.admin.ConsumerGroupCommand", "kafka.admin.ConfigCommand",
    "kafka.admin.LeaderElectionCommand", "kafka.admin.BrokerApiVersionsCommand",
    "org.apache.kafka.tools.ProducerPerformance", "kafka.tools.ConsumerPerformance",
})
JAVAC_HINT = "javac not found: the Java client and the tools are compiled with a JDK (apt-get install openjdk-17-jdk-headless)"


class JavaUnavailable(RuntimeError):
    """No JDK, or the Java sources do not compile against the cache; says which."""


class JavaExited(RuntimeError):
    """A Java client's JVM ended (or stopped answering) before the answer it was asked for; with its stderr."""


# ------------------------------------------------------------------------------------ compiling

def sources(folder: Path = JAVA_SOURCES) -> list[Path]:
    return sorted(folder.glob("*.java"))


def _jdk() -> tuple[str, str]:
    javac = shutil.which("javac")
    if not javac:
        raise JavaUnavailable(JAVAC_HINT)
    return javac, os.path.realpath(javac)


def sources_digest(jars: Path | None = None, folder: Path = JAVA_SOURCES, extra: Iterable[Path] = ()) -> str:
    """What the compiled classes depend on: the sources, the caches' manifests (the jars) and the JDK."""
    h = hashlib.sha256()
    for src in sources(folder):
        h.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    for cache in [jars or cache_dir(), *extra]:
        manifest = cache / MANIFEST
        h.update(manifest.read_bytes() if manifest.exists() else b"")
    h.update(_jdk()[1].encode())
    return h.hexdigest()[:16]


def compiled_streams() -> Path:
    """The compiled Kafka Streams programs (``streams/*.java``, against both caches), compiled when needed."""
    jars = ensure_jars(quiet=True)
    streams = ensure_streams_jars(quiet=True)
    return compiled(jars, folder=STREAMS_SOURCES, extra=(streams,), prefix="java-streams")


def compiled(jars: Path | None = None, folder: Path = JAVA_SOURCES, extra: Iterable[Path] = (),
             prefix: str = "java") -> Path:
    """The directory of the compiled classes, compiled first when needed (under a lock, into a staging
    directory renamed into place: a concurrent caller never sees half of it)."""
    jars = ensure_jars(jars, quiet=True)
    extra = list(extra)
    javac, _ = _jdk()
    out = jars.parent / f"{prefix}-{sources_digest(jars, folder, extra)}"
    if (out / ".complete").exists():
        return out
    with open(jars.parent / f".{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (out / ".complete").exists():
            return out
        staging = jars.parent / f".{out.name}.partial-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        cp = os.pathsep.join([classpath(jars), *map(classpath, extra)])
        done = subprocess.run([javac, "-nowarn", "-encoding", "UTF-8", "-d", str(staging), "-cp", cp,
                               *map(str, sources(folder))], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=300)
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise JavaUnavailable(f"javac failed on {folder}: {(done.stderr or done.stdout).strip()[-2000:]}")
        (staging / ".complete").write_text(json.dumps({"kafka": KAFKA_VERSION,
                                                       "sources": [s.name for s in sources(folder)]}))
        shutil.rmtree(out, ignore_errors=True)
        staging.rename(out)
    return out


def java_command(main: str, *args: str, heap_mb: int = DEFAULT_HEAP_MB, ours: bool = True,
                 jvm_flags: Iterable[str] = (), streams: bool = False) -> list[str]:
    """``java`` running ``main`` with the cache's jars (and, when ``ours``, the compiled programs; with
    ``streams``, the Kafka Streams programs and Streams' cache) on the class path, logging WARN and above
    on stderr as Kafka's tools do."""
    jars = ensure_jars(quiet=True)
    cp = classpath(jars)
    if streams:
        cp = os.pathsep.join([str(compiled_streams()), classpath(ensure_streams_jars(quiet=True)), cp])
    elif ours:
        cp = f"{compiled(jars)}{os.pathsep}{cp}"
    return [find_java(), f"-Xmx{heap_mb}m", *CLIENT_JVM_FLAGS, *jvm_flags,
            f"-Dlog4j.configuration=file:{TOOLS_LOG4J}", "-cp", cp, main, *args]


def tool_class(name: str) -> str:
    """A tool's class from its script name (``kafka-topics``, ``kafka-topics.sh``) or its class name."""
    bare = name.removesuffix(".sh")
    if bare in TOOLS and TOOLS[bare]:
        return TOOLS[bare]
    if "." in bare and (bare.startswith("kafka.") or bare.startswith("org.apache.kafka.")):
        return bare
    raise ValueError(f"unknown Kafka tool {name!r}: one of {', '.join(sorted(k for k in TOOLS if TOOLS[k]))}, "
                     f"or a class name (kafka.admin.TopicCommand)")


def tool_command(name: str, args: Iterable[str]) -> list[str]:
    """The command line running one Kafka tool from the cache, as bin/<name>.sh would."""
    args = list(args)
    if name.removesuffix(".sh") == "kafka-run-class":
        if not args:
            raise ValueError("kafka-run-class needs the class to run")
        name, args = args[0], args[1:]
    return java_command(tool_class(name), *args, ours=False)


# ------------------------------------------------------------------------------------ JSON-lines processes

class JavaProcess:
    """One of our Java programs in its own JVM: commands on stdin, JSON lines on stdout, stderr kept (its end)."""

    def __init__(self, main: str, args: Iterable[str], *, heap_mb: int = DEFAULT_HEAP_MB,
                 on_line: Callable[[dict], None] | None = None, start_timeout: float = 60.0,
                 jvm_flags: Iterable[str] = (), streams: bool = False) -> None:
        self.main = main
        self.on_line = on_line
        self.lines: queue.Queue[dict | None] = queue.Queue()
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=200)
        self.proc = subprocess.Popen(java_command(main, *args, heap_mb=heap_mb, jvm_flags=jvm_flags,
                                                  streams=streams),
                                     stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
                                     start_new_session=True)
        self.pid = self.proc.pid
        self._lock = threading.Lock()
        self._readers = [threading.Thread(target=self._read_stdout, daemon=True, name=f"{main}-stdout"),
                         threading.Thread(target=self._read_stderr, daemon=True, name=f"{main}-stderr")]
        for t in self._readers:
            t.start()
        self.expect(lambda m: "ready" in m, start_timeout, "to start")

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                self.stderr_tail.append(f"(stdout) {line}")
                continue
            if self.on_line is not None and ("id" in msg or self.stream_lines(msg)):
                # a send's outcome (a pipeline's progress); answers to commands stay queued
                try:
                    self.on_line(msg)
                except Exception as e:  # a bug in the callback must not stop the reading
                    self.stderr_tail.append(f"(on_line failed) {e!r}")
                continue
            self.lines.put(msg)
        self.lines.put(None)

    def stream_lines(self, msg: dict) -> bool:
        """Whether ``msg`` is one of the lines this program reports as they come (to ``on_line``)."""
        return False

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr_tail.append(line.rstrip("\n"))

    def stderr(self, lines: int = 40) -> str:
        return "\n".join(list(self.stderr_tail)[-lines:])

    def send(self, command: str) -> None:
        with self._lock:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(command + "\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError, OSError) as e:
                raise JavaExited(f"{self.main} (pid {self.pid}) is gone: {e}\n{self.stderr()}") from e

    def next(self, timeout: float, what: str = "an answer") -> dict:
        try:
            msg = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise JavaExited(f"{self.main} (pid {self.pid}) gave no {what} in {timeout:g} s\n{self.stderr()}") from None
        if msg is None:
            self.lines.put(None)   # stays ended for the next caller
            raise JavaExited(f"{self.main} (pid {self.pid}) exited ({self.proc.poll()}) before {what}\n{self.stderr()}")
        return msg

    def expect(self, done: Callable[[dict], bool], timeout: float, what: str) -> tuple[dict, list[dict]]:
        """The next line ``done`` accepts, and the lines before it (rebalance events)."""
        before = []
        while True:
            msg = self.next(timeout, what)
            if done(msg):
                return msg, before
            if "bad_command" in msg:
                raise JavaExited(f"{self.main} refused a command: {msg['bad_command']!r}")
            before.append(msg)

    def running(self) -> bool:
        return self.proc.poll() is None

    def close(self, timeout: float = 30.0) -> bool:
        """End stdin (the program closes its client: a member leaves its group) and wait; SIGKILL after
        ``timeout``.  Whether it closed by itself."""
        with self._lock:
            try:
                if self.proc.stdin is not None and not self.proc.stdin.closed:
                    self.proc.stdin.close()
            except OSError:
                pass
        clean = True
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            clean = False
            self.kill()
        for t in self._readers:
            t.join(5)
        return clean

    def kill(self) -> None:
        """SIGKILL this JVM (by its pid: ours), and reap it."""
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(10)

    def __enter__(self) -> "JavaProcess":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _configs(configs: Mapping[str, Any]) -> list[str]:
    out = []
    for k, v in configs.items():
        if isinstance(v, bool):
            v = str(v).lower()
        out.append(f"{k}={v}")
    return out


def _b64(b: bytes | None) -> str:
    """A command's bytes: base64, ``-`` for null, ``~`` for empty (an empty field would split the line)."""
    return "-" if b is None else base64.b64encode(b).decode() or "~"


def unb64(s: str | None) -> bytes | None:
    return None if s is None else base64.b64decode(s)


def tp_name(topic: str, partition: int) -> str:
    return f"{topic}/{partition}"


# ------------------------------------------------------------------------------------ the tools

@dataclass
class ToolResult:
    argv: list[str]
    rc: int
    out: str
    err: str
    ms: int

    def __str__(self) -> str:
        return f"{' '.join(self.argv)} -> exit {self.rc} in {self.ms} ms\n--- stdout\n{self.out}--- stderr\n{self.err}"


class ToolRunner(JavaProcess):
    """Kafka's tools: ``run("kafka-topics", "--bootstrap-server", bs, "--list")``.  Those of
    :data:`SHARED_JVM_TOOLS` run one after another in one JVM (about 20-800 ms each instead of a JVM start
    of 1-2 s); any other in a JVM of its own, as ``kafkasim reference tool`` runs it."""

    def __init__(self, heap_mb: int = DEFAULT_HEAP_MB) -> None:
        # a security manager turns a tool's own System.exit into the end of its invocation (java/KafkaTools.java)
        super().__init__("KafkaTools", [], heap_mb=heap_mb, jvm_flags=("-Djava.security.manager=allow",))

    def run(self, tool: str, *args: str, timeout: float = 120.0) -> ToolResult:
        if tool.removesuffix(".sh") == "kafka-run-class" and args:
            tool, args = args[0], args[1:]
        cls = tool_class(tool)
        if cls not in SHARED_JVM_TOOLS:
            return run_alone(tool, args, timeout)
        self.send(json.dumps([cls, *args]))
        try:
            msg = self.next(timeout, f"answer from {tool}")
        except JavaExited:
            self.kill()
            raise
        return ToolResult([tool, *args], msg["rc"], msg["out"], msg["err"], msg["ms"])


def run_alone(tool: str, args: Iterable[str], timeout: float = 120.0) -> ToolResult:
    """One tool in a JVM of its own (killed after ``timeout``: subprocess.TimeoutExpired)."""
    import time
    args = list(args)
    t0 = time.monotonic()
    done = subprocess.run(tool_command(tool, args), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    return ToolResult([tool, *args], done.returncode, done.stdout, done.stderr, int((time.monotonic() - t0) * 1000))


# ------------------------------------------------------------------------------------ the Java client

class JavaProducer(JavaProcess):
    """A Java ``KafkaProducer``: ``send()`` hands a record over; each send's outcome is a line
    (``{"id", "ok", "partition", "offset"}`` or ``{"id", "ok": false, "error", ...}``), returned by
    :meth:`flush`, or handed to ``on_line`` from a reader thread as it comes."""

    def __init__(self, bootstrap: str, configs: Mapping[str, Any] | None = None,
                 on_line: Callable[[dict], None] | None = None, heap_mb: int = DEFAULT_HEAP_MB) -> None:
        super().__init__("JavaProducer", [bootstrap, *_configs(configs or {})], heap_mb=heap_mb, on_line=on_line)

    def send(self, id: str, topic: str, value: bytes | None, key: bytes | None = None, partition: int = -1,
             headers: Iterable[tuple[str, bytes]] = ()) -> None:
        hs = ",".join(f"{name}={_b64(v)}" for name, v in headers)
        if any(c in id for c in " \n") or any(c in name for name, _ in headers for c in " \n,="):
            raise ValueError("ids and header names may not hold spaces, newlines, ',' or '='")
        super().send(f"send {id} {topic} {partition} {_b64(key)} {_b64(value)} {hs}".rstrip())

    def flush(self, timeout: float = 120.0) -> list[dict]:
        """Flush; the outcomes that came before the flush ended (all of them, when no ``on_line``)."""
        super().send("flush")
        msg, before = self.expect(lambda m: "flushed" in m, timeout, "the end of a flush")
        return before


class JavaMember(JavaProcess):
    """A Java ``KafkaConsumer`` in group ``group`` (subscribed to ``topics``), one command at a time."""

    def __init__(self, bootstrap: str, group: str, topics: Iterable[str] | str,
                 configs: Mapping[str, Any] | None = None, heap_mb: int = DEFAULT_HEAP_MB) -> None:
        topics = [topics] if isinstance(topics, str) else list(topics)
        self.api_timeout_s = int((configs or {}).get("default.api.timeout.ms", 60000)) / 1000
        super().__init__("JavaMember", [bootstrap, group, ",".join(topics), *_configs(configs or {})],
                         heap_mb=heap_mb)
        self.generation: int | None = None
        self.member_id = ""

    def _group(self, msg: dict) -> None:
        if "generation" in msg:
            self.generation, self.member_id = msg["generation"], msg.get("member", "")

    def poll(self, ms: int = 100) -> tuple[dict, list[dict]]:
        """(``{"polled": [[topic, partition, offset, key, value, headers], ...]}`` or ``{"poll_failed": ...}``,
        the rebalance events during the poll: ``{"assigned": [...], "generation", "member"}``, ``{"revoked"}``,
        ``{"lost"}``).  Keys and values stay base64 (:func:`unb64`)."""
        self.send(f"poll {int(ms)}")
        msg, events = self.expect(lambda m: "polled" in m or "poll_failed" in m, ms / 1000 + self.api_timeout_s + 30,
                                  "a poll's records")
        for m in events + [msg]:
            self._group(m)
        return msg, events

    def commit(self, offsets: Mapping[tuple[str, int], int] | None = None) -> dict:
        """A synchronous commit of ``offsets`` (None: the positions of the assigned partitions):
        ``{"committed": {"t/p": o}, "generation", "member"}`` or ``{"commit_failed": ExceptionName, ...}``."""
        args = " ".join(f"{t} {p} {o}" for (t, p), o in (offsets or {}).items())
        self.send(f"commit {args}".rstrip())
        msg, _ = self.expect(lambda m: "committed" in m or "commit_failed" in m, self.api_timeout_s + 30,
                             "a commit's outcome")
        self._group(msg)
        return msg

    def committed(self, partitions: Iterable[tuple[str, int]]) -> dict:
        """``{"fetched": {"t/p": offset or -1}}`` (the group's committed offsets) or ``{"fetch_failed": ...}``."""
        args = " ".join(f"{t} {p}" for t, p in partitions)
        self.send(f"committed {args}")
        msg, _ = self.expect(lambda m: "fetched" in m or "fetch_failed" in m, self.api_timeout_s + 30,
                             "the committed offsets")
        return msg


class JavaEosPipeline(JavaProcess):
    """The Java client's exactly-once consume-transform-produce (``java/JavaEosPipeline.java``): read_committed
    from ``source`` in ``group``, each poll's records (value prefixed ``out-``, same key and partition number)
    and offsets in one transaction of ``transactional_id``, running on its own.  Its reports
    (``{"committed": n, "records", "offsets"}``, ``{"aborted": ...}``, ``{"fatal": ...}``) go to ``on_line``
    as they come, and are kept in ``reports``."""

    def __init__(self, bootstrap: str, transactional_id: str, group: str, source: str, sink: str,
                 configs: Mapping[str, Any] | None = None, on_line: Callable[[dict], None] | None = None,
                 heap_mb: int = DEFAULT_HEAP_MB) -> None:
        self.reports: list[dict] = []
        self._user_line = on_line
        super().__init__("JavaEosPipeline", [bootstrap, transactional_id, group, source, sink,
                                             *_configs(configs or {})], heap_mb=heap_mb, on_line=self._report,
                         start_timeout=120.0)

    def stream_lines(self, msg: dict) -> bool:
        return any(k in msg for k in ("begin", "produced", "committing", "committed", "aborted", "aborting",
                                      "abort_done", "fatal"))

    def _report(self, msg: dict) -> None:
        self.reports.append(msg)
        if self._user_line is not None:
            self._user_line(msg)

    @property
    def commits(self) -> int:
        return sum(1 for m in self.reports if "committed" in m)

    def stop(self, timeout: float = 60.0) -> bool:
        """Stop the loop and close both clients."""
        try:
            self.send("stop")
        except JavaExited:
            pass
        return self.close(timeout)


class JavaStreamsApp(JavaProcess):
    """A Kafka Streams 2.8.2 application with ``processing.guarantee=exactly_once``
    (``streams/EosStreamsApp.java``): ``source`` to ``sink``, each value prefixed ``out-``.  Its state changes
    and thread errors (``{"state", "from"}``, ``{"thread_error"}``) are kept in ``reports``."""

    def __init__(self, bootstrap: str, application_id: str, source: str, sink: str, state_dir: str | Path,
                 configs: Mapping[str, Any] | None = None, heap_mb: int = 384) -> None:
        self.reports: list[dict] = []
        super().__init__("EosStreamsApp", [bootstrap, application_id, source, sink, str(state_dir),
                                           *_configs(configs or {})], heap_mb=heap_mb, on_line=self.reports.append,
                         start_timeout=180.0, streams=True)

    def stream_lines(self, msg: dict) -> bool:
        return "state" in msg or "thread_error" in msg

    @property
    def state(self) -> str | None:
        states = [m["state"] for m in self.reports if "state" in m]
        return states[-1] if states else None
