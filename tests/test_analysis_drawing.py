"""The report's drawing workers (analysis/drawing.py): a figure drawn in a child is written; a child's error
fails the wait with the child's exception, not lost, not hung."""
from __future__ import annotations

import pytest

from analysis.drawing import Drawer

pytestmark = pytest.mark.cluster   # starts processes (a forkserver and its workers)

ROWS = [{"f": "send", "p50": 2.0, "p90": 5.0, "p99": 9.0}, {"f": "poll", "p50": 1.0, "p90": 3.0, "p99": 40.0}]


def test_a_figure_is_drawn_and_a_childs_error_fails_the_wait(tmp_path):
    drawer = Drawer(workers=1)
    try:
        drawer.draw("op_latency", tmp_path / "ok.png", ROWS)
        drawer.wait()
        assert (tmp_path / "ok.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        drawer.draw("op_latency", tmp_path / "bad.png", [{"f": "send"}])   # no percentiles: KeyError in the child
        with pytest.raises(RuntimeError, match=r"op_latency -> bad\.png.*KeyError\('p50'\)") as failed:
            drawer.wait()
        assert isinstance(failed.value.__cause__, KeyError)
        assert not (tmp_path / "bad.png").exists()
    finally:
        drawer.close()
