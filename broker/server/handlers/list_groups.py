"""ListGroups: the groups this broker coordinates — live ones in memory, and groups that only
have offsets in ZooKeeper (ZooKeeper consumers, or standard clients now gone), listed with an
empty protocol type as Kafka lists offset-only groups."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet import threads

from broker.protocol.errors import ErrorCode
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.server.dispatch import Handler

if TYPE_CHECKING:
    from broker.server.broker import Broker


def handle(broker: Broker, header: RequestHeader, request: dict) -> Any:
    coordinator = broker.coordinator
    if coordinator is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "groups": []}
    d = threads.deferToThread(coordinator.store.groups)

    def answer(stored: list[str]) -> dict:
        groups = {g.group_id: g.protocol_type or "" for g in coordinator.listed_groups()}
        for group_id in stored:
            if group_id not in groups and coordinator.owns(group_id):
                groups[group_id] = ""
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.NONE,
            "groups": [{"group_id": g, "protocol_type": t} for g, t in sorted(groups.items())],
        }

    return d.addCallback(answer)


HANDLER = Handler(ApiKey.LIST_GROUPS, 0, 2, handle)
