"""DeleteGroups: remove groups with no live member, and their committed offsets, from
/consumers (``kafka-consumer-groups --delete``, AdminClient.delete_consumer_groups).

Per group: INVALID_GROUP_ID / NOT_COORDINATOR as for every group API; NON_EMPTY_GROUP while a
standard member or a ZooKeeper consumer is registered; GROUP_ID_NOT_FOUND when nothing is known."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet import threads

from broker.coordinator.group import State
from broker.protocol.errors import ErrorCode
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.server.authz import requester
from broker.server.dispatch import Handler
from broker.server.handlers.group_common import coordinator_error

if TYPE_CHECKING:
    from broker.cluster.offset_store import ZkOffsetStore
    from broker.server.broker import Broker


def _delete_stored(store: ZkOffsetStore, groups: dict[str, bool]) -> dict[str, int]:
    """On the thread pool: delete each group's znodes; ``groups`` says whether it is live in memory."""
    codes: dict[str, int] = {}
    for group_id, in_memory in groups.items():
        if store.zk_members(group_id):
            codes[group_id] = ErrorCode.NON_EMPTY_GROUP
        elif store.delete_group(group_id) or in_memory:
            codes[group_id] = ErrorCode.NONE
        else:
            codes[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
    return codes


def handle(broker: Broker, header: RequestHeader, request: dict) -> Any:
    names = list(request["groups_names"])
    codes: dict[str, int] = {}
    deletable: dict[str, bool] = {}
    who = requester(broker)
    for group_id in names:
        if not who.may_api(ApiKey.DELETE_GROUPS, group_id):
            codes[group_id] = ErrorCode.GROUP_AUTHORIZATION_FAILED
            continue
        error = coordinator_error(broker, group_id)
        group = broker.coordinator.group(group_id) if error is None else None
        if error is None and group is not None and group.members:
            error = ErrorCode.NON_EMPTY_GROUP
        if error is None:
            deletable[group_id] = group is not None and group.state is not State.DEAD
        else:
            codes[group_id] = error

    def answer(deleted: dict[str, int]) -> dict:
        for group_id, code in deleted.items():
            if code == ErrorCode.NONE:
                broker.coordinator.unload(group_id)
        codes.update(deleted)
        return {"throttle_time_ms": 0, "results": [{"group_id": g, "error_code": codes[g]} for g in dict.fromkeys(names)]}

    return threads.deferToThread(_delete_stored, broker.coordinator.store, deletable).addCallback(answer)


HANDLER = Handler(ApiKey.DELETE_GROUPS, 0, 1, handle)
