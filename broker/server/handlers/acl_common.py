"""What DescribeAcls, CreateAcls and DeleteAcls share: the ACL store (or SECURITY_DISABLED
without an authorizer), the Cluster check, and a filter checked for unknown codes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.protocol.errors import ClusterAuthorizationFailedError, InvalidRequestError, SecurityDisabledError
from broker.protocol.messages import ApiKey
from broker.security.acl import AclBindingFilter, filter_from_wire
from broker.server.acls import AclStore
from broker.server.authz import requester

if TYPE_CHECKING:
    from broker.server.broker import Broker


def acl_store(broker: Broker, api: ApiKey) -> AclStore:
    """The broker's ACL store when ``api`` may be served to this requester; else the KafkaError
    to answer (SECURITY_DISABLED without an authorizer, CLUSTER_AUTHORIZATION_FAILED)."""
    if broker.acl_store is None:
        raise SecurityDisabledError("No Authorizer is configured on the broker")
    if not requester(broker).may_api(api):
        raise ClusterAuthorizationFailedError(f"{broker.request.principal} may not use {api.name}")
    return broker.acl_store


def binding_filter(f: dict) -> AclBindingFilter:
    """A DescribeAcls / DeleteAcls filter; InvalidRequestError when it has unknown parts."""
    found = filter_from_wire(f)
    if 0 in (found.resource_type, found.pattern_type, found.operation, found.permission_type):
        raise InvalidRequestError("the filter has an unknown resource type, pattern type, operation or permission")
    return found
