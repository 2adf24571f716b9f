"""DeleteTopics: remove topics from ZooKeeper and their logs, when deletion is enabled."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet import defer

from broker.protocol.errors import (
    ErrorCode,
    TopicAuthorizationFailedError,
    TopicDeletionDisabledError,
    UnknownTopicOrPartitionError,
)
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.server.authz import Requester, requester
from broker.server.dispatch import Handler

if TYPE_CHECKING:
    from broker.server.broker import Broker


def handle(broker: Broker, header: RequestHeader, request: dict) -> defer.Deferred[dict]:
    names = list(request["topic_names"])
    who = requester(broker)
    d = defer.DeferredList([_delete(broker, who, name) for name in names], consumeErrors=True)
    return d.addCallback(lambda results: {"throttle_time_ms": 0, "responses": [_result(n, r) for n, r in zip(names, results)]})


def _delete(broker: Broker, who: Requester, name: str) -> defer.Deferred[None]:
    if not who.may_api(ApiKey.DELETE_TOPICS, name):  # before existence: a refusal tells nothing
        return defer.fail(TopicAuthorizationFailedError(f"may not delete topic {name}"))
    if not broker.config.delete_topic_enable:
        return defer.fail(TopicDeletionDisabledError("delete.topic.enable is false on this broker"))
    if name not in broker.metadata.topics:
        return defer.fail(UnknownTopicOrPartitionError(f"topic {name} does not exist"))
    return broker.topics.delete(name)


def _result(name: str, outcome: tuple[bool, Any]) -> dict:
    ok, value = outcome
    code = ErrorCode.NONE if ok else getattr(value.value, "code", ErrorCode.UNKNOWN_SERVER_ERROR)
    return {"name": name, "error_code": code}


HANDLER = Handler(ApiKey.DELETE_TOPICS, 0, 3, handle)
