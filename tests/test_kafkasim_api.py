"""The public API's pure parts: settings, the plugin's markers (no process started)."""
from __future__ import annotations

import pytest

from kafkasim import Cluster, ConfigError
from kafkasim.cluster import cluster_settings
from kafkasim.pytest_plugin import cluster_options


def test_settings_take_dotted_keys_and_underscores_for_dots():
    s = cluster_settings(3, {"offsets_topic_num_partitions": 7, "zookeeper.session.timeout.ms": 4000})
    assert s["offsets.topic.num.partitions"] == 7 and s["zookeeper.session.timeout.ms"] == 4000
    assert s["offsets.topic.replication.factor"] == 3 and s["group.initial.rebalance.delay.ms"] == 500
    assert cluster_settings(1, {})["offsets.topic.replication.factor"] == 1


@pytest.mark.parametrize("key, message", [
    ("offsets_topic_num_partiton", "offsets_topic_num_partiton: unknown cluster setting (did you mean "
                                   "offsets.topic.num.partitions?)"),
    ("run_dir_x", "run_dir_x: unknown cluster setting"),
    ("run.dir", "run.dir: set by Cluster.start itself"),
    ("brokers_", "unknown cluster setting"),
])
def test_an_unknown_or_reserved_key_is_an_error_naming_it(key, message):
    with pytest.raises(ConfigError) as e:
        Cluster.start(**{key: 1})
    assert message in str(e.value) and e.value.keys == (key,)


def test_a_bad_value_is_an_error_naming_the_key_before_anything_starts(tmp_path):
    with pytest.raises(ConfigError, match="zookeeper.session.timeout.ms"):
        Cluster.start(run_dir=tmp_path, zookeeper_session_timeout_ms="soon")
    with pytest.raises(ConfigError, match="brokers"):
        Cluster.start(brokers=0)


class _Mark:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


class _Node:
    nodeid = "t.py::t"

    def __init__(self, *marks):
        self.marks = marks          # closest first, as pytest's iter_markers gives them

    def iter_markers(self, name):
        return iter(self.marks)


def test_the_closest_marker_wins_key_by_key():
    node = _Node(_Mark(brokers=1), _Mark(3, network=False, **{"offsets.topic.num.partitions": 5}))
    assert cluster_options(node) == {"brokers": 1, "network": False, "offsets.topic.num.partitions": 5}
    with pytest.raises(pytest.UsageError, match="number of brokers"):
        cluster_options(_Node(_Mark("three")))
