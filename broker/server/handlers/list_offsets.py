"""ListOffsets: the earliest (-2) or latest (-1) offset of a partition, or the first offset
whose timestamp is at or after a given time (through the time index).

Version 0 (Kafka 0.8's OffsetRequest) answers a list, newest first, of at most
``max_num_offsets``: the offsets "before" the time, which Kafka takes from segment
boundaries. Here: for latest, the high watermark then every segment's base offset; for
earliest, the log start; for a time, the segment base offsets at or before the first offset
whose timestamp reaches it (the time index stands in for 0.8's segment file times)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.protocol.errors import ErrorCode
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.security.api_acls import REQUIRED
from broker.server.authz import requester
from broker.server.dispatch import Handler
from broker.server.handlers.per_partition import answer_partitions
from broker.server.partition import Partition

if TYPE_CHECKING:
    from broker.server.broker import Broker

LATEST = -1
EARLIEST = -2
NO_TIMESTAMP = -1


def handle(broker: Broker, header: RequestHeader, request: dict) -> dict:
    lookup = _offsets_before if header.api_version == 0 else _lookup
    leader = requester(broker).guard(REQUIRED[ApiKey.LIST_OFFSETS], broker.replicas.leader_partition)
    return answer_partitions(request["topics"], "name", "partition_index", leader, _blank, lookup)


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


def _offsets_before(leader: Partition, part: dict) -> dict[str, Any]:
    """Version 0: up to max_num_offsets offsets, newest first (see the module docstring)."""
    log = leader.log
    timestamp, high_watermark = part["timestamp"], log.high_watermark
    if timestamp == EARLIEST:
        offsets = [log.log_start_offset]
    else:
        limit = high_watermark
        if timestamp != LATEST:
            found = log.offset_for_timestamp(timestamp)
            limit = high_watermark if found is None else found[0]
        bases = [b for b in log.segment_base_offsets() if log.log_start_offset <= b <= limit]
        offsets = sorted({limit, *bases} if timestamp == LATEST or limit == high_watermark else set(bases), reverse=True)
    return {"old_style_offsets": offsets[:max(part.get("max_num_offsets", 1), 0)]}


HANDLER = Handler(ApiKey.LIST_OFFSETS, 0, 5, handle)
