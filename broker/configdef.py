"""One mechanism for every configuration key: broker, topic, producer, consumer, mirror and loader.

Each key is declared once in a ``ConfigDef`` table (in the manner of Kafka's ConfigDef): its
name, type, default, validator, importance and documentation. The table parses ``.properties``
strings and YAML values alike, and every bad value is the same one line::

    Invalid value 'x' for configuration k: <reason>

This module imports nothing of logbus, Twisted or the network, so every layer may use it.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ConfigError",
    "invalid_value",
    "Type",
    "Scope",
    "Importance",
    "Range",
    "OneOf",
    "ValidList",
    "Key",
    "ConfigDef",
    "NO_DEFAULT",
    "parse_typed",
    "INT_MAX",
    "LONG_MAX",
]

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A bad or missing setting; the message is one line and ``key`` names the setting."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(" ".join(message.split("\n")))
        self.key = key


def invalid_value(key: str, value: Any, reason: str, *, path_first: bool = False) -> ConfigError:
    """The one error of a bad value: ``Invalid value 'x' for configuration k: reason``.

    ``path_first``: the same facts led by the key, for YAML files whose errors begin with the
    key's path: ``out_of_range: 'skip' is not one of fail, earliest`` (a reason that is a
    predicate follows the value), ``fetch.max.bytes: 10: must be at least 1024``."""
    if path_first:
        joint = " " if reason.startswith(("is ", "must ")) else ": "
        return ConfigError(f"{key}: {value!r}{joint}{reason}", key)
    return ConfigError(f"Invalid value {value!r} for configuration {key}: {reason}", key)


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


#: The default of a required key.
NO_DEFAULT: Any = _NoDefault()


class Scope(enum.Enum):
    """Which configuration a key belongs to."""

    BROKER = "broker"
    TOPIC = "topic"
    PRODUCER = "producer"
    CONSUMER = "consumer"  # the group consumer (GroupConsumer)
    ZK_CONSUMER = "zk-consumer"  # the ZooKeeper consumer of Kafka 0.8 (ZookeeperConsumerConnector)
    MIRROR = "mirror"
    LOADER = "loader"


class Importance(enum.Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


# --------------------------------------------------------------------------- types


def _integer(bits: int) -> Callable[[Any], int]:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def parse(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ValueError("not an integer")
        if isinstance(value, str):
            try:
                value = int(value.strip(), 10)
            except ValueError:
                raise ValueError("not an integer") from None
        if not low <= value <= high:
            raise ValueError(f"out of range for a {bits}-bit integer")
        return value

    return parse


def _double(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError("not a number")
    try:
        return float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise ValueError("not a number") from None


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ValueError("expected true or false")
    return text == "true"


def _lenient_boolean(value: Any) -> bool:
    """true/false, and the 1/yes and 0/no that older clients (and our producer) accept."""
    text = str(value).strip().lower()
    if text in ("1", "yes"):
        return True
    if text in ("0", "no"):
        return False
    return _boolean(value)


def _string(value: Any) -> str:
    return str(value).strip()


def _list(value: Any) -> list[str]:
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    return [str(p).strip() for p in items if str(p).strip()]


def _map(value: Any) -> dict[str, str]:
    if isinstance(value, Mapping):
        return {str(k).strip(): str(v).strip() for k, v in value.items()}
    result: dict[str, str] = {}
    for entry in _list(value):
        name, sep, mapped = entry.partition(":")
        if not sep or not name.strip() or not mapped.strip():
            raise ValueError("expected NAME:VALUE pairs")
        result[name.strip()] = mapped.strip()
    return result


class Type(enum.Enum):
    """A key's type: how a ``.properties`` string or a YAML value becomes a Python value."""

    INT = "int"  # 32-bit
    LONG = "long"  # 64-bit
    DURATION = "duration"  # milliseconds, a 64-bit count
    DOUBLE = "double"
    BOOLEAN = "boolean"  # true or false
    LENIENT_BOOLEAN = "boolean*"  # true/false, 1/0, yes/no
    STRING = "string"
    LIST = "list"  # comma-separated (or a YAML list)
    MAP = "map"  # NAME:VALUE,... (or a YAML mapping)
    CLASS = "class"  # a (dotted) class name


_PARSERS: dict[Type, Callable[[Any], Any]] = {
    Type.INT: _integer(32),
    Type.LONG: _integer(64),
    Type.DURATION: _integer(64),
    Type.DOUBLE: _double,
    Type.BOOLEAN: _boolean,
    Type.LENIENT_BOOLEAN: _lenient_boolean,
    Type.STRING: _string,
    Type.LIST: _list,
    Type.MAP: _map,
    Type.CLASS: _string,
}


def parse_typed(type_: Type, key: str, value: Any) -> Any:
    """``value`` parsed as ``type_``; a bad one is ConfigError naming ``key``."""
    try:
        return _PARSERS[type_](value)
    except ValueError as exc:
        raise invalid_value(key, _shown(value), str(exc)) from None


def _shown(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


# --------------------------------------------------------------------------- validators


@dataclass(frozen=True)
class Range:
    """Numbers in ``[minimum, maximum]`` (either bound may be open)."""

    minimum: float | None = None
    maximum: float | None = None

    def __call__(self, value: Any) -> None:
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"must be at least {self.minimum}")
        if self.maximum is not None and value > self.maximum:
            raise ValueError(f"must be at most {self.maximum}")

    def describe(self) -> str:
        if self.maximum is None:
            return f">= {self.minimum}"
        if self.minimum is None:
            return f"<= {self.maximum}"
        return f"[{self.minimum}, {self.maximum}]"


