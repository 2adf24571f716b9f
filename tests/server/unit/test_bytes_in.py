"""Bytes and records in are counted as a leader appends them (Kafka's BytesInPerSec and
MessagesInPerSec): a batch refused, or sent to a partition this broker does not lead, or a
producer's retried duplicate, is not counted."""

from __future__ import annotations

from twisted.internet import defer

from broker.protocol.errors import ErrorCode
from broker.protocol.records import encode_batch
from tests.server.unit.harness import Replicas, result_of


def test_appended_records_and_bytes_are_counted(replicas: Replicas) -> None:
    replicas.lead("in", [1])
    [outcome] = result_of(replicas.produce("in", b"a", b"b", b"c"))
    assert outcome.error_code == ErrorCode.NONE
    size = replicas.partition("in").log.size_bytes
    assert (replicas.metrics.records_in["in"], replicas.metrics.bytes_in["in"]) == (3, size)
    result_of(replicas.produce("in", b"d"))
    assert (replicas.metrics.records_in["in"], replicas.metrics.bytes_in["in"]) == (4, replicas.partition("in").log.size_bytes)


def test_refused_and_duplicate_batches_are_not_counted(replicas: Replicas) -> None:
    replicas.lead("in", [1])
    [missing] = result_of(replicas.produce("elsewhere", b"a"))  # not led here
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    damaged = bytearray(encode_batch([(None, b"v", [], 0)]))
    damaged[-1] ^= 1  # the CRC no longer matches
    [corrupt] = result_of(defer.maybeDeferred(replicas.manager.append_records, 1, 1000, [("in", 0, damaged)]))
    assert corrupt.error_code == ErrorCode.CORRUPT_MESSAGE
    assert replicas.metrics.records_in["in"] == 0 and "elsewhere" not in replicas.metrics.records_in

    idempotent = encode_batch([(None, b"v", [], 0)], producer_id=7, producer_epoch=0, base_sequence=0)
    for _ in range(2):  # the second is a retry: answered with the first's offsets, not appended
        [outcome] = result_of(defer.maybeDeferred(replicas.manager.append_records, 1, 1000, [("in", 0, idempotent)]))
        assert (outcome.error_code, outcome.base_offset) == (ErrorCode.NONE, 0)
    assert replicas.metrics.records_in["in"] == 1
    assert replicas.metrics.bytes_in["in"] == replicas.partition("in").log.size_bytes
