"""FindCoordinator: which broker coordinates a consumer group.

Every broker gives the same answer: ``placement.coordinator_for`` over the live brokers it
sees in ZooKeeper. Transaction coordinators (key_type 1) are not served.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.protocol.errors import ErrorCode
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.server.authz import requester
from broker.server.dispatch import Handler

if TYPE_CHECKING:
    from broker.server.broker import Broker

GROUP_KEY = 0


def _error(code: int, message: str) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "node_id": -1, "host": "", "port": -1}


def handle(broker: Broker, header: RequestHeader, request: dict) -> dict:
    if request.get("key_type", GROUP_KEY) != GROUP_KEY:
        return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE, "transactions are not served")
    if not request["key"]:
        return _error(ErrorCode.INVALID_GROUP_ID, "empty group id")
    if not requester(broker).may_api(ApiKey.FIND_COORDINATOR, request["key"]):
        return _error(ErrorCode.GROUP_AUTHORIZATION_FAILED, f"may not describe group {request['key']}")
    node = broker.coordinator.coordinator_of(request["key"]) if broker.coordinator else None
    endpoint = broker.metadata.endpoint(node, broker.request.listener) if node is not None else None
    if endpoint is None:
        return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE, "no live broker")
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "node_id": endpoint.node_id,
        "host": endpoint.host,
        "port": endpoint.port,
    }


HANDLER = Handler(ApiKey.FIND_COORDINATOR, 0, 2, handle)
