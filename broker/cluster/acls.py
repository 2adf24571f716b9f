"""ACLs in ZooKeeper, blocking (for the broker's threads and for `logbus acls
--authorizer-properties`): read them all, add bindings, delete what filters match. Each change
is a conditional write of one resource pattern's znode, retried when another writer got there
first, followed by a change notification (ZkClient.set_acls) every broker applies."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from broker.cluster.zk import ZkClient, ZkVersionConflictError
from broker.security.acl import AccessControlEntry, AclBinding, AclBindingFilter, PatternType, ResourcePattern

#: A resource pattern -> its ACL entries.
Stored = dict[ResourcePattern, frozenset[AccessControlEntry]]
PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)
_MAX_ATTEMPTS = 20


def load_all(zk: ZkClient) -> Stored:
    """Every stored ACL by resource pattern (blocking)."""
    return {pattern: zk.acls(pattern)[0] for pattern in zk.acl_patterns()}


def add_acls(zk: ZkClient, bindings: Iterable[AclBinding]) -> Stored:
    """Store ``bindings`` (blocking): each pattern's znode read, extended and written back
    conditionally, retried when another writer got there first. Returns the patterns' new ACLs."""
    by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for binding in bindings:
        by_pattern.setdefault(binding.pattern, set()).add(binding.entry)
    return {
        pattern: _update(zk, pattern, lambda held, entries=entries: held | entries)
        for pattern, entries in by_pattern.items()
    }


def remove_acls(zk: ZkClient, filters: list[AclBindingFilter]) -> tuple[list[list[AclBinding]], Stored]:
    """Delete what each filter matches (blocking): per filter the ACLs it deleted, and the
    touched patterns' new ACLs."""
    deleted: list[list[AclBinding]] = [[] for _ in filters]
    stored: Stored = {}
    for pattern in zk.acl_patterns():
        if not any(f.matches_pattern(pattern) for f in filters):
            continue
        removed: dict[int, list[AclBinding]] = {}

        def without(held: frozenset, pattern: ResourcePattern = pattern, removed: dict = removed) -> frozenset:
            removed.clear()
            for i, f in enumerate(filters):
                if f.matches_pattern(pattern):
                    removed[i] = [AclBinding(pattern, e) for e in sorted(held) if f.matches_entry(e)]
            gone = {b.entry for found in removed.values() for b in found}
            return frozenset(held - gone)

        stored[pattern] = _update(zk, pattern, without)
        for i, found in removed.items():
            deleted[i].extend(found)
    return deleted, stored


def _update(zk: ZkClient, pattern: ResourcePattern, change: Any) -> frozenset[AccessControlEntry]:
    for _ in range(_MAX_ATTEMPTS):
        held, version = zk.acls(pattern)
        wanted = frozenset(change(held))
        if wanted == held:
            return held
        try:
            zk.set_acls(pattern, wanted, version)
            return wanted
        except ZkVersionConflictError:
            continue
    raise ZkVersionConflictError(f"the ACLs of {pattern} kept changing; try again")
