"""DeleteRecords: move a partition's log start offset up (``offset`` -1: to the high watermark),
as ``kafka-delete-records`` and AdminClient.delete_records ask. Answered by the leader with its new
low watermark; followers take the leader's log start from their next fetch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.protocol.errors import ErrorCode, OffsetOutOfRangeError
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.security.api_acls import REQUIRED
from broker.server.authz import requester
from broker.server.dispatch import Handler
from broker.server.handlers.per_partition import answer_partitions
from broker.server.partition import Partition

if TYPE_CHECKING:
    from broker.server.broker import Broker

HIGH_WATERMARK = -1


def handle(broker: Broker, header: RequestHeader, request: dict) -> dict:
    leader = requester(broker).guard(REQUIRED[ApiKey.DELETE_RECORDS], broker.replicas.leader_partition)
    return answer_partitions(request["topics"], "name", "partition_index", leader, _blank, _delete)


def _blank(part: dict) -> dict[str, Any]:
    return {"partition_index": part["partition_index"], "low_watermark": -1, "error_code": ErrorCode.NONE}


def _delete(leader: Partition, part: dict) -> dict[str, Any]:
    log = leader.log
    offset = part["offset"]
    if offset == HIGH_WATERMARK:
        offset = log.high_watermark
    if not 0 <= offset <= log.high_watermark:
        raise OffsetOutOfRangeError(f"{log.name}: {offset} is outside [0, high watermark {log.high_watermark}]")
    log.advance_log_start_offset(offset)
    return {"low_watermark": log.log_start_offset}


HANDLER = Handler(ApiKey.DELETE_RECORDS, 0, 1, handle)
