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

from broker.protocol import batch
from broker.protocol.errors import (
    ErrorCode,
    InvalidRecordError,
    InvalidRequiredAcksError,
    KafkaError,
)
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.server.dispatch import NO_RESPONSE, Handler

if TYPE_CHECKING:
    from broker.server.broker import Broker

VALID_ACKS = (0, 1, -1)


FIRST_RECORD_BATCH_VERSION = 3


def handle(broker: "Broker", header: RequestHeader, request: dict) -> Any:
    acks = request["acks"]
    append = _append if header.api_version >= FIRST_RECORD_BATCH_VERSION else _refuse_legacy
    responses = [
        {
            "name": topic["name"],
            "partition_responses": [
                append(broker, topic["name"], part["index"], part["records"], acks) for part in topic["partition_data"]
            ],
        }
        for topic in request["topic_data"]
    ]
    if acks == 0:
        return NO_RESPONSE
    return {"responses": responses, "throttle_time_ms": 0}


def _require_one_batch(records: bytearray) -> None:
    """Produce v3+ carries exactly one batch per partition (as Kafka requires)."""
    if len(records) >= batch.LOG_OVERHEAD:
        _, length = batch.read_prefix(records)
        if length + batch.LOG_OVERHEAD < len(records):
            raise InvalidRecordError("a produce request must carry exactly one record batch per partition")


def _refuse_legacy(broker: "Broker", topic: str, partition: int, records: Any, acks: int) -> dict:
    return {"index": partition, "error_code": ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, "base_offset": -1}


def _append(broker: "Broker", topic: str, partition: int, records: Any, acks: int) -> dict:
    response = {"index": partition, "error_code": ErrorCode.NONE, "base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1}
    try:
        if acks not in VALID_ACKS:
            raise InvalidRequiredAcksError(f"acks must be 0, 1 or -1, not {acks}")
        log = broker.replicas.leader_log(topic, partition)
        if not records:
            raise InvalidRecordError("produce request carries no record batch")
        # Offsets are stamped into the batch in place: it needs a writable buffer.
        buffer = records if isinstance(records, bytearray) else bytearray(records)
        _require_one_batch(buffer)
        result = log.append(buffer)
    except KafkaError as exc:
        response["error_code"] = exc.code
        return response
    response["base_offset"] = result.first_offset
    response["log_append_time_ms"] = result.log_append_time
    response["log_start_offset"] = result.log_start_offset
    if not result.duplicate:
        broker.appended(topic, partition, len(buffer))
    return response


HANDLER = Handler(ApiKey.PRODUCE, 0, 7, handle)
