"""JoinGroup: a member joins (or rejoins) a group; answered when the rebalance completes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.coordinator.group import join_error
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.server.dispatch import Handler
from broker.server.handlers.group_common import deferred_answer, group_error

if TYPE_CHECKING:
    from broker.server.broker import Broker


def _client_host(broker: Broker) -> str:
    """Kafka's "/127.0.0.1" form, when the connection recorded the peer."""
    host = broker.request.peer_host
    return f"/{host}" if host else ""


def handle(broker: Broker, header: RequestHeader, request: dict) -> Any:
    error = group_error(broker, ApiKey.JOIN_GROUP, request["group_id"])
    if error is not None:
        return {"throttle_time_ms": 0, **join_error(error, request["member_id"])}
    session_ms = request["session_timeout_ms"]
    rebalance_ms = request.get("rebalance_timeout_ms", -1)
    d, respond = deferred_answer()
    broker.coordinator.get_or_create(request["group_id"]).join(
        member_id=request["member_id"],
        client_id=header.client_id or "",
        client_host=_client_host(broker),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms if rebalance_ms > 0 else session_ms,
        protocol_type=request["protocol_type"],
        protocols=[(p["name"], bytes(p["metadata"])) for p in request["protocols"]],
        respond=respond,
    )
    return d


HANDLER = Handler(ApiKey.JOIN_GROUP, 0, 5, handle)
