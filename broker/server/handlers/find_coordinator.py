"""FindCoordinator: which broker coordinates a consumer group.

Group coordination (JoinGroup, SyncGroup, OffsetCommit...) is not served yet, so every group
is answered COORDINATOR_NOT_AVAILABLE, which clients treat as "retry later". The API is
served all the same because librdkafka takes it as the sign of a broker recent enough for
lz4 framing, and refuses lz4 compression without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.protocol.errors import ErrorCode
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.server.dispatch import Handler

if TYPE_CHECKING:
    from broker.server.broker import Broker


def handle(broker: "Broker", header: RequestHeader, request: dict) -> dict:
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
        "error_message": "consumer group coordination is not served by this broker yet",
        "node_id": -1,
        "host": "",
        "port": -1,
    }


HANDLER = Handler(ApiKey.FIND_COORDINATOR, 0, 2, handle)
