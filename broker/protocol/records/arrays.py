"""``read_record_columns``: the reference ``codec.read_records`` for many records at once, with numpy.

Reading one record at a time in Python costs about a microsecond per record. Here only the
record boundaries are walked in Python (one length varint per record); every other varint of
every record is decoded as a whole array, and the records come out as columns of positions
and values. Used by the loader's columnar reader (pipelines.record_columns) and the mirror's
batch rewrite (mirror.rewrite). Needs numpy (the ``pipelines`` and ``mirror`` extras), unlike
the rest of broker.protocol; pinned to the reference by tests/protocol/test_record_codecs.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from broker.protocol.errors import InvalidRecordError, ProtocolDecodeError
from broker.protocol.records.codec import Record, read_headers
from broker.protocol.records.layout import BatchHeader
from broker.protocol.types import decode_varint

try:  # built by setup.py where a C compiler exists; the numpy walk below is the reference
    from broker.protocol.records import fields_c
except ImportError:  # pragma: no cover - an install without a compiler
    fields_c = None  # type: ignore[assignment]

__all__ = ["RecordColumns", "read_columns", "read_record_columns", "record_begins", "record_spans", "zigzag_size",
           "zigzag_varints"]

#: (start, end, header) of one batch's uncompressed records in a buffer
Span = tuple[int, int, BatchHeader]


class RecordColumns(NamedTuple):
    """Records as columns (int64 arrays): keys and values by position and length (-1: null)."""

    offsets: np.ndarray
    timestamps: np.ndarray
    key_at: np.ndarray
    key_len: np.ndarray
    value_at: np.ndarray
    value_len: np.ndarray
    header_at: np.ndarray    # where the record's header count is
    ends: np.ndarray         # where the record ends
    header_count: np.ndarray

    def headers(self, buf: bytes | bytearray) -> list[list[tuple[str, bytes | None]]] | None:
        """Per record its headers, or None when no record has any."""
        with_headers = np.nonzero(self.header_count)[0]
        if not len(with_headers):
            return None
        headers: list[list[tuple[str, bytes | None]]] = [[] for _ in range(len(self.offsets))]
        try:
            for i in with_headers.tolist():
                headers[i] = read_headers(buf, int(self.header_at[i]), int(self.ends[i]))
        except ProtocolDecodeError as exc:
            raise InvalidRecordError(f"a record's headers do not parse: {exc}") from None
        return headers

    def records(self, buf: bytes | bytearray) -> list[Record]:
        """The records as the reference reader gives them (for tests and small callers)."""
        headers = self.headers(buf) or [[] for _ in range(len(self.offsets))]
        return [Record(o, t, None if kn < 0 else bytes(buf[ka:ka + kn]), None if vn < 0 else bytes(buf[va:va + vn]), h)
                for o, t, ka, kn, va, vn, h in zip(self.offsets.tolist(), self.timestamps.tolist(), self.key_at.tolist(),
                                                   self.key_len.tolist(), self.value_at.tolist(),
                                                   self.value_len.tolist(), headers)]


def read_record_columns(buf: bytes | bytearray, start: int, end: int, header: BatchHeader,
                        min_offset: int = 0) -> RecordColumns | None:
    """The records of one v2 batch in ``buf[start:end]`` from ``min_offset`` on, as columns
    (None when there are none); InvalidRecordError on bytes that do not parse."""
    return read_columns(buf, [(start, end, header)], min_offset)


def read_columns(buf: bytes | bytearray, spans: Sequence[Span], min_offset: int = 0,
                 compiled: bool = True) -> RecordColumns | None:
    """The records of several v2 batches of one buffer, in one pass of array operations.

    With ``compiled`` (and the compiled walk built) the fields come from one C pass; input it
    refuses is read again here, so the errors are the reference's."""
    counts = np.array([h.records_count for _, _, h in spans], np.int64)
    fields = _compiled_fields(buf, spans, counts) if compiled and fields_c is not None else None
    if fields is not None:
        return _assemble([h for _, _, h in spans], counts, list(fields), min_offset)
    begins: list[int] = []
    for start, end, header in spans:
        begins += record_begins(buf, start, end, header.records_count)
    if not begins:
        return None
    u8 = np.frombuffer(buf, np.uint8)
    try:
        return _columns(u8, np.array(begins, np.int64), spans, counts, min_offset)
    except IndexError as exc:
        raise InvalidRecordError(f"records do not parse: {exc}") from None


def _compiled_fields(buf: bytes | bytearray, spans: Sequence[Span], counts: np.ndarray) -> np.ndarray | None:
    """Every record's fields (a row per name in fields_c.ROWS) from the compiled walk, or None
    when it refuses the input or there is nothing to walk."""
    if not len(counts) or (counts <= 0).any():
        return None
    fields = np.empty((len(fields_c.ROWS), int(counts.sum())), np.int64)
    ok = fields_c.read_fields(buf, np.array([s for s, _, _ in spans], np.int64),
                              np.array([e for _, e, _ in spans], np.int64), counts, fields)
    return fields if ok else None


