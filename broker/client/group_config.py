"""GroupConsumer settings under Kafka's consumer key names, checked once at construction.

Unknown keys are an error naming the key (a typo would otherwise silently keep a default);
keys of the Java client that mean nothing here (deserializer classes, JMX, socket buffers)
are accepted and ignored.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from broker.client.assignors import ASSIGNORS
from broker.client.security import CLIENT_SECURITY_KEYS, PLAINTEXT, SECURITY_KEY_NAMES, ClientSecurity
from broker.client.simple_consumer import EARLIEST_TIME, LATEST_TIME
from broker.configdef import ConfigDef, ConfigError, Importance, Key, OneOf, Range, Scope, Type, invalid_value

log = logging.getLogger(__name__)

#: auto.offset.reset values -> ListOffsets time (None: raise NoOffsetForPartitionError).
RESET_POLICIES: dict[str, int | None] = {
    "earliest": EARLIEST_TIME, "smallest": EARLIEST_TIME, "latest": LATEST_TIME, "largest": LATEST_TIME, "none": None,
}


def _k(name: str, type_: Type, default: Any, minimum: int | None = None, **kw: Any) -> Key:
    return Key(name, type_, default, Range(minimum) if minimum is not None else kw.pop("validator", None), **kw)


#: Kafka's consumer keys and defaults (those of the Java client).
CONSUMER_CONFIG = ConfigDef(
    Scope.CONSUMER,
    [
        _k("bootstrap.servers", Type.STRING, "", importance=Importance.HIGH, doc="`host:port,...` of some brokers (required)."),
        _k("group.id", Type.STRING, "", importance=Importance.HIGH, doc="The consumer group (required)."),
        _k("client.id", Type.STRING, "logbus-consumer", doc="The client id sent with every request."),
        _k("session.timeout.ms", Type.INT, 45000, 1, doc="A member silent this long leaves the group."),
        _k("heartbeat.interval.ms", Type.INT, 3000, 1, doc="How often the member heartbeats; below the session timeout."),
        _k("max.poll.interval.ms", Type.INT, 300000, 1, doc="The longest pause between polls before the member leaves."),
        _k("max.poll.records", Type.INT, 500, 1, doc="Records returned by one poll at most."),
        _k("auto.offset.reset", Type.STRING, "latest", convert=lambda v: RESET_POLICIES[v.lower()],
           validator=OneOf(tuple(RESET_POLICIES), ignore_case=True, reason="expected earliest, latest or none"),
           doc="Where a partition with no committed offset starts: `earliest`, `latest` or `none` (an error)."),
        _k("enable.auto.commit", Type.BOOLEAN, True, doc="Commit the consumed offsets every `auto.commit.interval.ms`."),
        _k("auto.commit.interval.ms", Type.INT, 5000, 0, doc="How often offsets are committed automatically."),
        _k("fetch.max.bytes", Type.INT, 52428800, 1, doc="The most bytes one Fetch returns."),
        _k("max.partition.fetch.bytes", Type.INT, 1048576, 1, doc="The most bytes one Fetch returns per partition."),
        _k("fetch.max.wait.ms", Type.INT, 500, 0, doc="How long a Fetch waits at the broker for `fetch.min.bytes`."),
        _k("fetch.min.bytes", Type.INT, 1, 0, doc="The fewest bytes a Fetch waits for."),
        _k("partition.assignment.strategy", Type.LIST, ["range", "roundrobin"],
           doc="Assignors in order of preference: `range`, `roundrobin` (or the Java class names)."),
        _k("request.timeout.ms", Type.INT, 30000, 1, doc="How long a request waits for its answer."),
        _k("retry.backoff.ms", Type.INT, 100, 0, doc="The pause before a retry."),
        _k("metadata.max.age.ms", Type.INT, 300000, 0, doc="Metadata is refreshed at least this often."),
        _k("exclude.internal.topics", Type.BOOLEAN, True, doc="Subscriptions by pattern skip internal topics."),
        *CLIENT_SECURITY_KEYS,
    ],
    aliases={
        "metadata.broker.list": "bootstrap.servers",
        "fetch.wait.max.ms": "fetch.max.wait.ms",
        "auto.commit.enable": "enable.auto.commit",
        "topic.metadata.refresh.interval.ms": "metadata.max.age.ms",
    },
    ignored={
        "key.deserializer", "value.deserializer", "interceptor.classes", "metric.reporters", "metrics.num.samples",
        "metrics.sample.window.ms", "metrics.recording.level", "receive.buffer.bytes", "send.buffer.bytes",
        "reconnect.backoff.ms", "reconnect.backoff.max.ms", "connections.max.idle.ms", "client.dns.lookup",
        "check.crcs", "default.api.timeout.ms", "allow.auto.create.topics", "client.rack",
        "isolation.level",
    },
)

#: Every key's default, as the table holds it.
DEFAULTS: dict[str, Any] = {key.name: key.default for key in CONSUMER_CONFIG}
#: Other names for the same settings (librdkafka's and Kafka 0.8's).
ALIASES: dict[str, str] = CONSUMER_CONFIG.aliases
#: Java client keys with no meaning for this client: accepted and ignored.
IGNORED = CONSUMER_CONFIG.ignored

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
    security: ClientSecurity = PLAINTEXT  # TLS and SASL (broker/client/security.py)

    @classmethod
    def from_props(cls, props: Mapping[str, Any] | None = None, **kwargs: Any) -> GroupConsumerConfig:
        """Kafka-named keys (kwargs may spell them with underscores); ConfigError names a bad key."""
        merged = {str(k).strip(): v for k, v in (props or {}).items()}
        merged.update({k.replace("_", "."): v for k, v in kwargs.items()})
        unknown = CONSUMER_CONFIG.unknown(merged)
        if unknown:
            raise ConfigError(f"Unknown consumer configuration {unknown[0]!r}", unknown[0])
        given = {CONSUMER_CONFIG.canonical(k): v for k, v in merged.items() if CONSUMER_CONFIG.canonical(k) in CONSUMER_CONFIG}
        v = CONSUMER_CONFIG.parse(given)
        for key in ("bootstrap.servers", "group.id"):
            if not v[key]:
                raise ConfigError(f"Missing required configuration {key}", key)
        config = cls(
            **{CONSUMER_CONFIG[k].attr: value for k, value in v.items()
               if k != "partition.assignment.strategy" and k not in SECURITY_KEY_NAMES},
            security=ClientSecurity.from_props(given),
            assignors=_assignors(v["partition.assignment.strategy"]),
        )
        if not config.client_id:
            config = dataclasses.replace(config, client_id="logbus-consumer")
        if config.heartbeat_interval_ms >= config.session_timeout_ms:
            raise ConfigError("heartbeat.interval.ms must be lower than session.timeout.ms", "heartbeat.interval.ms")
        return config

    @property
    def reset_name(self) -> str:
        return {EARLIEST_TIME: "earliest", LATEST_TIME: "latest", None: "none"}[self.auto_offset_reset]


def _assignors(items: list[str]) -> tuple[str, ...]:
    names = []
    for item in items:
        name = _ASSIGNOR_CLASSES.get(item.rsplit(".", 1)[-1], item.lower())
        if name not in ASSIGNORS:
            raise invalid_value("partition.assignment.strategy", item, f"expected {' or '.join(ASSIGNORS)}")
        names.append(name)
    if not names:
        raise ConfigError("partition.assignment.strategy names no assignor", "partition.assignment.strategy")
    return tuple(dict.fromkeys(names))
