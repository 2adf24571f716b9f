"""A blocking connection to one broker: send a request dict, get the response dict.

The building block of logbus's own clients and tools. No reactor: it works in plain scripts,
Spark executors and Airflow tasks. Not thread-safe; use one per thread.
"""

from __future__ import annotations

import collections
import itertools
import socket
import struct
from typing import Literal, overload

from broker.client.closeable import Closeable
from broker.client.security import PLAINTEXT, ClientSecurity, login, wrap_socket
from broker.protocol.header import decode_response_header, encode_request_header
from broker.protocol.messages import REQUESTS, RESPONSES, ApiKey

_SIZE = struct.Struct(">i")


class BrokerConnectionError(ConnectionError):
    """The broker could not be reached, or closed the connection."""


class BrokerConnection(Closeable):
    """One TCP connection speaking the Kafka protocol, request by request; with ``security``,
    TLS and a SASL login first (broker/client/security.py)."""

    def __init__(self, host: str, port: int, client_id: str = "logbus", timeout: float = 30.0,
                 security: ClientSecurity = PLAINTEXT) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.security = security
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise BrokerConnectionError(f"cannot connect to broker {host}:{port}: {exc.strerror or exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock
        self._correlation_ids = itertools.count(1)
        self._pipelined: collections.deque[tuple[int, ApiKey, int]] = collections.deque()
        self._answered = False  # whether the broker ever sent a byte
        if security.tls:
            try:
                self._sock = wrap_socket(sock, host, security)
            except OSError as exc:  # ssl.SSLError and certificate errors are OSErrors
                sock.close()
                raise BrokerConnectionError(f"TLS handshake with broker {host}:{port} failed: {exc}") from exc
        if security.sasl:
            try:
                login(self.request, security)
            except BaseException:
                self._sock.close()
                raise

    @classmethod
    def from_address(cls, address: str, **kwargs: object) -> BrokerConnection:
        """Connect to ``host:port``."""
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"broker address must be host:port, not {address!r}")
        return cls(host, int(port), **kwargs)  # type: ignore[arg-type]

    @overload
    def request(self, api_key: ApiKey, version: int, body: dict, expect_response: Literal[True] = True) -> dict: ...

    @overload
    def request(self, api_key: ApiKey, version: int, body: dict, expect_response: bool) -> dict | None: ...

    def request(self, api_key: ApiKey, version: int, body: dict, expect_response: bool = True) -> dict | None:
        """Send one request and wait for its response; None for a request answered by nothing
        (``expect_response=False``: a Produce with acks=0)."""
        correlation_id = next(self._correlation_ids)
        header = encode_request_header(api_key, version, correlation_id, self.client_id)
        payload = header + REQUESTS[api_key].encode_bytes(version, body)
        self.send_frame(payload)
        if not expect_response:
            return None
        frame = self.receive_frame()
        received_id, at = decode_response_header(frame, 0, api_key, version)
        if received_id != correlation_id:
            raise BrokerConnectionError(f"response correlation id {received_id} does not match request {correlation_id}")
        return RESPONSES[api_key].decode(version, memoryview(frame)[at:])

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
                raise BrokerConnectionError(f"broker {self.host}:{self.port} closed the connection{self._closed_hint()}")
            chunks += chunk
            self._answered = True
        return bytes(chunks)

    def _closed_hint(self) -> str:
        """Why a broker may close a plaintext client's first request: its listener wants TLS or SASL."""
        if self._answered or self.security.tls or self.security.sasl:
            return ""
        return " (a TLS or SASL listener closes plaintext clients: is security.protocol set?)"

    # Pipelining: several requests in flight, answers read in order (Kafka answers a
    # connection's requests in the order they were sent). Do not mix with ``request``
    # while pipelined requests are unanswered.

    def fileno(self) -> int:
        """The socket's descriptor, for ``select``."""
        return self._sock.fileno()

    def pending(self) -> int:
        """Bytes already received and decrypted but not read yet (TLS only): ``select`` does not
        see them, so a reader must drain them before it waits on the descriptor again."""
        pending = getattr(self._sock, "pending", None)
        return pending() if pending is not None else 0

    @property
    def in_flight(self) -> int:
        """Pipelined requests sent and not yet answered."""
        return len(self._pipelined)

    def send_request(self, api_key: ApiKey, version: int, body: dict, expect_response: bool = True) -> int:
        """Send one request without waiting; its answer comes from ``receive_response``."""
        return self.send_encoded(api_key, version, REQUESTS[api_key].encode_bytes(version, body), expect_response)

    def send_encoded(self, api_key: ApiKey, version: int, body: bytes, expect_response: bool = True) -> int:
        """Like ``send_request`` with the body already encoded; returns the correlation id."""
        correlation_id = next(self._correlation_ids)
        header = encode_request_header(api_key, version, correlation_id, self.client_id)
        self.send_raw(b"".join((_SIZE.pack(len(header) + len(body)), header, body)))
        if expect_response:
            self._pipelined.append((correlation_id, api_key, version))
        return correlation_id

    def receive_response(self) -> tuple[int, dict]:
        """The answer to the oldest pipelined request: (correlation id, response dict)."""
        if not self._pipelined:
            raise BrokerConnectionError(f"broker {self.host}:{self.port}: no request is waiting for an answer")
        frame = self.receive_frame()
        correlation_id, api_key, version = self._pipelined.popleft()
        received_id, body = decode_response_header(frame, 0, api_key, version)
        if received_id != correlation_id:
            raise BrokerConnectionError(f"response correlation id {received_id} does not match request {correlation_id}")
        return correlation_id, RESPONSES[api_key].decode(version, memoryview(frame)[body:])

    def close(self) -> None:
        self._sock.close()
