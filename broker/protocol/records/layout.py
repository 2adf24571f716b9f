"""The fixed 61-byte header of a v2 record batch, declared once: field positions, struct
formats, attribute bits; read it, check it, write it, restamp its offset.

Everyone who reads or writes a batch header uses this module: the broker's produce path and
storage (which never parse the records inside), the producer's accumulator, the consumers,
the mirror and the loader. Field positions follow Kafka's DefaultRecordBatch layout.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import crc32c

from broker.protocol.errors import CorruptRecordError, InvalidRecordError
from broker.protocol.types import INT16, INT32, INT64, UINT32

try:  # the compiled checks (fields_c.pyx), where they are built
    from broker.protocol.records.fields_c import check_header as _compiled_check
except ImportError:  # pragma: no cover - no C compiler at install time
    _compiled_check = None  # type: ignore[assignment]

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

HEADER = struct.Struct(">qiibIhiqqqhii")  # every field, baseOffset to recordsCount
PREFIX = struct.Struct(">qi")  # baseOffset, batchLength: all a legacy message shares with v2
HEAD = struct.Struct(">qiibI")  # baseOffset, batchLength, partitionLeaderEpoch, magic, crc
TAIL = struct.Struct(">hiqqqhii")  # what the CRC covers: attributes .. recordsCount


class BatchHeader(NamedTuple):
    """The decoded header of one v2 record batch.

    The batch walker also gives one for a legacy v0/v1 message (``magic`` < 2): there only
    ``base_offset``, ``batch_length`` and ``magic`` are read, and ``next_offset`` is
    ``base_offset + 1`` (an outer legacy message carries the last offset it holds)."""

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
    def log_append(self) -> bool:
        """Timestamps are the broker's (LogAppendTime): every record's is ``max_timestamp``."""
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def timestamp(self) -> int:
        """The base timestamp; with log-append time, the time of every record."""
        return self.max_timestamp if self.attributes & TIMESTAMP_TYPE_MASK else self.base_timestamp

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

    def readable(self, min_offset: int) -> bool:
        """A v2 data batch (not a control batch) with records at or past ``min_offset``."""
        return (self.magic == CURRENT_MAGIC and not self.attributes & CONTROL_MASK and self.records_count > 0
                and self.base_offset + self.last_offset_delta >= min_offset)


#: a BatchHeader from its thirteen fields in order: what the compiled checks build headers with
header_from_fields = BatchHeader._make


def legacy_header(base_offset: int, batch_length: int, magic: int) -> BatchHeader:
    """The header the batch walker gives for an outer legacy v0/v1 message (see BatchHeader)."""
    return BatchHeader(base_offset, batch_length, -1, magic, 0, 0, 0, -1, -1, NO_PRODUCER_ID, -1, NO_SEQUENCE, 0)


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Decode the header of the batch starting at ``pos``; the caller checks it is whole."""
    return BatchHeader._make(HEADER.unpack_from(buf, pos))


def read_prefix(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """(base_offset, batch_length) of the batch at ``pos``; needs only 12 bytes."""
    return PREFIX.unpack_from(buf, pos)


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    """CRC-32C of a batch, over attributes to the end, as stored in its crc field."""
    return crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_POS : pos + size])


def check_batch(buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> BatchHeader:
    """Validate the batch at ``pos`` (length, magic, CRC, record count); return its header.

    Raises InvalidRecordError for a malformed batch and CorruptRecordError for a CRC mismatch.
    The compiled check answers first where it is built; what it refuses is checked here.
    """
    end = len(buf) if end is None else end
    if _compiled_check is not None:
        header = _compiled_check(buf, pos, end, header_from_fields)
        if header is not None:
            return header
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
    # A compacted batch keeps its offset range with fewer records (gaps), so count <= range.
    if header.records_count < 0 or header.records_count > header.last_offset_delta + 1:
        raise InvalidRecordError(
            f"record batch count {header.records_count} exceeds the {header.last_offset_delta + 1} offsets of lastOffsetDelta"
        )
    return header


def attributes_of(compression: int = 0, log_append_time: bool = False, transactional: bool = False,
                  control: bool = False) -> int:
    """The attributes field of a v2 batch."""
    return (compression | (TIMESTAMP_TYPE_MASK if log_append_time else 0) | (TRANSACTIONAL_MASK if transactional else 0)
            | (CONTROL_MASK if control else 0))


def build_batch(payload: bytes | bytearray, *, count: int, base_ts: int, max_ts: int, attributes: int = 0,
                base_offset: int = 0, producer_id: int = NO_PRODUCER_ID, producer_epoch: int = -1,
                base_sequence: int = NO_SEQUENCE, partition_leader_epoch: int = -1,
                last_offset_delta: int | None = None) -> bytes:
    """A whole v2 batch: the header (offset deltas 0..count-1, CRC computed) and ``payload``,
    the records as they go on the wire (compressed already when ``attributes`` say so).
    ``last_offset_delta`` keeps a compacted batch's original offset range (default count - 1)."""
    delta = count - 1 if last_offset_delta is None else last_offset_delta
    tail = TAIL.pack(attributes, delta, base_ts, max_ts, producer_id, producer_epoch, base_sequence, count)
    crc = crc32c.crc32c(payload, crc32c.crc32c(tail))
    head = HEAD.pack(base_offset, MIN_BATCH_LENGTH + len(payload), partition_leader_epoch, CURRENT_MAGIC, crc)
    return b"".join((head, tail, payload))


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Stamp a batch with its offset in the log; baseOffset is outside the CRC."""
    INT64.pack_into(buf, pos + BASE_OFFSET_POS, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Stamp the leader epoch; like baseOffset it is outside the CRC."""
    INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_POS, epoch)


def set_max_timestamp(buf: bytearray | memoryview, pos: int, size: int, max_timestamp: int,
                      log_append_time: bool = False) -> None:
    """Set a batch's maxTimestamp (and with ``log_append_time`` its LogAppendTime bit) and
    re-seal its CRC: the only header fields Kafka's validator rewrites."""
    if log_append_time:
        INT16.pack_into(buf, pos + ATTRIBUTES_POS, INT16.unpack_from(buf, pos + ATTRIBUTES_POS)[0] | TIMESTAMP_TYPE_MASK)
    INT64.pack_into(buf, pos + MAX_TIMESTAMP_POS, max_timestamp)
    UINT32.pack_into(buf, pos + CRC_POS, compute_crc(buf, pos, size))
