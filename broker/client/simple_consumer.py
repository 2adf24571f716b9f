"""SimpleConsumer: the stateless low-level consumer of Kafka 0.8, over blocking sockets.

One connection to one broker; the caller says which topic, partition and offset to read.
No reactor and no background thread, so it works in Spark executors and Airflow tasks.
Not thread-safe: use one per thread. The ZooKeeper consumer's fetcher threads and the
PySpark loader build on it.

    consumer = SimpleConsumer("127.0.0.1", 9092)
    leader_id, host, port = consumer.find_leader("page-views", 0)
    start = consumer.get_offsets_before("page-views", 0, EARLIEST_TIME, 1)[0]
    for m in consumer.fetch("page-views", 0, start, 1 << 20):
        print(m.offset, m.key, m.value)

Records come back as ``MessageAndMetadata(topic, partition, offset, key, value, headers,
timestamp)``. A fetch returns a ``MessageSet`` (a list) with ``next_offset`` (where the next
fetch should start, which may lie past the last message when a batch held only records
below the requested offset or transaction markers), ``high_watermark`` and
``log_start_offset``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from broker.client.closeable import Closeable
from broker.client.connection import BrokerConnection, BrokerConnectionError
from broker.client.security import PLAINTEXT, ClientSecurity
from broker.protocol.errors import (
    ErrorCode,
    KafkaError,
    LeaderNotAvailableError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from broker.protocol.messages import ApiKey
from broker.protocol.records import Tail, decode_batches, iter_batches, records_of
from broker.protocol.records.layout import CURRENT_MAGIC
from broker.protocol.records.unrolled import read_records_unrolled

__all__ = [
    "EARLIEST_TIME",
    "LATEST_TIME",
    "MessageAndMetadata",
    "MessageSet",
    "SimpleConsumer",
    "LeaderNotAvailableError",
    "BrokerConnectionError",
    "OffsetOutOfRangeError",
    "NotLeaderOrFollowerError",
    "UnknownTopicOrPartitionError",
    "decode_message_set",
]

EARLIEST_TIME = -2  # kafka.api.OffsetRequest.EarliestTime
LATEST_TIME = -1  # kafka.api.OffsetRequest.LatestTime

FETCH_VERSION = 11
LIST_OFFSETS_VERSION = 1
METADATA_VERSION = 8
DEFAULT_FETCH_SIZE = 1024 * 1024


class MessageAndMetadata(NamedTuple):
    """One record as a consumer sees it; ``timestamp`` is -1 when the format has none."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list
    timestamp: int


class MessageSet(list):
    """The messages of one partition's fetch, plus where to continue and the partition's bounds."""

    __slots__ = ("topic", "partition", "next_offset", "high_watermark", "log_start_offset", "error", "records")

    def __init__(self, topic: str, partition: int, messages: Iterable[MessageAndMetadata] = (), next_offset: int = -1,
                 high_watermark: int = -1, log_start_offset: int = -1, error: KafkaError | None = None) -> None:
        super().__init__(messages)
        self.topic = topic
        self.partition = partition
        self.next_offset = next_offset
        self.high_watermark = high_watermark
        self.log_start_offset = log_start_offset
        self.error = error
        self.records: bytes | bytearray | None = None  # the undecoded record bytes (fetch_raw only)

    @property
    def valid_bytes(self) -> int:  # kept for symmetry with Kafka's ByteBufferMessageSet
        return sum(len(m.value or b"") + len(m.key or b"") for m in self)


# --- decoding -----------------------------------------------------------------------------------
# v2 records go through broker.protocol.records.unrolled (the SimpleConsumer's hot loop), legacy
# v0/v1 message sets through the reference reader, broker.protocol.records.decode_batches.


def decode_message_set(topic: str, partition: int, data: bytes | bytearray | memoryview | None,
                       min_offset: int = 0, out: list | None = None) -> tuple[list, int]:
    """Decode fetched record bytes into MessageAndMetadata, skipping offsets below ``min_offset``.

    Returns (messages, next_offset); next_offset is -1 when no whole batch was present. A
    trailing partial batch (a fetch cut at max_bytes) is ignored. Control batches (transaction
    markers) are skipped. Raises CorruptRecordError / InvalidRecordError on bad data.
    """
    out = [] if out is None else out
    if not data:
        return out, -1
    next_offset = -1
    buf = data if isinstance(data, bytes) else bytes(data)  # records come out as bytes slices
    for pos, header in iter_batches(buf, Tail.STOP):
        batch_next = header.next_offset
        if header.magic != CURRENT_MAGIC:
            for decoded in decode_batches(memoryview(buf)[pos:pos + header.size]):
                for r in decoded.records:
                    if r.offset >= min_offset:
                        out.append(MessageAndMetadata(topic, partition, r.offset, r.key, r.value, list(r.headers),
                                                      r.timestamp))
                batch_next = decoded.header.next_offset
        elif header.readable(min_offset):
            payload, start, end = records_of(buf, pos, header)
            read_records_unrolled(payload, start, end, header, min_offset, out, topic, partition, MessageAndMetadata)
        next_offset = max(next_offset, batch_next)
    return out, next_offset


