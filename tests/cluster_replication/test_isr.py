"""ISR shrink and expansion; min.insync.replicas with acks=all."""

from __future__ import annotations

import os
import signal
import time

from confluent_kafka import KafkaError, Producer

from broker.client.connection import BrokerConnection
from broker.protocol.errors import ErrorCode
from broker.protocol.messages import ApiKey
from broker.protocol.records import encode_batch
from tests.cluster_replication.conftest import bootstrap, by_id, consume_all, create_topic, isolate_leader, state, wait_until
from tests.starting import start_together


def _produce_one(bootstrap_servers: str, topic: str, acks: str, value: bytes) -> KafkaError | None:
    result: list = []
    producer = Producer({
        "bootstrap.servers": bootstrap_servers, "acks": acks, "message.send.max.retries": 0,
        "message.timeout.ms": 10000, "enable.idempotence": False,
    })
    producer.produce(topic, value=value, on_delivery=lambda err, msg: result.append(err))
    producer.flush(15)
    assert result, "no delivery report"
    return result[0]


def test_lagging_follower_leaves_the_isr_and_rejoins(cluster, zk):
    brokers = cluster(3)
    topic = create_topic(brokers, rf=3, config={"min.insync.replicas": "2"})
    s = state(zk, topic)
    follower = by_id(brokers, next(r for r in s.isr if r != s.leader))
    os.kill(follower.pid, signal.SIGSTOP)  # alive for ZooKeeper a while, but not fetching
    try:
        wait_until(lambda: follower.broker_id not in state(zk, topic).isr, 15, what="isr shrink")
        # two in-sync replicas remain: acks=all goes on
        assert _produce_one(bootstrap(brokers), topic, "all", b"while-lagging") is None
    finally:
        os.kill(follower.pid, signal.SIGCONT)
    wait_until(lambda: sorted(state(zk, topic).isr) == [1, 2, 3], 30, what="isr expansion")
    assert state(zk, topic).leader == s.leader


def test_two_of_three_down_refuses_acks_all_then_heals(cluster, zk):
    brokers = cluster(3)
    topic = create_topic(brokers, rf=3, config={"min.insync.replicas": "2"})
    leader, others = isolate_leader(brokers, zk, topic)
    err = _produce_one(leader.bootstrap, topic, "all", b"refused")
    assert err is not None and err.code() == KafkaError.NOT_ENOUGH_REPLICAS, err
    assert _produce_one(leader.bootstrap, topic, "1", b"accepted") is None
    start_together(others)
    wait_until(lambda: sorted(state(zk, topic).isr) == [1, 2, 3], 30, what="isr healed")
    assert _produce_one(bootstrap(brokers), topic, "all", b"after-heal") is None
    values = [v for _, v in consume_all(bootstrap(brokers), topic)]
    assert values == [b"accepted", b"after-heal"]
    # every replica has the same bytes
    logs = [(b.log_dir / "data" / f"{topic}-0" / "00000000000000000000.log") for b in brokers]
    wait_until(lambda: len({p.read_bytes() for p in logs}) == 1, 10, what="identical replicas")


def test_acks_all_answers_request_timed_out_when_followers_stall(cluster, zk):
    brokers = cluster(3, **{"replica.lag.time.max.ms": "20000"})
    topic = create_topic(brokers, rf=3, config={"min.insync.replicas": "2"})
    # the topic is created once the controller wrote it; the leader may apply its leadership later
    wait_until(lambda: _produce_one(bootstrap(brokers), topic, "all", b"ready") is None, 30,
               what="an acks=all produce with the leader leading")
    s = state(zk, topic)
    others = [b for b in brokers if b.broker_id != s.leader]
    leader = by_id(brokers, s.leader)
    for b in others:
        os.kill(b.pid, signal.SIGSTOP)  # in the ISR, but fetching nothing
    try:
        conn = BrokerConnection(leader.host, leader.port, timeout=10)
        body = {"acks": -1, "timeout_ms": 1000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": encode_batch([(None, b"stalled", [], int(time.time() * 1000))])}]}
        ]}
        started = time.monotonic()
        response = conn.request(ApiKey.PRODUCE, 7, body)
        waited = time.monotonic() - started
        conn.close()
        part = response["responses"][0]["partition_responses"][0]
        assert part["error_code"] == ErrorCode.REQUEST_TIMED_OUT
        assert 0.9 <= waited < 5
    finally:
        for b in others:
            os.kill(b.pid, signal.SIGCONT)
