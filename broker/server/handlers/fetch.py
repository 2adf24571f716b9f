"""Fetch: read whole batches below the high watermark, long-polling when there are too few.

Records are answered as file slices that the connection sends with ``os.sendfile``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.server.dispatch import Handler

if TYPE_CHECKING:
    from broker.server.broker import Broker


class _Wanted(NamedTuple):
    topic: str
    partition: int
    offset: int
    max_bytes: int


def handle(broker: "Broker", header: RequestHeader, request: dict) -> Any:
    wanted = [
        _Wanted(topic["topic"], part["partition"], part["fetch_offset"], part["partition_max_bytes"])
        for topic in request["topics"]
        for part in topic["partitions"]
    ]
    response, available, failed = _read(broker, wanted, request["max_bytes"])
    if request["max_wait_ms"] <= 0 or available >= request["min_bytes"] or failed or not wanted:
        return response
    d = broker.fetches.wait(
        frozenset((w.topic, w.partition) for w in wanted), request["min_bytes"] - available, request["max_wait_ms"]
    )
    d.addCallback(lambda _: _read(broker, wanted, request["max_bytes"])[0])
    return d


def _read(broker: "Broker", wanted: list[_Wanted], max_bytes: int) -> tuple[dict, int, bool]:
    """The response for ``wanted``, the bytes it carries, and whether any partition failed."""
    remaining = max_bytes
    total = 0
    failed = False
    topics: dict[str, list[dict]] = {}
    for item in wanted:
        part = {
            "partition_index": item.partition,
            "error_code": ErrorCode.NONE,
            "high_watermark": -1,
            "last_stable_offset": -1,
            "log_start_offset": -1,
            "aborted_transactions": None,
            "preferred_read_replica": -1,
            "records": b"",
        }
        topics.setdefault(item.topic, []).append(part)
        try:
            log = broker.replicas.leader_log(item.topic, item.partition)
            high_watermark = log.high_watermark
            part["high_watermark"] = part["last_stable_offset"] = high_watermark
            part["log_start_offset"] = log.log_start_offset
            limit = min(item.max_bytes, remaining)
            if limit <= 0 and total:
                continue
            result = log.read(item.offset, max(limit, 0), max_offset=high_watermark, min_one_batch=total == 0)
        except KafkaError as exc:
            part["error_code"] = exc.code
            failed = True
            continue
        if result.records is not None:
            part["records"] = result.records
            total += result.records.size
            remaining -= result.records.size
    response = {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "session_id": 0,
        "responses": [{"topic": topic, "partitions": parts} for topic, parts in topics.items()],
    }
    return response, total, failed


HANDLER = Handler(ApiKey.FETCH, 4, 11, handle)
