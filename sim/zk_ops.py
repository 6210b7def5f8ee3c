"""The ZooKeeper model's requests (sim/zk_model.py): a multi's ops, and ZooKeeper's path rules.

Pure.  ``Create``, ``SetData``, ``Delete`` and ``Check`` are the ops of ``ZkModel.multi`` (and of
its kazoo-like ``Transaction``); ``validate`` is ZooKeeper's PathUtils.validatePath.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from zk.exceptions import BadArguments


@dataclass(frozen=True)
class Create:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequence: bool = False


@dataclass(frozen=True)
class SetData:
    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True)
class Delete:
    path: str
    version: int = -1


@dataclass(frozen=True)
class Check:
    path: str
    version: int


Op = Create | SetData | Delete | Check


def parent_of(path: str) -> tuple[str, str]:
    """('/a/b', 'c') for '/a/b/c'; ('/', 'a') for '/a'."""
    i = path.rindex("/")
    return (path[:i] or "/"), path[i + 1:]


_BAD_CHARS = re.compile("[\u0000-\u001f\u007f-\u009f\ud800-\uf8ff\ufff0-\uffff]")


@functools.lru_cache(maxsize=1 << 16)
def validate(path: str, sequential: bool = False) -> None:
    """ZooKeeper's PathUtils.validatePath: BadArguments naming what is wrong (valid paths are cached)."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise BadArguments(f"path must start with /: {path!r}")
    if path == "/":
        return
    check = path + "1" if sequential else path
    if check.endswith("/"):
        raise BadArguments(f"path must not end with /: {path!r}")
    for part in check[1:].split("/"):
        if part in ("", ".", ".."):
            raise BadArguments(f"invalid path segment {part!r} in {path!r}")
    bad = _BAD_CHARS.search(check)
    if bad:
        raise BadArguments(f"invalid character \\u{ord(bad.group()):04x} in {path!r}")
