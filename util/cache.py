"""kafkasim's cache directory: what is fetched or made once per machine and reused (Kafka 2.8.2's jars, the Java
programs compiled against them, the JVMs' class-data archives)."""
from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "KAFKASIM_CACHE"


def cache_root() -> Path:
    """``$KAFKASIM_CACHE``, else ``~/.cache/kafkasim``."""
    base = os.environ.get(CACHE_ENV)
    return Path(base).expanduser() if base else Path.home() / ".cache" / "kafkasim"
