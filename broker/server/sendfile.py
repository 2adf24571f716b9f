"""Zero-copy sending of log file slices over a Twisted TCP transport with ``os.sendfile``.

A slice is sent by a pull producer registered on the transport: Twisted asks it for more only
when its own write buffer is empty, so bytes written before the slice go out before it, and the
kernel copies the file straight to the socket (a fetch answers small slices as bytes instead:
``fetch_parts.COPY_BELOW_BYTES``). TLS transports cannot use it (the bytes must be
encrypted in user space): ``ChunkSender`` reads a large slice in 1 MiB chunks, each written when
the transport asks for more, so a big fetch over TLS never holds the whole slice in memory.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from typing import Any

from twisted.internet.interfaces import IPullProducer, ISSLTransport
from twisted.logger import Logger
from zope.interface import implementer  # type: ignore[import-untyped]

log = Logger()

CHUNK_BYTES = 1 << 20  # what ChunkSender reads from the segment at a time


def supports_zero_copy(transport: Any) -> bool:
    """Whether ``transport`` is plain TCP over a real socket, so ``os.sendfile`` can be used."""
    if ISSLTransport.providedBy(transport):
        return False
    return hasattr(transport, "socket") and hasattr(transport, "dataBuffer")


def _buffered_bytes(transport: Any) -> int:
    """Bytes still queued in Twisted's write buffer for ``transport``."""
    return len(transport.dataBuffer) - transport.offset + transport._tempDataLen


@implementer(IPullProducer)
class _SliceProducer:
    """What both senders share: one file slice's position and what is left of it, registration
    as the transport's pull producer, stop, and abort (log, unregister, drop the connection)."""

    def __init__(self, transport: Any, file_slice: Any, done: Callable[[], None]) -> None:
        self._transport = transport
        self._file = file_slice.file
        self._position = file_slice.position
        self._remaining = file_slice.size
        self._done = done
        self._stopped = False

    def start(self) -> None:
        self._transport.registerProducer(self, False)

    def stopProducing(self) -> None:
        self._stopped = True

    def _abort(self, why: str) -> None:
        log.warn("closing connection: {why}", why=why)
        self._stopped = True
        self._transport.unregisterProducer()
        self._transport.abortConnection()


class SliceSender(_SliceProducer):
    """Sends one file slice to the socket with ``os.sendfile``; calls ``done`` when all of it has gone."""

    def resumeProducing(self) -> None:
        transport = self._transport
        if self._stopped:
            return
        if _buffered_bytes(transport):
            # Earlier response bytes are still queued; Twisted calls again once they are out.
            return
        try:
            sent = os.sendfile(transport.socket.fileno(), self._file.fileno(), self._position, self._remaining)
        except BlockingIOError:
            sent = -1
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EINTR):
                sent = -1
            else:
                self._abort(f"sendfile failed: {exc}")
                return
        if sent == 0:
            # The file is shorter than the slice promised: the response would be cut short.
            self._abort("log segment was truncated under a fetch")
            return
        if sent > 0:
            self._position += sent
            self._remaining -= sent
        if self._remaining == 0:
            transport.unregisterProducer()
            self._done()
        else:
            transport.startWriting()


class ChunkSender(_SliceProducer):
    """Sends one file slice through a transport that needs the bytes (TLS), a chunk at a time."""

    def resumeProducing(self) -> None:
        if self._stopped:
            return
        want = min(CHUNK_BYTES, self._remaining)
        try:
            data = self._file.pread(want, self._position)
        except OSError as exc:
            self._abort(f"reading a log segment failed: {exc}")
            return
        if len(data) < want:
            self._abort("log segment was truncated under a fetch")
            return
        self._position += want
        self._remaining -= want
        self._transport.write(data)
        if self._remaining == 0:
            self._stopped = True
            self._transport.unregisterProducer()
            self._done()
