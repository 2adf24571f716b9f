"""Whole records: build v2 record batches and read v2 batches and legacy v0/v1 message sets.

For clients, tools (dump-log) and tests; the broker's produce path never parses records and
uses ``broker.protocol.batch`` instead. Reading tolerates a trailing partial batch, as a fetch
response may end with one, and checks every CRC (CRC-32C for v2, zlib CRC-32 for v0/v1).
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import crc32c

from broker.protocol import batch as B
from broker.protocol.compression import compress, decompress
from broker.protocol.errors import CorruptRecordError, InvalidRecordError, ProtocolDecodeError
from broker.protocol.types import BytesLike, decode_varint, decode_varlong, encode_varint

Headers = Sequence[tuple[str, "bytes | None"]]

NO_TIMESTAMP = -1
LEGACY_TIMESTAMP_TYPE_MASK = 0x08  # magic 1: LogAppendTime, like v2's attribute bit 3
LEGACY_COMPRESSION_MASK = 0x07
MAGIC_POS = 16

# After the v2 CRC: attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId,
# producerEpoch, baseSequence, recordsCount.
_V2_TAIL = struct.Struct(">hiqqqhii")
_V2_HEAD = struct.Struct(">qiibI")  # baseOffset, batchLength, partitionLeaderEpoch, magic, crc
# Legacy message: offset, size, crc, magic, attributes (+ timestamp for magic 1).
_LEGACY_V0 = struct.Struct(">qiIbb")
_LEGACY_V1 = struct.Struct(">qiIbbq")
_INT32 = struct.Struct(">i")


class Record(NamedTuple):
    """One record as a consumer sees it; ``timestamp`` is -1 when the format has none."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()


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

    is_control = False
    is_transactional = False


class DecodedBatch(NamedTuple):
    header: B.BatchHeader | LegacyHeader
    records: list[Record]


# --- encoding ---------------------------------------------------------------------------------

def _as_bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


def _normalise(item: Any, now_ms: int) -> tuple[bytes | None, bytes | None, Headers, int]:
    """(key, value, headers, timestamp) from a Record or such a tuple; str is UTF-8 encoded."""
    if isinstance(item, Record):
        key, value, headers, ts = item.key, item.value, item.headers, item.timestamp
    else:
        key, value, headers, ts = item
    ts = now_ms if ts is None or ts < 0 else ts
    return _as_bytes(key), _as_bytes(value), headers or (), ts


def _sized(data: bytes | None) -> bytes:
    return encode_varint(-1) if data is None else encode_varint(len(data)) + data


def _encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None, headers: Headers) -> bytes:
    body = bytearray(b"\x00")  # record attributes, unused
    body += encode_varint(timestamp_delta)
    body += encode_varint(offset_delta)
    body += _sized(key)
    body += _sized(value)
    body += encode_varint(len(headers))
    for hkey, hvalue in headers:
        body += _sized(hkey.encode("utf-8"))
        body += _sized(_as_bytes(hvalue))
    return encode_varint(len(body)) + body


def encode_batch(
    records: Iterable[Any],
    *,
    base_offset: int = 0,
    compression: int = 0,
    producer_id: int = B.NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = B.NO_SEQUENCE,
    timestamp_type: int = 0,
    partition_leader_epoch: int = -1,
    transactional: bool = False,
    control: bool = False,
) -> bytes:
    """One v2 record batch from ``Record``s or (key, value, headers, timestamp) tuples.

    Offset deltas are 0..n-1 (any offsets in ``Record``s are ignored); a None timestamp is now.
    """
    now_ms = int(time.time() * 1000)
    items = [_normalise(r, now_ms) for r in records]
    if not items:
        raise ValueError("a record batch needs at least one record")
    base_ts = items[0][3]
    max_ts = max(ts for _, _, _, ts in items)
    body = bytearray()
    for i, (key, value, headers, ts) in enumerate(items):
        body += _encode_record(i, ts - base_ts, key, value, headers)
    payload = compress(compression, body) if compression else bytes(body)
    attributes = (
        compression
        | (B.TIMESTAMP_TYPE_MASK if timestamp_type else 0)
        | (B.TRANSACTIONAL_MASK if transactional else 0)
        | (B.CONTROL_MASK if control else 0)
    )
    tail = _V2_TAIL.pack(
        attributes, len(items) - 1, base_ts, max_ts, producer_id, producer_epoch, base_sequence, len(items)
    )
    crc = crc32c.crc32c(payload, crc32c.crc32c(tail))
    length = B.HEADER_SIZE - B.LOG_OVERHEAD + len(payload)
    return _V2_HEAD.pack(base_offset, length, partition_leader_epoch, B.CURRENT_MAGIC, crc) + tail + payload


def _legacy_message(offset: int, magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None) -> bytes:
    body = bytearray(struct.pack(">bb", magic, attributes))
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for part in (key, value):
        body += _INT32.pack(-1) if part is None else _INT32.pack(len(part)) + part
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
    items = [_normalise(r, now_ms) for r in records]
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


# --- decoding ---------------------------------------------------------------------------------

