"""The Prometheus endpoint (metrics.port) of real broker processes: counters and latency
histograms move under produce and consume; while a follower is down under-replicated
partitions go above 0 and the leader counts an ISR shrink, and when it returns they go back
to 0 and the leader counts an expansion; follower fetches are counted apart from consumers'."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.cluster.net import free_port
from tests.cluster_replication.conftest import FAST, by_id, state, wait_until
from tests.scraping import scrape
from tests.starting import start_together


def _start(broker_factory, n: int) -> list:
    return start_together([broker_factory(overrides={**FAST, "metrics.port": free_port()}, broker_id=i + 1, start=False)
                           for i in range(n)])


def _port(b) -> int:
    return int(b.props["metrics.port"])


def test_counters_and_histograms_move(broker_factory):
    (b,) = _start(broker_factory, 1)
    port = _port(b)
    topic = f"m-{uuid.uuid4().hex[:8]}"
    before = scrape(port)
    assert before["logbus_under_replicated_partitions"] == 0

    producer = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    for i in range(200):
        producer.produce(topic, value=b"v%05d" % i)
    assert producer.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    deadline = 200
    while got < 200 and deadline:
        msg = consumer.poll(0.5)
        deadline -= 1
        if msg is not None and msg.error() is None:
            got += 1
    consumer.close()
    assert got == 200

    after = scrape(port)
    bytes_in = after[f'logbus_topic_bytes_in_total{{topic="{topic}"}}']
    assert after[f'logbus_topic_records_in_total{{topic="{topic}"}}'] == 200
    assert bytes_in > 200 * 6
    # everything produced was consumed once: out covers it (refetches may add, never subtract)
    assert after[f'logbus_topic_bytes_out_total{{topic="{topic}"}}'] >= bytes_in
    assert 200 <= after[f'logbus_topic_records_out_total{{topic="{topic}"}}'] < 400
    assert f'logbus_topic_replication_bytes_out_total{{topic="{topic}"}}' not in after  # no followers
    assert after['logbus_requests_total{api="PRODUCE"}'] >= 1
    assert after['logbus_requests_total{api="FETCH"}'] >= 1
    for api in ("PRODUCE", "FETCH", "METADATA"):
        count = after[f'logbus_request_latency_seconds_count{{api="{api}"}}']
        assert count > before.get(f'logbus_request_latency_seconds_count{{api="{api}"}}', 0)
        assert after[f'logbus_request_latency_seconds_bucket{{api="{api}",le="+Inf"}}'] == count
        assert after[f'logbus_request_latency_seconds_sum{{api="{api}"}}'] > 0
    assert after[f'logbus_log_size_bytes{{topic="{topic}",partition="0"}}'] > 0
    assert after["logbus_active_controller"] == 1  # the only broker
    assert {"logbus_purgatory_size{purgatory=\"fetch\"}", "logbus_purgatory_size{purgatory=\"produce\"}"} <= after.keys()


def test_a_killed_follower_shows_in_urp_and_isr_counters(broker_factory, zk_client):
    brokers = _start(broker_factory, 3)  # replica.lag.time.max.ms 3 s, ZooKeeper sessions 6 s
    topic = f"m-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in brokers)})
    admin.create_topics([NewTopic(topic, 1, 3)], operation_timeout=20)[topic].result(30)
    wait_until(lambda: len(state(zk_client, topic).isr) == 3, 30, what="full isr")
    s = state(zk_client, topic)
    leader = by_id(brokers, s.leader)
    follower = by_id(brokers, next(r for r in s.isr if r != s.leader))
    metric = lambda name: scrape(_port(leader))[name]  # noqa: E731
    assert metric("logbus_under_replicated_partitions") == 0
    assert sum(scrape(_port(b))["logbus_active_controller"] for b in brokers) == 1

    producer = Producer({"bootstrap.servers": leader.bootstrap, "acks": "all"})
    for i in range(50):
        producer.produce(topic, value=b"r%04d" % i)
    assert producer.flush(30) == 0
    produced = metric(f'logbus_topic_bytes_in_total{{topic="{topic}"}}')
    # both followers fetched the records: replication out, not consumer out
    wait_until(lambda: metric(f'logbus_topic_replication_bytes_out_total{{topic="{topic}"}}') >= 2 * produced,
               30, what="replication bytes out")
    assert scrape(_port(leader)).get(f'logbus_topic_bytes_out_total{{topic="{topic}"}}', 0) == 0

    shrinks, expands = metric("logbus_isr_shrinks_total"), metric("logbus_isr_expands_total")
    follower.kill()  # SIGKILL: the leader drops it after replica.lag.time.max.ms, before its session ends
    wait_until(lambda: metric("logbus_under_replicated_partitions") >= 1, 30, what="under-replicated partitions > 0")
    wait_until(lambda: metric("logbus_isr_shrinks_total") > shrinks, 30, what="an ISR shrink counted")
    assert follower.broker_id not in state(zk_client, topic).isr
    expands_while_down = metric("logbus_isr_expands_total")

    follower.start()
    wait_until(lambda: metric("logbus_under_replicated_partitions") == 0, 60, what="under-replicated partitions back to 0")
    assert metric("logbus_isr_expands_total") > expands_while_down >= expands
    assert len(state(zk_client, topic).isr) == 3
