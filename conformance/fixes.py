"""The differences this suite found in kafkasim and that were fixed to match Kafka 2.8.2: (what, the cases that
show it, the commit).  ``kafkasim conformance`` prints them in its "fixed" section."""
from __future__ import annotations

FIXES: list[tuple[str, str, str]] = [
]
