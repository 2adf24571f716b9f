"""SyncGroup: the leader hands in the assignment; every member gets its own share."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.protocol.errors import ErrorCode
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.server.dispatch import Handler
from broker.server.handlers.group_common import deferred_answer, group_error

if TYPE_CHECKING:
    from broker.server.broker import Broker


def handle(broker: Broker, header: RequestHeader, request: dict) -> Any:
    error = group_error(broker, ApiKey.SYNC_GROUP, request["group_id"])
    group = broker.coordinator.group(request["group_id"]) if error is None else None
    if error is None and group is None:
        error = ErrorCode.UNKNOWN_MEMBER_ID
    if error is not None or group is None:
        return {"throttle_time_ms": 0, "error_code": error, "assignment": b""}
    d, respond = deferred_answer()
    assignments = {a["member_id"]: bytes(a["assignment"]) for a in request["assignments"]}
    group.sync(request["member_id"], request["generation_id"], assignments, respond)
    return d


HANDLER = Handler(ApiKey.SYNC_GROUP, 0, 3, handle)
