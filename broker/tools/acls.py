"""`logbus acls`: Kafka's kafka-acls, to add, remove and list ACLs.

    logbus acls --bootstrap-server H:P --add --allow-principal User:alice --operation Read --topic t
    logbus acls --bootstrap-server H:P --add --allow-principal User:alice --consumer --topic t --group g
    logbus acls --authorizer-properties zookeeper.connect=H:P/chroot --list --topic t
    logbus acls --bootstrap-server H:P --remove --force --topic t --resource-pattern-type prefixed

Through brokers (CreateAcls, DescribeAcls, DeleteAcls: the caller needs Alter and Describe on the
cluster) or straight into ZooKeeper (as Kafka's tool does with ``--authorizer-properties``); the
brokers apply a change within moments either way. Output is Kafka's.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol

from broker.client.connection import BrokerConnection, BrokerConnectionError
from broker.protocol.errors import ErrorCode
from broker.protocol.messages import ApiKey
from broker.security.acl import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    binding_from_wire,
    creation_to_wire,
    filter_to_wire,
    parse_principal,
)
from broker.tools import CommandError, zookeeper_session
from broker.tools.access import add_command_config, from_args

if TYPE_CHECKING:
    from broker.cluster.zk import ZkClient

ACLS_VERSION = 1
Op = AclOperation
#: --producer and --consumer: the operations each resource type gets (Kafka's AclCommand).
PRODUCER_OPS = {ResourceType.TOPIC: (Op.WRITE, Op.DESCRIBE, Op.CREATE), ResourceType.TRANSACTIONAL_ID: (Op.WRITE, Op.DESCRIBE)}
CONSUMER_OPS = {ResourceType.TOPIC: (Op.READ, Op.DESCRIBE), ResourceType.GROUP: (Op.READ,)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--bootstrap-server", metavar="HOST:PORT",
                       help="brokers of the cluster (CreateAcls, DescribeAcls, DeleteAcls)")
    where.add_argument("--authorizer-properties", nargs="+", metavar="KEY=VALUE",
                       help="zookeeper.connect=HOST:PORT[/chroot]: change ZooKeeper directly")
    add_command_config(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true", help="remove ACLs")
    action.add_argument("--list", action="store_true", help="list ACLs")
    parser.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME",
                        help="principal allowed (User:alice)")
    parser.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME", help="principal denied")
    parser.add_argument("--principal", action="append", default=[], metavar="TYPE:NAME",
                        help="--list: only this principal's ACLs")
    parser.add_argument("--allow-host", action="append", default=[], metavar="HOST", help="host allowed (default *)")
    parser.add_argument("--deny-host", action="append", default=[], metavar="HOST", help="host denied (default *)")
    parser.add_argument("--operation", action="append", default=[], metavar="OP",
                        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                             "AlterConfigs, IdempotentWrite, All (default All)")
    parser.add_argument("--topic", action="append", default=[], metavar="TOPIC", help="a topic ('*': every topic)")
    parser.add_argument("--group", action="append", default=[], metavar="GROUP", help="a consumer group ('*': every group)")
    parser.add_argument("--transactional-id", action="append", default=[], metavar="ID", help="a transactional id")
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument("--resource-pattern-type", default="literal", type=str.lower,
                        choices=["literal", "prefixed", "match", "any"],
                        help="literal (default) or prefixed; --list and --remove also take match and any")
    parser.add_argument("--producer", action="store_true", help="Write, Describe and Create on the topics")
    parser.add_argument("--consumer", action="store_true", help="Read and Describe on the topics, Read on the group")
    parser.add_argument("--idempotent", action="store_true", help="with --producer: IdempotentWrite on the cluster")
    parser.add_argument("--force", action="store_true", help="--remove without asking")


# ---------------------------------------------------------------------- where ACLs are kept


class Backend(Protocol):
    def add(self, bindings: list[AclBinding]) -> None: ...
    def remove(self, filters: list[AclBindingFilter]) -> list[AclBinding]: ...
    def list(self, selection: AclBindingFilter) -> list[AclBinding]: ...


class BrokerBackend:
    """Over the Kafka protocol, to one of the bootstrap servers."""

    def __init__(self, conn: BrokerConnection) -> None:
        self.conn = conn

    def add(self, bindings: list[AclBinding]) -> None:
        answer = self.conn.request(ApiKey.CREATE_ACLS, ACLS_VERSION, {"creations": [creation_to_wire(b) for b in bindings]})
        for result in answer["results"]:
            _check(result["error_code"], result["error_message"])

    def remove(self, filters: list[AclBindingFilter]) -> list[AclBinding]:
        answer = self.conn.request(ApiKey.DELETE_ACLS, ACLS_VERSION, {"filters": [filter_to_wire(f) for f in filters]})
        removed = []
        for result in answer["filter_results"]:
            _check(result["error_code"], result["error_message"])
            removed += [binding_from_wire(m) for m in result["matching_acls"]]
        return removed

    def list(self, selection: AclBindingFilter) -> list[AclBinding]:
        answer = self.conn.request(ApiKey.DESCRIBE_ACLS, ACLS_VERSION, filter_to_wire(selection))
        _check(answer["error_code"], answer["error_message"])
        return [binding_from_wire({**resource, **acl}) for resource in answer["resources"] for acl in resource["acls"]]


class ZooKeeperBackend:
    """Straight into ZooKeeper, as Kafka's tool with --authorizer-properties."""

    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk

    def add(self, bindings: list[AclBinding]) -> None:
        from broker.cluster.acls import add_acls

        add_acls(self.zk, bindings)

    def remove(self, filters: list[AclBindingFilter]) -> list[AclBinding]:
        from broker.cluster.acls import remove_acls

        return [b for found in remove_acls(self.zk, filters)[0] for b in found]

    def list(self, selection: AclBindingFilter) -> list[AclBinding]:
        from broker.cluster.acls import load_all

        return sorted(AclBinding(p, e) for p, entries in load_all(self.zk).items()
                      for e in entries if selection.matches(AclBinding(p, e)))


