"""`logbus console-producer`: Kafka's kafka-console-producer — send lines from stdin to a topic.

    logbus console-producer --bootstrap-server 127.0.0.1:9092 --topic page-views \\
        --property parse.key=true --property key.separator=:

Settings come, later winning, from ``--producer.config FILE``, ``--producer-property k=v``
and the dedicated flags (``--request-required-acks``, ``--compression-codec``, ``--sync``...).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from broker.client.connection import BrokerConnectionError
from broker.client.metadata import KafkaTimeoutError
from broker.client.producer import Producer
from broker.config import ConfigError, parse_overrides
from broker.protocol.errors import KafkaError
from broker.tools import CommandError, client_config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    servers = parser.add_mutually_exclusive_group()
    servers.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]", help="the brokers to connect to")
    servers.add_argument("--broker-list", metavar="HOST:PORT[,...]", help="the brokers (old name of --bootstrap-server)")
    parser.add_argument("--topic", required=True, help="the topic to produce to")
    parser.add_argument(
        "--property", action="append", default=[], metavar="KEY=VALUE",
        help="line reader settings: parse.key=true, key.separator=<sep> (default tab), ignore.error=true, "
        "parse.headers=true, headers.delimiter=<sep> (default tab), headers.separator=<sep> (default ,), "
        "headers.key.separator=<sep> (default :), null.marker=<text>",
    )
    parser.add_argument(
        "--compression-codec", nargs="?", const="gzip", metavar="CODEC",
        help="none, gzip, snappy, lz4 or zstd (gzip when given without a value)",
    )
    parser.add_argument("--producer.config", dest="producer_config", metavar="FILE", help="a producer.properties file")
    parser.add_argument("--producer-property", action="append", default=[], metavar="KEY=VALUE", help="a producer setting")
    parser.add_argument("--request-required-acks", metavar="ACKS", help="acks: all/-1, 0 or 1 (default all)")
    parser.add_argument("--request-timeout-ms", type=int, help="request.timeout.ms")
    parser.add_argument("--message-send-max-retries", type=int, help="retries")
    parser.add_argument("--retry-backoff-ms", type=int, help="retry.backoff.ms")
    parser.add_argument("--batch-size", type=int, help="records per batch (batch.num.messages)")
    parser.add_argument("--timeout", type=int, metavar="MS", help="linger.ms: how long a batch waits to fill")
    parser.add_argument("--max-block-ms", type=int, help="max.block.ms: how long to wait for metadata and buffer space")
    parser.add_argument("--sync", action="store_true", help="send each line synchronously (producer.type=sync)")


def build_config(args: argparse.Namespace, servers: str | None) -> dict[str, Any]:
    """The producer config from the file, --producer-property and the flags (in that order)."""
    return client_config(args.producer_config, args.producer_property, servers,
                         "--bootstrap-server (or bootstrap.servers in --producer.config) is required")


def run(args: argparse.Namespace) -> int:
    config = build_config(args, args.bootstrap_server or args.broker_list)
    config.setdefault("client.id", "console-producer")
    flags = {
        "acks": args.request_required_acks,
        "compression.type": args.compression_codec,
        "request.timeout.ms": args.request_timeout_ms,
        "retries": args.message_send_max_retries,
        "retry.backoff.ms": args.retry_backoff_ms,
        "batch.num.messages": args.batch_size,
        "linger.ms": args.timeout,
        "max.block.ms": args.max_block_ms,
        "producer.type": "sync" if args.sync else None,
    }
    config.update({k: v for k, v in flags.items() if v is not None})
    try:
        reader = LineReader(parse_overrides(args.property))
    except ConfigError as exc:
        raise CommandError(str(exc)) from exc
    try:
        producer = Producer(config)
    except ConfigError as exc:
        raise CommandError(str(exc)) from exc
    failures: list[BaseException] = []

    def on_delivery(metadata: Any, exc: BaseException | None) -> None:
        if exc is not None:
            failures.append(exc)
            print(f"ERROR when sending message to topic {args.topic}: {exc}", file=sys.stderr)

    try:
        for number, line in enumerate(sys.stdin.buffer, 1):
            parsed = reader.parse(line.rstrip(b"\r\n") if line.endswith(b"\n") else line, number)
            if parsed is None:
                continue
            key, value, headers = parsed
            producer.send(args.topic, value, key=key, headers=headers, callback=on_delivery)
            if failures and not args.sync and not reader.ignore_error:
                break
        producer.flush()
    except (KafkaError, KafkaTimeoutError, BrokerConnectionError) as exc:
        raise CommandError(f"{type(exc).__name__}: {exc}") from exc
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    finally:
        producer.close(10)
    return 1 if failures else 0


class LineReader:
    """Kafka's LineMessageReader: a line is ``[headers<TAB>][key<SEP>]value``."""

    def __init__(self, props: dict[str, str]) -> None:
        self.parse_key = props.get("parse.key", "false").lower() == "true"
        self.key_separator = props.get("key.separator", "\t").encode()
        self.ignore_error = props.get("ignore.error", "false").lower() == "true"
        self.parse_headers = props.get("parse.headers", "false").lower() == "true"
        self.headers_delimiter = props.get("headers.delimiter", "\t").encode()
        self.headers_separator = props.get("headers.separator", ",").encode()
        self.headers_key_separator = props.get("headers.key.separator", ":").encode()
        self.null_marker = props["null.marker"].encode() if "null.marker" in props else None
        if not self.key_separator:
            raise ConfigError("key.separator must not be empty", "key.separator")

    def parse(self, line: bytes, number: int) -> tuple[bytes | None, bytes | None, list | None] | None:
        headers = None
        if self.parse_headers:
            head, sep, line = line.partition(self.headers_delimiter)
            if not sep:
                self._error(f"No headers delimiter found on line number {number}: '{head.decode(errors='replace')}'")
                return None
            headers = []
            if head and head != self.null_marker:
                for pair in head.split(self.headers_separator):
                    hkey, hsep, hvalue = pair.partition(self.headers_key_separator)
                    headers.append((hkey.decode(), (hvalue if hvalue != self.null_marker else None) if hsep else None))
        key = None
        if self.parse_key:
            key, sep, value = line.partition(self.key_separator)
            if not sep and self.ignore_error:
                key, value = None, line  # as Kafka: the whole line is the value
            elif not sep:
                self._error(f"No key separator found on line number {number}: '{line.decode(errors='replace')}'")
                return None
            if key == self.null_marker:
                key = None
        else:
            value = line
        return key, (None if value == self.null_marker else value), headers

    def _error(self, message: str) -> None:
        """A line that does not parse: skipped with --ignore-error, else the command's error."""
        if not self.ignore_error:
            raise CommandError(message)
