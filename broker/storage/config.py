"""Per-log settings under Kafka's own key names (topic-level and broker-wide ``log.*``).

The topic keys are one table (``TOPIC_CONFIG``) of the configuration mechanism
(``broker.configdef``); ``LogConfig``'s defaults are that table's defaults.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.configdef import INT_MAX, LONG_MAX, ConfigDef, ConfigError, Key, OneOf, Range, Scope, Type, ValidList, parse_typed

__all__ = ["LogConfig", "TOPIC_CONFIG", "BROKER_TO_TOPIC", "BROKER_TIME_KEYS", "INT_MAX", "LONG_MAX"]

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
_DAY_MS = 24 * 3600 * 1000
CLEANUP_POLICIES = ("delete", "compact")
COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")


def _cleanup_policy(parts: list[str]) -> str:
    """``compact, Delete`` -> ``compact,delete``: sorted, lower case, each once."""
    return ",".join(sorted({p.lower() for p in parts}))


ALL_REPLICAS = "*"


def parse_throttled_replicas(value: str | None) -> frozenset[tuple[int, int]] | str:
    """``0:1,0:2,1:3`` -> {(partition, broker)}; ``*`` -> ALL_REPLICAS; empty or None -> none.
    ValueError names the entry that is neither."""
    text = (value or "").strip()
    if text == ALL_REPLICAS:
        return ALL_REPLICAS
    out = set()
    for entry in (e.strip() for e in text.split(",") if e.strip()):
        partition, sep, broker = entry.partition(":")
        if not sep or not partition.strip().isdigit() or not broker.strip().isdigit():
            raise ValueError(f"{entry!r} is not partition:broker (or use * for every replica)")
        out.add((int(partition), int(broker)))
    return frozenset(out)


def check_throttled_replicas(value: str | None) -> None:
    """The throttled-replicas keys' validator (``parse_throttled_replicas`` raising)."""
    parse_throttled_replicas(value)


def _unused(name: str, note: str = "") -> Key:
    """A valid Kafka topic key storage does not act on; kept verbatim in LogConfig.other."""
    return Key(name, Type.STRING, None, doc="Accepted, not used" + (f": {note}" if note else "."))


