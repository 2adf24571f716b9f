"""The record readers against the reference codec, and the batch walker's tail rules.

``codec.read_records`` is the reference; ``unrolled.read_records_unrolled`` (the SimpleConsumer's)
and ``arrays.read_record_columns`` (numpy: the loader's and the mirror's) must read exactly what it
reads, for any records: null or present keys and values, headers, timestamps before and after
the base, gaps in the offset deltas, log-append time, every codec, any ``min_offset``.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.client.simple_consumer import MessageAndMetadata
from broker.protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, compress
from broker.protocol.errors import CorruptRecordError, InvalidRecordError
from broker.protocol.records import Record, Tail, encode_batch, encode_message_set, iter_batches, read_records, records_of
from broker.protocol.records.arrays import read_record_columns
from broker.protocol.records.codec import encode_record
from broker.protocol.records.layout import attributes_of, build_batch, read_header
from broker.protocol.records.unrolled import read_records_unrolled

T0 = 1_700_000_000_000
CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]

blobs = st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=120, max_size=300))
headers = st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20))), max_size=3)
records = st.lists(
    st.tuples(blobs, blobs, headers, st.integers(-(1 << 40), 1 << 40), st.integers(0, 1 << 20)),
    min_size=1, max_size=40)


def _batch(items: list, codec: int, base_offset: int, log_append: bool) -> tuple[bytes, list[Record]]:
    """A v2 batch of ``items`` (key, value, headers, timestamp delta, offset gap) and the records
    a reader must give for it."""
    body, expected, delta = [], [], 0
    for key, value, hdrs, ts_delta, gap in items:
        delta += gap
        body.append(encode_record(delta, ts_delta, key, value, hdrs))
        expected.append((base_offset + delta, T0 + ts_delta, key, value, hdrs))
    max_ts = max(ts for _, ts, _, _, _ in expected)
    payload = b"".join(body)
    raw = build_batch(compress(codec, payload) if codec else payload, count=len(items), base_ts=T0, max_ts=max_ts,
                      attributes=attributes_of(codec, log_append), base_offset=base_offset)
    if log_append:
        expected = [(o, max_ts, k, v, h) for o, _, k, v, h in expected]
    # offset deltas with gaps: the header's lastOffsetDelta is count - 1, as build_batch writes it
    return raw, [Record(o, t, k, v, h) for o, t, k, v, h in expected]


def _fields(rows: list) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in rows]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=records, codec=st.sampled_from(CODECS), base_offset=st.integers(0, 1 << 50), log_append=st.booleans(),
       skip=st.integers(0, 60))
def test_every_reader_reads_what_the_reference_reads(items, codec, base_offset, log_append, skip):
    raw, expected = _batch(items, codec, base_offset, log_append)
    [(pos, header)] = list(iter_batches(raw, Tail.STOP))
    buf, start, end = records_of(raw, pos, header)
    min_offset = base_offset + skip
    wanted = _fields([r for r in expected if r.offset >= min_offset])

    reference = read_records(buf, start, end, header, min_offset)
    assert _fields(reference) == wanted
    assert _fields(read_records_unrolled(buf, start, end, header, min_offset)) == wanted
    rows = read_records_unrolled(buf, start, end, header, min_offset, [], "t", 3, MessageAndMetadata)
    assert all(isinstance(m, MessageAndMetadata) and (m.topic, m.partition) == ("t", 3) for m in rows)
    assert _fields(rows) == wanted
    columns = read_record_columns(buf, start, end, header, min_offset)
    assert (columns.records(buf) if columns is not None else []) == reference


@settings(max_examples=100, deadline=None)
@given(items=st.lists(st.tuples(blobs, blobs, headers, st.integers(0, 1 << 41)), min_size=1, max_size=20),
       codec=st.sampled_from(CODECS))
def test_encode_batch_round_trips_through_the_reference(items, codec):
    raw = encode_batch([(k, v, h, T0 + ts) for k, v, h, ts in items], compression=codec, base_offset=7)
    [(pos, header)] = list(iter_batches(raw, Tail.RAISE))
    assert read_header(raw) == header
    buf, start, end = records_of(raw, pos, header)
    assert _fields(read_records(buf, start, end, header)) == [
        (7 + i, T0 + ts, k, v, [tuple(x) for x in h]) for i, (k, v, h, ts) in enumerate(items)]


# --- the walker's tail rules ------------------------------------------------------------------------

def _three() -> bytes:
    return b"".join(encode_batch([(b"k", b"v" * 50, [], T0)], base_offset=i) for i in range(3))


@settings(max_examples=60, deadline=None)
@given(cut=st.integers(1, 200))
def test_a_partial_last_batch(cut):
    data = _three()
    one = len(data) // 3
    cut = min(cut, one - 1)
    partial = data[:-cut]
    # a fetch response: the walk stops before the partial batch
    assert [h.base_offset for _, h in iter_batches(partial, Tail.STOP)] == [0, 1]
    # recovery: the same, quietly
    assert [h.base_offset for _, h in iter_batches(partial, Tail.TRUNCATE)] == [0, 1]
    # a produce request: whole batches only
    with pytest.raises(InvalidRecordError):
        list(iter_batches(partial, Tail.RAISE))


def test_a_damaged_batch():
    data = bytearray(_three())
    one = len(data) // 3
    data[one + 70] ^= 0xFF  # a record byte of the second batch: its CRC no longer matches
    assert [h.base_offset for _, h in iter_batches(data, Tail.TRUNCATE)] == [0]
    for tail in (Tail.RAISE, Tail.STOP):
        with pytest.raises(CorruptRecordError):
            list(iter_batches(data, tail))
    assert [h.base_offset for _, h in iter_batches(data, Tail.STOP, verify=False)] == [0, 1, 2]


def test_legacy_message_sets_only_in_fetched_bytes():
    data = encode_message_set([(b"k", b"v", [], T0)], magic=1, base_offset=4) + _three()
    walked = [(h.magic, h.base_offset, h.next_offset) for _, h in iter_batches(data, Tail.STOP)]
    assert walked == [(1, 4, 5), (2, 0, 1), (2, 1, 2), (2, 2, 3)]
    with pytest.raises(InvalidRecordError):
        list(iter_batches(data, Tail.RAISE))
    assert list(iter_batches(data, Tail.TRUNCATE)) == []
