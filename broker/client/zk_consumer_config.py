"""The ZooKeeper consumer's settings (Kafka 0.8's ``ConsumerConfig``): its key table and the typed config.

Keys the table does not know are kept in ``ConsumerConfig.other`` (0.8 consumers carried many
settings of other components in one file), never an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.client.security import PLAINTEXT, SECURITY_KEY_NAMES, ClientSecurity
from broker.client.simple_consumer import EARLIEST_TIME, LATEST_TIME
from broker.configdef import NO_DEFAULT, ConfigDef, Importance, Key, OneOf, Range, Scope, Type

#: auto.offset.reset values -> the ListOffsets time they ask for
OFFSET_RESET_TIMES = {"smallest": EARLIEST_TIME, "earliest": EARLIEST_TIME, "largest": LATEST_TIME, "latest": LATEST_TIME}

#: Kafka 0.8's consumer keys and defaults.
ZK_CONSUMER_CONFIG = ConfigDef(
    Scope.ZK_CONSUMER,
    [
        Key("zookeeper.connect", Type.STRING, NO_DEFAULT, importance=Importance.HIGH,
            doc="`host:port,...[/chroot]` of the ZooKeeper ensemble the brokers register in."),
        Key("group.id", Type.STRING, NO_DEFAULT, importance=Importance.HIGH, doc="The consumer group."),
        Key("consumer.id", Type.STRING, None, doc="This member's id in the group; generated when unset."),
        Key("client.id", Type.STRING, None, doc="The client id sent with every request; the group id when unset."),
        Key("auto.commit.enable", Type.BOOLEAN, True, doc="Commit the consumed offsets every `auto.commit.interval.ms`."),
        Key("auto.commit.interval.ms", Type.INT, 60000, doc="How often offsets are committed automatically."),
        Key("auto.offset.reset", Type.STRING, "largest", OneOf(tuple(OFFSET_RESET_TIMES), ignore_case=True,
                                                                reason="use smallest, largest, earliest or latest"),
            convert=str.lower, doc="Where a partition with no committed offset starts: `smallest` or `largest`."),
        Key("consumer.timeout.ms", Type.INT, -1,
            doc="A stream raises ConsumerTimeoutException after this long without a message; -1: never."),
        Key("fetch.message.max.bytes", Type.INT, 1024 * 1024, Range(1), doc="The most bytes fetched per partition per request."),
        Key("fetch.min.bytes", Type.INT, 1, doc="The fewest bytes a Fetch waits for."),
        Key("fetch.wait.max.ms", Type.INT, 100, doc="How long a Fetch waits at the broker for `fetch.min.bytes`."),
        Key("queued.max.message.chunks", Type.INT, 10, doc="Fetched chunks buffered per stream before fetching pauses."),
        Key("refresh.leader.backoff.ms", Type.INT, 200, doc="The pause before looking up a partition's new leader."),
        Key("socket.timeout.ms", Type.INT, 30000, doc="How long a request waits for its answer."),
        Key("zookeeper.session.timeout.ms", Type.INT, 6000, doc="The ZooKeeper session timeout."),
        Key("zookeeper.connection.timeout.ms", Type.INT, 6000, doc="How long connecting to ZooKeeper may take."),
        Key("rebalance.max.retries", Type.INT, 4, doc="Rebalance attempts before the consumer gives up."),
        Key("rebalance.backoff.ms", Type.INT, 2000, doc="The pause between rebalance attempts."),
    ],
    aliases={"enable.auto.commit": "auto.commit.enable"},
)


@dataclass
class ConsumerConfig:
    """The ZooKeeper consumer's settings, one attribute per key of ZK_CONSUMER_CONFIG."""

    zookeeper_connect: str
    group_id: str
    consumer_id: str | None = ZK_CONSUMER_CONFIG.default("consumer.id")
    client_id: str | None = ZK_CONSUMER_CONFIG.default("client.id")
    auto_commit_enable: bool = ZK_CONSUMER_CONFIG.default("auto.commit.enable")
    auto_commit_interval_ms: int = ZK_CONSUMER_CONFIG.default("auto.commit.interval.ms")
    auto_offset_reset: str = ZK_CONSUMER_CONFIG.default("auto.offset.reset")
    consumer_timeout_ms: int = ZK_CONSUMER_CONFIG.default("consumer.timeout.ms")
    fetch_message_max_bytes: int = ZK_CONSUMER_CONFIG.default("fetch.message.max.bytes")
    fetch_min_bytes: int = ZK_CONSUMER_CONFIG.default("fetch.min.bytes")
    fetch_wait_max_ms: int = ZK_CONSUMER_CONFIG.default("fetch.wait.max.ms")
    queued_max_message_chunks: int = ZK_CONSUMER_CONFIG.default("queued.max.message.chunks")
    refresh_leader_backoff_ms: int = ZK_CONSUMER_CONFIG.default("refresh.leader.backoff.ms")
    socket_timeout_ms: int = ZK_CONSUMER_CONFIG.default("socket.timeout.ms")
    zookeeper_session_timeout_ms: int = ZK_CONSUMER_CONFIG.default("zookeeper.session.timeout.ms")
    zookeeper_connection_timeout_ms: int = ZK_CONSUMER_CONFIG.default("zookeeper.connection.timeout.ms")
    rebalance_max_retries: int = ZK_CONSUMER_CONFIG.default("rebalance.max.retries")
    rebalance_backoff_ms: int = ZK_CONSUMER_CONFIG.default("rebalance.backoff.ms")
    other: dict[str, str] = field(default_factory=dict)
    security: ClientSecurity = PLAINTEXT  # security.protocol, ssl.*, sasl.*: how fetchers reach the brokers

    @classmethod
    def from_props(cls, props: Mapping[str, Any]) -> ConsumerConfig:
        """Build from Kafka-named keys (an empty value counts as unset); raises ConfigError naming a bad key."""
        given = {str(k).strip(): str(v).strip() for k, v in props.items() if v is not None and str(v).strip()}
        values = ZK_CONSUMER_CONFIG.parse(given)
        other = {name: value for name, value in given.items() if name in ZK_CONSUMER_CONFIG.unknown([name])}
        security = ClientSecurity.from_props({k: v for k, v in given.items() if k in SECURITY_KEY_NAMES})
        return cls(**{ZK_CONSUMER_CONFIG[name].attr: value for name, value in values.items()}, other=other,
                   security=security)