def _check(code: int, message: str | None) -> None:
    if code != ErrorCode.NONE:
        raise CommandError(f"{ErrorCode(code).name}: {message or ''}".rstrip(": "))


@contextmanager
def _backend(args: argparse.Namespace) -> Iterator[Backend]:
    if args.bootstrap_server:
        try:
            conn = from_args(args, timeout=30.0).first_answering("logbus-acls")
        except BrokerConnectionError as exc:
            raise CommandError(str(exc)) from None
        with conn:
            yield BrokerBackend(conn)
        return
    props = dict(p.partition("=")[::2] for p in args.authorizer_properties)
    connect = props.get("zookeeper.connect", "").strip()
    if not connect:
        raise CommandError("--authorizer-properties needs zookeeper.connect=HOST:PORT[/chroot]")
    with zookeeper_session(connect) as zk:
        yield ZooKeeperBackend(zk)


# ---------------------------------------------------------------------- what the flags say


def _patterns(args: argparse.Namespace, pattern_type: PatternType) -> list[ResourcePattern]:
    """The resources named (--topic, --group, --transactional-id, --cluster)."""
    named = [(ResourceType.TOPIC, t) for t in args.topic] + [(ResourceType.GROUP, g) for g in args.group]
    named += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster:
        named.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return [ResourcePattern(rt, name, PatternType.LITERAL if rt == ResourceType.CLUSTER else pattern_type)
            for rt, name in named]


def _operations(args: argparse.Namespace) -> list[AclOperation]:
    try:
        return [AclOperation.from_zk_name(o) for o in args.operation] or [AclOperation.ALL]
    except ValueError as exc:
        raise CommandError(f"--operation: {exc}") from None


def _entries(args: argparse.Namespace, operations: list[AclOperation]) -> list[AccessControlEntry]:
    try:
        allowed = [parse_principal(p) for p in args.allow_principal]
        denied = [parse_principal(p) for p in args.deny_principal]
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    if args.allow_host and not allowed:
        raise CommandError("--allow-host needs --allow-principal")
    if args.deny_host and not denied:
        raise CommandError("--deny-host needs --deny-principal")
    entries = []
    for principals, hosts, permission in ((allowed, args.allow_host, AclPermissionType.ALLOW),
                                          (denied, args.deny_host, AclPermissionType.DENY)):
        for principal in principals:
            for host in hosts or [WILDCARD_HOST]:
                entries += [AccessControlEntry(principal, host, op, permission) for op in operations]
    return entries


