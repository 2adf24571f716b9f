"""A tiny v2 record batch encoder for storage tests (uncompressed records only)."""

from __future__ import annotations

from broker.protocol.records import Tail, iter_batches, read_records, records_of
from broker.protocol.records import layout as L
from broker.protocol.records.codec import encode_record


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
    records = b"".join(encode_record(i, ts - first_ts, k, v, ()) for i, (v, ts, k) in enumerate(zip(values, timestamps, keys)))
    return bytearray(L.build_batch(records, count=len(values), base_ts=first_ts, max_ts=max(timestamps), attributes=attributes,
                                   base_offset=base_offset, producer_id=producer_id, producer_epoch=producer_epoch,
                                   base_sequence=base_sequence))


def batch_of_size(size: int, *, count: int = 1, **kwargs) -> bytearray:
    """A batch of about ``size`` bytes (at least the header and ``count`` tiny records)."""
    per = max(0, (size - 61) // count - 8)
    return build_batch([b"x" * per] * count, **kwargs)


def values_in(data: bytes) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in whole batches of ``data`` (a trailing partial batch is ignored)."""
    out = []
    for pos, header in iter_batches(bytes(data), Tail.STOP, verify=False):
        buf, start, end = records_of(data, pos, header)
        out += [(r.offset, r.value) for r in read_records(buf, start, end, header)]
    return out
