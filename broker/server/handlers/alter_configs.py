"""AlterConfigs: replace the dynamic config of topics (resource type 2) or brokers (4; name ""
is the cluster-wide default); every broker applies it through /config/changes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet import defer

from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.server.authz import requester
from broker.server.dispatch import Handler
from broker.server.dynamic_configs import alter

if TYPE_CHECKING:
    from broker.server.broker import Broker


def alter_all(broker: Broker, api: ApiKey, request: dict, replace: bool) -> defer.Deferred[dict]:
    """Both AlterConfigs and IncrementalAlterConfigs: one result per resource, in request order."""
    resources = request["resources"]
    who = requester(broker)
    attempts = []
    for r in resources:
        refused = who.config_refusal(api, r["resource_type"], r["resource_name"])
        attempts.append(defer.fail(refused) if refused else alter(broker, r, replace, request.get("validate_only", False)))
    d = defer.DeferredList(attempts, consumeErrors=True)
    return d.addCallback(
        lambda results: {"throttle_time_ms": 0, "responses": [_result(r, o) for r, o in zip(resources, results)]}
    )


def _result(resource: dict, outcome: tuple[bool, Any]) -> dict:
    ok, value = outcome
    code: int = ErrorCode.NONE
    message: str | None = None
    if not ok:
        exc = value.value
        code = exc.code if isinstance(exc, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
        message = str(exc)
    return {
        "error_code": code, "error_message": message,
        "resource_type": resource["resource_type"], "resource_name": resource["resource_name"],
    }


def handle(broker: Broker, header: RequestHeader, request: dict) -> defer.Deferred[dict]:
    return alter_all(broker, ApiKey.ALTER_CONFIGS, request, replace=True)


HANDLER = Handler(ApiKey.ALTER_CONFIGS, 0, 1, handle)
