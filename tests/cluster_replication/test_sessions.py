"""ZooKeeper session expiry and controlled shutdown."""

from __future__ import annotations

import os
import re
import signal
import time
from concurrent.futures import ThreadPoolExecutor

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.cluster_replication.conftest import bootstrap, by_id, consume_all, create_topic, state, wait_until


def test_expired_session_reregisters_and_the_cluster_recovers(cluster, zk):
    brokers = cluster(3)
    topic = create_topic(brokers, rf=3)
    s = state(zk, topic)
    victim = by_id(brokers, s.leader)
    os.kill(victim.pid, signal.SIGSTOP)  # a long pause: the session expires (6 s)
    try:
        wait_until(lambda: state(zk, topic).leader not in (s.leader, -1), 20, what="leader moved off the paused broker")
        wait_until(lambda: not zk.kazoo.exists(f"/brokers/ids/{victim.broker_id}"), 5, what="registration gone")
    finally:
        os.kill(victim.pid, signal.SIGCONT)
    wait_until(lambda: zk.kazoo.exists(f"/brokers/ids/{victim.broker_id}"), 20, what="re-registration")
    wait_until(lambda: sorted(state(zk, topic).isr) == [1, 2, 3], 30, what="rejoined the isr")
    producer = KafkaProducer(bootstrap_servers=bootstrap(brokers), acks="all")
    for i in range(20):
        producer.send(topic, f"after-expiry-{i}".encode()).get(30)
    producer.close()
    assert [v for _, v in consume_all(bootstrap(brokers), topic)][-20:] == [f"after-expiry-{i}".encode() for i in range(20)]


def test_controlled_shutdown_moves_leadership_first(cluster, zk):
    brokers = cluster(3)
    topic = create_topic(brokers, partitions=3, rf=3, config={"min.insync.replicas": "2"})
    producer = KafkaProducer(bootstrap_servers=bootstrap(brokers), acks="all", retries=20, retry_backoff_ms=100)
    sent = []
    for i in range(300):
        producer.send(topic, f"before-{i}".encode(), partition=i % 3)
        sent.append(f"before-{i}".encode())
    producer.flush(30)
    leader = state(zk, topic, 0).leader
    victim = by_id(brokers, leader)
    started = time.monotonic()
    assert victim.stop() == 0
    stopped_in = time.monotonic() - started
    # leadership moved while the broker was still up: no waiting for a session timeout
    for p in range(3):
        assert state(zk, topic, p).leader not in (leader, -1)
    for i in range(300):
        producer.send(topic, f"after-{i}".encode(), partition=i % 3).get(30) if i % 100 == 0 else producer.send(
            topic, f"after-{i}".encode(), partition=i % 3
        )
        sent.append(f"after-{i}".encode())
    producer.flush(30)
    producer.close()
    print(f"\ncontrolled shutdown of broker {leader} took {stopped_in:.2f}s")
    live = [b for b in brokers if b.alive]
    consumer = KafkaConsumer(bootstrap_servers=bootstrap(live), enable_auto_commit=False, consumer_timeout_ms=5000)
    consumer.assign([TopicPartition(topic, p) for p in range(3)])
    consumer.seek_to_beginning()
    got = [m.value for m in consumer]
    consumer.close()
    assert sorted(got) == sorted(sent)


def test_brokers_stopped_together_do_not_wait_for_a_move_none_can_take(cluster):
    """Every broker SIGTERMed at once (`logbus cluster down`, `make run`'s end): the controller
    never moves a leader to a broker that is shutting down too, so none waits out the bound."""
    brokers = cluster(3)
    topic = create_topic(brokers, partitions=3, rf=3)
    started = re.compile(rf"{topic}-\d: (leader at|follower of)")
    wait_until(lambda: sum(len(started.findall(b.out_path.read_text())) for b in brokers) == 9, 20,
               what="each replica of the three partitions started (one leader, two followers)")
    with ThreadPoolExecutor(len(brokers)) as pool:
        assert list(pool.map(lambda b: b.stop(), brokers)) == [0, 0, 0]
    logs = [b.out_path.read_text() for b in brokers]
    assert not any("leadership did not move" in log for log in logs)
    assert any("another live in-sync replica that is not shutting down" in log for log in logs)
    assert all("stopped cleanly" in log for log in logs)
