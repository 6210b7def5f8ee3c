"""The reference's pure parts: a cluster.yaml into Kafka 2.8.2's server.properties, and the jar cache's check.

No process starts here (unit tier); tests/test_reference.py runs the brokers and has Kafka confirm the keys.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from node.config import SCHEMA, ConfigError, default_config
from reference import jars, properties
from reference.jvm import JVM_FLAGS
from reference.kafka import ReferenceCluster
from reference.properties import (KAFKASIM_ONLY, LAUNCHER, SAME, TRANSLATED, TranslationError, broker_properties,
                                  cluster_properties, render)
from util.cache import CACHE_ENV


def test_every_cluster_yaml_key_is_placed_exactly_once() -> None:
    tables = [set(SAME), set(TRANSLATED), set(LAUNCHER), set(KAFKASIM_ONLY)]
    placed = [k for t in tables for k in t]
    assert sorted(placed) == sorted(set(placed)), "a key is in two tables"
    assert set(placed) == set(SCHEMA)
    # keys written as they are are Kafka's own; the kafkasim-only ones are kafkasim's extensions
    assert not any(SCHEMA[k].extension for k in SAME)
    assert all(SCHEMA[k].extension for k in KAFKASIM_ONLY)


def test_the_docs_name_every_key_where_it_is_placed() -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "reference.md").read_text()
    missing = [k for k in (*SAME, *TRANSLATED, *LAUNCHER, *KAFKASIM_ONLY) if f"`{k}`" not in doc]
    assert not missing, f"docs/reference.md does not name {missing}"
    assert all(f"`{kafka_key}`" in doc for kafka_key, _ in TRANSLATED.values())


def test_a_key_with_no_translation_is_an_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(properties, "SAME", SAME - {"replica.lag.time.max.ms"})
    with pytest.raises(TranslationError, match="replica.lag.time.max.ms: no translation") as e:
        cluster_properties(default_config(3))
    assert e.value.keys == ("replica.lag.time.max.ms",)
    assert isinstance(e.value, ConfigError)


def test_a_value_kafka_282_cannot_run_is_an_error_naming_the_key() -> None:
    cfg = default_config(3).with_settings({"kafkasim.isr.kip841.enable": True})
    with pytest.raises(TranslationError, match="kafkasim.isr.kip841.enable: true cannot run on Kafka 2.8.2"):
        cluster_properties(cfg)
    assert "kafkasim.isr.kip841.enable" not in cluster_properties(default_config(3))   # false: 2.8's own rules


def test_settings_are_written_with_kafkas_names_and_the_effective_values() -> None:
    cfg = default_config(3).with_settings({
        "zookeeper.session.timeout.ms": 4000, "unclean.leader.election.enable": True, "min.insync.replicas": 2,
        "log.cleaner.min.cleanable.ratio.percent": 25, "group.initial.rebalance.delay.ms": 0})
    props = cluster_properties(cfg)
    assert props["zookeeper.session.timeout.ms"] == "4000"
    assert props["unclean.leader.election.enable"] == "true"
    assert props["min.insync.replicas"] == "2"
    assert props["log.cleaner.min.cleanable.ratio"] == "0.25"
    assert props["group.initial.rebalance.delay.ms"] == "0"
    # a key left at kafkasim's default is written with it, not left to Kafka's own default
    assert props["replica.lag.time.max.ms"] == "10000" and SCHEMA["replica.lag.time.max.ms"].kafka_default == 30000
    assert props["offsets.topic.replication.factor"] == "3"
    # null connection timeout: Kafka's own default (the session timeout), so the key is left out
    assert "zookeeper.connection.timeout.ms" not in props
    assert not any(k.startswith(("kafkasim.", "zookeeper.embedded", "run.")) for k in props)
    assert "zookeeper.connect" not in props          # per broker, with the reference's chroot


def test_one_brokers_properties() -> None:
    cfg = default_config(1).with_settings({"brokers": [{"id": 7, "port": 19091, "rack": "r1"}]})
    props = broker_properties(cfg, 7, listeners={"PLAINTEXT": 40001}, zk_connect="127.0.0.1:2181/x/kafka-reference",
                              log_dir="/data/b7", extra={"num.io.threads": 2, "auto.create.topics.enable": False})
    assert props["broker.id"] == "7"
    assert props["listeners"] == props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:40001"
    assert props["inter.broker.listener.name"] == "PLAINTEXT"
    assert (props["log.dirs"], props["broker.rack"]) == ("/data/b7", "r1")
    assert props["zookeeper.connect"] == "127.0.0.1:2181/x/kafka-reference"
    assert props["transaction.state.log.replication.factor"] == "1"      # default_config(1) caps it
    assert (props["num.io.threads"], props["auto.create.topics.enable"]) == ("2", "false")
    text = render(props)
    assert "broker.id=7\n" in text and text.startswith("# generated")


def test_several_listener_names_keep_their_names() -> None:
    cfg = default_config(1).with_settings({
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "brokers": [{"id": 1, "port": 19091, "listeners": "INTERNAL://127.0.0.1:29091,EXTERNAL://127.0.0.1:39091"}]})
    props = broker_properties(cfg, 1, listeners={"INTERNAL": 40001, "EXTERNAL": 40002}, zk_connect="h:1",
                              log_dir="/d")
    assert props["listeners"] == "INTERNAL://127.0.0.1:40001,EXTERNAL://127.0.0.1:40002"
    assert props["inter.broker.listener.name"] == "INTERNAL"
    assert props["listener.security.protocol.map"] == "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT"


def _fake_cache(cache: Path) -> None:
    cache.mkdir(parents=True)
    sizes = {}
    for name in (*jars.REQUIRED, "scala-library-2.13.5.jar"):
        (cache / name).write_bytes(b"x" * 10)
        sizes[name] = 10
    (cache / jars.MANIFEST).write_text(json.dumps({"pom_sha256": jars.pom_digest(), "jars": sizes}))


def test_a_complete_cache_is_used_as_it_is(tmp_path: Path) -> None:
    """No Maven at all (the unit tier refuses any process): the manifest and the jars' sizes are enough."""
    cache = tmp_path / "kafka-2.8.2"
    _fake_cache(cache)
    assert jars.is_complete(cache)
    assert jars.ensure_jars(cache) == cache.resolve()
    assert jars.classpath(cache) == f"{cache}/*"


