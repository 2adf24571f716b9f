"""The ACL authorizer's rules (Kafka's AclAuthorizer), over an in-memory copy of the ACLs.

``authorize`` answers one question: may ``principal`` from ``host`` do ``operation`` on the
resource ``name`` of ``resource_type``? In Kafka's order:

1. a super user (``super.users``) may do anything;
2. the ACLs that apply are those of the literal name, of the wildcard ``*`` and of every
   prefixed pattern the name starts with; when there are none at all, the answer is
   ``allow.everyone.if.no.acl.found``;
3. a DENY for the principal (or ``User:*``), the host (or ``*``) and the operation (or ALL)
   refuses, whatever allows;
4. else an ALLOW of the operation (or ALL, or an operation that implies it: Read, Write, Delete
   and Alter imply Describe; AlterConfigs implies DescribeConfigs) grants.

Where the ACLs come from (ZooKeeper, kept current by change notifications) is the server's
business (broker.server.acls); this module only holds them and decides.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from broker.security.acl import (
    IMPLIED_BY,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

#: authorizer.class.name values that mean "our ZooKeeper-backed ACL authorizer": ours, and
#: Kafka's own names for it, so a Kafka server.properties carries over.
AUTHORIZER_CLASS_NAMES = (
    "broker.security.authorizer.AclAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
)


def check_authorizer_class_name(value: str) -> None:
    """authorizer.class.name's validator: empty (no authorization) or one of the known names."""
    if value and value.strip() not in AUTHORIZER_CLASS_NAMES:
        raise ValueError(f"expected empty or one of {', '.join(AUTHORIZER_CLASS_NAMES)}")


def parse_super_users(value: str | None) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:admin;User:broker``)."""
    return frozenset(p.strip() for p in (value or "").split(";") if p.strip())


class AclAuthorizer:
    """The ACLs of a cluster in memory, by resource pattern, and Kafka's authorization rules."""

    def __init__(self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        # (type, literal name) and (type, prefix) -> entries: a lookup is a few dict probes
        self._literal: dict[tuple[ResourceType, str], frozenset[AccessControlEntry]] = {}
        self._prefixed: dict[tuple[ResourceType, str], frozenset[AccessControlEntry]] = {}
        self._prefix_lengths: dict[ResourceType, set[int]] = {}

    # -- the ACLs held

    def set_acls(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """Replace the ACLs of one resource pattern (none: the pattern has no ACLs)."""
        held = frozenset(entries)
        if held:
            self._acls[pattern] = held
        else:
            self._acls.pop(pattern, None)
        self._reindex(pattern.resource_type)

    def replace_all(self, acls: Mapping[ResourcePattern, Iterable[AccessControlEntry]]) -> None:
        """Replace every ACL (the load at start)."""
        self._acls = {p: frozenset(e) for p, e in acls.items() if e}
        for resource_type in ResourceType:
            self._reindex(resource_type)

    def _reindex(self, resource_type: ResourceType) -> None:
        for index in (self._literal, self._prefixed):
            for key in [k for k in index if k[0] == resource_type]:
                del index[key]
        lengths: set[int] = set()
        for pattern, entries in self._acls.items():
            if pattern.resource_type != resource_type:
                continue
            if pattern.pattern_type == PatternType.PREFIXED:
                self._prefixed[(resource_type, pattern.name)] = entries
                lengths.add(len(pattern.name))
            else:
                self._literal[(resource_type, pattern.name)] = entries
        self._prefix_lengths[resource_type] = lengths

    def acls(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        """Every resource pattern with ACLs, and its entries."""
        return dict(self._acls)

    def bindings(self, selection: AclBindingFilter = AclBindingFilter()) -> list[AclBinding]:
        """The ACLs ``selection`` matches, sorted (DescribeAcls, DeleteAcls, `logbus acls --list`)."""
        return sorted(
            AclBinding(pattern, entry)
            for pattern, entries in self._acls.items()
            if selection.matches_pattern(pattern)
            for entry in entries
            if selection.matches_entry(entry)
        )

    # -- the rules

    def matching_entries(self, resource_type: ResourceType, name: str) -> list[frozenset[AccessControlEntry]]:
        """The entries that apply to one concrete resource: its literal name, ``*`` and its prefixes."""
        found = []
        for key in ((resource_type, name), (resource_type, WILDCARD_RESOURCE)):
            entries = self._literal.get(key)
            if entries is not None:
                found.append(entries)
        for length in self._prefix_lengths.get(resource_type, ()):
            if length <= len(name):
                entries = self._prefixed.get((resource_type, name[:length]))
                if entries is not None:
                    found.append(entries)
        return found

    def authorize(self, principal: str, host: str | None, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        """Whether ``principal`` connected from ``host`` may do ``operation`` on the resource."""
        if principal in self.super_users:
            return True
        found = self.matching_entries(resource_type, name)
        if not found:
            return self.allow_everyone_if_no_acl_found
        principals = (principal, WILDCARD_PRINCIPAL)
        hosts = (host or "", WILDCARD_HOST)
        allowing = IMPLIED_BY.get(operation, frozenset({operation}))
        allowed = False
        for entries in found:
            for entry in entries:
                if entry.principal not in principals or entry.host not in hosts:
                    continue
                if entry.permission_type == AclPermissionType.DENY:
                    if entry.operation in (operation, AclOperation.ALL):
                        return False
                elif entry.operation == AclOperation.ALL or entry.operation in allowing:
                    allowed = True
        return allowed

    def authorize_any(self, principal: str, host: str | None, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """Whether the principal may do ``operation`` on some resource of the type (Kafka's
        authorizeByResourceType, for InitProducerId: Write on any topic): a super user may; a
        DENY on the wildcard ``*`` refuses; any ALLOW that applies grants; a type without any ACL
        is open only with ``allow.everyone.if.no.acl.found``."""
        if principal in self.super_users:
            return True
        principals = (principal, WILDCARD_PRINCIPAL)
        hosts = (host or "", WILDCARD_HOST)
        allowing = IMPLIED_BY.get(operation, frozenset({operation}))
        seen = allowed = False
        for pattern, entries in self._acls.items():
            if pattern.resource_type != resource_type:
                continue
            seen = True
            for entry in entries:
                if entry.principal not in principals or entry.host not in hosts:
                    continue
                if entry.permission_type == AclPermissionType.DENY:
                    if pattern.name == WILDCARD_RESOURCE and entry.operation in (operation, AclOperation.ALL):
                        return False
                elif entry.operation == AclOperation.ALL or entry.operation in allowing:
                    allowed = True
        return allowed or (not seen and self.allow_everyone_if_no_acl_found)
