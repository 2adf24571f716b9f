"""SimpleConsumer on a 3-broker cluster: a follower answers NOT_LEADER, and after the leader is
killed `find_leader` names the new leader, which serves every acknowledged record."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer

from broker.client import AdminClient, LeaderNotAvailableError, SimpleConsumer
from broker.client.connection import BrokerConnectionError
from broker.protocol.errors import NotLeaderOrFollowerError
from tests.starting import QUICK_EXPIRY, start_together


def test_find_leader_follows_a_failover(broker_factory):
    brokers = {b.broker_id: b for b in start_together([broker_factory(overrides={"min.insync.replicas": "2", **QUICK_EXPIRY}, start=False)
                                                       for _ in range(3)])}
    topic = f"failover-{uuid.uuid4().hex[:8]}"
    with AdminClient(brokers[1].bootstrap) as admin:
        admin.create_topic(topic, 1, 3)
    producer = Producer({"bootstrap.servers": brokers[1].bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(200):
        producer.produce(topic, key=b"k", value=f"v{i}".encode())
    assert producer.flush(30) == 0

    with SimpleConsumer(brokers[1].host, brokers[1].port) as any_broker:
        leader_id, host, port = any_broker.find_leader(topic, 0)
    follower = next(b for bid, b in brokers.items() if bid != leader_id)
    with SimpleConsumer(follower.host, follower.port) as not_leader:
        with pytest.raises(NotLeaderOrFollowerError):
            not_leader.fetch(topic, 0, 0)

    brokers[leader_id].kill()
    survivor = follower
    deadline = time.monotonic() + 30
    new_leader = None
    while time.monotonic() < deadline:
        try:
            with SimpleConsumer(survivor.host, survivor.port, timeout=5) as consumer:
                candidate = consumer.find_leader(topic, 0)
            if candidate[0] != leader_id:
                new_leader = candidate
                break
        except (LeaderNotAvailableError, BrokerConnectionError):
            pass
        time.sleep(0.2)
    assert new_leader is not None, "no new leader within 30 s"

    _, host, port = new_leader
    # A new leader's high watermark catches up once the followers fetch from it again, so the
    # records may take a moment to become readable; they must all arrive.
    with SimpleConsumer(host, port) as consumer:
        messages = []
        offset = 0
        deadline = time.monotonic() + 30
        while offset < 200 and time.monotonic() < deadline:
            batch = consumer.fetch(topic, 0, offset)
            if not batch:
                time.sleep(0.1)
                continue
            messages.extend(batch)
            offset = batch.next_offset
    assert [m.value for m in messages] == [f"v{i}".encode() for i in range(200)]
    assert [m.offset for m in messages] == list(range(200))
