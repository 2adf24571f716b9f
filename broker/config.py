"""Java-style .properties files and the typed broker configuration.

Key names and defaults are Apache Kafka's, so a Kafka user's server.properties carries over.
The raw dict stays available as ``BrokerConfig.props`` for parts (storage's LogConfig) that
read their own keys.
"""

from __future__ import annotations

import copy
import os
import re
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

__all__ = [
    "ConfigError",
    "Listener",
    "BrokerConfig",
    "load_properties",
    "parse_properties",
    "parse_overrides",
    "parse_listeners",
    "load_broker_config",
    "KNOWN_KEYS",
]


class ConfigError(ValueError):
    """A bad or missing setting; the message is one line and names the key."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(" ".join(message.split("\n")))
        self.key = key


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


def _int(raw: str, bits: int = 32) -> int:
    try:
        v = int(raw, 10)
    except ValueError:
        raise ValueError("not an integer") from None
    if not -(2 ** (bits - 1)) <= v < 2 ** (bits - 1):
        raise ValueError(f"out of range for a {bits}-bit integer")
    return v


def _long(raw: str) -> int:
    return _int(raw, 64)


def _bool(raw: str) -> bool:
    low = raw.lower()
    if low not in ("true", "false"):
        raise ValueError("expected true or false")
    return low == "true"


def _str(raw: str) -> str:
    return raw


def _list(raw: str) -> list[str]:
    return [p.strip() for p in raw.split(",") if p.strip()]


def _protocol_map(raw: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for entry in _list(raw):
        name, sep, proto = entry.partition(":")
        if not sep or not name.strip() or not proto.strip():
            raise ValueError("expected NAME:PROTOCOL pairs")
        result[name.strip().upper()] = proto.strip().upper()
    return result


class Key(NamedTuple):
    """How a known key is parsed: its type, Kafka's default, an optional lower bound."""

    parse: Callable[[str], Any]
    default: Any
    minimum: int | None = None


INT, LONG, BOOL, STR, LIST = _int, _long, _bool, _str, _list
_LONG_MAX = 2**63 - 1
_NO_DEFAULT = object()

#: Kafka key -> (type, default, minimum). The attribute is the key with '.' -> '_'.
KNOWN_KEYS: dict[str, Key] = {
    "broker.id": Key(INT, _NO_DEFAULT, 0),
    "broker.rack": Key(STR, None),
    "zookeeper.connect": Key(STR, _NO_DEFAULT),
    "zookeeper.session.timeout.ms": Key(INT, 18000, 1),
    "zookeeper.connection.timeout.ms": Key(INT, None, 1),  # None: the session timeout
    "listener.security.protocol.map": Key(
        _protocol_map, {p: p for p in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}
    ),
    "inter.broker.listener.name": Key(STR, None),
    "num.partitions": Key(INT, 1, 1),
    "auto.create.topics.enable": Key(BOOL, True),
    "delete.topic.enable": Key(BOOL, True),
    "default.replication.factor": Key(INT, 1, 1),
    "message.max.bytes": Key(INT, 1048588, 0),
    "socket.request.max.bytes": Key(INT, 104857600, 1),
    "socket.send.buffer.bytes": Key(INT, 102400),
    "socket.receive.buffer.bytes": Key(INT, 102400),
    "compression.type": Key(STR, "producer"),
    "log.segment.bytes": Key(INT, 1073741824, 14),
    "log.roll.hours": Key(INT, 168, 1),
    "log.roll.ms": Key(LONG, None),
    "log.retention.hours": Key(INT, 168),
    "log.retention.minutes": Key(INT, None),
    "log.retention.ms": Key(LONG, None),
    "log.retention.bytes": Key(LONG, -1),
    "log.retention.check.interval.ms": Key(LONG, 300000, 1),
    "log.cleanup.policy": Key(LIST, ["delete"]),
    "log.flush.interval.messages": Key(LONG, _LONG_MAX, 1),
    "log.flush.interval.ms": Key(LONG, None),  # None: log.flush.scheduler.interval.ms
    "log.flush.scheduler.interval.ms": Key(LONG, _LONG_MAX),
    "log.flush.offset.checkpoint.interval.ms": Key(INT, 60000, 0),
    "log.index.interval.bytes": Key(INT, 4096, 0),
    "log.index.size.max.bytes": Key(INT, 10485760, 4),
    "log.message.timestamp.type": Key(STR, "CreateTime"),
    "num.recovery.threads.per.data.dir": Key(INT, 1, 1),
    "replica.lag.time.max.ms": Key(LONG, 30000),
    "replica.fetch.max.bytes": Key(INT, 1048576, 0),
    "replica.fetch.min.bytes": Key(INT, 1),
    "replica.fetch.wait.max.ms": Key(INT, 500),
    "replica.fetch.backoff.ms": Key(INT, 1000, 0),
    "replica.socket.timeout.ms": Key(INT, 30000),
    "num.replica.fetchers": Key(INT, 1),
    "replica.high.watermark.checkpoint.interval.ms": Key(LONG, 5000),
    "min.insync.replicas": Key(INT, 1, 1),
    "unclean.leader.election.enable": Key(BOOL, False),
    "auto.leader.rebalance.enable": Key(BOOL, True),
    "leader.imbalance.check.interval.seconds": Key(LONG, 300, 1),
    "controlled.shutdown.enable": Key(BOOL, True),
    "controller.socket.timeout.ms": Key(INT, 30000),
    "group.initial.rebalance.delay.ms": Key(INT, 3000),
    "group.min.session.timeout.ms": Key(INT, 6000),
    "group.max.session.timeout.ms": Key(INT, 1800000),
    "offsets.retention.minutes": Key(INT, 10080, 1),
    "metrics.port": Key(INT, 0, 0),  # Prometheus text metrics over HTTP; 0: off
    "producer.id.expiration.ms": Key(INT, 86400000, 1),  # idle producers' idempotence state is dropped
    # accepted for compatibility with Kafka's sample files; logbus does not use them
    "num.network.threads": Key(INT, 3, 1),
    "num.io.threads": Key(INT, 8, 1),
    "offsets.topic.replication.factor": Key(INT, 3, 1),
    "transaction.state.log.replication.factor": Key(INT, 3, 1),
    "transaction.state.log.min.isr": Key(INT, 2, 1),
}

