"""Long-poll Fetch: a fetch with nothing to read waits for max_wait_ms, and an append wakes it
at once."""

from __future__ import annotations

import threading
import time
import uuid

from broker.client.admin import AdminClient
from broker.client.connection import BrokerConnection
from broker.protocol.messages import ApiKey
from broker.protocol.records import decode_records, encode_batch


def _fetch_body(topic: str, offset: int, max_wait_ms: int) -> dict:
    return {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}],
    }


def _produce(address: tuple[str, int], topic: str, value: bytes) -> None:
    with BrokerConnection(*address) as conn:
        batch = encode_batch([(None, value, [], int(time.time() * 1000))])
        response = conn.request(
            ApiKey.PRODUCE, 7, {"acks": 1, "timeout_ms": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
        )
        assert response["responses"][0]["partition_responses"][0]["error_code"] == 0


def test_fetch_waits_then_wakes_on_append(broker):
    host, _, port = broker.bootstrap.rpartition(":")
    address = (host, int(port))
    topic = f"poll-{uuid.uuid4().hex[:8]}"
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topic(topic, 1, 1)
    _produce(address, topic, b"first")

    with BrokerConnection(*address) as conn:
        started = time.monotonic()
        empty = conn.request(ApiKey.FETCH, 11, _fetch_body(topic, 1, 600))
        waited = time.monotonic() - started
        assert empty["responses"][0]["partitions"][0]["records"] in (None, b"")
        assert 0.5 <= waited < 5

        timer = threading.Timer(0.3, _produce, (address, topic, b"second"))
        timer.start()
        started = time.monotonic()
        woken = conn.request(ApiKey.FETCH, 11, _fetch_body(topic, 1, 20_000))
        elapsed = time.monotonic() - started
        timer.join()
    assert elapsed < 5, "an append must wake the fetch long before max_wait_ms"
    records = list(decode_records(woken["responses"][0]["partitions"][0]["records"]))
    assert [r.value for r in records] == [b"second"]
    assert records[0].offset == 1
