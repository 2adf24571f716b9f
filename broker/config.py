"""Java-style .properties files and the typed broker configuration.

Key names and defaults are Apache Kafka's, so a Kafka user's server.properties carries over.
The raw dict stays available as ``BrokerConfig.props`` for parts (storage's LogConfig) that
read their own keys.
"""

from __future__ import annotations

import dataclasses
import os
import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from broker.configdef import (
    LONG_MAX,
    NO_DEFAULT,
    ConfigDef,
    ConfigError,
    Importance,
    Key,
    Range,
    Scope,
    Type,
    parse_typed,
)
from broker.security.authorizer import check_authorizer_class_name
from broker.security.listener_config import (
    SECURITY_KEYS,
    InterBrokerSecurity,
    ListenerSecurity,
    inter_broker_security,
    listener_security,
)
from broker.storage.config import PRODUCER_ID_EXPIRATION, TOPIC_CONFIG, LogConfig

__all__ = [
    "ConfigError",
    "Listener",
    "BrokerConfig",
    "load_properties",
    "parse_properties",
    "parse_overrides",
    "parse_listeners",
    "load_broker_config",
    "load_with_overrides",
    "KNOWN_KEYS",
    "BROKER_CONFIG",
]


# --------------------------------------------------------------------------- .properties


_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_BLANK = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def load_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a Java .properties file (UTF-8) into a dict; later keys win."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ConfigError(f"cannot read config file {os.fspath(path)}: {e.strerror or e}") from None
    return parse_properties(text, source=os.fspath(path))


def parse_properties(text: str, source: str = "<string>") -> dict[str, str]:
    """Parse .properties text: # and ! comments, = : or blank separators, \\ continuations and escapes.

    One deliberate difference from java.util.Properties: unescaped trailing blanks of a value
    are dropped (Kafka trims values anyway; write ``\\ `` to keep one).
    """
    props: dict[str, str] = {}
    lines = _LINE_BREAK.split(text)
    i = 0
    while i < len(lines):
        lineno = i + 1
        logical = lines[i].lstrip(_BLANK)
        i += 1
        if not logical or logical[0] in "#!":
            continue
        while _ends_with_continuation(logical):
            logical = logical[:-1]
            if i >= len(lines):
                break
            logical += lines[i].lstrip(_BLANK)
            i += 1
        key, value = _split_entry(logical, f"{source}:{lineno}")
        props[key] = value
    return props


def _ends_with_continuation(line: str) -> bool:
    """True when the line ends in an odd number of backslashes."""
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _split_entry(line: str, where: str) -> tuple[str, str]:
    """Split a logical line at the first unescaped '=', ':' or blank into (key, value)."""
    n = len(line)
    j = 0
    while j < n:
        c = line[j]
        if c == "\\":
            j += 2
            continue
        if c in "=:" or c in _BLANK:
            break
        j += 1
    j = min(j, n)
    k = j
    while k < n and line[k] in _BLANK:
        k += 1
    if k < n and line[k] in "=:":
        k += 1
    while k < n and line[k] in _BLANK:
        k += 1
    key, _ = _unescape(line[:j], where)
    value, keep = _unescape(line[k:], where)
    value = value[:keep] + value[keep:].rstrip(_BLANK)
    return key.strip(), value


def _unescape(s: str, where: str) -> tuple[str, int]:
    """Resolve backslash escapes; also return the length up to the last escaped character."""
    out: list[str] = []
    keep = 0
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i >= n:
            break
        c = s[i]
        i += 1
        if c == "u":
            digits = s[i : i + 4]
            if len(digits) < 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                bad = "\\u" + digits
                raise ConfigError(f"{where}: malformed \\uXXXX escape {bad!r}")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
        keep = len(out)
    text = "".join(out)
    if any("\ud800" <= ch <= "\udfff" for ch in text):
        # \uD83D\uDE00 style pairs: join UTF-16 surrogates into one code point
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        keep = len(text) - (len("".join(out)) - keep)
    return text, keep


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    """Turn command-line ``key=value`` strings (``--override``) into a dict."""
    result: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {item!r} is not of the form key=value")
        result[key.strip()] = value.strip()
    return result


def load_with_overrides(path: str | os.PathLike[str] | None, overrides: Iterable[str]) -> dict[str, str]:
    """A .properties file (none: empty) with command-line ``key=value`` overrides applied over it."""
    props = load_properties(path) if path else {}
    props.update(parse_overrides(overrides))
    return props


# --------------------------------------------------------------------------- listeners


