"""Which requests the web view answers: its own Host, its own origin, JSON controls with the server's token.

A page on another site can make the user's browser send a "simple" cross-origin request (a POST with
``Content-Type: text/plain``) without asking first, and DNS rebinding can make the browser treat the web
view as that other site's own origin.  So:

- every request must name the server itself in ``Host``: the address it is bound to, a loopback name or
  address when it is bound to loopback, or, when it is bound to every address, any IP literal or this
  machine's own name.  A name that only resolves to the server (rebinding) is refused;
- a request that carries ``Origin`` (or ``Sec-Fetch-Site: cross-site``) must come from the server's own
  origin, ``http://`` + its Host;
- a control must be ``application/json`` and carry the server's token in ``X-Kafkasim-Token``.  The token
  is made per server; the page served on loopback carries it, which only the page's own origin can read.
  Bound elsewhere, the server prints it and the page asks for it.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

TOKEN_HEADER = "x-kafkasim-token"
WILDCARD = frozenset({"0.0.0.0", "::", ""})


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return None


def is_loopback(host: str) -> bool:
    """Whether a bind address or Host name is loopback (127.0.0.0/8, ::1, localhost)."""
    if host.lower() in ("localhost", "localhost."):
        return True
    ip = _ip(host)
    return ip is not None and ip.is_loopback


def split_host(header: str) -> tuple[str, int | None]:
    """A Host header's name and port (None when it has none or a bad one); IPv6 literals keep no brackets."""
    header = header.strip()
    if header.startswith("["):
        name, _, rest = header[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        name, _, port = header.rpartition(":") if header.count(":") == 1 else (header, "", "")
    try:
        return name.lower(), int(port) if port else None
    except ValueError:
        return name.lower(), None


@dataclass(frozen=True)
class Guard:
    """The rules for one server: bound to ``bind_host``:``port``, this machine named ``own_names``."""

    bind_host: str
    port: int
    own_names: frozenset[str] = frozenset()

    def host_refusal(self, header: str | None) -> str | None:
        """Why a request's Host is refused, or None when it names this server."""
        if not header:
            return "no Host header"
        name, port = split_host(header)
        if port is not None and port != self.port:
            return f"Host {header!r} names another port"
        bound = self.bind_host.lower()
        if name == bound.strip("[]"):
            return None
        if is_loopback(bound):
            if is_loopback(name):
                return None
            return f"Host {header!r} is not this server (bound to {self.bind_host}): a rebound name is refused"
        if bound in WILDCARD and (_ip(name) is not None or name in self.own_names):
            return None
        return f"Host {header!r} is not this server (bound to {self.bind_host})"

    def origin_refusal(self, origin: str | None, host: str | None, fetch_site: str | None) -> str | None:
        """Why a request's origin is refused (another site's page), or None."""
        if fetch_site is not None and fetch_site.lower() == "cross-site":
            return "a cross-site request"
        if origin is None:
            return None
        if origin == "null":
            return "Origin null"
        parts = urlsplit(origin)
        if parts.scheme != "http" or not host or parts.netloc.lower() != host.strip().lower():
            return f"Origin {origin!r} is not this server's"
        return None

    @staticmethod
    def body_refusal(content_type: str | None) -> str | None:
        """Why a control's body is refused (not ``application/json``), or None."""
        media = (content_type or "").split(";", 1)[0].strip().lower()
        if media != "application/json":
            return f"a control's body must be application/json, not {content_type or 'untyped'}"
        return None
