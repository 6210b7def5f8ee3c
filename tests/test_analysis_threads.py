"""The analysis' driver threads: ``Ctx.once`` (the checkers built by two threads share what they share) and the
report's ``Drawer`` (figures drawn in another thread, some ahead of their names).  No Spark session."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest

from analysis.checks_base import Ctx
from analysis.report import Drawer


def _ctx() -> Ctx:
    return Ctx(None, [], *([None] * 6))


def test_once_builds_a_name_once_for_every_thread():
    ctx, calls, started, go = _ctx(), [], threading.Event(), threading.Event()

    def build():
        calls.append(threading.current_thread().name)
        started.set()
        assert go.wait(10)
        return object()

    got: dict[str, object] = {}

    def ask(who):
        got[who] = ctx.once("shared", build)

    first = threading.Thread(target=ask, args=("first",))
    first.start()
    assert started.wait(10)
    second = threading.Thread(target=ask, args=("second",))
    second.start()
    second.join(0.2)
    assert second.is_alive()          # waits for the first one's build, does not build its own
    go.set()
    first.join(10)
    second.join(10)
    assert len(calls) == 1 and got["first"] is got["second"] is ctx.shared["shared"]


def test_once_of_other_names_does_not_wait():
    """A build that asks for another name gets it; a name being built does not hold up the others."""
    ctx, go = _ctx(), threading.Event()
    slow = threading.Thread(target=lambda: ctx.once("slow", lambda: go.wait(10)))
    slow.start()
    assert ctx.once("outer", lambda: ("outer", ctx.once("inner", lambda: "inner"))) == ("outer", "inner")
    go.set()
    slow.join(10)
    assert ctx.shared == {"slow": True, "inner": "inner", "outer": ("outer", "inner")}


def _plot(calls: list):
    def plot(path: Path, value, *, title="t"):
        calls.append(path.name)
        path.write_text(f"{value} {title}")
    return plot


def test_a_figure_drawn_ahead_is_renamed_not_drawn_again(tmp_path):
    calls: list[str] = []
    plot = _plot(calls)
    d = Drawer()
    d.ahead(plot, tmp_path / "a.png", [1, 2], title="x")
    d.ahead(plot, tmp_path / "b.png", [3])
    d.draw(plot, tmp_path / "run000-a.png", [1, 2], title="x")    # the same values: the file drawn ahead
    d.draw(plot, tmp_path / "run000-c.png", [9])                  # new values: drawn
    d.draw(plot, tmp_path / "run001-b.png", [3], title="y")       # another keyword value: drawn
    d.wait()
    d.close()
    assert calls == [".ahead-0-a.png", ".ahead-1-b.png", "run000-c.png", "run001-b.png"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run000-a.png", "run000-c.png", "run001-b.png"]
    assert (tmp_path / "run000-a.png").read_text() == "[1, 2] x"   # what was drawn ahead, under its name


def test_a_drawing_error_reaches_the_report(tmp_path):
    def broken(path, value):
        raise ValueError(f"cannot draw {value}")

    d = Drawer()
    d.ahead(broken, tmp_path / "a.png", 1)
    d.draw(broken, tmp_path / "run000-a.png", 1)    # taken from ahead: its error
    with pytest.raises(ValueError, match="cannot draw 1"):
        d.wait()
    d.close()
    d = Drawer()
    d.draw(broken, tmp_path / "b.png", 2)
    with pytest.raises(ValueError, match="cannot draw 2"):
        d.wait()
    d.close()
    assert list(tmp_path.iterdir()) == []


def test_values_that_do_not_pickle_are_drawn_each_time(tmp_path):
    calls: list[str] = []
    plot = _plot(calls)
    d = Drawer()
    lock = threading.Lock()   # (not picklable)
    d.ahead(plot, tmp_path / "a.png", lock)
    d.draw(plot, tmp_path / "run000-a.png", lock)
    d.wait()
    d.close()
    assert calls == [".ahead-0-a.png", "run000-a.png"]
    assert [p.name for p in tmp_path.iterdir()] == ["run000-a.png"]
