"""The compiled record walks (broker/protocol/records/fields_c.pyx) against their references: the
loader's walk against numpy, the produce append's header check and record walk against
``layout.check_batch`` and ``validator.walk_records``, and its one-call check of a small batch
against ``validator.validate_append``.

``arrays.read_columns`` and the loader's ``_binary`` take the compiled path when it is built
(``make setup`` builds it here: this machine has a C compiler) and the reference otherwise. For
any batches, and for the same batches with bytes overwritten or cut, both give the same columns
or the same error.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.protocol.errors import CorruptRecordError, InvalidRecordError, KafkaError
from broker.protocol.records import encode_batch, iter_batches, layout, records_of
from broker.protocol.records.arrays import RecordColumns, fields_c, read_columns
from broker.protocol.records.codec import encode_record
from broker.protocol.records.layout import build_batch
from broker.protocol.records.walker import Tail
from broker.protocol.types import encode_varint
from broker.storage import validator
from broker.storage.config import LogConfig
from broker.storage.validator import NO_BOUND, TimestampPolicy, records_span_deltas, walk_records
from pipelines.record_columns import _binary

T0 = 1_700_000_000_000

blobs = st.one_of(st.none(), st.binary(max_size=20), st.binary(min_size=120, max_size=200))
headers = st.lists(st.tuples(st.text(max_size=4), st.one_of(st.none(), st.binary(max_size=8))), max_size=2)
record = st.tuples(blobs, blobs, headers, st.integers(-(1 << 40), 1 << 40))
batches = st.lists(st.lists(record, min_size=1, max_size=12), min_size=1, max_size=4)


def _buffer(parts: list[list[tuple]], log_append: bool) -> tuple[bytes, list]:
    """Uncompressed batches back to back, and each one's (start, end, header) span."""
    raw, offset = b"", 0
    for items in parts:
        raw += encode_batch([(k, v, h, T0 + ts) for k, v, h, ts in items], base_offset=offset,
                            timestamp_type=int(log_append))
        offset += len(items) + 2
    spans = []
    for pos, header in iter_batches(raw, Tail.STOP):
        buf, start, end = records_of(raw, pos, header)
        assert buf is raw
        spans.append((start, end, header))
    return raw, spans


def _outcome(buf: bytes, spans: list, min_offset: int, compiled: bool) -> tuple:
    try:
        columns = read_columns(buf, spans, min_offset, compiled=compiled)
    except Exception as exc:  # the outcome compared is the error itself
        return ("error", type(exc).__name__, str(exc))
    if columns is None:
        return ("none",)
    return ("columns", [a.tolist() for a in columns])


def test_the_compiled_walk_is_built():
    assert fields_c is not None, "make setup builds broker/protocol/records/fields_c.pyx (needs gcc and Cython)"
    # arrays._assemble takes the rows in this order; the last seven are RecordColumns' own
    assert fields_c.ROWS == ("ts_delta", "offset_delta") + RecordColumns._fields[2:]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=batches, log_append=st.booleans(), skip=st.integers(0, 30))
def test_same_columns_as_the_reference(parts, log_append, skip):
    buf, spans = _buffer(parts, log_append)
    compiled = _outcome(buf, spans, skip, True)
    assert compiled[0] in ("columns", "none")
    assert compiled == _outcome(buf, spans, skip, False)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=batches, data=st.data())
def test_same_outcome_on_damaged_records(parts, data):
    """Bytes overwritten inside the records, or a span cut short: the same columns or the same error."""
    buf, spans = _buffer(parts, False)
    damaged = bytearray(buf)
    first, last = spans[0][0], spans[-1][1]
    for _ in range(data.draw(st.integers(1, 3))):
        damaged[data.draw(st.integers(first, last - 1))] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(spans) - 1))
        start, end, header = spans[i]
        spans = spans[:i] + [(start, data.draw(st.integers(start, end)), header)] + spans[i + 1:]
    assert _outcome(bytes(damaged), spans, 0, True) == _outcome(bytes(damaged), spans, 0, False)


