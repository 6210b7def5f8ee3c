"""JSON Lines on disk: the one writer and the one reader of the event logs and the chaos history.

* ``JsonLinesWriter`` writes one compact JSON object per line, each line
  handed to the OS in one write (line-buffered), so a crash loses at most a
  torn last line; ``close()`` fsyncs, then closes.  Thread-safe.
* ``read_json_lines`` reads every complete line back: a torn last line (no
  ``\\n``: a killed writer) and lines that are not a JSON object are skipped.
"""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Callable


def _line_encoder(default: Callable[[Any], Any] | None, ensure_ascii: bool) -> Callable[[Any], str]:
    """``json.JSONEncoder(separators=(",", ":"), default=default, ensure_ascii=ensure_ascii).encode``, the same
    text, through the C encoder made once: ``encode`` makes one per call (a third of a line's encoding).  It keeps
    no record of the containers it is in (``check_circular`` off: none shared between threads; an event is no
    cycle)."""
    encoder = json.JSONEncoder(separators=(",", ":"), default=default, ensure_ascii=ensure_ascii,
                               check_circular=False)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return encoder.encode
    c = make(None, encoder.default, json.encoder.encode_basestring_ascii if ensure_ascii
             else json.encoder.encode_basestring, None, ":", ",", False, False, True)
    return lambda obj: "".join(c(obj, 0))


class JsonLinesWriter:
    """Appends to ``path`` (created with its directory; with ``truncate``, emptied first).

    ``default``: how values JSON cannot encode are written (None: a TypeError, nothing written);
    ``ensure_ascii``: as ``json.dumps``'s.  Each file keeps the encoding it always had."""

    def __init__(self, path: Path | str, *, truncate: bool = False, default: Callable[[Any], Any] | None = None,
                 ensure_ascii: bool = True) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # one encoder for every line (json.dumps with options makes a new one per call)
        self._encode = _line_encoder(default, ensure_ascii)
        self._lock = threading.Lock()
        self._f = open(self.path, "w" if truncate else "a", buffering=1, encoding="utf-8")

    @property
    def closed(self) -> bool:
        return self._f.closed

    def write(self, obj: dict[str, Any]) -> bool:
        """Write ``obj`` as one line; False (nothing written) once the writer is closed."""
        line = self._encode(obj) + "\n"
        with self._lock:
            if self._f.closed:
                return False
            self._f.write(line)
            return True

    def write_many(self, objs: list[dict[str, Any]]) -> bool:
        """Write each of ``objs`` as one line, all of them handed to the OS in one write; False (nothing
        written) once the writer is closed."""
        encode = self._encode
        text = "".join([encode(obj) + "\n" for obj in objs])
        with self._lock:
            if self._f.closed:
                return False
            self._f.write(text)
            return True

    def close(self) -> None:
        """Flush, fsync and close; a second call does nothing."""
        with self._lock:
            if not self._f.closed:
                self._f.flush()
                os.fsync(self._f.fileno())
                self._f.close()


def json_object(line: str | bytes) -> dict[str, Any] | None:
    """One line's JSON object; None when it does not parse or is not an object."""
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def read_json_lines(path: Path | str) -> list[dict[str, Any]]:
    """Every complete JSON-object line of a file written line by line; a torn last line (a killed
    writer) and lines that don't parse are skipped.  Event logs and chaos histories are read so."""
    out: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.endswith("\n"):
                break
            obj = json_object(line)
            if obj is not None:
                out.append(obj)
    return out
