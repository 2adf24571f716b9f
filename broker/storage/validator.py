"""Kafka's LogValidator for a produce append: every v2 batch's records are walked once, without
per-record objects, before anything is written.

Per batch (as Kafka's ``LogValidator`` does for a client's batch): the records must fill the
batch exactly, their count agree with the header, their offset deltas run 0..n-1; every
timestamp must lie within ``message.timestamp.difference.max.ms`` of the broker's clock
(CreateTime topics); a producer may not claim LogAppendTime; a compacted topic refuses
records without a key. The batch's ``maxTimestamp`` is then the records' own (Kafka never
trusts the header): only that field and the CRC are rewritten, and only when they differ.
Compressed batches are decompressed for the walk, as Kafka does; their bytes are kept.
"""

from __future__ import annotations

import functools
from typing import NamedTuple, cast

from broker.protocol.errors import (
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
    ProtocolDecodeError,
    RecordListTooLargeError,
)
from broker.protocol.records.layout import BatchHeader, header_from_fields, set_max_timestamp
from broker.protocol.records.unrolled import read_record_head
from broker.protocol.records.walker import checked_batches, records_of
from broker.protocol.types import decode_varint
from broker.storage.config import LogConfig

try:  # the compiled walks (fields_c.pyx), where they are built
    from broker.protocol.records.fields_c import check_produced as _compiled_produced
    from broker.protocol.records.fields_c import walk_deltas as _compiled_walk
except ImportError:  # pragma: no cover - no C compiler at install time
    _compiled_produced = None  # type: ignore[assignment]
    _compiled_walk = None  # type: ignore[assignment]

try:  # numpy (the pipelines/mirror extras) makes the walk a few array operations per batch
    import numpy as np

    from broker.protocol.records.arrays import fields_c, record_begins, record_spans, zigzag_size, zigzag_varints
except ImportError:  # pragma: no cover - a broker host without the extras walks in Python
    np = None  # type: ignore[assignment]

#: below this many records a batch is walked in Python (numpy's per-call cost would dominate)
ARRAY_WALK_MIN_RECORDS = 32
#: layouts of batches up to this many records are cached (at most 32 of them, about 1 MB each at
#: this size); larger batches, rare, have theirs computed each time
CACHED_LAYOUT_MAX_RECORDS = 16384
#: the least bytes of a v2 record after its length: attributes, timestamp and offset deltas,
#: key length, value length, header count
MIN_RECORD_BODY = 6

#: Kafka's default for message.timestamp.difference.max.ms: no bound.
NO_BOUND = (1 << 63) - 1


class TimestampPolicy(NamedTuple):
    """What the topic's config says about the records of an append (see ``policy_of``)."""

    log_append_time: bool
    before_max_ms: int
    after_max_ms: int
    compacted: bool


def policy_of(config: LogConfig) -> TimestampPolicy:
    """The validation rules of a log's config: message.timestamp.type, the timestamp bounds
    (message.timestamp.difference.max.ms, or Kafka's newer before/after keys), cleanup.policy."""
    other = config.other
    diff = int(other.get("message.timestamp.difference.max.ms", NO_BOUND))
    before = int(other.get("message.timestamp.before.max.ms", diff))
    after = int(other.get("message.timestamp.after.max.ms", diff))
    return TimestampPolicy(config.log_append_time, before, after, "compact" in config.cleanup_policy.split(","))


def validate_append(records: bytearray | memoryview, config: LogConfig, policy: TimestampPolicy,
                    now_ms: int) -> tuple[list[tuple[int, BatchHeader]], list[int]]:
    """A leader's append checked before anything of it is written: every batch whole
    (``check_batch``), within max.message.bytes, with records and not a control batch, all of
    them within segment.bytes, then each validated (``validate_batch``). Returns the batches as
    (position, header) and each one's max timestamp; raises Kafka's error for the first fault.

    One small batch, the usual produce, is checked by one compiled call where it is built; what
    that call refuses is checked here, which says what is wrong."""
    size = len(records)
    if _compiled_produced is not None and size <= config.segment_bytes:
        try:
            found = _compiled_produced(records, header_from_fields, config.max_message_bytes, policy.compacted,
                                       policy.log_append_time, now_ms, policy.before_max_ms, policy.after_max_ms)
        except OverflowError:  # a bound beyond 64 bits
            found = None
        if found is not None:
            return [(0, found[0])], [found[1]]
    max_message = config.max_message_bytes
    batches = checked_batches(records)
    for _, header in batches:
        if header.size > max_message:
            raise MessageTooLargeError(f"record batch of {header.size} bytes exceeds max.message.bytes={max_message}")
        if header.records_count == 0:
            raise InvalidRecordError("record batch holds no records")
        if header.is_control:
            raise InvalidRecordError("producers may not send control batches")
    if size > config.segment_bytes:
        raise RecordListTooLargeError(f"{size} bytes of batches exceed segment.bytes={config.segment_bytes}")
    return batches, [validate_batch(records, pos, header, policy, now_ms) for pos, header in batches]


