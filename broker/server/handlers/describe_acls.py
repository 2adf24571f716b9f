"""DescribeAcls: the ACLs a filter matches, grouped by resource pattern (Describe on Cluster)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.security.acl import AccessControlEntry, ResourcePattern, entry_to_wire, pattern_to_wire
from broker.server.dispatch import Handler
from broker.server.handlers.acl_common import acl_store, binding_filter

if TYPE_CHECKING:
    from broker.server.broker import Broker


def handle(broker: Broker, header: RequestHeader, request: dict) -> dict:
    try:
        store = acl_store(broker, ApiKey.DESCRIBE_ACLS)
        selection = binding_filter(request)
    except KafkaError as exc:
        return {"throttle_time_ms": 0, "error_code": exc.code, "error_message": str(exc), "resources": []}
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in store.authorizer.bindings(selection):
        by_pattern.setdefault(binding.pattern, []).append(binding.entry)
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "resources": [
            {**pattern_to_wire(pattern), "acls": [entry_to_wire(e) for e in entries]}
            for pattern, entries in by_pattern.items()
        ],
    }


HANDLER = Handler(ApiKey.DESCRIBE_ACLS, 0, 1, handle)
