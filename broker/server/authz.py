"""Authorization inside the handlers: who sent the request, and may they do what an API asks.

The connection sets ``Broker.request`` (the principal and the peer's host) only while a request
is dispatched, so a handler takes a ``Requester`` at its start and asks it later, in callbacks
too. Without an authorizer (``authorizer.class.name`` empty) everything is allowed. What each
API requires is broker.security.api_acls's table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from broker.protocol.api_keys import ApiKey
from broker.protocol.errors import KafkaError, error_for_code
from broker.security.acl import CLUSTER_NAME, ResourceType
from broker.security.api_acls import CONFIG_RESOURCE_TYPES, REQUIRED, SUPPORTED_OPERATIONS, Required
from broker.security.authorizer import AclAuthorizer

if TYPE_CHECKING:
    from broker.server.broker import Broker

T = TypeVar("T")


@dataclass(frozen=True)
class Requester:
    """The principal and host of one request, and the authorizer that judges them."""

    authorizer: AclAuthorizer | None
    principal: str
    host: str | None

    @property
    def checks(self) -> bool:
        """Whether anything is checked (an authorizer is configured): the hot paths skip their loops if not."""
        return self.authorizer is not None

    def may(self, required: Required, name: str = CLUSTER_NAME) -> bool:
        """Whether the operation ``required`` is allowed on resource ``name`` (the cluster by default)."""
        if self.authorizer is None:
            return True
        return self.authorizer.authorize(self.principal, self.host, required.operation, required.resource_type, name)

    def may_api(self, api: ApiKey, name: str = CLUSTER_NAME) -> bool:
        """Whether ``api``'s own check (REQUIRED[api]) passes on resource ``name``."""
        return self.may(REQUIRED[api], name)

    def authorized_operations(self, resource_type: ResourceType, name: str = CLUSTER_NAME) -> int:
        """Kafka's bitfield (bit = operation code) of what the principal may do to the resource;
        every operation of its type without an authorizer."""
        bits = 0
        for op in SUPPORTED_OPERATIONS[resource_type]:
            if self.may(Required(resource_type, op), name):
                bits |= 1 << op
        return bits

    def may_any(self, required: Required) -> bool:
        """Whether the operation is allowed on some resource of its type."""
        if self.authorizer is None:
            return True
        return self.authorizer.authorize_any(self.principal, self.host, required.operation, required.resource_type)

    def refusal(self, required: Required, name: str = CLUSTER_NAME) -> KafkaError | None:
        """None when allowed; else the error to answer (TOPIC_AUTHORIZATION_FAILED...)."""
        if self.may(required, name):
            return None
        return error_for_code(required.error, f"{self.principal} may not {required.operation.name} "
                                              f"{required.resource_type.name} {name}")

    def config_refusal(self, api: ApiKey, config_resource_type: int, name: str) -> KafkaError | None:
        """For DescribeConfigs / AlterConfigs: the refusal of one resource (a topic's config on
        the topic, a broker's on the cluster), or None."""
        resource_type = CONFIG_RESOURCE_TYPES.get(config_resource_type)
        if resource_type is None:
            return None  # not served: the handler says so
        required = Required(resource_type, REQUIRED[api].operation)
        return self.refusal(required, name if resource_type == ResourceType.TOPIC else CLUSTER_NAME)

    def guard(self, required: Required, lookup: Callable[[str, int], T]) -> Callable[[str, int], T]:
        """``lookup(topic, partition)`` that first raises the refusal of an unauthorized topic
        (for answer_partitions: the partition is answered with the error)."""

        def guarded(topic: str, partition: int) -> T:
            refused = self.refusal(required, topic)
            if refused is not None:
                raise refused
            return lookup(topic, partition)

        return guarded


def requester(broker: Broker) -> Requester:
    """The requester of the request being dispatched; call it before any Deferred."""
    return Requester(broker.authorizer, broker.request.principal, broker.request.peer_host)
