"""OffsetCommit: store a group's offsets in ZooKeeper (through the coordinator's commit queue).

Kafka's checks, in its order: a group that only stores offsets (generation -1, no members)
may commit freely; otherwise the member must be known (UNKNOWN_MEMBER_ID), of the current
generation (ILLEGAL_GENERATION) and not in the middle of a sync (REBALANCE_IN_PROGRESS).

Version 0 is Kafka 0.8.1's commit, which any broker wrote straight to ZooKeeper, outside any
group: it is served by every broker, without group checks, into the same store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.cluster.offset_store import Committed
from broker.protocol.errors import ErrorCode
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.security.api_acls import GROUP_TOPIC_READ
from broker.server.authz import requester
from broker.server.dispatch import Handler
from broker.server.handlers.group_common import coordinator_error, zookeeper_commit_error

if TYPE_CHECKING:
    from broker.server.broker import Broker

MAX_METADATA_BYTES = 4096  # Kafka's offset.metadata.max.bytes default


def _response(topics: list[dict], code_of: Any) -> dict:
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": t["name"],
                "partitions": [
                    {"partition_index": p["partition_index"], "error_code": code_of((t["name"], p["partition_index"]))}
                    for p in t["partitions"]
                ],
            }
            for t in topics
        ],
    }


def _group_error(broker: Broker, request: dict, version: int) -> int | None:
    group_id = request["group_id"]
    if version == 0:
        return zookeeper_commit_error(broker, group_id)
    error = coordinator_error(broker, group_id)
    if error is not None:
        return error
    generation = request.get("generation_id", -1)
    group = broker.coordinator.group(group_id)
    if group is None:
        if generation >= 0:
            return ErrorCode.ILLEGAL_GENERATION
        group = broker.coordinator.get_or_create(group_id)
    return group.check_commit(request.get("member_id", ""), generation)


def handle(broker: Broker, header: RequestHeader, request: dict) -> Any:
    topics = request["topics"]
    who = requester(broker)
    if not who.may_api(ApiKey.OFFSET_COMMIT, request["group_id"]):
        return _response(topics, lambda tp: ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error = _group_error(broker, request, header.api_version)
    if error is not None:
        return _response(topics, lambda tp: error)
    group_id = request["group_id"]
    codes: dict[tuple[str, int], int] = {}
    entries = {}
    for t in topics:
        for p in t["partitions"]:
            tp = (t["name"], p["partition_index"])
            metadata = p.get("committed_metadata") or ""
            if not who.may(GROUP_TOPIC_READ, tp[0]):
                codes[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif broker.metadata.partition(*tp) is None:
                codes[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif len(metadata.encode()) > MAX_METADATA_BYTES:
                codes[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                entries[(group_id, *tp)] = Committed(p["committed_offset"], metadata)
    d = broker.coordinator.commits.commit(entries)

    def answer(written: dict) -> dict:
        for (_, topic, partition), code in written.items():
            codes[(topic, partition)] = code
        return _response(topics, lambda tp: codes.get(tp, ErrorCode.NONE))

    return d.addCallback(answer)


HANDLER = Handler(ApiKey.OFFSET_COMMIT, 0, 7, handle)
