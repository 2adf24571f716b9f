"""Produce: hand each partition's batch to the replica layer, which appends it as the leader.

Batches are checked (size, magic, CRC, count) and validated as Kafka's LogValidator does
(broker.storage.validator), never recompressed. A bad batch fails only its own partition and
writes nothing of it.

Versions 0-2 carry legacy message sets (magic 0 for v0-1, 1 for v2); each partition's set is
converted up to one record batch v2 (``legacy.up_convert``) before the append, as Kafka does
for a log in the v2 format, and counted in the conversion metrics.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.protocol.records.legacy import up_convert
from broker.server.authz import requester
from broker.server.dispatch import NO_RESPONSE, Handler
from broker.server.replica_manager import AppendOutcome

if TYPE_CHECKING:
    from broker.server.broker import Broker

FIRST_RECORD_BATCH_VERSION = 3


def handle(broker: Broker, header: RequestHeader, request: dict) -> Any:
    entries: list[Any] = [
        (topic["name"], part["index"], part["records"]) for topic in request["topic_data"] for part in topic["partition_data"]
    ]
    refused: dict[int, AppendOutcome] = {}
    if broker.authorizer is not None:
        who = requester(broker)
        for i, (topic, _, _) in enumerate(entries):
            if not who.may_api(ApiKey.PRODUCE, topic):
                refused[i] = AppendOutcome(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if refused:
        entries = [None if i in refused else e for i, e in enumerate(entries)]
    if header.api_version < FIRST_RECORD_BATCH_VERSION:
        entries = _up_converted(broker, entries, refused)
    acks = request["acks"]
    appended = broker.replicas.append_records(acks, request["timeout_ms"],
                                              [e for e in entries if e is not None] if refused else entries)
    if acks == 0:
        return NO_RESPONSE
    if not isinstance(appended, list):  # a Deferred (acks=all); isinstance of Deferred, an ABC, costs more
        if refused:
            appended.addCallback(_merged, refused, len(entries))
        return appended.addCallback(lambda outcomes: _response(request, outcomes))
    return _response(request, _merged(appended, refused, len(entries)) if refused else appended)


def _up_converted(broker: Broker, entries: list, refused: dict[int, AppendOutcome]) -> list:
    """Each partition's legacy message set as one v2 batch; a set that does not convert is
    answered with its error (kept in ``refused`` by position) and left out (None)."""
    converted: list = []
    for i, entry in enumerate(entries):
        if entry is None:  # refused already
            converted.append(None)
            continue
        topic, partition, records = entry
        started = time.perf_counter()
        try:
            batch, count = up_convert(records or b"")
        except KafkaError as exc:
            refused[i] = AppendOutcome(exc.code)
            converted.append(None)
            continue
        broker.metrics.converted(topic, count, time.perf_counter() - started, produce=True)
        converted.append((topic, partition, batch))
    return converted


def _merged(outcomes: list[AppendOutcome], refused: dict[int, AppendOutcome], total: int) -> list[AppendOutcome]:
    appended = iter(outcomes)
    return [refused[i] if i in refused else next(appended) for i in range(total)]


def _response(request: dict, outcomes: list[AppendOutcome]) -> dict:
    """The response: one entry per partition of the request, in its order (the schema leaves
    out what an old version lacks)."""
    answers = iter(outcomes)
    responses = []
    for topic in request["topic_data"]:
        parts = []
        for part in topic["partition_data"]:
            outcome = next(answers)
            parts.append({"index": part["index"], "error_code": outcome.error_code, "base_offset": outcome.base_offset,
                          "log_append_time_ms": outcome.log_append_time_ms, "log_start_offset": outcome.log_start_offset})
        responses.append({"name": topic["name"], "partition_responses": parts})
    return {"responses": responses, "throttle_time_ms": 0}


HANDLER = Handler(ApiKey.PRODUCE, 0, 7, handle)

