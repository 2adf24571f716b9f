"""The producer's settings: Kafka's producer keys as one table of the configuration mechanism.

Older names (Kafka 0.8's ``metadata.broker.list``, ``request.required.acks``...) are aliases;
keys of the Java client with no use here are accepted quietly; other unknown keys are logged
and ignored, as Kafka's producer does.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from broker.client.security import CLIENT_SECURITY_KEYS, PLAINTEXT, ClientSecurity
from broker.configdef import INT_MAX, ConfigDef, ConfigError, Importance, Key, OneOf, Range, Scope, Type
from broker.protocol.compression import CODEC_IDS, CODEC_NAMES

log = logging.getLogger(__name__)

__all__ = ["PRODUCER_CONFIG", "DEFAULTS", "ALIASES", "IGNORED", "ProducerConfig", "normalise_config"]

_ACKS = {"all": -1, "-1": -1, "0": 0, "1": 1}
_CODECS = {**CODEC_IDS, **{str(cid): cid for cid in CODEC_NAMES}}


def _k(name: str, type_: Type, default: Any, minimum: int | None = None, **kw: Any) -> Key:
    return Key(name, type_, default, Range(minimum) if minimum is not None else kw.pop("validator", None), **kw)


#: Kafka's key names and defaults (linger.ms 5 as in Kafka 4).
PRODUCER_CONFIG = ConfigDef(
    Scope.PRODUCER,
    [
        _k("bootstrap.servers", Type.STRING, "", importance=Importance.HIGH,
           doc="`host:port,...` of some brokers; or set `zookeeper.connect`."),
        _k("zookeeper.connect", Type.STRING, "", doc="Find the brokers through ZooKeeper instead (Kafka 0.8)."),
        _k("client.id", Type.STRING, "logbus-producer", doc="The client id sent with every request."),
        _k("acks", Type.STRING, "all", importance=Importance.HIGH, convert=lambda v: _ACKS[v.lower()],
           validator=OneOf(tuple(_ACKS), ignore_case=True, reason="expected all, -1, 0 or 1"),
           doc="`all` (-1): the whole ISR has the record; `1`: the leader; `0`: no answer."),
        _k("compression.type", Type.STRING, "none", convert=lambda v: _CODECS[v.lower()],
           validator=OneOf(tuple(_CODECS), ignore_case=True, reason="expected one of none, gzip, snappy, lz4, zstd"),
           doc="The codec of every batch: `none`, `gzip`, `snappy`, `lz4` or `zstd`."),
        _k("batch.size", Type.INT, 16384, 1, doc="Bytes per partition batch."),
        _k("batch.num.messages", Type.INT, 0, 0,
           doc="Records per batch (Kafka 0.8); when set and `batch.size` is not, batches grow to `max.request.size`."),
        _k("linger.ms", Type.DURATION, 5, 0, doc="How long a batch waits for more records."),
        _k("buffer.memory", Type.LONG, 33554432, 1, doc="Bytes buffered before `send` blocks."),
        _k("max.block.ms", Type.DURATION, 60000, 0, doc="How long `send` blocks for buffer space or metadata."),
        _k("max.request.size", Type.INT, 1048576, 1, doc="The largest request (and record) sent."),
        _k("retries", Type.INT, INT_MAX, 0, doc="How often a failed batch is retried."),
        _k("retry.backoff.ms", Type.DURATION, 100, 0, doc="The pause before a retry."),
        _k("request.timeout.ms", Type.INT, 30000, 1, doc="How long a request waits for its answer."),
        _k("delivery.timeout.ms", Type.INT, 120000, 1, doc="How long a record may take, retries included."),
        _k("metadata.max.age.ms", Type.DURATION, 300000, 0, doc="Metadata is refreshed at least this often."),
        _k("max.in.flight.requests.per.connection", Type.INT, 5, 1, doc="Unanswered Produce requests per broker."),
        _k("enable.idempotence", Type.LENIENT_BOOLEAN, None,
           doc="Producer id and sequence numbers; when unset, on unless the settings conflict (acks, in-flight, retries)."),
        _k("partitioner.class", Type.CLASS, None, doc="A partitioner name or `module.Class`; when unset, Kafka's default."),
        _k("producer.type", Type.STRING, "async", validator=OneOf(("sync", "async"), ignore_case=True,
                                                                    reason="expected sync or async"),
           doc="`sync` waits in `send` for the acknowledgement (Kafka 0.8)."),
        _k("allow.auto.create.topics", Type.LENIENT_BOOLEAN, True, doc="Metadata requests may create the topic."),
        _k("zookeeper.session.timeout.ms", Type.INT, 18000, 1, doc="With `zookeeper.connect`: the session timeout."),
        _k("zookeeper.connection.timeout.ms", Type.INT, None,
           doc="With `zookeeper.connect`: the connection timeout; when unset, `max.block.ms` up to 30 s."),
        *CLIENT_SECURITY_KEYS,
        _k("send.buffer.bytes", Type.INT, 131072, importance=Importance.LOW, doc="Accepted, not used."),
    ],
    aliases={
        "metadata.broker.list": "bootstrap.servers",
        "request.required.acks": "acks",
        "compression.codec": "compression.type",
        "queue.buffering.max.ms": "linger.ms",
        "message.send.max.retries": "retries",
        "max.in.flight": "max.in.flight.requests.per.connection",
        "metadata.max.wait.ms": "max.block.ms",
        "metadata.fetch.timeout.ms": "max.block.ms",
        "queue.enqueue.timeout.ms": "max.block.ms",
        "zk.connect": "zookeeper.connect",
    },
    ignored={
        "key.serializer", "value.serializer", "serializer.class", "key.serializer.class",
        "receive.buffer.bytes", "connections.max.idle.ms", "metric.reporters", "metrics.num.samples",
        "metrics.sample.window.ms", "reconnect.backoff.ms", "reconnect.backoff.max.ms",
        "interceptor.classes", "transaction.timeout.ms", "client.dns.lookup", "topic.metadata.refresh.interval.ms",
        "queue.buffering.max.messages", "linger.bytes",
    },
)

#: Every key's default, as the table holds it.
DEFAULTS: dict[str, Any] = {key.name: key.default for key in PRODUCER_CONFIG}
#: Older (0.8) and short names -> Kafka's current name.
ALIASES: dict[str, str] = PRODUCER_CONFIG.aliases
#: Known keys that a Python producer has no use for (Java serializers, JMX, ...): accepted quietly.
IGNORED = PRODUCER_CONFIG.ignored


def normalise_config(config: Mapping[str, Any] | None = None, **kwargs: Any) -> dict[str, str]:
    """``config`` and keyword overrides (``batch_size=...``) as Kafka-named strings, aliases resolved.

    Unknown keys are logged (and kept, for a custom partitioner); booleans become ``true``/``false``."""
    merged: dict[str, Any] = dict(config or {})
    merged.update({k.replace("_", "."): v for k, v in kwargs.items()})
    result: dict[str, str] = {}
    for key, value in merged.items():
        name = PRODUCER_CONFIG.canonical(key)
        if name not in PRODUCER_CONFIG and name not in IGNORED:
            log.warning("unknown producer configuration %s=%s (ignored)", key.strip(), value)
        if value is None:
            continue
        result[name] = ("true" if value else "false") if isinstance(value, bool) else str(value).strip()
    return result


@dataclass(frozen=True)
class ProducerConfig:
    """The producer's settings, typed and checked; times in seconds. Build with ``from_props``."""

    props: dict[str, str]  # the given keys, normalised (the partitioner is configured with them)
    client_id: str
    bootstrap_servers: str
    zookeeper_connect: str
    acks: int
    compression: int
    batch_size: int
    batch_count_limit: int
    linger: float
    buffer_memory: int
    max_block: float
    max_request_size: int
    retries: int
    retry_backoff: float
    request_timeout: float
    delivery_timeout: float
    max_in_flight: int
    sync: bool
    idempotent: bool
    partitioner_class: str | None
    metadata_max_age_ms: int
    allow_auto_create_topics: bool
    zookeeper_session_timeout_ms: int
    zookeeper_connection_timeout_ms: int
    security: ClientSecurity = PLAINTEXT  # TLS and SASL (broker/client/security.py)

    @classmethod
    def from_props(cls, config: Mapping[str, Any] | None = None, **kwargs: Any) -> ProducerConfig:
        """Kafka-named keys (kwargs may spell them with underscores); ConfigError names a bad key."""
        given = normalise_config(config, **kwargs)
        v = PRODUCER_CONFIG.parse({k: val for k, val in given.items() if k in PRODUCER_CONFIG and not _unset(k, val)})
        batch_size, count_limit = v["batch.size"], v["batch.num.messages"]
        if count_limit and "batch.size" not in given:
            batch_size = max(batch_size, v["max.request.size"] - 1024)
        acks, max_in_flight = v["acks"], v["max.in.flight.requests.per.connection"]
        idempotent = v["enable.idempotence"]
        if idempotent is None:  # Kafka's default: idempotent unless the settings conflict with it
            idempotent = acks == -1 and max_in_flight <= 5 and v["retries"] > 0
        elif idempotent and acks != -1:
            raise ConfigError("enable.idempotence=true needs acks=all", "enable.idempotence")
        elif idempotent and max_in_flight > 5:
            raise ConfigError("enable.idempotence=true needs max.in.flight.requests.per.connection <= 5", "enable.idempotence")
        if not v["bootstrap.servers"] and not v["zookeeper.connect"]:
            raise ConfigError("set bootstrap.servers (or zookeeper.connect) to find the brokers", "bootstrap.servers")
        max_block = v["max.block.ms"] / 1000.0
        zk_timeout = v["zookeeper.connection.timeout.ms"]
        return cls(
            security=ClientSecurity.from_props(given),
            props={**{k.name: _text(k.default) for k in PRODUCER_CONFIG}, **given},
            client_id=v["client.id"],
            bootstrap_servers=v["bootstrap.servers"],
            zookeeper_connect=v["zookeeper.connect"],
            acks=acks,
            compression=v["compression.type"],
            batch_size=batch_size,
            batch_count_limit=count_limit or (1 << 31),
            linger=v["linger.ms"] / 1000.0,
            buffer_memory=v["buffer.memory"],
            max_block=max_block,
            max_request_size=v["max.request.size"],
            retries=v["retries"],
            retry_backoff=v["retry.backoff.ms"] / 1000.0,
            request_timeout=v["request.timeout.ms"] / 1000.0,
            delivery_timeout=v["delivery.timeout.ms"] / 1000.0,
            max_in_flight=max_in_flight,
            sync=v["producer.type"].lower() == "sync",
            idempotent=idempotent,
            partitioner_class=v["partitioner.class"] or None,
            metadata_max_age_ms=v["metadata.max.age.ms"],
            allow_auto_create_topics=v["allow.auto.create.topics"],
            zookeeper_session_timeout_ms=v["zookeeper.session.timeout.ms"],
            zookeeper_connection_timeout_ms=zk_timeout if zk_timeout is not None else min(int(max_block * 1000), 30000) or 1,
        )


def _unset(name: str, value: str) -> bool:
    """An empty value of a key whose default is empty or unset means: the default."""
    return value == "" and PRODUCER_CONFIG.default(name) in (None, "")


def _text(value: Any) -> str:
    """A default as the string a .properties file would hold ('' for unset)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
