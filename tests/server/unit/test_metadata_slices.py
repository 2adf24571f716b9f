"""A Metadata answer of many partitions is built and encoded a slice per reactor turn
(broker.server.turns): another connection's small request is answered before it, and the
answer is the one the unsliced path gives, byte for byte."""

from __future__ import annotations

import pytest

from broker.protocol.messages import ApiKey
from broker.server.handlers import metadata as metadata_handler
from broker.server.metadata import BrokerEndpoint, PartitionInfo
from broker.server.turns import Turns
from tests.server.unit.hand_turns import HandTurnedReactor
from tests.server.unit.wire import connect, decode, request, responses, unstarted_broker

WIDE = 1_000


def _broker():
    broker = unstarted_broker()
    broker.metadata.set_brokers({n: {"PLAINTEXT": BrokerEndpoint(n, f"host{n}", 9092)} for n in (1, 2)}, "PLAINTEXT")
    # broker 3 is not alive: its partitions answer LEADER_NOT_AVAILABLE and list it offline
    broker.metadata.set_topic("wide", {p: PartitionInfo("wide", p, [1 + p % 3, 1 + (p + 1) % 3], 1 + p % 3, p % 7,
                                                        [1 + p % 3]) for p in range(WIDE)})
    broker.metadata.set_topic("small", {p: PartitionInfo("small", p, [1], 1, 0, [1]) for p in range(3)})
    return broker


def _ask(version: int) -> bytes:
    topics = None if version >= 1 else []
    return request(ApiKey.METADATA, version, 7, {"topics": topics, "allow_auto_topic_creation": False})


@pytest.mark.parametrize("version", [0, 1, 4, 8])
def test_a_large_answer_takes_turns_and_equals_the_unsliced_one(version, monkeypatch):
    broker = _broker()
    reactor = HandTurnedReactor()
    broker.turns = Turns(reactor)
    large, large_out = connect(broker)
    small, small_out = connect(broker)
    large.dataReceived(_ask(version))
    turns = 0
    while not responses(large_out):
        assert turns < 100, "the sliced answer never finished"
        small.dataReceived(request(ApiKey.API_VERSIONS, 0, turns))  # one small request between two turns
        assert len(responses(small_out)) == turns + 1  # answered at once, the large one still being built
        reactor.turn()
        turns += 1
    assert turns >= WIDE // metadata_handler.SLICE_PARTITIONS
    [(cid, body)] = responses(large_out)

    monkeypatch.setattr(metadata_handler, "SLICE_PARTITIONS", 10 * WIDE)
    whole, whole_out = connect(broker)
    whole.dataReceived(_ask(version))
    [(_, expected)] = responses(whole_out)  # answered at once, unsliced
    assert cid == 7 and body == expected
    answer = decode(ApiKey.METADATA, version, body)
    wide = next(t for t in answer["topics"] if t["name"] == "wide")
    assert [p["partition_index"] for p in wide["partitions"]] == list(range(WIDE))
    offline = [p for p in wide["partitions"] if p["partition_index"] % 3 == 2]
    assert all(p["leader_id"] == -1 and p["error_code"] == 5 for p in offline)  # LEADER_NOT_AVAILABLE


def test_small_answers_are_not_sliced():
    broker = _broker()
    connection, out = connect(broker)
    connection.dataReceived(request(ApiKey.METADATA, 8, 3, {"topics": [{"name": "small"}]}))
    [(cid, body)] = responses(out)
    assert cid == 3 and len(decode(ApiKey.METADATA, 8, body)["topics"][0]["partitions"]) == 3
