"""DeleteAcls: delete the ACLs each filter matches (Alter on Cluster); per filter, what it deleted."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.security.acl import AclBinding, AclBindingFilter, entry_to_wire, pattern_to_wire
from broker.server.dispatch import Handler
from broker.server.handlers.acl_common import acl_store, binding_filter

if TYPE_CHECKING:
    from broker.server.broker import Broker


def _failed(code: int, message: str) -> dict:
    return {"error_code": code, "error_message": message, "matching_acls": []}


def handle(broker: Broker, header: RequestHeader, request: dict) -> Any:
    wire = request["filters"]
    try:
        store = acl_store(broker, ApiKey.DELETE_ACLS)
    except KafkaError as exc:
        return {"throttle_time_ms": 0, "filter_results": [_failed(exc.code, str(exc)) for _ in wire]}
    refused: dict[int, dict] = {}
    filters: list[AclBindingFilter] = []
    for i, f in enumerate(wire):
        try:
            filters.append(binding_filter(f))
        except KafkaError as exc:
            refused[i] = _failed(exc.code, str(exc))

    def answer(deleted: list[list[AclBinding]]) -> dict:
        found = iter(deleted)
        results = []
        for i in range(len(wire)):
            if i in refused:
                results.append(refused[i])
                continue
            matching = [{"error_code": ErrorCode.NONE, "error_message": None, **pattern_to_wire(b.pattern),
                         **entry_to_wire(b.entry)} for b in next(found)]
            results.append({"error_code": ErrorCode.NONE, "error_message": None, "matching_acls": matching})
        return {"throttle_time_ms": 0, "filter_results": results}

    def failed(failure: Any) -> dict:
        exc = failure.value
        code = getattr(exc, "code", ErrorCode.UNKNOWN_SERVER_ERROR)
        return {"throttle_time_ms": 0, "filter_results": [refused.get(i, _failed(code, str(exc))) for i in range(len(wire))]}

    return store.delete(filters).addCallbacks(answer, failed)


HANDLER = Handler(ApiKey.DELETE_ACLS, 0, 1, handle)
