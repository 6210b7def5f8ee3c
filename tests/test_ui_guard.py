"""The web view's guard (ui/guard.py): which Host, Origin and body a request may have.

The real server is tested end to end in tests/test_ui.py (a cross-origin simple request and a rebound Host
are refused with nothing done); these are the rules themselves."""
from __future__ import annotations

import pytest

from ui.guard import Guard, split_host

LOCAL = Guard("127.0.0.1", 8080)
ANY = Guard("0.0.0.0", 8080, frozenset({"labhost", "labhost.example.net"}))
ONE = Guard("10.1.2.3", 8080)


@pytest.mark.parametrize("header,want", [
    ("127.0.0.1:8080", ("127.0.0.1", 8080)), ("localhost", ("localhost", None)), ("[::1]:8080", ("::1", 8080)),
    ("Evil.Example:8080", ("evil.example", 8080)), ("[::1]", ("::1", None)), ("x:y", ("x", None)),
])
def test_host_headers_split_into_name_and_port(header: str, want: tuple) -> None:
    assert split_host(header) == want


@pytest.mark.parametrize("guard,header", [
    (LOCAL, "127.0.0.1:8080"), (LOCAL, "localhost:8080"), (LOCAL, "[::1]:8080"), (LOCAL, "127.0.0.1"),
    (ANY, "192.168.1.7:8080"), (ANY, "labhost:8080"), (ANY, "LABHOST.example.net:8080"), (ONE, "10.1.2.3:8080"),
])
def test_the_servers_own_names_are_answered(guard: Guard, header: str) -> None:
    assert guard.host_refusal(header) is None


@pytest.mark.parametrize("guard,header,why", [
    (LOCAL, "evil.example:8080", "rebound"), (LOCAL, "127.0.0.1:9999", "another port"), (LOCAL, None, "no Host"),
    (LOCAL, "10.0.0.1:8080", "not this server"), (ANY, "evil.example:8080", "not this server"),
    (ONE, "localhost:8080", "not this server"), (ONE, "10.1.2.4:8080", "not this server"),
])
def test_other_names_are_refused(guard: Guard, header: str | None, why: str) -> None:
    refusal = guard.host_refusal(header)
    assert refusal is not None and why in refusal


@pytest.mark.parametrize("origin,host,site,ok", [
    (None, "127.0.0.1:8080", None, True),                       # curl, the CLI: no Origin
    ("http://127.0.0.1:8080", "127.0.0.1:8080", "same-origin", True),
    ("http://evil.example", "127.0.0.1:8080", None, False),      # a simple cross-origin request
    ("http://127.0.0.1:8081", "127.0.0.1:8080", None, False),    # another local server's page
    ("https://127.0.0.1:8080", "127.0.0.1:8080", None, False),
    ("null", "127.0.0.1:8080", None, False),                     # a sandboxed frame, a file: page
    (None, "127.0.0.1:8080", "cross-site", False),
])
def test_only_the_servers_own_origin_is_answered(origin: str | None, host: str, site: str | None, ok: bool) -> None:
    assert (LOCAL.origin_refusal(origin, host, site) is None) == ok


@pytest.mark.parametrize("content_type,ok", [
    ("application/json", True), ("application/json; charset=utf-8", True), ("Application/JSON", True),
    ("text/plain", False), ("text/plain;charset=UTF-8", False), ("application/x-www-form-urlencoded", False),
    ("multipart/form-data; boundary=x", False), (None, False),
])
def test_controls_must_be_json(content_type: str | None, ok: bool) -> None:
    assert (Guard.body_refusal(content_type) is None) == ok
