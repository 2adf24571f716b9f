"""Compression codecs: roundtrips, Java/librdkafka framings, kafka-python interop, bad input."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol import compression as C
from broker.protocol.errors import CorruptRecordError, UnsupportedCompressionTypeError

CODECS = [C.NONE, C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD]
# Compressible but not trivially so, and bigger than one xerial/lz4 block.
BIG = b"".join(b"record-%08d:" % i + os.urandom(8) for i in range(20000))


@pytest.mark.parametrize("cid", CODECS)
@settings(max_examples=25, deadline=None)
@given(data=st.binary(max_size=2000))
def test_roundtrip(cid, data):
    assert C.decompress(cid, C.compress(cid, data)) == data


@pytest.mark.parametrize("cid", CODECS)
def test_roundtrip_big_and_buffer_types(cid):
    packed = C.compress(cid, bytearray(BIG))
    assert isinstance(packed, bytes)
    assert C.decompress(cid, memoryview(packed)) == BIG
    if cid:
        assert len(packed) < len(BIG)


def test_names_and_ids():
    for cid in CODECS:
        assert C.codec_id(C.codec_name(cid)) == cid
    assert C.codec_id("GZIP") == 1 and C.codec_id("uncompressed") == 0
    assert [C.codec_name(i) for i in CODECS] == ["none", "gzip", "snappy", "lz4", "zstd"]
    with pytest.raises(UnsupportedCompressionTypeError):
        C.codec_id("brotli")
    with pytest.raises(UnsupportedCompressionTypeError):
        C.codec_name(5)
    with pytest.raises(UnsupportedCompressionTypeError):
        C.compress(7, b"x")
    with pytest.raises(UnsupportedCompressionTypeError):
        C.decompress(-1, b"x")


def test_snappy_is_xerial_framed_and_raw_is_accepted():
    packed = C.compress(C.SNAPPY, BIG)
    assert packed.startswith(C.XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01")
    import cramjam

    raw = bytes(cramjam.snappy.compress_raw(BIG))  # what librdkafka sends
    assert C.decompress(C.SNAPPY, raw) == BIG
    assert C.decompress(C.SNAPPY, C.compress(C.SNAPPY, b"")) == b""


def test_lz4_frame_is_what_java_reads():
    packed = C.compress(C.LZ4, BIG)
    assert packed[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    flg, bd = packed[4], packed[5]
    assert flg & 0x20  # independent blocks
    assert not flg & 0x08 and not flg & 0x04  # no content size, no content checksum
    assert bd == 0x40  # 64 KiB blocks


def test_lz4_legacy_header_checksum():
    frame = bytearray(C.compress(C.LZ4, b"old kafka" * 50))
    # Kafka 0.8/0.9 hashed the magic number too.
    frame[6] = (C.xxh32_short(bytes(frame[0:6])) >> 8) & 0xFF
    with pytest.raises(CorruptRecordError):
        C.decompress(C.LZ4, bytes(frame))
    assert C.decompress(C.LZ4, bytes(frame), legacy_lz4=True) == b"old kafka" * 50


@pytest.mark.parametrize("data", [b"", b"a", b"abcd", b"abcdefg", b"0123456789abcde"])
def test_xxh32_against_lz4_header_checksums(data):
    import lz4.frame

    # lz4 computes the header checksum as the second byte of XXH32(descriptor); build frames with
    # descriptors of several lengths by toggling content size.
    for store in (False, True):
        frame = lz4.frame.compress(b"x" * len(data), store_size=store)
        end = 6 + (8 if frame[4] & 0x08 else 0)
        assert frame[end] == (C.xxh32_short(frame[4:end]) >> 8) & 0xFF
    assert C.xxh32_short(b"") == 0x02CC5D05  # published XXH32 of the empty input, seed 0


@pytest.mark.parametrize("cid", [C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD])
@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_corrupt_input(cid, damage):
    packed = C.compress(cid, BIG[:50000])
    bad = packed[: len(packed) // 2] if damage == "truncate" else b"\x00\x01garbage" * 9
    with pytest.raises(CorruptRecordError):
        C.decompress(cid, bad)


def test_xerial_block_overrun():
    packed = C.compress(C.SNAPPY, b"abc" * 100)
    with pytest.raises(CorruptRecordError):
        C.decompress(C.SNAPPY, packed[:-3])


def test_zstd_frame_without_content_size_and_concatenated():
    import zstandard

    comp = zstandard.ZstdCompressor(write_content_size=False)
    one = comp.compress(b"first ")
    two = zstandard.ZstdCompressor().compress(b"second")
    assert C.decompress(C.ZSTD, one + two) == b"first second"


# --- interop with kafka-python's codec functions --------------------------------------------

kcodec = pytest.importorskip("kafka.codec")
THEIRS = {
    C.GZIP: (kcodec.gzip_encode, kcodec.gzip_decode),
    C.SNAPPY: (kcodec.snappy_encode, kcodec.snappy_decode),
    C.LZ4: (kcodec.lz4_encode, kcodec.lz4_decode),
    C.ZSTD: (kcodec.zstd_encode, kcodec.zstd_decode),
}


@pytest.mark.parametrize("cid", list(THEIRS))
def test_kafka_python_interop(cid):
    encode, decode = THEIRS[cid]
    assert C.decompress(cid, encode(BIG)) == BIG
    assert decode(C.compress(cid, BIG)) == BIG


def test_kafka_python_raw_snappy():
    raw = kcodec.snappy_encode(BIG, xerial_compatible=False)
    assert C.decompress(C.SNAPPY, raw) == BIG
