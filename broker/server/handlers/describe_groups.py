"""DescribeGroups: state, protocol and members of groups this broker coordinates. A group
unknown here is "Dead" with no error, as Kafka answers; one with only stored offsets is
"Empty"."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet import defer, threads

from broker.protocol.errors import ErrorCode
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.security.acl import ResourceType
from broker.server.authz import requester
from broker.server.dispatch import Handler
from broker.server.handlers.group_common import coordinator_error

if TYPE_CHECKING:
    from broker.server.broker import Broker


def _bare(group_id: str, state: str, error: int = ErrorCode.NONE) -> dict:
    return {
        "error_code": error, "group_id": group_id, "group_state": state, "protocol_type": "", "protocol_data": "", "members": []
    }


def _describe(broker: Broker, group_id: str, has_offsets: set[str]) -> dict:
    error = coordinator_error(broker, group_id)
    if error is not None:
        return _bare(group_id, "", error)
    group = broker.coordinator.group(group_id)
    if group is not None:
        return group.describe()
    return _bare(group_id, "Empty" if group_id in has_offsets else "Dead")


def handle(broker: Broker, header: RequestHeader, request: dict) -> Any:
    group_ids = list(request["groups"])
    who = requester(broker)
    refused = {g for g in group_ids if not who.may_api(ApiKey.DESCRIBE_GROUPS, g)}
    unknown = [g for g in group_ids if coordinator_error(broker, g) is None and broker.coordinator.group(g) is None]

    def stored() -> set[str]:
        return {g for g in unknown if broker.coordinator.store.has_offsets(g)}

    def answer(has: set[str]) -> dict:
        groups = []
        for g in group_ids:
            described = _bare(g, "", ErrorCode.GROUP_AUTHORIZATION_FAILED) if g in refused else _describe(broker, g, has)
            if request.get("include_authorized_operations") and g not in refused:
                described = {**described, "authorized_operations": who.authorized_operations(ResourceType.GROUP, g)}
            groups.append(described)
        return {"throttle_time_ms": 0, "groups": groups}

    d = threads.deferToThread(stored) if unknown else defer.succeed(set())
    return d.addCallback(answer)


HANDLER = Handler(ApiKey.DESCRIBE_GROUPS, 0, 4, handle)
