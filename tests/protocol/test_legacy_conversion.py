"""Conversions between message formats v0/v1 and record batch v2 (broker.protocol.records.legacy):
up on Produce v0-2, down on Fetch v0-3, with the offsets and timestamps Kafka gives."""

from __future__ import annotations

import pytest

from broker.protocol.errors import CorruptRecordError, InvalidRecordError, InvalidTimestampError, UnsupportedCompressionTypeError
from broker.protocol.records import decode_batches, encode_batch, encode_message_set
from broker.protocol.records.legacy import down_convert, up_convert

T0 = 1_700_000_000_000
RECORDS = [(b"k%d" % i if i % 2 else None, b"v%d" % i, None, T0 + i) for i in range(7)]


def _rows(data: bytes) -> list[tuple]:
    return [(r.offset, r.key, r.value, r.timestamp) for d in decode_batches(data) for r in d.records]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, 1, 2, 3])
def test_up_convert_gives_one_v2_batch(magic: int, codec: int) -> None:
    message_set = encode_message_set(RECORDS[:3], magic=magic, compression=codec) + \
        encode_message_set(RECORDS[3:], magic=magic, compression=codec)  # two wrappers when compressed
    batch, count = up_convert(message_set)
    decoded = list(decode_batches(bytes(batch)))
    assert count == len(RECORDS) and len(decoded) == 1
    assert decoded[0].header.magic == 2 and decoded[0].header.compression == codec
    # magic 0 has no timestamps: Kafka gives the records -1
    assert _rows(bytes(batch)) == [(i, k, v, ts if magic else -1) for i, (k, v, _, ts) in enumerate(RECORDS)]


def test_up_convert_refuses_bad_sets() -> None:
    good = encode_message_set(RECORDS[:2], magic=1)
    with pytest.raises(InvalidRecordError):
        up_convert(good[:-3])  # truncated
    damaged = bytearray(good)
    damaged[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        up_convert(bytes(damaged))
    with pytest.raises(InvalidTimestampError):
        up_convert(encode_message_set(RECORDS[:2], magic=1, timestamp_type=1))
    with pytest.raises(InvalidRecordError):
        up_convert(b"")


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, 1, 2, 3])
def test_down_convert_keeps_offsets_and_skips_what_was_not_asked(magic: int, codec: int) -> None:
    log = encode_batch(RECORDS[:4], base_offset=100, compression=codec) + encode_batch(RECORDS[4:], base_offset=104,
                                                                                       compression=codec)
    data, count = down_convert(log, magic, 102, 1 << 20)
    assert count == 5
    assert {d.header.magic for d in decode_batches(data)} == {magic}
    expected = [(100 + i, k, v, ts if magic else -1) for i, (k, v, _, ts) in enumerate(RECORDS)][2:]
    assert _rows(data) == expected


def test_down_convert_is_bounded_but_always_makes_progress() -> None:
    log = b"".join(encode_batch([(None, b"x" * 100, None, T0)] * 10, base_offset=10 * i) for i in range(5))
    first, count = down_convert(log, 1, 0, 10)  # smaller than one batch converted: still one whole batch
    assert count == 10 and len(first) > 10
    some, count = down_convert(log, 1, 0, 3 * len(first))
    assert count == 30 and len(some) == 3 * len(first)


def test_down_convert_log_append_time_and_zstd() -> None:
    stamped = encode_batch(RECORDS[:2], timestamp_type=1)  # max timestamp is every record's time
    assert {r[3] for r in _rows(down_convert(stamped, 1, 0, 1 << 20)[0])} == {T0 + 1}
    zstd = encode_batch(RECORDS[:2], base_offset=2, compression=4)
    with pytest.raises(UnsupportedCompressionTypeError):
        down_convert(zstd, 1, 0, 1 << 20)
    data, count = down_convert(encode_batch(RECORDS[:2]) + zstd, 1, 0, 1 << 20)
    assert count == 2  # stops before the zstd batch
