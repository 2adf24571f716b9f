"""ApiVersions: what this broker serves, straight from the dispatch table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.protocol.errors import ErrorCode
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.server.dispatch import Handler

if TYPE_CHECKING:
    from broker.server.broker import Broker


def handle(broker: Broker, header: RequestHeader, request: dict) -> dict:
    served = broker.dispatcher.handlers[ApiKey.API_VERSIONS]
    if not served.serves(header.api_version):
        # A newer client than us: say which ApiVersions versions exist so it can retry lower.
        return {
            "error_code": ErrorCode.UNSUPPORTED_VERSION,
            "api_keys": [{"api_key": ApiKey.API_VERSIONS, "min_version": served.min_version, "max_version": served.max_version}],
        }
    return {
        "error_code": ErrorCode.NONE,
        "api_keys": [
            {"api_key": key, "min_version": low, "max_version": high}
            for key, (low, high) in broker.dispatcher.supported_versions().items()
        ],
        "throttle_time_ms": 0,
    }


HANDLER = Handler(ApiKey.API_VERSIONS, 0, 2, handle, answers_unsupported_versions=True)
