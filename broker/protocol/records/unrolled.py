"""``read_records_unrolled``: the reference ``codec.read_records`` with its common cases inlined.

The SimpleConsumer's hot loop: records are read straight from one bytes object, the common
one- and two-byte varints decoded inline (the rest through ``broker.protocol.types``), and each
record made into one row tuple without intermediate objects. A function call per field would
cost about a third more per record. Pinned to the reference by tests/protocol/test_record_codecs.py.
"""

from __future__ import annotations

from broker.protocol.errors import InvalidRecordError, KafkaError
from broker.protocol.records.codec import Record
from broker.protocol.records.layout import BatchHeader
from broker.protocol.types import decode_varint, decode_varlong

_new = tuple.__new__


def read_records_unrolled(buf: bytes | bytearray, start: int, end: int, header: BatchHeader, min_offset: int = 0,
                          out: list | None = None, topic: str = "", partition: int = -1,
                          row: type[tuple] | None = None) -> list:
    """The records of a v2 batch in ``buf[start:end]`` from ``min_offset`` on, appended to ``out``.

    With ``row`` (a tuple type of fields topic, partition, offset, key, value, headers,
    timestamp, such as the SimpleConsumer's MessageAndMetadata) each record is one such row;
    without, a ``Record``, as ``codec.read_records`` returns. Raises InvalidRecordError on
    bytes that do not parse."""
    rows: list = [] if row is None or out is None else out
    try:
        _read(buf, start, end, header, min_offset, rows, topic, partition, tuple if row is None else row)
    except (IndexError, UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, KafkaError):
            raise
        raise InvalidRecordError(f"record batch at offset {header.base_offset} does not parse: {exc}") from None
    if row is None:
        records = [Record(o, t, k, v, h) for _, _, o, k, v, h, t in rows]
        if out is None:
            return records
        out += records
        return out
    return rows


def read_record_head(buf: bytes | bytearray, pos: int, end: int, base_offset: int) -> tuple[int, int, int, int, int, int]:
    """The framing that opens the v2 record at ``pos``, up to its key: (record start, record end,
    timestamp delta, where the offset delta is, offset delta, where the key is).

    Raises InvalidRecordError when the record's length does not fit before ``end``; the inlined
    varints are broker.protocol.types.decode_varint's 1- and 2-byte cases."""
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
    rec_end = pos + length
    if length < 1 or rec_end > end:
        raise InvalidRecordError(f"record length {length} overruns the batch at offset {base_offset}")
    start = pos
    pos += 1  # attributes
    b = buf[pos]
    if b < 0x80:
        ts_delta = (b >> 1) ^ -(b & 1)
        pos += 1
    else:
        b2 = buf[pos + 1]
        if b2 < 0x80:
            raw = (b & 0x7F) | (b2 << 7)
            ts_delta = (raw >> 1) ^ -(raw & 1)
            pos += 2
        else:
            ts_delta, pos = decode_varlong(buf, pos, rec_end)
    od_pos = pos
    b = buf[pos]
    if b < 0x80:
        offset_delta = (b >> 1) ^ -(b & 1)
        pos += 1
    else:
        b2 = buf[pos + 1]
        if b2 < 0x80:
            raw = (b & 0x7F) | (b2 << 7)
            offset_delta = (raw >> 1) ^ -(raw & 1)
            pos += 2
        else:
            offset_delta, pos = decode_varint(buf, pos, rec_end)
    return start, rec_end, ts_delta, od_pos, offset_delta, pos


def _read(buf: bytes | bytearray, pos: int, end: int, header: BatchHeader, min_offset: int, out: list, topic: str,
          partition: int, row: type[tuple]) -> None:
    base_offset, base_ts, log_append = header.base_offset, header.timestamp, header.log_append
    append = out.append
    # the inlined varints below are broker.protocol.types.decode_varint's 1- and 2-byte cases
    for _ in range(header.records_count):
        _, rec_end, ts_delta, _, offset_delta, pos = read_record_head(buf, pos, end, base_offset)
        # key
        b = buf[pos]
        if b == 1:  # -1: null key (the common case)
            key = None
            pos += 1
        else:
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                n, pos = decode_varint(buf, pos, rec_end)
            if n < 0:
                key = None
            else:
                key = buf[pos:pos + n]
                pos += n
        # value
        b = buf[pos]
        if b < 0x80:
            n = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            b2 = buf[pos + 1]
            if b2 < 0x80:
                raw = (b & 0x7F) | (b2 << 7)
                n = (raw >> 1) ^ -(raw & 1)
                pos += 2
            else:
                n, pos = decode_varint(buf, pos, rec_end)
        if n < 0:
            value = None
        else:
            value = buf[pos:pos + n]
            pos += n
        # headers
        b = buf[pos]
        if b == 0:
            headers: list[tuple[str, bytes | bytearray | None]] = []
            pos += 1
        else:
            nh, pos = decode_varint(buf, pos, rec_end)
            headers = []
            for _h in range(nh):
                hn, pos = decode_varint(buf, pos, rec_end)
                if hn < 0:
                    raise InvalidRecordError(f"null header key in batch at offset {base_offset}")
                hkey = buf[pos:pos + hn].decode("utf-8")
                pos += hn
                hn, pos = decode_varint(buf, pos, rec_end)
                if hn < 0:
                    hvalue = None
                else:
                    hvalue = buf[pos:pos + hn]
                    pos += hn
                headers.append((hkey, hvalue))
        if pos != rec_end:
            raise InvalidRecordError(f"record in batch at offset {base_offset} does not match its length")
        offset = base_offset + offset_delta
        if offset >= min_offset:
            append(_new(row, (topic, partition, offset, key, value, headers,
                              base_ts if log_append else base_ts + ts_delta)))
    if pos != end:
        raise InvalidRecordError(f"{end - pos} bytes after the last record of the batch at offset {base_offset}")
