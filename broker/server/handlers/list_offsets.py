"""ListOffsets: the earliest (-2) or latest (-1) offset of a partition, or the first offset
whose timestamp is at or after a given time (through the time index)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.server.dispatch import Handler

if TYPE_CHECKING:
    from broker.server.broker import Broker

LATEST = -1
EARLIEST = -2
NO_TIMESTAMP = -1


def handle(broker: Broker, header: RequestHeader, request: dict) -> dict:
    return {
        "throttle_time_ms": 0,
        "topics": [
            {"name": topic["name"], "partitions": [_lookup(broker, topic["name"], part) for part in topic["partitions"]]}
            for topic in request["topics"]
        ],
    }


def _lookup(broker: Broker, topic: str, part: dict) -> dict:
    response = {"partition_index": part["partition_index"], "error_code": ErrorCode.NONE, "timestamp": NO_TIMESTAMP, "offset": -1, "leader_epoch": -1}
    try:
        log = broker.replicas.leader_log(topic, part["partition_index"])
    except KafkaError as exc:
        response["error_code"] = exc.code
        return response
    timestamp = part["timestamp"]
    if timestamp == LATEST:
        response["offset"] = log.high_watermark
    elif timestamp == EARLIEST:
        response["offset"] = log.log_start_offset
    else:
        found = log.offset_for_timestamp(timestamp)
        if found is not None:
            response["offset"], response["timestamp"] = found
    return response


HANDLER = Handler(ApiKey.LIST_OFFSETS, 1, 5, handle)
