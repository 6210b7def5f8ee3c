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
    held_port, free = free_port(), free_port()   # two ports nothing holds, handed out to this test alone
    # picked again as if never handed out (in a suite's worker, a port next to one picked here had often been
    # handed out to an earlier test, and was skipped for that reason: the picks ran out)
    monkeypatch.setattr(server, "_handed_out", set())
    picks = iter([held_port, held_port, free])   # the held port first, then a free one
    monkeypatch.setattr(server._pick, "randrange", lambda lo, hi: next(picks))
    with socket.socket() as held:
        held.bind(("127.0.0.1", held_port))
        held.listen()
        assert free_port() == free


def test_xdist_workers_take_disjoint_shares(monkeypatch):
    shares = []
    for w in ("gw0", "gw1", "gw2"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", w)
        monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
        shares.append(server._port_range())
    assert shares[0][1] <= shares[1][0] and shares[1][1] <= shares[2][0]
    assert shares[0][0] == 10000 and shares[2][1] <= server._ephemeral_low()


def test_a_paired_port_hands_out_its_partner_too():
    """A broker's default Kafka listener is its gRPC port + 10,000: picked one by one, a cluster's ports once gave
    a broker the port of another's listener (bench/scale.py: "brokers[4].port ... is also used by
    brokers[1].listeners")."""
    low = server._ephemeral_low()
    grpc_ports = [free_port(paired=10000) for _ in range(40)]
    partners = {p + 10000 for p in grpc_ports}
    assert all(10000 <= p and p + 10000 < low for p in grpc_ports)
    assert not partners & set(grpc_ports)
    later = [free_port() for _ in range(2000)]   # 2,000 of about 11,000 ports: a partner would be drawn
    assert not partners & set(later)
    assert not set(grpc_ports) & set(later)