def records_span_deltas(buf: bytes | bytearray, pos: int, end: int, header: BatchHeader,
                        need_keys: bool) -> tuple[int, int]:
    """(least, greatest) timestamp delta of the batch's records in ``buf[pos:end]``, after the
    checks of ``walk_records``: a small batch by the compiled walk where it is built, a large one
    with numpy as arrays; what they refuse, and everything without them, in Python."""
    if np is None or header.records_count < ARRAY_WALK_MIN_RECORDS:
        if _compiled_walk is not None:
            found = _compiled_walk(buf, pos, end, header.records_count, need_keys)
            if found is not None:
                return found
        return walk_records(buf, pos, end, header, need_keys)
    try:
        return _walk_arrays(buf, pos, end, header, need_keys)
    except (IndexError, ProtocolDecodeError):  # a length varint too long: refused, as walk_records does
        raise InvalidRecordError(f"the records of the batch at offset {header.base_offset} are truncated") from None


def _walk_arrays(buf: bytes | bytearray, pos: int, end: int, header: BatchHeader, need_keys: bool) -> tuple[int, int]:
    """``walk_records`` as array operations, after the compiled walk (where it is built) has
    refused them. Records of one size but for their offset delta's width (common: one schema,
    one producer) are checked by one gather of their framing bytes (``_uniform_deltas``);
    others are found one length varint at a time in Python."""
    n = header.records_count
    if fields_c is not None:
        found = _compiled_deltas(buf, pos, end, header, need_keys)
        if found is not None:
            return found
    u8 = np.frombuffer(buf, np.uint8)
    first_length, _ = decode_varint(buf, pos, end)
    layout = None
    if first_length >= MIN_RECORD_BODY:
        layout = (_uniform_layout if n <= CACHED_LAYOUT_MAX_RECORDS else _uniform_layout.__wrapped__)(n, first_length)
    if layout is not None and layout.total == end - pos:
        found = _uniform_deltas(u8, pos, layout, need_keys)
        if found is not None:
            return found
        if _matches(u8, pos + layout.begins, layout.length_bytes):
            return _check_records(u8, pos + layout.bodies, header, need_keys)
    return _check_records(u8, _record_bodies(u8, buf, pos, end, header), header, need_keys)


def _compiled_deltas(buf: bytes | bytearray, pos: int, end: int, header: BatchHeader,
                     need_keys: bool) -> tuple[int, int] | None:
    """The (least, greatest) timestamp delta from the compiled record walk (fields_c), which
    parses every record's framing in one C pass; None when it refuses the records or their
    offset deltas are not 0..n-1 (the array walk then reads them again and says what is wrong)."""
    n = header.records_count
    fields = np.empty((len(fields_c.ROWS), n), np.int64)
    if not fields_c.read_fields(buf, np.array([pos], np.int64), np.array([end], np.int64), np.array([n], np.int64),
                                fields):
        return None
    ts_delta, offset_delta, _, key_len, *_ = fields  # in fields_c.ROWS order
    if not np.array_equal(offset_delta, np.arange(n)):
        return None
    if need_keys and (key_len == -1).any():
        raise InvalidRecordError("Compacted topic cannot accept message without key")
    return int(ts_delta.min()), int(ts_delta.max())


