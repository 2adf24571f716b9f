"""The fixed 61-byte header of a v2 record batch: read it, check it, restamp its offset.

The broker never parses the records inside a batch on the produce path; everything it needs
(offsets, timestamps, producer id and sequence, CRC) is in this header. Storage (recovery,
indexes) and the server (produce validation) both use this module. Field positions follow
Kafka's DefaultRecordBatch layout.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

import crc32c

from broker.protocol.errors import CorruptRecordError, InvalidRecordError

# Offsets of the header fields inside a batch.
BASE_OFFSET_POS = 0
LENGTH_POS = 8
PARTITION_LEADER_EPOCH_POS = 12
MAGIC_POS = 16
CRC_POS = 17
ATTRIBUTES_POS = 21
LAST_OFFSET_DELTA_POS = 23
BASE_TIMESTAMP_POS = 27
MAX_TIMESTAMP_POS = 35
PRODUCER_ID_POS = 43
PRODUCER_EPOCH_POS = 51
BASE_SEQUENCE_POS = 53
RECORDS_COUNT_POS = 57
HEADER_SIZE = 61

LOG_OVERHEAD = 12  # baseOffset int64 + batchLength int32, the part not counted in batchLength
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
CURRENT_MAGIC = 2

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")


class BatchHeader(NamedTuple):
    """The decoded header of one v2 record batch."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch takes on the wire and on disk."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Decode the header of the batch starting at ``pos``; the caller checks it is whole."""
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def read_prefix(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """(base_offset, batch_length) of the batch at ``pos``; needs only 12 bytes."""
    return _PREFIX.unpack_from(buf, pos)


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    """CRC-32C of a batch, over attributes to the end, as stored in its crc field."""
    return crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_POS : pos + size])


def check_batch(buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> BatchHeader:
    """Validate the batch at ``pos`` (length, magic, CRC, record count); return its header.

    Raises InvalidRecordError for a malformed batch and CorruptRecordError for a CRC mismatch.
    """
    end = len(buf) if end is None else end
    if end - pos < HEADER_SIZE:
        raise InvalidRecordError(f"record batch truncated: {end - pos} bytes, header needs {HEADER_SIZE}")
    header = read_header(buf, pos)
    if header.batch_length < MIN_BATCH_LENGTH:
        raise InvalidRecordError(f"record batch length {header.batch_length} is below the minimum {MIN_BATCH_LENGTH}")
    if pos + header.size > end:
        raise InvalidRecordError(f"record batch claims {header.size} bytes but only {end - pos} remain")
    if header.magic != CURRENT_MAGIC:
        raise InvalidRecordError(f"record batch magic {header.magic} is not supported (only v2)")
    actual = compute_crc(buf, pos, header.size)
    if actual != header.crc:
        raise CorruptRecordError(f"record batch CRC mismatch: stored {header.crc:#010x}, computed {actual:#010x}")
    if header.records_count < 0 or (header.records_count and header.records_count != header.last_offset_delta + 1):
        raise InvalidRecordError(
            f"record batch count {header.records_count} does not match lastOffsetDelta {header.last_offset_delta}"
        )
    return header


def iter_batches(buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) of each whole batch in a run of batches, validating each.

    A trailing partial batch raises InvalidRecordError: on the produce path a request must
    hold only whole batches.
    """
    end = len(buf) if end is None else end
    while pos < end:
        header = check_batch(buf, pos, end)
        yield pos, header
        pos += header.size


def scan_valid_prefix(buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
    """Yield whole, valid batches until the first damaged or partial one; used by recovery."""
    end = len(buf) if end is None else end
    while pos < end:
        try:
            header = check_batch(buf, pos, end)
        except (InvalidRecordError, CorruptRecordError):
            return
        yield pos, header
        pos += header.size


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Stamp a batch with its offset in the log; baseOffset is outside the CRC."""
    _INT64.pack_into(buf, pos + BASE_OFFSET_POS, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Stamp the leader epoch; like baseOffset it is outside the CRC."""
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_POS, epoch)
