"""The one batch walker: every whole batch in a run of record batches, with explicit rules for
a partial or damaged tail, and the record bytes of a batch (decompressed when it is compressed).

Three callers want three rules (``Tail``):

- ``Tail.RAISE`` (produce requests, follower appends): v2 batches only, each fully checked
  (``layout.check_batch``: length, magic, CRC, record count); a partial or damaged batch raises.
- ``Tail.TRUNCATE`` (log recovery): the same checks, but the walk ends quietly at the first
  partial or damaged batch, which is where the log gets cut.
- ``Tail.STOP`` (fetch responses, which the broker cuts at max_bytes): v2 and legacy v0/v1
  batches; a partial last batch ends the walk quietly, damage raises (the CRC is checked when
  ``verify``). Records are left to the reader, so the record count is not checked here.
"""

from __future__ import annotations

import enum
import zlib
from collections.abc import Iterator

import crc32c

from broker.protocol.compression import decompress
from broker.protocol.errors import CorruptRecordError, InvalidRecordError
from broker.protocol.records.layout import (
    ATTRIBUTES_POS,
    CURRENT_MAGIC,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_POS,
    PREFIX,
    BatchHeader,
    check_batch,
    legacy_header,
)

Buffer = bytes | bytearray | memoryview


class Tail(enum.Enum):
    """What the walker does at a partial or damaged batch (see the module docstring)."""

    RAISE = "raise"
    TRUNCATE = "truncate"
    STOP = "stop"


def iter_batches(buf: Buffer, tail: Tail = Tail.RAISE, pos: int = 0, end: int | None = None, *,
                 verify: bool = True) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each whole batch of ``buf[pos:end]``, by the rules of ``tail``.

    ``verify=False`` skips the CRC check of ``Tail.STOP`` (for bytes whose CRCs were checked)."""
    end = len(buf) if end is None else end
    if tail is Tail.STOP:
        yield from _fetched(buf, pos, end, verify)
        return
    if tail is Tail.RAISE:
        yield from checked_batches(buf, pos, end)
        return
    while pos < end:
        try:
            header = check_batch(buf, pos, end)
        except (InvalidRecordError, CorruptRecordError):
            if tail is Tail.TRUNCATE:
                return
            raise
        yield pos, header
        pos += header.size


def checked_batches(buf: Buffer, pos: int = 0, end: int | None = None) -> list[tuple[int, BatchHeader]]:
    """``iter_batches(buf, Tail.RAISE, pos, end)`` as a list: what an append walks (no generator
    to resume per batch on the produce path)."""
    end = len(buf) if end is None else end
    found = []
    while pos < end:
        header = check_batch(buf, pos, end)
        found.append((pos, header))
        pos += header.size
    return found


def _fetched(buf: Buffer, pos: int, end: int, verify: bool) -> Iterator[tuple[int, BatchHeader]]:
    while end - pos > MAGIC_POS:  # shorter than a prefix and magic: a partial batch
        base_offset, length = PREFIX.unpack_from(buf, pos)
        size = length + LOG_OVERHEAD
        if length < 0:
            raise InvalidRecordError(f"negative batch length {length} at position {pos}")
        if pos + size > end:
            return
        magic = buf[pos + MAGIC_POS]
        if magic == CURRENT_MAGIC:
            if size < HEADER_SIZE:
                raise InvalidRecordError(f"record batch length {length} is below the minimum at position {pos}")
            header = BatchHeader._make(HEADER.unpack_from(buf, pos))
            if verify:
                actual = crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_POS : pos + size])
                if actual != header.crc:
                    raise CorruptRecordError(f"record batch CRC mismatch at offset {base_offset}: "
                                             f"stored {header.crc:#010x}, computed {actual:#010x}")
        elif magic in (0, 1):
            header = legacy_header(base_offset, length, magic)
        else:
            raise InvalidRecordError(f"unknown record magic {magic} at position {pos}")
        yield pos, header
        pos += size


def records_of(buf: bytes | bytearray, pos: int, header: BatchHeader) -> tuple[bytes | bytearray, int, int]:
    """(buffer, start, end) of the records of the v2 batch at ``pos``, decompressed when the
    batch is compressed (InvalidRecordError when they do not decompress)."""
    start, end = pos + HEADER_SIZE, pos + header.size
    if not header.compression:
        return buf, start, end
    try:
        payload = bytes(decompress(header.compression, memoryview(buf)[start:end]))
    except (ValueError, zlib.error) as exc:
        raise InvalidRecordError(f"record batch at offset {header.base_offset} does not decompress: {exc}") from None
    return payload, 0, len(payload)
