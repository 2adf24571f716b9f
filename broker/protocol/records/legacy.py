"""Legacy v0/v1 message sets (magic 0 and 1): write them (to test old clients' formats) and
read them, compressed wrapper messages included. CRCs are zlib CRC-32."""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Iterable
from typing import Any, NamedTuple

from broker.protocol.compression import compress, decompress
from broker.protocol.errors import CorruptRecordError, InvalidRecordError
from broker.protocol.records.codec import Headers, Record, as_bytes
from broker.protocol.records.layout import LOG_OVERHEAD, MAGIC_POS, PREFIX
from broker.protocol.types import INT32

NO_TIMESTAMP = -1
LEGACY_TIMESTAMP_TYPE_MASK = 0x08  # magic 1: LogAppendTime, like v2's attribute bit 3
LEGACY_COMPRESSION_MASK = 0x07

# Legacy message: offset, size, crc, magic, attributes (+ timestamp for magic 1).
_LEGACY_V0 = struct.Struct(">qiIbb")
_LEGACY_V1 = struct.Struct(">qiIbbq")


class LegacyHeader(NamedTuple):
    """The outer message of a v0/v1 message set, shaped like BatchHeader where it matters."""

    base_offset: int
    last_offset: int
    magic: int
    crc: int
    attributes: int
    timestamp: int
    size: int

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> int:
        return self.attributes & LEGACY_COMPRESSION_MASK

    @property
    def is_control(self) -> bool:
        return False

    @property
    def is_transactional(self) -> bool:
        return False


def normalise(item: Any, now_ms: int) -> tuple[bytes | None, bytes | None, Headers, int]:
    """(key, value, headers, timestamp) from a Record or such a tuple; str is UTF-8 encoded."""
    if isinstance(item, Record):
        key, value, headers, ts = item.key, item.value, item.headers, item.timestamp
    else:
        key, value, headers, ts = item
    ts = now_ms if ts is None or ts < 0 else ts
    return as_bytes(key), as_bytes(value), headers or (), ts


def _legacy_message(offset: int, magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None) -> bytes:
    body = bytearray(struct.pack(">bb", magic, attributes))
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for part in (key, value):
        body += INT32.pack(-1) if part is None else INT32.pack(len(part)) + part
    crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, len(body) + 4, crc) + body


def encode_message_set(
    records: Iterable[Any], *, magic: int = 1, compression: int = 0, base_offset: int = 0, timestamp_type: int = 0
) -> bytes:
    """A legacy (magic 0 or 1) message set, for testing old clients' formats.

    Compressed sets are one wrapper message; its inner offsets are relative for magic 1 and
    absolute for magic 0, and the wrapper carries the last offset, as Kafka writes them.
    Headers are dropped (the formats have none); timestamps are dropped for magic 0.
    """
    if magic not in (0, 1):
        raise ValueError(f"legacy magic must be 0 or 1, not {magic}")
    now_ms = int(time.time() * 1000)
    items = [normalise(r, now_ms) for r in records]
    ts_attr = LEGACY_TIMESTAMP_TYPE_MASK if (timestamp_type and magic == 1) else 0
    if not compression:
        return b"".join(
            _legacy_message(base_offset + i, magic, ts_attr, ts, key, value)
            for i, (key, value, _, ts) in enumerate(items)
        )
    inner_base = 0 if magic == 1 else base_offset
    inner = b"".join(
        _legacy_message(inner_base + i, magic, 0, ts, key, value) for i, (key, value, _, ts) in enumerate(items)
    )
    max_ts = max((ts for _, _, _, ts in items), default=now_ms)
    wrapped = compress(compression, inner)
    return _legacy_message(base_offset + len(items) - 1, magic, compression | ts_attr, max_ts, None, wrapped)


def decode_legacy(view: memoryview, pos: int, size: int) -> tuple[LegacyHeader, list[Record]]:
    """The outer legacy message at ``pos`` and its records (those of its wrapped set, if compressed)."""
    offset, magic, attributes, timestamp, crc, key, value = _parse_legacy_message(view, pos, size)
    compression = attributes & LEGACY_COMPRESSION_MASK
    if not compression:
        return LegacyHeader(offset, offset, magic, crc, attributes, timestamp, size), [Record(offset, timestamp, key, value, [])]
    if value is None:
        raise InvalidRecordError(f"compressed message at offset {offset} has no value")
    inner = decompress(compression, value, legacy_lz4=magic == 0)
    messages = []
    ipos, iend = 0, len(inner)
    inner_view = memoryview(inner)
    while ipos < iend:
        if iend - ipos < LOG_OVERHEAD:
            raise InvalidRecordError(f"truncated inner message in wrapper at offset {offset}")
        (_, ilength) = PREFIX.unpack_from(inner_view, ipos)
        isize = ilength + LOG_OVERHEAD
        if ilength < 0 or ipos + isize > iend:
            raise InvalidRecordError(f"inner message overruns its wrapper at offset {offset}")
        messages.append(_parse_legacy_message(inner_view, ipos, isize))
        ipos += isize
    if not messages:
        raise InvalidRecordError(f"empty compressed message at offset {offset}")
    # Magic 1 inner offsets are relative and the wrapper holds the absolute offset of the last
    # one; a producer's own set (wrapper offset 0, before a broker assigned any) is left as is.
    shift = max(offset - messages[-1][0], 0) if magic == 1 else 0
    log_append = magic == 1 and bool(attributes & LEGACY_TIMESTAMP_TYPE_MASK)
    records = [
        Record(ioffset + shift, timestamp if log_append else its, ikey, ivalue, [])
        for ioffset, _, _, its, _, ikey, ivalue in messages
    ]
    return LegacyHeader(records[0].offset, records[-1].offset, magic, crc, attributes, timestamp, size), records


def _parse_legacy_message(view: memoryview, pos: int, size: int) -> tuple:
    """(offset, magic, attributes, timestamp, crc, key, value) of one v0/v1 message; checks its CRC."""
    end = pos + size
    magic = view[pos + MAGIC_POS]
    st = _LEGACY_V1 if magic == 1 else _LEGACY_V0
    if magic not in (0, 1):
        raise InvalidRecordError(f"inner message magic {magic} inside a legacy message set")
    if size < st.size + 8:
        raise InvalidRecordError(f"legacy message of {size} bytes is too short")
    fields = st.unpack_from(view, pos)
    offset, crc, attributes = fields[0], fields[2], fields[4]
    timestamp = fields[5] if magic == 1 else NO_TIMESTAMP
    actual = zlib.crc32(view[pos + MAGIC_POS : end])
    if actual != crc:
        raise CorruptRecordError(f"message CRC mismatch at offset {offset}: stored {crc:#010x}, computed {actual:#010x}")
    p = pos + st.size
    key, p = _legacy_bytes(view, p, end)
    value, p = _legacy_bytes(view, p, end)
    if p != end:
        raise InvalidRecordError(f"legacy message at offset {offset} has {end - p} stray bytes")
    return offset, magic, attributes, timestamp, crc, key, value


def _legacy_bytes(view: memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    if end - pos < 4:
        raise InvalidRecordError("legacy message field length truncated")
    (n,) = INT32.unpack_from(view, pos)
    pos += 4
    if n < 0:
        return None, pos
    if pos + n > end:
        raise InvalidRecordError(f"legacy message field of {n} bytes overruns the message")
    return bytes(view[pos : pos + n]), pos + n
