"""A Kafka 2.8.2 broker's JVM: its command line, as ``bin/kafka-server-start.sh`` makes it, and its class-data
archive (util/jvm_archive.py).

A broker given the archive maps the classes that a first broker loaded in its start and stop (Kafka's and
Scala's) instead of loading, parsing and verifying them again from the jars: its start from spawn to ``started``
takes about two thirds of the time and of the CPU on a 2-core machine (bench/jvm_start.py ``--kafka``), and the
test suite starts a reference broker for every comparison with Kafka.  Nothing else about the JVM or Kafka
changes: the same flags, jars and server.properties, and a JVM that cannot map the archive runs without it.

The archive is written once per JDK and set of jars, by the first start that finds none (``write_archive``): a
broker of its own on a ZooKeeper of its own, in a scratch directory, started until it says ``started``, then
stopped with SIGTERM (its controlled shutdown) so that the JVM exits normally and dumps what it loaded.  It
touches no cluster's ZooKeeper, ports or files.
"""
from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from reference.jars import cache_dir, classpath
from reference.properties import render
from util.jvm_archive import JvmArchive
from util.waiting import wait_for
from zk.server import ZooKeeperServer, find_java, free_port

LOG4J = Path(__file__).resolve().parent / "log4j.properties"
MAIN_CLASS = "kafka.Kafka"
#: bin/kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS and KAFKA_JMX_OPTS (no JMX port), as 2.8.2 ships them;
#: the heap (kafka-server-start.sh: 1 GB) is the launcher's ``heap_mb`` so that three brokers fit the machine.
#: Java 17 needs no --add-opens for Kafka 2.8.2's broker (docs/reference.md says what was checked).
JVM_FLAGS = ("-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
             "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
             "-Dcom.sun.management.jmxremote", "-Dcom.sun.management.jmxremote.authenticate=false",
             "-Dcom.sun.management.jmxremote.ssl=false")
#: the archive-writing broker's heap, and how long its start and its stop may take
WRITER_HEAP_MB = 512
WRITER_TIMEOUT_S = 120.0
#: the lines KafkaServer logs as its start-up begins and once it is over
STARTING = b" starting (kafka.server.KafkaServer)"
STARTED = b" started (kafka.server.KafkaServer)"


def broker_command(heap_mb: int, logs: Path, properties: Path, archive: Sequence[str] = ()) -> list[str]:
    """The broker's JVM command line; ``archive``: the class-data archive's flags (``archive_flags``)."""
    return [find_java(), f"-Xmx{heap_mb}m", f"-Xms{heap_mb}m", *JVM_FLAGS, *archive,
            f"-Xlog:gc*:file={logs / 'kafkaServer-gc.log'}:time,tags:filecount=10,filesize=100M",
            f"-Dkafka.logs.dir={logs}", f"-Dlog4j.configuration=file:{LOG4J}",
            "-cp", classpath(), MAIN_CLASS, str(properties)]


def archive_flags() -> list[str]:
    """The flags that map the brokers' class-data archive, written first when there is none (``write_archive``);
    [] when none can be had.  The jars must be in their cache (``reference.jars.ensure_jars``)."""
    jars = os.pathsep.join(sorted(str(p) for p in cache_dir().glob("*.jar")))   # each jar by size and time
    return JvmArchive("kafka", find_java(), jars, JVM_FLAGS).flags(write_archive)


def write_archive(flags: list[str]) -> None:
    """One broker started with ``flags`` until it has started, on a standalone ZooKeeper of its own, then
    stopped (SIGTERM): the JVM writes the classes of a start and a controlled shutdown as it exits."""
    with tempfile.TemporaryDirectory(prefix="kafkasim-kafka-archive-") as scratch, \
            lone_zookeeper(Path(scratch) / "zookeeper") as zk_connect:
        _run_writer(Path(scratch), zk_connect, flags)


@contextmanager
def lone_zookeeper(d: Path) -> Iterator[str]:
    """A standalone ZooKeeper in ``d`` for a lone broker, serving until the block ends: its address."""
    zk = ZooKeeperServer(d, free_port())
    zk.start()
    try:
        zk.wait_ready(60.0)
        yield zk.address
    finally:
        zk.stop(30.0)


def scratch_properties(d: Path, zk_connect: str) -> Path:
    """A lone broker's server.properties in ``d`` (broker 0 on a free port, its data in ``d``), for the broker
    that writes the archive and for bench/jvm_start.py's."""
    props = d / "server.properties"
    props.write_text(render({
        "broker.id": "0", "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}", "log.dirs": str(d / "data"),
        "zookeeper.connect": zk_connect, "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1"}))
    return props


def spawn_scratch(d: Path, zk_connect: str, flags: Sequence[str]) -> subprocess.Popen[bytes]:
    """A lone broker started in ``d`` (``scratch_properties``) with ``flags`` added to its JVM's."""
    (d / "logs").mkdir(parents=True)
    props = scratch_properties(d, zk_connect)
    with open(d / "logs" / "kafka.out", "ab") as out:
        return subprocess.Popen(broker_command(WRITER_HEAP_MB, d / "logs", props, flags), stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, cwd=d)


def has_started(d: Path) -> bool:
    """Whether the lone broker in ``d`` has logged that it started."""
    try:
        return STARTED in (d / "logs" / "server.log").read_bytes()
    except OSError:
        return False


def _run_writer(d: Path, zk_connect: str, flags: list[str]) -> None:
    proc = spawn_scratch(d / "broker", zk_connect, flags)
    try:
        wait_for(lambda: proc.poll() is not None or has_started(d / "broker"), WRITER_TIMEOUT_S,
                 "the broker writing the class-data archive to start")
        if proc.poll() is not None:
            raise RuntimeError(f"the broker writing the class-data archive exited {proc.returncode} in its start")
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(WRITER_TIMEOUT_S)
    finally:
        if proc.poll() is None:   # not stopped in time: killed, perhaps in the middle of writing, so not kept
            proc.kill()
            proc.wait()
    if code not in (0, 143):
        raise RuntimeError(f"the broker writing the class-data archive exited {code}")
