"""ElectLeaders: a preferred (0) or unclean (1) leader election of some or all partitions, run by
the controller (another broker answers NOT_CONTROLLER, as Kafka does). Unclean elections happen
only when asked for explicitly: Kafka's safety rule."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet import threads

from broker.protocol.errors import ErrorCode
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.server.authz import requester
from broker.server.dispatch import Handler

if TYPE_CHECKING:
    from broker.server.broker import Broker

PREFERRED, UNCLEAN = 0, 1


def _response(results: dict[tuple[str, int], tuple[int, str | None]], error: int = ErrorCode.NONE) -> dict:
    by_topic: dict[str, list[dict]] = {}
    for (topic, partition), (code, message) in sorted(results.items()):
        by_topic.setdefault(topic, []).append({"partition_id": partition, "error_code": code, "error_message": message})
    return {
        "throttle_time_ms": 0,
        "error_code": error,
        "replica_election_results": [{"topic": t, "partition_result": parts} for t, parts in by_topic.items()],
    }


def handle(broker: Broker, header: RequestHeader, request: dict) -> Any:
    wanted = request["topic_partitions"]
    partitions = None if wanted is None else [(t["topic"], p) for t in wanted for p in t["partitions"]]
    election = request.get("election_type", PREFERRED)
    controller = broker.controller
    if not requester(broker).may_api(ApiKey.ELECT_LEADERS):
        return _response({tp: (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None) for tp in partitions or []},
                         ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if election not in (PREFERRED, UNCLEAN):
        return _response({tp: (ErrorCode.INVALID_REQUEST, f"election type {election}") for tp in partitions or []},
                         ErrorCode.INVALID_REQUEST)
    if controller is None or not controller.active:
        return _response({tp: (ErrorCode.NOT_CONTROLLER, None) for tp in partitions or []}, ErrorCode.NOT_CONTROLLER)
    timeout_s = max(request.get("timeout_ms", 60000), 1000) / 1000.0

    def answer(results: dict | None) -> dict:
        if results is None:
            return _response({tp: (ErrorCode.REQUEST_TIMED_OUT, None) for tp in partitions or []}, ErrorCode.REQUEST_TIMED_OUT)
        return _response(results)

    d = threads.deferToThread(controller.elect_leaders, partitions, election == UNCLEAN, timeout_s)
    return d.addCallback(answer)


HANDLER = Handler(ApiKey.ELECT_LEADERS, 0, 1, handle)
