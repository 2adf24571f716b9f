"""Filling a topic from a benchmark with librdkafka as fast as it takes records: a full local
queue is waited out, never dropped."""

from __future__ import annotations

from typing import Any


def produce_waiting(producer: Any, topic: str, value: bytes, wait_s: float, **kwargs: Any) -> None:
    """``producer.produce(topic, value, **kwargs)``, polling ``wait_s`` at a time while its queue is full."""
    while True:
        try:
            producer.produce(topic, value, **kwargs)
            return
        except BufferError:
            producer.poll(wait_s)
