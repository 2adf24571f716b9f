"""The shape shared by the APIs answered partition by partition from the leader's state
(ListOffsets, OffsetForLeaderEpoch): topics of partitions in, the same nesting out, a Kafka
error failing only its own partition."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.protocol.errors import KafkaError
from broker.server.partition import Partition

LeaderLookup = Callable[[str, int], Partition]
Answer = Callable[[Partition, dict[str, Any]], dict[str, Any]]


def answer_partitions(
    topics: list[dict], topic_key: str, partition_key: str, leader: LeaderLookup, blank: Callable[[dict], dict], answer: Answer
) -> dict:
    """The response: per requested partition ``answer(leader, request part)`` over ``blank``
    (the partition's answer before lookup), or ``blank`` with the error code of the lookup."""

    def one(topic: str, part: dict) -> dict:
        response = blank(part)
        try:
            response.update(answer(leader(topic, part[partition_key]), part))
        except KafkaError as exc:
            response["error_code"] = exc.code
        return response

    return {
        "throttle_time_ms": 0,
        "topics": [
            {topic_key: topic[topic_key], "partitions": [one(topic[topic_key], part) for part in topic["partitions"]]}
            for topic in topics
        ],
    }
