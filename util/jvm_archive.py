"""Class-data sharing archives for the JVMs kafkasim starts and stops many times: a JVM given the archive of
its kind maps the classes the first one loaded instead of loading, parsing and verifying them again, which
takes about 30 % off a ZooKeeper's start (zk/server.py) and a third off a Kafka 2.8.2 broker's (reference/jvm.py)
on a 2-core machine (bench/jvm_start.py measures both).  Nothing else about the JVM changes.

It is Java 17's dynamic archive (``-XX:ArchiveClassesAtExit``, then ``-XX:SharedArchiveFile``), kept under
``$KAFKASIM_CACHE/jvm-archives`` (default ``~/.cache/kafkasim/jvm-archives``), one file per kind, JDK
(the java binary and its libjvm, by size and time) and classpath (each entry by size and time): a new JDK
or a changed jar gets an archive of its own.  The first start of a kind that finds none first runs one JVM
of the kind to write it (``JvmArchive.flags``'s ``write``: a ZooKeeper started, serving, stopped), under a
lock, to a name of its own, renamed into place once that JVM is gone: no JVM ever maps a half-written
archive.  A JVM that cannot use the archive it is given runs without it (``-Xshare:auto``) and says
nothing about it (``-Xlog:cds=off``).  A cache that cannot be written leaves every JVM as it was.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
from pathlib import Path
from typing import Callable, Sequence

from util.cache import cache_root

#: the JVM says nothing when it cannot map an archive (a JDK or jar changed since): it starts without one
QUIET = ("-Xshare:auto", "-Xlog:cds=off", "-Xlog:cds+dynamic=off")
_FAILED: set[Path] = set()   # archives this process could not write: not tried again


def archive_dir() -> Path:
    return cache_root() / "jvm-archives"


def _stamp(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return f"{path}:-"
    return f"{os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}"


def _libjvm(java: str) -> str:
    home = Path(os.path.realpath(java)).parent.parent
    return str(home / "lib" / "server" / "libjvm.so")


class JvmArchive:
    """The archive of one kind of JVM (``kind``: a short name; ``java``, its ``classpath`` and the ``flags``
    that shape what it loads)."""

    def __init__(self, kind: str, java: str, classpath: str, flags: Sequence[str] = ()) -> None:
        key = "\n".join([_stamp(java), _stamp(_libjvm(java)), *(_stamp(p) for p in classpath.split(os.pathsep)),
                         *flags])
        self.path = archive_dir() / f"{kind}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"

    def flags(self, write: Callable[[list[str]], None]) -> list[str]:
        """The JVM flags that map the archive; when there is none yet, ``write(flags)`` first makes it: it must
        run one JVM of the kind with ``flags`` added and have it exit normally (SIGTERM will do) before it
        returns.  One process writes while the others wait for it (a lock beside the archive).  [] when no
        archive can be had (the cache cannot be written, or the JVM wrote none: no retry in this process)."""
        if not self.path.exists() and self.path not in _FAILED:
            self._write(write)
        return [f"-XX:SharedArchiveFile={self.path}", *QUIET] if self.path.exists() else []

    def _write(self, write: Callable[[list[str]], None]) -> None:
        writing = self.path.with_name(f"{self.path.stem}.{os.getpid()}.writing")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path.with_suffix(".lock"), "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if self.path.exists():        # another process wrote it while this one waited
                    return
                write([f"-XX:ArchiveClassesAtExit={writing}", *QUIET])
                if writing.stat().st_size == 0:
                    raise OSError(f"{writing}: empty")
                os.replace(writing, self.path)
        except Exception:   # no archive: the JVMs start as they did without one
            _FAILED.add(self.path)
        finally:
            try:
                writing.unlink(missing_ok=True)
            except OSError:
                pass
