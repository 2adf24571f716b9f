"""What DescribeAcls, CreateAcls and DeleteAcls share: the ACL store (or SECURITY_DISABLED
without an authorizer), the Cluster check, and the wire dicts to and from broker.security.acl."""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING, TypeVar

from broker.protocol.errors import ClusterAuthorizationFailedError, InvalidRequestError, SecurityDisabledError
from broker.protocol.messages import ApiKey
from broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from broker.server.acls import AclStore
from broker.server.authz import requester

if TYPE_CHECKING:
    from broker.server.broker import Broker

E = TypeVar("E", bound=IntEnum)


def acl_store(broker: Broker, api: ApiKey) -> AclStore:
    """The broker's ACL store when ``api`` may be served to this requester; else the KafkaError
    to answer (SECURITY_DISABLED without an authorizer, CLUSTER_AUTHORIZATION_FAILED)."""
    if broker.acl_store is None:
        raise SecurityDisabledError("No Authorizer is configured on the broker")
    if not requester(broker).may_api(api):
        raise ClusterAuthorizationFailedError(f"{broker.request_principal} may not use {api.name}")
    return broker.acl_store


def _code(enum: type[E], value: int) -> E:
    try:
        return enum(value)
    except ValueError:
        return enum(0)  # UNKNOWN


def binding_filter(f: dict) -> AclBindingFilter:
    """A DescribeAcls / DeleteAcls filter; InvalidRequestError (as a KafkaError) when it has UNKNOWN parts."""
    found = AclBindingFilter(
        _code(ResourceType, f["resource_type_filter"]), f["resource_name_filter"],
        _code(PatternType, f.get("pattern_type_filter", PatternType.LITERAL)), f["principal_filter"], f["host_filter"],
        _code(AclOperation, f["operation"]), _code(AclPermissionType, f["permission_type"]),
    )
    if 0 in (found.resource_type, found.pattern_type, found.operation, found.permission_type):
        raise InvalidRequestError("the filter has an unknown resource type, pattern type, operation or permission")
    return found


def creation_binding(c: dict) -> AclBinding:
    """One CreateAcls creation as a binding (validated by the caller)."""
    return AclBinding(
        ResourcePattern(_code(ResourceType, c["resource_type"]), c["resource_name"],
                        _code(PatternType, c.get("resource_pattern_type", PatternType.LITERAL))),
        AccessControlEntry(c["principal"], c["host"], _code(AclOperation, c["operation"]),
                           _code(AclPermissionType, c["permission_type"])),
    )


def entry_fields(entry: AccessControlEntry) -> dict:
    return {"principal": entry.principal, "host": entry.host, "operation": int(entry.operation),
            "permission_type": int(entry.permission_type)}


def pattern_fields(pattern: ResourcePattern) -> dict:
    return {"resource_type": int(pattern.resource_type), "resource_name": pattern.name,
            "pattern_type": int(pattern.pattern_type)}
