"""Fetch: read whole batches below the high watermark, long-polling when there are too few.

The replica layer reads and parks the fetch (``ReplicaManager.fetch_messages``); records are
answered as file slices that the connection sends with ``os.sendfile`` (small ones as their
bytes, ``fetch_parts.answered_records``). From v7 a fetch may belong to a fetch session
(``fetch_session``): it then names only what changed, and is answered only what is new.

Versions 0-3 are for clients that read only message format v0/v1 (v0-1: magic 0, v2-3:
magic 1), as Kafka answers them: what was read is converted down batch by batch
(``legacy.down_convert``, within the partition's max bytes) and sent as bytes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from twisted.internet import defer

from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.header import RequestHeader
from broker.protocol.messages import RESPONSES, ApiKey
from broker.protocol.records.legacy import FETCH_MAGIC, down_convert
from broker.security.api_acls import INTER_BROKER
from broker.server.authz import requester
from broker.server.dispatch import Handler
from broker.server.fetch_parts import FetchedPartition, FetchResult, FetchWanted
from broker.server.fetch_session import NO_SESSION
from broker.server.sliced_answers import encode_in_steps
from broker.storage.file_slice import FileSlice

if TYPE_CHECKING:
    from broker.server.broker import Broker

#: v7 brought fetch sessions (KIP-227, ``broker.server.fetch_session``)
FIRST_SESSION_VERSION = 7
NO_RESPONSE_LIMIT = 2**31 - 1  # v0-2 have no max_bytes: only each partition's limit applies, as in Kafka
#: an answer of more partitions (none sent by sendfile) is built and encoded this many per reactor turn
ANSWER_SLICE_PARTITIONS = 250
FETCH_RESPONSE = RESPONSES[ApiKey.FETCH]


def handle(broker: Broker, header: RequestHeader, request: dict) -> defer.Deferred[dict]:
    wanted = [
        FetchWanted(
            topic["topic"],
            part["partition"],
            part["fetch_offset"],
            part["partition_max_bytes"],
            part.get("current_leader_epoch", -1),
        )
        for topic in request["topics"]
        for part in topic["partitions"]
    ]
    replica_id = request["replica_id"]
    who = requester(broker)
    denied: list[FetchWanted] = []
    if not who.checks:
        pass
    elif replica_id >= 0:  # a follower: inter-broker, ClusterAction on the cluster
        denied = [] if who.may(INTER_BROKER) else wanted
    else:
        denied = [w for w in wanted if not who.may_api(ApiKey.FETCH, w.topic)]
    if denied:  # refused partitions never join a session
        wanted = [w for w in wanted if w not in denied]
    context = None
    if header.api_version >= FIRST_SESSION_VERSION:
        forgotten = [(t["topic"], p) for t in request.get("forgotten_topics_data") or () for p in t["partitions"]]
        try:
            context = broker.replicas.fetch_sessions.context(request["session_id"], request["session_epoch"], wanted,
                                                             forgotten, replica_id >= 0)
        except KafkaError as exc:
            return defer.succeed({"throttle_time_ms": 0, "error_code": exc.code, "session_id": 0, "responses": []})
        session = context.session
        if who.checks and replica_id < 0 and session is not None and context.incremental:
            # every fetch is authorized, not only a partition's first: a revoked Read takes
            # the topic's partitions out of the session and answers them refused
            revoked = {t for t in session.topics if not who.may_api(ApiKey.FETCH, t)}
            if revoked:
                denied += broker.replicas.fetch_sessions.drop_topics(session, revoked)
        wanted = context.wanted()
    max_bytes = request.get("max_bytes", NO_RESPONSE_LIMIT)
    d = broker.replicas.fetch_messages(replica_id, request["max_wait_ms"], request["min_bytes"], max_bytes, wanted,
                                       context)
    if header.api_version in FETCH_MAGIC:
        d.addCallback(_down_converted, broker, wanted, FETCH_MAGIC[header.api_version])
    if denied:
        d.addCallback(_with_denied, denied)
    if context is not None:
        d.addCallback(lambda read: read._replace(partitions=context.answer(read.partitions)))
    return d.addCallback(_answer, broker, replica_id >= 0, context.session_id if context is not None else NO_SESSION,
                         header.api_version)


def _with_denied(read: FetchResult, denied: list[FetchWanted]) -> FetchResult:
    """The read with the refused partitions answered TOPIC_AUTHORIZATION_FAILED."""
    refused = [FetchedPartition(w.topic, w.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for w in denied]
    return read._replace(partitions=[*read.partitions, *refused])


def _down_converted(read: FetchResult, broker: Broker, wanted: list[FetchWanted], magic: int) -> FetchResult:
    """The read with every partition's batches converted down to message format ``magic``."""
    parts = []
    for part, want in zip(read.partitions, wanted):
        records = part.records
        if records is not None:
            started = time.perf_counter()
            try:
                data, count = down_convert(records.read_bytes() if isinstance(records, FileSlice) else records,
                                           magic, want.offset, want.max_bytes)
            except KafkaError as exc:
                part = part._replace(error_code=exc.code, records=None, records_after_fetch_offset=0)
            else:
                broker.metrics.converted(part.topic, count, time.perf_counter() - started, produce=False)
                part = part._replace(records=data, records_after_fetch_offset=count)
        parts.append(part)
    return read._replace(partitions=parts)


def _answer(read: FetchResult, broker: Broker, follower: bool, session_id: int, version: int) -> Any:
    """The response to send, its bytes and records counted in the metrics; a Deferred of it when
    it answers more than ANSWER_SLICE_PARTITIONS partitions, all as bytes (their part then
    built and encoded that many per reactor turn; a FileSlice cannot be encoded ahead)."""
    topics: dict[str, list[FetchedPartition]] = {}
    for part in read.partitions:
        topics.setdefault(part.topic, []).append(part)
    response: dict[str, Any] = {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "session_id": session_id,
        "responses": [{"topic": topic, "partitions": parts} for topic, parts in topics.items()],
    }
    answered = _partition_answer(broker, follower)
    parts = read.partitions
    if len(parts) > ANSWER_SLICE_PARTITIONS and not any(isinstance(p.records, FileSlice) for p in parts):
        steps = encode_in_steps(FETCH_RESPONSE.items_encoder(version, ("responses", "partitions")),
                                response["responses"], "partitions", answered, ANSWER_SLICE_PARTITIONS)
        return broker.turns.run(steps).addCallback(lambda _: response)
    for topic in response["responses"]:
        topic["partitions"] = [answered(part) for part in topic["partitions"]]
    return response


def _partition_answer(broker: Broker, follower: bool) -> Callable[[FetchedPartition], dict[str, Any]]:
    """A partition's answer, its records counted in the metrics as it is made."""
    fetched = broker.metrics.fetched

    def answer(part: FetchedPartition) -> dict[str, Any]:
        records = part.records
        if records is not None:
            fetched(part.topic, records.size if isinstance(records, FileSlice) else len(records), part.records_after_fetch_offset,
                    follower)
        return {
            "partition_index": part.partition,
            "error_code": part.error_code,
            "high_watermark": part.high_watermark,
            "last_stable_offset": part.high_watermark,
            "log_start_offset": part.log_start_offset,
            "aborted_transactions": None,
            "preferred_read_replica": -1,
            "records": records if records is not None else b"",
        }

    return answer


HANDLER = Handler(ApiKey.FETCH, 0, 11, handle)
