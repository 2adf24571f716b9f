"""CreateTopics: create each requested topic, answering an error code per topic."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet import defer

from broker.protocol.errors import ErrorCode, InvalidRequestError, KafkaError, TopicAuthorizationFailedError
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.security.api_acls import CLUSTER_CREATE
from broker.server.authz import requester
from broker.server.dispatch import Handler
from broker.server.topics import PartitionBudget

if TYPE_CHECKING:
    from broker.server.broker import Broker


def handle(broker: Broker, header: RequestHeader, request: dict) -> defer.Deferred[dict]:
    topics = request["topics"]
    counts: dict[str, int] = {}
    for topic in topics:
        counts[topic["name"]] = counts.get(topic["name"], 0) + 1
    attempts = []
    budget = PartitionBudget(broker.config.max_partitions_per_request)
    who = requester(broker)
    on_cluster = who.may(CLUSTER_CREATE)  # else Create on each topic, as Kafka
    for topic in topics:
        if not on_cluster and not who.may_api(ApiKey.CREATE_TOPICS, topic["name"]):
            attempts.append(defer.fail(TopicAuthorizationFailedError(f"may not create topic {topic['name']}")))
            continue
        if counts[topic["name"]] > 1:
            attempts.append(defer.fail(InvalidRequestError(f"topic {topic['name']} appears more than once in the request")))
            continue
        assignment = {a["partition_index"]: list(a["broker_ids"]) for a in topic.get("assignments") or []} or None
        try:
            budget.take(topic["name"], broker.topics.new_partition_count(topic["name"], topic["num_partitions"], assignment))
        except KafkaError as exc:
            attempts.append(defer.fail(exc))
            continue
        configs = {c["name"]: c["value"] for c in topic.get("configs") or []}
        attempts.append(
            broker.topics.create(
                topic["name"],
                topic["num_partitions"],
                topic["replication_factor"],
                assignment,
                configs,
                validate_only=request.get("validate_only", False),
            )
        )
    d = defer.DeferredList(attempts, consumeErrors=True)
    return d.addCallback(
        lambda results: {"throttle_time_ms": 0, "topics": [topic_result(t["name"], r) for t, r in zip(topics, results)]}
    )


def topic_result(name: str, outcome: tuple[bool, Any]) -> dict:
    """A per-topic admin result: no error, or the failure's Kafka code and message."""
    ok, value = outcome
    if ok:
        return {"name": name, "error_code": ErrorCode.NONE, "error_message": None}
    exc = value.value
    return {"name": name, "error_code": getattr(exc, "code", ErrorCode.UNKNOWN_SERVER_ERROR), "error_message": str(exc)}


HANDLER = Handler(ApiKey.CREATE_TOPICS, 0, 4, handle)
