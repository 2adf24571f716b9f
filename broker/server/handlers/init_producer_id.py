"""InitProducerId: a fresh producer id for an idempotent producer.

Ids come from blocks claimed in ZooKeeper, so they are unique across brokers and restarts.
Transactions are not served: a transactional id is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from twisted.internet import defer, threads

from broker.protocol.errors import ErrorCode
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.security.api_acls import ANY_TOPIC_WRITE
from broker.server.authz import requester
from broker.server.dispatch import Handler

if TYPE_CHECKING:
    from broker.server.broker import Broker

INITIAL_EPOCH = 0


def handle(broker: Broker, header: RequestHeader, request: dict) -> defer.Deferred[dict] | dict:
    if request.get("transactional_id") is not None:
        return _answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1)
    who = requester(broker)
    if not who.may_api(ApiKey.INIT_PRODUCER_ID) and not who.may_any(ANY_TOPIC_WRITE):
        return _answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, -1, -1)
    d = threads.deferToThread(broker.producer_ids.next_id)
    return d.addCallback(lambda pid: _answer(ErrorCode.NONE, pid, INITIAL_EPOCH))


def _answer(error_code: int, producer_id: int, producer_epoch: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": error_code, "producer_id": producer_id, "producer_epoch": producer_epoch}


HANDLER = Handler(ApiKey.INIT_PRODUCER_ID, 0, 1, handle)
