"""How console-consumer prints a record: Kafka's DefaultMessageFormatter and its --property keys.

Columns in Kafka's order, each present when its ``print.*`` property is true: the timestamp
(``CreateTime:ts`` or ``NO_TIMESTAMP``), ``Partition:p``, ``Offset:o``, the headers
(``k:v,k:v`` or ``NO_HEADERS``), the key, the value (``print.value``, default true). Columns are
separated by ``key.separator`` and the record ends with ``line.separator``; a missing key, value
or header value prints as ``null.literal``. ``--formatter`` picks Kafka's formatter by class name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from broker.client.simple_consumer import MessageAndMetadata
from broker.tools import CommandError

PROPERTIES = ("print.timestamp", "print.partition", "print.offset", "print.headers", "print.key", "print.value",
              "key.separator", "line.separator", "headers.separator", "headers.key.separator", "null.literal")


def _text(props: Mapping[str, str], key: str, default: str) -> bytes:
    """A property as bytes, with Kafka's escapes (``\\t``, ``\\n``) understood."""
    return props.get(key, default).encode().decode("unicode_escape").encode()


class DefaultMessageFormatter:
    """Kafka's kafka.tools.DefaultMessageFormatter."""

    def __init__(self, props: Mapping[str, str]) -> None:
        def flag(key: str, default: bool = False) -> bool:
            return props.get(key, str(default)).strip().lower() == "true"

        self.columns: list[Callable[[MessageAndMetadata], bytes]] = [
            column for key, column in (
                ("print.timestamp", self._timestamp), ("print.partition", self._partition),
                ("print.offset", self._offset), ("print.headers", self._headers), ("print.key", self._key),
            ) if flag(key)
        ]
        if flag("print.value", True):
            self.columns.append(self._value)
        self.key_sep = _text(props, "key.separator", "\t")
        self.line_sep = _text(props, "line.separator", "\n")
        self.headers_sep = _text(props, "headers.separator", ",")
        self.header_key_sep = _text(props, "headers.key.separator", ":")
        self.null = _text(props, "null.literal", "null")

    def format(self, m: MessageAndMetadata) -> bytes:
        return self.key_sep.join(column(m) for column in self.columns) + self.line_sep

    def _timestamp(self, m: MessageAndMetadata) -> bytes:
        return b"CreateTime:%d" % m.timestamp if m.timestamp >= 0 else b"NO_TIMESTAMP"

    def _partition(self, m: MessageAndMetadata) -> bytes:
        return b"Partition:%d" % m.partition

    def _offset(self, m: MessageAndMetadata) -> bytes:
        return b"Offset:%d" % m.offset

    def _headers(self, m: MessageAndMetadata) -> bytes:
        if not m.headers:
            return b"NO_HEADERS"
        return self.headers_sep.join(
            (k.encode() if isinstance(k, str) else bytes(k)) + self.header_key_sep + (bytes(v) if v is not None else self.null)
            for k, v in m.headers
        )

    def _key(self, m: MessageAndMetadata) -> bytes:
        return bytes(m.key) if m.key is not None else self.null

    def _value(self, m: MessageAndMetadata) -> bytes:
        return bytes(m.value) if m.value is not None else self.null


class NoOpMessageFormatter:
    """Kafka's kafka.tools.NoOpMessageFormatter: prints nothing (for measuring)."""

    def __init__(self, props: Mapping[str, str]) -> None:
        pass

    def format(self, m: MessageAndMetadata) -> bytes:
        return b""


FORMATTERS: dict[str, type] = {
    "kafka.tools.DefaultMessageFormatter": DefaultMessageFormatter,
    "org.apache.kafka.tools.consumer.DefaultMessageFormatter": DefaultMessageFormatter,
    "kafka.tools.NoOpMessageFormatter": NoOpMessageFormatter,
    "org.apache.kafka.tools.consumer.NoOpMessageFormatter": NoOpMessageFormatter,
}


def formatter(name: str | None, props: Mapping[str, str]) -> DefaultMessageFormatter | NoOpMessageFormatter:
    """The formatter ``--formatter`` names (Kafka's class names; default: DefaultMessageFormatter)."""
    cls = FORMATTERS.get(name or "kafka.tools.DefaultMessageFormatter")
    if cls is None:
        raise CommandError(f"unknown --formatter {name!r}; known: {', '.join(FORMATTERS)}")
    instance: DefaultMessageFormatter | NoOpMessageFormatter = cls(props)
    return instance
