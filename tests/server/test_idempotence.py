"""Idempotent produce on the wire: InitProducerId hands out distinct ids, and a retried batch
(same producer id, epoch and sequence) is answered with its first offsets, not appended again."""

from __future__ import annotations

import uuid

from broker.client.admin import AdminClient
from broker.client.connection import BrokerConnection
from broker.protocol.errors import ErrorCode
from broker.protocol.messages import ApiKey
from broker.protocol.records import encode_batch


def _produce(conn: BrokerConnection, topic: str, records: bytes) -> dict:
    response = conn.request(
        ApiKey.PRODUCE, 7, {"acks": -1, "timeout_ms": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]}
    )
    return response["responses"][0]["partition_responses"][0]


def test_retried_batch_is_not_appended_twice(broker):
    topic = f"idem-{uuid.uuid4().hex[:8]}"
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topic(topic, 1, 1)
    host, _, port = broker.bootstrap.rpartition(":")
    with BrokerConnection(host, int(port)) as conn:
        ids = [conn.request(ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": None, "transaction_timeout_ms": 60000}) for _ in range(3)]
        assert all(r["error_code"] == ErrorCode.NONE for r in ids)
        assert len({r["producer_id"] for r in ids}) == 3
        pid, epoch = ids[0]["producer_id"], ids[0]["producer_epoch"]

        def batch(sequence: int, values: list[bytes]) -> bytes:
            return encode_batch([(None, v, [], 0) for v in values], producer_id=pid, producer_epoch=epoch, base_sequence=sequence)

        first = _produce(conn, topic, batch(0, [b"a", b"b", b"c"]))
        retry = _produce(conn, topic, batch(0, [b"a", b"b", b"c"]))
        assert first["error_code"] == retry["error_code"] == ErrorCode.NONE
        assert retry["base_offset"] == first["base_offset"] == 0
        nxt = _produce(conn, topic, batch(3, [b"d"]))
        assert nxt["base_offset"] == 3
        gap = _produce(conn, topic, batch(9, [b"z"]))
        assert gap["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER

        latest = conn.request(
            ApiKey.LIST_OFFSETS, 5, {"replica_id": -1, "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]}
        )
        assert latest["topics"][0]["partitions"][0]["offset"] == 4

    transactional = BrokerConnection(host, int(port))
    try:
        refused = transactional.request(ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": "txn-1", "transaction_timeout_ms": 60000})
        assert refused["error_code"] != ErrorCode.NONE
    finally:
        transactional.close()
