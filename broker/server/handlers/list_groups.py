"""ListGroups: the groups this broker coordinates — live ones in memory, and groups that only
have offsets in ZooKeeper (ZooKeeper consumers, or standard clients now gone), listed with an
empty protocol type as Kafka lists offset-only groups."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet import threads

from broker.protocol.errors import ErrorCode
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.security.api_acls import CLUSTER_DESCRIBE
from broker.server.authz import requester
from broker.server.dispatch import Handler

if TYPE_CHECKING:
    from broker.server.broker import Broker


def handle(broker: Broker, header: RequestHeader, request: dict) -> Any:
    coordinator = broker.coordinator
    if coordinator is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "groups": []}
    who = requester(broker)
    every = who.may(CLUSTER_DESCRIBE)  # else only the groups it may Describe, as Kafka lists them
    d = threads.deferToThread(coordinator.store.groups)

    def answer(stored: list[str]) -> dict:
        groups = {g.group_id: g.protocol_type or "" for g in coordinator.listed_groups()}
        for group_id in stored:
            if group_id not in groups and coordinator.owns(group_id):
                groups[group_id] = ""
        listed = sorted(g for g in groups.items() if every or who.may_api(ApiKey.LIST_GROUPS, g[0]))
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.NONE,
            "groups": [{"group_id": g, "protocol_type": t} for g, t in listed],
        }

    return d.addCallback(answer)


HANDLER = Handler(ApiKey.LIST_GROUPS, 0, 2, handle)
