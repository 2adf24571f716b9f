"""Produce: hand each partition's batch to the replica layer, which appends it as the leader.

Batches are checked (size, magic, CRC, count) and stamped with offsets, never parsed or
recompressed. A bad batch fails only its own partition and writes nothing of it.

Versions 0-2 carry legacy message sets, which the log does not store; they are advertised
anyway because librdkafka enables a compression codec only when the broker's Produce range
reaches down to the version that introduced it (v0 for gzip, snappy and lz4), and they are
answered with UNSUPPORTED_FOR_MESSAGE_FORMAT per partition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.protocol.errors import ErrorCode
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.server.dispatch import NO_RESPONSE, Handler
from broker.server.replica_manager import AppendOutcome

if TYPE_CHECKING:
    from broker.server.broker import Broker

FIRST_RECORD_BATCH_VERSION = 3


def handle(broker: Broker, header: RequestHeader, request: dict) -> Any:
    entries = [
        (topic["name"], part["index"], part["records"]) for topic in request["topic_data"] for part in topic["partition_data"]
    ]
    if header.api_version < FIRST_RECORD_BATCH_VERSION:
        if request["acks"] == 0:
            return NO_RESPONSE
        return _response(request, [AppendOutcome(ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT)] * len(entries), legacy=True)
    d = broker.replicas.append_records(request["acks"], request["timeout_ms"], entries)
    if request["acks"] == 0:
        return NO_RESPONSE
    return d.addCallback(lambda outcomes: _response(request, outcomes))


def _response(request: dict, outcomes: list[AppendOutcome], legacy: bool = False) -> dict:
    """The response: one entry per partition of the request, in its order."""
    answers = iter(outcomes)
    responses = []
    for topic in request["topic_data"]:
        parts = []
        for part in topic["partition_data"]:
            outcome = next(answers)
            answer = {"index": part["index"], "error_code": outcome.error_code, "base_offset": outcome.base_offset}
            if not legacy:
                answer["log_append_time_ms"] = outcome.log_append_time_ms
                answer["log_start_offset"] = outcome.log_start_offset
            parts.append(answer)
        responses.append({"name": topic["name"], "partition_responses": parts})
    return {"responses": responses, "throttle_time_ms": 0}


HANDLER = Handler(ApiKey.PRODUCE, 0, 7, handle)