@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.one_of(st.none(), st.binary(max_size=40)), min_size=1, max_size=30))
def test_gather_builds_the_same_binary_array(values):
    buf = b"".join(b"\x00" + (v or b"") for v in values)
    starts, lengths, pos = [], [], 0
    for v in values:
        starts.append(pos + 1)
        lengths.append(-1 if v is None else len(v))
        pos += 1 + len(v or b"")
    starts_a, lengths_a = np.array(starts, np.int64), np.array(lengths, np.int64)
    u8 = np.frombuffer(buf, np.uint8)
    compiled = _binary(buf, u8, starts_a, lengths_a)
    assert compiled.equals(_binary(buf, u8, starts_a, lengths_a, compiled=False))
    assert compiled.type == pa.binary() and compiled.to_pylist() == values


def test_gather_refuses_a_value_outside_the_buffer():
    buf = b"abcdef"
    offsets, data = np.empty(2, np.int32), np.empty(4, np.uint8)
    assert not fields_c.gather(buf, np.array([4], np.int64), np.array([4], np.int64), offsets, data)
    assert fields_c.gather(buf, np.array([2], np.int64), np.array([4], np.int64), offsets, data)
    assert bytes(data) == b"cdef" and offsets.tolist() == [0, 4]


def _framed(body: bytes) -> bytes:
    return encode_varint(len(body)) + body


GOOD = encode_record(0, 5, b"k", b"value", [])
CRAFTED = {
    "fields end before the record does": _framed(GOOD[1:] + b"\x00"),
    "a value past its record": _framed(b"\x00\x0a\x00\x02k\x40vv\x00"),
    "a key length below -1": _framed(b"\x00\x0a\x00\x03vv\x00"),
    "a length of zero": b"\x00",
    "a negative length": b"\x03" + GOOD[1:],
    "a six-byte length varint": b"\xff\xff\xff\xff\xff\x01" + GOOD[1:],
    "headers that do not parse": _framed(GOOD[1:-1] + b"\x02\x09"),
}


@pytest.mark.parametrize("damage", list(CRAFTED), ids=list(CRAFTED))
def test_same_error_on_crafted_records(damage):
    """Each check of the walk, pinned: a record whose fields disagree with its length is an error
    from both paths, the same one."""
    payload = GOOD + CRAFTED[damage] + GOOD
    raw = build_batch(payload, count=3, base_ts=T0, max_ts=T0)
    [(pos, header)] = list(iter_batches(raw, Tail.STOP))
    buf, start, end = records_of(raw, pos, header)
    reference = _outcome(buf, [(start, end, header)], 0, False)
    assert _outcome(buf, [(start, end, header)], 0, True) == reference
    if damage != "headers that do not parse":  # header contents are read later, by RecordColumns.headers
        assert reference[0] == "error"


# -- the produce append's checks: check_header against layout.check_batch, walk_deltas against
# validator.walk_records


def _checked(buf: bytes | bytearray, pos: int, end: int) -> tuple:
    """layout.check_batch's answer without the compiled check: the header, or the error."""
    try:
        with pytest.MonkeyPatch.context() as m:
            m.setattr(layout, "_compiled_check", None)
            return ("header", layout.check_batch(buf, pos, end))
    except (InvalidRecordError, CorruptRecordError) as exc:
        return ("error", type(exc).__name__, str(exc))


def _walked(buf: bytes, pos: int, end: int, header: layout.BatchHeader, need_keys: bool) -> tuple:
    try:
        return ("deltas", walk_records(buf, pos, end, header, need_keys))
    except InvalidRecordError as exc:
        return ("error", str(exc))


def test_the_crc_instruction_is_used_here():
    assert fields_c.CRC32C_BUILTIN, "an x86-64 CPU with SSE 4.2 computes CRC-32C in an instruction"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=batches, data=st.data())
