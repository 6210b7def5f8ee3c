"""reference/javaclient.py's naming of Kafka's tools (the unit tier: nothing is started)."""
from __future__ import annotations

import pytest

from reference.javaclient import SHARED_JVM_TOOLS, TOOLS, tool_class


def test_a_tool_is_named_as_its_script_or_its_class() -> None:
    assert tool_class("kafka-topics") == tool_class("kafka-topics.sh") == "kafka.admin.TopicCommand"
    assert tool_class("kafka-producer-perf-test") == "org.apache.kafka.tools.ProducerPerformance"
    assert tool_class("kafka.tools.DumpLogSegments") == "kafka.tools.DumpLogSegments"
    with pytest.raises(ValueError, match="unknown Kafka tool 'kafka-nonesuch': one of .*kafka-topics"):
        tool_class("kafka-nonesuch")
    with pytest.raises(ValueError, match="unknown Kafka tool 'java.lang.System'"):
        tool_class("java.lang.System")


def test_the_tools_sharing_a_jvm_are_named_tools() -> None:
    assert SHARED_JVM_TOOLS <= set(TOOLS.values())
    assert "kafka.tools.ConsoleConsumer" not in SHARED_JVM_TOOLS   # it counts messages in a static field
