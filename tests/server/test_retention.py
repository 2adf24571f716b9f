"""Retention runs on the broker's timer with per-topic overrides from CreateTopics: whole
expired segments go, the active one stays, and reads below the new start are out of range."""

from __future__ import annotations

import time
import uuid

from broker.client.admin import AdminClient
from broker.client.connection import BrokerConnection
from broker.protocol.errors import ErrorCode
from broker.protocol.messages import ApiKey
from broker.protocol.records import encode_batch


def _offsets(conn: BrokerConnection, topic: str) -> tuple[int, int]:
    found = []
    for timestamp in (-2, -1):
        response = conn.request(
            ApiKey.LIST_OFFSETS, 5, {"replica_id": -1, "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": timestamp}]}]}
        )
        found.append(response["topics"][0]["partitions"][0]["offset"])
    return found[0], found[1]


def test_time_retention_with_topic_overrides(broker_factory):
    broker = broker_factory(overrides={"log.retention.check.interval.ms": "300"})
    topic = f"retention-{uuid.uuid4().hex[:8]}"
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topic(topic, 1, 1, {"retention.ms": "60000", "segment.bytes": "2000"})
        assert admin.topic_configs(topic) == {"retention.ms": "60000", "segment.bytes": "2000"}
    host, _, port = broker.bootstrap.rpartition(":")
    old = int(time.time() * 1000) - 3_600_000  # an hour ago: past retention.ms already
    with BrokerConnection(host, int(port)) as conn:
        for i in range(20):
            batch = encode_batch([(None, b"x" * 200, [], old + i)])
            response = conn.request(
                ApiKey.PRODUCE, 7, {"acks": 1, "timeout_ms": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
            )
            assert response["responses"][0]["partition_responses"][0]["error_code"] == 0
        deadline = time.monotonic() + 15
        while _offsets(conn, topic)[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        earliest, latest = _offsets(conn, topic)
        assert 0 < earliest < latest == 20, (earliest, latest)
        segments = sorted((broker.log_dir / "data" / f"{topic}-0").glob("*.log"))
        assert int(segments[0].stem) == earliest, "the log starts at its first remaining segment"
        assert segments, "the active segment is never deleted"

        fetch = conn.request(
            ApiKey.FETCH,
            11,
            {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}],
            },
        )
        part = fetch["responses"][0]["partitions"][0]
        assert part["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
        assert part["log_start_offset"] == earliest
