"""`logbus consumer-groups`: Kafka's kafka-consumer-groups — --list, --describe with lag.

With --zookeeper (ZooKeeper consumer groups) the table is Kafka 0.8's: GROUP TOPIC PARTITION
CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID; committed offsets and owners come from
/consumers/<group>/...; the log end offset is asked of each partition's leader with ListOffsets.
With --bootstrap-server (groups of standard clients, through the brokers' group coordinators,
``broker.tools.coordinator_groups``) it is today's: ... CONSUMER-ID HOST CLIENT-ID. Both read
the same committed offsets: a group's offsets live in ZooKeeper whichever kind of consumer
wrote them. ``--translate-from`` (``broker.tools.translate_offsets``) maps a group's offsets in a
mirror's source cluster onto the aggregate cluster.
"""

from __future__ import annotations

import argparse

from broker.client.connection import BrokerConnectionError
from broker.client.simple_consumer import LATEST_TIME, SimpleConsumer
from broker.cluster.offset_store import ZkOffsetStore
from broker.cluster.zk import ZkClient, ZkError
from broker.cluster.zkdata import ConsumerGroupZNode, ConsumerOwnersZNode, ConsumerOwnerZNode
from broker.protocol.errors import KafkaError
from broker.tools import CommandError, group_deletes, group_views, reset_offsets
from broker.tools.access import add_command_config, from_args

HEADER = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID")
BOOTSTRAP_HEADER = HEADER + ("HOST", "CLIENT-ID")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]", help="ZooKeeper of the groups")
    where.add_argument("--bootstrap-server", metavar="HOST:PORT", help="brokers: groups of their group coordinators")
    add_command_config(parser)
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--list", action="store_true", help="list the groups")
    actions.add_argument("--describe", action="store_true", help="describe a group: offsets, lag, owners")
    actions.add_argument("--reset-offsets", action="store_true", help="reset a group's offsets (--to-*, --shift-by)")
    actions.add_argument("--translate-from", metavar="SOURCE.properties",
                         help="translate the group's offsets in this mirror source cluster into the "
                              "--bootstrap-server (aggregate) cluster; commit them with --execute")
    parser.add_argument("--group", help="the group to describe")
    parser.add_argument("--all-groups", action="store_true", help="with --describe or --reset-offsets: every group")
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true", help="with --describe: offsets and lag (the default)")
    view.add_argument("--members", action="store_true", help="with --describe: the group's members")
    view.add_argument("--state", action="store_true", help="with --describe: the group's state and coordinator")
    reset_offsets.add_arguments(parser)
    group_deletes.add_arguments(parser, actions)


def run(args: argparse.Namespace) -> int:
    if group_deletes.wanted(args):
        return group_deletes.run(args)
    if args.translate_from:
        from broker.tools import translate_offsets

        return translate_offsets.run(args)
    if (args.describe or args.reset_offsets) and not (args.group or args.all_groups):
        raise CommandError(f"--{'describe' if args.describe else 'reset-offsets'} needs --group or --all-groups")
    if args.bootstrap_server and args.all_groups and not args.list:
        return _each_group(args)
    if args.bootstrap_server:
        return _run_bootstrap(args)
    if args.reset_offsets or args.members or args.state or args.all_groups:
        raise CommandError("--reset-offsets, --all-groups, --members and --state need --bootstrap-server")
    try:
        zk = ZkClient(args.zookeeper, session_timeout_ms=6000, connection_timeout_ms=10000)
        zk.start()
    except ZkError as exc:
        raise CommandError(str(exc)) from exc
    try:
        if args.list:
            for group in ZkOffsetStore(zk.kazoo).groups():
                print(group)
            return 0
        rows = describe(zk, args.group)
        _print_table(rows)
        return 0
    finally:
        zk.stop()


