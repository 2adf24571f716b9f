"""GroupConsumer settings under Kafka's consumer key names, checked once at construction.

Unknown keys are an error naming the key (a typo would otherwise silently keep a default);
keys of the Java client that mean nothing here (deserializer classes, JMX, socket buffers)
are accepted and ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from broker.client.consumer_protocol import ASSIGNORS
from broker.client.simple_consumer import EARLIEST_TIME, LATEST_TIME
from broker.config import ConfigError

log = logging.getLogger(__name__)

#: Kafka's consumer keys and defaults (those of the Java client).
DEFAULTS: dict[str, str] = {
    "bootstrap.servers": "",
    "group.id": "",
    "client.id": "logbus-consumer",
    "session.timeout.ms": "45000",
    "heartbeat.interval.ms": "3000",
    "max.poll.interval.ms": "300000",
    "max.poll.records": "500",
    "auto.offset.reset": "latest",
    "enable.auto.commit": "true",
    "auto.commit.interval.ms": "5000",
    "fetch.max.bytes": "52428800",
    "max.partition.fetch.bytes": "1048576",
    "fetch.max.wait.ms": "500",
    "fetch.min.bytes": "1",
    "partition.assignment.strategy": "range,roundrobin",
    "request.timeout.ms": "30000",
    "retry.backoff.ms": "100",
    "metadata.max.age.ms": "300000",
    "exclude.internal.topics": "true",
}

#: Other names for the same settings (librdkafka's and Kafka 0.8's).
ALIASES: dict[str, str] = {
    "metadata.broker.list": "bootstrap.servers",
    "fetch.wait.max.ms": "fetch.max.wait.ms",
    "auto.commit.enable": "enable.auto.commit",
    "topic.metadata.refresh.interval.ms": "metadata.max.age.ms",
}

#: Java client keys with no meaning for this client: accepted and ignored.
IGNORED = {
    "key.deserializer", "value.deserializer", "interceptor.classes", "metric.reporters", "metrics.num.samples",
    "metrics.sample.window.ms", "metrics.recording.level", "receive.buffer.bytes", "send.buffer.bytes",
    "reconnect.backoff.ms", "reconnect.backoff.max.ms", "connections.max.idle.ms", "client.dns.lookup",
    "check.crcs", "default.api.timeout.ms", "allow.auto.create.topics", "security.protocol", "client.rack",
    "isolation.level",
}

#: auto.offset.reset values -> ListOffsets time (None: raise NoOffsetForPartitionError).
RESET_POLICIES: dict[str, int | None] = {
    "earliest": EARLIEST_TIME, "smallest": EARLIEST_TIME, "latest": LATEST_TIME, "largest": LATEST_TIME, "none": None,
}

#: Java assignor class names -> protocol names.
_ASSIGNOR_CLASSES = {"RangeAssignor": "range", "RoundRobinAssignor": "roundrobin"}


@dataclass(frozen=True)
class GroupConsumerConfig:
    """The parsed settings; build with ``GroupConsumerConfig.from_props``."""

    bootstrap_servers: str
    group_id: str
    client_id: str
    session_timeout_ms: int
    heartbeat_interval_ms: int
    max_poll_interval_ms: int
    max_poll_records: int
    auto_offset_reset: int | None
    enable_auto_commit: bool
    auto_commit_interval_ms: int
    fetch_max_bytes: int
    max_partition_fetch_bytes: int
    fetch_max_wait_ms: int
    fetch_min_bytes: int
    assignors: tuple[str, ...]
    request_timeout_ms: int
    retry_backoff_ms: int
    metadata_max_age_ms: int
    exclude_internal_topics: bool

    @classmethod
    def from_props(cls, props: Mapping[str, Any] | None = None, **kwargs: Any) -> GroupConsumerConfig:
        """Kafka-named keys (kwargs may spell them with underscores); ConfigError names a bad key."""
        merged = {str(k).strip(): v for k, v in (props or {}).items()}
        merged.update({k.replace("_", "."): v for k, v in kwargs.items()})
        p = dict(DEFAULTS)
        for key, value in merged.items():
            name = ALIASES.get(key, key)
            if name in IGNORED:
                continue
            if name not in DEFAULTS:
                raise ConfigError(f"Unknown consumer configuration {key!r}", key)
            if value is not None:
                p[name] = ("true" if value else "false") if isinstance(value, bool) else str(value).strip()
        for key in ("bootstrap.servers", "group.id"):
            if not p[key]:
                raise ConfigError(f"Missing required configuration {key}", key)
        reset = p["auto.offset.reset"].lower()
        if reset not in RESET_POLICIES:
            raise ConfigError(f"Invalid value {p['auto.offset.reset']!r} for configuration auto.offset.reset: "
                              "expected earliest, latest or none", "auto.offset.reset")
        config = cls(
            bootstrap_servers=p["bootstrap.servers"],
            group_id=p["group.id"],
            client_id=p["client.id"] or "logbus-consumer",
            session_timeout_ms=_int(p, "session.timeout.ms", 1),
            heartbeat_interval_ms=_int(p, "heartbeat.interval.ms", 1),
            max_poll_interval_ms=_int(p, "max.poll.interval.ms", 1),
            max_poll_records=_int(p, "max.poll.records", 1),
            auto_offset_reset=RESET_POLICIES[reset],
            enable_auto_commit=_bool(p, "enable.auto.commit"),
            auto_commit_interval_ms=_int(p, "auto.commit.interval.ms", 0),
            fetch_max_bytes=_int(p, "fetch.max.bytes", 1),
            max_partition_fetch_bytes=_int(p, "max.partition.fetch.bytes", 1),
            fetch_max_wait_ms=_int(p, "fetch.max.wait.ms", 0),
            fetch_min_bytes=_int(p, "fetch.min.bytes", 0),
            assignors=_assignors(p["partition.assignment.strategy"]),
            request_timeout_ms=_int(p, "request.timeout.ms", 1),
            retry_backoff_ms=_int(p, "retry.backoff.ms", 0),
            metadata_max_age_ms=_int(p, "metadata.max.age.ms", 0),
            exclude_internal_topics=_bool(p, "exclude.internal.topics"),
        )
        if config.heartbeat_interval_ms >= config.session_timeout_ms:
            raise ConfigError("heartbeat.interval.ms must be lower than session.timeout.ms", "heartbeat.interval.ms")
        return config

    @property
    def reset_name(self) -> str:
        return {EARLIEST_TIME: "earliest", LATEST_TIME: "latest", None: "none"}[self.auto_offset_reset]


def _int(p: Mapping[str, str], key: str, minimum: int) -> int:
    try:
        value = int(p[key])
    except ValueError:
        raise ConfigError(f"Invalid value {p[key]!r} for configuration {key}: not an integer", key) from None
    if value < minimum:
        raise ConfigError(f"Invalid value {p[key]!r} for configuration {key}: must be at least {minimum}", key)
    return value


def _bool(p: Mapping[str, str], key: str) -> bool:
    raw = p[key].lower()
    if raw not in ("true", "false"):
        raise ConfigError(f"Invalid value {p[key]!r} for configuration {key}: expected true or false", key)
    return raw == "true"


def _assignors(raw: str) -> tuple[str, ...]:
    names = []
    for item in (i.strip() for i in raw.split(",")):
        if not item:
            continue
        name = _ASSIGNOR_CLASSES.get(item.rsplit(".", 1)[-1], item.lower())
        if name not in ASSIGNORS:
            raise ConfigError(f"Invalid value {item!r} for configuration partition.assignment.strategy: "
                              f"expected {' or '.join(ASSIGNORS)}", "partition.assignment.strategy")
        names.append(name)
    if not names:
        raise ConfigError("partition.assignment.strategy names no assignor", "partition.assignment.strategy")
    return tuple(dict.fromkeys(names))
