"""One client connection: size-prefixed frames in, responses out in request order.

Requests may complete out of order (a long-polling fetch, a produce waiting on a flush), but a
Kafka client matches responses by order as well as correlation id, so each request reserves a
slot and responses are written only from the head of the queue.

On a SASL listener nothing but ApiVersions and the login (broker/server/sasl_login.py) is answered
before the login completes; on a TLS listener a failed handshake is logged once, when the
connection ends.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from twisted.internet import defer
from twisted.internet.interfaces import IHalfCloseableProtocol, IHandshakeListener
from twisted.internet.protocol import Factory, Protocol
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer  # type: ignore[import-untyped]

from broker.protocol.errors import ProtocolDecodeError
from broker.protocol.header import RequestHeader, decode_request_header
from broker.security.listener_config import ListenerSecurity
from broker.security.principal import ANONYMOUS
from broker.server.dispatch import NO_RESPONSE, Dispatcher
from broker.server.request_context import NO_REQUEST, RequestContext
from broker.server.sasl_login import BEFORE_LOGIN, SASL_KEYS, SaslLogin
from broker.server.sendfile import CHUNK_BYTES, ChunkSender, SliceSender, supports_zero_copy
from broker.server.tls import verify_failure

if TYPE_CHECKING:
    from broker.server.broker import Broker

log = Logger()

_SIZE_BYTES = 4
_READ_BUFFER_SIZE = 256 * 1024
_LARGE_FRAME = 64 * 1024  # frames this big are received into their own buffer (see _start_large)
_PENDING = object()
_FAILED = object()
_SIZE = struct.Struct(">i")


class _Slot:
    """A response position reserved for one request."""

    __slots__ = ("header", "parts")

    def __init__(self, header: RequestHeader | None) -> None:  # None: a bare SASL token (SaslHandshake v0)
        self.header = header
        self.parts: Any = _PENDING


@implementer(IHalfCloseableProtocol, IHandshakeListener)
class KafkaConnection(Protocol):
    """Reads Kafka request frames, dispatches them, writes the responses in order.

    A client that half-closes (shuts down its sending side) after its last request still gets
    every answer; the connection closes once they are written."""

    def __init__(self, broker: Broker, dispatcher: Dispatcher, security: ListenerSecurity | None = None) -> None:
        self.broker = broker
        self.dispatcher = dispatcher
        self.security = security
        self.listener = security.name if security is not None else None
        self._login: SaslLogin | None = None  # on a SASL listener, from connectionMade
        self._tls_done = security is None or security.ssl is None
        self.max_request_bytes = broker.config.socket_request_max_bytes
        self._sasl_max_receive = broker.config.sasl_server_max_receive_size  # what a client may send before its login
        self._buffer = bytearray()
        self._large: bytearray | None = None  # a large frame being received, and how much of it has come
        self._large_filled = 0
        self._slots: deque[_Slot] = deque()
        self._outgoing: deque[Any] = deque()
        self._sending_slice = False
        self._closed = False
        self._read_closed = False
        self._zero_copy = False
        self._context = RequestContext(ANONYMOUS, self.listener)  # its peer from connectionMade, a principal from a login

    def connectionMade(self) -> None:
        transport: Any = self.transport
        tcp = getattr(transport, "transport", transport) if self.security and self.security.ssl else transport  # under TLS
        if hasattr(tcp, "bufferSize"):
            tcp.bufferSize = _READ_BUFFER_SIZE
        if hasattr(tcp, "setTcpNoDelay"):
            tcp.setTcpNoDelay(True)
        self._zero_copy = supports_zero_copy(transport)
        self._context = RequestContext(ANONYMOUS, self.listener, getattr(self._peer(), "host", None))  # read once
        if self.security is not None and self.security.uses_sasl:
            self._login = SaslLogin(self.broker, self.security, self._peer_host())

    def handshakeCompleted(self) -> None:  # noqa: N802 - Twisted's name (IHandshakeListener)
        self._tls_done = True

    def connectionLost(self, reason: Failure | None = None) -> None:
        if not self._tls_done and not self._closed:
            handle = getattr(self.transport, "getHandle", lambda: None)()
            why = verify_failure(handle) or (reason.getErrorMessage() if reason is not None else "")
            log.info("TLS handshake with {peer} on listener {listener} failed: {why}", peer=self._peer_host(),
                     listener=self.listener, why=why or "the client closed the connection")
        self._closed = True
        self._slots.clear()
        self._outgoing.clear()

    def readConnectionLost(self) -> None:
        """The client will send nothing more: answer what it asked, then close."""
        self._read_closed = True
        self._buffer = bytearray()  # not clear(): a frame being handled may still view the old one
        self._close_when_answered()

    def writeConnectionLost(self) -> None:
        self._close("the client stopped reading")

    def _close_when_answered(self) -> None:
        if self._read_closed and not self._closed and not self._slots and not self._outgoing and not self._sending_slice:
            self._closed = True
            transport: Any = self.transport
            transport.loseConnection()

    def _refuse_more(self) -> None:
        """Read nothing more; close once what was asked is answered (a refused login)."""
        self._read_closed = True
        self._buffer = bytearray()
        self._large = None

    def dataReceived(self, data: bytes) -> None:
        if self._closed or self._read_closed:
            return
        rest: bytes | memoryview = data
        if self._large is not None:
            rest = self._fill_large(data)
            if not rest or self._closed:
                return
        buffer = self._buffer
        buffer += rest
        start = 0
        while len(buffer) - start >= _SIZE_BYTES:
            size = int.from_bytes(buffer[start : start + _SIZE_BYTES], "big", signed=True)
            if size < 0 or size > self.max_request_bytes:
                self._close(f"request size {size} is outside 0..socket.request.max.bytes ({self.max_request_bytes})")
                return
            if self._login is not None and not self._login.complete and size > self._sasl_max_receive:
                self._close(f"request size {size} before a SASL login is above sasl.server.max.receive.size "
                            f"({self._sasl_max_receive})")
                return
            end = start + _SIZE_BYTES + size
            if len(buffer) < end:
                if size >= _LARGE_FRAME:
                    self._start_large(buffer, start + _SIZE_BYTES, size)
                    return
                break
            frame = memoryview(buffer)[start + _SIZE_BYTES : end]  # in place: the decoder copies what it keeps
            start = end
            self._handle_frame(frame)
            if self._closed or self._read_closed:
                return
        if start:
            # A fresh buffer for the rest: one cut at the front would make every later append copy it whole.
            self._buffer = buffer[start:]

    def _start_large(self, buffer: bytearray, begin: int, size: int) -> None:
        """Receive a large frame's bytes straight into a frame of its size: each byte copied once."""
        frame = bytearray(size)
        have = len(buffer) - begin
        frame[:have] = memoryview(buffer)[begin:]
        self._large, self._large_filled = frame, have
        self._buffer = bytearray()

    def _fill_large(self, data: bytes) -> bytes | memoryview:
        """Copy ``data`` into the large frame; handle it once whole. Returns the bytes after it."""
        frame, filled = self._large, self._large_filled
        assert frame is not None
        take = min(len(frame) - filled, len(data))
        frame[filled : filled + take] = memoryview(data)[:take]
        filled += take
        if filled < len(frame):
            self._large_filled = filled
            return b""
        self._large = None
        self._handle_frame(frame)
        return memoryview(data)[take:]

    def _handle_frame(self, frame: bytearray | memoryview) -> None:
        login = self._login
        if login is not None and login.raw_tokens:
            self._handle_raw_token(login, bytes(frame))
            return
        try:
            header = decode_request_header(frame)
        except ProtocolDecodeError as exc:
            self._close(f"malformed request header: {exc}")
            return
        body = memoryview(frame)[header.body_offset :]
        try:
            if login is not None and not login.complete:
                if header.api_key not in BEFORE_LOGIN:
                    self._close(f"API key {header.api_key} request before SASL authentication on listener {self.listener}")
                    return
                if header.api_key in SASL_KEYS:
                    self._reserve(header, login.handle(header, body))
                    return
            self.broker.request = self._context
            try:
                result = self.dispatcher.dispatch(self.broker, header, body)
            finally:
                self.broker.request = NO_REQUEST
        except ProtocolDecodeError as exc:
            self._close(f"malformed {header.api_key} v{header.api_version} request: {exc}")
            return
        self._reserve(header, result)

    def _handle_raw_token(self, login: SaslLogin, token: bytes) -> None:
        """A bare SASL token after SaslHandshake v0: answered bare; a refusal closes at once."""
        answer = login.raw_token(token)
        slot = _Slot(None)
        self._slots.append(slot)
        if isinstance(answer, defer.Deferred):
            answer.addCallbacks(self._fill, self._fail, callbackArgs=(slot,), errbackArgs=(slot,))
        else:
            self._fill(answer, slot)

    def _reserve(self, header: RequestHeader, result: Any) -> None:
        later = type(result) is not dict and isinstance(result, defer.Deferred)  # an ABC's isinstance costs more
        if not self._slots and self._login is None and not later:
            # answered at once with nothing ahead of it (the common case): no slot to queue
            parts = self._encoded(header, result)
            if parts is _FAILED:
                return
            if parts and len(parts) == 1 and type(parts[0]) is bytes and not self._outgoing and not self._sending_slice:
                transport: Any = self.transport
                transport.write(parts[0])  # one frame of bytes and nothing queued: written as it is
                if self._read_closed:
                    self._close_when_answered()
                return
            if parts:
                self._outgoing.extend(parts)
            self._pump()
            return
        slot = _Slot(header)
        self._slots.append(slot)
        if later:
            result.addCallbacks(self._fill, self._fail, callbackArgs=(slot,), errbackArgs=(slot,))
        else:
            self._fill(result, slot)

    def _fill(self, response: Any, slot: _Slot) -> None:
        if self._closed:
            return
        login = self._login
        if login is not None:
            if login.complete:
                principal = login.exchange.principal or ANONYMOUS
                if principal != self._context.principal:  # once, at the login: not per answer
                    self._context = replace(self._context, principal=principal)
            elif login.failed:
                if slot.header is None:
                    self._close("SASL login refused")
                    return
                self._refuse_more()
        if slot.header is None:
            slot.parts = [_SIZE.pack(len(response)) + response]
            self._flush_ready()
            return
        parts = self._encoded(slot.header, response)
        if parts is not _FAILED:
            slot.parts = parts
            self._flush_ready()

    def _encoded(self, header: RequestHeader, response: Any) -> Any:
        """The response's frame parts (None for no response), or _FAILED after closing."""
        if self._closed:
            return _FAILED
        try:
            return None if response is NO_RESPONSE else self.dispatcher.encode_response(header, response)
        except Exception:
            log.failure("encoding response to {header}", header=header)
            self._close("could not encode a response")
            return _FAILED

    def _fail(self, failure: Failure, slot: _Slot) -> None:
        log.failure("handling {header} from {peer}", failure, header=slot.header, peer=self._peer())
        self._close("internal error while handling a request")

    def _flush_ready(self) -> None:
        slots = self._slots
        while slots and slots[0].parts is not _PENDING:
            parts = slots.popleft().parts
            if parts is not None:
                self._outgoing.extend(parts)
        self._pump()

    def _pump(self) -> None:
        """Write queued response parts; a file slice pauses the queue until it is sent."""
        outgoing = self._outgoing
        transport: Any = self.transport
        while outgoing and not self._sending_slice and not self._closed:
            part = outgoing.popleft()
            if isinstance(part, (bytes, bytearray, memoryview)):
                transport.write(part)
            elif self._zero_copy:
                self._sending_slice = True
                SliceSender(transport, part, self._slice_sent).start()
            elif part.size <= CHUNK_BYTES:
                data = part.read_bytes()
                if len(data) < part.size:  # the frame's size promised bytes the log no longer has
                    self._close("log segment was truncated under a fetch", abort=True)
                    return
                transport.write(data)
            else:
                self._sending_slice = True
                ChunkSender(transport, part, self._slice_sent).start()
        self._close_when_answered()

    def _slice_sent(self) -> None:
        self._sending_slice = False
        self._pump()

    def _close(self, why: str, *, abort: bool = False) -> None:
        """Close after the bytes written so far; ``abort``: at once (a response was cut short)."""
        if self._closed:
            return
        log.info("closing connection from {peer}: {why}", peer=self._peer(), why=why)
        self._closed = True
        self._buffer = bytearray()
        self._large = None
        transport: Any = self.transport
        if abort:
            transport.abortConnection()
        else:
            transport.loseConnection()

    def _peer(self) -> Any:
        transport: Any = self.transport
        return transport.getPeer()

    def _peer_host(self) -> str:
        peer = self._peer()
        return f"{getattr(peer, 'host', peer)}:{getattr(peer, 'port', '')}"


class KafkaServerFactory(Factory):
    """Builds a KafkaConnection per accepted client."""

    noisy = False

    def __init__(self, broker: Broker, dispatcher: Dispatcher, security: ListenerSecurity | None = None) -> None:
        self.broker = broker
        self.dispatcher = dispatcher
        self.security = security

    def buildProtocol(self, addr: Any) -> KafkaConnection:
        return KafkaConnection(self.broker, self.dispatcher, self.security)
