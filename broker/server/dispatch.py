"""The table from API key to handler, and the request/response framing around it.

Each handler module under ``broker.server.handlers`` declares one ``Handler``; the versions it
declares are exactly what ApiVersions advertises, so the two cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.protocol.errors import ProtocolDecodeError
from broker.protocol.header import RequestHeader, encode_response_header
from broker.protocol.messages import REQUESTS, RESPONSES, ApiKey

if TYPE_CHECKING:
    from broker.server.broker import Broker

NO_RESPONSE = object()
"""Returned by a handler when the client expects no answer (produce with acks=0)."""

@dataclass(frozen=True)
class Handler:
    """How one API is served: its version range and the function that answers it."""

    api_key: ApiKey
    min_version: int
    max_version: int
    handle: Callable[[Broker, RequestHeader, dict], Any]
    # ApiVersions must answer any version (in v0 form, with UNSUPPORTED_VERSION) so that a
    # newer client can learn what is served.
    answers_unsupported_versions: bool = False

    def serves(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


class Dispatcher:
    """Decodes a request body, calls its handler, encodes the response with its header."""

    def __init__(self, handlers: list[Handler]) -> None:
        self.handlers: dict[int, Handler] = {handler.api_key: handler for handler in handlers}
        self._supported = {h.api_key: (h.min_version, h.max_version) for _, h in sorted(self.handlers.items())}
        self.metrics: Any = None  # a broker.server.metrics.BrokerMetrics, set by the Broker

    def supported_versions(self) -> dict[ApiKey, tuple[int, int]]:
        """(min, max) served per API, by key: what ApiVersions answers (the table is fixed at start)."""
        return self._supported


    def dispatch(self, broker: Broker, header: RequestHeader, body: memoryview) -> Any:
        """Answer one request: a response dict, a Deferred of one, or NO_RESPONSE.

        Raises ProtocolDecodeError for an unknown API, an unserved version or a body that does
        not fit the schema; the connection is then closed, as Kafka does.
        """
        handler = self.handlers.get(header.api_key)
        if handler is None:
            raise ProtocolDecodeError(f"unknown api key {header.api_key}")
        if not handler.min_version <= header.api_version <= handler.max_version:  # handler.serves, inlined: every request
            if handler.answers_unsupported_versions:
                return handler.handle(broker, header, {})
            raise ProtocolDecodeError(
                f"{ApiKey(header.api_key).name} v{header.api_version} is not served "
                f"(versions {handler.min_version}-{handler.max_version})"
            )
        request = REQUESTS[handler.api_key].decode(header.api_version, body)
        metrics = self.metrics
        if metrics is None:
            return handler.handle(broker, header, request)
        started = metrics.request_started()
        return metrics.request_answered(header.api_key, started, handler.handle(broker, header, request))

    def encode_response(self, header: RequestHeader, response: dict) -> list[Any]:
        """The response frame as parts: bytes, and file slices to send zero-copy. An unserved
        version (ApiVersions answering a newer client) is answered in v0."""
        handler = self.handlers[header.api_key]
        version = header.api_version if handler.serves(header.api_version) else 0
        response_header = encode_response_header(header.correlation_id, header.api_key, version)
        return RESPONSES[handler.api_key].encode_frame(version, response, response_header)
