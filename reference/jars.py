"""Kafka 2.8.2's jars, fetched by Maven on first use into a cache outside the repository.

``reference/pom.xml`` names the artifacts (the broker, the tools, the Java client, the log4j binding the
2.8.2 distribution ships); :func:`ensure_jars` runs ``mvn dependency:copy-dependencies`` on it when the
cache is missing or incomplete, and returns at once when it is complete.  Maven takes its repositories
from the machine's own configuration (``~/.m2/settings.xml`` or its defaults: Maven Central).

The cache is ``$KAFKASIM_CACHE/kafka-2.8.2`` (default ``~/.cache/kafkasim/kafka-2.8.2``).  A complete
cache holds a manifest, written last, naming the pom it came from and every jar with its size.

Kafka Streams 2.8.2 has a pom and a cache of its own (``reference/streams/pom.xml``,
``kafka-streams-2.8.2`` beside the main cache: :func:`ensure_streams_jars`), so that only what needs Streams
fetches it and the brokers' class path stays the distribution's.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from util.cache import cache_root

KAFKA_VERSION = "2.8.2"
POM = Path(__file__).resolve().parent / "pom.xml"
MANIFEST = ".kafkasim-manifest.json"
#: the plugin by its full coordinates (pinned; a bare ``dependency:`` prefix needs plugin-group metadata)
COPY_GOAL = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies"
#: jars every use needs: the broker, the Java client, the tools and the log4j binding
REQUIRED = (f"kafka_2.13-{KAFKA_VERSION}.jar", f"kafka-clients-{KAFKA_VERSION}.jar",
            f"kafka-tools-{KAFKA_VERSION}.jar", "slf4j-log4j12-1.7.30.jar", "log4j-1.2.17.jar")
MVN_HINT = "Maven not found: apt-get install maven (or run scripts/setup.sh)"
#: what Maven prints when it cannot reach a repository at all (as opposed to one that answers "no")
_UNREACHABLE = re.compile(r"Could not transfer|transfer failed|Connect to .* failed|UnknownHost|Unknown host|"
                          r"Network is unreachable|No route to host|timed out|Connection refused|"
                          r"Temporary failure in name resolution|PKIX path|SSLHandshake", re.I)
_MISSING = re.compile(r"Could not find artifact|could not be resolved|Failure to find", re.I)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class JarSet:
    """A pom, the cache directory it fills (beside the main one) and the jars a complete cache must hold."""
    name: str
    pom: Path
    required: tuple[str, ...]


MAIN = JarSet(f"kafka-{KAFKA_VERSION}", POM, REQUIRED)
STREAMS = JarSet(f"kafka-streams-{KAFKA_VERSION}", Path(__file__).resolve().parent / "streams" / "pom.xml",
                 (f"kafka-streams-{KAFKA_VERSION}.jar",))


class JarsUnavailable(RuntimeError):
    """Maven is missing, cannot reach its repository, or the repository lacks an artifact; says which."""


def cache_dir(jar_set: JarSet = MAIN) -> Path:
    """Where the jars live: ``$KAFKASIM_CACHE/kafka-2.8.2`` or ``~/.cache/kafkasim/kafka-2.8.2`` (Streams':
    ``kafka-streams-2.8.2`` beside it)."""
    return cache_root().resolve() / jar_set.name


def pom_digest(pom: Path = POM) -> str:
    return hashlib.sha256(pom.read_bytes()).hexdigest()


def is_complete(cache: Path, pom: Path = POM, required: Sequence[str] = REQUIRED) -> bool:
    """The manifest is there, names this pom, and every jar it lists is present with its size."""
    try:
        manifest = json.loads((cache / MANIFEST).read_text())
        if manifest.get("pom_sha256") != pom_digest(pom):
            return False
        jars = manifest["jars"]
        return (all(name in jars for name in required)
                and all((cache / name).stat().st_size == size for name, size in jars.items()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def classpath(cache: Path | None = None) -> str:
    """The ``-cp`` value for a complete cache: every jar in it (as bin/kafka-run-class.sh puts libs/*)."""
    return str((cache or cache_dir()) / "*")


def find_mvn() -> str:
    found = shutil.which("mvn")
    if not found:
        raise JarsUnavailable(MVN_HINT)
    return found


def ensure_streams_jars(quiet: bool = False) -> Path:
    """Kafka Streams' cache (beside the main one), complete: fetched with Maven first when needed."""
    return ensure_jars(cache_dir(STREAMS), quiet=quiet, jar_set=STREAMS)


def ensure_jars(cache: Path | None = None, *, mvn_args: Sequence[str] = (), quiet: bool = False,
                jar_set: JarSet = MAIN) -> Path:
    """The cache directory, complete: fetched with Maven first when missing or incomplete.

    Idempotent, and fast when complete (one manifest read and a stat per jar).  Concurrent callers (two
    test workers) take turns on a lock file beside the cache; the jars are copied into a directory of
    their own and renamed into place, so no caller ever sees half a cache.  ``mvn_args`` go to Maven
    before the goal (tests point it at another settings file).  Raises :class:`JarsUnavailable`.
    """
    cache = Path(cache).resolve() if cache is not None else cache_dir(jar_set)
    if is_complete(cache, jar_set.pom, jar_set.required):
        return cache
    cache.parent.mkdir(parents=True, exist_ok=True)
    with open(cache.parent / f".{cache.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_complete(cache, jar_set.pom, jar_set.required):   # another caller fetched it while we waited
            return cache
        staging = cache.parent / f".{cache.name}.partial-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        if not quiet:
            print(f"fetching Kafka {KAFKA_VERSION}'s jars with Maven into {cache} (first use)", file=sys.stderr)
        _run_mvn(staging, mvn_args, jar_set.pom)
        jars = {p.name: p.stat().st_size for p in sorted(staging.glob("*.jar"))}
        missing = [name for name in jar_set.required if name not in jars]
        if missing:
            shutil.rmtree(staging, ignore_errors=True)
            raise JarsUnavailable(f"Maven finished but did not copy {', '.join(missing)} into the cache")
        (staging / MANIFEST).write_text(json.dumps({"kafka": KAFKA_VERSION, "pom_sha256": pom_digest(jar_set.pom),
                                                    "jars": jars}, indent=1))
        shutil.rmtree(cache, ignore_errors=True)
        staging.rename(cache)
    return cache


def _run_mvn(out: Path, mvn_args: Sequence[str], pom: Path = POM) -> None:
    cmd = [find_mvn(), "-q", "-B", "-Dstyle.color=never", *mvn_args, "-f", str(pom), COPY_GOAL,
           f"-Dkafkasim.cache={out}"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=900)
    except subprocess.TimeoutExpired as e:
        raise JarsUnavailable(f"Maven did not finish fetching Kafka {KAFKA_VERSION}'s jars in 15 minutes "
                              f"({' '.join(cmd)})") from e
    if done.returncode == 0:
        return
    shutil.rmtree(out, ignore_errors=True)
    text = _ANSI.sub("", done.stdout + done.stderr)
    errors = [line.removeprefix("[ERROR] ").strip() for line in text.splitlines()
              if line.startswith("[ERROR]") and line.strip() != "[ERROR]"]
    first = errors[0] if errors else (text.strip().splitlines() or ["(no output)"])[-1]
    if _UNREACHABLE.search(text):
        raise JarsUnavailable(
            f"cannot fetch Kafka {KAFKA_VERSION}'s jars: Maven could not reach its repository (Maven Central, "
            f"or the mirror ~/.m2/settings.xml names). Maven said: {first}")
    if _MISSING.search(text):
        raise JarsUnavailable(f"cannot fetch Kafka {KAFKA_VERSION}'s jars: Maven's repository does not serve "
                              f"an artifact reference/pom.xml names. Maven said: {first}")
    raise JarsUnavailable(f"mvn failed (exit {done.returncode}) fetching Kafka {KAFKA_VERSION}'s jars: {first}")