def test_check_header_refuses_or_agrees_with_check_batch(parts, data):
    raw, spans = _buffer(parts, False)
    pos = data.draw(st.sampled_from([0] + [s - layout.HEADER_SIZE for s, _, _ in spans]), label="batch")
    whole = bytearray(raw)
    assert fields_c.check_header(whole, pos, len(whole), layout.BatchHeader._make) == _checked(whole, pos, len(whole))[1]
    # damaged: bytes overwritten (in the header or the records), or the buffer cut
    damaged = bytearray(raw[: data.draw(st.integers(pos, len(raw)), label="cut")])
    for at, value in data.draw(st.lists(st.tuples(st.integers(pos, pos + 70), st.integers(0, 255)), max_size=3),
                               label="overwrites"):
        if at < len(damaged):
            damaged[at] = value
    got, expected = fields_c.check_header(damaged, pos, len(damaged), layout.BatchHeader._make), _checked(damaged, pos, len(damaged))
    assert got is None or ("header", got) == expected
    if expected[0] == "header":
        assert got == expected[1]  # whatever check_batch accepts, the compiled check accepts too
        assert layout.check_batch(damaged, pos, len(damaged)) == got


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=batches, need_keys=st.booleans(), data=st.data())
def test_walk_deltas_refuses_or_agrees_with_walk_records(parts, need_keys, data):
    raw, spans = _buffer(parts, False)
    start, end, header = data.draw(st.sampled_from(spans), label="batch")
    expected = _walked(raw, start, end, header, need_keys)
    got = fields_c.walk_deltas(raw, start, end, header.records_count, need_keys)
    if expected[0] == "deltas":
        assert got == expected[1]
    else:
        assert got is None
    damaged = bytearray(raw)
    for at, value in data.draw(st.lists(st.tuples(st.integers(start, end - 1), st.integers(0, 255)), min_size=1,
                                        max_size=3), label="overwrites"):
        damaged[at] = value
    cut = data.draw(st.integers(start, end), label="cut")
    for buf, stop in ((bytes(damaged), end), (raw, cut)):
        got, expected = fields_c.walk_deltas(buf, start, stop, header.records_count, need_keys), _walked(buf, start, stop, header, need_keys)
        assert got is None or ("deltas", got) == expected


@pytest.mark.parametrize("damage", list(CRAFTED), ids=list(CRAFTED))
def test_walk_deltas_refuses_crafted_records(damage):
    payload = GOOD + CRAFTED[damage] + GOOD
    raw = build_batch(payload, count=3, base_ts=T0, max_ts=T0)
    start, end = layout.HEADER_SIZE, len(raw)
    header = layout.read_header(raw)
    expected = _walked(raw, start, end, header, False)
    got = fields_c.walk_deltas(raw, start, end, 3, False)
    assert got is None or ("deltas", got) == expected
    keyless = build_batch(encode_record(0, 0, None, b"v", []), count=1, base_ts=T0, max_ts=T0)
    assert fields_c.walk_deltas(keyless, start, len(keyless), 1, True) is None
    assert fields_c.walk_deltas(keyless, start, len(keyless), 1, False) == (0, 0)
    assert fields_c.walk_deltas(keyless, start, len(keyless), 2, False) is None  # fewer records than the count


@pytest.mark.parametrize("length", [0x7FFFFFFF, 0x7FFFFFF8, 0x7FFFFFF4, 0x7FFFFFF3, -1, -0x80000000])
def test_a_length_field_near_two_to_the_31_is_refused_not_wrapped(length):
    """length + 12 is taken in 64 bits: in 32 it wrapped negative past the bounds checks and the
    CRC then read far beyond the buffer (a segfault)."""
    raw = bytearray(encode_batch([(b"k", b"v", [], T0)]))
    raw[layout.LENGTH_POS:layout.LENGTH_POS + 4] = length.to_bytes(4, "big", signed=True)
    assert fields_c.check_header(raw, 0, len(raw), layout.BatchHeader._make) is None
    assert fields_c.check_produced(raw, layout.BatchHeader._make, 1 << 20, False, False, T0, NO_BOUND, NO_BOUND) is None
    with pytest.raises(InvalidRecordError):
        layout.check_batch(raw)


