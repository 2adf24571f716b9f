"""A Fetch answer of many partitions, none of them sent by sendfile, is built and encoded a
slice per reactor turn (broker.server.sliced_answers): the bytes are the unsliced answer's and
the metrics count the same records; an answer holding a FileSlice is made at once."""

from __future__ import annotations

import pytest

from broker.protocol.messages import RESPONSES, ApiKey
from broker.protocol.records import encode_batch
from broker.server.fetch_parts import FetchedPartition, FetchResult
from broker.server.handlers import fetch as fetch_handler
from broker.server.turns import Turns
from broker.storage.file_slice import FileSlice, SegmentFile
from tests.server.unit.hand_turns import HandTurnedReactor
from tests.server.unit.harness import result_of
from tests.server.unit.wire import unstarted_broker

WIDE = 3 * fetch_handler.ANSWER_SLICE_PARTITIONS + 7


def _read() -> FetchResult:
    """Two topics' partitions, some with records, some with an error, some with nothing."""
    parts = []
    for n in range(WIDE):
        topic, partition = ("a", n) if n < WIDE // 2 else ("b", n - WIDE // 2)
        if n % 5 == 0:
            parts.append(FetchedPartition(topic, partition, 6, 10, 0))  # NOT_LEADER_OR_FOLLOWER
        elif n % 5 == 1:
            parts.append(FetchedPartition(topic, partition, 0, n, 0, at_end=True))
        else:
            batch = encode_batch([(None, b"v%d" % n, [], 1_700_000_000_000)])
            parts.append(FetchedPartition(topic, partition, 0, n + 1, 0, batch, 1))
    return FetchResult(parts, 0, False)


def _sliced_answer(broker, version: int) -> tuple[dict, int]:
    hand = HandTurnedReactor()
    broker.turns = Turns(hand)
    d = fetch_handler._answer(_read(), broker, False, 0, version)
    turns = 0
    while not d.called:
        assert turns < 100, "the sliced answer never finished"
        hand.turn()
        turns += 1
    return result_of(d), turns


@pytest.mark.parametrize("version", [0, 4, 7, 11])
def test_a_wide_answer_takes_turns_and_equals_the_unsliced_one(version, monkeypatch):
    sliced_broker, whole_broker = unstarted_broker(), unstarted_broker()
    sliced, turns = _sliced_answer(sliced_broker, version)
    assert turns >= WIDE // fetch_handler.ANSWER_SLICE_PARTITIONS

    monkeypatch.setattr(fetch_handler, "ANSWER_SLICE_PARTITIONS", 10 * WIDE)
    whole = fetch_handler._answer(_read(), whole_broker, False, 0, version)  # at once
    encode = RESPONSES[ApiKey.FETCH].encode_bytes
    assert encode(version, sliced) == encode(version, whole)
    assert sliced_broker.metrics.records_out == whole_broker.metrics.records_out
    assert sliced_broker.metrics.bytes_out == whole_broker.metrics.bytes_out
    assert sum(sliced_broker.metrics.records_out.values()) == len([n for n in range(WIDE) if n % 5 > 1])


def test_an_answer_with_a_file_slice_is_made_at_once(tmp_path):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(encode_batch([(None, b"x" * 100, [], 0)]))
    read = _read()
    read.partitions[2] = read.partitions[2]._replace(records=FileSlice(SegmentFile(str(path)), 0, path.stat().st_size))
    answer = fetch_handler._answer(read, unstarted_broker(), False, 0, 11)
    assert isinstance(answer, dict) and len(answer["responses"][0]["partitions"]) == WIDE // 2
