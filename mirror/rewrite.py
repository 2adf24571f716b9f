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

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from broker.protocol.errors import InvalidRecordError
from broker.protocol.origin import HEADER, parse_origin
from broker.protocol.records import Tail, iter_batches, records_of
from broker.protocol.records.arrays import record_begins, record_spans, zigzag_size, zigzag_varints
from broker.protocol.records.codec import SMALL_VARINTS
from broker.protocol.records.codec import varint as _varint
from broker.protocol.records.layout import CURRENT_MAGIC
from broker.protocol.records.unrolled import read_record_head
from broker.protocol.types import decode_varint, encode_varint

_TABLE = SMALL_VARINTS  # zigzag varints of 0 .. 16383
_ORIGIN_KEY = HEADER.encode()
_ORIGIN_HEAD = _TABLE[len(_ORIGIN_KEY)] + _ORIGIN_KEY  # the origin header's key, sized
_POW10 = 10 ** np.arange(1, 19, dtype=np.int64)  # digits of n: how many of these are <= n, plus 1
_TABLE_OBJECTS = np.array(_TABLE, object)
#: Source batches of at least this many records take the array path when they are plain.
PLAIN_MIN_RECORDS = 64


class TargetBatch(NamedTuple):
    """The framed records of one target batch (uncompressed) and what its header needs."""

    records: bytes
    records_count: int
    base_ts: int
    max_ts: int


class _Out:
    """The target batch being filled, and the finished ones."""

    __slots__ = ("batches", "parts", "size", "count", "base_ts", "max_ts")

    def __init__(self) -> None:
        self.batches: list[TargetBatch] = []
        self.parts: list[bytes | bytearray] = []
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
    for pos, batch in iter_batches(data, Tail.STOP, verify=False):
        if batch.magic != CURRENT_MAGIC:
            raise InvalidRecordError(f"record magic {batch.magic} at offset {batch.base_offset}: "
                                     f"only v2 batches are rewritten")
        if not batch.readable(min_offset):
            continue
        if batch.log_append:
            fixed = batch.max_timestamp
        elif batch.base_timestamp < 0:
            fixed = now_ms
        else:
            fixed = None
        try:
            buf, start, end = records_of(data, pos, batch)
            if fixed is None and batch.records_count >= PLAIN_MIN_RECORDS and batch.base_offset >= min_offset:
                plain = _plain(buf, start, end, batch.records_count)
                if plain is not None:
                    out.finish()
                    _copy_plain(out, buf, plain, batch.base_offset, batch.base_timestamp, origin_prefix, max_bytes,
                                max_count)
                    continue
            dropped += _records(out, buf, start, end, batch.records_count, batch.base_offset, batch.base_timestamp,
                                fixed, min_offset, origin_prefix, target_cluster, max_bytes, max_count)
        except (IndexError, ValueError) as exc:  # ValueError: ProtocolDecodeError too
            if isinstance(exc, InvalidRecordError):
                raise
            raise InvalidRecordError(f"record batch at offset {batch.base_offset} does not parse: {exc}") from None
    out.finish()
    return out.batches, dropped


class _Plain(NamedTuple):
    """A plain source batch's records (no headers of their own, offset deltas 0..n-1), by position."""

    body: np.ndarray         # where each record's attributes start
    offset_at: np.ndarray    # its offset delta
    key_at: np.ndarray       # its key length (the offset delta ends here)
    header_at: np.ndarray    # its header count (0; the record ends right after it)
    ts_delta: np.ndarray


def _plain(buf: bytes | bytearray, start: int, end: int, count: int) -> _Plain | None:
    """The batch's record positions, decoded for all records at once (broker.protocol.records.arrays),
    or None when it is not plain or does not parse (the per-record path then copies it, or says
    what is wrong)."""
    u8 = np.frombuffer(buf, np.uint8)
    try:
        body, ends = record_spans(u8, np.array(record_begins(buf, start, end, count), np.int64),
                                  np.array([end], np.int64), np.array([count], np.int64))
        ts_delta, size = zigzag_varints(u8, body + 1)
        offset_at = body + 1 + size
        offset_delta, size = zigzag_varints(u8, offset_at, 5)
        key_at = offset_at + size
        key_len, size = zigzag_varints(u8, key_at, 5)
        value_at = key_at + size + np.maximum(key_len, 0)
        value_len, size = zigzag_varints(u8, np.minimum(value_at, len(u8) - 1), 5)
        header_at = value_at + size + np.maximum(value_len, 0)
    except (IndexError, ValueError):
        return None
    if (not np.array_equal(header_at + 1, ends) or u8[np.minimum(header_at, len(u8) - 1)].any()
            or not np.array_equal(offset_delta, np.arange(count))):
        return None
    return _Plain(body, offset_at, key_at, header_at, ts_delta)


