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

import struct
import zlib
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

import crc32c

from broker.client.connection import BrokerConnection, BrokerConnectionError
from broker.protocol import batch as B
from broker.protocol.compression import decompress
from broker.protocol.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    KafkaError,
    LeaderNotAvailableError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from broker.protocol.messages import ApiKey
from broker.protocol.records import decode_batches
from broker.protocol.types import decode_varint, decode_varlong

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
    "iter_fetched_batches",
    "FetchedBatch",
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
# A tight record parser: records are read straight from one bytes object, with the common
# one- and two-byte varints decoded inline, and turned into MessageAndMetadata tuples without
# intermediate objects. CRCs are checked per batch (crc32c is C). Legacy v0/v1 message sets
# go through broker.protocol.records.

_PREFIX = struct.Struct(">qi")
_HEADER = struct.Struct(">qiibIhiqqqhii")
_new = tuple.__new__
_MAM = MessageAndMetadata


def _parse_v2(topic: str, partition: int, batch: FetchedBatch, min_offset: int, out: list) -> None:
    buf, pos, end = batch.records()
    count, base_offset, base_ts, log_append = batch.count, batch.base_offset, batch.timestamp, batch.log_append
    append = out.append
    for _ in range(count):
        # record length (varint)
        b = buf[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            b2 = buf[pos + 1]
            if b2 < 0x80:
                raw = (b & 0x7F) | (b2 << 7)
                length = (raw >> 1) ^ -(raw & 1)
                pos += 2
            else:
                length, pos = decode_varint(buf, pos, end)
        rec_end = pos + length
        if length < 0 or rec_end > end:
            raise InvalidRecordError(f"record length {length} overruns the batch at offset {base_offset}")
        pos += 1  # attributes
        b = buf[pos]
        if b < 0x80:
            ts_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            ts_delta, pos = decode_varlong(buf, pos, rec_end)
        b = buf[pos]
        if b < 0x80:
            offset_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            offset_delta, pos = decode_varint(buf, pos, rec_end)
        # key
        b = buf[pos]
        if b == 1:  # -1: null key (the common case)
            key = None
            pos += 1
        else:
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                n, pos = decode_varint(buf, pos, rec_end)
            if n < 0:
                key = None
            else:
                key = buf[pos:pos + n]
                pos += n
        # value
        b = buf[pos]
        if b < 0x80:
            n = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            b2 = buf[pos + 1]
            if b2 < 0x80:
                raw = (b & 0x7F) | (b2 << 7)
                n = (raw >> 1) ^ -(raw & 1)
                pos += 2
            else:
                n, pos = decode_varint(buf, pos, rec_end)
        if n < 0:
            value = None
        else:
            value = buf[pos:pos + n]
            pos += n
        # headers
        b = buf[pos]
        if b == 0:
            headers = []
            pos += 1
        else:
            nh, pos = decode_varint(buf, pos, rec_end)
            headers = []
            for _h in range(nh):
                hn, pos = decode_varint(buf, pos, rec_end)
                if hn < 0:
                    raise InvalidRecordError(f"null header key in batch at offset {base_offset}")
                hkey = buf[pos:pos + hn].decode("utf-8")
                pos += hn
                hn, pos = decode_varint(buf, pos, rec_end)
                if hn < 0:
                    hvalue = None
                else:
                    hvalue = buf[pos:pos + hn]
                    pos += hn
                headers.append((hkey, hvalue))
        if pos != rec_end:
            raise InvalidRecordError(f"record in batch at offset {base_offset} does not match its length")
        offset = base_offset + offset_delta
        if offset >= min_offset:
            append(_new(_MAM, (topic, partition, offset, key, value, headers,
                               base_ts if log_append else base_ts + ts_delta)))
    if pos != end:
        raise InvalidRecordError(f"{end - pos} bytes after the last record of the batch at offset {base_offset}")


class FetchedBatch(NamedTuple):
    """One whole batch of fetched record bytes, ``data[at:at + size]``, as its header says.

    For a legacy v0/v1 message set (``magic`` < 2) only ``at``, ``size``, ``magic`` and
    ``base_offset`` mean anything; its next offset (-1 here) is known once it is decoded."""

    data: bytes | bytearray
    at: int
    size: int
    magic: int
    base_offset: int
    next_offset: int
    count: int
    attributes: int
    base_ts: int
    max_ts: int

    @property
    def end(self) -> int:
        return self.at + self.size

    @property
    def compression(self) -> int:
        return self.attributes & B.COMPRESSION_MASK

    @property
    def log_append(self) -> bool:
        return bool(self.attributes & B.TIMESTAMP_TYPE_MASK)

    @property
    def timestamp(self) -> int:
        """The base timestamp; with log-append time, the time of every record."""
        return self.max_ts if self.log_append else self.base_ts

    def readable(self, min_offset: int) -> bool:
        """A v2 data batch with records at or past ``min_offset``."""
        return (self.magic == B.CURRENT_MAGIC and not self.attributes & B.CONTROL_MASK and self.count > 0
                and self.next_offset > min_offset)

    def records(self) -> tuple[bytes | bytearray, int, int]:
        """(buffer, start, end) of the batch's records, decompressed when the batch is compressed."""
        start = self.at + B.HEADER_SIZE
        if not self.compression:
            return self.data, start, self.end
        try:
            payload = bytes(decompress(self.compression, memoryview(self.data)[start:self.end]))
        except (ValueError, zlib.error) as exc:
            raise InvalidRecordError(f"record batch at offset {self.base_offset} does not decompress: {exc}") from None
        return payload, 0, len(payload)


def iter_fetched_batches(data: bytes | bytearray, verify: bool = True) -> Iterator[FetchedBatch]:
    """The whole batches of fetched record bytes, in order; a trailing partial batch (a fetch cut
    at max_bytes) ends the walk. Checks lengths and magic, and with ``verify`` each v2 batch's
    CRC: CorruptRecordError / InvalidRecordError on bad data."""
    pos, end = 0, len(data)
    view = memoryview(data)
    while end - pos > B.MAGIC_POS:
        base_offset, length = _PREFIX.unpack_from(data, pos)
        size = length + B.LOG_OVERHEAD
        if length < 0:
            raise InvalidRecordError(f"negative batch length {length} at position {pos}")
        if pos + size > end:
            return
        magic = data[pos + B.MAGIC_POS]
        if magic == B.CURRENT_MAGIC:
            if size < B.HEADER_SIZE:
                raise InvalidRecordError(f"record batch length {length} is below the minimum at position {pos}")
            (_, _, _, _, crc, attributes, last_delta, base_ts, max_ts, _, _, _, count) = _HEADER.unpack_from(data, pos)
            if verify:
                actual = crc32c.crc32c(view[pos + B.ATTRIBUTES_POS:pos + size])
                if actual != crc:
                    raise CorruptRecordError(f"record batch CRC mismatch at offset {base_offset}: "
                                             f"stored {crc:#010x}, computed {actual:#010x}")
            yield FetchedBatch(data, pos, size, magic, base_offset, base_offset + last_delta + 1, count, attributes,
                               base_ts, max_ts)
        elif magic in (0, 1):
            yield FetchedBatch(data, pos, size, magic, base_offset, -1, 0, 0, -1, -1)
        else:
            raise InvalidRecordError(f"unknown record magic {magic} at position {pos}")
        pos += size


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
    for batch in iter_fetched_batches(buf):
        batch_next = batch.next_offset
        if batch.magic != B.CURRENT_MAGIC:
            for decoded in decode_batches(memoryview(buf)[batch.at:batch.end]):
                for r in decoded.records:
                    if r.offset >= min_offset:
                        out.append(_MAM(topic, partition, r.offset, r.key, r.value, list(r.headers), r.timestamp))
                batch_next = decoded.header.next_offset
        elif batch.readable(min_offset):
            try:
                _parse_v2(topic, partition, batch, min_offset, out)
            except (IndexError, UnicodeDecodeError, ValueError) as exc:
                if isinstance(exc, KafkaError):
                    raise
                raise InvalidRecordError(f"record batch at offset {batch.base_offset} does not parse: {exc}") from None
        next_offset = max(next_offset, batch_next)
    return out, next_offset


# --- the consumer -------------------------------------------------------------------------------

def _raise_for(code: int, topic: str, partition: int, what: str = "") -> None:
    if code == ErrorCode.LEADER_NOT_AVAILABLE:
        raise LeaderNotAvailableError(f"{topic}-{partition} has no leader right now")
    if code:
        name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else f"error {code}"
        raise error_for_code(code, f"{name} for {topic}-{partition}{what}")


class SimpleConsumer:
    """Blocking fetches of explicit (topic, partition, offset) from one broker.

    Connection failures raise BrokerConnectionError; the next call reconnects. Partition
    errors raise the matching KafkaError subclass: OffsetOutOfRangeError,
    NotLeaderOrFollowerError, UnknownTopicOrPartitionError, ...
    """

    def __init__(self, host: str, port: int, timeout: float = 30.0, buffer_size: int = DEFAULT_FETCH_SIZE,
                 client_id: str = "logbus-simple-consumer", max_wait_ms: int = 0, min_bytes: int = 0) -> None:
        self.host = host
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
            self._conn = BrokerConnection(self.host, self.port, client_id=self.client_id, timeout=self.timeout)
        try:
            return self._conn.request(api_key, version, body)  # type: ignore[return-value]
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

    def __enter__(self) -> SimpleConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
                        _raise_for(code, topic, partition, f" at offset {offset}" if code == ErrorCode.OFFSET_OUT_OF_RANGE else "")
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
