"""CreatePartitions: add partitions to existing topics; the controller gives them leaders."""

from __future__ import annotations

from typing import TYPE_CHECKING

from twisted.internet import defer

from broker.protocol.errors import InvalidRequestError, KafkaError, TopicAuthorizationFailedError
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.server.authz import requester
from broker.server.dispatch import Handler
from broker.server.handlers.create_topics import topic_result
from broker.server.topics import PartitionBudget

if TYPE_CHECKING:
    from broker.server.broker import Broker


def handle(broker: Broker, header: RequestHeader, request: dict) -> defer.Deferred[dict]:
    topics = request["topics"]
    names = [t["name"] for t in topics]
    attempts = []
    budget = PartitionBudget(broker.config.max_partitions_per_request)
    who = requester(broker)
    for topic in topics:
        if not who.may_api(ApiKey.CREATE_PARTITIONS, topic["name"]):
            attempts.append(defer.fail(TopicAuthorizationFailedError(f"may not alter topic {topic['name']}")))
            continue
        if names.count(topic["name"]) > 1:
            attempts.append(defer.fail(InvalidRequestError(f"topic {topic['name']} appears more than once in the request")))
            continue
        have = len(broker.metadata.topics.get(topic["name"], {}))
        try:
            budget.take(topic["name"], max(topic["count"] - have, 0))
        except KafkaError as exc:
            attempts.append(defer.fail(exc))
            continue
        assignment = [list(a["broker_ids"]) for a in topic["assignments"]] if topic.get("assignments") else None
        attempts.append(
            broker.topics.create_partitions(topic["name"], topic["count"], assignment, request.get("validate_only", False))
        )
    d = defer.DeferredList(attempts, consumeErrors=True)
    return d.addCallback(
        lambda results: {"throttle_time_ms": 0, "results": [topic_result(t["name"], r) for t, r in zip(topics, results)]}
    )


HANDLER = Handler(ApiKey.CREATE_PARTITIONS, 0, 1, handle)
