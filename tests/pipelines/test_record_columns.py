"""pipelines.record_columns decodes exactly what the SimpleConsumer's parser decodes, and refuses
what it refuses."""

from __future__ import annotations

import random
import struct

import crc32c
import pytest

from broker.client.simple_consumer import decode_message_set
from broker.protocol.errors import CorruptRecordError, InvalidRecordError
from broker.protocol.records import encode_batch, encode_message_set
from broker.protocol.records import layout as B
from pipelines.record_columns import RecordChunk, decode_chunk

BASE_MS = 1_767_225_600_000


def _record(rng: random.Random) -> tuple:
    def blob(sizes):
        return bytes(rng.randrange(256) for _ in range(rng.choice(sizes)))

    key = None if rng.random() < 0.5 else blob([0, 1, 5, 12, 13, 40, 300])
    value = None if rng.random() < 0.1 else blob([0, 1, 11, 12, 13, 200, 20_000])
    headers = [] if rng.random() < 0.7 else [
        (f"h{i}", None if rng.random() < 0.3 else b"x" * rng.randrange(20)) for i in range(rng.randrange(1, 3))]
    return key, value, headers, BASE_MS + rng.randrange(-10**6, 10**9)


def _as_tuples(messages) -> list[tuple]:
    return [tuple(m) for m in messages]


@pytest.mark.parametrize("seed", range(6))
def test_same_records_as_the_simple_consumer(seed):
    """Random batches (keys, nulls, headers, every codec, log-append time, offset gaps, a cut
    tail, a start offset inside a batch): the same records and the same next offset."""
    rng = random.Random(seed)
    for _ in range(40):
        parts, offset = [], 0
        for _ in range(rng.randrange(1, 5)):
            n = rng.randrange(1, 30)
            parts.append(encode_batch([_record(rng) for _ in range(n)], base_offset=offset,
                                      compression=rng.choice([0, 0, 1, 2, 3, 4]), timestamp_type=rng.choice([0, 0, 1])))
            offset += n + rng.choice([0, 0, 3])
        data = b"".join(parts)
        data = data[:len(data) - rng.choice([0, 0, 7])]
        start = rng.randrange(0, offset + 1)
        expected, next_offset = decode_message_set("t", 3, data, start)
        chunk = decode_chunk("t", 3, data, start)
        assert _as_tuples(chunk.messages()) == _as_tuples(expected)
        assert chunk.next_offset == next_offset


def test_chunk_slicing_and_round_trip():
    data = encode_batch([(None, b"v%d" % i, [], BASE_MS + i) for i in range(10)], base_offset=100)
    chunk = decode_chunk("t", 0, data, 0)
    assert len(chunk) == 10 and chunk.last_offset == 109 and chunk.next_offset == 110
    head = chunk.up_to(104)
    assert head.offsets.tolist() == [100, 101, 102, 103] and head.values.to_pylist() == [b"v0", b"v1", b"v2", b"v3"]
    assert head.next_offset == 104
    again = RecordChunk.from_messages("t", 0, chunk.messages())
    assert _as_tuples(again.messages()) == _as_tuples(chunk.messages())


def test_legacy_message_sets_and_empty_input():
    legacy = encode_message_set([(b"k", b"old", [], BASE_MS)], magic=1, base_offset=7)
    expected, next_offset = decode_message_set("t", 0, legacy, 0)
    chunk = decode_chunk("t", 0, legacy, 0)
    assert len(chunk) == 1 and chunk.values.to_pylist() == [b"old"]
    assert _as_tuples(chunk.messages()) == _as_tuples(expected) and chunk.next_offset == next_offset
    empty = decode_chunk("t", 0, None, 0)
    assert len(empty) == 0 and empty.next_offset == -1


def _resealed(batch: bytearray) -> bytes:
    """The batch with its CRC recomputed, so only the damage inside is left to find."""
    struct.pack_into(">I", batch, B.CRC_POS, crc32c.crc32c(bytes(batch[B.ATTRIBUTES_POS:])))
    return bytes(batch)


def test_bad_crc_is_a_corrupt_record_error():
    data = bytearray(encode_batch([(None, b"value", [], BASE_MS)], base_offset=0))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC mismatch at offset 0"):
        decode_chunk("t", 0, bytes(data), 0)


def test_a_record_length_that_does_not_add_up_is_refused():
    data = bytearray(encode_batch([(None, b"value-%d" % i, [], BASE_MS) for i in range(3)], base_offset=0))
    data[B.HEADER_SIZE] += 2  # first record's length varint: one byte longer (zigzag)
    with pytest.raises(InvalidRecordError):
        decode_chunk("t", 0, _resealed(data), 0)


def test_a_value_length_past_its_record_is_refused():
    data = bytearray(encode_batch([(None, b"value", [], BASE_MS)], base_offset=0))
    # record: length, attributes, ts delta, offset delta, key length (-1 = 0x01), value length (5 = 0x0a)
    value_len_at = B.HEADER_SIZE + 5
    assert data[value_len_at] == 0x0A
    data[value_len_at] = 0x0C  # 6: one byte more than the record holds
    with pytest.raises(InvalidRecordError):
        decode_chunk("t", 0, _resealed(data), 0)
    with pytest.raises(InvalidRecordError):
        decode_message_set("t", 0, _resealed(data), 0)
