"""What every group handler shares: "is this broker the group's coordinator?" and turning the
group state machine's ``respond`` callbacks into Deferreds."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from twisted.internet import defer

from broker.cluster.zkdata import is_storable_name
from broker.protocol.errors import ErrorCode
from broker.protocol.messages import ApiKey
from broker.server.authz import requester

if TYPE_CHECKING:
    from broker.server.broker import Broker


def group_error(broker: Broker, api: ApiKey, group_id: str) -> int | None:
    """None when the requester may use ``api`` on the group (api_acls.REQUIRED) and this broker
    coordinates it; else the error to answer (GROUP_AUTHORIZATION_FAILED first, as Kafka checks)."""
    if not requester(broker).may_api(api, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    return coordinator_error(broker, group_id)


def coordinator_error(broker: Broker, group_id: str) -> int | None:
    """None when this broker coordinates ``group_id``; else the error to answer (INVALID_GROUP_ID for
    an id ZooKeeper cannot store under /consumers)."""
    if not is_storable_name(group_id):
        return ErrorCode.INVALID_GROUP_ID
    coordinator = broker.coordinator
    if coordinator is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if not coordinator.owns(group_id):
        return ErrorCode.NOT_COORDINATOR
    return None


def zookeeper_commit_error(broker: Broker, group_id: str) -> int | None:
    """For OffsetCommit/OffsetFetch v0 (offsets in ZooKeeper, any broker): None when this
    broker can reach the offset store; else the error to answer."""
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID
    return ErrorCode.COORDINATOR_NOT_AVAILABLE if broker.coordinator is None else None


def deferred_answer() -> tuple[defer.Deferred, Callable[[dict], None]]:
    """A Deferred and the callback that fires it with the response (throttle added)."""
    d: defer.Deferred = defer.Deferred()

    def respond(body: dict) -> None:
        if not d.called:
            d.callback({"throttle_time_ms": 0, **body})

    return d, respond