class Listener(NamedTuple):
    """One endpoint ``NAME://host:port``; NAME is the listener name (PLAINTEXT by default)."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


_LISTENER = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)://(\[[0-9A-Fa-f:.]+\]|[^:\[\]/]*):(\d+)$")
_WILDCARDS = ("0.0.0.0", "::")


def parse_listeners(value: str, key: str = "listeners") -> list[Listener]:
    """Parse ``NAME://host:port[,...]``; an empty host means every interface (0.0.0.0)."""
    result: list[Listener] = []
    for part in (p.strip() for p in value.split(",")):
        if not part:
            continue
        m = _LISTENER.match(part)
        if not m:
            raise ConfigError(f"Invalid value {part!r} for configuration {key}: expected NAME://host:port", key)
        name, host, port = m.group(1).upper(), m.group(2).strip("[]") or "0.0.0.0", int(m.group(3))
        if port > 65535:
            raise ConfigError(f"Invalid value {part!r} for configuration {key}: port out of range", key)
        if any(ln.name == name for ln in result):
            raise ConfigError(f"Invalid value {value!r} for configuration {key}: listener {name} appears twice", key)
        result.append(Listener(name, host, port))
    if not result:
        raise ConfigError(f"Invalid value {value!r} for configuration {key}: no listener given", key)
    return result


def default_advertised_host() -> str:
    """The host advertised for a wildcard (0.0.0.0) listener.

    The machine's hostname when it resolves, else 127.0.0.1. Set advertised.listeners when
    clients reach the broker under another name (as with Kafka).
    """
    name = socket.gethostname()
    try:
        socket.gethostbyname(name)
        return name
    except OSError:
        return "127.0.0.1"


# --------------------------------------------------------------------------- typed keys


def _topic_default(topic_key: str) -> Any:
    """The broker-wide default of a log key is its topic key's default: declared once, in storage."""
    return TOPIC_CONFIG.default(topic_key)


def _k(name: str, type_: Type, default: Any, minimum: int | None = None, validator: Any = None, **kw: Any) -> Key:
    return Key(name, type_, default, validator or (Range(minimum) if minimum is not None else None), **kw)


_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_UNUSED = {"importance": Importance.LOW, "doc": "Accepted for compatibility with Kafka's sample files; not used."}