def _columns(u8: np.ndarray, begins: np.ndarray, spans: Sequence[Span], counts: np.ndarray,
             min_offset: int) -> RecordColumns | None:
    body, ends = record_spans(u8, begins, np.array([end for _, end, _ in spans], np.int64), counts)
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
    header_at = value_at + np.maximum(value_len, 0)
    header_count, size = zigzag_varints(u8, np.minimum(header_at, len(u8) - 1), 5)
    pos = header_at + size
    if (key_len < -1).any() or (value_len < -1).any() or (header_count < 0).any():
        raise InvalidRecordError("a record has a negative key, value or header count")
    plain = header_count == 0
    if not np.array_equal(pos[plain], ends[plain]) or (pos > ends).any():
        bad = int(np.nonzero((plain & (pos != ends)) | (pos > ends))[0][0])
        raise InvalidRecordError(f"the fields of the record at byte {int(begins[bad])} do not match its length")
    return _assemble([h for _, _, h in spans], counts,
                     (ts_delta, offset_delta, key_at, key_len, value_at, value_len, header_at, ends, header_count),
                     min_offset)


def _assemble(headers: list[BatchHeader], counts: np.ndarray, fields: Sequence[np.ndarray],
              min_offset: int) -> RecordColumns | None:
    """The columns from the records' fields (an array each, in fields_c.ROWS order) and their
    batches' headers, from ``min_offset`` on (None when no record is kept)."""
    ts_delta, offset_delta, key_at, key_len, value_at, value_len, header_at, ends, header_count = fields
    offsets = np.repeat(np.array([h.base_offset for h in headers], np.int64), counts) + offset_delta
    stamps = np.repeat(np.array([h.timestamp for h in headers], np.int64), counts)
    timestamps = np.where(np.repeat(np.array([h.log_append for h in headers]), counts), stamps, stamps + ts_delta)
    columns = RecordColumns(offsets, timestamps, key_at, key_len, value_at, value_len, header_at, ends, header_count)
    keep = offsets >= min_offset
    if keep.all():
        return columns
    if not keep.any():
        return None
    return RecordColumns(*(a[keep] for a in columns))


def record_begins(buf: bytes | bytearray, pos: int, end: int, count: int) -> list[int]:
    """Where each of ``count`` records from ``pos`` begins (at its length varint).

    The lengths are not checked here: ``record_spans`` checks that they add up."""
    begins = [0] * count
    for i in range(count):
        begins[i] = pos
        # inlined broker.protocol.types.decode_varint (1- and 2-byte cases): one call per record costs
        b = buf[pos]
        if b < 0x80:
            pos += 1 + ((b >> 1) ^ -(b & 1))
        else:
            b2 = buf[pos + 1]
            if b2 < 0x80:
                raw = (b & 0x7F) | (b2 << 7)
                pos += 2 + ((raw >> 1) ^ -(raw & 1))
            else:
                n, pos = decode_varint(buf, pos, end)
                pos += n
    return begins


def zigzag_varints(u8: np.ndarray, pos: np.ndarray, limit: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """The zigzag varints starting at every position in ``pos``: (values, sizes in bytes)."""
    b = u8[pos]
    raw = (b & 0x7F).astype(np.uint64)
    size = np.ones(len(pos), np.int64)
    more = np.nonzero(b >= 0x80)[0]
    shift = 7
    while len(more):
        if shift >= 7 * limit:
            raise InvalidRecordError("a varint runs past its limit")
        nxt = u8[pos[more] + size[more]]
        raw[more] |= (nxt & 0x7F).astype(np.uint64) << np.uint64(shift)
        size[more] += 1
        more = more[nxt >= 0x80]
        shift += 7
    return (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64), size


def record_spans(u8: np.ndarray, begins: np.ndarray, batch_ends: np.ndarray,
                 counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(body start, end) of every record; each must end where the next begins, the last of a
    batch where its batch ends (InvalidRecordError naming the first that does not)."""
    length, size = zigzag_varints(u8, begins, 5)
    body = begins + size
    ends = body + length
    expected = np.empty_like(ends)
    expected[:-1] = begins[1:]
    expected[np.cumsum(counts) - 1] = batch_ends
    if (length < 0).any() or not np.array_equal(ends, expected):
        bad = int(np.nonzero((length < 0) | (ends != expected))[0][0])
        raise InvalidRecordError(f"the record at byte {int(begins[bad])} does not end where its batch says")
    return body, ends


_VARINT_LIMITS = np.array([1 << (7 * k) for k in range(1, 10)], np.uint64)  # the least value of k + 1 bytes


def zigzag_size(values: np.ndarray) -> np.ndarray:
    """Bytes each value's zigzag varint takes."""
    v = np.asarray(values, np.int64)
    raw = ((v << 1) ^ (v >> 63)).astype(np.uint64)
    return np.searchsorted(_VARINT_LIMITS, raw, side="right") + 1
