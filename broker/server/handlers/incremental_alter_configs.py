"""IncrementalAlterConfigs: SET, DELETE, APPEND or SUBTRACT single keys of a topic's or a
broker's dynamic config (what librdkafka's incremental_alter_configs and kafka-configs send)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from twisted.internet import defer

from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.server.dispatch import Handler
from broker.server.handlers.alter_configs import alter_all

if TYPE_CHECKING:
    from broker.server.broker import Broker


def handle(broker: Broker, header: RequestHeader, request: dict) -> defer.Deferred[dict]:
    return alter_all(broker, ApiKey.INCREMENTAL_ALTER_CONFIGS, request, replace=False)


HANDLER = Handler(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 0, handle)
