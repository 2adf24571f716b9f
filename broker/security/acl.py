"""ACLs as Kafka defines them: resource types, pattern types, operations and permission types
with Kafka's wire codes and ZooKeeper names, and the rules (an ACL binding, a filter over them).

A binding is a resource pattern (type, name, LITERAL or PREFIXED) and an access control entry
(principal, host, operation, ALLOW or DENY). The wire protocol carries the codes; ZooKeeper's
JSON carries the names (``"Topic"``, ``"Read"``, ``"Allow"``). No Twisted, no ZooKeeper here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"
E = TypeVar("E", bound=IntEnum)


class ResourceType(IntEnum):
    """Kafka's ResourceType codes."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6

    @property
    def zk_name(self) -> str:
        """The name in ZooKeeper paths: ``Topic``, ``TransactionalId``..."""
        return _camel(self.name)

    @classmethod
    def from_zk_name(cls, name: str) -> ResourceType:
        return _by_camel(cls, name)


class PatternType(IntEnum):
    """Kafka's PatternType codes; MATCH and ANY exist only in filters."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    """Kafka's AclOperation codes."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12

    @property
    def zk_name(self) -> str:
        """The name in ZooKeeper's JSON: ``Read``, ``ClusterAction``..."""
        return _camel(self.name)

    @classmethod
    def from_zk_name(cls, name: str) -> AclOperation:
        return _by_camel(cls, name)


class AclPermissionType(IntEnum):
    """Kafka's AclPermissionType codes."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3

    @property
    def zk_name(self) -> str:
        return _camel(self.name)

    @classmethod
    def from_zk_name(cls, name: str) -> AclPermissionType:
        return _by_camel(cls, name)


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _by_camel(enum: type[E], name: str) -> E:
    wanted = re.sub(r"[_\s-]", "", name).upper()
    for member in enum:
        if member.name.replace("_", "") == wanted:
            return member
    raise ValueError(f"unknown {enum.__name__} {name!r}")


#: An allow of any of these operations implies Describe (DescribeConfigs: AlterConfigs), as in Kafka.
IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                                      AclOperation.DELETE, AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
}


@dataclass(frozen=True, order=True)
class ResourcePattern:
    """A resource (or, PREFIXED, every resource whose name starts with ``name``) of one type."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        return f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, patternType={self.pattern_type.name})"


@dataclass(frozen=True, order=True)
class AccessControlEntry:
    """Who (principal, host) may or may not (permission) do what (operation)."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
                f"permissionType={self.permission_type.name})")


@dataclass(frozen=True, order=True)
class AclBinding:
    """One ACL: a resource pattern and an entry."""

    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True)
class AclBindingFilter:
    """What DescribeAcls and DeleteAcls select: None (or ANY) matches anything; pattern MATCH
    selects the patterns that would apply to the named resource (literal, wildcard, prefixes)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.name is None:
                return True
            if pattern.pattern_type == PatternType.PREFIXED:
                return self.name.startswith(pattern.name)
            return pattern.name in (self.name, WILDCARD_RESOURCE)
        if self.pattern_type != PatternType.ANY and self.pattern_type != pattern.pattern_type:
            return False
        return self.name is None or self.name == pattern.name

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and (self.operation == AclOperation.ANY or self.operation == entry.operation)
            and (self.permission_type == AclPermissionType.ANY or self.permission_type == entry.permission_type)
        )

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)


def invalid_binding(binding: AclBinding) -> str | None:
    """Why CreateAcls must refuse ``binding`` (Kafka's checks), or None when it may be stored."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"invalid resource type {pattern.resource_type.name}"
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"invalid pattern type {pattern.pattern_type.name}: use LITERAL or PREFIXED"
    if not pattern.name:
        return "the resource name is empty"
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return f"the cluster resource is named {CLUSTER_NAME}"
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"invalid operation {entry.operation.name}"
    if entry.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"invalid permission type {entry.permission_type.name}"
    if ":" not in entry.principal:
        return f"principal {entry.principal!r} is not of the form Type:name"
    if not entry.host:
        return "the host is empty"
    return None


def parse_principal(text: str) -> str:
    """A principal as given (``User:alice``); ValueError unless it is ``Type:name``."""
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name:
        raise ValueError(f"principal {text!r} is not of the form Type:name (User:alice)")
    return text


# -- the wire form (DescribeAcls, CreateAcls, DeleteAcls dicts: broker.protocol.messages.acls)


def _code(enum: type[E], value: int) -> E:
    """A wire code as its enum member; an unknown code is UNKNOWN (0), which validation refuses."""
    try:
        return enum(value)
    except ValueError:
        return enum(0)


def filter_from_wire(f: dict) -> AclBindingFilter:
    """A DescribeAcls request or a DeleteAcls filter."""
    return AclBindingFilter(
        _code(ResourceType, f["resource_type_filter"]), f["resource_name_filter"],
        _code(PatternType, f.get("pattern_type_filter", PatternType.LITERAL)), f["principal_filter"], f["host_filter"],
        _code(AclOperation, f["operation"]), _code(AclPermissionType, f["permission_type"]),
    )


def filter_to_wire(f: AclBindingFilter) -> dict:
    return {
        "resource_type_filter": int(f.resource_type), "resource_name_filter": f.name,
        "pattern_type_filter": int(f.pattern_type), "principal_filter": f.principal, "host_filter": f.host,
        "operation": int(f.operation), "permission_type": int(f.permission_type),
    }


def creation_from_wire(c: dict) -> AclBinding:
    """One CreateAcls creation."""
    return AclBinding(
        ResourcePattern(_code(ResourceType, c["resource_type"]), c["resource_name"],
                        _code(PatternType, c.get("resource_pattern_type", PatternType.LITERAL))),
        AccessControlEntry(c["principal"], c["host"], _code(AclOperation, c["operation"]),
                           _code(AclPermissionType, c["permission_type"])),
    )


def creation_to_wire(b: AclBinding) -> dict:
    return {
        "resource_type": int(b.pattern.resource_type), "resource_name": b.pattern.name,
        "resource_pattern_type": int(b.pattern.pattern_type), **entry_to_wire(b.entry),
    }


def pattern_to_wire(p: ResourcePattern) -> dict:
    """A pattern as DescribeAcls and DeleteAcls answer it."""
    return {"resource_type": int(p.resource_type), "resource_name": p.name, "pattern_type": int(p.pattern_type)}


def entry_to_wire(e: AccessControlEntry) -> dict:
    return {"principal": e.principal, "host": e.host, "operation": int(e.operation), "permission_type": int(e.permission_type)}


def binding_from_wire(d: dict) -> AclBinding:
    """A pattern and entry as DeleteAcls answers them (DescribeAcls: merge the resource into each entry)."""
    return AclBinding(
        ResourcePattern(_code(ResourceType, d["resource_type"]), d["resource_name"],
                        _code(PatternType, d.get("pattern_type", PatternType.LITERAL))),
        AccessControlEntry(d["principal"], d["host"], _code(AclOperation, d["operation"]),
                           _code(AclPermissionType, d["permission_type"])),
    )