#: Topic-level keys. The first group is what storage acts on (LogConfig's attributes).
TOPIC_CONFIG = ConfigDef(
    Scope.TOPIC,
    [
        Key("segment.bytes", Type.INT, 1 << 30, Range(14, INT_MAX), "The segment size at which the log rolls."),
        Key("segment.ms", Type.DURATION, 7 * _DAY_MS, Range(1), "The segment age at which the log rolls (7 days)."),
        Key("retention.ms", Type.DURATION, 7 * _DAY_MS, Range(-1),
            "Deletes whole segments whose newest record is older than this. `-1` keeps them forever."),
        Key("retention.bytes", Type.LONG, -1, Range(-LONG_MAX),
            "Deletes the oldest segments while the partition is larger than this."),
        Key("flush.messages", Type.LONG, LONG_MAX, Range(1), "fsync after this many messages (the default means never)."),
        Key("flush.ms", Type.DURATION, LONG_MAX, Range(0),
            "fsync when the unflushed data is older than this (the default means never)."),
        Key("index.interval.bytes", Type.INT, 4096, Range(0), "Bytes of log between offset-index entries."),
        Key("segment.index.bytes", Type.INT, 10 * 1024 * 1024, Range(4), "The largest index of a segment."),
        Key("max.message.bytes", Type.INT, 1048588, Range(0), "The largest batch accepted, after compression."),
        Key("message.timestamp.type", Type.STRING, CREATE_TIME, OneOf((CREATE_TIME, LOG_APPEND_TIME)),
            "`CreateTime` or `LogAppendTime`."),
        Key("cleanup.policy", Type.LIST, ["delete"],
            ValidList(CLEANUP_POLICIES, "expected delete, compact or compact,delete"),
            "`delete`, `compact` or `compact,delete`.", convert=_cleanup_policy),
        Key("min.insync.replicas", Type.INT, 1, Range(1), "The smallest ISR for which an `acks=all` produce succeeds."),
        Key("unclean.leader.election.enable", Type.BOOLEAN, False, doc="Allows a leader from outside the ISR."),
        Key("compression.type", Type.STRING, "producer", OneOf(COMPRESSION_TYPES),
            "`producer` keeps the producer's codec; the others re-compress on the broker."),
        Key("delete.retention.ms", Type.DURATION, _DAY_MS, Range(0),
            "How long a tombstone (a null value) stays in a compacted log once its segment is that old."),
        Key("min.compaction.lag.ms", Type.DURATION, 0, Range(0), "The least age of a record before compaction may remove it."),
        Key("max.compaction.lag.ms", Type.DURATION, LONG_MAX, Range(1),
            "A dirty segment older than this is compacted whatever the dirty ratio."),
        Key("min.cleanable.dirty.ratio", Type.DOUBLE, 0.5, Range(0, 1),
            "The share of a compacted log's cleanable bytes that must be dirty (uncompacted) before it is cleaned."),
        _unused("segment.jitter.ms"),
        _unused("file.delete.delay.ms", "deleted segments are removed at once"), _unused("preallocate"),
        Key("message.timestamp.difference.max.ms", Type.LONG, None, Range(0),
            "CreateTime topics refuse a batch (INVALID_TIMESTAMP) with a record this far from the broker's time "
            "(unset: no bound)."),
        Key("message.timestamp.before.max.ms", Type.LONG, None, Range(0),
            "As message.timestamp.difference.max.ms, for records older than the broker's time only."),
        Key("message.timestamp.after.max.ms", Type.LONG, None, Range(0),
            "As message.timestamp.difference.max.ms, for records newer than the broker's time only."),
        _unused("message.format.version", "the log stores what the producer sent"),
        _unused("message.downconversion.enable"),
        Key("leader.replication.throttled.replicas", Type.STRING, None, validator=check_throttled_replicas,
            doc="Replicas (partition:broker,..., or *) whose leader's sending to followers counts against "
                "leader.replication.throttled.rate (set by reassign-partitions --throttle)."),
        Key("follower.replication.throttled.replicas", Type.STRING, None, validator=check_throttled_replicas,
            doc="Replicas (partition:broker,..., or *) whose fetching by their follower counts against "
                "follower.replication.throttled.rate (set by reassign-partitions --throttle)."),
        _unused("compression.gzip.level"),
        _unused("compression.lz4.level"), _unused("compression.zstd.level"),
        _unused("remote.storage.enable", "no tiered storage"), _unused("local.retention.ms"),
        _unused("local.retention.bytes"),
    ],
)

#: Broker key -> topic key, for the keys that map one to one (the broker-wide defaults).
BROKER_TO_TOPIC = {
    "log.segment.bytes": "segment.bytes",
    "log.retention.bytes": "retention.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.index.size.max.bytes": "segment.index.bytes",
    "message.max.bytes": "max.message.bytes",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.message.timestamp.difference.max.ms": "message.timestamp.difference.max.ms",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "log.cleanup.policy": "cleanup.policy",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "compression.type": "compression.type",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
}

#: Kafka key groups where the first key present wins, with the unit of each, in ms.
BROKER_TIME_KEYS = {
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", 3600 * 1000)),
    "retention.ms": (("log.retention.ms", 1), ("log.retention.minutes", 60 * 1000), ("log.retention.hours", 3600 * 1000)),
    "flush.ms": (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)),
}

#: Broker-wide only: idle producers' idempotence state is dropped after this long.
PRODUCER_ID_EXPIRATION = Key("producer.id.expiration.ms", Type.INT, _DAY_MS, Range(1))


def _default(name: str) -> Any:
    return TOPIC_CONFIG.default(name)


