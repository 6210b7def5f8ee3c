"""A ZooKeeper that stalls (SIGSTOP, as a multi-second fsync on a busy disk does) past the clients'
ping deadline and session timeout: reads wait it out, and a running cluster comes back whole.

Each test has its own ZooKeeper server, so freezing it touches no other test.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import pytest

from conftest import write_cluster_yaml
from launcher.cluster import Cluster, process_state
from node.config import load_config
from util.waiting import wait_for
from zk import paths
from zk.client import CONNECTION_ERRORS, ZkClient
from zk.server import EmbeddedZooKeeper, four_letter_word

pytestmark = pytest.mark.cluster  # its own ZooKeeper and brokers, started by the tests themselves

SESSION_MS = 1500


@pytest.fixture
def own_zk(tmp_path: Path) -> Iterator[EmbeddedZooKeeper]:
    zk = EmbeddedZooKeeper(tmp_path / "zk", servers=1, tick_ms=100)
    zk.start(timeout=60)
    try:
        yield zk
    finally:
        zk.servers[0].resume()
        zk.stop()


def suspended_client(connect: str, session_ms: int = SESSION_MS) -> tuple[ZkClient, threading.Event]:
    """A started client and an Event set when it loses its connection."""
    c = ZkClient(connect, session_timeout_ms=session_ms)
    dropped = threading.Event()
    c.add_state_listener(lambda state: dropped.set() if state != "CONNECTED" else None)
    c.start()
    c.ensure_persistent_paths()
    return c, dropped


def test_a_read_cut_off_by_a_stall_is_retried_once_zookeeper_answers(own_zk):
    # The connection drops after 2/3 of the session without an answer; resumed right then, the
    # session (6 s) is still alive, so the retried read runs in it.  (An expiry is not retried.)
    c, dropped = suspended_client(own_zk.connect_string, session_ms=6000)
    try:
        c.kz.create("/marker", b"still here")
        own_zk.servers[0].pause()
        with ThreadPoolExecutor(1) as pool:
            read = pool.submit(c.get, "/marker")   # in flight when the connection drops
            assert dropped.wait(10), "the client never noticed the frozen server"
            assert not read.done()
            own_zk.servers[0].resume()
            data, _stat = read.result(timeout=c.retry_deadline_s + 5)
        assert data == b"still here"
    finally:
        c.stop()


def test_a_read_gives_up_with_a_connection_error_after_its_deadline(own_zk):
    c, dropped = suspended_client(own_zk.connect_string)
    try:
        c.retry_deadline_s = 0.2   # shorter than the ping deadline: the first loss is final
        own_zk.servers[0].pause()
        with pytest.raises(CONNECTION_ERRORS):
            c.read_controller()
        assert dropped.is_set()
    finally:
        own_zk.servers[0].resume()
        c.stop()


def test_a_cluster_comes_back_whole_after_zookeeper_stalls_past_every_session(own_zk, tmp_path):
    path = write_cluster_yaml(tmp_path / "cluster.yaml", own_zk.connect_string, 3,
                              **{"offsets.topic.num.partitions": 10,
                                 "zookeeper.session.timeout.ms": SESSION_MS})
    cluster = Cluster(load_config(path), path)
    try:
        before = cluster.up(timeout=60)
        logs = [cluster.run_dir / "logs" / f"broker-{b}.log" for b in (1, 2, 3)]
        own_zk.servers[0].pause()
        # A dropped connection, then a reconnect attempt that timed out: the freeze has outlasted
        # every session (a ping deadline plus a connect timeout > the session timeout).
        wait_for(lambda: all("Connection time-out" in p.read_text().split("Connection dropped", 1)[-1]
                             and "Connection dropped" in p.read_text() for p in logs), 20,
                 "every broker to lose its ZooKeeper connection and fail to get it back")
        own_zk.servers[0].resume()

        def recovered():
            v = cluster.view()
            parts = v.topics[paths.OFFSETS_TOPIC]["partitions"]
            server = own_zk.servers[0]
            connected = four_letter_word(server.host, server.client_port, "cons")
            owners = [cluster.zk().get(paths.broker(b))[1].ephemeral_owner for b in (1, 2, 3)]
            return v if (v.controller_id in (1, 2, 3) and sorted(v.brokers) == [1, 2, 3]
                         and all(f"sid=0x{o:x}" in connected for o in owners)
                         and all(s["leader"] in s["isr"] for s in parts.values())) else None

        # Each session either expired (the broker registers again, with a new epoch) or was saved by
        # a reconnect that ZooKeeper handled before its session tracker: both must end whole, with
        # every registration held by a session that is connected again.
        after = wait_for(recovered, 45, "a controller, three registered brokers and a leader per partition")
        assert all(process_state(pid) == "running" for pid in cluster.pids.values())
        assert set(after.topics[paths.OFFSETS_TOPIC]["partitions"]) == set(range(10))
        assert after.controller_epoch >= before.controller_epoch
    finally:
        cluster.down()


def in_daemon_thread(fn) -> Future:
    """fn() in a daemon thread, so that a call that hangs (the bug) fails the test without hanging pytest."""
    fut: Future = Future()

    def run() -> None:
        try:
            fut.set_result(fn())
        except BaseException as e:
            fut.set_exception(e)

    threading.Thread(target=run, daemon=True).start()
    return fut


def test_with_zookeeper_dead_no_call_hangs_and_a_closing_client_fails_at_once(own_zk):
    """kazoo keeps a request made without a connection queued until one comes back, which here is
    never: ZkClient bounds every wait by the session timeout, and once closing (fail_fast) by nothing."""
    c, dropped = suspended_client(own_zk.connect_string, session_ms=6000)  # a bound far from "at once"
    own_zk.servers[0].kill()
    assert dropped.wait(10), "the client never noticed ZooKeeper die"
    assert not c.wait_connected(0.1)
    t0 = time.monotonic()
    unretried = in_daemon_thread(c.delete_controller_if_ours)   # one request, not retried
    with pytest.raises(CONNECTION_ERRORS):
        unretried.result(timeout=c.request_timeout_s + 10)      # used to wait for ever
    assert time.monotonic() - t0 < c.request_timeout_s + 5

    c.fail_fast()
    t0 = time.monotonic()
    read = in_daemon_thread(c.read_controller)   # retried until connected, unless the client is closing
    with pytest.raises(CONNECTION_ERRORS):
        read.result(timeout=10)
    assert time.monotonic() - t0 < c.request_timeout_s / 2   # not the request bound, nor the 30 s of retries
    in_daemon_thread(c.stop).result(timeout=c.request_timeout_s + 10)
