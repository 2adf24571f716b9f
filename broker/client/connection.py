"""A blocking connection to one broker: send a request dict, get the response dict.

The building block of logbus's own clients and tools. No reactor: it works in plain scripts,
Spark executors and Airflow tasks. Not thread-safe; use one per thread.
"""

from __future__ import annotations

import itertools
import socket
import struct

from broker.protocol.header import encode_request_header
from broker.protocol.messages import REQUESTS, RESPONSES, ApiKey

_SIZE = struct.Struct(">i")


class BrokerConnectionError(ConnectionError):
    """The broker could not be reached, or closed the connection."""


class BrokerConnection:
    """One TCP connection speaking the Kafka protocol, request by request."""

    def __init__(self, host: str, port: int, client_id: str = "logbus", timeout: float = 30.0) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise BrokerConnectionError(f"cannot connect to broker {host}:{port}: {exc.strerror or exc}") from exc
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._correlation_ids = itertools.count(1)

    @classmethod
    def from_address(cls, address: str, **kwargs: object) -> "BrokerConnection":
        """Connect to ``host:port``."""
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"broker address must be host:port, not {address!r}")
        return cls(host, int(port), **kwargs)  # type: ignore[arg-type]

    def request(self, api_key: ApiKey, version: int, body: dict, expect_response: bool = True) -> dict | None:
        """Send one request and wait for its response."""
        correlation_id = next(self._correlation_ids)
        header = encode_request_header(api_key, version, correlation_id, self.client_id)
        payload = header + REQUESTS[api_key].encode_bytes(version, body)
        self.send_frame(payload)
        if not expect_response:
            return None
        frame = self.receive_frame()
        (received_id,) = _SIZE.unpack_from(frame, 0)
        if received_id != correlation_id:
            raise BrokerConnectionError(f"response correlation id {received_id} does not match request {correlation_id}")
        return RESPONSES[api_key].decode(version, memoryview(frame)[4:])

    def send_frame(self, payload: bytes) -> None:
        """Send ``payload`` with its size prefix."""
        self.send_raw(_SIZE.pack(len(payload)) + payload)

    def send_raw(self, data: bytes) -> None:
        """Send bytes as they are (tests use it for malformed input)."""
        try:
            self._sock.sendall(data)
        except OSError as exc:
            raise BrokerConnectionError(f"broker {self.host}:{self.port} closed the connection: {exc}") from exc

    def receive_frame(self) -> bytes:
        """One size-prefixed response frame, without its prefix."""
        (size,) = _SIZE.unpack(self._receive_exactly(4))
        return self._receive_exactly(size)

    def _receive_exactly(self, size: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < size:
            try:
                chunk = self._sock.recv(min(size - len(chunks), 1 << 20))
            except OSError as exc:
                raise BrokerConnectionError(f"broker {self.host}:{self.port} connection failed: {exc}") from exc
            if not chunk:
                raise BrokerConnectionError(f"broker {self.host}:{self.port} closed the connection")
            chunks += chunk
        return bytes(chunks)

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> "BrokerConnection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
