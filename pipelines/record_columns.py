"""Fetched record bytes as columns: offsets, timestamps, keys, values, headers.

The loader wants columns, not one Python object per record. So only the record boundaries
are walked in Python (one length varint per record); every other field of every record is
decoded at once with numpy (broker.protocol.records.arrays), and keys and values become Arrow
arrays cut out of the fetched bytes in C. The checks are the SimpleConsumer's: batch CRC, record lengths that add up to
the batch, fields that end where their record ends. Legacy v0/v1 message sets go through the
SimpleConsumer's parser.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from broker.client.simple_consumer import MessageAndMetadata, decode_message_set
from broker.protocol.errors import CorruptRecordError, InvalidRecordError
from broker.protocol.records import Tail, iter_batches, records_of
from broker.protocol.records.arrays import Span, fields_c, read_columns
from broker.protocol.records.layout import CURRENT_MAGIC

__all__ = ["RecordChunk", "decode_chunk"]

_INLINE = 12  # a binary view holds values of up to 12 bytes inline
_INLINE_RANGE = np.arange(_INLINE)
_MAX_BUFFER = (1 << 31) - 1  # binary views address their buffer with int32 offsets


@dataclass
class RecordChunk:
    """Consecutive records of one partition as columns; ``next_offset`` is where reading goes on."""

    topic: str
    partition: int
    offsets: np.ndarray      # int64
    timestamps: np.ndarray   # int64, -1 when the record has none
    keys: pa.Array           # binary, null for a null key
    values: pa.Array         # binary, null for a null value
    headers: list | None     # per record a list of (key, value), or None when no record has any
    next_offset: int = -1

    def __len__(self) -> int:
        return len(self.offsets)

    @property
    def last_offset(self) -> int:
        return int(self.offsets[-1])

    def head(self, n: int) -> RecordChunk:
        """The first ``n`` records."""
        last = int(self.offsets[n - 1]) + 1 if n else self.next_offset
        return RecordChunk(self.topic, self.partition, self.offsets[:n], self.timestamps[:n], self.keys.slice(0, n),
                           self.values.slice(0, n), None if self.headers is None else self.headers[:n], last)

    def up_to(self, end: int) -> RecordChunk:
        """The records with offsets below ``end``."""
        return self.head(int(np.searchsorted(self.offsets, end)))

    def keep(self, mask: np.ndarray) -> RecordChunk:
        """The records where ``mask`` is true (``next_offset`` kept: reading goes on after all of them)."""
        rows = pa.array(mask)
        headers = None if self.headers is None else [h for h, k in zip(self.headers, mask.tolist()) if k]
        return RecordChunk(self.topic, self.partition, self.offsets[mask], self.timestamps[mask], self.keys.filter(rows),
                           self.values.filter(rows), headers if headers and any(headers) else None, self.next_offset)

    def header_lists(self) -> list:
        return self.headers if self.headers is not None else [[] for _ in range(len(self))]

    def messages(self) -> list[MessageAndMetadata]:
        """The records as the SimpleConsumer returns them (for per-record decoding)."""
        n = len(self)
        return [MessageAndMetadata(self.topic, self.partition, o, k, v, h, t) for o, k, v, h, t in zip(
            self.offsets.tolist(), self.keys.to_pylist(), self.values.to_pylist(), self.header_lists(),
            self.timestamps.tolist())] if n else []

    @classmethod
    def from_messages(cls, topic: str, partition: int, messages: Sequence) -> RecordChunk:
        """A chunk holding ``messages`` (MessageAndMetadata or anything with the same fields)."""
        headers = [list(m.headers) for m in messages]
        return cls(topic, partition, np.array([m.offset for m in messages], np.int64),
                   np.array([m.timestamp for m in messages], np.int64),
                   pa.array([m.key for m in messages], pa.binary()), pa.array([m.value for m in messages], pa.binary()),
                   headers if any(headers) else None,
                   messages[-1].offset + 1 if len(messages) else -1)


class _Region:
    """Batches whose records are decoded together: one buffer and each batch's (start, end, header)."""

    def __init__(self, buf: bytes | bytearray) -> None:
        self.buf = buf
        self.spans: list[Span] = []


