"""zk/server.py free_port: ports below the kernel's ephemeral range, so that no outgoing connection takes one
before its server binds it (a CI run's broker once failed to start with EADDRINUSE on a port from that range)."""
from __future__ import annotations

import socket

from zk import server
from zk.server import free_port


def test_ports_are_below_the_ephemeral_range_distinct_and_bindable():
    low = server._ephemeral_low()
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    assert all(10000 <= p < low for p in ports)
    for p in ports[:5]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))


def test_a_port_something_holds_is_skipped(monkeypatch):
    held_port = free_port()
    picks = iter([held_port + 1, held_port + 1, held_port + 2])   # the held port first, then a free one
    monkeypatch.setattr(server._pick, "randrange", lambda lo, hi: next(picks))
    with socket.socket() as held:
        held.bind(("127.0.0.1", held_port + 1))
        held.listen()
        assert free_port() == held_port + 2


def test_xdist_workers_take_disjoint_shares(monkeypatch):
    shares = []
    for w in ("gw0", "gw1", "gw2"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", w)
        monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
        shares.append(server._port_range())
    assert shares[0][1] <= shares[1][0] and shares[1][1] <= shares[2][0]
    assert shares[0][0] == 10000 and shares[2][1] <= server._ephemeral_low()
