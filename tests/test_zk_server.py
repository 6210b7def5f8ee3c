"""Real ZooKeeper servers (Debian's zookeeper package) started by zk.server."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.retry import KazooRetry

from util.waiting import wait_for
from zk.server import FORCE_SYNC_ENV, EmbeddedZooKeeper, ZooKeeperNotInstalled, ZooKeeperServer, free_port

pytestmark = pytest.mark.cluster  # ZooKeeper servers started by the tests themselves

TICK_MS = 100


def pid_gone(pid: int) -> bool:
    """True when ``pid`` no longer names a live process (zombies count as gone)."""
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (ProcessLookupError, FileNotFoundError):
        return True


def client(hosts: str) -> KazooClient:
    zk = KazooClient(hosts=hosts, timeout=10.0,
                     connection_retry=KazooRetry(max_tries=-1, max_delay=0.5),
                     command_retry=KazooRetry(max_tries=20, max_delay=0.5))
    zk.start(timeout=15)
    return zk


@pytest.fixture
def ensemble(tmp_path: Path) -> Iterator[EmbeddedZooKeeper]:
    zk = EmbeddedZooKeeper(tmp_path / "zk", servers=3, tick_ms=TICK_MS)
    zk.start(timeout=60)
    try:
        yield zk
    finally:
        zk.stop()


def test_standalone_serves_and_stops_cleanly(tmp_path: Path) -> None:
    port = free_port()
    zk = EmbeddedZooKeeper(tmp_path / "zk", servers=1, tick_ms=TICK_MS, client_ports=[port])
    zk.start(timeout=30)
    try:
        assert zk.connect_string == f"127.0.0.1:{port}"
        assert zk.modes() == {1: "standalone"}
        kz = client(zk.connect_string)
        try:
            kz.create("/kafkasim/hello", b"world", makepath=True)
            assert kz.get("/kafkasim/hello")[0] == b"world"
        finally:
            kz.stop()
            kz.close()
        pid = zk.servers[0].pid
        assert pid is not None and not pid_gone(pid)
    finally:
        zk.stop()
    assert pid_gone(pid)
    assert not zk.servers[0].is_running()
    assert zk.servers[0].mode() is None
    logs = tmp_path / "zk" / "zk1"
    assert (logs / "zoo.cfg").is_file() and (logs / "zookeeper.out").is_file()


def test_ensemble_replicates_and_survives_leader_loss(ensemble: EmbeddedZooKeeper) -> None:
    modes = sorted(m or "" for m in ensemble.modes().values())
    assert modes == ["follower", "follower", "leader"]
    assert len(ensemble.connect_string.split(",")) == 3

    leader = ensemble.leader()
    assert leader is not None
    followers = [s for s in ensemble.servers if s is not leader]

    writer, reader = client(followers[0].address), client(followers[1].address)
    try:
        writer.create("/brokers/ids/1", b"one", makepath=True)
        reader.sync("/brokers/ids/1")
        assert reader.get("/brokers/ids/1")[0] == b"one"
    finally:
        for kz in (writer, reader):
            kz.stop()
            kz.close()

    old_pid = leader.pid
    assert old_pid is not None
    leader.kill()
    assert pid_gone(old_pid) and not leader.is_running()

    def new_leader() -> bool:
        modes = [s.mode() for s in followers]
        return sorted(m or "" for m in modes) == ["follower", "leader"]

    wait_for(new_leader, 30, "the two survivors to elect a new leader")
    ensemble.wait_serving(timeout=30)  # accepts the dead server being absent

    kz = client(",".join(s.address for s in followers))
    try:
        kz.create("/after-failover", b"still-writable")
        assert kz.get("/after-failover")[0] == b"still-writable"
        assert kz.get("/brokers/ids/1")[0] == b"one"
    finally:
        kz.stop()
        kz.close()


def test_state_round_trip_stops_by_pid(tmp_path: Path) -> None:
    """A handle rebuilt from JSON (as a CLI in another process would) stops the ensemble."""
    zk = EmbeddedZooKeeper(tmp_path / "zk", servers=1, tick_ms=TICK_MS)
    zk.start(timeout=30)
    try:
        state = json.loads(json.dumps(zk.to_dict()))
        other = EmbeddedZooKeeper.from_dict(state)
        assert other.connect_string == zk.connect_string
        assert [s.pid for s in other.servers] == [s.pid for s in zk.servers]
        assert all(s.is_running() for s in other.servers)
        assert other.servers[0].mode() == "standalone"
        other.stop()
        assert not other.servers[0].is_running()
        # the JVM drops its command line (what ``other`` checks) a moment before it has exited
        # (what our own handle's poll() sees): wait for that, with a deadline
        wait_for(lambda: not zk.servers[0].is_running(), 10, "the parent's handle to see the exit")
    finally:
        zk.stop()
    # A recorded pid that is no longer a ZooKeeper is never signalled.
    stale = ZooKeeperServer.from_dict({**state["servers"][0], "pid": os.getpid()})
    assert not stale.is_running()
    stale.stop()  # no-op: must not signal the test process


def test_servers_must_be_1_or_3(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        EmbeddedZooKeeper(tmp_path, servers=2)


def test_missing_zookeeper_jar_names_the_install(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKASIM_ZK_CLASSPATH", str(tmp_path / "no-such-zookeeper.jar"))
    server = ZooKeeperServer(tmp_path / "zk1", free_port(), tick_ms=TICK_MS)
    with pytest.raises(ZooKeeperNotInstalled, match="apt-get install zookeeper"):
        server.start()
    assert not server.is_running()


def test_missing_java_names_the_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKASIM_JAVA", str(tmp_path / "no-such-java"))
    zk = EmbeddedZooKeeper(tmp_path / "zk", servers=1, tick_ms=TICK_MS)
    with pytest.raises(ZooKeeperNotInstalled, match="openjdk-17-jre-headless"):
        zk.start(timeout=5)


def test_force_sync_follows_the_environment_and_refuses_other_values(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    server = ZooKeeperServer(tmp_path / "zk1", free_port(), tick_ms=TICK_MS)
    monkeypatch.delenv(FORCE_SYNC_ENV, raising=False)
    assert "forceSync=yes\n" in server._config()      # ZooKeeper's own default when nothing says otherwise
    monkeypatch.setenv(FORCE_SYNC_ENV, "no")
    assert "forceSync=no\n" in server._config()
    monkeypatch.setenv(FORCE_SYNC_ENV, "sometimes")
    with pytest.raises(ValueError, match=f"\\${FORCE_SYNC_ENV} must be 'yes' or 'no', not 'sometimes'"):
        server.start()
    assert not server.is_running()
