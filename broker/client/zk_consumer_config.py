"""The ZooKeeper consumer's settings (Kafka 0.8's ``ConsumerConfig``): key names, defaults, validation.

Kept apart from the connector so it can move onto the project's one configuration mechanism.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.client.simple_consumer import EARLIEST_TIME, LATEST_TIME
from broker.config import ConfigError

#: auto.offset.reset values -> the ListOffsets time they ask for
OFFSET_RESET_TIMES = {"smallest": EARLIEST_TIME, "earliest": EARLIEST_TIME, "largest": LATEST_TIME, "latest": LATEST_TIME}


@dataclass
class ConsumerConfig:
    """The ZooKeeper consumer's settings, under Kafka 0.8's key names and defaults."""

    zookeeper_connect: str
    group_id: str
    consumer_id: str | None = None
    client_id: str | None = None
    auto_commit_enable: bool = True
    auto_commit_interval_ms: int = 60000
    auto_offset_reset: str = "largest"
    consumer_timeout_ms: int = -1
    fetch_message_max_bytes: int = 1024 * 1024
    fetch_min_bytes: int = 1
    fetch_wait_max_ms: int = 100
    queued_max_message_chunks: int = 10
    refresh_leader_backoff_ms: int = 200
    socket_timeout_ms: int = 30000
    zookeeper_session_timeout_ms: int = 6000
    zookeeper_connection_timeout_ms: int = 6000
    rebalance_max_retries: int = 4
    rebalance_backoff_ms: int = 2000
    other: dict[str, str] = field(default_factory=dict)

    _INTS = ("auto.commit.interval.ms", "consumer.timeout.ms", "fetch.message.max.bytes", "fetch.min.bytes",
             "fetch.wait.max.ms", "queued.max.message.chunks", "refresh.leader.backoff.ms", "socket.timeout.ms",
             "zookeeper.session.timeout.ms", "zookeeper.connection.timeout.ms", "rebalance.max.retries",
             "rebalance.backoff.ms")

    @classmethod
    def from_props(cls, props: Mapping[str, Any]) -> ConsumerConfig:
        """Build from Kafka-named keys; raises ConfigError naming a bad key."""
        p = {str(k).strip(): str(v).strip() for k, v in props.items()}
        for key in ("zookeeper.connect", "group.id"):
            if not p.get(key):
                raise ConfigError(f"Missing required configuration {key}")
        kwargs: dict[str, Any] = {"zookeeper_connect": p.pop("zookeeper.connect"), "group_id": p.pop("group.id")}
        for key in cls._INTS:
            if key in p:
                raw = p.pop(key)
                try:
                    kwargs[key.replace(".", "_")] = int(raw)
                except ValueError:
                    raise ConfigError(f"Invalid value {raw!r} for configuration {key}: not an integer") from None
        if "auto.commit.enable" in p or "enable.auto.commit" in p:
            raw = p.pop("auto.commit.enable", None) or p.pop("enable.auto.commit")
            if raw.lower() not in ("true", "false"):
                raise ConfigError(f"Invalid value {raw!r} for configuration auto.commit.enable: not a boolean")
            kwargs["auto_commit_enable"] = raw.lower() == "true"
        if "auto.offset.reset" in p:
            raw = p.pop("auto.offset.reset").lower()
            if raw not in OFFSET_RESET_TIMES:
                raise ConfigError(f"Invalid value {raw!r} for configuration auto.offset.reset: "
                                  "use smallest, largest, earliest or latest")
            kwargs["auto_offset_reset"] = raw
        for key in ("consumer.id", "client.id"):
            if p.get(key):
                kwargs[key.replace(".", "_")] = p.pop(key)
        kwargs["other"] = p
        if kwargs.get("fetch_message_max_bytes", 1) <= 0:
            raise ConfigError("Invalid value for configuration fetch.message.max.bytes: must be positive")
        return cls(**kwargs)