@dataclass(frozen=True)
class LogConfig:
    """Settings of one partition log; attribute names are Kafka's topic keys in snake_case."""

    segment_bytes: int = _default("segment.bytes")
    segment_ms: int = _default("segment.ms")
    retention_ms: int = _default("retention.ms")
    retention_bytes: int = _default("retention.bytes")
    flush_messages: int = _default("flush.messages")
    flush_ms: int = _default("flush.ms")
    index_interval_bytes: int = _default("index.interval.bytes")
    segment_index_bytes: int = _default("segment.index.bytes")
    max_message_bytes: int = _default("max.message.bytes")
    message_timestamp_type: str = _default("message.timestamp.type")
    cleanup_policy: str = _default("cleanup.policy")
    min_insync_replicas: int = _default("min.insync.replicas")
    unclean_leader_election_enable: bool = _default("unclean.leader.election.enable")
    compression_type: str = _default("compression.type")
    delete_retention_ms: int = _default("delete.retention.ms")
    min_compaction_lag_ms: int = _default("min.compaction.lag.ms")
    max_compaction_lag_ms: int = _default("max.compaction.lag.ms")
    min_cleanable_dirty_ratio: float = _default("min.cleanable.dirty.ratio")
    producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION.default
    other: Mapping[str, str] = field(default_factory=dict)

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def compact_enabled(self) -> bool:
        """Whether the log cleaner compacts this log (cleanup.policy contains compact)."""
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete_enabled(self) -> bool:
        """Whether retention deletes segments (cleanup.policy contains delete)."""
        return "delete" in self.cleanup_policy.split(",")

    @classmethod
    def from_broker(cls, props: Mapping[str, Any]) -> LogConfig:
        """Build the broker-wide default from server.properties keys (``log.*`` and friends)."""
        kwargs: dict[str, Any] = {}
        other: dict[str, str] = {}
        for broker_key, topic_key in BROKER_TO_TOPIC.items():
            if broker_key in props:
                value = TOPIC_CONFIG.parse_value(topic_key, _given(broker_key, props), broker_key)
                if TOPIC_CONFIG[topic_key].attr in _ATTRS:
                    kwargs[TOPIC_CONFIG[topic_key].attr] = value
                elif value is not None:  # a key storage keeps verbatim (the validator reads it)
                    other[topic_key] = str(value)
        if other:
            kwargs["other"] = other
        for topic_key, choices in BROKER_TIME_KEYS.items():
            for broker_key, unit in choices:
                if broker_key in props:
                    n = parse_typed(Type.LONG, broker_key, _given(broker_key, props))
                    value = n if n < 0 else n * unit
                    kwargs[TOPIC_CONFIG[topic_key].attr] = TOPIC_CONFIG.parse_value(topic_key, value, broker_key)
                    break
        if PRODUCER_ID_EXPIRATION.name in props:
            kwargs["producer_id_expiration_ms"] = PRODUCER_ID_EXPIRATION.parse(_given(PRODUCER_ID_EXPIRATION.name, props))
        return cls(**kwargs)

    def with_overrides(self, topic_props: Mapping[str, Any]) -> LogConfig:
        """Apply topic-level keys (``segment.bytes``...); unknown keys and bad values raise ConfigError."""
        changes: dict[str, Any] = {}
        other = dict(self.other)
        for name, value in topic_props.items():
            if name not in TOPIC_CONFIG:
                raise ConfigError(f"Unknown topic configuration {name!r}", name)
            key = TOPIC_CONFIG[name]
            if key.attr in _ATTRS:
                changes[key.attr] = key.parse(_given(name, topic_props))
            else:
                key.parse(_given(name, topic_props))  # refused in one line when bad, kept verbatim when good
                other[name] = str(value)
        return dataclasses.replace(self, other=other, **changes)

    def topic_props(self) -> dict[str, str]:
        """Every topic-level key storage acts on, with its value as a string (for DescribeConfigs)."""
        props = {}
        for key in TOPIC_CONFIG:
            if key.attr in _ATTRS:
                value = getattr(self, key.attr)
                props[key.name] = str(value).lower() if isinstance(value, bool) else str(value)
        props.update(self.other)
        return props


_ATTRS = frozenset(f.name for f in dataclasses.fields(LogConfig))


def _given(name: str, props: Mapping[str, Any]) -> Any:
    value = props[name]
    if value is None:
        raise ConfigError(f"Invalid value None for configuration {name}: no value", name)
    return value
