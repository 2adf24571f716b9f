"""logbus's Producer: Kafka's producer for plain Python programs, Spark executors and Airflow.

No reactor: blocking sockets and one background sender thread. ``send`` is thread-safe and
returns a FutureRecordMetadata at once (async mode, the default) or after the broker
acknowledged the record (``producer.type=sync``).

Records are appended into per-partition batches (``batch.size`` bytes, ``linger.ms``; the
0.8 names ``batch.num.messages`` and ``queue.buffering.max.ms`` work too); the sender
compresses each batch once (``compression.type``), groups ready batches by leader and keeps
up to ``max.in.flight.requests.per.connection`` Produce requests in flight per broker. With
idempotence (on by default with acks=all) every batch carries the producer id and a
sequence number, so a retry after a lost answer or a broker restart is recognised by the
broker and never written twice; retries keep each partition's order.

Brokers are found through ``bootstrap.servers`` or ``zookeeper.connect`` (see
``broker.client.metadata``). Kafka 0.8's split: settings in ``producer_config``, batching in
``accumulator``, the network in ``sender``, and here the public Producer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from broker.client.accumulator import (
    CB_JAVA,
    RECORD_OVERHEAD,
    FutureRecordMetadata,
    ProducerBatch,
    RecordAccumulator,
    RecordMetadata,
    encode_headers,
)
from broker.client.closeable import Closeable
from broker.client.metadata import ClusterMetadata, KafkaTimeoutError
from broker.client.partitioner import load_partitioner
from broker.client.producer_config import DEFAULTS, ProducerConfig
from broker.client.sender import ProducerClosedError, Sender
from broker.configdef import ConfigError
from broker.protocol.errors import MessageTooLargeError
from broker.protocol.records import layout as B

__all__ = [
    "Producer",
    "ProducerClosedError",
    "RecordMetadata",
    "FutureRecordMetadata",
    "KafkaTimeoutError",
    "DEFAULTS",
    "ProducerConfig",
]


class Producer(Closeable):
    """A Kafka producer: ``send`` records, ``flush``, ``close``.

    ``config`` takes Kafka's key names (``bootstrap.servers``, ``acks``, ``linger.ms``...);
    keyword arguments with underscores work too (``Producer(bootstrap_servers=...)``).
    ``key_serializer``/``value_serializer`` turn other objects into bytes; str is UTF-8.
    """

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        key_serializer: Callable[[Any], bytes] | None = None,
        value_serializer: Callable[[Any], bytes] | None = None,
        **kwargs: Any,
    ) -> None:
        settings = ProducerConfig.from_props(config, **kwargs)
        self.settings = settings
        self.config = settings.props
        self.client_id = settings.client_id
        self.acks = settings.acks
        self.compression = settings.compression
        self.batch_size = settings.batch_size
        self.batch_count_limit = settings.batch_count_limit
        self.linger = settings.linger
        self.buffer_memory = settings.buffer_memory
        self.max_block = settings.max_block
        self.max_request_size = settings.max_request_size
        self.retries = settings.retries
        self.retry_backoff = settings.retry_backoff
        self.request_timeout = settings.request_timeout
        self.delivery_timeout = settings.delivery_timeout
        self.max_in_flight = settings.max_in_flight
        self.sync = settings.sync
        self.idempotent = settings.idempotent
        self.key_serializer = key_serializer
        self.value_serializer = value_serializer
        try:
            self.partitioner = load_partitioner(settings.partitioner_class, settings.props)
        except ValueError as exc:
            raise ConfigError(str(exc), "partitioner.class") from None
        try:
            self._metadata = ClusterMetadata(
                settings.bootstrap_servers or None,
                settings.zookeeper_connect or None,
                client_id=self.client_id,
                request_timeout_ms=int(self.request_timeout * 1000),
                retry_backoff_ms=int(self.retry_backoff * 1000),
                metadata_max_age_ms=settings.metadata_max_age_ms,
                allow_auto_create_topics=settings.allow_auto_create_topics,
                zookeeper_session_timeout_ms=settings.zookeeper_session_timeout_ms,
                zookeeper_connection_timeout_ms=settings.zookeeper_connection_timeout_ms,
                security=settings.security,
            )
        except ValueError as exc:
            raise ConfigError(str(exc), "bootstrap.servers") from None
        self._accumulator = RecordAccumulator(
            self.batch_size, self.batch_count_limit, self.buffer_memory, self.partitioner.on_new_batch, self._wakeup,
        )
        self._closed = False
        self._fatal_error: BaseException | None = None
        self._sender = Sender(self)
        self._sender.start()

    # public API ----------------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        headers: Any = None,
        timestamp: int | None = None,
        callback: Callable[[RecordMetadata | None, BaseException | None], Any] | None = None,
    ) -> FutureRecordMetadata:
        """Queue one record; the future gives its partition and offset.

        ``callback(metadata, exception)`` runs when it is done (Java's onCompletion). In sync
        mode this waits for the acknowledgement and raises the delivery error."""
        if self._closed:
            raise ProducerClosedError("cannot send: the producer is closed")
        if self._fatal_error is not None:
            raise self._fatal_error
        if self.key_serializer is not None and key is not None:
            key = self.key_serializer(key)
        if self.value_serializer is not None and value is not None:
            value = self.value_serializer(value)
        if key is not None and type(key) is not bytes:
            key = _to_bytes(key, "key")
        if value is not None and type(value) is not bytes:
            value = _to_bytes(value, "value")
        header_bytes = encode_headers(headers) if headers else b"\x00"
        size = (len(key) if key else 0) + (len(value) if value else 0) + len(header_bytes) + RECORD_OVERHEAD + B.HEADER_SIZE
        if size > self.max_request_size:
            raise MessageTooLargeError(
                f"MESSAGE_TOO_LARGE: the record is {size} bytes when serialized, "
                f"larger than max.request.size ({self.max_request_size})"
            )
        info = self._metadata.topic(topic)
        if info is None or not info.leaders:
            info = self._metadata.fetch([topic], self.max_block)[topic]
        partitions = info.partitions
        if partition is None:
            partition = self.partitioner.partition(topic, key, partitions, info.available)
        elif partition not in info.leaders:
            raise ValueError(f"partition {partition} of topic {topic!r} does not exist (it has {len(partitions)})")
        if timestamp is None:
            timestamp = int(time.time() * 1000)
        future = self._accumulator.append(topic, partition, timestamp, key, value, header_bytes, self.max_block, self.sync)
        if callback is not None:
            future._batch.add_callback(future, CB_JAVA, callback)
        if self.sync:
            future.get(self.delivery_timeout + self.request_timeout)
        return future

    produce = send

    def send_batch(
        self,
        topic: str,
        partition: int | None,
        records: list,
        callback: Callable[[RecordMetadata | None, BaseException | None], Any] | None = None,
    ) -> int:
        """Queue many records of one topic in bulk; returns how many batches took them.

        A fast path for programs that copy records (the mirror-maker): ``records`` is a list of
        ``(timestamp_ms, key, value, header_block)`` tuples where key and value are bytes or None
        and ``header_block`` is the encoded header block (``encode_headers(...)``, ``b"\\x00"``
        for none); no serializers run. With ``partition`` None each record is placed by the
        partitioner (by key), keeping their order per partition. There are no per-record
        futures: ``callback(metadata, exception)`` runs once per record batch that took some of
        the records, when that batch is done (metadata names the batch's partition and first
        offset); an exception means every record of that batch failed."""
        if self._closed:
            raise ProducerClosedError("cannot send: the producer is closed")
        if self._fatal_error is not None:
            raise self._fatal_error
        if not records:
            return 0
        info = self._metadata.topic(topic)
        if info is None or not info.leaders:
            info = self._metadata.fetch([topic], self.max_block)[topic]
        limit = self.max_request_size - B.HEADER_SIZE
        acc = self._accumulator
        if partition is not None:
            if partition not in info.leaders:
                raise ValueError(f"partition {partition} of topic {topic!r} does not exist (it has {len(info.partitions)})")
            groups = {partition: records}
        else:
            partitions, available = info.partitions, info.available
            choose = self.partitioner.partition
            groups = {}
            for record in records:
                p = choose(topic, record[1], partitions, available)
                group = groups.get(p)
                if group is None:
                    groups[p] = [record]
                else:
                    group.append(record)
        touched: list[ProducerBatch] = []
        for p, group in groups.items():
            touched.extend(acc.append_many(topic, p, group, self.max_block, self.sync, limit))
        self._batches_done(touched, callback)
        return len(touched)

    def send_raw_batch(
        self,
        topic: str,
        partition: int,
        records: bytes,
        count: int,
        base_ts: int,
        max_ts: int,
        callback: Callable[[RecordMetadata | None, BaseException | None], Any] | None = None,
    ) -> None:
        """Queue one record batch whose records are framed already (the mirror's raw path).

        ``records``: ``count`` v2 records, uncompressed, offset deltas 0..count-1, timestamp
        deltas against ``base_ts``; ``max_ts`` their largest timestamp. The producer adds what
        every batch gets: compression.type, producer id/epoch, sequence, CRC. ``callback`` runs
        once, like a ``send_batch`` callback."""
        if self._closed:
            raise ProducerClosedError("cannot send: the producer is closed")
        if self._fatal_error is not None:
            raise self._fatal_error
        if count < 1:
            raise ValueError("a record batch needs at least one record")
        size = len(records) + B.HEADER_SIZE
        if size > self.max_request_size:
            raise MessageTooLargeError(
                f"MESSAGE_TOO_LARGE: a batch to {topic}-{partition} is {size} bytes, larger than max.request.size "
                f"({self.max_request_size})")
        info = self._metadata.topic(topic)
        if info is None or not info.leaders:
            info = self._metadata.fetch([topic], self.max_block)[topic]
        if partition not in info.leaders:
            raise ValueError(f"partition {partition} of topic {topic!r} does not exist (it has {len(info.partitions)})")
        batch = ProducerBatch.of_records(topic, partition, records, count, base_ts, max_ts)
        self._accumulator.append_raw(batch, self.max_block, self.sync)
        self._batches_done([batch], callback)

    def _batches_done(self, batches: list[ProducerBatch], callback: Callable | None) -> None:
        """One ``callback`` per queued batch; in sync mode, wait for them."""
        if callback is not None or self.sync:
            futures = [FutureRecordMetadata(batch, 0, batch.base_ts) for batch in batches]
            if callback is not None:
                for future in futures:
                    future._batch.add_callback(future, CB_JAVA, callback)
            if self.sync:
                for future in futures:
                    future.get(self.delivery_timeout + self.request_timeout)

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids (fetching metadata, and creating it when allowed)."""
        info = self._metadata.topic(topic)
        if info is None or not info.leaders:
            info = self._metadata.fetch([topic], self.max_block)[topic]
        return info.partitions

    def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered and wait until each record is acknowledged or failed.

        Raises KafkaTimeoutError when ``timeout`` seconds pass first."""
        acc = self._accumulator
        with acc.lock:
            acc.flushing += 1
        try:
            self._wakeup()
            if not acc.wait_empty(timeout):
                raise KafkaTimeoutError(f"flush did not finish within {timeout} s")
        finally:
            with acc.lock:
                acc.flushing -= 1

    def close(self, timeout: float | None = None) -> None:
        """Flush (up to ``timeout`` seconds), stop the sender and close the connections.

        Records still unsent after the timeout fail with ProducerClosedError."""
        if self._closed:
            return
        self._closed = True
        acc = self._accumulator
        with acc.lock:
            acc.closing = True
            acc.changed.notify_all()
        self._sender.running = False
        self._wakeup()
        self._sender.join(timeout)
        if self._sender.is_alive():
            self._sender.force_close = True
            self._wakeup()
            self._sender.join(5.0)
        self._metadata.close()

    def metrics(self) -> dict[str, Any]:
        """A few counters (buffered bytes, unfinished batches)."""
        return {"buffered_bytes": self._accumulator.buffered, "incomplete_batches": len(self._accumulator.incomplete)}

    @property
    def metadata(self) -> ClusterMetadata:
        return self._metadata

    # internals -----------------------------------------------------------------------------

    def _wakeup(self) -> None:
        sender = getattr(self, "_sender", None)
        if sender is not None:
            sender.wakeup()

    def _fatal(self, exc: BaseException) -> None:
        self._fatal_error = exc
        self._sender._abort_all(exc)


def _to_bytes(value: Any, what: str) -> bytes | None:
    if value is None or type(value) is bytes:
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"record {what} must be bytes or str (or set {what}_serializer), not {type(value).__name__}")


def producer_config_from_properties(path: str) -> dict[str, str]:
    """A producer.properties file as a config dict (Kafka's format)."""
    from broker.config import load_properties

    return load_properties(path)
