"""Heartbeat: a member is alive; REBALANCE_IN_PROGRESS tells it to rejoin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.protocol.errors import ErrorCode
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.server.dispatch import Handler
from broker.server.handlers.group_common import group_error

if TYPE_CHECKING:
    from broker.server.broker import Broker


def handle(broker: Broker, header: RequestHeader, request: dict) -> dict:
    error = group_error(broker, ApiKey.HEARTBEAT, request["group_id"])
    if error is None:
        group = broker.coordinator.group(request["group_id"])
        error = group.heartbeat(request["member_id"], request["generation_id"]) if group else ErrorCode.UNKNOWN_MEMBER_ID
    return {"throttle_time_ms": 0, "error_code": error}


HANDLER = Handler(ApiKey.HEARTBEAT, 0, 3, handle)
