"""ListOffsets: the earliest (-2) or latest (-1) offset of a partition, or the first offset
whose timestamp is at or after a given time (through the time index)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.protocol.errors import ErrorCode
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.server.dispatch import Handler
from broker.server.handlers.per_partition import answer_partitions
from broker.server.partition import Partition

if TYPE_CHECKING:
    from broker.server.broker import Broker

LATEST = -1
EARLIEST = -2
NO_TIMESTAMP = -1


def handle(broker: Broker, header: RequestHeader, request: dict) -> dict:
    return answer_partitions(request["topics"], "name", "partition_index", broker.replicas.leader_partition, _blank, _lookup)


def _blank(part: dict) -> dict[str, Any]:
    return {
        "partition_index": part["partition_index"],
        "error_code": ErrorCode.NONE,
        "timestamp": NO_TIMESTAMP,
        "offset": -1,
        "leader_epoch": -1,
    }


def _lookup(leader: Partition, part: dict) -> dict[str, Any]:
    log = leader.log
    timestamp = part["timestamp"]
    if timestamp == LATEST:
        return {"offset": log.high_watermark}
    if timestamp == EARLIEST:
        return {"offset": log.log_start_offset}
    found = log.offset_for_timestamp(timestamp)
    return {} if found is None else {"offset": found[0], "timestamp": found[1]}


HANDLER = Handler(ApiKey.LIST_OFFSETS, 1, 5, handle)
