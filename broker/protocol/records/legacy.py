"""Legacy v0/v1 message sets (magic 0 and 1): write them, read them (compressed wrapper messages
included), and convert between them and v2 batches for old clients: ``up_convert`` (Produce
v0-2) and ``down_convert`` (Fetch v0-3). CRCs are zlib CRC-32."""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Iterable
from typing import Any, NamedTuple

from broker.protocol.compression import ZSTD, compress, decompress
from broker.protocol.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    UnsupportedCompressionTypeError,
)
from broker.protocol.records.codec import Headers, Record, as_bytes, encode_record
from broker.protocol.records.layout import CURRENT_MAGIC, LOG_OVERHEAD, MAGIC_POS, PREFIX, build_batch
from broker.protocol.records.unrolled import read_records_unrolled
from broker.protocol.records.walker import Tail, iter_batches, records_of
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


# -- conversion between the legacy formats and v2 (Produce v0-2 up, Fetch v0-3 down) -------------

#: the message format each Fetch version below 4 answers with (v0-1: magic 0, v2-3: magic 1)
FETCH_MAGIC = {0: 0, 1: 0, 2: 1, 3: 1}
#: the message format each Produce version below 3 carries
PRODUCE_MAGIC = {0: 0, 1: 0, 2: 1}


def up_convert(message_set: bytes | bytearray | memoryview) -> tuple[bytearray, int]:
    """One v2 batch (offsets from 0) of a producer's v0/v1 message set, and its record count.

    As Kafka converts: every message, those inside compressed wrappers included, becomes one
    record of a single batch, compressed with the wrappers' codec; magic 0 messages carry no
    timestamp (-1). Raises InvalidRecordError (CorruptRecordError for a CRC) on a set that does
    not parse whole, and InvalidTimestampError for a producer claiming LogAppendTime."""
    view = memoryview(message_set)
    pos, end = 0, len(view)
    records: list[Record] = []
    codec = 0
    while pos < end:
        if end - pos < MAGIC_POS + 2:
            raise InvalidRecordError(f"legacy message set ends with {end - pos} stray bytes")
        _, length = PREFIX.unpack_from(view, pos)
        if length < 0 or pos + LOG_OVERHEAD + length > end:
            raise InvalidRecordError(f"legacy message at byte {pos} overruns the message set")
        header, inner = decode_legacy(view, pos, LOG_OVERHEAD + length)
        if header.magic == 1 and header.attributes & LEGACY_TIMESTAMP_TYPE_MASK:
            raise InvalidTimestampError("Producer should not set the timestamp type to LogAppendTime")
        codec = codec or header.compression
        records += inner
        pos += LOG_OVERHEAD + length
    if not records:
        raise InvalidRecordError("produce request carries no message")
    base_ts = records[0].timestamp
    body = b"".join(encode_record(i, r.timestamp - base_ts, r.key, r.value, ()) for i, r in enumerate(records))
    batch = build_batch(compress(codec, body) if codec else body, count=len(records), base_ts=base_ts,
                        max_ts=max(r.timestamp for r in records), attributes=codec)
    return bytearray(batch), len(records)


def down_convert(buf: bytes | bytearray, magic: int, min_offset: int, max_bytes: int) -> tuple[bytes, int]:
    """The v2 batches of ``buf`` as a v0/v1 message set for an old consumer, and its record count.

    One batch at a time (memory: the output and one batch): records before ``min_offset`` and
    control batches are left out, a compressed batch becomes one wrapper message compressed
    with the same codec, and the output stops before the batch that would take it past
    ``max_bytes`` (the first batch is always whole, so a consumer can make progress). A zstd
    batch ends the output there, or raises UnsupportedCompressionTypeError when it is first."""
    out = bytearray()
    count = 0
    for pos, header in iter_batches(buf, Tail.STOP, verify=False):
        if header.magic != CURRENT_MAGIC or not header.readable(min_offset):
            continue
        if header.compression == ZSTD:  # no v0/v1 codec id: Kafka answers UNSUPPORTED_COMPRESSION_TYPE
            if out:
                break
            raise UnsupportedCompressionTypeError("zstd batches cannot be converted to message format v0/v1")
        payload, start, end = records_of(buf, pos, header)
        rows = read_records_unrolled(payload, start, end, header, min_offset, [], row=tuple)
        if not rows:
            continue
        piece = _legacy_messages(rows, magic, header.compression, header.log_append)
        if out and len(out) + len(piece) > max_bytes:
            break
        out += piece
        count += len(rows)
        if len(out) >= max_bytes:
            break
    return bytes(out), count


_MESSAGE_PREFIX = struct.Struct(">qiI")  # offset, size, crc
# magic, attributes (, timestamp), key length (, value length: a keyless message's fixed fields)
_KEYLESS_HEAD = {0: struct.Struct(">bbii"), 1: struct.Struct(">bbqii")}
_KEYED_HEAD = {0: struct.Struct(">bbi"), 1: struct.Struct(">bbqi")}


def _legacy_messages(rows: list, magic: int, compression: int, log_append: bool) -> bytes:
    """Messages of ``magic`` from reader rows (topic, partition, offset, key, value, headers,
    timestamp); compressed, one wrapper holding them all. Headers are dropped (as Kafka does)."""
    ts_attr = LEGACY_TIMESTAMP_TYPE_MASK if (log_append and magic == 1) else 0
    if not compression:
        return _plain_messages(rows, magic, ts_attr, 0)
    first = rows[0][2]
    inner = _plain_messages(rows, magic, 0, first if magic == 1 else 0)
    last = rows[-1]
    wrapper_ts = max(r[6] for r in rows)
    return _legacy_message(last[2], magic, compression | ts_attr, wrapper_ts, None, compress(compression, inner))


def _plain_messages(rows: list, magic: int, attributes: int, offset_base: int) -> bytes:
    """Uncompressed messages; their offsets are the rows' minus ``offset_base`` (magic 1
    inner messages are relative). A message is its prefix, its fixed fields with the key, and
    its value, which is not copied (the CRC is chained over the two)."""
    parts: list[bytes | bytearray] = []
    append = parts.append
    crc32 = zlib.crc32
    prefix = _MESSAGE_PREFIX.pack
    keyless = _KEYLESS_HEAD[magic].pack
    keyed = _KEYED_HEAD[magic].pack
    int32 = INT32.pack
    v1 = magic == 1
    for _, _, offset, key, value, _, ts in rows:
        vlen = -1 if value is None else len(value)
        if key is None:
            head = keyless(magic, attributes, ts, -1, vlen) if v1 else keyless(magic, attributes, -1, vlen)
        else:
            head = (keyed(magic, attributes, ts, len(key)) if v1 else keyed(magic, attributes, len(key))) + key + int32(vlen)
        if value is None:
            append(prefix(offset - offset_base, 4 + len(head), crc32(head)))
            append(head)
        else:
            append(prefix(offset - offset_base, 4 + len(head) + vlen, crc32(value, crc32(head))))
            append(head)
            append(value)
    return b"".join(parts)