def _binary(buf: bytes | bytearray, u8: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
            compiled: bool = True) -> pa.Array:
    """The byte strings ``buf[start:start + length]`` (null where length < 0) as a binary array.

    With the compiled module: each value copied once into Arrow's binary layout in one C loop.
    The reference builds binary views into ``buf`` (16 bytes per value, no copy of the data) and
    casts them to plain binary, which copies each value once, in C."""
    n = len(starts)
    valid = lengths >= 0
    if not valid.any():
        return pa.nulls(n, pa.binary())
    nulls = n - int(valid.sum())
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    if compiled and fields_c is not None:
        offsets = np.empty(n + 1, np.int32)
        data = np.empty(int(lengths[valid].sum()), np.uint8)
        if fields_c.gather(buf, np.ascontiguousarray(starts, np.int64), np.ascontiguousarray(lengths, np.int64),
                           offsets, data):
            return pa.Array.from_buffers(pa.binary(), n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)], nulls)
    sizes = np.where(valid, lengths, 0).astype(np.int32)
    views = np.zeros((n, 16), np.uint8)
    views[:, :4] = sizes.view(np.uint8).reshape(n, 4)
    first = u8[np.minimum(starts[:, None] + _INLINE_RANGE, len(u8) - 1)]
    views[:, 4:] = np.where(_INLINE_RANGE[None, :] < sizes[:, None], first, 0)
    long_ = np.nonzero(sizes > _INLINE)[0]
    if len(long_):
        where = np.zeros((len(long_), 2), np.int32)  # (buffer index 0, offset)
        where[:, 1] = starts[long_]
        views[long_, 8:] = where.view(np.uint8).reshape(len(long_), 8)
    array = pa.Array.from_buffers(pa.binary_view(), n, [bitmap, pa.py_buffer(views), pa.py_buffer(buf)], nulls)
    return array.cast(pa.binary())


def _decode_region(topic: str, partition: int, region: _Region, min_offset: int) -> RecordChunk | None:
    """Every record of ``region`` at or above ``min_offset`` as columns."""
    buf = region.buf
    if len(buf) > _MAX_BUFFER:
        raise InvalidRecordError(f"a fetched buffer of {len(buf)} bytes is above 2 GiB")
    columns = read_columns(buf, region.spans, min_offset)
    if columns is None:
        return None
    u8 = np.frombuffer(buf, np.uint8)
    return RecordChunk(topic, partition, columns.offsets, columns.timestamps,
                       _binary(buf, u8, columns.key_at, columns.key_len),
                       _binary(buf, u8, columns.value_at, columns.value_len), columns.headers(buf))


def _concat(chunks: list[RecordChunk]) -> RecordChunk:
    """One chunk from parts, in offset order (uncompressed and compressed batches decode apart)."""
    if len(chunks) == 1:
        return chunks[0]
    offsets = np.concatenate([c.offsets for c in chunks])
    order = np.argsort(offsets, kind="stable")
    headers = None
    if any(c.headers is not None for c in chunks):
        merged = [h for c in chunks for h in c.header_lists()]
        headers = [merged[i] for i in order.tolist()]
    take = pa.array(order)
    return RecordChunk(chunks[0].topic, chunks[0].partition, offsets[order],
                       np.concatenate([c.timestamps for c in chunks])[order],
                       pa.concat_arrays([c.keys for c in chunks]).take(take),
                       pa.concat_arrays([c.values for c in chunks]).take(take), headers)


def decode_chunk(topic: str, partition: int, data: bytes | bytearray | memoryview | None,
                 min_offset: int = 0) -> RecordChunk:
    """Decode fetched record bytes into a RecordChunk, skipping offsets below ``min_offset``.

    ``next_offset`` is -1 when no whole batch was present. A trailing partial batch (a fetch cut
    at max_bytes) is ignored; control batches are skipped. Raises CorruptRecordError or
    InvalidRecordError on bad data, like the SimpleConsumer.
    """
    buf = b"" if data is None else data if isinstance(data, (bytes, bytearray)) else bytes(data)
    plain = _Region(buf)
    inflated = _Region(bytearray())
    legacy: list[MessageAndMetadata] = []
    next_offset = -1
    try:
        for pos, header in iter_batches(buf, Tail.STOP):
            batch_next = header.next_offset
            if header.magic != CURRENT_MAGIC:
                _, batch_next = decode_message_set(topic, partition, memoryview(buf)[pos:pos + header.size], min_offset,
                                                   legacy)
            elif header.readable(min_offset):
                payload, start, end = records_of(buf, pos, header)
                region = plain if payload is buf else inflated
                if region is inflated:
                    start = len(inflated.buf)
                    inflated.buf += payload
                    end = len(inflated.buf)
                region.spans.append((start, end, header))
            next_offset = max(next_offset, batch_next)
        parts = [c for c in (_decode_region(topic, partition, plain, min_offset),
                             _decode_region(topic, partition, inflated, min_offset)) if c is not None]
    except (IndexError, UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, (CorruptRecordError, InvalidRecordError)):
            raise
        raise InvalidRecordError(f"records of {topic}-{partition} do not parse: {exc}") from None
    if legacy:
        parts.append(RecordChunk.from_messages(topic, partition, legacy))
    if not parts:
        return RecordChunk(topic, partition, np.zeros(0, np.int64), np.zeros(0, np.int64), pa.nulls(0, pa.binary()),
                           pa.nulls(0, pa.binary()), None, next_offset)
    chunk = _concat(parts)
    chunk.next_offset = next_offset
    return chunk
