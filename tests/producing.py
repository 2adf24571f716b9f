"""Producing test records with a real third-party client (librdkafka): shared by the tests that
need data in a topic before they read it with our clients."""

from __future__ import annotations

from confluent_kafka import Producer


def produce(bootstrap: str, topic: str, records: list[dict], **config: object) -> None:
    """Send ``records`` (``Producer.produce`` keyword arguments each) and fail unless all are acknowledged."""
    errors: list = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    for record in records:
        producer.produce(topic, on_delivery=lambda err, msg: err and errors.append(err), **record)
    assert producer.flush(30) == 0
    assert errors == []
