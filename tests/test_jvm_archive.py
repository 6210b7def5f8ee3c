"""util/jvm_archive.py: the class-data archives of the JVMs kafkasim starts (ZooKeeper's).  No JVM here: the
writer stands in for the JVM that writes the archive at its exit; tests/test_zk_server.py starts real ones."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from util.cache import CACHE_ENV
from util.jvm_archive import JvmArchive


@pytest.fixture
def jar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    (tmp_path / "java").write_bytes(b"java")
    jar = tmp_path / "server.jar"
    jar.write_bytes(b"classes")
    return jar


def archive(tmp_path: Path, jar: Path) -> JvmArchive:
    return JvmArchive("server", str(tmp_path / "java"), str(jar), ["-Xmx64m"])


def writing_path(flags: list[str]) -> Path:
    at_exit = [f for f in flags if f.startswith("-XX:ArchiveClassesAtExit=")]
    assert len(at_exit) == 1 and "-Xshare:auto" in flags, flags
    return Path(at_exit[0].split("=", 1)[1])


def test_the_first_start_writes_the_archive_and_every_start_maps_it(tmp_path, jar):
    written: list[list[str]] = []

    def write(flags: list[str]) -> None:   # the JVM that dumps its classes at exit
        written.append(flags)
        writing_path(flags).write_bytes(b"archive")

    a = archive(tmp_path, jar)
    for _ in range(3):
        assert a.flags(write) == [f"-XX:SharedArchiveFile={a.path}", "-Xshare:auto", "-Xlog:cds=off",
                                  "-Xlog:cds+dynamic=off"]
    assert len(written) == 1 and a.path.read_bytes() == b"archive"
    assert not writing_path(written[0]).exists()          # written under its own name, then renamed into place
    assert archive(tmp_path, jar).flags(write) and len(written) == 1   # another handle (process) maps it too


def test_a_changed_jar_or_jdk_gets_an_archive_of_its_own(tmp_path, jar):
    before = archive(tmp_path, jar).path
    jar.write_bytes(b"other classes")
    assert archive(tmp_path, jar).path != before
    os.utime(tmp_path / "java", ns=(1, 1))
    assert len({before, archive(tmp_path, jar).path, JvmArchive("server", str(tmp_path / "java"), str(jar)).path}) == 3


@pytest.mark.parametrize("outcome", ["raises", "writes nothing", "writes an empty file"])
def test_without_an_archive_the_jvm_starts_as_before_and_no_second_try_is_made(tmp_path, jar, outcome):
    calls: list[list[str]] = []

    def write(flags: list[str]) -> None:
        calls.append(flags)
        if outcome == "raises":
            raise RuntimeError("the JVM exited 1")
        if outcome == "writes an empty file":
            writing_path(flags).write_bytes(b"")

    a = archive(tmp_path, jar)
    assert a.flags(write) == [] and a.flags(write) == []
    assert len(calls) == 1 and not a.path.exists() and not writing_path(calls[0]).exists()


def test_a_cache_that_cannot_be_written_leaves_the_jvm_as_it_was(tmp_path, jar, monkeypatch):
    (tmp_path / "file").write_text("not a directory")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "file"))

    def write(flags: list[str]) -> None:
        raise AssertionError("no JVM is asked to write where nothing can be written")

    assert archive(tmp_path, jar).flags(write) == []
