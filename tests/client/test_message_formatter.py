"""console-consumer's printing and start rules without a cluster: Kafka's DefaultMessageFormatter
(every --property it reads), --formatter, and --partition/--offset."""

from __future__ import annotations

import argparse

import pytest

from broker.client.simple_consumer import MessageAndMetadata
from broker.tools import CommandError
from broker.tools.console_consumer import add_arguments, start_position
from broker.tools.message_formatter import formatter

RECORD = MessageAndMetadata("t", 1, 42, b"k", b"v", [("origin", b"dc1"), ("trace", None)], 1700000000000)
BARE = MessageAndMetadata("t", 0, 7, None, None, [], -1)


def _format(m: MessageAndMetadata, **props: str) -> bytes:
    return formatter(None, {k.replace("_", "."): v for k, v in props.items()}).format(m)


def test_the_value_alone_by_default() -> None:
    assert _format(RECORD) == b"v\n"
    assert _format(BARE) == b"null\n"


def test_every_column_in_kafkas_order_separated_by_key_separator() -> None:
    assert _format(RECORD, print_timestamp="true", print_partition="true", print_offset="true", print_headers="true",
                   print_key="true") == b"CreateTime:1700000000000\tPartition:1\tOffset:42\torigin:dc1,trace:null\tk\tv\n"
    assert _format(BARE, print_timestamp="true", print_headers="true", print_key="true") == b"NO_TIMESTAMP\tNO_HEADERS\tnull\tnull\n"


def test_separators_null_literal_and_print_value() -> None:
    assert _format(RECORD, print_key="true", key_separator="|", print_value="false", line_separator="\\r\\n") == b"k\r\n"
    assert _format(RECORD, print_headers="true", headers_separator=";", headers_key_separator="=",
                   null_literal="<none>") == b"origin=dc1;trace=<none>\tv\n"
    assert _format(BARE, print_key="true", null_literal="") == b"\t\n"


def test_formatter_by_kafkas_class_name() -> None:
    assert formatter("kafka.tools.NoOpMessageFormatter", {}).format(RECORD) == b""
    assert formatter("org.apache.kafka.tools.consumer.DefaultMessageFormatter", {}).format(RECORD) == b"v\n"
    with pytest.raises(CommandError, match="unknown --formatter"):
        formatter("com.example.Mine", {})


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(["--bootstrap-server", "h:1", "--topic", "t", *argv])


def test_offset_rules_are_kafkas() -> None:
    assert start_position(_args()) is None
    assert start_position(_args("--partition", "0", "--offset", "12")) == 12
    assert start_position(_args("--partition", "0", "--offset", "latest")) is None
    for argv, message in [
        (("--offset", "3"), "The partition is required when offset is specified."),
        (("--partition", "0", "--offset", "3", "--from-beginning"), "Options from-beginning and offset cannot be specified together."),
        (("--partition", "0", "--offset", "soon"), "--offset must be earliest, latest or a number"),
    ]:
        with pytest.raises(CommandError, match=message):
            start_position(_args(*argv))