def decode_batches(buf: BytesLike) -> Iterator[DecodedBatch]:
    """Every batch in ``buf`` (v2, or legacy v0/v1 message sets), with its records.

    Stops quietly at a trailing partial batch. Raises CorruptRecordError on a CRC mismatch and
    InvalidRecordError on a batch that does not parse.
    """
    view = memoryview(buf).cast("B") if not isinstance(buf, bytes) else memoryview(buf)
    pos, end = 0, len(view)
    while end - pos > MAGIC_POS:
        _, length = B.read_prefix(view, pos)
        size = length + B.LOG_OVERHEAD
        if length < 0:
            raise InvalidRecordError(f"negative batch length {length} at position {pos}")
        if pos + size > end:
            return  # a partial batch: the fetch response was cut at max_bytes
        magic = view[pos + MAGIC_POS]
        if magic == B.CURRENT_MAGIC:
            yield _decode_v2(view, pos, size)
        elif magic in (0, 1):
            yield _decode_legacy(view, pos, size)
        else:
            raise InvalidRecordError(f"unknown record magic {magic} at position {pos}")
        pos += size


def decode_records(buf: BytesLike, *, include_control: bool = False) -> Iterator[Record]:
    """Every record in ``buf``, batches flattened; control records (transaction markers) skipped."""
    for decoded in decode_batches(buf):
        if include_control or not decoded.header.is_control:
            yield from decoded.records


def _decode_v2(view: memoryview, pos: int, size: int) -> DecodedBatch:
    header = B.check_batch(view, pos, pos + size)
    payload: BytesLike = view[pos + B.HEADER_SIZE : pos + size]
    if header.compression:
        payload = decompress(header.compression, payload)
    log_append = bool(header.attributes & B.TIMESTAMP_TYPE_MASK)
    try:
        records = _parse_v2_records(payload, header, log_append)
    except ProtocolDecodeError as exc:
        raise InvalidRecordError(f"record batch at offset {header.base_offset}: {exc}") from None
    return DecodedBatch(header, records)


def _parse_v2_records(payload: BytesLike, header: B.BatchHeader, log_append: bool) -> list[Record]:
    records: list[Record] = []
    pos, end = 0, len(payload)
    for _ in range(header.records_count):
        length, pos = decode_varint(payload, pos, end)
        rec_end = pos + length
        if length < 0 or rec_end > end:
            raise ProtocolDecodeError(f"record length {length} overruns the batch")
        pos += 1  # attributes
        ts_delta, pos = decode_varlong(payload, pos, rec_end)
        offset_delta, pos = decode_varint(payload, pos, rec_end)
        key, pos = _read_sized(payload, pos, rec_end)
        value, pos = _read_sized(payload, pos, rec_end)
        count, pos = decode_varint(payload, pos, rec_end)
        if count < 0:
            raise ProtocolDecodeError(f"negative header count {count}")
        headers = []
        for _ in range(count):
            hkey, pos = _read_sized(payload, pos, rec_end)
            hvalue, pos = _read_sized(payload, pos, rec_end)
            if hkey is None:
                raise ProtocolDecodeError("null header key")
            try:
                headers.append((hkey.decode("utf-8"), hvalue))
            except UnicodeDecodeError:
                raise ProtocolDecodeError("header key is not UTF-8") from None
        if pos != rec_end:
            raise ProtocolDecodeError(f"record declares {length} bytes but holds {length - (rec_end - pos)}")
        timestamp = header.max_timestamp if log_append else header.base_timestamp + ts_delta
        records.append(Record(header.base_offset + offset_delta, timestamp, key, value, headers))
    if pos != end:
        raise ProtocolDecodeError(f"{end - pos} bytes after the last record")
    return records


def _read_sized(buf: BytesLike, pos: int, end: int) -> tuple[bytes | None, int]:
    size, pos = decode_varint(buf, pos, end)
    if size < 0:
        return None, pos
    if pos + size > end:
        raise ProtocolDecodeError(f"field of {size} bytes overruns the record")
    return bytes(buf[pos : pos + size]), pos + size


def _decode_legacy(view: memoryview, pos: int, size: int) -> DecodedBatch:
    offset, magic, attributes, timestamp, crc, key, value = _parse_legacy_message(view, pos, size)
    compression = attributes & LEGACY_COMPRESSION_MASK
    if not compression:
        header = LegacyHeader(offset, offset, magic, crc, attributes, timestamp, size)
        return DecodedBatch(header, [Record(offset, timestamp, key, value, [])])
    if value is None:
        raise InvalidRecordError(f"compressed message at offset {offset} has no value")
    inner = decompress(compression, value, legacy_lz4=magic == 0)
    messages = []
    ipos, iend = 0, len(inner)
    inner_view = memoryview(inner)
    while ipos < iend:
        if iend - ipos < B.LOG_OVERHEAD:
            raise InvalidRecordError(f"truncated inner message in wrapper at offset {offset}")
        (_, ilength) = B.read_prefix(inner_view, ipos)
        isize = ilength + B.LOG_OVERHEAD
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
    header = LegacyHeader(records[0].offset, records[-1].offset, magic, crc, attributes, timestamp, size)
    return DecodedBatch(header, records)


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
    (n,) = _INT32.unpack_from(view, pos)
    pos += 4
    if n < 0:
        return None, pos
    if pos + n > end:
        raise InvalidRecordError(f"legacy message field of {n} bytes overruns the message")
    return bytes(view[pos : pos + n]), pos + n
