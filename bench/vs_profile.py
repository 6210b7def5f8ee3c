"""Where a kafkasim broker spends a workload: py-spy sampling its process (bench/vs_kafka.py --profile).

py-spy is not a kafkasim dependency: ``pip install py-spy`` (or the ``bench`` extra) for the benchmark only.
``PySpy(pid)`` records the process while the ``with`` block runs (``py-spy record --gil --format raw``: only the
thread holding the GIL, i.e. where the broker's Python time goes; one line per distinct stack, with its sample
count) and then reads the samples; :func:`top` ranks functions by the share of samples in which they are on
the stack ("total") and at its top ("self").
"""
from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any


def available() -> bool:
    return shutil.which("py-spy") is not None


class PySpy:
    def __init__(self, pid: int, rate: int = 250) -> None:
        self.pid, self.rate = pid, rate
        self.samples: Counter[tuple[str, ...]] = Counter()

    def __enter__(self) -> "PySpy":
        self._dir = tempfile.mkdtemp(prefix="vs-pyspy-")
        self.out = Path(self._dir) / "stacks.txt"
        self.proc = subprocess.Popen(["py-spy", "record", "--pid", str(self.pid), "--rate", str(self.rate),
                                      "--format", "raw", "--output", str(self.out), "--gil",
                                      "--duration", "3600"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.proc.send_signal(signal.SIGINT)   # py-spy writes what it has and exits
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        if self.out.exists():
            for line in self.out.read_text(errors="replace").splitlines():
                stack, _, count = line.rpartition(" ")
                if stack and count.isdigit():
                    self.samples[tuple(stack.split(";"))] += int(count)
        shutil.rmtree(self._dir, ignore_errors=True)


def _name(frame: str) -> str:
    """``func (path/to/module.py:123)`` -> ``func (module.py)``: a function, whatever line it was on."""
    func, _, where = frame.partition(" (")
    return f"{func} ({where.rsplit('/', 1)[-1].split(':', 1)[0]})" if where else func


def top(samples: Counter[tuple[str, ...]], n: int = 12) -> dict[str, Any]:
    """The ``n`` functions most often on the stack (total) and at its top (self), as shares of all samples."""
    total_samples = sum(samples.values())
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    for stack, count in samples.items():
        frames = [_name(f) for f in stack]
        for f in set(frames):
            inclusive[f] += count
        own[frames[-1]] += count
    share = (lambda c: round(100.0 * c / total_samples, 1)) if total_samples else (lambda c: 0.0)
    return {"samples": total_samples, "total": [(share(c), f) for f, c in inclusive.most_common(n)],
            "self": [(share(c), f) for f, c in own.most_common(n)]}
