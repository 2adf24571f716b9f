"""`logbus acls` flags turned into bindings and filters (no broker): --producer, --consumer,
--idempotent, hosts, pattern types, and the one-line refusals."""

import argparse

import pytest

from broker.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from broker.tools import CommandError
from broker.tools.acls import _bindings_to_add, _filters, add_arguments, run


def args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(["--bootstrap-server", "h:1", *argv])


def ops(bindings, resource_type) -> set[AclOperation]:
    return {b.entry.operation for b in bindings if b.pattern.resource_type == resource_type}


def test_operations_default_to_all_and_hosts_to_star():
    bindings = _bindings_to_add(args("--add", "--allow-principal", "User:a", "--topic", "t"), PatternType.LITERAL)
    assert [(b.entry.operation, b.entry.host, b.entry.permission_type) for b in bindings] == [
        (AclOperation.ALL, "*", AclPermissionType.ALLOW)]


def test_each_principal_host_operation_and_resource():
    a = args("--add", "--allow-principal", "User:a", "--allow-principal", "User:b", "--allow-host", "10.0.0.1",
             "--operation", "Read", "--operation", "describe", "--topic", "t", "--group", "g",
             "--deny-principal", "User:c", "--deny-host", "10.0.0.9")
    bindings = _bindings_to_add(a, PatternType.PREFIXED)
    assert len(bindings) == 2 * (2 * 2 + 1 * 2)  # resources x (allowed x ops + denied x ops)
    assert {b.pattern.pattern_type for b in bindings} == {PatternType.PREFIXED}
    assert {b.entry.host for b in bindings if b.entry.permission_type == AclPermissionType.DENY} == {"10.0.0.9"}


def test_producer_and_consumer_convenience():
    a = args("--add", "--allow-principal", "User:a", "--producer", "--consumer", "--idempotent", "--topic", "t",
             "--group", "g")
    bindings = _bindings_to_add(a, PatternType.LITERAL)
    assert ops(bindings, ResourceType.TOPIC) == {AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE,
                                                 AclOperation.READ}
    assert ops(bindings, ResourceType.GROUP) == {AclOperation.READ}
    assert ops(bindings, ResourceType.CLUSTER) == {AclOperation.IDEMPOTENT_WRITE}


def test_cluster_is_always_literal():
    bindings = _bindings_to_add(args("--add", "--allow-principal", "User:a", "--cluster", "--operation", "Alter"),
                                PatternType.PREFIXED)
    assert [(b.pattern.name, b.pattern.pattern_type) for b in bindings] == [("kafka-cluster", PatternType.LITERAL)]


def test_list_filters_every_acl_without_a_resource():
    (everything,) = _filters(args("--list"), PatternType.ANY)
    assert everything.resource_type == ResourceType.ANY and everything.name is None


@pytest.mark.parametrize("argv, message", [
    (["--add", "--topic", "t"], "--allow-principal or --deny-principal"),
    (["--add", "--allow-principal", "User:a"], "needs a resource"),
    (["--add", "--allow-principal", "alice", "--topic", "t"], "Type:name"),
    (["--add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"], "--operation"),
    (["--add", "--allow-principal", "User:a", "--consumer", "--topic", "t"], "--consumer needs --group"),
    (["--add", "--allow-host", "h", "--deny-principal", "User:a", "--topic", "t"], "--allow-host needs --allow-principal"),
    (["--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"], "literal or prefixed"),
])
def test_refusals_are_one_line(argv, message):
    with pytest.raises(CommandError, match=message):
        run(args(*argv))
