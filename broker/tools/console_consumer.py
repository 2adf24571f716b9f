"""`logbus console-consumer`: Kafka's kafka-console-consumer — print a topic's records to stdout.

With ``--zookeeper`` it is a ZookeeperConsumerConnector in a group (``--group``, or a
throw-away ``console-consumer-NNNNN`` group removed at exit, as Kafka 0.8 did). With
``--bootstrap-server`` and ``--group`` it is a GroupConsumer, a member of the group through the
brokers' group coordinator that commits what it printed on exit; without ``--group`` it reads
every partition directly with SimpleConsumer (no group, nothing committed).
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from broker.client.connection import BrokerConnectionError
from broker.client.rebalance import Whitelist
from broker.client.security import PLAINTEXT, ClientSecurity
from broker.client.simple_consumer import EARLIEST_TIME, LATEST_TIME, MessageAndMetadata, SimpleConsumer
from broker.cluster.zk import ZkError
from broker.config import ConfigError, load_with_overrides
from broker.protocol.errors import KafkaError, LeaderNotAvailableError, UnknownTopicOrPartitionError
from broker.tools import CommandError, message_formatter
from broker.tools.access import access_of_props
from broker.tools.message_formatter import DefaultMessageFormatter, NoOpMessageFormatter

Formatter = DefaultMessageFormatter | NoOpMessageFormatter

if TYPE_CHECKING:
    from broker.client.group_consumer import GroupConsumer

def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--bootstrap-server", metavar="HOST:PORT", help="read every partition directly from the brokers")
    where.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]", help="consume as a ZooKeeper consumer group")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--topic", help="the topic to consume")
    what.add_argument("--whitelist", help="a regex of topics to consume")
    parser.add_argument("--from-beginning", action="store_true", help="start at the earliest offset (no committed one)")
    parser.add_argument("--group", help="the consumer group (with --bootstrap-server: through the group coordinator)")
    parser.add_argument("--max-messages", type=int, default=-1, help="exit after this many messages")
    parser.add_argument("--timeout-ms", type=int, default=-1, help="exit when no message arrives for this long")
    parser.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                        help="a formatter property: " + ", ".join(message_formatter.PROPERTIES))
    parser.add_argument("--formatter", metavar="CLASS",
                        help="kafka.tools.DefaultMessageFormatter (default) or kafka.tools.NoOpMessageFormatter")
    parser.add_argument("--partition", type=int, help="with --bootstrap-server and --topic: only this partition")
    parser.add_argument("--offset", default=None, metavar="earliest|latest|N",
                        help="with --partition: where to start (default latest)")
    parser.add_argument("--consumer.config", dest="consumer_config", metavar="FILE",
                        help="a consumer .properties file (--consumer-property overrides it)")
    parser.add_argument("--consumer-property", action="append", default=[], metavar="KEY=VALUE",
                        help="a consumer config, e.g. fetch.message.max.bytes=2097152 (--zookeeper) "
                             "or session.timeout.ms=10000 (--bootstrap-server --group)")


def _parse_kv(items: list[str], flag: str) -> dict[str, str]:
    result = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CommandError(f"{flag} must be KEY=VALUE, not {item!r}")
        result[key.strip()] = value
    return result


def bootstrap_messages(bootstrap: str, topics: list[str] | None, pattern: str | None, from_beginning: bool,
                       fetch_size: int = 1 << 20, timeout_ms: int = -1, partition: int | None = None,
                       start: int | None = None, security: ClientSecurity = PLAINTEXT) -> Iterator[MessageAndMetadata]:
    """Every partition of the topics (or of those ``pattern`` allows; or only ``partition``), read
    with SimpleConsumer from ``start`` (an offset) or the earliest/latest. A partition without a
    leader is skipped with one line on stderr; the others are read, as Kafka's consumers do.

    Ends when nothing arrived for ``timeout_ms`` (never, when negative)."""
    first = None
    errors = []
    for address in [a.strip() for a in bootstrap.split(",") if a.strip()]:
        try:
            first = SimpleConsumer.from_address(address, timeout=10, security=security)
            first.topic_metadata([])
            break
        except (BrokerConnectionError, ValueError) as exc:
            errors.append(str(exc))
            first = None
    if first is None:
        raise BrokerConnectionError("; ".join(errors) or "no bootstrap server given")
    if topics is None:
        flt = Whitelist(pattern or ".*")
        md = first.topic_metadata(None)
        topics = sorted(t["name"] for t in md["topics"] if not t["name"].startswith("__") and flt.is_topic_allowed(t["name"]))
    consumers: dict[tuple[str, int], SimpleConsumer] = {}
    positions: dict[tuple[str, str, int], int] = {}
    by_leader: dict[tuple[str, int], list[tuple[str, int]]] = {}
    for topic in topics:
        known = first.partitions_for(topic)
        if partition is not None and partition not in known:
            raise CommandError(f"topic {topic!r} has no partition {partition}")
        for p in [partition] if partition is not None else known:
            try:
                _, host, port = first.find_leader(topic, p)
            except LeaderNotAvailableError as exc:
                print(f"WARN: skipping {topic}-{p}: {exc}", file=sys.stderr)
                continue
            by_leader.setdefault((host, port), []).append((topic, p))
    try:
        for (host, port), tps in by_leader.items():
            consumer = consumers[(host, port)] = SimpleConsumer(host, port, timeout=30, security=security)
            for topic, p in tps:
                if start is not None:
                    positions[(f"{host}:{port}", topic, p)] = start
                    continue
                found = consumer.get_offsets_before(topic, p, EARLIEST_TIME if from_beginning else LATEST_TIME)
                positions[(f"{host}:{port}", topic, p)] = found[0] if found else 0
        last_message = time.monotonic()
        wait_ms = 100 if len(by_leader) <= 1 else 10
        while True:
            got = False
            for (host, port), tps in by_leader.items():
                consumer = consumers[(host, port)]
                key = f"{host}:{port}"
                results = consumer.multifetch([(t, p, positions[(key, t, p)], fetch_size) for t, p in tps],
                                              max_wait_ms=wait_ms, min_bytes=1)
                for (t, p), ms in results.items():
                    if ms.error is not None:
                        raise ms.error
                    if ms:
                        got = True
                        yield from ms
                    positions[(key, t, p)] = max(positions[(key, t, p)], ms.next_offset)
            if got:
                last_message = time.monotonic()
            elif timeout_ms >= 0 and (time.monotonic() - last_message) * 1000 >= timeout_ms:
                return
    finally:
        first.close()
        for c in consumers.values():
            c.close()


def start_position(args: argparse.Namespace) -> int | None:
    """Kafka's --partition/--offset rules: --offset needs --partition, excludes --from-beginning;
    ``earliest``/``latest`` become --from-beginning or the default; a number is the start offset."""
    if args.offset is None:
        return None
    if args.partition is None:
        raise CommandError("The partition is required when offset is specified.")
    if args.from_beginning:
        raise CommandError("Options from-beginning and offset cannot be specified together.")
    if args.offset in ("earliest", "latest"):
        return None
    try:
        offset = int(args.offset)
    except ValueError:
        raise CommandError(f"--offset must be earliest, latest or a number, not {args.offset!r}") from None
    if offset < 0:
        raise CommandError(f"--offset must not be negative, not {offset}")
    return offset


def _consumer_props(args: argparse.Namespace) -> dict[str, str]:
    try:
        return dict(load_with_overrides(args.consumer_config, args.consumer_property))
    except (ConfigError, OSError) as exc:
        raise CommandError(str(exc)) from exc


def _leave_on_sigterm() -> None:
    """SIGTERM ends the consumer as Ctrl-C does: it commits, leaves its group and says how many it printed."""
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def run(args: argparse.Namespace) -> int:
    fmt = message_formatter.formatter(args.formatter, _parse_kv(args.property, "--property"))
    consumer_props = _consumer_props(args)
    if args.partition is not None and (args.group or args.zookeeper or not args.topic):
        raise CommandError("--partition needs --bootstrap-server and --topic, without --group")
    start = start_position(args)
    if args.offset == "earliest":
        args.from_beginning = True
    _leave_on_sigterm()
    out = sys.stdout.buffer
    count = 0
    if args.bootstrap_server and args.group:
        return _run_group(args, fmt, consumer_props)
    if args.bootstrap_server:
        try:
            for m in bootstrap_messages(args.bootstrap_server, [args.topic] if args.topic else None, args.whitelist,
                                        args.from_beginning, timeout_ms=args.timeout_ms, partition=args.partition,
                                        start=start, security=access_of_props(consumer_props).security):
                out.write(fmt.format(m))
                count += 1
                if count == args.max_messages:
                    break
        except BrokerConnectionError as exc:
            raise CommandError(str(exc)) from exc
        except KafkaError as exc:
            raise CommandError(f"{type(exc).__name__}: {exc}") from exc
        except KeyboardInterrupt:
            pass
        finally:
            out.flush()
        print(f"Processed a total of {count} messages", file=sys.stderr)
        return 0
    return _run_zookeeper(args, fmt, consumer_props)


def _run_group(args: argparse.Namespace, fmt: Formatter, consumer_props: dict[str, str]) -> int:
    """A member of ``--group`` through the brokers' group coordinator; commits what it printed."""
    from broker.client.group_consumer import GroupConsumer

    props = {"bootstrap.servers": args.bootstrap_server, "group.id": args.group, "client.id": "console-consumer",
             "auto.offset.reset": "earliest" if args.from_beginning else "latest", **consumer_props}
    if args.topic:
        _require_topic(args.bootstrap_server, args.topic, access_of_props(consumer_props).security)
    out = sys.stdout.buffer
    count = 0
    try:
        consumer = GroupConsumer(props)
        if args.topic:
            consumer.subscribe([args.topic])
        else:
            consumer.subscribe(pattern=Whitelist(args.whitelist).regex)
    except (ConfigError, ValueError) as exc:
        raise CommandError(str(exc)) from exc
    try:
        last_message = time.monotonic()
        try:
            while count != args.max_messages:
                left = 1.0 if args.timeout_ms < 0 else last_message + args.timeout_ms / 1000 - time.monotonic()
                wait = max(min(1.0, left), 0.0)
                # never take more than --max-messages, so the commit covers exactly what was printed
                records = consumer.poll(wait, max_records=args.max_messages - count if args.max_messages > 0 else None)
                for m in records:
                    out.write(fmt.format(m))
                count += len(records)
                if records:
                    last_message = time.monotonic()
                elif args.timeout_ms >= 0 and (time.monotonic() - last_message) * 1000 >= args.timeout_ms:
                    break
        except KeyboardInterrupt:
            pass
        out.flush()
        _commit_quietly(consumer)
    except (BrokerConnectionError, KafkaError) as exc:
        raise CommandError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        out.flush()
        consumer.close()
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


