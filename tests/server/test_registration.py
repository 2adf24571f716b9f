"""ZooKeeper membership: the broker registers itself (under a chroot), refuses a live
duplicate id, writes topics in Kafka's layout, and leaves cleanly on SIGTERM."""

from __future__ import annotations

import json
import time
import uuid

from confluent_kafka import Producer


def test_registration_and_topic_layout(broker, zk_client):
    client = zk_client.client
    data, stat = client.get(f"/brokers/ids/{broker.broker_id}")
    registration = json.loads(data)
    assert stat.ephemeralOwner != 0
    assert registration["endpoints"] == [f"PLAINTEXT://{broker.bootstrap}"]
    assert registration["port"] == broker.port

    topic = f"layout-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, value=b"x")
    assert producer.flush(15) == 0
    assignment = json.loads(client.get(f"/brokers/topics/{topic}")[0])
    assert assignment["partitions"] == {"0": [broker.broker_id]}
    state = json.loads(client.get(f"/brokers/topics/{topic}/partitions/0/state")[0])
    assert state["leader"] == broker.broker_id and state["isr"] == [broker.broker_id]


def test_second_broker_with_live_id_refuses_to_start(broker, broker_factory):
    duplicate = broker_factory(broker_id=broker.broker_id, start=False)
    duplicate.start(wait=False)
    deadline = time.monotonic() + 30
    while duplicate.alive and time.monotonic() < deadline:
        time.sleep(0.1)
    assert duplicate.returncode not in (None, 0)
    errors = [line for line in duplicate.out_path.read_text().splitlines() if line.startswith("logbus server-start: error:")]
    assert len(errors) == 1 and "already registered" in errors[0], duplicate.log_tail()
    assert broker.alive


def test_sigterm_is_a_clean_shutdown(broker, zk_client):
    path = f"/brokers/ids/{broker.broker_id}"
    assert zk_client.client.exists(path)
    assert broker.stop() == 0
    assert not zk_client.client.exists(path)
    assert (broker.log_dir / "data" / ".kafka_cleanshutdown").exists()
    assert "stopped cleanly" in broker.out_path.read_text()