@settings(max_examples=300, deadline=None)
@given(length=st.integers(-(1 << 31), (1 << 31) - 1), count=st.integers(-(1 << 31), (1 << 31) - 1),
       delta=st.integers(-(1 << 31), (1 << 31) - 1))
def test_any_int32_in_the_sized_fields_is_refused_or_agreed(length, count, delta):
    """The fields the compiled checks compute sizes from (length, record count, last offset
    delta) at any 32-bit value, the CRC made right: refused, or the reference's own answer."""
    raw = bytearray(encode_batch([(b"k", b"v", [], T0)] * 2))
    raw[layout.LENGTH_POS:layout.LENGTH_POS + 4] = length.to_bytes(4, "big", signed=True)
    raw[layout.RECORDS_COUNT_POS:layout.RECORDS_COUNT_POS + 4] = count.to_bytes(4, "big", signed=True)
    raw[layout.LAST_OFFSET_DELTA_POS:layout.LAST_OFFSET_DELTA_POS + 4] = delta.to_bytes(4, "big", signed=True)
    crc = layout.compute_crc(raw, 0, min(len(raw), max(length + layout.LOG_OVERHEAD, layout.HEADER_SIZE)))
    raw[layout.CRC_POS:layout.CRC_POS + 4] = crc.to_bytes(4, "big")
    got = fields_c.check_header(raw, 0, len(raw), layout.BatchHeader._make)
    assert got is None or ("header", got) == _checked(raw, 0, len(raw))
    produced = fields_c.check_produced(raw, layout.BatchHeader._make, 1 << 20, False, False, T0, NO_BOUND, NO_BOUND)
    assert produced is None or produced[0] == _checked(raw, 0, len(raw))[1]


def test_check_header_leaves_large_batches_to_check_batch():
    """Its CRC loop is behind the crc32c package's above about 10 KB: larger batches are checked in Python."""
    large = bytearray(encode_batch([(None, bytes(range(256)) * 40, [], T0)]))
    assert len(large) > 8192
    assert fields_c.check_header(large, 0, len(large), layout.BatchHeader._make) is None
    assert layout.check_batch(large).records_count == 1


def test_a_buffer_of_another_item_type_is_checked_in_python():
    batch = encode_batch([(b"k", b"v", [], T0)])
    signed = memoryview(batch).cast("b")  # items of another type than unsigned bytes
    assert layout.check_batch(signed) == layout.check_batch(batch)
    header = layout.read_header(batch)
    assert records_span_deltas(signed, layout.HEADER_SIZE, len(batch), header, True) == (0, 0)


# -- the produce append's one call: check_produced against validator.validate_append


def _validated(buf: bytearray, config: LogConfig, policy: TimestampPolicy, now: int, compiled: bool) -> tuple:
    """validate_append's answer (batches and max timestamps, or the error) and the buffer after it."""
    copy = bytearray(buf)
    with pytest.MonkeyPatch.context() as m:
        if not compiled:
            m.setattr(validator, "_compiled_produced", None)
        try:
            batches, max_timestamps = validator.validate_append(copy, config, policy, now)
        except KafkaError as exc:
            return ("error", type(exc).__name__, str(exc)), bytes(copy)
    return ("ok", batches, max_timestamps), bytes(copy)


produced = st.fixed_dictionaries({
    "records": st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=6)), st.binary(max_size=30),
                                  st.integers(-3000, 3000)), min_size=1, max_size=8),
    "count_off": st.sampled_from([0, 0, 0, -1, 1]),
    "attributes": st.sampled_from([0, 0, 0, 0x10, 0x08, 0x20, 0x01]),
    "base_ts": st.sampled_from([T0, T0, T0 - 5000, -1, 1 << 62]),
    "max_ts_off": st.sampled_from([0, 0, 0, 1, -7]),
    "producer": st.sampled_from([(-1, -1), (7, 0), (7, -1)]),
    "max_message": st.sampled_from([1 << 20, 1 << 20, 120]),
    "segment_bytes": st.sampled_from([1 << 30, 1 << 30, 150]),
    "log_append_time": st.booleans(),
    "compacted": st.booleans(),
    "bound": st.sampled_from([NO_BOUND, NO_BOUND, 2000, 1 << 70]),
    "now_off": st.integers(-4000, 4000),
    "extra_batch": st.sampled_from([False, False, False, True]),
})