@dataclass(frozen=True)
class OneOf:
    """One of a fixed set of strings (``ignore_case``: compared in lower case)."""

    options: tuple[str, ...]
    ignore_case: bool = False
    reason: str = ""  # the error's reason, when "expected one of ..." reads worse

    def __call__(self, value: Any) -> None:
        text = str(value).lower() if self.ignore_case else str(value)
        if text not in self.options:
            raise ValueError(self.reason or f"expected one of {', '.join(self.options)}")

    def describe(self) -> str:
        return ", ".join(self.options)


@dataclass(frozen=True)
class ValidList:
    """A non-empty list whose every item is one of ``options`` (compared in lower case)."""

    options: tuple[str, ...]
    reason: str = ""

    def __call__(self, value: Any) -> None:
        if not value or any(str(item).lower() not in self.options for item in value):
            raise ValueError(self.reason or f"expected a list of {', '.join(self.options)}")

    def describe(self) -> str:
        return "list of " + ", ".join(self.options)


Validator = Callable[[Any], None]


# --------------------------------------------------------------------------- keys and tables


@dataclass(frozen=True)
class Key:
    """One configuration key, declared once.

    ``default`` is a typed value as a user would write it (``NO_DEFAULT``: required; None: unset,
    the config says what applies). ``validator`` raises ValueError(reason); ``convert`` turns a
    checked value, the default too, into the form the config holds (acks ``all`` -> -1, say)."""

    name: str
    type: Type
    default: Any = None
    validator: Validator | None = None
    doc: str = ""
    importance: Importance = Importance.MEDIUM
    convert: Callable[[Any], Any] | None = None
    type_reason: str = ""  # the error's reason for a value of the wrong form, when the type's reads worse
    scope: Scope | None = None

    @property
    def required(self) -> bool:
        return self.default is NO_DEFAULT

    @property
    def attr(self) -> str:
        """The attribute name of the key in a config object (``log.segment.bytes`` -> ``log_segment_bytes``)."""
        return self.name.replace(".", "_")

    def parse(self, value: Any, label: str | None = None, *, path_first: bool = False) -> Any:
        """``value`` typed, validated and converted; ConfigError names ``label`` (else the key)."""
        label = label or self.name
        try:
            parsed = _PARSERS[self.type](value)
        except ValueError as exc:
            raise invalid_value(label, _shown(value), self.type_reason or str(exc), path_first=path_first) from None
        if self.validator is not None:
            try:
                self.validator(parsed)
            except ValueError as exc:
                raise invalid_value(label, _shown(value), str(exc), path_first=path_first) from None
        return self.convert(parsed) if self.convert is not None else parsed

    def default_value(self) -> Any:
        """The default in the config's form, a fresh copy (lists and dicts are never shared)."""
        if self.convert is None or self.default is None or self.required:
            return copy.copy(self.default)
        return self.convert(copy.copy(self.default))


class ConfigDef:
    """The key table of one configuration (``scope``), with its aliases and ignored keys.

    ``aliases`` map older names (Kafka 0.8's, librdkafka's) to the key; ``ignored`` keys are
    accepted and dropped (settings of the Java client that mean nothing here)."""

    def __init__(
        self,
        scope: Scope,
        keys: Iterable[Key],
        *,
        aliases: Mapping[str, str] | None = None,
        ignored: Iterable[str] = (),
    ) -> None:
        self.scope = scope
        self.keys: dict[str, Key] = {}
        for key in keys:
            if key.name in self.keys:
                raise ValueError(f"configuration {key.name} is defined twice")
            self.keys[key.name] = dataclasses.replace(key, scope=scope)
        self.aliases: dict[str, str] = dict(aliases or {})
        self.ignored = frozenset(ignored)
        unknown_targets = [a for a, k in self.aliases.items() if k not in self.keys]
        if unknown_targets:
            raise ValueError(f"aliases of undefined keys: {unknown_targets}")

    def __contains__(self, name: object) -> bool:
        return name in self.keys

    def __getitem__(self, name: str) -> Key:
        return self.keys[name]

    def __iter__(self) -> Iterator[Key]:
        return iter(self.keys.values())

    def __len__(self) -> int:
        return len(self.keys)

    def canonical(self, name: str) -> str:
        """The key an alias stands for (the name itself when it is no alias)."""
        name = name.strip()
        return self.aliases.get(name, name)

    def default(self, name: str) -> Any:
        """A key's default in the config's form (converted)."""
        return self.keys[name].default_value()

    def parse_value(self, name: str, value: Any, label: str | None = None) -> Any:
        """One key's value, typed and validated."""
        return self.keys[name].parse(value, label)

    def parse(self, props: Mapping[str, Any], *, skip_none: bool = True) -> dict[str, Any]:
        """Every key of the table: its parsed value from ``props`` (by name or alias), else its default.

        A required key that is missing is a ConfigError; keys the table does not know are
        left to the caller (see ``unknown``)."""
        given: dict[str, Any] = {}
        for name, value in props.items():
            if skip_none and value is None:
                continue
            given[self.canonical(str(name))] = value
        values: dict[str, Any] = {}
        for key in self.keys.values():
            if key.name in given:
                values[key.name] = key.parse(given[key.name])
            elif key.required:
                raise ConfigError(f"Missing required configuration {key.name} which has no default value", key.name)
            else:
                values[key.name] = key.default_value()
        return values

    def unknown(self, props: Iterable[str]) -> list[str]:
        """Names in ``props`` that are neither keys, aliases nor ignored keys."""
        return sorted(
            name for name in props if self.canonical(name) not in self.keys and self.canonical(name) not in self.ignored
        )
