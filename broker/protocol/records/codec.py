"""The reference codec of v2 records: plain, readable Python, one field at a time.

A v2 record is: length (varint), attributes (int8, unused), timestampDelta (varlong),
offsetDelta (varint), key and value (varint length, -1 for null, then the bytes), header
count (varint) and that many (key, value) pairs framed like key and value. The fast readers
(``unrolled``, and ``arrays`` with numpy) are named alternatives of ``read_records`` and are
pinned to it by property tests (tests/protocol/test_record_codecs.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from broker.protocol.errors import ProtocolDecodeError
from broker.protocol.records.layout import BatchHeader
from broker.protocol.types import BytesLike, decode_varint, decode_varlong, encode_varint

Headers = Sequence[tuple[str, "bytes | None"]]

#: zigzag varints of 0 .. 16383 (record lengths, offset deltas, sizes): record writers index
#: it instead of encoding each; built once per process.
SMALL_VARINTS = [encode_varint(i) for i in range(1 << 14)]
NULL = b"\x01"  # varint(-1): a null key or value


class Record(NamedTuple):
    """One record as a consumer sees it; ``timestamp`` is -1 when the format has none."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()


def as_bytes(value: Any) -> bytes | None:
    """None and bytes as they are, str as UTF-8, anything else through ``bytes()``."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


def varint(n: int) -> bytes:
    """The zigzag varint of ``n``, from ``SMALL_VARINTS`` when it is there."""
    return SMALL_VARINTS[n] if 0 <= n < len(SMALL_VARINTS) else encode_varint(n)


def sized(data: bytes | None) -> bytes:
    """A key, value or header field: its varint length (-1 for null), then its bytes."""
    return NULL if data is None else varint(len(data)) + data


def encode_headers(headers: Headers) -> bytes:
    """A record's header block: the count, then each key (UTF-8) and value."""
    out = bytearray(encode_varint(len(headers)))
    for hkey, hvalue in headers:
        out += sized(hkey.encode("utf-8"))
        out += sized(as_bytes(hvalue))
    return bytes(out)


def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
                  headers: Headers) -> bytes:
    """One framed record (length first)."""
    body = b"".join((b"\x00", encode_varint(timestamp_delta), encode_varint(offset_delta), sized(key), sized(value),
                     encode_headers(headers)))
    return encode_varint(len(body)) + body


def read_sized(buf: BytesLike, pos: int, end: int) -> tuple[bytes | None, int]:
    """A key, value or header field at ``pos``: (bytes or None, next position)."""
    size, pos = decode_varint(buf, pos, end)
    if size < 0:
        return None, pos
    if pos + size > end:
        raise ProtocolDecodeError(f"field of {size} bytes overruns the record")
    return bytes(buf[pos : pos + size]), pos + size


def read_headers(buf: BytesLike, pos: int, end: int) -> list[tuple[str, bytes | None]]:
    """The header block at ``pos``, which must end exactly at ``end`` (the record's end)."""
    count, pos = decode_varint(buf, pos, end)
    if count < 0:
        raise ProtocolDecodeError(f"negative header count {count}")
    headers = []
    for _ in range(count):
        hkey, pos = read_sized(buf, pos, end)
        hvalue, pos = read_sized(buf, pos, end)
        if hkey is None:
            raise ProtocolDecodeError("null header key")
        try:
            headers.append((hkey.decode("utf-8"), hvalue))
        except UnicodeDecodeError:
            raise ProtocolDecodeError("header key is not UTF-8") from None
    if pos != end:
        raise ProtocolDecodeError(f"record declares {end} bytes but its fields end at {pos}")
    return headers


def read_records(buf: BytesLike, start: int, end: int, header: BatchHeader, min_offset: int = 0) -> list[Record]:
    """The records of a v2 batch in ``buf[start:end]`` (its uncompressed record bytes), from
    ``min_offset`` on. Raises ProtocolDecodeError on bytes that do not parse."""
    records: list[Record] = []
    pos = start
    for _ in range(header.records_count):
        length, pos = decode_varint(buf, pos, end)
        rec_end = pos + length
        if length < 0 or rec_end > end:
            raise ProtocolDecodeError(f"record length {length} overruns the batch")
        pos += 1  # attributes
        ts_delta, pos = decode_varlong(buf, pos, rec_end)
        offset_delta, pos = decode_varint(buf, pos, rec_end)
        key, pos = read_sized(buf, pos, rec_end)
        value, pos = read_sized(buf, pos, rec_end)
        headers = read_headers(buf, pos, rec_end)
        pos = rec_end
        offset = header.base_offset + offset_delta
        if offset >= min_offset:
            timestamp = header.max_timestamp if header.log_append else header.base_timestamp + ts_delta
            records.append(Record(offset, timestamp, key, value, headers))
    if pos != end:
        raise ProtocolDecodeError(f"{end - pos} bytes after the last record")
    return records
