"""Kafka's LogValidator on the produce append (broker.storage.validator): counts, offset
deltas, timestamps, keys on compacted topics, the batch's max timestamp set from its records.
The three record walks (Python, numpy arrays, the compiled fields_c pass the array walk tries
first) find the same deltas and refuse the same records."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol.errors import InvalidRecordError, InvalidTimestampError
from broker.protocol.records import encode_batch
from broker.protocol.records import layout as L
from broker.protocol.records.codec import encode_record
from broker.storage import LogConfig
from broker.storage import validator as V
from tests.storage.batches import build_batch
from tests.storage.helpers import FakeClock, open_log, read_from

NOW = 1_000_000


def _without_the_compiled_walk(walk: Callable[..., tuple[int, int]]) -> Callable[..., tuple[int, int]]:
    """``walk`` as on a machine without a C compiler: no fields_c in front of the array walk."""
    def run(*args: Any) -> tuple[int, int]:
        saved, V.fields_c = V.fields_c, None
        try:
            return walk(*args)
        finally:
            V.fields_c = saved

    return run


_arrays_only = _without_the_compiled_walk(V._walk_arrays)
_arrays_only_span_deltas = _without_the_compiled_walk(V.records_span_deltas)

WALKS = (V.walk_records, V._walk_arrays, _arrays_only)


def _outcome(walk, batch: bytes | bytearray, header: L.BatchHeader, need_keys: bool) -> tuple[int, int] | str:
    try:
        return walk(batch, L.HEADER_SIZE, len(batch), header, need_keys)
    except InvalidRecordError as exc:
        return str(exc)


def _with_max_ts(batch: bytearray, max_ts: int) -> bytearray:
    """The batch as a client that writes ``max_ts`` into the header would send it (CRC resealed)."""
    L.set_max_timestamp(batch, 0, len(batch), max_ts)
    return batch


def _crafted(records: bytes, count: int, last_offset_delta: int | None = None) -> bytearray:
    """A batch whose header says ``count`` records whatever ``records`` holds."""
    tail = L.TAIL.pack(0, count - 1 if last_offset_delta is None else last_offset_delta, NOW, NOW, -1, -1, -1, count)
    body = tail + records
    crc = L.crc32c.crc32c(body)
    return bytearray(L.HEAD.pack(0, L.MIN_BATCH_LENGTH + len(records), -1, 2, crc) + body)


@pytest.mark.parametrize("count", [1, 5, 40, 300, 9000])  # the Python walk and the array walk
@pytest.mark.parametrize("compression", [0, 3])
def test_max_timestamp_comes_from_the_records(tmp_path, count: int, compression: int) -> None:
    stamps = [NOW - 500 + (i * 7919) % 1000 for i in range(count)]
    batch = bytearray(encode_batch([(None, b"v%d" % i, None, ts) for i, ts in enumerate(stamps)], compression=compression))
    sent = _with_max_ts(batch, -1)
    before = bytes(sent)
    log = open_log(tmp_path / "t-0", FakeClock(NOW))
    log.append(sent)
    header = L.read_header(sent)
    assert header.max_timestamp == max(stamps)
    assert L.check_batch(sent).crc == header.crc  # resealed
    # only maxTimestamp and the CRC changed (baseOffset and leader epoch are stamped by the log)
    changed = [i for i in range(len(before)) if before[i] != sent[i]]
    assert all(L.MAX_TIMESTAMP_POS <= i < L.MAX_TIMESTAMP_POS + 8 or L.CRC_POS <= i < L.CRC_POS + 4 for i in changed)
    target = sorted(stamps)[len(stamps) // 2]
    assert log.offset_for_timestamp(target)[1] >= target


def test_a_correct_batch_is_not_rewritten() -> None:
    batch = build_batch([b"a", b"b"], timestamps=[NOW, NOW + 3])
    before = bytes(batch)
    assert V.validate_batch(batch, 0, L.read_header(batch), V.policy_of(LogConfig()), NOW) == NOW + 3
    assert bytes(batch) == before


@pytest.mark.parametrize("count", [2, 64])
def test_count_disagreeing_with_the_records_is_refused(count: int) -> None:
    records = b"".join(encode_record(i, 0, None, b"x", ()) for i in range(count))
    for batch in (_crafted(records, count + 1), _crafted(records, count - 1)):
        with pytest.raises(InvalidRecordError):
            V.validate_batch(batch, 0, L.read_header(batch), V.policy_of(LogConfig()), NOW)


@pytest.mark.parametrize("count", [3, 64])
def test_offset_deltas_must_run_from_zero(count: int) -> None:
    records = b"".join(encode_record(i + (i == count - 1), 0, None, b"x", ()) for i in range(count))
    batch = _crafted(records, count)
    with pytest.raises(InvalidRecordError, match="offset delta"):
        V.validate_batch(batch, 0, L.read_header(batch), V.policy_of(LogConfig()), NOW)


@pytest.mark.parametrize("key", ["message.timestamp.difference.max.ms", "message.timestamp.before.max.ms"])
def test_timestamps_out_of_bounds_append_nothing(tmp_path, key: str) -> None:
    log = open_log(tmp_path / "t-0", FakeClock(NOW))
    log.update_config(LogConfig().with_overrides({key: "1000"}))
    log.append(build_batch([b"ok"], timestamps=[NOW - 999]))
    with pytest.raises(InvalidTimestampError):
        log.append(build_batch([b"fine", b"too old"], timestamps=[NOW, NOW - 1001]))
    assert read_from(log, 0) == [(0, b"ok")]


def test_the_broker_wide_bound_applies_and_a_topic_key_overrides_it(tmp_path) -> None:
    """log.message.timestamp.difference.max.ms in server.properties is every topic's default;
    message.timestamp.after.max.ms on a topic narrows its own side only."""
    broker_wide = LogConfig.from_broker({"log.message.timestamp.difference.max.ms": "1000"})
    log = open_log(tmp_path / "t-0", FakeClock(NOW))
    log.update_config(broker_wide)
    with pytest.raises(InvalidTimestampError):
        log.append(build_batch([b"too old"], timestamps=[NOW - 1001]))
    log.update_config(broker_wide.with_overrides({"message.timestamp.after.max.ms": "10"}))
    log.append(build_batch([b"old enough"], timestamps=[NOW - 999]))
    with pytest.raises(InvalidTimestampError):
        log.append(build_batch([b"too new"], timestamps=[NOW + 11]))
    assert read_from(log, 0) == [(0, b"old enough")]
    assert V.policy_of(LogConfig.from_broker({})).before_max_ms == V.NO_BOUND


def test_timestamps_too_far_ahead_are_refused() -> None:
    policy = V.policy_of(LogConfig().with_overrides({"message.timestamp.difference.max.ms": "1000"}))
    batch = build_batch([b"a"] * 40, timestamps=[NOW + i * 30 for i in range(40)])
    with pytest.raises(InvalidTimestampError):
        V.validate_batch(batch, 0, L.read_header(batch), policy, NOW)


def test_log_append_time_topics_ignore_bounds_and_stamp_now(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", FakeClock(NOW), message_timestamp_type="LogAppendTime")
    log.update_config(LogConfig(message_timestamp_type="LogAppendTime").with_overrides(
        {"message.timestamp.difference.max.ms": "10"}))
    result = log.append(build_batch([b"old"], timestamps=[5]))
    assert result.log_append_time == NOW
    assert log.offset_for_timestamp(NOW) == (0, NOW)


def test_a_producer_may_not_claim_log_append_time() -> None:
    batch = build_batch([b"a"], timestamps=[NOW], attributes=L.TIMESTAMP_TYPE_MASK)
    with pytest.raises(InvalidTimestampError):
        V.validate_batch(batch, 0, L.read_header(batch), V.policy_of(LogConfig()), NOW)


@pytest.mark.parametrize("count", [3, 100])
def test_compacted_topics_refuse_keyless_records_whole_batch(tmp_path, count: int) -> None:
    log = open_log(tmp_path / "t-0", FakeClock(NOW), cleanup_policy="compact,delete")
    keys: list[bytes | None] = [b"k%d" % i for i in range(count)]
    log.append(build_batch([b"v"] * count, timestamps=[NOW] * count, keys=keys))
    keys[count // 2] = None
    with pytest.raises(InvalidRecordError, match="without key"):
        log.append(build_batch([b"v"] * count, timestamps=[NOW] * count, keys=keys))
    assert log.log_end_offset == count


def test_the_python_and_array_walks_agree() -> None:
    if V.np is None:
        pytest.skip("numpy is not installed")
    sizes = [1, 70, 200, 9000]
    batch = bytes(encode_batch([(b"k" if i % 3 else None, b"x" * sizes[i % 4], [("h", b"1")] if i % 5 == 0 else None,
                                 NOW + (i * 37) % 20_000 - 10_000) for i in range(120)]))
    header = L.read_header(batch)
    assert len({walk(batch, L.HEADER_SIZE, len(batch), header, False) for walk in WALKS}) == 1
    for walk in WALKS:
        with pytest.raises(InvalidRecordError, match="without key"):
            walk(batch, L.HEADER_SIZE, len(batch), header, True)


@pytest.mark.parametrize("n", [200, 9000])  # offset deltas of up to two and of three bytes
def test_uniform_batches_take_the_arithmetic_path_and_are_still_checked(n: int) -> None:
    """Records alike but for their offset delta are located by arithmetic; a swapped offset
    delta, a keyless record on a compacted topic or a wrong count are still caught there."""
    if V.np is None:
        pytest.skip("numpy is not installed")
    swapped = [i for i in range(n)]
    swapped[100], swapped[101] = 101, 100
    records = b"".join(encode_record(d, 3, None, b"x" * 100, ()) for d in swapped)
    batch = _crafted(records, n)
    plain = bytearray(encode_batch([(None, b"x" * 100, None, NOW + i % 50) for i in range(n)]))
    header = L.read_header(plain)
    layout = V._uniform_layout(n, 107)
    assert layout.total == len(plain) - L.HEADER_SIZE
    assert V._uniform_deltas(V.np.frombuffer(plain, V.np.uint8), L.HEADER_SIZE, layout, False) == (0, 49)
    assert V.validate_batch(plain, 0, header, V.policy_of(LogConfig()), NOW) == NOW + 49
    with pytest.raises(InvalidRecordError, match="record 100 .* offset delta 101"):
        V.validate_batch(batch, 0, L.read_header(batch), V.policy_of(LogConfig()), NOW)
    compacted = V.policy_of(LogConfig(cleanup_policy="compact"))
    with pytest.raises(InvalidRecordError, match="without key"):
        V.validate_batch(plain, 0, L.read_header(plain), compacted, NOW)
    short = _crafted(b"".join(encode_record(i, 0, None, b"x" * 100, ()) for i in range(n - 1)), n)
    with pytest.raises(InvalidRecordError):
        V.validate_batch(short, 0, L.read_header(short), V.policy_of(LogConfig()), NOW)


@settings(max_examples=150, deadline=None)
@given(deltas=st.lists(st.integers(-200, 200), min_size=V.ARRAY_WALK_MIN_RECORDS, max_size=300),
       keyless=st.sets(st.integers(0, 299), max_size=2), value_size=st.integers(0, 150), positive=st.booleans())
def test_the_gathered_framing_path_agrees_with_the_python_walk(deltas: list[int], keyless: set[int],
                                                               value_size: int, positive: bool) -> None:
    """Records alike but for their timestamp delta (one or two bytes, negative too) and their
    key: the array walk's one-gather path and the Python walk find the same deltas and refuse
    the same keyless records."""
    if V.np is None:
        pytest.skip("numpy is not installed")
    if positive:
        deltas = [abs(d) + 1 for d in deltas]
    records = b"".join(encode_record(i, d, None if i in keyless else b"k", b"v" * value_size, ())
                       for i, d in enumerate(deltas))
    batch = _crafted(records, len(deltas))
    header = L.read_header(batch)
    for need_keys in (False, True):
        answers = [_outcome(walk, batch, header, need_keys) for walk in WALKS]
        assert answers[0] == answers[1] == answers[2]
    assert answers[0] == (min(deltas), max(deltas)) or keyless.intersection(range(len(deltas)))


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(0, 300), min_size=V.ARRAY_WALK_MIN_RECORDS, max_size=120), data=st.data())
def test_damaged_records_get_the_same_answer_from_the_compiled_and_the_array_walk(sizes: list[int], data) -> None:
    """Bytes overwritten inside a batch's records (its CRC made to match, as a faulty client
    would): the compiled pass either finds what the array walk finds or refuses, and the array
    walk then says what is wrong, so the answer is the same, and always InvalidRecordError."""
    if V.np is None:
        pytest.skip("numpy is not installed")
    records = b"".join(encode_record(i, (i * 7) % 300 - 150, b"k" if i % 4 else None, b"v" * size,
                                     [("h", b"1")] if i % 9 == 0 else ()) for i, size in enumerate(sizes))
    damaged = bytearray(records)
    for _ in range(data.draw(st.integers(0, 3))):
        damaged[data.draw(st.integers(0, len(damaged) - 1))] = data.draw(st.integers(0, 255))
    batch = _crafted(bytes(damaged), len(sizes))
    header = L.read_header(batch)
    for need_keys in (False, True):  # any error but InvalidRecordError (Kafka's CORRUPT_MESSAGE) fails the test
        compiled = _outcome(V.records_span_deltas, batch, header, need_keys)
        assert compiled == _outcome(_arrays_only_span_deltas, batch, header, need_keys)

