"""The mirror's raw path: fetched v2 record batches rewritten into target batches, byte for byte.

A copy differs from its source record only in its framing: a new offset delta (0..n-1 in the
target batch), a timestamp delta against the target batch's base timestamp, one more header
(``logbus.origin``, see mirror.origin) and so a new header count and record length. Keys,
values and the record's own headers are copied as bytes, never decoded into objects. Records
with headers of their own are checked for the loop (an origin naming the target cluster: not
copied). The producer adds the batch header, producer id/epoch/sequence and CRC
(``Producer.send_raw_batch``). Control batches (transaction markers) are skipped; compressed
batches are decompressed here and compressed again by the producer with its compression.type.
Legacy v0/v1 message sets are not handled: callers decode those (``RawChunk.legacy``).
"""

from __future__ import annotations

from typing import NamedTuple

from broker.client.accumulator import VARINT_TABLE
from broker.client.simple_consumer import iter_fetched_batches
from broker.protocol import batch as B
from broker.protocol.errors import InvalidRecordError
from broker.protocol.types import decode_varint, decode_varlong, encode_varint
from mirror.origin import HEADER, parse_origin

_TABLE = VARINT_TABLE  # zigzag varints of 0 .. 16383
_ORIGIN_KEY = HEADER.encode()
_ORIGIN_HEAD = _TABLE[len(_ORIGIN_KEY)] + _ORIGIN_KEY  # the origin header's key, sized


class TargetBatch(NamedTuple):
    """The framed records of one target batch (uncompressed) and what its header needs."""

    records: bytes
    count: int
    base_ts: int
    max_ts: int


def _varint(n: int) -> bytes:
    return _TABLE[n] if 0 <= n < 16384 else encode_varint(n)


class _Out:
    """The target batch being filled, and the finished ones."""

    __slots__ = ("batches", "parts", "size", "count", "base_ts", "max_ts")

    def __init__(self) -> None:
        self.batches: list[TargetBatch] = []
        self.parts: list[bytes] = []
        self.size = 0
        self.count = 0
        self.base_ts = 0
        self.max_ts = -1

    def finish(self) -> None:
        if self.count:
            self.batches.append(TargetBatch(b"".join(self.parts), self.count, self.base_ts, self.max_ts))
        self.parts = []
        self.size = self.count = 0
        self.max_ts = -1


def rewrite_chunk(data: bytes, min_offset: int, origin_prefix: bytes, target_cluster: str, max_bytes: int,
                  max_count: int = 1 << 31, now_ms: int = 0) -> tuple[list[TargetBatch], int]:
    """Rewrite the whole v2 batches in ``data`` (records from ``min_offset`` on) into target batches.

    ``origin_prefix``: ``b"<cluster>:<topic>:<partition>:"`` (the origin value is it plus the
    source offset). A target batch holds at most ``max_bytes`` of records (at least one record)
    and ``max_count`` records; consecutive source batches share one when they fit. A record
    without a timestamp (base timestamp -1) gets ``now_ms``; a LogAppendTime batch's records
    get its max timestamp (what a consumer saw), as the decoding path does.
    Returns (target batches, records dropped by the loop check). Raises InvalidRecordError on
    bytes that do not parse; the CRCs are the fetcher's job (``RawChunk``)."""
    out = _Out()
    dropped = 0
    for batch in iter_fetched_batches(data, verify=False):
        if batch.magic != B.CURRENT_MAGIC:
            raise InvalidRecordError(f"record magic {batch.magic} at offset {batch.base_offset}: "
                                     f"only v2 batches are rewritten")
        if not batch.readable(min_offset):
            continue
        if batch.log_append:
            fixed = batch.max_ts
        elif batch.base_ts < 0:
            fixed = now_ms
        else:
            fixed = None
        try:
            buf, start, end = batch.records()
            dropped += _records(out, buf, start, end, batch.count, batch.base_offset, batch.base_ts, fixed,
                                min_offset, origin_prefix, target_cluster, max_bytes, max_count)
        except (IndexError, ValueError) as exc:  # ValueError: ProtocolDecodeError too
            if isinstance(exc, InvalidRecordError):
                raise
            raise InvalidRecordError(f"record batch at offset {batch.base_offset} does not parse: {exc}") from None
    out.finish()
    return out.batches, dropped


