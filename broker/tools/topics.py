"""`logbus topics`: Kafka's kafka-topics command — --create, --list, --describe, --delete, --alter.

--topic is a regex or comma list except for --create; --describe's report filters live in
``broker.tools.topic_filters``."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable

from broker.client.admin import AdminClient, TopicDescription
from broker.client.connection import BrokerConnectionError
from broker.config import ConfigError, parse_overrides
from broker.protocol.errors import ErrorCode, KafkaError
from broker.tools import CommandError, topic_filters
from broker.tools.access import add_command_config, from_args

ACTIONS = ("create", "list", "describe", "delete", "alter")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT", help="a broker to talk to")
    add_command_config(parser)
    actions = parser.add_mutually_exclusive_group(required=True)
    for action in ACTIONS:
        actions.add_argument(f"--{action}", action="store_true", help=f"{action} topics")
    parser.add_argument("--topic", help="the topic's name; for --list/--describe/--delete/--alter a regex or comma list")
    parser.add_argument("--partitions", type=int, default=-1, help="number of partitions (default: num.partitions)")
    parser.add_argument(
        "--replication-factor", type=int, default=-1, help="replicas per partition (default: default.replication.factor)"
    )
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="a topic config override")
    parser.add_argument("--if-not-exists", action="store_true", help="with --create: no error if the topic exists")
    parser.add_argument("--if-exists", action="store_true", help="with --delete/--describe: no error if it is missing")
    topic_filters.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    action = next(a for a in ACTIONS if getattr(args, a))
    if action in ("create", "delete", "alter") and not args.topic:
        raise CommandError(f"--{action} needs --topic")
    if action == "alter" and args.partitions <= 0:
        raise CommandError("--alter needs --partitions N (the new, larger partition count)")
    access = from_args(args, timeout=30.0)
    try:
        with AdminClient(access.bootstrap, timeout=access.timeout, security=access.security) as admin:
            return COMMANDS[action](admin, args)
    except BrokerConnectionError as exc:
        raise CommandError(str(exc)) from exc
    except KafkaError as exc:
        raise CommandError(f"{exc.code.name if hasattr(exc.code, 'name') else exc.code}: {exc}") from exc


def _create(admin: AdminClient, args: argparse.Namespace) -> int:
    try:
        configs = parse_overrides(args.config)
    except ConfigError as exc:
        raise CommandError(str(exc)) from exc
    return _unless_already(lambda: admin.create_topic(args.topic, args.partitions, args.replication_factor, configs),
                           ErrorCode.TOPIC_ALREADY_EXISTS, args.if_not_exists, f"Created topic {args.topic}.")


def _list(admin: AdminClient, args: argparse.Namespace) -> int:
    for name in topic_filters.matching_topics(admin.list_topics(), args.topic, args.exclude_internal):
        print(name)
    return 0


def _named(admin: AdminClient, args: argparse.Namespace) -> list[str] | None:
    """The topics --topic names: itself when literal, else those its pattern matches (None: all)."""
    if not args.topic:
        return None if not args.exclude_internal else topic_filters.matching_topics(admin.list_topics(), None, True)
    if not topic_filters.is_pattern(args.topic):
        return [args.topic]
    found = topic_filters.matching_topics(admin.list_topics(), args.topic, args.exclude_internal)
    if not found and not args.if_exists:
        raise CommandError(f"Topic '{args.topic}' does not exist as expected")
    return found


def _describe(admin: AdminClient, args: argparse.Namespace) -> int:
    names = _named(admin, args)
    if names == []:
        return 0
    try:
        topics = admin.describe_topics(names)
    except KafkaError as exc:
        if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and args.if_exists:
            return 0
        raise
    reports = topic_filters.partition_reports(args)
    for topic in sorted(topics, key=lambda t: t.name):
        if args.topics_with_overrides:
            topic.configs = admin.topic_configs(topic.name)
            if topic.configs:
                print(format_description(topic).split("\n")[0])
        elif reports:
            min_isr = int(admin.topic_configs(topic.name, only_overrides=False).get("min.insync.replicas", "1"))
            shown = topic_filters.reported(topic, reports, min_isr)
            for line in format_description(shown).split("\n")[1:]:
                print(line)
        else:
            topic.configs = admin.topic_configs(topic.name)
            print(format_description(topic))
    return 0


def format_description(topic: TopicDescription) -> str:
    """Kafka's --describe shape: a topic line, then one tab-indented line per partition."""
    configs = ",".join(f"{k}={v}" for k, v in sorted(topic.configs.items()))
    lines = [
        f"Topic: {topic.name}\tPartitionCount: {len(topic.partitions)}\t"
        f"ReplicationFactor: {topic.replication_factor}\tConfigs: {configs}"
    ]
    for p in topic.partitions:
        lines.append(
            f"\tTopic: {topic.name}\tPartition: {p.partition}\tLeader: {p.leader if p.leader >= 0 else 'none'}\t"
            f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
        )
    return "\n".join(lines)


def _alter(admin: AdminClient, args: argparse.Namespace) -> int:
    for name in _named(admin, args) or []:
        admin.create_partitions(name, args.partitions)
        print(f"Topic {name} now has {args.partitions} partitions.")
    return 0


def _delete(admin: AdminClient, args: argparse.Namespace) -> int:
    for name in _named(admin, args) or []:
        _unless_already(functools.partial(admin.delete_topic, name), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        args.if_exists, f"Deleted topic {name}.")
    return 0


def _unless_already(action: Callable[[], object], code: ErrorCode, tolerated: bool, done: str) -> int:
    """Run ``action`` and print ``done``; with ``tolerated`` (--if-exists, --if-not-exists) an error
    ``code`` saying it was already so is quiet success."""
    try:
        action()
    except KafkaError as exc:
        if exc.code == code and tolerated:
            return 0
        raise
    print(done)
    return 0


COMMANDS = {"create": _create, "list": _list, "describe": _describe, "delete": _delete, "alter": _alter}
