"""reference/serverlog.py: Kafka 2.8.2's log lines as the benchmarks read them (unit tier)."""
from __future__ import annotations

from datetime import datetime

from reference.serverlog import offsets_loaded, wall_ms

LOADED = ("[2026-11-29 14:31:07,412] INFO [GroupMetadataManager brokerId=2] Finished loading offsets and group "
          "metadata from __consumer_offsets-17 in 1287 milliseconds for epoch 3, of which 41 milliseconds was "
          "spent in the scheduler. (kafka.coordinator.group.GroupMetadataManager)")


def test_a_finished_load_gives_its_partition_its_own_time_and_its_instant() -> None:
    r = offsets_loaded(LOADED)
    assert r == {"partition": "__consumer_offsets-17", "load_ms": 1246.0, "scheduler_ms": 41.0, "total_ms": 1287.0,
                 "epoch": 3, "wall_ms": datetime(2026, 11, 29, 14, 31, 7, 412000).timestamp() * 1000.0}


def test_other_lines_are_not_loads_and_unstamped_lines_have_no_instant() -> None:
    assert offsets_loaded("[2026-11-29 14:31:07,412] INFO [GroupMetadataManager brokerId=2] Scheduling loading of "
                          "offsets and group metadata from __consumer_offsets-17 for epoch 3") is None
    assert offsets_loaded(LOADED.replace("1287", "many")) is None
    assert wall_ms("\tat kafka.server.KafkaApis.handle(KafkaApis.scala:170)") is None
    assert wall_ms("[not a date at all, though long enough] INFO x") is None
    assert wall_ms(LOADED[:25] + " INFO x") == datetime(2026, 11, 29, 14, 31, 7, 412000).timestamp() * 1000.0