def _records(out: _Out, buf: bytes, pos: int, end: int, count: int, base_offset: int, base_ts: int,
             fixed: int | None, min_offset: int, origin_prefix: bytes, target_cluster: str, max_bytes: int,
             max_count: int) -> int:
    """Append the copies of one source batch's records to ``out``; returns how many were dropped.

    Each copy is appended to ``out.parts`` as pieces (length, record up to its header count,
    header count, own headers, origin header) joined once per target batch."""
    table = _TABLE
    # a copy without headers of its own ends with: count 1, origin key, value length, prefix,
    # the offset's digits; all but the digits is one constant per digit count
    tails = [b"\x02" + _ORIGIN_HEAD + _varint(len(origin_prefix) + k) + origin_prefix for k in range(21)]
    growth = len(tails[20]) + 20 + 8  # at most what a copy adds to its source record
    parts = out.parts
    extend = parts.extend
    dropped = 0
    src_base = fixed if fixed is not None else base_ts
    if not out.count:
        out.base_ts = src_base
    # the target batch's state, kept in locals and written back to ``out``
    i, size, max_ts, tbase = out.count, out.size, out.max_ts, out.base_ts
    for _ in range(count):
        b = buf[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            b2 = buf[pos + 1]
            if b2 < 0x80:
                raw = (b & 0x7F) | (b2 << 7)
                length = (raw >> 1) ^ -(raw & 1)
                pos += 2
            else:
                length, pos = decode_varint(buf, pos, end)
        rec_start = pos
        rec_end = pos + length
        if length < 1 or rec_end > end:
            raise InvalidRecordError(f"record length {length} overruns the batch at offset {base_offset}")
        p = pos + 1  # after the attributes
        b = buf[p]
        if b < 0x80:
            tsd = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            b2 = buf[p + 1]
            if b2 < 0x80:
                raw = (b & 0x7F) | (b2 << 7)
                tsd = (raw >> 1) ^ -(raw & 1)
                p += 2
            else:
                tsd, p = decode_varlong(buf, p, rec_end)
        od_pos = p
        b = buf[p]
        if b < 0x80:
            od = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            b2 = buf[p + 1]
            if b2 < 0x80:
                raw = (b & 0x7F) | (b2 << 7)
                od = (raw >> 1) ^ -(raw & 1)
                p += 2
            else:
                od, p = decode_varint(buf, p, rec_end)
        pos = rec_end
        offset = base_offset + od
        if offset < min_offset:
            continue
        od_end = p
        b = buf[p]  # key length
        if b < 0x80:
            p += 1 + ((b >> 1) if not b & 1 else 0)
        else:
            n, p = decode_varint(buf, p, rec_end)
            if n > 0:
                p += n
        b = buf[p]  # value length
        if b < 0x80:
            p += 1 + ((b >> 1) if not b & 1 else 0)
        else:
            b2 = buf[p + 1]
            if b2 < 0x80:
                raw = (b & 0x7F) | (b2 << 7)
                p += 2 + ((raw >> 1) if not raw & 1 else 0)
            else:
                n, p = decode_varint(buf, p, rec_end)
                if n > 0:
                    p += n
        hc_pos = p
        if buf[p] == 0:
            hc = 0
            if p + 1 != rec_end:
                raise InvalidRecordError(f"record at offset {offset} does not match its length")
        else:
            hc, hdr_start = decode_varint(buf, p, rec_end)
            if _looped(buf, hdr_start, rec_end, hc, target_cluster, offset):
                dropped += 1
                continue
        if i and (i >= max_count or size + (rec_end - rec_start) + growth > max_bytes):
            # full (the estimate may end a batch a few bytes early): a new one, based on this batch
            out.count, out.size, out.max_ts = i, size, max_ts
            out.finish()
            parts = out.parts
            extend = parts.extend
            i, size, max_ts, tbase = 0, 0, -1, src_base
            out.base_ts = src_base
        ts = fixed if fixed is not None else base_ts + tsd
        if ts > max_ts:
            max_ts = ts
        if tbase == src_base and fixed is None:
            if od == i:
                body = buf[rec_start:hc_pos]
            else:
                body = b"".join((buf[rec_start:od_pos], table[i] if i < 16384 else encode_varint(i),
                                 buf[od_end:hc_pos]))
        else:
            body = b"".join((buf[rec_start:rec_start + 1], _varint(ts - tbase),
                             table[i] if i < 16384 else encode_varint(i), buf[od_end:hc_pos]))
        digits = b"%d" % offset
        tail = tails[len(digits)]
        if hc == 0:
            n = len(body) + len(tail) + len(digits)
            nb = table[n] if n < 16384 else encode_varint(n)
            extend((nb, body, tail, digits))
        else:
            hcb, own = _varint(hc + 1), buf[hdr_start:rec_end]
            n = len(body) + len(hcb) + len(own) + len(tail) - 1 + len(digits)
            nb = _varint(n)
            extend((nb, body, hcb, own, tail[1:], digits))
        size += n + len(nb)
        i += 1
    if pos != end:
        raise InvalidRecordError(f"{end - pos} bytes after the last record of the batch at offset {base_offset}")
    out.count, out.size, out.max_ts = i, size, max_ts
    return dropped


def _looped(buf: bytes, pos: int, end: int, count: int, target_cluster: str, offset: int) -> bool:
    """True when one of the record's headers is an origin naming ``target_cluster``; checks framing."""
    looped = False
    for _ in range(count):
        n, pos = decode_varint(buf, pos, end)
        if n < 0:
            raise InvalidRecordError(f"null header key in the record at offset {offset}")
        key = buf[pos:pos + n]
        pos += n
        n, pos = decode_varint(buf, pos, end)
        if n > 0:
            if key == _ORIGIN_KEY and not looped:
                origin = parse_origin(buf[pos:pos + n])
                looped = origin is not None and origin.cluster_id == target_cluster
            pos += n
    if pos != end:
        raise InvalidRecordError(f"record at offset {offset} does not match its length")
    return looped
