"""The bulk paths the mirror-maker uses: ``Producer.send_batch`` (many records, no per-record futures, one
callback per batch), ``ProducerBatch.try_append_many`` (the same bytes as ``try_append``) and
``KafkaStream.next_chunk`` (whole fetched chunks, mixed with ``next()``)."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from broker.client.accumulator import ProducerBatch, encode_headers
from broker.client.admin import AdminClient
from broker.client.producer import Producer
from broker.client.simple_consumer import SimpleConsumer
from broker.client.zk_consumer import ConsumerTimeoutException, ZookeeperConsumerConnector
from broker.protocol.errors import MessageTooLargeError


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _records(n: int, base_ts: int) -> list:
    out = []
    for i in range(n):
        headers = encode_headers([("h", b"%d" % i)]) if i % 3 == 0 else b"\x00"
        out.append((base_ts + (i * 7919) % 100000, b"k%d" % (i % 13) if i % 5 else None,
                    b"v" * (i % 300) if i % 11 else None, headers))
    return out


def test_try_append_many_makes_the_same_bytes_as_try_append():
    records = _records(3000, int(time.time() * 1000))
    one = [ProducerBatch("t", 0, 16384, 1 << 31, 0)]
    for r in records:
        if one[-1].try_append(*r) < 0:
            one.append(ProducerBatch("t", 0, 16384, 1 << 31, len(one)))
            assert one[-1].try_append(*r) == 0
    many = []
    i = 0
    while i < len(records):
        many.append(ProducerBatch("t", 0, 16384, 1 << 31, len(many)))
        i = many[-1].try_append_many(records, i)
    assert len(one) == len(many) > 1
    for a, b in zip(one, many):
        assert (a.count, a.base_ts, a.max_ts, a.full) == (b.count, b.base_ts, b.max_ts, b.full)
        assert a.build(0, -1, -1) == b.build(0, -1, -1)
    # a count limit and an over-large record
    b = ProducerBatch("t", 0, 1 << 20, 10, 0)
    assert b.try_append_many(records, 0) == 10 and b.full
    b = ProducerBatch("t", 0, 1 << 20, 1 << 31, 0)
    with pytest.raises(MessageTooLargeError):
        b.try_append_many([(1, None, b"x" * 10, b"\x00"), (1, None, b"x" * 500, b"\x00")], 0, max_record_size=100)
    assert b.count == 1  # the record before the big one stayed


def test_send_batch_round_trip_partitions_order_and_callbacks(broker):
    topic = _topic("bulk")
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topic(topic, 3, 1)
    base_ts = int(time.time() * 1000) - 60_000
    records = _records(5000, base_ts)
    results: list = []
    lock = threading.Lock()

    def on_done(metadata, exc):
        with lock:
            results.append((metadata, exc))

    with Producer({"bootstrap.servers": broker.bootstrap, "batch.size": 16384, "linger.ms": 5}) as producer:
        producer.partitions_for(topic)
        n = producer.send_batch(topic, 1, records[:3000], on_done)  # a fixed partition
        assert n > 1
        n2 = producer.send_batch(topic, None, records[3000:], on_done)  # by key
        producer.flush(30)
        assert producer.send_batch(topic, 0, []) == 0
        with pytest.raises(ValueError):
            producer.send_batch(topic, 7, records[:1])
    assert len(results) == n + n2 and all(exc is None for _, exc in results)
    with SimpleConsumer(broker.host, broker.port) as c:
        got = {}
        for p in range(3):
            msgs, offset = [], 0
            while offset < c.latest_offset(topic, p):
                batch = c.fetch(topic, p, offset, 1 << 20)
                msgs.extend(batch)
                offset = batch.next_offset
            got[p] = msgs
    p1 = [m for m in got[1]]
    assert [(m.timestamp, m.key, m.value, encode_headers(m.headers)) for m in p1[:3000]] == records[:3000]
    # keyed placement: every record of a key on one partition, in send order
    rest = [m for p in range(3) for m in (got[p][3000:] if p == 1 else got[p])]
    assert len(rest) == 2000
    by_key: dict = {}
    for p in range(3):
        for m in (got[p][3000:] if p == 1 else got[p]):
            by_key.setdefault(m.key, set()).add(p)
    assert all(len(ps) == 1 for k, ps in by_key.items() if k is not None)
    for p in range(3):
        msgs = got[p][3000:] if p == 1 else got[p]
        sent = [r for r in records[3000:] if (r[1], r[2]) in {(m.key, m.value) for m in msgs}]
        keyed = [m for m in msgs if m.key is not None]
        assert [(m.key, m.value) for m in keyed] == [(r[1], r[2]) for r in sent if r[1] is not None]


def test_next_chunk_hands_out_whole_chunks_and_mixes_with_next(broker, zk_chroot):
    topic = _topic("chunks")
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topic(topic, 1, 1)
    with Producer({"bootstrap.servers": broker.bootstrap}) as producer:
        for i in range(500):
            producer.send(topic, b"v%d" % i, b"k")
        producer.flush(30)
    conn = ZookeeperConsumerConnector({"zookeeper.connect": zk_chroot, "group.id": _topic("g"),
                                       "auto.offset.reset": "smallest", "consumer.timeout.ms": "2000",
                                       "auto.commit.enable": "false"})
    try:
        stream = conn.create_message_streams({topic: 1})[topic][0]
        first = next(stream)
        assert first.offset == 0
        seen = [first.offset]
        chunk = stream.next_chunk()  # the rest of the chunk `first` came from
        assert chunk and chunk[0].offset == 1
        seen.extend(m.offset for m in chunk)
        assert conn.consumed_offsets()[(topic, 0)] == seen[-1] + 1
        while len(seen) < 500:
            try:
                chunk = stream.next_chunk()
            except ConsumerTimeoutException:
                break
            assert chunk and all(m.partition == 0 for m in chunk)
            seen.extend(m.offset for m in chunk)
        assert seen == list(range(500))
        with pytest.raises(ConsumerTimeoutException):
            stream.next_chunk()
    finally:
        conn.shutdown()