def _bindings_to_add(args: argparse.Namespace, pattern_type: PatternType) -> list[AclBinding]:
    """--add: each resource with each entry; --producer / --consumer choose the operations per resource type."""
    patterns = _patterns(args, pattern_type)
    if not patterns:
        raise CommandError("--add needs a resource: --topic, --group, --transactional-id or --cluster")
    if not args.allow_principal and not args.deny_principal:
        raise CommandError("--add needs --allow-principal or --deny-principal")
    if not (args.producer or args.consumer):
        entries = _entries(args, _operations(args))
        return [AclBinding(p, e) for p in patterns for e in entries]
    if args.operation:
        raise CommandError("--operation does not go with --producer or --consumer")
    if args.consumer and not args.group:
        raise CommandError("--consumer needs --group")
    by_type: dict[ResourceType, set[AclOperation]] = {}
    for chosen, table in ((args.producer, PRODUCER_OPS), (args.consumer, CONSUMER_OPS)):
        if chosen:
            for rt, ops in table.items():
                by_type.setdefault(rt, set()).update(ops)
    bindings = [AclBinding(p, e) for p in patterns if p.resource_type in by_type
                for e in _entries(args, sorted(by_type[p.resource_type]))]
    if args.producer and args.idempotent:
        cluster = ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME)
        bindings += [AclBinding(cluster, e) for e in _entries(args, [AclOperation.IDEMPOTENT_WRITE])]
    return bindings


def _filters(args: argparse.Namespace, pattern_type: PatternType, principal: str | None = None) -> list[AclBindingFilter]:
    """--list / --remove: one filter per resource named, or every ACL when none is."""
    patterns = _patterns(args, pattern_type)
    if not patterns:
        return [AclBindingFilter(principal=principal)]
    return [AclBindingFilter(p.resource_type, p.name, p.pattern_type, principal=principal) for p in patterns]


# ---------------------------------------------------------------------- output, as Kafka's


def _print_by_pattern(heading: str, bindings: list[AclBinding]) -> None:
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in sorted(bindings):
        by_pattern.setdefault(b.pattern, []).append(b.entry)
    for pattern, entries in by_pattern.items():
        print(f"{heading} `{pattern}`: ")
        for entry in entries:
            print(f" \t{entry} ")
        print()


def run(args: argparse.Namespace) -> int:
    pattern_type = PatternType[args.resource_pattern_type.upper()]
    try:
        if args.add:
            if pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
                raise CommandError("--add takes --resource-pattern-type literal or prefixed")
            bindings = _bindings_to_add(args, pattern_type)
            with _backend(args) as backend:
                _print_by_pattern("Adding ACLs for resource", bindings)
                backend.add(bindings)
                patterns = sorted({b.pattern for b in bindings})
                current = [b for p in patterns for b in backend.list(AclBindingFilter(p.resource_type, p.name, p.pattern_type))]
                _print_by_pattern("Current ACLs for resource", current)
            return 0
        if args.remove:
            filters = _filters(args, pattern_type)
            # principals named: only their entries (of the --operation given, else of any operation)
            ops = _operations(args) if args.operation else [AclOperation.ANY]
            entries = _entries(args, ops) if (args.allow_principal or args.deny_principal) else []
            if entries:  # only these entries of the resources named
                filters = [AclBindingFilter(f.resource_type, f.name, f.pattern_type, e.principal, e.host, e.operation,
                                            e.permission_type) for f in filters for e in entries]
            if not args.force and not _confirmed(filters):
                return 0
            with _backend(args) as backend:
                removed = backend.remove(filters)
            _print_by_pattern("Removing ACLs for resource", removed)
            return 0
        principals = args.principal or [None]
        with _backend(args) as backend:
            found: set[AclBinding] = set()
            for principal in principals:
                for f in _filters(args, pattern_type, principal):
                    found.update(backend.list(f))
        _print_by_pattern("Current ACLs for resource", sorted(found))
        return 0
    except (OSError, BrokerConnectionError) as exc:
        raise CommandError(str(exc)) from exc


def _confirmed(filters: list[AclBindingFilter]) -> bool:
    shown = ", ".join(f"{f.resource_type.name}:{f.name or '*'}" for f in filters)
    print(f"Are you sure you want to remove ACLs matching {shown}? (y/n)", flush=True)
    return sys.stdin.readline().strip().lower() in ("y", "yes")
