"""OffsetForLeaderEpoch: the end offset of a leader epoch, from the leader-epoch cache.

A broker that becomes a follower asks the new leader where its latest epoch ends and
truncates there, so it keeps no record the leader never had.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.server.dispatch import Handler
from broker.server.handlers.fetch import _check_epoch

if TYPE_CHECKING:
    from broker.server.broker import Broker


def handle(broker: Broker, header: RequestHeader, request: dict) -> dict:
    return {
        "throttle_time_ms": 0,
        "topics": [
            {"topic": topic["topic"], "partitions": [_lookup(broker, topic["topic"], part) for part in topic["partitions"]]}
            for topic in request["topics"]
        ],
    }


def _lookup(broker: Broker, topic: str, part: dict) -> dict:
    response = {"error_code": ErrorCode.NONE, "partition": part["partition"], "leader_epoch": -1, "end_offset": -1}
    try:
        leader = broker.replicas.leader_partition(topic, part["partition"])
        _check_epoch(leader, part.get("current_leader_epoch", -1))
    except KafkaError as exc:
        response["error_code"] = exc.code
        return response
    epoch, end_offset = leader.epochs.end_offset_for(part["leader_epoch"], leader.log.log_end_offset)
    response["leader_epoch"], response["end_offset"] = epoch, end_offset
    return response


HANDLER = Handler(ApiKey.OFFSET_FOR_LEADER_EPOCH, 0, 3, handle)