def _require_topic(bootstrap: str, topic: str, security: ClientSecurity) -> None:
    """A group member of a topic that does not exist would wait forever: say so and stop."""
    try:
        consumer = SimpleConsumer.from_address(bootstrap.split(",")[0].strip(), timeout=10, security=security)
    except (BrokerConnectionError, ValueError) as exc:
        raise CommandError(str(exc)) from exc
    try:
        consumer.partitions_for(topic)
    except UnknownTopicOrPartitionError:
        raise CommandError(f"Topic '{topic}' does not exist") from None
    except (BrokerConnectionError, KafkaError) as exc:
        raise CommandError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        consumer.close()


def _commit_quietly(consumer: GroupConsumer) -> None:
    """Commit what was printed; a failure (the group rebalancing, the coordinator gone) is one line."""
    try:
        consumer.commit()
    except (BrokerConnectionError, KafkaError) as exc:
        print(f"could not commit offsets: {exc}", file=sys.stderr)


def _run_zookeeper(args: argparse.Namespace, fmt: Formatter, consumer_props: dict[str, str]) -> int:
    from broker.client.zk_consumer import ConsumerTimeoutException, ZookeeperConsumerConnector

    throwaway = not args.group
    group = args.group or f"console-consumer-{random.randint(0, 99999)}"
    props = {
        "zookeeper.connect": args.zookeeper, "group.id": group,
        "auto.offset.reset": "smallest" if args.from_beginning else "largest",
        "consumer.timeout.ms": str(args.timeout_ms), "zookeeper.connection.timeout.ms": "10000",
        "rebalance.backoff.ms": "500", "rebalance.max.retries": "20",
        **consumer_props,
    }
    out = sys.stdout.buffer
    count = 0
    try:
        connector = ZookeeperConsumerConnector(props)
    except (ZkError, ConfigError) as exc:
        raise CommandError(str(exc)) from exc
    try:
        try:
            if args.topic:
                stream = connector.create_message_streams({args.topic: 1})[args.topic][0]
            else:
                stream = connector.create_message_streams_by_filter(Whitelist(args.whitelist), 1)[0]
        except (KafkaError, ValueError, Exception) as exc:
            raise CommandError(str(exc)) from exc
        try:
            for m in stream:
                out.write(fmt.format(m))
                count += 1
                if count == args.max_messages:
                    break
        except ConsumerTimeoutException:
            pass
        except KeyboardInterrupt:
            pass
        out.flush()
        if not throwaway:
            connector.commit_offsets()
    finally:
        connector.shutdown()
        if throwaway:
            _delete_group(args.zookeeper, group)
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


def _delete_group(connect: str, group: str) -> None:
    from broker.cluster.zk import ZkClient
    from broker.cluster.zkdata import ConsumerGroupZNode

    try:
        with ZkClient(connect, session_timeout_ms=6000) as zk:
            zk.delete(ConsumerGroupZNode.path(group), recursive=True)
    except Exception:
        pass
