"""Record batches v2 and legacy message sets, against kafka-python's record builders/readers."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder  # noqa: E402
from kafka.record.legacy_records import LegacyRecordBatchBuilder  # noqa: E402
from kafka.record.memory_records import MemoryRecords  # noqa: E402

from broker.protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from broker.protocol.errors import CorruptRecordError, InvalidRecordError
from broker.protocol.records import (
    LegacyHeader,
    Record,
    decode_batches,
    decode_records,
    encode_batch,
    encode_message_set,
)
from broker.protocol.records import layout as B

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
SAMPLE = [
    (b"k0", b"v0", [], 1_700_000_000_000),
    (None, b"value with no key", [("h1", b"x"), ("h2", None)], 1_700_000_000_005),
    (b"k2", None, [("\u00e9t\u00e9", b"")], 1_699_999_999_990),  # a tombstone, earlier timestamp
    (b"", b"", [], 1_700_000_000_001),
]


def as_tuples(records):
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in records]


# --- v2 -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_ours_read_by_kafka_python(codec):
    raw = encode_batch(SAMPLE, base_offset=100, compression=codec, producer_id=7, producer_epoch=2, base_sequence=40)
    theirs = DefaultRecordBatch(raw)
    assert theirs.validate_crc()
    assert (theirs.base_offset, theirs.compression_type, theirs.producer_id, theirs.producer_epoch) == (100, codec, 7, 2)
    assert theirs.base_sequence == 40 and theirs.max_timestamp == 1_700_000_000_005
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in theirs]
    assert got == [(100 + i, ts, k, v, h) for i, (k, v, h, ts) in enumerate(SAMPLE)]


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_read_by_ours(codec):
    records = SAMPLE + [(b"big", b"compressible " * 200, [], 1_700_000_000_100)]
    builder = DefaultRecordBatchBuilder(2, codec, False, 9, 1, 0, 1 << 20)
    for i, (k, v, h, ts) in enumerate(records):
        builder.append(i, ts, k, v, h)
    raw = bytes(builder.build())
    [decoded] = list(decode_batches(raw))
    assert decoded.header.producer_id == 9 and decoded.header.compression == codec
    assert as_tuples(decoded.records) == [(i, ts, k, v, h) for i, (k, v, h, ts) in enumerate(records)]


def test_uncompressed_bytes_identical_to_kafka_python():
    builder = DefaultRecordBatchBuilder(2, NONE, False, -1, -1, -1, 1 << 20)
    for i, (k, v, h, ts) in enumerate(SAMPLE):
        builder.append(i, ts, k, v, h)
    assert encode_batch(SAMPLE, partition_leader_epoch=0) == bytes(builder.build())


def test_header_fields_and_check_batch():
    raw = encode_batch(SAMPLE, base_offset=5, compression=GZIP, partition_leader_epoch=3, timestamp_type=0)
    header = B.check_batch(raw)
    assert header.base_offset == 5 and header.size == len(raw) and header.magic == 2
    assert header.records_count == 4 and header.last_offset_delta == 3
    assert header.base_timestamp == SAMPLE[0][3] and header.max_timestamp == SAMPLE[1][3]
    assert header.partition_leader_epoch == 3 and header.producer_id == -1 and header.base_sequence == -1


def test_record_objects_and_str_input():
    records = [Record(55, 10, b"a", b"b", [("h", b"1")]), ("key", "value", None, 11)]
    decoded = list(decode_records(encode_batch(records)))
    assert as_tuples(decoded) == [(0, 10, b"a", b"b", [("h", b"1")]), (1, 11, b"key", b"value", [])]


def test_missing_timestamp_is_now():
    import time

    before = int(time.time() * 1000)
    [record] = decode_records(encode_batch([(None, b"x", None, None)]))
    assert before <= record.timestamp <= int(time.time() * 1000)


def test_empty_batch_rejected():
    with pytest.raises(ValueError):
        encode_batch([])


def test_log_append_time():
    raw = encode_batch(SAMPLE, timestamp_type=1)
    header = B.read_header(raw)
    assert header.attributes & B.TIMESTAMP_TYPE_MASK
    assert {r.timestamp for r in decode_records(raw)} == {header.max_timestamp}


def test_transactional_and_control():
    data = encode_batch(SAMPLE[:1], transactional=True, producer_id=3, producer_epoch=0, base_sequence=0)
    marker_key = struct.pack(">hh", 0, 1)  # version 0, COMMIT
    marker = encode_batch([(marker_key, b"\x00\x00\x00\x00\x00\x00", [], 5)], base_offset=1,
                          transactional=True, control=True, producer_id=3, producer_epoch=0)
    batches = list(decode_batches(data + marker))
    assert batches[0].header.is_transactional and not batches[0].header.is_control
    assert batches[1].header.is_control
    assert [r.offset for r in decode_records(data + marker)] == [0]
    assert [r.offset for r in decode_records(data + marker, include_control=True)] == [0, 1]
    their_marker = DefaultRecordBatch(marker)
    assert their_marker.is_control_batch and their_marker.is_transactional


def test_restamped_offsets():
    raw = bytearray(encode_batch(SAMPLE))
    B.set_base_offset(raw, 0, 1000)
    B.check_batch(raw)  # baseOffset is outside the CRC
    assert [r.offset for r in decode_records(raw)] == [1000, 1001, 1002, 1003]


def test_many_batches_and_a_trailing_partial_one():
    one = encode_batch(SAMPLE[:2], base_offset=0)
    two = encode_batch(SAMPLE[2:], base_offset=2, compression=LZ4)
    whole = one + two
    assert [r.offset for r in decode_records(whole)] == [0, 1, 2, 3]
    for cut in range(1, len(two)):
        assert [r.offset for r in decode_records(one + two[:cut])] == [0, 1]
    assert list(decode_batches(b"")) == []


@pytest.mark.parametrize("codec", [NONE, ZSTD])
def test_crc_corruption_detected(codec):
    raw = encode_batch(SAMPLE, compression=codec)
    for pos in (B.ATTRIBUTES_POS + 1, B.RECORDS_COUNT_POS - 1, B.HEADER_SIZE + 3, len(raw) - 1):
        bad = bytearray(raw)
        bad[pos] ^= 0x01
        with pytest.raises(CorruptRecordError):
            B.check_batch(bad)
        with pytest.raises(CorruptRecordError):
            list(decode_batches(bad))


def _recrc(buf: bytearray) -> bytearray:
    struct.pack_into(">I", buf, B.CRC_POS, B.compute_crc(buf, 0, len(buf)))
    return buf


def test_records_that_do_not_parse():
    raw = bytearray(encode_batch([(b"k", b"v", [], 1)]))
    raw[B.HEADER_SIZE] = 0x7E  # record length varint now claims far more than the batch holds
    with pytest.raises(InvalidRecordError):
        list(decode_batches(_recrc(raw)))
    extra = bytearray(encode_batch([(b"k", b"v", [], 1)])) + b"\x00"
    struct.pack_into(">i", extra, B.LENGTH_POS, len(extra) - B.LOG_OVERHEAD)
    with pytest.raises(InvalidRecordError, match="after the last record"):
        list(decode_batches(_recrc(extra)))


def test_unknown_magic():
    raw = bytearray(encode_batch(SAMPLE))
    raw[B.MAGIC_POS] = 3
    with pytest.raises(InvalidRecordError):
        list(decode_batches(raw))


records_strategy = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=20)),
        st.one_of(st.none(), st.binary(max_size=50)),
        st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))), max_size=3),
        st.integers(0, 2**41),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=40, deadline=None)
@given(records=records_strategy, codec=st.sampled_from(CODECS), base=st.integers(0, 2**40))
def test_roundtrip_property(records, codec, base):
    raw = encode_batch(records, base_offset=base, compression=codec)
    assert as_tuples(decode_records(raw)) == [(base + i, ts, k, v, h) for i, (k, v, h, ts) in enumerate(records)]
    their = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in DefaultRecordBatch(raw)]
    assert their == [(base + i, ts, k, v, h) for i, (k, v, h, ts) in enumerate(records)]


# --- legacy message sets (magic 0 and 1) ------------------------------------------------------

LEGACY = [(b"k%d" % i if i % 2 else None, b"v%d" % i, [], 1_600_000_000_000 + i) for i in range(5)]


def kafka_python_legacy(magic, codec, base=0):
    builder = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
    for i, (k, v, _, ts) in enumerate(LEGACY):
        builder.append(base + i, ts, k, v)
    return bytes(builder.build())


def their_records(raw):
    out, mr = [], MemoryRecords(raw)
    while mr.has_next():
        batch = mr.next_batch()
        out += [(r.offset, r.timestamp, r.key, r.value) for r in batch]
    return out


# kafka-python needs xxhash for magic 0 LZ4; that case is covered by test_legacy_magic0_lz4_with_old_checksum.
LEGACY_CASES = [(m, c) for m in (0, 1) for c in (NONE, GZIP, SNAPPY, LZ4) if (m, c) != (0, LZ4)]


@pytest.mark.parametrize("magic, codec", LEGACY_CASES)
def test_legacy_from_kafka_python(magic, codec):
    raw = kafka_python_legacy(magic, codec)
    records = list(decode_records(raw))
    ts = (lambda t: t) if magic == 1 else (lambda t: -1)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in records] == [
        (i, ts(t), k, v) for i, (k, v, _, t) in enumerate(LEGACY)
    ]
    batches = list(decode_batches(raw))
    assert all(isinstance(b.header, LegacyHeader) and b.header.magic == magic for b in batches)
    assert len(batches) == (1 if codec else len(LEGACY))


@pytest.mark.parametrize("magic, codec", LEGACY_CASES)
def test_legacy_ours_read_by_kafka_python(magic, codec):
    raw = encode_message_set(LEGACY, magic=magic, compression=codec, base_offset=0)
    expected = [(i, t if magic == 1 else None, k, v) for i, (k, v, _, t) in enumerate(LEGACY)]
    assert their_records(raw) == expected


def test_legacy_uncompressed_bytes_identical():
    for magic in (0, 1):
        assert encode_message_set(LEGACY, magic=magic) == kafka_python_legacy(magic, NONE)


def test_legacy_compressed_offsets_as_a_broker_assigns_them():
    # Magic 1: inner offsets relative, the wrapper holds the absolute offset of the last record.
    raw = encode_message_set(LEGACY, magic=1, compression=GZIP, base_offset=500)
    [decoded] = list(decode_batches(raw))
    assert [r.offset for r in decoded.records] == [500, 501, 502, 503, 504]
    assert (decoded.header.base_offset, decoded.header.last_offset, decoded.header.next_offset) == (500, 504, 505)
    assert decoded.header.compression == GZIP and decoded.header.size == len(raw)
    # Magic 0: inner offsets are absolute.
    raw0 = encode_message_set(LEGACY, magic=0, compression=SNAPPY, base_offset=70)
    assert [r.offset for r in decode_records(raw0)] == [70, 71, 72, 73, 74]


def test_legacy_producer_side_wrapper_offset_zero():
    """Before a broker assigns offsets the wrapper says 0; inner relative offsets stand."""
    raw = kafka_python_legacy(1, GZIP)
    assert struct.unpack_from(">q", raw)[0] == 0
    assert [r.offset for r in decode_records(raw)] == [0, 1, 2, 3, 4]


def test_legacy_log_append_time():
    raw = encode_message_set(LEGACY, magic=1, compression=GZIP, timestamp_type=1)
    assert {r.timestamp for r in decode_records(raw)} == {max(t for *_, t in LEGACY)}


def test_legacy_magic0_lz4_with_old_checksum():
    from broker.protocol import compression as C

    inner = encode_message_set(LEGACY, magic=0)
    frame = bytearray(C.compress(LZ4, inner))
    frame[6] = (C.xxh32_short(bytes(frame[0:6])) >> 8) & 0xFF  # as Kafka 0.8/0.9 wrote it
    body = struct.pack(">bb", 0, LZ4) + struct.pack(">i", -1) + struct.pack(">i", len(frame)) + bytes(frame)
    import zlib

    wrapper = struct.pack(">qiI", 4, len(body) + 4, zlib.crc32(body)) + body
    assert [r.value for r in decode_records(wrapper)] == [v for _, v, _, _ in LEGACY]


def test_legacy_crc_corruption_and_partial_tail():
    raw = bytearray(encode_message_set(LEGACY, magic=1))
    assert len(list(decode_records(raw[:-3]))) == 4  # last message cut short: ignored
    raw[30] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        list(decode_records(raw))


def test_mixed_formats_in_one_buffer():
    buf = encode_message_set(LEGACY[:2], magic=0) + encode_message_set(LEGACY[2:3], magic=1, base_offset=2)
    buf += encode_batch(LEGACY[3:], base_offset=3)
    assert [r.offset for r in decode_records(buf)] == [0, 1, 2, 3, 4]
    assert [b.header.magic for b in decode_batches(buf)] == [0, 0, 1, 2]
