"""OffsetFetch: a group's committed offsets, read from ZooKeeper (-1 where none).

Read through to ZooKeeper each time, so offsets a ZooKeeper consumer of the same group wrote
are seen at once. A null topic list (v2+) means every partition the group has committed.
Version 0 (Kafka 0.8.1: offsets in ZooKeeper) is answered by any broker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet import threads

from broker.cluster.offset_store import NO_OFFSET
from broker.protocol.errors import ErrorCode
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.security.api_acls import GROUP_TOPIC_DESCRIBE
from broker.server.authz import Requester, requester
from broker.server.dispatch import Handler
from broker.server.handlers.group_common import coordinator_error, zookeeper_commit_error

if TYPE_CHECKING:
    from broker.server.broker import Broker


def _partition(index: int, committed: Any, error: int = ErrorCode.NONE) -> dict:
    return {
        "partition_index": index,
        "committed_offset": committed.offset if committed else NO_OFFSET,
        "committed_leader_epoch": -1,
        "metadata": committed.metadata if committed else "",
        "error_code": error,
    }


def _read(broker: Broker, group_id: str, topics: list[dict] | None) -> dict:
    store = broker.coordinator.store
    wanted = (
        {t["name"]: list(t["partition_indexes"]) for t in topics} if topics is not None else store.topics(group_id)
    )
    found = store.read(group_id, [(t, p) for t, parts in wanted.items() for p in parts])
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "topics": [
            {"name": t, "partitions": [_partition(p, found.get((t, p))) for p in parts]} for t, parts in wanted.items()
        ],
    }


def handle(broker: Broker, header: RequestHeader, request: dict) -> Any:
    topics = request.get("topics")
    group_id = request["group_id"]
    who = requester(broker)
    if not who.may_api(ApiKey.OFFSET_FETCH, group_id):
        return _failed(topics, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error = zookeeper_commit_error(broker, group_id) if header.api_version == 0 else coordinator_error(broker, group_id)
    if error is not None:
        return _failed(topics, error)
    d = threads.deferToThread(_read, broker, request["group_id"], topics)
    if who.authorizer is not None:
        d.addCallback(_authorized, who, listed=topics is not None)
    return d.addErrback(lambda _: _failed(topics, ErrorCode.COORDINATOR_NOT_AVAILABLE))


def _authorized(answer: dict, who: Requester, listed: bool) -> dict:
    """Topics the requester may not Describe: their partitions TOPIC_AUTHORIZATION_FAILED when
    asked for by name, left out of an all-topics answer (as Kafka)."""
    kept = []
    for topic in answer["topics"]:
        if who.may(GROUP_TOPIC_DESCRIBE, topic["name"]):
            kept.append(topic)
        elif listed:
            parts = [_partition(p["partition_index"], None, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in topic["partitions"]]
            kept.append({"name": topic["name"], "partitions": parts})
    return {**answer, "topics": kept}


def _failed(topics: list[dict] | None, error: int) -> dict:
    """The answer when the offsets cannot be read: ``error`` for the group and each partition."""
    return {
        "throttle_time_ms": 0,
        "error_code": error,
        "topics": [
            {"name": t["name"], "partitions": [_partition(p, None, error) for p in t["partition_indexes"]]}
            for t in topics or []
        ],
    }


HANDLER = Handler(ApiKey.OFFSET_FETCH, 0, 5, handle)