def _uniform_deltas(u8: np.ndarray, pos: int, layout: _UniformLayout, need_keys: bool) -> tuple[int, int] | None:
    """The (least, greatest) timestamp delta of records laid out as ``layout`` says, or None
    when they are not: one gather reads every record's length and offset delta bytes (which
    must be the expected ones) and its timestamp delta byte (each must be a one-byte varint,
    which puts the offset deltas where they were read)."""
    probe = u8[pos + layout.probe_at]
    stamps = probe[len(layout.framing):]
    greatest = int(stamps.max())
    if greatest >= 0x80 or probe[:len(layout.framing)].tobytes() != layout.framing:
        return None
    if need_keys and (u8[pos + layout.key_at] == 1).any():  # key length -1
        raise InvalidRecordError("Compacted topic cannot accept message without key")
    if int(np.bitwise_or.reduce(stamps)) & 1:  # a negative delta: zigzag-decode them all
        raw = stamps.astype(np.int64)
        deltas = (raw >> 1) ^ -(raw & 1)
        return int(deltas.min()), int(deltas.max())
    return int(stamps.min()) >> 1, greatest >> 1


def _check_records(u8: np.ndarray, bodies: np.ndarray, header: BatchHeader, need_keys: bool) -> tuple[int, int]:
    """(least, greatest) timestamp delta of the records whose bodies start at ``bodies``, after
    checking their offset deltas run 0..n-1 and (``need_keys``) that each has a key."""
    n = header.records_count
    b = u8[bodies + 1]
    if int(b.max()) < 0x80:  # every timestamp delta fits one byte
        raw = b.astype(np.int64)
        deltas, at = (raw >> 1) ^ -(raw & 1), bodies + 2
    else:
        deltas, size = zigzag_varints(u8, bodies + 1)
        at = bodies + 1 + size
    offsets = _offset_layout(n)
    if not _matches(u8, at, offsets.delta_bytes):
        found, _ = zigzag_varints(u8, at, 5)
        bad = np.nonzero(found != np.arange(n))[0]
        if len(bad):
            raise InvalidRecordError(f"record {int(bad[0])} of the batch at offset {header.base_offset} has offset "
                                     f"delta {int(found[bad[0]])}")
    if need_keys and (u8[at + offsets.widths] == 1).any():  # key length -1
        raise InvalidRecordError("Compacted topic cannot accept message without key")
    return int(deltas.min()), int(deltas.max())


def _record_bodies(u8: np.ndarray, buf: bytes | bytearray, pos: int, end: int, header: BatchHeader) -> np.ndarray:
    """Where each record's body (after its length) starts, found one length at a time; the
    records must fill the batch exactly."""
    n = header.records_count
    begins = np.array(record_begins(buf, pos, end, n), np.int64)
    try:
        bodies, ends = record_spans(u8, begins, np.array([end], np.int64), np.array([n], np.int64))
    except InvalidRecordError:
        raise InvalidRecordError(f"the records of the batch at offset {header.base_offset} do not fill it "
                                 f"as its {n} records") from None
    if int((ends - bodies).min()) < MIN_RECORD_BODY:
        raise InvalidRecordError(f"a record of the batch at offset {header.base_offset} is too short")
    return bodies


class _Encoded(NamedTuple):
    """Non-negative values as zigzag varints, byte by byte: the ``k``-th byte of value
    ``which`` is ``data[i]``, for each i."""

    which: np.ndarray
    k: np.ndarray
    data: bytes


def _encoded(values: np.ndarray) -> _Encoded:
    raw = values * 2
    widths = zigzag_size(values)
    which, k, data = [], [], []
    for byte in range(int(widths.max()) if len(widths) else 0):
        has = np.nonzero(widths > byte)[0]
        part = (raw[has] >> (7 * byte)) & 0x7F
        which.append(has)
        k.append(np.full(len(has), byte, np.int64))
        data.append(np.where(widths[has] > byte + 1, part | 0x80, part).astype(np.uint8))
    if not which:
        return _Encoded(np.zeros(0, np.int64), np.zeros(0, np.int64), b"")
    return _Encoded(np.concatenate(which), np.concatenate(k), np.concatenate(data).tobytes())


def _places(at: np.ndarray, expected: _Encoded) -> np.ndarray:
    """Where each byte of ``expected`` sits, for varints starting at ``at``."""
    return at[expected.which] + expected.k


def _matches(u8: np.ndarray, at: np.ndarray, expected: _Encoded) -> bool:
    """Whether the varints at ``at`` are exactly ``expected``."""
    return u8[_places(at, expected)].tobytes() == expected.data


class _OffsetLayout(NamedTuple):
    widths: np.ndarray  # bytes of each offset delta 0..n-1
    delta_bytes: _Encoded


