"""OffsetDelete: remove a group's committed offsets of some partitions
(``kafka-consumer-groups --delete-offsets``). As Kafka: the group must exist
(GROUP_ID_NOT_FOUND); a partition of a topic its live consumers subscribe to is refused with
GROUP_SUBSCRIBED_TO_TOPIC; a live group of another protocol type is NON_EMPTY_GROUP."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet import threads

from broker.coordinator.group import Group, State
from broker.protocol.consumer_protocol import decode_subscription
from broker.protocol.errors import ErrorCode
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.security.api_acls import GROUP_TOPIC_READ
from broker.server.authz import requester
from broker.server.dispatch import Handler
from broker.server.handlers.group_common import coordinator_error

if TYPE_CHECKING:
    from broker.server.broker import Broker

EVERY_TOPIC = None


def subscribed_topics(group: Group | None) -> set[str] | None:
    """Topics the group's live consumers subscribe to (empty for no live member); EVERY_TOPIC
    when a subscription cannot be read."""
    if group is None or not group.members:
        return set()
    topics: set[str] = set()
    for member in group.members.values():
        protocol = group.protocol or (member.protocol_names() or [""])[0]
        try:
            topics.update(decode_subscription(member.metadata(protocol)).topics)
        except Exception:  # unreadable metadata: refuse rather than delete what may be in use
            return EVERY_TOPIC
    return topics


def _response(error: int, topics: list[dict]) -> dict:
    return {"error_code": error, "throttle_time_ms": 0, "topics": topics}


def handle(broker: Broker, header: RequestHeader, request: dict) -> Any:
    group_id = request["group_id"]
    who = requester(broker)
    error: int | None = ErrorCode.GROUP_AUTHORIZATION_FAILED
    if who.may_api(ApiKey.OFFSET_DELETE, group_id):
        error = coordinator_error(broker, group_id)
    if error is not None:
        return _response(error, [])
    group = broker.coordinator.group(group_id)
    live = group is not None and group.state is not State.DEAD
    if group is not None and group.members and group.protocol_type != "consumer":
        return _response(ErrorCode.NON_EMPTY_GROUP, [])
    in_use = subscribed_topics(group)
    codes: dict[tuple[str, int], int] = {}
    for t in request["topics"]:
        for p in t["partitions"]:
            tp = (t["name"], p["partition_index"])
            if not who.may(GROUP_TOPIC_READ, tp[0]):
                codes[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif in_use is EVERY_TOPIC or tp[0] in in_use:
                codes[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            elif broker.metadata.partition(*tp) is None:
                codes[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                codes[tp] = ErrorCode.NONE
    doomed = [tp for tp, code in codes.items() if code == ErrorCode.NONE]
    store = broker.coordinator.store

    def delete() -> int:
        if not live and not store.has_offsets(group_id):
            return ErrorCode.GROUP_ID_NOT_FOUND
        store.delete(group_id, doomed)
        return ErrorCode.NONE

    def answer(code: int) -> dict:
        if code != ErrorCode.NONE:
            return _response(code, [])
        broker.coordinator.commits.forget([(group_id, *tp) for tp in doomed])
        topics: dict[str, list[dict]] = {}
        for (topic, partition), c in codes.items():
            topics.setdefault(topic, []).append({"partition_index": partition, "error_code": c})
        return _response(ErrorCode.NONE, [{"name": t, "partitions": parts} for t, parts in topics.items()])

    return threads.deferToThread(delete).addCallback(answer)


HANDLER = Handler(ApiKey.OFFSET_DELETE, 0, 0, handle)
