"""Produce: validate each partition's batches and append them to the leader's log.

Batches are checked (size, magic, CRC, count) and stamped with offsets, never parsed or
recompressed. A bad batch fails only its own partition and writes nothing of it.

Versions 0-2 carry legacy message sets, which the log does not store; they are advertised
anyway because librdkafka enables a compression codec only when the broker's Produce range
reaches down to the version that introduced it (v0 for gzip, snappy and lz4), and they are
answered with UNSUPPORTED_FOR_MESSAGE_FORMAT per partition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet import defer

from broker.protocol.errors import (
    ErrorCode,
    InvalidRecordError,
    InvalidRequiredAcksError,
    KafkaError,
    NotEnoughReplicasError,
)
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.protocol.records import layout as batch
from broker.server.dispatch import NO_RESPONSE, Handler

if TYPE_CHECKING:
    from broker.server.broker import Broker

VALID_ACKS = (0, 1, -1)


FIRST_RECORD_BATCH_VERSION = 3


def handle(broker: Broker, header: RequestHeader, request: dict) -> Any:
    acks = request["acks"]
    append = _append if header.api_version >= FIRST_RECORD_BATCH_VERSION else _refuse_legacy
    waits: list[defer.Deferred[None]] = []
    responses = []
    for topic in request["topic_data"]:
        parts = []
        for part in topic["partition_data"]:
            response, required = append(broker, topic["name"], part["index"], part["records"], acks)
            parts.append(response)
            if required is not None:
                waits.append(_wait_for_replicas(broker, topic["name"], part["index"], required, request["timeout_ms"], response))
        responses.append({"name": topic["name"], "partition_responses": parts})
    if acks == 0:
        return NO_RESPONSE
    result = {"responses": responses, "throttle_time_ms": 0}
    if not waits:
        return result
    return defer.gatherResults(waits).addCallback(lambda _: result)


def _wait_for_replicas(broker: Broker, topic: str, partition: int, required: int, timeout_ms: int, response: dict) -> defer.Deferred[None]:
    """acks=all: answer once the high watermark reaches ``required`` (or with the error)."""

    def done(code: int) -> None:
        if code != ErrorCode.NONE:
            response["error_code"] = code
            response["base_offset"] = -1
    return broker.produces.wait((topic, partition), required, timeout_ms).addCallback(done)


def _require_one_batch(records: bytearray) -> None:
    """Produce v3+ carries exactly one batch per partition (as Kafka requires)."""
    if len(records) >= batch.LOG_OVERHEAD:
        _, length = batch.read_prefix(records)
        if length + batch.LOG_OVERHEAD < len(records):
            raise InvalidRecordError("a produce request must carry exactly one record batch per partition")


def _refuse_legacy(broker: Broker, topic: str, partition: int, records: Any, acks: int) -> tuple[dict, None]:
    return {"index": partition, "error_code": ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, "base_offset": -1}, None


def _append(broker: Broker, topic: str, partition: int, records: Any, acks: int) -> tuple[dict, int | None]:
    """The partition's response, and for acks=all the high watermark it must wait for
    (None when it can answer now)."""
    response = {"index": partition, "error_code": ErrorCode.NONE, "base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1}
    try:
        if acks not in VALID_ACKS:
            raise InvalidRequiredAcksError(f"acks must be 0, 1 or -1, not {acks}")
        leader = broker.replicas.leader_partition(topic, partition)
        if not records:
            raise InvalidRecordError("produce request carries no record batch")
        if acks == -1 and len(leader.isr) < leader.min_insync_replicas():
            raise NotEnoughReplicasError(
                f"{topic}-{partition}: {len(leader.isr)} in-sync replicas, min.insync.replicas is {leader.min_insync_replicas()}"
            )
        # Offsets are stamped into the batch in place: it needs a writable buffer.
        buffer = records if isinstance(records, bytearray) else bytearray(records)
        _require_one_batch(buffer)
        result = leader.log.append(buffer, leader_epoch=leader.leader_epoch)
    except KafkaError as exc:
        response["error_code"] = exc.code
        return response, None
    response["base_offset"] = result.first_offset
    response["log_append_time_ms"] = result.log_append_time
    response["log_start_offset"] = result.log_start_offset
    if not result.duplicate:
        broker.appended(topic, partition, len(buffer))
    if acks == -1 and leader.log.high_watermark <= result.last_offset:
        return response, result.last_offset + 1
    return response, None


HANDLER = Handler(ApiKey.PRODUCE, 0, 7, handle)