#: The broker's keys (server.properties). Defaults and types are Kafka's.
BROKER_CONFIG = ConfigDef(
    Scope.BROKER,
    [
        _k("broker.id", Type.INT, NO_DEFAULT, 0, importance=Importance.HIGH),
        _k("broker.rack", Type.STRING, None),
        _k("zookeeper.connect", Type.STRING, NO_DEFAULT, importance=Importance.HIGH),
        _k("zookeeper.session.timeout.ms", Type.INT, 18000, 1),
        _k("zookeeper.connection.timeout.ms", Type.INT, None, 1),  # None: the session timeout
        _k("listener.security.protocol.map", Type.MAP, {p: p for p in _PROTOCOLS},
           convert=lambda m: {k.upper(): v.upper() for k, v in m.items()}, type_reason="expected NAME:PROTOCOL pairs"),
        _k("inter.broker.listener.name", Type.STRING, None),
        _k("num.partitions", Type.INT, 1, 1),
        _k("auto.create.topics.enable", Type.BOOLEAN, True),
        _k("delete.topic.enable", Type.BOOLEAN, True),
        _k("default.replication.factor", Type.INT, 1, 1),
        _k("max.partitions.per.request", Type.INT, 10000, 1),
        _k("max.broker.partition.count", Type.INT, 2147483647, 1),
        _k("message.max.bytes", Type.INT, _topic_default("max.message.bytes"), 0),
        _k("socket.request.max.bytes", Type.INT, 104857600, 1),
        _k("socket.send.buffer.bytes", Type.INT, 102400),
        _k("socket.receive.buffer.bytes", Type.INT, 102400),
        _k("compression.type", Type.STRING, _topic_default("compression.type"),
           validator=TOPIC_CONFIG["compression.type"].validator),
        _k("log.segment.bytes", Type.INT, _topic_default("segment.bytes"), 14),
        _k("log.roll.hours", Type.INT, 168, 1),
        _k("log.roll.ms", Type.DURATION, None),
        _k("log.retention.hours", Type.INT, 168),
        _k("log.retention.minutes", Type.INT, None),
        _k("log.retention.ms", Type.DURATION, None),
        _k("log.retention.bytes", Type.LONG, _topic_default("retention.bytes")),
        _k("log.retention.check.interval.ms", Type.DURATION, 300000, 1),
        _k("log.cleanup.policy", Type.LIST, TOPIC_CONFIG["cleanup.policy"].default,
           validator=TOPIC_CONFIG["cleanup.policy"].validator),
        _k("log.cleaner.enable", Type.BOOLEAN, True, doc="Runs the log cleaner (compaction of cleanup.policy=compact topics)"),
        _k("log.cleaner.threads", Type.INT, 1, 0, doc="Threads cleaning logs at once"),
        _k("log.cleaner.dedupe.buffer.size", Type.LONG, 128 * 1024 * 1024, 1024,
           doc="Memory for the key maps of all cleaner threads (24 bytes per key)"),
        _k("log.cleaner.backoff.ms", Type.DURATION, 15000, 0, doc="Sleep between cleaner checks when no log needs cleaning"),
        _k("log.cleaner.delete.retention.ms", Type.DURATION, _topic_default("delete.retention.ms"), 0),
        _k("log.cleaner.min.compaction.lag.ms", Type.DURATION, _topic_default("min.compaction.lag.ms"), 0),
        _k("log.cleaner.max.compaction.lag.ms", Type.DURATION, _topic_default("max.compaction.lag.ms"), 1),
        _k("log.cleaner.min.cleanable.ratio", Type.DOUBLE, _topic_default("min.cleanable.dirty.ratio"),
           validator=TOPIC_CONFIG["min.cleanable.dirty.ratio"].validator),
        _k("log.flush.interval.messages", Type.LONG, _topic_default("flush.messages"), 1),
        _k("log.flush.interval.ms", Type.DURATION, None),  # None: log.flush.scheduler.interval.ms
        _k("log.flush.scheduler.interval.ms", Type.DURATION, LONG_MAX),
        _k("log.flush.offset.checkpoint.interval.ms", Type.INT, 60000, 0),
        _k("log.index.interval.bytes", Type.INT, _topic_default("index.interval.bytes"), 0),
        _k("log.index.size.max.bytes", Type.INT, _topic_default("segment.index.bytes"), 4),
        _k("log.message.timestamp.type", Type.STRING, _topic_default("message.timestamp.type"),
           validator=TOPIC_CONFIG["message.timestamp.type"].validator),
        _k("log.message.timestamp.difference.max.ms", Type.LONG, None, 0,
           doc="The default of message.timestamp.difference.max.ms (unset: no bound)"),
        _k("log.message.timestamp.before.max.ms", Type.LONG, None, 0,
           doc="The default of message.timestamp.before.max.ms (unset: the difference bound)"),
        _k("log.message.timestamp.after.max.ms", Type.LONG, None, 0,
           doc="The default of message.timestamp.after.max.ms (unset: the difference bound)"),
        _k("num.recovery.threads.per.data.dir", Type.INT, 1, 1),
        _k("replica.lag.time.max.ms", Type.DURATION, 30000),
        _k("replica.fetch.max.bytes", Type.INT, 1048576, 0),
        _k("replica.fetch.min.bytes", Type.INT, 1),
        _k("replica.fetch.wait.max.ms", Type.INT, 500),
        _k("leader.replication.throttled.rate", Type.LONG, LONG_MAX, 0,
           doc="Bytes/s a leader sends followers of the replicas topics name in leader.replication.throttled.replicas"),
        _k("follower.replication.throttled.rate", Type.LONG, LONG_MAX, 0,
           doc="Bytes/s a follower fetches of the replicas topics name in follower.replication.throttled.replicas"),
        _k("replica.fetch.backoff.ms", Type.INT, 1000, 0),
        _k("replica.socket.timeout.ms", Type.INT, 30000),
        _k("num.replica.fetchers", Type.INT, 1),
        _k("max.incremental.fetch.session.cache.slots", Type.INT, 1000, 0,
           doc="Fetch sessions (KIP-227) the broker keeps; 0: every fetch is a full one"),
        _k("replica.high.watermark.checkpoint.interval.ms", Type.DURATION, 5000),
        _k("min.insync.replicas", Type.INT, _topic_default("min.insync.replicas"), 1),
        _k("unclean.leader.election.enable", Type.BOOLEAN, _topic_default("unclean.leader.election.enable")),
        _k("auto.leader.rebalance.enable", Type.BOOLEAN, True),
        _k("leader.imbalance.check.interval.seconds", Type.LONG, 300, 1),
        _k("controlled.shutdown.enable", Type.BOOLEAN, True),
        _k("controller.socket.timeout.ms", Type.INT, 30000),
        _k("group.initial.rebalance.delay.ms", Type.INT, 3000),
        _k("group.min.session.timeout.ms", Type.INT, 6000),
        _k("group.max.session.timeout.ms", Type.INT, 1800000),
        _k("offsets.retention.minutes", Type.INT, 10080, 1),
        _k("metrics.port", Type.INT, 0, 0, doc="Prometheus text metrics over HTTP; 0: off"),
        _k("authorizer.class.name", Type.STRING, "", validator=check_authorizer_class_name,
           doc="The ACL authorizer (ZooKeeper-backed; Kafka's AclAuthorizer names accepted); empty: no authorization"),
        _k("super.users", Type.STRING, None, doc="Principals allowed everything, separated by ';' (User:admin;User:broker)"),
        _k("allow.everyone.if.no.acl.found", Type.BOOLEAN, False,
           doc="Whether a resource without any ACL is open to everyone (with an authorizer)"),
        dataclasses.replace(PRODUCER_ID_EXPIRATION, doc="idle producers' idempotence state is dropped"),
        *SECURITY_KEYS,
        _k("num.network.threads", Type.INT, 3, 1, **_UNUSED),
        _k("num.io.threads", Type.INT, 8, 1, **_UNUSED),
        _k("offsets.topic.replication.factor", Type.INT, 3, 1, **_UNUSED),
        _k("transaction.state.log.replication.factor", Type.INT, 3, 1, **_UNUSED),
        _k("transaction.state.log.min.isr", Type.INT, 2, 1, **_UNUSED),
    ],
)

