"""Long-poll Fetch: a fetch with nothing to read waits for max_wait_ms, and an append wakes it
at once."""

from __future__ import annotations

import threading
import time
import uuid

from broker.client.admin import AdminClient
from broker.client.connection import BrokerConnection
from broker.protocol.errors import ErrorCode
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
    _produce_to(address, topic, 0, value)


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


def test_a_fetch_session_over_the_wire(broker):
    """Fetch v11 in a session (KIP-227): the first fetch opens it and answers every partition;
    an incremental fetch naming nothing waits and answers nothing, is woken by an append to
    any of the session's partitions and answers only that one; a forgotten partition is not
    read; a wrong epoch or an unknown session is a top-level error."""
    host, _, port = broker.bootstrap.rpartition(":")
    address = (host, int(port))
    topic = f"session-{uuid.uuid4().hex[:8]}"
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topic(topic, 3, 1)

    def fetch(conn: BrokerConnection, session_id: int, epoch: int, partitions: list[int], max_wait_ms: int,
              forgotten: list[int] = []) -> dict:  # noqa: B006 (read only)
        body = _fetch_body(topic, 0, max_wait_ms)
        body["topics"] = [{"topic": topic, "partitions": [{"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                                                          for p in partitions]}] if partitions else []
        body.update(session_id=session_id, session_epoch=epoch,
                    forgotten_topics_data=[{"topic": topic, "partitions": forgotten}] if forgotten else [])
        return conn.request(ApiKey.FETCH, 11, body)

    def answered(response: dict) -> list[int]:
        return sorted(p["partition_index"] for t in response["responses"] for p in t["partitions"])

    with BrokerConnection(*address) as conn:
        opened = fetch(conn, 0, 0, [0, 1, 2], 0)
        session = opened["session_id"]
        assert session != 0 and answered(opened) == [0, 1, 2]

        started = time.monotonic()
        idle = fetch(conn, session, 1, [], 500)
        assert answered(idle) == [] and idle["error_code"] == 0 and 0.4 <= time.monotonic() - started < 5

        timer = threading.Timer(0.3, _produce_to, (address, topic, 2, b"news"))
        timer.start()
        started = time.monotonic()
        woken = fetch(conn, session, 2, [], 20_000)
        timer.join()
        assert time.monotonic() - started < 5, "an append to a partition named only in the session wakes the fetch"
        assert answered(woken) == [2]
        [part] = woken["responses"][0]["partitions"]
        assert [r.value for r in decode_records(part["records"])] == [b"news"] and part["high_watermark"] == 1

        forgot = fetch(conn, session, 3, [], 0, forgotten=[2])
        assert answered(forgot) == []
        _produce_to(address, topic, 2, b"unseen")
        assert answered(fetch(conn, session, 4, [], 0)) == [], "a forgotten partition is no longer read"

        assert fetch(conn, session, 9, [], 0)["error_code"] == ErrorCode.INVALID_FETCH_SESSION_EPOCH
        assert fetch(conn, session + 1, 1, [], 0)["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        assert fetch(conn, session, -1, [0], 0)["session_id"] == 0  # closed
        assert fetch(conn, session, 5, [], 0)["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def _produce_to(address: tuple[str, int], topic: str, partition: int, value: bytes) -> None:
    with BrokerConnection(*address) as conn:
        batch = encode_batch([(None, value, [], int(time.time() * 1000))])
        response = conn.request(ApiKey.PRODUCE, 7, {"acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
        assert response["responses"][0]["partition_responses"][0]["error_code"] == 0