@pytest.mark.parametrize("damage", ["jar gone", "jar truncated", "other pom", "no manifest"])
def test_an_incomplete_cache_is_not_complete(tmp_path: Path, damage: str) -> None:
    cache = tmp_path / "kafka-2.8.2"
    _fake_cache(cache)
    if damage == "jar gone":
        (cache / "kafka_2.13-2.8.2.jar").unlink()
    elif damage == "jar truncated":
        (cache / "scala-library-2.13.5.jar").write_bytes(b"x")
    elif damage == "other pom":
        manifest = json.loads((cache / jars.MANIFEST).read_text())
        (cache / jars.MANIFEST).write_text(json.dumps(dict(manifest, pom_sha256="0" * 64)))
    else:
        (cache / jars.MANIFEST).unlink()
    assert not jars.is_complete(cache)


def test_the_cache_is_outside_the_repository(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(CACHE_ENV, raising=False)
    assert jars.cache_dir() == Path.home().resolve() / ".cache" / "kafkasim" / "kafka-2.8.2"
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    assert jars.cache_dir() == tmp_path.resolve() / "kafka-2.8.2"
    repo = Path(jars.__file__).resolve().parents[1]
    assert repo not in jars.cache_dir().parents


def test_maven_missing_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(jars.JarsUnavailable, match="apt-get install maven"):
        jars.find_mvn()


def test_ports_chroot_and_bootstrap(tmp_path: Path) -> None:
    cfg = default_config(3, run_dir=tmp_path / "run").with_settings({"zookeeper.connect": "127.0.0.1:2181/lab"})
    ref = ReferenceCluster(cfg, port_offset=1000)
    assert ref.listeners(2) == {"PLAINTEXT": 19092 + 10000 + 1000}     # kafkasim's Kafka listener + the offset
    assert ref.bootstrap_servers == "127.0.0.1:30091,127.0.0.1:30092,127.0.0.1:30093"
    assert (ref.zk_connect, ref.zk_chroot) == ("127.0.0.1:2181/lab/kafka-reference", "/lab/kafka-reference")
    free = ReferenceCluster(cfg, chroot="/other")
    assert free.listeners(1) == free.listeners(1) and free.listeners(1)["PLAINTEXT"] != 29091  # free, then kept
    assert free.zk_chroot == "/lab/other"
    assert ref.properties(1)["log.dirs"] == str(tmp_path / "run" / "reference" / "broker-1" / "data")
    with pytest.raises(ValueError, match="absolute ZooKeeper path"):
        ReferenceCluster(cfg, chroot="kafka")
    with pytest.raises(ValueError, match="heap_mb"):
        ReferenceCluster(cfg, heap_mb=0)


def test_without_the_class_archive_a_broker_runs_as_the_distributions_script_runs_it(tmp_path: Path) -> None:
    """The benchmarks' reference (``class_archive=False``): kafka-server-start.sh's JVM, nothing added."""
    ref = ReferenceCluster(default_config(3, run_dir=tmp_path / "run"), heap_mb=256, class_archive=False)
    d = tmp_path / "run" / "reference" / "broker-2"
    cmd = ref.command(2)
    assert cmd[1:3] == ["-Xmx256m", "-Xms256m"] and cmd[3:3 + len(JVM_FLAGS)] == list(JVM_FLAGS)
    assert cmd[3 + len(JVM_FLAGS)].startswith("-Xlog:gc*:file=")
    assert cmd[-4:] == ["-cp", jars.classpath(), "kafka.Kafka", str(d / "server.properties")]
    assert not [a for a in cmd if a.startswith(("-XX:SharedArchiveFile", "-XX:ArchiveClassesAtExit", "-Xshare"))]


def test_a_key_kafka_282_cannot_take_fails_before_anything_starts(tmp_path: Path) -> None:
    cfg = default_config(3, run_dir=tmp_path / "run").with_settings({"kafkasim.isr.kip841.enable": True})
    with pytest.raises(TranslationError, match="kafkasim.isr.kip841.enable"):
        ReferenceCluster(cfg)
    assert not (tmp_path / "run").exists()


FATAL = "[2026-12-01 10:39:18,482] ERROR [KafkaServer id=3] Fatal error during KafkaServer startup. Prepare to shutdown (kafka.server.KafkaServer)\n"


@pytest.mark.parametrize("cause, restarted", [
    ("org.apache.zookeeper.KeeperException$SessionExpiredException: KeeperErrorCode = Session expired for /brokers/ids", True),
    ("kafka.zookeeper.ZooKeeperClientTimeoutException: Timed out waiting for connection while in state: CONNECTING", True),
    ("kafka.common.InconsistentClusterIdException: The Cluster ID x doesn't match stored clusterId Some(y)", False),
    (None, False),
])
def test_a_start_up_zookeeper_failed_is_told_from_other_exits(tmp_path: Path, cause: str | None,
                                                               restarted: bool) -> None:
    """The server.log of a broker that died in KafkaServer.startup (as Kafka 2.8.2 logs it): only ZooKeeper not
    answering in time makes a start-up worth starting again."""
    ref = ReferenceCluster(default_config(3, run_dir=tmp_path / "run"))
    logs = ref.broker_dir(3) / "logs"
    logs.mkdir(parents=True)
    text = "[2026-12-01 10:39:12,092] INFO starting (kafka.server.KafkaServer)\n"
    if cause is not None:
        text += FATAL + cause + "\n\tat kafka.server.KafkaServer.startup(KafkaServer.scala:307)\n"
    (logs / "server.log").write_text(text)
    assert ref.startup_failure(3) == (cause if restarted else None)
    assert ref.startup_failure(2) is None   # no log at all
