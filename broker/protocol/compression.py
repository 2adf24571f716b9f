"""Record compression codecs, keyed by the id Kafka keeps in a batch's attributes (bits 0-2).

0 none, 1 gzip, 2 snappy, 3 lz4 (frame format), 4 zstd. Snappy decoding accepts both raw
snappy (librdkafka) and the xerial framing the Java client writes; encoding writes xerial
framing with 32 KiB blocks, as the Java client does, which every client decodes. LZ4 is
written the way Java's Kafka client writes it: independent 64 KiB blocks, no content size or
checksum. Corrupt input raises CorruptRecordError.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Callable

import cramjam
import lz4.frame
import zstandard

from broker.protocol.errors import CorruptRecordError, UnsupportedCompressionTypeError
from broker.protocol.types import INT32

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4

CODEC_NAMES: dict[int, str] = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODEC_IDS: dict[str, int] = {name: cid for cid, name in CODEC_NAMES.items()} | {"uncompressed": NONE}

Buffer = bytes | bytearray | memoryview

# xerial snappy-java stream: magic, int32 version 1, int32 compatible version 1, then blocks
# of int32 length + raw snappy.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024


def codec_id(name: str) -> int:
    """Kafka's id for a codec name ("gzip" -> 1)."""
    try:
        return CODEC_IDS[name.strip().lower()]
    except (KeyError, AttributeError):
        raise UnsupportedCompressionTypeError(f"unknown compression type {name!r}") from None


def codec_name(cid: int) -> str:
    """The name of a codec id (1 -> "gzip")."""
    try:
        return CODEC_NAMES[cid]
    except KeyError:
        raise UnsupportedCompressionTypeError(f"unknown compression codec id {cid}") from None


# --- snappy ---------------------------------------------------------------------------------

def snappy_compress_xerial(data: Buffer, block_size: int = XERIAL_BLOCK_SIZE) -> bytes:
    """Snappy in xerial framing, as Java's SnappyOutputStream writes it."""
    view = memoryview(data).cast("B")
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(view), block_size):
        block = cramjam.snappy.compress_raw(view[start : start + block_size])
        out += INT32.pack(len(block))
        out += block
    return bytes(out)


def snappy_decompress(data: Buffer) -> bytes:
    """Raw snappy, or xerial-framed snappy when the data starts with its magic."""
    view = memoryview(data).cast("B")
    if view[:8] != XERIAL_MAGIC or len(view) < 16:
        return bytes(cramjam.snappy.decompress_raw(view))
    out = bytearray()
    pos, end = 16, len(view)
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError("xerial snappy block length truncated")
        (size,) = INT32.unpack_from(view, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise CorruptRecordError(f"xerial snappy block of {size} bytes overruns the data")
        out += cramjam.snappy.decompress_raw(view[pos : pos + size])
        pos += size
    return bytes(out)


# --- the others -----------------------------------------------------------------------------

def _gzip_compress(data: Buffer) -> bytes:
    return gzip.compress(data, compresslevel=6, mtime=0)


def _lz4_compress(data: Buffer) -> bytes:
    return lz4.frame.compress(
        data,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        store_size=False,
    )


def _zstd_compress(data: Buffer) -> bytes:
    return zstandard.ZstdCompressor(level=3).compress(data)


def _zstd_decompress(data: Buffer) -> bytes:
    # Frames may omit their content size and a buffer may hold several frames.
    out = bytearray()
    rest: bytes | memoryview = memoryview(data)
    while len(rest):
        d = zstandard.ZstdDecompressor().decompressobj()
        out += d.decompress(rest)
        if not d.eof:
            raise CorruptRecordError("zstd frame truncated")
        rest = d.unused_data
    return bytes(out)


# --- LZ4 from Kafka 0.8-0.9 (magic 0) ---------------------------------------------------------
# Those brokers and clients computed the frame header checksum over the magic number as well
# as the descriptor. Such a frame is repaired by recomputing the checksum byte.

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32_short(data: bytes, seed: int = 0) -> int:
    """XXH32 of an input shorter than 16 bytes (all an LZ4 frame header needs)."""
    if len(data) >= 16:
        raise ValueError("xxh32_short handles inputs under 16 bytes")
    h = (seed + _P5 + len(data)) & _M32
    pos = 0
    while pos + 4 <= len(data):
        (word,) = struct.unpack_from("<I", data, pos)
        h = (_rotl32((h + word * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    for byte in data[pos:]:
        h = (_rotl32((h + byte * _P5) & _M32, 11) * _P1) & _M32
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    return h ^ (h >> 16)


def lz4_fix_legacy_header(data: Buffer) -> bytes:
    """Rewrite the header checksum of an LZ4 frame written by Kafka 0.8/0.9 so it decodes."""
    frame = bytearray(data)
    if len(frame) < 7:
        raise CorruptRecordError("lz4 frame too short")
    descriptor_end = 6 + (8 if frame[4] & 0x08 else 0)  # FLG, BD and optional content size
    frame[descriptor_end] = (xxh32_short(bytes(frame[4:descriptor_end])) >> 8) & 0xFF
    return bytes(frame)


def lz4_decompress_legacy(data: Buffer) -> bytes:
    """LZ4 as found in magic 0 messages: a standard frame, or one with the old broken checksum."""
    try:
        return lz4.frame.decompress(data)
    except RuntimeError:
        return lz4.frame.decompress(lz4_fix_legacy_header(data))


def _identity(data: Buffer) -> bytes:
    return bytes(data)


_COMPRESS: dict[int, Callable[[Buffer], bytes]] = {
    NONE: _identity,
    GZIP: _gzip_compress,
    SNAPPY: snappy_compress_xerial,
    LZ4: _lz4_compress,
    ZSTD: _zstd_compress,
}

_DECOMPRESS: dict[int, Callable[[Buffer], bytes]] = {
    NONE: _identity,
    GZIP: gzip.decompress,
    SNAPPY: snappy_decompress,
    LZ4: lz4.frame.decompress,
    ZSTD: _zstd_decompress,
}


# What the codec libraries raise on bad input (lz4 raises RuntimeError).
_DECOMPRESS_FAILURES = (
    zlib.error, OSError, EOFError, RuntimeError, ValueError, zstandard.ZstdError, cramjam.DecompressionError,
)


def compress(cid: int, data: Buffer) -> bytes:
    """Compress ``data`` with codec ``cid``."""
    try:
        fn = _COMPRESS[cid]
    except KeyError:
        raise UnsupportedCompressionTypeError(f"unknown compression codec id {cid}") from None
    return fn(data)


def decompress(cid: int, data: Buffer, *, legacy_lz4: bool = False) -> bytes:
    """Decompress ``data`` with codec ``cid``; CorruptRecordError if it is not valid.

    ``legacy_lz4`` also accepts the broken LZ4 header checksum of magic 0 messages.
    """
    try:
        fn = lz4_decompress_legacy if (legacy_lz4 and cid == LZ4) else _DECOMPRESS[cid]
    except KeyError:
        raise UnsupportedCompressionTypeError(f"unknown compression codec id {cid}") from None
    try:
        return fn(data)
    except CorruptRecordError:
        raise
    except _DECOMPRESS_FAILURES as exc:
        raise CorruptRecordError(f"cannot decompress {CODEC_NAMES[cid]} data: {exc}") from None
