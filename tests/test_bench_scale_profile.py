"""bench/scale.py's profile summary: py-spy's collapsed stacks of one broker, or of several added up."""
from __future__ import annotations

from pathlib import Path

from bench.scale import py_spy, top_stacks


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_brokers_samples_add_up_and_each_function_counts_once_per_sample(tmp_path: Path) -> None:
    a = write(tmp_path / "a.txt", [
        "Thread._bootstrap (threading.py:1);Fetch (node/server/servicer.py:10);_begin (node/replicas/leader_fetch.py:5) 30",
        "Thread._bootstrap (threading.py:1);Fetch (node/server/servicer.py:10);_finish (node/replicas/leader_fetch.py:9) 10",
    ])
    b = write(tmp_path / "b.txt", [
        "Thread._bootstrap (threading.py:1);apply (node/replicas/replica_manager.py:3);"
        "apply (node/replicas/replica_manager.py:4) 60",
    ])
    out = top_stacks([a, b, tmp_path / "missing.txt"], n=3)
    assert out[0].startswith("100 samples on the CPU (1.0 CPU-s)")
    own = out[1:out.index("  inclusive:")]
    assert own == ["     60.0%  apply (node/replicas/replica_manager.py)",
                   "     30.0%  _begin (node/replicas/leader_fetch.py)",
                   "     10.0%  _finish (node/replicas/leader_fetch.py)"]
    inclusive = out[out.index("  inclusive:") + 1:]
    # a recursive frame counts once per sample; the thread's start is left out
    assert inclusive[:2] == ["     60.0%  apply (node/replicas/replica_manager.py)",
                             "     40.0%  Fetch (node/server/servicer.py)"]
    assert not any("Thread._bootstrap" in line for line in inclusive)
    # one file alone, and the interpreter lock's samples named as such
    assert top_stacks(b, gil=True)[0].startswith("60 samples of the interpreter lock's holder (0.6 s held")
    assert top_stacks([tmp_path / "missing.txt"]) == ["(no profile: is py-spy installed?)"]


def test_py_spy_is_asked_for_the_lock_holder_only_with_gil(tmp_path: Path, monkeypatch) -> None:
    calls: list[list[str]] = []

    class Started:
        def __init__(self, cmd, **_kw) -> None:
            calls.append(cmd)

    monkeypatch.setattr("bench.scale.subprocess.Popen", Started)
    py_spy(123, tmp_path / "x.txt", None)
    py_spy(123, tmp_path / "y.txt", 10, gil=True)
    assert "--gil" not in calls[0] and calls[1][-3:] == ["--gil", "--duration", "10"]
    assert calls[0][:4] == ["py-spy", "record", "--pid", "123"]