#: Keys read by hand in from_properties rather than through the table.
_SPECIAL_KEYS = frozenset(
    {"listeners", "advertised.listeners", "host.name", "port", "advertised.host.name", "advertised.port",
     "log.dirs", "log.dir"}
)


def _attr(key: str) -> str:
    return key.replace(".", "_")


def _parse_key(key: str, raw: str, spec: Key) -> Any:
    raw = raw.strip()
    try:
        value = spec.parse(raw)
    except ValueError as e:
        raise ConfigError(f"Invalid value {raw!r} for configuration {key}: {e}", key) from None
    if spec.minimum is not None and isinstance(value, int) and value < spec.minimum:
        raise ConfigError(f"Invalid value {raw!r} for configuration {key}: must be at least {spec.minimum}", key)
    return value


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
    log_cleanup_policy: list[str]
    log_flush_interval_messages: int
    log_flush_interval_ms: int | None
    log_flush_scheduler_interval_ms: int
    log_flush_offset_checkpoint_interval_ms: int
    log_index_interval_bytes: int
    log_index_size_max_bytes: int
    log_message_timestamp_type: str
    num_recovery_threads_per_data_dir: int
    replica_lag_time_max_ms: int
    replica_fetch_max_bytes: int
    replica_fetch_min_bytes: int
    replica_fetch_wait_max_ms: int
    replica_fetch_backoff_ms: int
    replica_socket_timeout_ms: int
    num_replica_fetchers: int
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
    producer_id_expiration_ms: int
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
        values: dict[str, Any] = {}
        for key, spec in KNOWN_KEYS.items():
            if key in props:
                values[_attr(key)] = _parse_key(key, props[key], spec)
            elif spec.default is _NO_DEFAULT:
                raise ConfigError(f"Missing required configuration {key} which has no default value", key)
            else:
                values[_attr(key)] = copy.copy(spec.default)  # lists and dicts are not shared
        if values["zookeeper_connection_timeout_ms"] is None:
            values["zookeeper_connection_timeout_ms"] = values["zookeeper_session_timeout_ms"]
        if not values["zookeeper_connect"].strip():
            raise ConfigError("Invalid value '' for configuration zookeeper.connect: empty", "zookeeper.connect")
        values["zookeeper_connect"] = values["zookeeper_connect"].strip()
        values["listeners"], values["advertised_listeners"] = _listeners_from(props)
        _check_listener_names(values["listeners"], values["listener_security_protocol_map"])
        values["log_dirs"] = _log_dirs_from(props)
        return cls(props=props, **values)

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
        return sorted(k for k in self.props if k not in KNOWN_KEYS and k not in _SPECIAL_KEYS)

    def listener(self, name: str = "PLAINTEXT") -> Listener:
        """The bound listener called ``name``."""
        for ln in self.listeners:
            if ln.name == name:
                return ln
        raise KeyError(name)


def _listeners_from(props: Mapping[str, str]) -> tuple[list[Listener], list[Listener]]:
    """listeners (else host.name/port) and advertised.listeners (else derived from them)."""
    port_spec = Key(INT, 9092, 0)
    if props.get("listeners", "").strip():
        listeners = parse_listeners(props["listeners"], "listeners")
    else:
        host = props.get("host.name", "").strip() or "0.0.0.0"
        port = _parse_key("port", props["port"], port_spec) if "port" in props else 9092
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
            port = _parse_key("advertised.port", legacy_port, port_spec) if legacy_port else port
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


def _log_dirs_from(props: Mapping[str, str]) -> list[str]:
    """log.dirs, else log.dir, else /tmp/kafka-logs."""
    for key in ("log.dirs", "log.dir"):
        if props.get(key, "").strip():
            return _list(props[key])
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
