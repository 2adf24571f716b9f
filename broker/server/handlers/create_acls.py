"""CreateAcls: store ACL bindings in ZooKeeper (Alter on Cluster); one result per creation, an
invalid one refused alone with INVALID_REQUEST."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet import defer

from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.security.acl import creation_from_wire, invalid_binding
from broker.server.dispatch import Handler
from broker.server.handlers.acl_common import acl_store

if TYPE_CHECKING:
    from broker.server.broker import Broker


def _result(code: int, message: str | None = None) -> dict:
    return {"error_code": code, "error_message": message}


def handle(broker: Broker, header: RequestHeader, request: dict) -> Any:
    creations = request["creations"]
    try:
        store = acl_store(broker, ApiKey.CREATE_ACLS)
    except KafkaError as exc:
        return {"throttle_time_ms": 0, "results": [_result(exc.code, str(exc)) for _ in creations]}
    results: list[dict | None] = []
    valid = []
    for creation in creations:
        binding = creation_from_wire(creation)
        why = invalid_binding(binding)
        if why is not None:
            results.append(_result(ErrorCode.INVALID_REQUEST, why))
        else:
            results.append(None)
            valid.append(binding)
    d = store.create(valid) if valid else defer.succeed(None)

    def answer(outcome: Any) -> dict:
        failed = outcome if isinstance(outcome, Exception) else None
        code = ErrorCode.NONE if failed is None else getattr(failed, "code", ErrorCode.UNKNOWN_SERVER_ERROR)
        done = [r if r is not None else _result(code, None if failed is None else str(failed)) for r in results]
        return {"throttle_time_ms": 0, "results": done}

    return d.addCallbacks(answer, lambda f: answer(f.value))


HANDLER = Handler(ApiKey.CREATE_ACLS, 0, 1, handle)