#: Kafka key -> its Key (type, default, validator). The attribute is the key with '.' -> '_'.
KNOWN_KEYS: dict[str, Key] = BROKER_CONFIG.keys

#: Keys read by hand in from_properties rather than through the table.
_SPECIAL_KEYS = frozenset(
    {"listeners", "advertised.listeners", "host.name", "port", "advertised.host.name", "advertised.port",
     "log.dirs", "log.dir"}
)
_PORT = Key("port", Type.INT, 9092, Range(0))


def _attr(key: str) -> str:
    return key.replace(".", "_")


# --------------------------------------------------------------------------- BrokerConfig


@dataclass(frozen=True)
class BrokerConfig:
    """The broker's settings, typed, with Kafka's defaults. Build it with ``from_properties``."""

    broker_id: int
    listeners: list[Listener]
    advertised_listeners: list[Listener]
    log_dirs: list[str]
    broker_rack: str | None
    zookeeper_connect: str
    zookeeper_session_timeout_ms: int
    zookeeper_connection_timeout_ms: int
    listener_security_protocol_map: dict[str, str]
    inter_broker_listener_name: str | None
    num_partitions: int
    auto_create_topics_enable: bool
    delete_topic_enable: bool
    default_replication_factor: int
    max_partitions_per_request: int
    max_broker_partition_count: int
    message_max_bytes: int
    socket_request_max_bytes: int
    socket_send_buffer_bytes: int
    socket_receive_buffer_bytes: int
    compression_type: str
    log_segment_bytes: int
    log_roll_hours: int
    log_roll_ms: int | None
    log_retention_hours: int
    log_retention_minutes: int | None
    log_retention_ms: int | None
    log_retention_bytes: int
    log_retention_check_interval_ms: int
    log_cleaner_enable: bool
    log_cleaner_threads: int
    log_cleaner_dedupe_buffer_size: int
    log_cleaner_backoff_ms: int
    log_cleaner_delete_retention_ms: int
    log_cleaner_min_compaction_lag_ms: int
    log_cleaner_max_compaction_lag_ms: int
    log_cleaner_min_cleanable_ratio: float
    log_cleanup_policy: list[str]
    log_flush_interval_messages: int
    log_flush_interval_ms: int | None
    log_flush_scheduler_interval_ms: int
    log_flush_offset_checkpoint_interval_ms: int
    log_index_interval_bytes: int
    log_index_size_max_bytes: int
    log_message_timestamp_type: str
    log_message_timestamp_difference_max_ms: int | None
    log_message_timestamp_before_max_ms: int | None
    log_message_timestamp_after_max_ms: int | None
    num_recovery_threads_per_data_dir: int
    replica_lag_time_max_ms: int
    replica_fetch_max_bytes: int
    replica_fetch_min_bytes: int
    replica_fetch_wait_max_ms: int
    leader_replication_throttled_rate: int
    follower_replication_throttled_rate: int
    replica_fetch_backoff_ms: int
    replica_socket_timeout_ms: int
    num_replica_fetchers: int
    max_incremental_fetch_session_cache_slots: int
    replica_high_watermark_checkpoint_interval_ms: int
    min_insync_replicas: int
    unclean_leader_election_enable: bool
    auto_leader_rebalance_enable: bool
    leader_imbalance_check_interval_seconds: int
    controlled_shutdown_enable: bool
    controller_socket_timeout_ms: int
    group_initial_rebalance_delay_ms: int
    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int
    offsets_retention_minutes: int
    metrics_port: int
    authorizer_class_name: str
    super_users: str | None
    allow_everyone_if_no_acl_found: bool
    producer_id_expiration_ms: int
    security_inter_broker_protocol: str
    sasl_mechanism_inter_broker_protocol: str
    sasl_enabled_mechanisms: list[str]
    sasl_server_max_receive_size: int
    ssl_keystore_type: str
    ssl_keystore_location: str | None
    ssl_key_password: str | None
    ssl_truststore_type: str
    ssl_truststore_location: str | None
    ssl_client_auth: str
    ssl_enabled_protocols: list[str]
    ssl_cipher_suites: list[str]
    ssl_endpoint_identification_algorithm: str
    num_network_threads: int
    num_io_threads: int
    offsets_topic_replication_factor: int
    transaction_state_log_replication_factor: int
    transaction_state_log_min_isr: int
    props: dict[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> BrokerConfig:
        """Validate and type ``props`` (as read by load_properties, overrides merged in)."""
        props = dict(props)
        values = {_attr(k): v for k, v in BROKER_CONFIG.parse(props).items()}
        if values["zookeeper_connection_timeout_ms"] is None:
            values["zookeeper_connection_timeout_ms"] = values["zookeeper_session_timeout_ms"]
        if not values["zookeeper_connect"].strip():
            raise ConfigError("Invalid value '' for configuration zookeeper.connect: empty", "zookeeper.connect")
        values["zookeeper_connect"] = values["zookeeper_connect"].strip()
        values["listeners"], values["advertised_listeners"] = _listeners_from(props)
        if values["inter_broker_listener_name"] is not None:
            values["inter_broker_listener_name"] = values["inter_broker_listener_name"].upper()
            if "security.inter.broker.protocol" in props:
                raise ConfigError("Only one of inter.broker.listener.name and security.inter.broker.protocol "
                                  "should be set.", "inter.broker.listener.name")
        _check_listener_names(values["listeners"], values["listener_security_protocol_map"])
        for ln in values["listeners"]:
            listener_security(props, ln.name, values["listener_security_protocol_map"][ln.name])
        _check_inter_broker(values, props)
        values["log_dirs"] = _log_dirs_from(props)
        LogConfig.from_broker(props)  # what storage would refuse at start is refused here, in one line
        config = cls(props=props, **values)
        config.inter_broker_security()  # refused here, in one line, rather than when a follower connects
        return config

    # -- derived settings, resolved the way Kafka resolves them

    @property
    def log_retention_time_ms(self) -> int:
        """log.retention.ms, else .minutes, else .hours; -1 means keep forever."""
        if self.log_retention_ms is not None:
            return self.log_retention_ms
        if self.log_retention_minutes is not None:
            return self.log_retention_minutes * 60_000
        return self.log_retention_hours * 3_600_000

    @property
    def log_roll_time_ms(self) -> int:
        """log.roll.ms, else log.roll.hours."""
        return self.log_roll_ms if self.log_roll_ms is not None else self.log_roll_hours * 3_600_000

    @property
    def log_flush_interval_time_ms(self) -> int:
        """log.flush.interval.ms, else log.flush.scheduler.interval.ms (Kafka's fallback)."""
        if self.log_flush_interval_ms is not None:
            return self.log_flush_interval_ms
        return self.log_flush_scheduler_interval_ms

    def unknown_keys(self) -> list[str]:
        """Keys in props that logbus does not know; the server logs them as Kafka does."""
        return sorted(k for k in self.props
                      if k not in KNOWN_KEYS and k not in _SPECIAL_KEYS and not k.startswith("listener.name."))

    def security(self, listener: str) -> ListenerSecurity:
        """What listener ``listener`` asks of clients (TLS, SASL); checked at start-up."""
        return listener_security(self.props, listener, self.listener_security_protocol_map.get(listener, listener))

    def inter_broker_security(self) -> InterBrokerSecurity:
        """How this broker connects to the others (TLS, its own SASL login)."""
        name = self.inter_broker_listener
        return inter_broker_security(self.props, name, self.listener_security_protocol_map.get(name, name),
                                     self.sasl_mechanism_inter_broker_protocol)

    @property
    def inter_broker_listener(self) -> str:
        """The listener brokers reach each other on: inter.broker.listener.name, else the
        listener named after security.inter.broker.protocol (Kafka's rule); with neither set, the
        PLAINTEXT listener, else the first one."""
        if self.inter_broker_listener_name or "security.inter.broker.protocol" in self.props:
            return (self.inter_broker_listener_name or self.security_inter_broker_protocol).upper()
        names = [ln.name for ln in self.advertised_listeners]
        return "PLAINTEXT" if "PLAINTEXT" in names else names[0]

    def listener(self, name: str = "PLAINTEXT") -> Listener:
        """The bound listener called ``name``."""
        for ln in self.listeners:
            if ln.name == name:
                return ln
        raise KeyError(name)


def _listeners_from(props: Mapping[str, str]) -> tuple[list[Listener], list[Listener]]:
    """listeners (else host.name/port) and advertised.listeners (else derived from them)."""
    if props.get("listeners", "").strip():
        listeners = parse_listeners(props["listeners"], "listeners")
    else:
        host = props.get("host.name", "").strip() or "0.0.0.0"
        port = _PORT.parse(props["port"]) if "port" in props else 9092
        listeners = [Listener("PLAINTEXT", host, port)]

    if props.get("advertised.listeners", "").strip():
        advertised = parse_listeners(props["advertised.listeners"], "advertised.listeners")
        for ln in advertised:
            if ln.host in _WILDCARDS:
                raise ConfigError(
                    f"Invalid value {props['advertised.listeners']!r} for configuration advertised.listeners: "
                    f"cannot advertise the wildcard address {ln.host}",
                    "advertised.listeners",
                )
        return listeners, advertised

    legacy_host = props.get("advertised.host.name", "").strip()
    legacy_port = props.get("advertised.port", "").strip()
    advertised = []
    for ln in listeners:
        host, port = ln.host, ln.port
        if ln.name == "PLAINTEXT" and not props.get("listeners", "").strip():
            host = legacy_host or host
            port = _PORT.parse(legacy_port, "advertised.port") if legacy_port else port
        if host in _WILDCARDS:
            host = default_advertised_host()
        advertised.append(Listener(ln.name, host, port))
    return listeners, advertised


def _check_listener_names(listeners: list[Listener], protocol_map: dict[str, str]) -> None:
    for ln in listeners:
        if ln.name not in protocol_map:
            raise ConfigError(
                f"Invalid value {str(ln)!r} for configuration listeners: listener name {ln.name} is not "
                "in listener.security.protocol.map",
                "listeners",
            )


def _check_inter_broker(values: dict[str, Any], props: Mapping[str, str]) -> None:
    """An inter.broker.listener.name or security.inter.broker.protocol that is set names a listener."""
    if values["inter_broker_listener_name"] is None and "security.inter.broker.protocol" not in props:
        return
    name = (values["inter_broker_listener_name"] or values["security_inter_broker_protocol"]).upper()
    names = [ln.name for ln in values["advertised_listeners"]]
    if name not in names:
        raise ConfigError(f"inter-broker listener {name} is not among the advertised listeners ({', '.join(names)}); "
                          "set inter.broker.listener.name", "inter.broker.listener.name")


def _log_dirs_from(props: Mapping[str, str]) -> list[str]:
    """log.dirs, else log.dir, else /tmp/kafka-logs."""
    for key in ("log.dirs", "log.dir"):
        if props.get(key, "").strip():
            return parse_typed(Type.LIST, key, props[key])
    return ["/tmp/kafka-logs"]


def load_broker_config(path: str | os.PathLike[str], overrides: Mapping[str, str] | None = None) -> BrokerConfig:
    """Read a server.properties file, apply ``--override`` values, and type the result."""
    props = load_properties(path)
    props.update(overrides or {})
    return BrokerConfig.from_properties(props)


def _check_table_matches_fields() -> None:
    """Guard: every table key has a dataclass field of the same name."""
    names = {f.name for f in fields(BrokerConfig)}
    missing = [k for k in KNOWN_KEYS if _attr(k) not in names]
    assert not missing, missing


_check_table_matches_fields()