class _UniformLayout(NamedTuple):
    begins: np.ndarray  # relative to the first record
    bodies: np.ndarray
    length_bytes: _Encoded
    total: int
    #: where ``_uniform_deltas`` reads: the length and offset delta bytes (when every
    #: timestamp delta takes one byte), then each timestamp delta's byte
    probe_at: np.ndarray
    framing: bytes  # the bytes expected at the first ``len(framing)`` places of ``probe_at``
    key_at: np.ndarray  # each key length's byte


def _offset_layout(n: int) -> _OffsetLayout:
    return _cached_offset_layout(n) if n <= CACHED_LAYOUT_MAX_RECORDS else _cached_offset_layout.__wrapped__(n)


@functools.lru_cache(maxsize=32)
def _cached_offset_layout(n: int) -> _OffsetLayout:
    deltas = np.arange(n, dtype=np.int64)
    return _OffsetLayout(zigzag_size(deltas), _encoded(deltas))


@functools.lru_cache(maxsize=32)
def _uniform_layout(n: int, first_length: int) -> _UniformLayout:
    """Where ``n`` records sit if each is the first one's size but for its offset delta's width."""
    lengths = first_length - 1 + _offset_layout(n).widths
    length_bytes = _encoded(lengths)
    sizes = lengths + zigzag_size(lengths)
    begins = np.cumsum(sizes) - sizes
    bodies = begins + sizes - lengths
    offsets = _offset_layout(n)
    deltas_at = bodies + 2
    probe_at = np.concatenate([_places(begins, length_bytes), _places(deltas_at, offsets.delta_bytes), bodies + 1])
    return _UniformLayout(begins, bodies, length_bytes, int(sizes.sum()), probe_at,
                          length_bytes.data + offsets.delta_bytes.data, deltas_at + offsets.widths)


def walk_records(buf: bytes | bytearray, pos: int, end: int, header: BatchHeader,
                 need_keys: bool) -> tuple[int, int]:
    """(least, greatest) timestamp delta of the batch's records in ``buf[pos:end]``.

    Checks that exactly ``records_count`` records fill the span, their offset deltas run
    0..n-1 and (``need_keys``) that each has a key; raises InvalidRecordError otherwise. Each
    record's framing is read by ``unrolled.read_record_head``."""
    lo, hi = NO_BOUND, -NO_BOUND
    try:
        for i in range(header.records_count):
            _, rec_end, delta, _, offset_delta, key_at = read_record_head(buf, pos, end, header.base_offset)
            if delta > hi:
                hi = delta
            if delta < lo:
                lo = delta
            if offset_delta != i:
                raise InvalidRecordError(f"record {i} of the batch at offset {header.base_offset} has offset delta "
                                         f"{offset_delta}")
            if need_keys and buf[key_at] == 1:  # key length -1
                raise InvalidRecordError("Compacted topic cannot accept message without key")
            pos = rec_end
    except (IndexError, ProtocolDecodeError):
        raise InvalidRecordError(f"the records of the batch at offset {header.base_offset} are truncated") from None
    if pos != end:
        raise InvalidRecordError(f"the batch at offset {header.base_offset} holds more than its "
                                 f"{header.records_count} records")
    return lo, hi


def validate_batch(buf: bytearray | memoryview, pos: int, header: BatchHeader, policy: TimestampPolicy, now_ms: int) -> int:
    """Check one producer's v2 batch at ``buf[pos]`` (whose header and CRC are checked) and
    set its maxTimestamp from its records; returns that max timestamp.

    Raises InvalidRecordError or InvalidTimestampError; nothing is changed then."""
    if header.log_append:
        raise InvalidTimestampError("Producer should not set the timestamp type to LogAppendTime")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecordError(f"batch at offset {header.base_offset} has a producer id and no sequence number")
    records, start, end = records_of(cast(bytearray, buf), pos, header)  # a memoryview reads alike
    lo, hi = records_span_deltas(records, start, end, header, policy.compacted)
    max_ts = header.base_timestamp + hi
    if not policy.log_append_time and header.base_timestamp >= 0:
        if now_ms - (header.base_timestamp + lo) > policy.before_max_ms or max_ts - now_ms > policy.after_max_ms:
            raise InvalidTimestampError(
                f"timestamps {header.base_timestamp + lo}..{max_ts} of the batch are out of range: more than "
                f"{policy.before_max_ms} ms before or {policy.after_max_ms} ms after the broker's time {now_ms}")
    if max_ts != header.max_timestamp and not policy.log_append_time:
        set_max_timestamp(buf, pos, header.size, max_ts)
    return max_ts