def _copy_plain(out: _Out, buf: bytes | bytearray, plain: _Plain, base_offset: int, base_ts: int,
                origin_prefix: bytes, max_bytes: int, max_count: int) -> None:
    """The copies of a plain batch's records, in target batches of their own (the last one left
    open in ``out``, so smaller batches after it can join it). Each copy is: its new length,
    the record's bytes up to its header count (the offset delta rewritten in a later run of a
    split batch), the origin header's fixed part, the offset's digits. The pieces are made per
    batch and interleaved by slice assignment, so the only per-record Python is a byte slice."""
    count = len(plain.body)
    digits = ("%d," * count % tuple(range(base_offset, base_offset + count))).encode().split(b",")[:count]
    ndigits = np.searchsorted(_POW10, np.arange(base_offset, base_offset + count), side="right") + 1
    tails = np.array([b"\x02" + _ORIGIN_HEAD + _varint(len(origin_prefix) + k) + origin_prefix
                      for k in range(21)], object)
    tail_len = np.array([len(t) for t in tails])[ndigits] + ndigits
    length = plain.header_at - plain.body + tail_len  # with the offset delta it has now
    position = np.arange(count)
    runs = _runs(zigzag_size(length) + length, max_bytes, max_count)
    starts = np.array([a for a, _ in runs])
    in_run = position - np.repeat(starts, [b - a for a, b in runs])  # the new offset deltas
    length += zigzag_size(in_run) - zigzag_size(position)
    sizes = zigzag_size(length) + length
    run_sizes = np.add.reduceat(sizes, starts).tolist()
    run_max_ts = np.maximum.reduceat(base_ts + plain.ts_delta, starts).tolist()
    heads, tail_pieces = _varints_of(length), tails[ndigits].tolist()
    body, offset_at, key_at, header_at = (x.tolist() for x in plain[:4])
    cut: Callable[[slice], bytes | bytearray] = buf.__getitem__
    for (a, b), size, max_ts in zip(runs, run_sizes, run_max_ts):
        out.finish()
        pieces: list[Any]
        if a == 0:  # offset deltas 0..n-1 already: the record's bytes up to its header count
            pieces = [None] * (4 * (b - a))
            pieces[1::4] = map(cut, map(slice, body[a:b], header_at[a:b]))
        else:  # a later run of a split batch: its offset deltas start again at 0
            pieces = [None] * (6 * (b - a))
            pieces[1::6] = map(cut, map(slice, body[a:b], offset_at[a:b]))
            pieces[2::6] = _varints_of(in_run[a:b])
            pieces[3::6] = map(cut, map(slice, key_at[a:b], header_at[a:b]))
        step = len(pieces) // (b - a)
        pieces[0::step] = heads[a:b]
        pieces[step - 2::step] = tail_pieces[a:b]
        pieces[step - 1::step] = digits[a:b]
        out.parts = pieces
        out.count, out.size, out.base_ts, out.max_ts = b - a, size, base_ts, max_ts


def _varints_of(values: np.ndarray) -> list[bytes]:
    """The zigzag varints of ``values`` as bytes objects."""
    if len(values) and 0 <= values.min() and values.max() < len(_TABLE):
        return _TABLE_OBJECTS[values].tolist()
    return [_varint(v) for v in values.tolist()]


def _runs(sizes: np.ndarray, max_bytes: int, max_count: int) -> list[tuple[int, int]]:
    """Consecutive [a, b) runs of records of at most ``max_bytes`` (at least one record) and
    ``max_count`` records."""
    total = np.cumsum(sizes)
    runs, a, n = [], 0, len(sizes)
    while a < n:
        before = int(total[a - 1]) if a else 0
        b = min(max(int(np.searchsorted(total, before + max_bytes, side="right")), a + 1), a + max_count, n)
        runs.append((a, b))
        a = b
    return runs


def _records(out: _Out, buf: bytes | bytearray, pos: int, end: int, count: int, base_offset: int, base_ts: int,
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
    # the value length's varint is inlined as in read_record_head (a call each costs more)
    for _ in range(count):
        rec_start, rec_end, tsd, od_pos, od, p = read_record_head(buf, pos, end, base_offset)
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


def _looped(buf: bytes | bytearray, pos: int, end: int, count: int, target_cluster: str, offset: int) -> bool:
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
