"""LeaveGroup: members leave at once (v3 leaves a batch), and the group rebalances."""

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
    leaving = [m["member_id"] for m in request["members"]] if "members" in request else [request["member_id"]]
    error = group_error(broker, ApiKey.LEAVE_GROUP, request["group_id"])
    results: list[dict] = []
    if error is None:
        group = broker.coordinator.group(request["group_id"])
        for member_id in leaving:
            code = group.leave(member_id) if group else ErrorCode.UNKNOWN_MEMBER_ID
            results.append({"member_id": member_id, "group_instance_id": None, "error_code": code})
        if header.api_version < 3 and results:
            error = results[0]["error_code"]
    return {"throttle_time_ms": 0, "error_code": error or ErrorCode.NONE, "members": results}


HANDLER = Handler(ApiKey.LEAVE_GROUP, 0, 3, handle)