# --- the consumer -------------------------------------------------------------------------------

def _raise_for(code: int, topic: str, partition: int, what: str = "") -> None:
    if code == ErrorCode.LEADER_NOT_AVAILABLE:
        raise LeaderNotAvailableError(f"{topic}-{partition} has no leader right now")
    if code:
        name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else f"error {code}"
        raise error_for_code(code, f"{name} for {topic}-{partition}{what}")


class SimpleConsumer(Closeable):
    """Blocking fetches of explicit (topic, partition, offset) from one broker.

    Connection failures raise BrokerConnectionError; the next call reconnects. Partition
    errors raise the matching KafkaError subclass: OffsetOutOfRangeError,
    NotLeaderOrFollowerError, UnknownTopicOrPartitionError, ...
    """

    def __init__(self, host: str, port: int, timeout: float = 30.0, buffer_size: int = DEFAULT_FETCH_SIZE,
                 client_id: str = "logbus-simple-consumer", max_wait_ms: int = 0, min_bytes: int = 0,
                 security: ClientSecurity = PLAINTEXT) -> None:
        self.host = host
        self.security = security
        self.port = int(port)
        self.timeout = timeout
        self.buffer_size = buffer_size
        self.client_id = client_id
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self._conn: BrokerConnection | None = None

    @classmethod
    def from_address(cls, address: str, **kwargs: object) -> SimpleConsumer:
        host, _, port = address.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"broker address must be host:port, not {address!r}")
        return cls(host, int(port), **kwargs)  # type: ignore[arg-type]

    # connection ---------------------------------------------------------------------------------

    def _request(self, api_key: ApiKey, version: int, body: dict) -> dict:
        if self._conn is None:
            self._conn = BrokerConnection(self.host, self.port, client_id=self.client_id, timeout=self.timeout,
                                          security=self.security)
        try:
            return self._conn.request(api_key, version, body)
        except (BrokerConnectionError, OSError) as exc:
            self.close()
            if isinstance(exc, BrokerConnectionError):
                raise
            raise BrokerConnectionError(f"broker {self.host}:{self.port}: {exc}") from exc

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None

    # fetch --------------------------------------------------------------------------------------

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int | None = None,
              max_wait_ms: int | None = None, min_bytes: int | None = None) -> MessageSet:
        """Messages of one partition from ``offset`` on, at most about ``max_bytes`` of them.

        Raises OffsetOutOfRangeError, NotLeaderOrFollowerError, ... for the partition's error.
        """
        result = self.multifetch([(topic, partition, offset, max_bytes)], max_wait_ms, min_bytes)[(topic, partition)]
        if result.error is not None:
            raise result.error
        return result

    def fetch_raw(self, topic: str, partition: int, offset: int, max_bytes: int | None = None,
                  max_wait_ms: int | None = None, min_bytes: int | None = None) -> MessageSet:
        """Like ``fetch``, but the record bytes are left undecoded in ``.records`` (the set is
        empty and ``next_offset`` stays ``offset``): for callers with their own record decoding."""
        result = self.multifetch([(topic, partition, offset, max_bytes)], max_wait_ms, min_bytes,
                                 decode=False)[(topic, partition)]
        if result.error is not None:
            raise result.error
        return result

    def multifetch(self, requests: Sequence[tuple], max_wait_ms: int | None = None,
                   min_bytes: int | None = None, decode: bool = True) -> dict[tuple[str, int], MessageSet]:
        """One Fetch for several partitions: ``requests`` holds (topic, partition, offset[, max_bytes]).

        Returns {(topic, partition): MessageSet}; a partition's error is in ``.error`` (not raised).
        With ``decode=False`` the record bytes are left in ``.records`` instead of decoded.
        """
        topics: dict[str, list[dict]] = {}
        wanted: dict[tuple[str, int], int] = {}
        total = 0
        for req in requests:
            topic, partition, offset = req[0], int(req[1]), int(req[2])
            size = int(req[3]) if len(req) > 3 and req[3] is not None else self.buffer_size
            total += size
            wanted[(topic, partition)] = offset
            topics.setdefault(topic, []).append(
                {"partition": partition, "fetch_offset": offset, "partition_max_bytes": size})
        body = {
            "replica_id": -1,
            "max_wait_ms": self.max_wait_ms if max_wait_ms is None else max_wait_ms,
            "min_bytes": self.min_bytes if min_bytes is None else min_bytes,
            "max_bytes": min(max(total, 1), 0x7FFFFFFF),
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        }
        response = self._request(ApiKey.FETCH, FETCH_VERSION, body)
        if response.get("error_code"):
            err = error_for_code(response["error_code"], f"fetch failed on {self.host}:{self.port}")
            return {tp: MessageSet(tp[0], tp[1], next_offset=off, error=err) for tp, off in wanted.items()}
        results: dict[tuple[str, int], MessageSet] = {}
        for t in response["responses"]:
            topic = t["topic"]
            for p in t["partitions"]:
                partition = p["partition_index"]
                offset = wanted.get((topic, partition), 0)
                ms = MessageSet(topic, partition, next_offset=offset, high_watermark=p["high_watermark"],
                                log_start_offset=p["log_start_offset"])
                code = p["error_code"]
                if code:
                    try:
                        where = f" at offset {offset}" if code == ErrorCode.OFFSET_OUT_OF_RANGE else ""
                        _raise_for(code, topic, partition, where)
                    except KafkaError as exc:
                        ms.error = exc
                elif not decode:
                    ms.records = p["records"]
                else:
                    _, next_offset = decode_message_set(topic, partition, p["records"], offset, ms)
                    if next_offset > offset:
                        ms.next_offset = next_offset
                results[(topic, partition)] = ms
        for tp, off in wanted.items():
            if tp not in results:
                results[tp] = MessageSet(tp[0], tp[1], next_offset=off, error=UnknownTopicOrPartitionError(
                    f"broker {self.host}:{self.port} did not answer for {tp[0]}-{tp[1]}"))
        return results

    # offsets ------------------------------------------------------------------------------------

    def get_offsets_before(self, topic: str, partition: int, time: int, max_num_offsets: int = 1) -> list[int]:
        """Offsets before ``time`` (ms), or EARLIEST_TIME (-2) / LATEST_TIME (-1).

        ListOffsets v1+ answers one offset per partition, so the list holds at most one (for a
        timestamp: the first offset whose record time is >= ``time``; empty when none is).
        """
        body = {"replica_id": -1, "topics": [{"name": topic, "partitions": [{"partition_index": partition, "timestamp": time}]}]}
        response = self._request(ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, body)
        for t in response["topics"]:
            for p in t["partitions"]:
                if t["name"] == topic and p["partition_index"] == partition:
                    _raise_for(p["error_code"], topic, partition)
                    if p["offset"] < 0 or max_num_offsets < 1:
                        return []
                    return [p["offset"]]
        raise UnknownTopicOrPartitionError(f"broker {self.host}:{self.port} did not answer for {topic}-{partition}")

    def earliest_offset(self, topic: str, partition: int) -> int:
        return self.get_offsets_before(topic, partition, EARLIEST_TIME)[0]

    def latest_offset(self, topic: str, partition: int) -> int:
        return self.get_offsets_before(topic, partition, LATEST_TIME)[0]

    # metadata -----------------------------------------------------------------------------------

    def topic_metadata(self, topics: Sequence[str] | None = None) -> dict:
        """The raw Metadata response (v8) for ``topics`` (None: all); topics are not auto-created."""
        body = {"topics": None if topics is None else [{"name": t} for t in topics], "allow_auto_topic_creation": False}
        return self._request(ApiKey.METADATA, METADATA_VERSION, body)

    def partitions_for(self, topic: str) -> list[int]:
        """The sorted partition ids of ``topic``; UnknownTopicOrPartitionError if it does not exist."""
        md = self.topic_metadata([topic])
        for t in md["topics"]:
            if t["name"] == topic:
                if t["error_code"]:
                    _raise_topic(t["error_code"], topic)
                return sorted(p["partition_index"] for p in t["partitions"])
        raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")

    def find_leader(self, topic: str, partition: int) -> tuple[int, str, int]:
        """(broker id, host, port) of the partition's leader, from Metadata."""
        md = self.topic_metadata([topic])
        brokers = {b["node_id"]: (b["host"], b["port"]) for b in md["brokers"]}
        for t in md["topics"]:
            if t["name"] != topic:
                continue
            if t["error_code"]:
                _raise_topic(t["error_code"], topic)
            for p in t["partitions"]:
                if p["partition_index"] == partition:
                    leader = p["leader_id"]
                    if leader < 0 or leader not in brokers:
                        raise LeaderNotAvailableError(f"{topic}-{partition} has no leader right now")
                    host, port = brokers[leader]
                    return leader, host, port
            raise UnknownTopicOrPartitionError(f"topic {topic!r} has no partition {partition}")
        raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")


def _raise_topic(code: int, topic: str) -> None:
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
    if code == ErrorCode.LEADER_NOT_AVAILABLE:
        raise LeaderNotAvailableError(f"topic {topic!r} has no leader yet")
    raise error_for_code(code, f"{ErrorCode(code).name if code in ErrorCode._value2member_map_ else code} for topic {topic!r}")
