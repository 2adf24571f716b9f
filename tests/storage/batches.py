"""A tiny v2 record batch encoder for storage tests (uncompressed records only)."""

from __future__ import annotations

import struct

import crc32c

_HEADER = struct.Struct(">qiibIhiqqqhii")


def _zigzag_varint(n: int) -> bytes:
    raw = (n << 1) ^ (n >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def _record(offset_delta: int, ts_delta: int, value: bytes, key: bytes | None) -> bytes:
    body = bytearray(b"\x00")
    body += _zigzag_varint(ts_delta)
    body += _zigzag_varint(offset_delta)
    if key is None:
        body += _zigzag_varint(-1)
    else:
        body += _zigzag_varint(len(key)) + key
    body += _zigzag_varint(len(value)) + value
    body += _zigzag_varint(0)  # no headers
    return _zigzag_varint(len(body)) + bytes(body)


def build_batch(
    values: list[bytes],
    *,
    base_offset: int = 0,
    timestamps: list[int] | None = None,
    base_timestamp: int = 1_000,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
    keys: list[bytes | None] | None = None,
) -> bytearray:
    """One uncompressed v2 batch holding ``values`` (timestamps default to base_timestamp + i)."""
    assert values
    if timestamps is None:
        timestamps = [base_timestamp + i for i in range(len(values))]
    first_ts = timestamps[0]
    keys = keys or [None] * len(values)
    records = b"".join(_record(i, ts - first_ts, v, k) for i, (v, ts, k) in enumerate(zip(values, timestamps, keys)))
    batch_length = _HEADER.size - 12 + len(records)
    buf = bytearray(_HEADER.size) + records
    _HEADER.pack_into(
        buf, 0, base_offset, batch_length, -1, 2, 0, attributes, len(values) - 1,
        first_ts, max(timestamps), producer_id, producer_epoch, base_sequence, len(values),
    )
    struct.pack_into(">I", buf, 17, crc32c.crc32c(memoryview(buf)[21:]))
    return buf


def batch_of_size(size: int, *, count: int = 1, **kwargs) -> bytearray:
    """A batch of about ``size`` bytes (at least the header and ``count`` tiny records)."""
    per = max(0, (size - 61) // count - 8)
    return build_batch([b"x" * per] * count, **kwargs)


def values_in(data: bytes) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in whole batches of ``data`` (a trailing partial batch is ignored)."""
    out = []
    pos = 0
    while pos + 61 <= len(data):
        base_offset, length = struct.unpack_from(">qi", data, pos)
        size = length + 12
        if pos + size > len(data):
            break
        count = struct.unpack_from(">i", data, pos + 57)[0]
        p = pos + 61
        for _ in range(count):
            rec_len, p = _read_varint(data, p)
            end = p + rec_len
            p += 1
            _, p = _read_varint(data, p)
            offset_delta, p = _read_varint(data, p)
            key_len, p = _read_varint(data, p)
            p += max(key_len, 0)
            value_len, p = _read_varint(data, p)
            out.append((base_offset + offset_delta, bytes(data[p : p + value_len])))
            p = end
        pos += size
    return out


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = raw = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
