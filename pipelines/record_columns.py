"""Fetched record bytes as columns: offsets, timestamps, keys, values, headers.

The loader wants columns, not one Python object per record. So only the record boundaries
are walked in Python (one length varint per record); every other field of every record is
decoded at once with numpy, and keys and values become Arrow arrays cut out of the fetched
bytes in C. The checks are the SimpleConsumer's: batch CRC, record lengths that add up to
the batch, fields that end where their record ends. Legacy v0/v1 message sets go through the
SimpleConsumer's parser.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from broker.client.record_arrays import record_begins, record_spans, zigzag_varints
from broker.client.simple_consumer import FetchedBatch, MessageAndMetadata, decode_message_set, iter_fetched_batches
from broker.protocol import batch as B
from broker.protocol.errors import CorruptRecordError, InvalidRecordError
from broker.protocol.types import decode_varint

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
    """Records to decode from one buffer: where each record begins, and its batch's fields."""

    def __init__(self, buf: bytes | bytearray) -> None:
        self.buf = buf
        self.begins: list[int] = []
        self.batch_ends: list[int] = []    # per batch: where its last record must end
        self.counts: list[int] = []
        self.base_offsets: list[int] = []
        self.stamps: list[int] = []        # per batch: FetchedBatch.timestamp
        self.log_append: list[bool] = []

    def add_batch(self, pos: int, end: int, batch: FetchedBatch) -> None:
        """Add a batch whose records are ``self.buf[pos:end]``."""
        self.begins += record_begins(self.buf, pos, end, batch.count)
        self.batch_ends.append(end)
        self.counts.append(batch.count)
        self.base_offsets.append(batch.base_offset)
        self.stamps.append(batch.timestamp)
        self.log_append.append(batch.log_append)


def _binary(buf: bytes | bytearray, u8: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """The byte strings ``buf[start:start + length]`` (null where length < 0) as a binary array.

    Built as binary views into ``buf`` (16 bytes per value, no copy of the data) and cast to
    plain binary, which copies each value once, in C."""
    n = len(starts)
    valid = lengths >= 0
    if not valid.any():
        return pa.nulls(n, pa.binary())
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
    nulls = n - int(valid.sum())
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    array = pa.Array.from_buffers(pa.binary_view(), n, [bitmap, pa.py_buffer(views), pa.py_buffer(buf)], nulls)
    return array.cast(pa.binary())


def _headers(buf: bytes | bytearray, pos: int, end: int, count: int) -> list[tuple[str, bytes | None]]:
    out = []
    for _ in range(count):
        n, pos = decode_varint(buf, pos, end)
        if n < 0:
            raise InvalidRecordError("a record header has a null key")
        key = bytes(buf[pos:pos + n]).decode("utf-8")
        pos += n
        n, pos = decode_varint(buf, pos, end)
        value = None if n < 0 else bytes(buf[pos:pos + n])
        pos += max(n, 0)
        out.append((key, value))
    if pos != end:
        raise InvalidRecordError(f"record headers end at byte {pos}, the record at {end}")
    return out


def _decode_region(topic: str, partition: int, region: _Region, min_offset: int) -> RecordChunk | None:
    """Every record of ``region`` at or above ``min_offset`` as columns."""
    if not region.begins:
        return None
    buf = region.buf
    if len(buf) > _MAX_BUFFER:
        raise InvalidRecordError(f"a fetched buffer of {len(buf)} bytes is above 2 GiB")
    u8 = np.frombuffer(buf, np.uint8)
    begins = np.array(region.begins, np.int64)
    counts = np.array(region.counts, np.int64)
    body, ends = record_spans(u8, begins, np.array(region.batch_ends, np.int64), counts)
    pos = body + 1  # attributes: unused
    ts_delta, size = zigzag_varints(u8, pos)
    pos += size
    offset_delta, size = zigzag_varints(u8, pos, 5)
    pos += size
    key_len, size = zigzag_varints(u8, pos, 5)
    key_at = pos + size
    pos = key_at + np.maximum(key_len, 0)
    value_len, size = zigzag_varints(u8, np.minimum(pos, len(u8) - 1), 5)
    value_at = pos + size
    pos = value_at + np.maximum(value_len, 0)
    header_count, size = zigzag_varints(u8, np.minimum(pos, len(u8) - 1), 5)
    pos += size
    if (key_len < -1).any() or (value_len < -1).any() or (header_count < 0).any():
        raise InvalidRecordError("a record has a negative key, value or header count")
    plain = header_count == 0
    if not np.array_equal(pos[plain], ends[plain]) or (pos > ends).any():
        bad = int(np.nonzero((plain & (pos != ends)) | (pos > ends))[0][0])
        raise InvalidRecordError(f"the fields of the record at byte {int(begins[bad])} do not match its length")
    offsets = np.repeat(np.array(region.base_offsets, np.int64), counts) + offset_delta
    stamps = np.repeat(np.array(region.stamps, np.int64), counts)
    timestamps = np.where(np.repeat(np.array(region.log_append), counts), stamps, stamps + ts_delta)
    keep = offsets >= min_offset
    if not keep.all():
        if not keep.any():
            return None
        offsets, timestamps, key_at, key_len, value_at, value_len, pos, ends, header_count = (
            a[keep] for a in (offsets, timestamps, key_at, key_len, value_at, value_len, pos, ends, header_count))
    headers = None
    with_headers = np.nonzero(header_count)[0]
    if len(with_headers):
        headers = [[] for _ in range(len(offsets))]
        for i in with_headers.tolist():
            headers[i] = _headers(buf, int(pos[i]), int(ends[i]), int(header_count[i]))
    return RecordChunk(topic, partition, offsets, timestamps, _binary(buf, u8, key_at, key_len),
                       _binary(buf, u8, value_at, value_len), headers)


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
        for batch in iter_fetched_batches(buf):
            batch_next = batch.next_offset
            if batch.magic != B.CURRENT_MAGIC:
                _, batch_next = decode_message_set(topic, partition, memoryview(buf)[batch.at:batch.end], min_offset,
                                                   legacy)
            elif batch.readable(min_offset):
                payload, start, end = batch.records()
                region = plain if payload is buf else inflated
                if region is inflated:
                    start = len(inflated.buf)
                    inflated.buf += payload
                    end = len(inflated.buf)
                region.add_batch(start, end, batch)
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
