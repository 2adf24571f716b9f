"""Fetch: read whole batches below the high watermark, long-polling when there are too few.

Records are answered as file slices that the connection sends with ``os.sendfile``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from broker.protocol.errors import ErrorCode, FencedLeaderEpochError, KafkaError, UnknownLeaderEpochError
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.server.dispatch import Handler

if TYPE_CHECKING:
    from broker.server.broker import Broker


class _Wanted(NamedTuple):
    topic: str
    partition: int
    offset: int
    max_bytes: int
    leader_epoch: int = -1


def handle(broker: Broker, header: RequestHeader, request: dict) -> Any:
    wanted = [
        _Wanted(topic["topic"], part["partition"], part["fetch_offset"], part["partition_max_bytes"], part.get("current_leader_epoch", -1))
        for topic in request["topics"]
        for part in topic["partitions"]
    ]
    replica_id = request["replica_id"]
    if replica_id >= 0:
        # A follower: its fetch offset is its log end offset (moves the HW and the ISR); it
        # reads up to the log end, and waits on appends rather than on the high watermark.
        _record_follower_positions(broker, replica_id, wanted)
        purgatory = broker.replica_fetches
    else:
        purgatory = broker.fetches
    follower = replica_id >= 0
    read = _read(broker, wanted, request["max_bytes"], follower)
    if request["max_wait_ms"] <= 0 or read.available >= request["min_bytes"] or read.failed or not wanted:
        return _answer(broker, read, follower)
    d = purgatory.wait(
        frozenset((w.topic, w.partition) for w in wanted), request["min_bytes"] - read.available, request["max_wait_ms"]
    )
    d.addCallback(lambda _: _answer(broker, _read(broker, wanted, request["max_bytes"], follower), follower))
    return d


def _answer(broker: Broker, read: _Read, follower: bool) -> dict:
    """The response of the read that is sent, its bytes and records counted in the metrics."""
    for topic, size, records in read.served:
        broker.metrics.fetched(topic, size, records, follower)
    return read.response


def _record_follower_positions(broker: Broker, replica_id: int, wanted: list[_Wanted]) -> None:
    for item in wanted:
        p = broker.replicas.partitions.get((item.topic, item.partition))
        if p is not None and p.is_leader and (item.leader_epoch < 0 or item.leader_epoch == p.leader_epoch):
            p.update_follower(replica_id, item.offset)


def _check_epoch(p: Any, requested: int) -> None:
    if requested >= 0 and requested != p.leader_epoch:
        if requested < p.leader_epoch:
            raise FencedLeaderEpochError(f"leader epoch {requested} is older than {p.leader_epoch}")
        raise UnknownLeaderEpochError(f"leader epoch {requested} is newer than {p.leader_epoch}")


class _Read(NamedTuple):
    """A fetch response, the bytes it carries, whether any partition failed, and per partition
    with records (topic, bytes, records past the fetch offset)."""

    response: dict
    available: int
    failed: bool
    served: list[tuple[str, int, int]]


def _read(broker: Broker, wanted: list[_Wanted], max_bytes: int, replica: bool = False) -> _Read:
    """Read every wanted partition within ``max_bytes``, whole batches, below the HW for consumers."""
    remaining = max_bytes
    total = 0
    failed = False
    served: list[tuple[str, int, int]] = []
    topics: dict[str, list[dict]] = {}
    for item in wanted:
        part = {
            "partition_index": item.partition,
            "error_code": ErrorCode.NONE,
            "high_watermark": -1,
            "last_stable_offset": -1,
            "log_start_offset": -1,
            "aborted_transactions": None,
            "preferred_read_replica": -1,
            "records": b"",
        }
        topics.setdefault(item.topic, []).append(part)
        try:
            leader = broker.replicas.leader_partition(item.topic, item.partition)
            _check_epoch(leader, item.leader_epoch)
            log = leader.log
            high_watermark = log.high_watermark
            part["high_watermark"] = part["last_stable_offset"] = high_watermark
            part["log_start_offset"] = log.log_start_offset
            limit = min(item.max_bytes, remaining)
            if limit <= 0 and total:
                continue
            result = log.read(
                item.offset, max(limit, 0), max_offset=None if replica else high_watermark, min_one_batch=total == 0
            )
        except KafkaError as exc:
            part["error_code"] = exc.code
            failed = True
            continue
        if result.records is not None:
            part["records"] = result.records
            total += result.records.size
            remaining -= result.records.size
            served.append((item.topic, result.records.size, result.records_after_fetch_offset))
    response = {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "session_id": 0,
        "responses": [{"topic": topic, "partitions": parts} for topic, parts in topics.items()],
    }
    return _Read(response, total, failed, served)


HANDLER = Handler(ApiKey.FETCH, 4, 11, handle)
