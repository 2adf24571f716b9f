"""LogConfig: Kafka's key names, broker-wide mapping, topic overrides, bad values."""

import pytest

from broker.storage.config import LONG_MAX, LogConfig


def test_defaults_are_kafkas() -> None:
    c = LogConfig()
    assert c.segment_bytes == 1 << 30
    assert c.segment_ms == c.retention_ms == 7 * 24 * 3600 * 1000
    assert c.retention_bytes == -1
    assert c.flush_messages == c.flush_ms == LONG_MAX
    assert c.index_interval_bytes == 4096
    assert c.segment_index_bytes == 10 * 1024 * 1024
    assert c.max_message_bytes == 1048588
    assert c.message_timestamp_type == "CreateTime"


def test_from_broker_maps_log_keys() -> None:
    c = LogConfig.from_broker(
        {
            "log.segment.bytes": "1048576",
            "log.roll.hours": "2",
            "log.retention.hours": "5",
            "log.retention.minutes": "30",
            "log.retention.bytes": "999",
            "log.flush.interval.messages": "10",
            "log.flush.interval.ms": "250",
            "log.index.interval.bytes": "100",
            "log.index.size.max.bytes": "4096",
            "message.max.bytes": "2000",
            "log.message.timestamp.type": "LogAppendTime",
            "broker.id": "7",  # unrelated keys are ignored
        }
    )
    assert c.segment_bytes == 1048576
    assert c.segment_ms == 2 * 3600 * 1000
    assert c.retention_ms == 30 * 60 * 1000  # minutes win over hours
    assert c.retention_bytes == 999
    assert c.flush_messages == 10
    assert c.flush_ms == 250
    assert c.index_interval_bytes == 100
    assert c.segment_index_bytes == 4096
    assert c.max_message_bytes == 2000
    assert c.log_append_time


def test_broker_precedence_and_fallbacks() -> None:
    c = LogConfig.from_broker({"log.roll.ms": "1234", "log.roll.hours": "9", "log.retention.ms": "-1", "log.retention.hours": "1"})
    assert c.segment_ms == 1234 and c.retention_ms == -1
    assert LogConfig.from_broker({"log.flush.scheduler.interval.ms": "3000"}).flush_ms == 3000
    assert LogConfig.from_broker({"log.retention.hours": "-1"}).retention_ms == -1


def test_topic_overrides() -> None:
    base = LogConfig.from_broker({"log.segment.bytes": "5000000"})
    c = base.with_overrides({"segment.bytes": "1000", "retention.ms": 60000, "cleanup.policy": "compact,delete", "preallocate": "false"})
    assert c.segment_bytes == 1000 and c.retention_ms == 60000
    assert c.delete_enabled and c.other["preallocate"] == "false"
    assert base.segment_bytes == 5000000  # the base is unchanged
    props = c.topic_props()
    assert props["segment.bytes"] == "1000" and props["unclean.leader.election.enable"] == "false"


@pytest.mark.parametrize(
    "read, key, value",
    [
        (LogConfig().with_overrides, "segment.bytes", "abc"),
        (LogConfig().with_overrides, "segment.bytes", "10"),
        (LogConfig().with_overrides, "retention.ms", "-2"),
        (LogConfig().with_overrides, "flush.messages", "0"),
        (LogConfig().with_overrides, "message.timestamp.type", "Whenever"),
        (LogConfig().with_overrides, "cleanup.policy", "shred"),
        (LogConfig().with_overrides, "no.such.key", "1"),
        (LogConfig.from_broker, "log.segment.bytes", "lots"),
        (LogConfig.from_broker, "log.retention.hours", "x"),
        (LogConfig.from_broker, "log.roll.ms", "0"),
        (LogConfig.from_broker, "message.max.bytes", "-5"),
    ],
)
def test_bad_values_name_the_key(read, key: str, value: str) -> None:
    """A bad topic override or broker-wide log key: the error names the key."""
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        read({key: value})
