"""Record fields of many records at once, with numpy: for readers that columnise or copy records.

Decoding one record at a time in Python costs about a microsecond per record. Here only the
record boundaries are walked in Python (one length varint per record); every other varint of
every record is decoded as a whole array. Used by the loader's columnar reader
(pipelines.record_columns) and the mirror's batch rewrite (mirror.rewrite). Needs numpy (the
``pipelines`` and ``mirror`` extras), unlike the rest of broker.client.
"""

from __future__ import annotations

import numpy as np

from broker.protocol.errors import InvalidRecordError
from broker.protocol.types import decode_varint

__all__ = ["record_begins", "zigzag_varints", "record_spans", "zigzag_size"]


def record_begins(buf: bytes | bytearray, pos: int, end: int, count: int) -> list[int]:
    """Where each of ``count`` records from ``pos`` begins (at its length varint).

    The lengths are not checked here: ``record_spans`` checks that they add up."""
    begins = [0] * count
    for i in range(count):
        begins[i] = pos
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
