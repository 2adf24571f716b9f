"""One client connection: size-prefixed frames in, responses out in request order.

Requests may complete out of order (a long-polling fetch, a produce waiting on a flush), but a
Kafka client matches responses by order as well as correlation id, so each request reserves a
slot and responses are written only from the head of the queue.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from twisted.internet import defer
from twisted.internet.interfaces import IHalfCloseableProtocol
from twisted.internet.protocol import Factory, Protocol
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer  # type: ignore[import-untyped]

from broker.protocol.errors import ProtocolDecodeError
from broker.protocol.header import RequestHeader, decode_request_header
from broker.security.principal import ANONYMOUS
from broker.server.dispatch import NO_RESPONSE, Dispatcher
from broker.server.sendfile import SliceSender, supports_zero_copy

if TYPE_CHECKING:
    from broker.server.broker import Broker

log = Logger()

_SIZE_BYTES = 4
_READ_BUFFER_SIZE = 256 * 1024
_LARGE_FRAME = 64 * 1024  # frames this big are received into their own buffer (see _start_large)
_PENDING = object()


class _Slot:
    """A response position reserved for one request."""

    __slots__ = ("header", "parts")

    def __init__(self, header: RequestHeader) -> None:
        self.header = header
        self.parts: Any = _PENDING


@implementer(IHalfCloseableProtocol)
class KafkaConnection(Protocol):
    """Reads Kafka request frames, dispatches them, writes the responses in order.

    A client that half-closes (shuts down its sending side) after its last request still gets
    every answer; the connection closes once they are written."""

    def __init__(self, broker: Broker, dispatcher: Dispatcher) -> None:
        self.broker = broker
        self.dispatcher = dispatcher
        self.max_request_bytes = broker.config.socket_request_max_bytes
        self._buffer = bytearray()
        self._large: bytearray | None = None  # a large frame being received, and how much of it has come
        self._large_filled = 0
        self._slots: deque[_Slot] = deque()
        self._outgoing: deque[Any] = deque()
        self._sending_slice = False
        self._closed = False
        self._read_closed = False
        self._zero_copy = False
        self.principal = ANONYMOUS  # "User:<name>" once a SASL login succeeds on this connection

    def connectionMade(self) -> None:
        transport: Any = self.transport
        if hasattr(transport, "bufferSize"):
            transport.bufferSize = _READ_BUFFER_SIZE
        if hasattr(transport, "setTcpNoDelay"):
            transport.setTcpNoDelay(True)
        self._zero_copy = supports_zero_copy(transport)

    def connectionLost(self, reason: Failure | None = None) -> None:
        self._closed = True
        self._slots.clear()
        self._outgoing.clear()

    def readConnectionLost(self) -> None:
        """The client will send nothing more: answer what it asked, then close."""
        self._read_closed = True
        self._buffer.clear()
        self._close_when_answered()

    def writeConnectionLost(self) -> None:
        self._close("the client stopped reading")

    def _close_when_answered(self) -> None:
        if self._read_closed and not self._closed and not self._slots and not self._outgoing and not self._sending_slice:
            self._closed = True
            transport: Any = self.transport
            transport.loseConnection()

    def dataReceived(self, data: bytes) -> None:
        if self._closed:
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
            end = start + _SIZE_BYTES + size
            if len(buffer) < end:
                if size >= _LARGE_FRAME:
                    self._start_large(buffer, start + _SIZE_BYTES, size)
                    return
                break
            frame = buffer[start + _SIZE_BYTES : end]
            start = end
            self._handle_frame(frame)
            if self._closed:
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

    def _handle_frame(self, frame: bytearray) -> None:
        try:
            header = decode_request_header(frame)
        except ProtocolDecodeError as exc:
            self._close(f"malformed request header: {exc}")
            return
        self.broker.request_peer_host = getattr(self._peer(), "host", None)
        self.broker.request_principal = self.principal
        try:
            result = self.dispatcher.dispatch(self.broker, header, memoryview(frame)[header.body_offset :])
        except ProtocolDecodeError as exc:
            self._close(f"malformed {header.api_key} v{header.api_version} request: {exc}")
            return
        finally:
            self.broker.request_peer_host = None
            self.broker.request_principal = ANONYMOUS
        slot = _Slot(header)
        self._slots.append(slot)
        if isinstance(result, defer.Deferred):
            result.addCallbacks(self._fill, self._fail, callbackArgs=(slot,), errbackArgs=(slot,))
        else:
            self._fill(result, slot)

    def _fill(self, response: Any, slot: _Slot) -> None:
        if self._closed:
            return
        try:
            slot.parts = None if response is NO_RESPONSE else self.dispatcher.encode_response(slot.header, response)
        except Exception:
            log.failure("encoding response to {header}", header=slot.header)
            self._close("could not encode a response")
            return
        self._flush_ready()

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
            else:
                transport.write(part.read_bytes())
        self._close_when_answered()

    def _slice_sent(self) -> None:
        self._sending_slice = False
        self._pump()

    def _close(self, why: str) -> None:
        if self._closed:
            return
        log.info("closing connection from {peer}: {why}", peer=self._peer(), why=why)
        self._closed = True
        self._buffer.clear()
        self._large = None
        transport: Any = self.transport
        transport.loseConnection()

    def _peer(self) -> Any:
        transport: Any = self.transport
        return transport.getPeer()


class KafkaServerFactory(Factory):
    """Builds a KafkaConnection per accepted client."""

    noisy = False

    def __init__(self, broker: Broker, dispatcher: Dispatcher) -> None:
        self.broker = broker
        self.dispatcher = dispatcher

    def buildProtocol(self, addr: Any) -> KafkaConnection:
        return KafkaConnection(self.broker, self.dispatcher)
