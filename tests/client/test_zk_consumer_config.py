"""The ZooKeeper consumer's key table: Kafka 0.8's names and defaults, one-line errors, unknown keys kept."""

from __future__ import annotations

import pytest

from broker.client.zk_consumer_config import OFFSET_RESET_TIMES, ConsumerConfig
from broker.configdef import ConfigError

REQUIRED = {"zookeeper.connect": "127.0.0.1:2181/kafka", "group.id": "g"}


def test_defaults_are_kafka_08s() -> None:
    c = ConsumerConfig.from_props(REQUIRED)
    assert (c.zookeeper_connect, c.group_id) == ("127.0.0.1:2181/kafka", "g")
    assert c.auto_commit_enable is True and c.auto_commit_interval_ms == 60000
    assert c.auto_offset_reset == "largest" and c.consumer_timeout_ms == -1
    assert c.fetch_message_max_bytes == 1048576 and c.rebalance_max_retries == 4
    assert c.consumer_id is None and c.client_id is None and c.other == {}


def test_values_are_typed_and_aliases_and_unknown_keys_kept() -> None:
    c = ConsumerConfig.from_props({**REQUIRED, "enable.auto.commit": "false", "auto.offset.reset": "SMALLEST",
                                   "fetch.wait.max.ms": " 250 ", "client.id": "", "serializer.class": "x.Y"})
    assert c.auto_commit_enable is False
    assert c.auto_offset_reset == "smallest" and c.auto_offset_reset in OFFSET_RESET_TIMES
    assert c.fetch_wait_max_ms == 250
    assert c.client_id is None  # an empty value is unset
    assert c.other == {"serializer.class": "x.Y"}


@pytest.mark.parametrize("missing", ["zookeeper.connect", "group.id"])
def test_required_keys(missing: str) -> None:
    props = {k: v for k, v in REQUIRED.items() if k != missing}
    with pytest.raises(ConfigError, match=f"Missing required configuration {missing}") as e:
        ConsumerConfig.from_props(props)
    assert e.value.key == missing


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("fetch.min.bytes", "many", "not an integer"),
        ("auto.commit.enable", "yes please", "true or false"),
        ("auto.offset.reset", "middle", "smallest, largest"),
        ("fetch.message.max.bytes", "0", "at least 1"),
    ],
)
def test_bad_values_are_one_line_naming_key_and_value(key: str, value: str, reason: str) -> None:
    with pytest.raises(ConfigError) as e:
        ConsumerConfig.from_props({**REQUIRED, key: value})
    msg = str(e.value)
    assert key in msg and repr(value) in msg and reason in msg and "\n" not in msg