def _run_bootstrap(args: argparse.Namespace) -> int:
    from broker.tools import coordinator_groups

    access = from_args(args)
    try:
        if args.list:
            for group in coordinator_groups.list_groups(access):
                print(group)
            return 0
        if args.reset_offsets:
            return reset_offsets.reset_bootstrap(args)
        view = coordinator_groups.describe_group(access, args.group)
        coordinator = access.coordinator(args.group) if args.state else None
    except (OSError, BrokerConnectionError, KafkaError) as exc:
        raise CommandError(str(exc)) from exc
    if view.state == "Dead" and not view.rows:
        raise CommandError(f"consumer group '{args.group}' does not exist")
    if coordinator is not None:
        rows = group_views.state_rows(view, coordinator[1], coordinator[0], view.protocol)
        _print_lines(group_views.table(group_views.STATE_HEADER, rows))
        return 0
    if not view.members:
        print(f"Consumer group '{args.group}' has no active members.")
    if args.members:
        _print_lines(group_views.table(group_views.MEMBERS_HEADER, group_views.member_rows(view)))
        return 0
    _print_table(view.rows, BOOTSTRAP_HEADER)
    return 0


def _each_group(args: argparse.Namespace) -> int:
    """--all-groups: the action for every group the coordinators know, a blank line between groups."""
    from broker.tools import coordinator_groups

    try:
        groups = coordinator_groups.list_groups(from_args(args))
    except (OSError, BrokerConnectionError, KafkaError) as exc:
        raise CommandError(str(exc)) from exc
    for i, group in enumerate(groups):
        if i:
            print()
        _run_bootstrap(argparse.Namespace(**{**vars(args), "group": group, "all_groups": False}))
    return 0


def _print_lines(lines: list[str]) -> None:
    for line in lines:
        print(line)


def describe(zk: ZkClient, group: str) -> list[tuple]:
    """Rows of Kafka's table for ``group``; CommandError when the group does not exist."""
    if not zk.exists(ConsumerGroupZNode.path(group)):
        raise CommandError(f"consumer group '{group}' does not exist")
    store = ZkOffsetStore(zk.kazoo)
    topics = sorted(set(store.topics(group)) | set(zk.children(ConsumerOwnersZNode.path(group))))
    brokers = zk.live_brokers()
    consumers: dict[tuple[str, int], SimpleConsumer] = {}
    rows = []
    try:
        for topic in topics:
            assignment = zk.topic_assignment(topic) or {}
            committed = store.read(group, [(topic, p) for p in sorted(assignment)], with_metadata=False)
            for partition in sorted(assignment):
                known = committed.get((topic, partition))
                current = known.offset if known is not None else None
                owner = owner_of(zk, group, topic, partition)
                end = _log_end(zk, brokers, consumers, topic, partition)
                lag = end - current if end is not None and current is not None else None
                rows.append((group, topic, partition, current if current is not None else "-",
                             end if end is not None else "-", lag if lag is not None else "-", owner))
    finally:
        for c in consumers.values():
            c.close()
    return rows


def owner_of(zk: ZkClient, group: str, topic: str, partition: int) -> str:
    """The consumer thread owning the partition, or "-"."""
    found = zk.read(ConsumerOwnerZNode.path(group, topic, partition))
    return (ConsumerOwnerZNode.decode(found[0]) if found is not None else "") or "-"


def _log_end(zk: ZkClient, brokers: dict, consumers: dict, topic: str, partition: int) -> int | None:
    state = zk.partition_state(topic, partition)
    if state is None or state.leader not in brokers:
        return None
    info = brokers[state.leader]
    ep = info.endpoint("PLAINTEXT")
    host, port = (ep.host, ep.port) if ep is not None else (info.host, info.port)
    consumer = consumers.get((host, port))
    if consumer is None:
        consumer = consumers[(host, port)] = SimpleConsumer(host or "127.0.0.1", port, timeout=10)
    try:
        offsets = consumer.get_offsets_before(topic, partition, LATEST_TIME)
    except (BrokerConnectionError, KafkaError):
        return None
    return offsets[0] if offsets else None


def _print_table(rows: list[tuple], header: tuple = HEADER) -> None:
    table = [header] + [tuple(str(c) for c in r) for r in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for r in table:
        print(" ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
