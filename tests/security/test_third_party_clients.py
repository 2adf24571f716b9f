"""confluent-kafka (librdkafka), kafka-python and aiokafka produce and consume, in a consumer
group, over SSL, SASL_SSL with SCRAM-SHA-256 and SCRAM-SHA-512, and SASL_PLAINTEXT with PLAIN."""

from __future__ import annotations

import asyncio
import ssl
import uuid
from typing import Any

import pytest

from tests.security.conftest import SecuredBroker

# (listener, mechanism, user, password)
CASES = [
    ("SSL", None, None, None),
    ("SASL_SSL", "SCRAM-SHA-256", "alice", "alice-secret"),
    ("SASL_SSL", "SCRAM-SHA-512", "bob", "bob-secret"),
    ("SASL_PLAINTEXT", "PLAIN", "carol", "carol-secret"),
]
IDS = ["ssl", "sasl_ssl-scram256", "sasl_ssl-scram512", "sasl_plaintext-plain"]
COUNT = 20


def _values(tag: str) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(COUNT)]


def confluent_props(secured: SecuredBroker, listener: str, mechanism: str | None, user: str | None,
                    password: str | None) -> dict[str, Any]:
    props: dict[str, Any] = {"bootstrap.servers": secured.address(listener), "security.protocol": listener}
    if "SSL" in listener:
        props["ssl.ca.location"] = str(secured.certs.ca)
    if mechanism:
        props.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
    return props


@pytest.mark.parametrize(("listener", "mechanism", "user", "password"), CASES, ids=IDS)
def test_confluent_kafka(secured: SecuredBroker, listener: str, mechanism: str | None, user: str | None,
                         password: str | None) -> None:
    from confluent_kafka import Consumer, Producer

    topic = f"ck-{uuid.uuid4().hex[:8]}"
    props = confluent_props(secured, listener, mechanism, user, password)
    producer = Producer({**props, "acks": "all"})
    delivered: list[Any] = []
    for value in _values(topic):
        producer.produce(topic, value, on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(30) == 0
    assert delivered == [None] * COUNT
    consumer = Consumer({**props, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:
        for _ in range(300):
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
            if len(got) >= COUNT:
                break
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert got == _values(topic)


def _ssl_context(secured: SecuredBroker) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(secured.certs.ca))
    return context


@pytest.mark.parametrize(("listener", "mechanism", "user", "password"), CASES, ids=IDS)
def test_kafka_python(secured: SecuredBroker, listener: str, mechanism: str | None, user: str | None,
                      password: str | None) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic = f"kp-{uuid.uuid4().hex[:8]}"
    props: dict[str, Any] = {"bootstrap_servers": secured.address(listener), "security_protocol": listener}
    if "SSL" in listener:
        props["ssl_cafile"] = str(secured.certs.ca)
    if mechanism:
        props.update({"sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password})
    producer = KafkaProducer(acks="all", **props)
    try:
        futures = [producer.send(topic, value) for value in _values(topic)]
        producer.flush(30)
        for future in futures:
            future.get(timeout=30)
    finally:
        producer.close()
    consumer = KafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest",
                             consumer_timeout_ms=15000, **props)
    got: list[bytes] = []
    try:
        for message in consumer:
            got.append(message.value)
            if len(got) >= COUNT:
                break
        consumer.commit()
    finally:
        consumer.close()
    assert got == _values(topic)


@pytest.mark.parametrize(("listener", "mechanism", "user", "password"), CASES, ids=IDS)
def test_aiokafka(secured: SecuredBroker, listener: str, mechanism: str | None, user: str | None,
                  password: str | None) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic = f"ak-{uuid.uuid4().hex[:8]}"
    props: dict[str, Any] = {"bootstrap_servers": secured.address(listener), "security_protocol": listener}
    if "SSL" in listener:
        props["ssl_context"] = _ssl_context(secured)
    if mechanism:
        props.update({"sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password})

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(acks="all", **props)
        await producer.start()
        try:
            for value in _values(topic):
                await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest", **props)
        await consumer.start()
        got: list[bytes] = []
        try:
            while len(got) < COUNT:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 20)
                for messages in batch.values():
                    got.extend(m.value for m in messages)
            await consumer.commit()
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == _values(topic)



def test_kcat_over_sasl_ssl(secured: SecuredBroker) -> None:
    """kcat (Debian's, librdkafka 2.0) produces and consumes over SASL_SSL with SCRAM-SHA-512."""
    import shutil
    import subprocess

    kcat = shutil.which("kcat")
    assert kcat, "kcat is installed by `make setup` (Debian's package)"
    topic = f"kcat-{uuid.uuid4().hex[:8]}"
    props = confluent_props(secured, "SASL_SSL", "SCRAM-SHA-512", "bob", "bob-secret")
    common = [kcat, "-b", props.pop("bootstrap.servers"), "-t", topic]
    for key, value in props.items():
        common += ["-X", f"{key}={value}"]
    lines = b"".join(v + b"\n" for v in _values(topic))
    produced = subprocess.run([*common, "-P", "-X", "acks=all"], input=lines, capture_output=True, timeout=60)
    assert produced.returncode == 0, produced.stderr.decode()
    consumed = subprocess.run([*common, "-C", "-o", "beginning", "-c", str(COUNT), "-e"], capture_output=True,
                              timeout=60)
    assert consumed.returncode == 0, consumed.stderr.decode()
    assert consumed.stdout.splitlines() == _values(topic)
