"""DescribeLogDirs: this broker's log directories and the size of each partition in them (null
topics: every partition), as ``kafka-log-dirs --describe`` shows them."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from broker.protocol.errors import ErrorCode
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.server.authz import requester
from broker.server.dispatch import Handler

if TYPE_CHECKING:
    from broker.server.broker import Broker


def handle(broker: Broker, header: RequestHeader, request: dict) -> dict:
    wanted = request["topics"]
    if not requester(broker).may_api(ApiKey.DESCRIBE_LOG_DIRS):
        return {"throttle_time_ms": 0, "results": []}  # Kafka's answer to v0-1 without Describe on the cluster
    chosen = None if wanted is None else {(t["topic"], p) for t in wanted for p in t["partitions"]}
    by_dir: dict[str, dict[str, list[dict]]] = {d: {} for d in broker.logs.log_dirs}
    for plog in sorted(broker.logs.all_logs(), key=lambda log: (log.topic, log.partition)):
        if chosen is not None and (plog.topic, plog.partition) not in chosen:
            continue
        topics = by_dir.setdefault(os.path.dirname(plog.dir), {})
        topics.setdefault(plog.topic, []).append({
            "partition_index": plog.partition,
            "partition_size": plog.size_bytes,
            "offset_lag": max(plog.high_watermark - plog.log_end_offset, 0),
            "is_future_key": False,
        })
    return {
        "throttle_time_ms": 0,
        "results": [
            {
                "error_code": ErrorCode.NONE,
                "log_dir": log_dir,
                "topics": [{"name": t, "partitions": parts} for t, parts in topics.items()],
            }
            for log_dir, topics in by_dir.items()
        ],
    }


HANDLER = Handler(ApiKey.DESCRIBE_LOG_DIRS, 0, 1, handle)
