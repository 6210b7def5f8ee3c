"""kafkasim's pytest plugin: a real local cluster as a fixture, with faults aimed by role.

Installed with the package (a ``pytest11`` entry point, ``kafkasim.pytest_plugin``), so any test can ask for:

* ``kafkasim``: a :class:`kafkasim.Cluster` of its own, started before the test and stopped after it;
* ``kafkasim_session``: one cluster shared by every test of the session that asks for it (its settings come
  from the ``kafkasim_session_settings`` fixture, which a conftest.py may override).

The ``kafkasim`` marker picks the settings of the ``kafkasim`` fixture: ``Cluster.start``'s keywords,
``brokers``, ``network`` and any cluster.yaml key (dotted, through ``**{...}``, or with underscores)::

    @pytest.mark.kafkasim(brokers=3, **{"offsets.topic.num.partitions": 10})
    def test_billing_survives_coordinator_loss(kafkasim):
        kafkasim.create_topic("orders", partitions=6)
        ...

Markers on the module or class apply too; the closest one wins key by key.  The cluster's files (logs, event
logs, the history) are kept in the test's temporary directory.  This module imports nothing but pytest until
a test asks for a cluster, so it costs nothing in a session that does not.
"""
from __future__ import annotations

from typing import Any, Iterator

import pytest

MARKER = ("kafkasim(brokers=3, network=True, **settings): the kafkasim fixture's cluster settings "
          "(kafkasim.Cluster.start's keywords; cluster.yaml keys dotted or with underscores)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)


def cluster_options(node: pytest.Item) -> dict[str, Any]:
    """The ``kafkasim`` markers' keywords on ``node``, farthest first, so the closest marker wins per key.  A
    positional argument is the number of brokers."""
    options: dict[str, Any] = {}
    for mark in reversed(list(node.iter_markers("kafkasim"))):
        if len(mark.args) > 1 or (mark.args and not isinstance(mark.args[0], int)):
            raise pytest.UsageError(f"{node.nodeid}: @pytest.mark.kafkasim takes the number of brokers and "
                                    f"keywords, got {mark.args!r}")
        if mark.args:
            options["brokers"] = mark.args[0]
        options.update(mark.kwargs)
    return options


@pytest.fixture
def kafkasim(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A :class:`kafkasim.Cluster` for this test (settings: the ``kafkasim`` marker), stopped after it."""
    from kafkasim import Cluster
    options = cluster_options(request.node)
    with Cluster.start(run_dir=tmp_path_factory.mktemp("kafkasim"), **options) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kafkasim_session_settings() -> dict[str, Any]:
    """``Cluster.start``'s keywords for ``kafkasim_session``; override this fixture in a conftest.py."""
    return {}


@pytest.fixture(scope="session")
def kafkasim_session(kafkasim_session_settings: dict[str, Any],
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One :class:`kafkasim.Cluster` for the whole session.  Faults a test leaves in force are healed after
    it (``heal()``), so the next test starts on a whole cluster."""
    from kafkasim import Cluster
    with Cluster.start(run_dir=tmp_path_factory.mktemp("kafkasim-session"), **kafkasim_session_settings) as cluster:
        yield cluster


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """After a test that used ``kafkasim_session``: heal what it left in force."""
    cluster = getattr(item, "funcargs", {}).get("kafkasim_session")
    if cluster is not None:
        cluster.heal()