def _produced_batch(p: dict) -> bytearray:
    payload = b"".join(encode_record(i, ts, key, value, []) for i, (key, value, ts) in enumerate(p["records"]))
    deltas = [ts for _, _, ts in p["records"]]
    base_ts = p["base_ts"]
    pid, seq = p["producer"]
    raw = build_batch(payload, count=len(deltas) + p["count_off"], base_ts=base_ts,
                      max_ts=base_ts + max(deltas) + p["max_ts_off"], attributes=p["attributes"], producer_id=pid,
                      producer_epoch=0 if pid >= 0 else -1, base_sequence=seq, last_offset_delta=len(deltas) - 1)
    return bytearray(raw + (encode_batch([(b"k", b"v", [], T0)]) if p["extra_batch"] else b""))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=produced, overwrites=st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), max_size=2))
def test_validate_append_answers_alike_with_and_without_the_compiled_check(p, overwrites):
    """Whatever the batch and the topic's settings, the compiled check changes no answer and no
    byte; it refuses only what the reference would refuse or change, and accepts the rest."""
    buf = _produced_batch(p)
    for at, value in overwrites:
        if at < len(buf):
            buf[at] = value
    config = LogConfig(max_message_bytes=p["max_message"], segment_bytes=p["segment_bytes"],
                       message_timestamp_type="LogAppendTime" if p["log_append_time"] else "CreateTime",
                       cleanup_policy="compact" if p["compacted"] else "delete")
    policy = TimestampPolicy(p["log_append_time"], p["bound"], p["bound"], p["compacted"])
    now = T0 + p["now_off"]
    expected = _validated(buf, config, policy, now, compiled=False)
    assert _validated(buf, config, policy, now, compiled=True) == expected
    if len(buf) > p["segment_bytes"]:
        return  # validate_append does not ask the compiled check then
    got = fields_c.check_produced(buf, layout.BatchHeader._make, p["max_message"], p["compacted"],
                                  p["log_append_time"], now, min(p["bound"], NO_BOUND), min(p["bound"], NO_BOUND))
    outcome, after = expected
    if got is not None:
        assert outcome == ("ok", [(0, got[0])], [got[1]]) and after == bytes(buf)
    else:  # refused: only what the reference refuses or changes (none of these batches is compressed)
        assert outcome[0] == "error" or after != bytes(buf) or len(outcome[1]) > 1, f"refused: {outcome}"


def test_check_produced_accepts_a_producers_batch():
    """The usual produce: one batch of a few records, CreateTime, its maxTimestamp right."""
    raw = bytearray(encode_batch([(b"k", b"value", [], T0 + i) for i in range(3)], producer_id=4, producer_epoch=0,
                                 base_sequence=9))
    found = fields_c.check_produced(raw, layout.BatchHeader._make, 1 << 20, True, False, T0, NO_BOUND,
                                    NO_BOUND)
    assert found == (layout.read_header(raw), T0 + 2)
    assert fields_c.check_produced(raw, layout.BatchHeader._make, len(raw) - 1, True, False, T0, NO_BOUND,
                                   NO_BOUND) is None  # above max.message.bytes
    assert fields_c.check_produced(raw + b"\0", layout.BatchHeader._make, 1 << 20, True, False, T0, NO_BOUND,
                                   NO_BOUND) is None  # the batch does not fill the buffer
    assert fields_c.check_produced(memoryview(raw), layout.BatchHeader._make, 1 << 20, True, False, T0, NO_BOUND,
                                   NO_BOUND) is None  # not a bytearray: the validator checks it
    keyless = bytearray(encode_batch([(None, b"value", [], T0)]))
    assert fields_c.check_produced(keyless, layout.BatchHeader._make, 1 << 20, True, False, T0,
                                   NO_BOUND, NO_BOUND) is None  # compacted: a key is needed
