"""Whole batches: build a v2 record batch, and read every batch of a buffer with its records.

For clients, tools (dump-log) and tests; the broker's produce path never parses records.
Reading walks with ``Tail.STOP`` (a trailing partial batch, as a fetch response may end with,
is left out) and checks every CRC (CRC-32C for v2, zlib CRC-32 for legacy v0/v1).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from broker.protocol.compression import compress
from broker.protocol.errors import InvalidRecordError, ProtocolDecodeError
from broker.protocol.records.codec import Record, encode_record, read_records
from broker.protocol.records.layout import (
    CURRENT_MAGIC,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    BatchHeader,
    attributes_of,
    build_batch,
    check_batch,
)
from broker.protocol.records.legacy import LegacyHeader, decode_legacy, normalise
from broker.protocol.records.walker import Tail, iter_batches, records_of
from broker.protocol.types import BytesLike


class DecodedBatch(NamedTuple):
    header: BatchHeader | LegacyHeader
    records: list[Record]


def encode_batch(
    records: Iterable[Any],
    *,
    base_offset: int = 0,
    compression: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    timestamp_type: int = 0,
    partition_leader_epoch: int = -1,
    transactional: bool = False,
    control: bool = False,
) -> bytes:
    """One v2 record batch from ``Record``s or (key, value, headers, timestamp) tuples.

    Offset deltas are 0..n-1 (any offsets in ``Record``s are ignored); a None timestamp is now.
    """
    now_ms = int(time.time() * 1000)
    items = [normalise(r, now_ms) for r in records]
    if not items:
        raise ValueError("a record batch needs at least one record")
    base_ts = items[0][3]
    max_ts = max(ts for _, _, _, ts in items)
    body = b"".join(encode_record(i, ts - base_ts, key, value, headers) for i, (key, value, headers, ts) in enumerate(items))
    payload = compress(compression, body) if compression else body
    return build_batch(payload, count=len(items), base_ts=base_ts, max_ts=max_ts,
                       attributes=attributes_of(compression, bool(timestamp_type), transactional, control),
                       base_offset=base_offset, producer_id=producer_id, producer_epoch=producer_epoch,
                       base_sequence=base_sequence, partition_leader_epoch=partition_leader_epoch)


def decode_batches(buf: BytesLike) -> Iterator[DecodedBatch]:
    """Every batch in ``buf`` (v2, or legacy v0/v1 message sets), with its records.

    Stops quietly at a trailing partial batch. Raises CorruptRecordError on a CRC mismatch and
    InvalidRecordError on a batch that does not parse.
    """
    data = buf if isinstance(buf, (bytes, bytearray)) else bytes(buf)
    for pos, header in iter_batches(data, Tail.STOP, verify=False):  # check_batch checks v2 below
        if header.magic != CURRENT_MAGIC:
            yield DecodedBatch(*decode_legacy(memoryview(data), pos, header.size))
            continue
        check_batch(data, pos, pos + header.size)
        payload, start, end = records_of(data, pos, header)
        try:
            records = read_records(payload, start, end, header)
        except ProtocolDecodeError as exc:
            raise InvalidRecordError(f"record batch at offset {header.base_offset}: {exc}") from None
        yield DecodedBatch(header, records)


def decode_records(buf: BytesLike, *, include_control: bool = False) -> Iterator[Record]:
    """Every record in ``buf``, batches flattened; control records (transaction markers) skipped."""
    for decoded in decode_batches(buf):
        if include_control or not decoded.header.is_control:
            yield from decoded.records
