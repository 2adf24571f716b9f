"""Per-log settings under Kafka's own key names (topic-level and broker-wide ``log.*``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
_DAY_MS = 24 * 3600 * 1000


def _int(lo: int, hi: int = LONG_MAX) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        if isinstance(value, bool):
            raise ValueError("expected an integer")
        n = value if isinstance(value, int) else int(str(value).strip())
        if not lo <= n <= hi:
            raise ValueError(f"{n} is outside [{lo}, {hi}]")
        return n

    return parse


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ValueError("expected true or false")
    return text == "true"


def _choice(*options: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = str(value).strip()
        if text not in options:
            raise ValueError(f"expected one of {', '.join(options)}")
        return text

    return parse


def _cleanup_policy(value: Any) -> str:
    parts = [p.strip().lower() for p in str(value).split(",") if p.strip()]
    if not parts or any(p not in ("delete", "compact") for p in parts):
        raise ValueError("expected delete, compact or compact,delete")
    return ",".join(sorted(set(parts)))


# topic-level key -> (attribute, parser). These are the settings the broker acts on.
_TOPIC_KEYS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "segment.bytes": ("segment_bytes", _int(14, INT_MAX)),
    "segment.ms": ("segment_ms", _int(1)),
    "retention.ms": ("retention_ms", _int(-1)),
    "retention.bytes": ("retention_bytes", _int(-LONG_MAX)),
    "flush.messages": ("flush_messages", _int(1)),
    "flush.ms": ("flush_ms", _int(0)),
    "index.interval.bytes": ("index_interval_bytes", _int(0, INT_MAX)),
    "segment.index.bytes": ("segment_index_bytes", _int(4, INT_MAX)),
    "max.message.bytes": ("max_message_bytes", _int(0, INT_MAX)),
    "message.timestamp.type": ("message_timestamp_type", _choice(CREATE_TIME, LOG_APPEND_TIME)),
    "cleanup.policy": ("cleanup_policy", _cleanup_policy),
    "min.insync.replicas": ("min_insync_replicas", _int(1, INT_MAX)),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", _bool),
    "compression.type": (
        "compression_type",
        _choice("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
    ),
}

# Valid Kafka topic keys storage does not act on; kept verbatim in LogConfig.other.
_OTHER_TOPIC_KEYS = frozenset(
    {
        "segment.jitter.ms", "delete.retention.ms", "min.compaction.lag.ms", "max.compaction.lag.ms",
        "file.delete.delay.ms", "min.cleanable.dirty.ratio", "preallocate",
        "message.timestamp.difference.max.ms", "message.timestamp.before.max.ms",
        "message.timestamp.after.max.ms", "message.format.version", "message.downconversion.enable",
        "leader.replication.throttled.replicas", "follower.replication.throttled.replicas",
        "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
        "remote.storage.enable", "local.retention.ms", "local.retention.bytes",
    }
)

# broker key -> topic key, for the keys that map one to one.
_BROKER_KEYS = {
    "log.segment.bytes": "segment.bytes",
    "log.retention.bytes": "retention.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.index.size.max.bytes": "segment.index.bytes",
    "message.max.bytes": "max.message.bytes",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.cleanup.policy": "cleanup.policy",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "compression.type": "compression.type",
}

# Kafka key groups where the first key present wins, with the unit of each, in ms.
_BROKER_TIME_KEYS = {
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", 3600 * 1000)),
    "retention.ms": (("log.retention.ms", 1), ("log.retention.minutes", 60 * 1000), ("log.retention.hours", 3600 * 1000)),
    "flush.ms": (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)),
}


@dataclass(frozen=True)
class LogConfig:
    """Settings of one partition log; attribute names are Kafka's topic keys in snake_case."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * _DAY_MS
    retention_ms: int = 7 * _DAY_MS
    retention_bytes: int = -1
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10 * 1024 * 1024
    max_message_bytes: int = 1048588
    message_timestamp_type: str = CREATE_TIME
    cleanup_policy: str = "delete"
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    compression_type: str = "producer"
    # Broker-wide only (producer.id.expiration.ms): idle producers' idempotence state is dropped.
    producer_id_expiration_ms: int = _DAY_MS
    other: Mapping[str, str] = field(default_factory=dict)

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def delete_enabled(self) -> bool:
        """Whether retention deletes segments (cleanup.policy contains delete)."""
        return "delete" in self.cleanup_policy.split(",")

    @classmethod
    def from_broker(cls, props: Mapping[str, Any]) -> LogConfig:
        """Build the broker-wide default from server.properties keys (``log.*`` and friends)."""
        topic: dict[str, Any] = {}
        for broker_key, topic_key in _BROKER_KEYS.items():
            if broker_key in props:
                topic[topic_key] = _parse(topic_key, props[broker_key], name=broker_key)
        for topic_key, choices in _BROKER_TIME_KEYS.items():
            for broker_key, unit in choices:
                if broker_key in props:
                    n = _parse_with(broker_key, props[broker_key], _int(-LONG_MAX))
                    topic[topic_key] = _parse(topic_key, n if n < 0 else n * unit, name=broker_key)
                    break
        kwargs = {_TOPIC_KEYS[k][0]: v for k, v in topic.items()}
        if "producer.id.expiration.ms" in props:
            kwargs["producer_id_expiration_ms"] = _parse_with(
                "producer.id.expiration.ms", props["producer.id.expiration.ms"], _int(1)
            )
        return cls(**kwargs)

    def with_overrides(self, topic_props: Mapping[str, Any]) -> LogConfig:
        """Apply topic-level keys (``segment.bytes``...); unknown keys and bad values raise ValueError."""
        changes: dict[str, Any] = {}
        other = dict(self.other)
        for key, value in topic_props.items():
            if key in _TOPIC_KEYS:
                changes[_TOPIC_KEYS[key][0]] = _parse(key, value)
            elif key in _OTHER_TOPIC_KEYS:
                other[key] = str(value)
            else:
                raise ValueError(f"unknown topic config {key!r}")
        return dataclasses.replace(self, other=other, **changes)

    def topic_props(self) -> dict[str, str]:
        """Every topic-level key with its value as a string (for DescribeConfigs)."""
        props = {}
        for key, (attr, _) in _TOPIC_KEYS.items():
            value = getattr(self, attr)
            props[key] = str(value).lower() if isinstance(value, bool) else str(value)
        props.update(self.other)
        return props


def _checked(key: str, value: Any) -> Any:
    if value is None:
        raise ValueError(f"config {key}: no value")
    return value


def _parse(topic_key: str, value: Any, name: str | None = None) -> Any:
    return _parse_with(name or topic_key, value, _TOPIC_KEYS[topic_key][1])


def _parse_with(name: str, value: Any, parser: Callable[[Any], Any]) -> Any:
    try:
        return parser(_checked(name, value))
    except ValueError as exc:
        raise ValueError(f"config {name}={value!r}: {exc}") from None
