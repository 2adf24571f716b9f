"""The producer's buffer: records appended into per-partition record batches, and the futures
that tell the sender's results back to the caller.

Each batch builds its records' v2 bytes incrementally in one ``bytearray`` as they are
appended (varints of small numbers come from a table), so sending a batch costs one header,
one compression and one CRC, whatever its record count. Thread-safe: user threads append
under the accumulator's lock, the sender thread drains under it.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from broker.protocol.compression import compress
from broker.protocol.records.codec import NULL, SMALL_VARINTS, sized, varint
from broker.protocol.records.layout import NO_SEQUENCE, build_batch
from broker.protocol.types import encode_varint

log = logging.getLogger(__name__)

#: zigzag varints of 0 .. 16383: record lengths, offset deltas, small timestamp deltas.
_VARINT = VARINT_TABLE = SMALL_VARINTS
_TABLE_SIZE = len(_VARINT)
_NULL = NULL
_NO_HEADERS = b"\x00"
_ATTRIBUTES = b"\x00"
#: Bytes a record may need beyond its key and value (length, attributes, deltas, sizes).
RECORD_OVERHEAD = 5 + 1 + 10 + 5 + 5 + 5 + 5

_CALLBACK_LOCK = threading.Lock()


_varint, _sized = varint, sized  # the names mirror.origin imports


def encode_headers(headers: Any) -> bytes:
    """A record's header block (count then key/value pairs) from pairs or a dict."""
    if not headers:
        return _NO_HEADERS
    items = headers.items() if isinstance(headers, dict) else headers
    out = bytearray()
    count = 0
    for hkey, hvalue in items:
        if not isinstance(hkey, str):
            raise TypeError(f"header keys must be str, not {type(hkey).__name__}")
        if isinstance(hvalue, str):
            hvalue = hvalue.encode("utf-8")
        elif hvalue is not None and not isinstance(hvalue, bytes):
            hvalue = bytes(hvalue)
        out += _sized(hkey.encode("utf-8"))
        out += _sized(hvalue)
        count += 1
    return _varint(count) + bytes(out)


class RecordMetadata(NamedTuple):
    """Where a record landed: ``offset`` is -1 when acks=0 (the broker does not answer)."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class ProducerBatch:
    """The records of one partition that go to the broker in one record batch."""

    __slots__ = (
        "topic", "partition", "buf", "count", "base_ts", "max_ts", "created", "size_limit",
        "count_limit", "full", "sync", "done", "base_offset", "log_append_time", "exception",
        "callbacks", "sequence", "encoded", "attempts", "retry_at", "order", "completed",
    )

    def __init__(self, topic: str, partition: int, size_limit: int, count_limit: int, order: int) -> None:
        self.topic = topic
        self.partition = partition
        self.buf = bytearray()
        self.count = 0
        self.base_ts = 0
        self.max_ts = -1
        self.created = time.monotonic()
        self.size_limit = size_limit
        self.count_limit = count_limit
        self.full = False
        self.sync = False
        self.done = threading.Event()
        self.base_offset = -1
        self.log_append_time = -1
        self.exception: BaseException | None = None
        self.callbacks: list | None = None
        self.sequence: int | None = None
        self.encoded: bytes | None = None
        self.attempts = 0
        self.retry_at = 0.0
        self.order = order
        self.completed = False

    @classmethod
    def of_records(cls, topic: str, partition: int, records: bytes, count: int, base_ts: int,
                   max_ts: int) -> ProducerBatch:
        """A full batch around records framed elsewhere (offset deltas 0..count-1, timestamp
        deltas against ``base_ts``); ``build`` adds the header and CRC as for any batch."""
        batch = cls(topic, partition, len(records), count, 0)
        batch.buf = records  # type: ignore[assignment]  # bytes: never appended to (full)
        batch.count = count
        batch.base_ts = base_ts
        batch.max_ts = max_ts
        batch.full = True
        return batch

    def try_append(self, ts: int, key: bytes | None, value: bytes | None, headers: bytes) -> int:
        """Append one record; its index in the batch, or -1 when it does not fit."""
        index = self.count
        return index if self.try_append_many([(ts, key, value, headers)], 0) == 1 else -1

    def try_append_many(self, records: list, start: int, max_record_size: int = 1 << 62) -> int:
        """Append ``records[start:]`` (``(timestamp, key, value, header block)`` tuples, bytes or
        None) while they fit; returns the index of the first record not appended.

        The first record of an empty batch always goes in (like ``try_append``). A record whose
        encoded size exceeds ``max_record_size`` raises MessageTooLargeError before it is appended.
        """
        n = len(records)
        if start >= n:
            return start
        buf = self.buf
        count = self.count
        if count == 0:
            self.base_ts = records[start][0]
        base_ts = self.base_ts
        max_ts = self.max_ts
        limit = self.size_limit
        count_limit = self.count_limit
        table = _VARINT
        join = b"".join
        i = start
        try:
            while i < n:
                ts, key, value, headers = records[i]
                delta = ts - base_ts
                tsd = table[delta] if 0 <= delta < _TABLE_SIZE else encode_varint(delta)
                od = table[count] if count < _TABLE_SIZE else encode_varint(count)
                if key is None:
                    kl, key = _NULL, b""
                else:
                    k = len(key)
                    kl = table[k] if k < _TABLE_SIZE else encode_varint(k)
                if value is None:
                    vl, value = _NULL, b""
                else:
                    k = len(value)
                    vl = table[k] if k < _TABLE_SIZE else encode_varint(k)
                size = 1 + len(tsd) + len(od) + len(kl) + len(key) + len(vl) + len(value) + len(headers)
                if size > max_record_size:
                    from broker.protocol.errors import MessageTooLargeError

                    raise MessageTooLargeError(
                        f"MESSAGE_TOO_LARGE: a record to {self.topic}-{self.partition} is {size} bytes when "
                        f"serialized, larger than max.request.size allows")
                if count and len(buf) + size + 5 > limit:
                    self.full = True
                    break
                buf += join((table[size] if size < _TABLE_SIZE else encode_varint(size), _ATTRIBUTES, tsd, od,
                             kl, key, vl, value, headers))
                if ts > max_ts:
                    max_ts = ts
                count += 1
                i += 1
                if count >= count_limit or len(buf) >= limit:
                    self.full = True
                    break
        finally:
            self.count = count
            self.max_ts = max_ts
        return i

    def build(self, compression: int, producer_id: int, producer_epoch: int) -> bytes:
        """The v2 record batch (base offset 0), compressed once; cached for retries."""
        if self.encoded is None:
            payload = compress(compression, self.buf) if compression else self.buf
            self.encoded = build_batch(payload, count=self.count, base_ts=self.base_ts, max_ts=self.max_ts,
                                       attributes=compression, producer_id=producer_id, producer_epoch=producer_epoch,
                                       base_sequence=NO_SEQUENCE if self.sequence is None else self.sequence)
        return self.encoded

    # completion ---------------------------------------------------------------------------

    def complete(self, base_offset: int, log_append_time: int = -1, exception: BaseException | None = None) -> None:
        """Record the outcome, wake waiters and run callbacks (on the calling thread)."""
        with _CALLBACK_LOCK:
            if self.completed:
                return
            self.completed = True
            self.base_offset = base_offset
            self.log_append_time = log_append_time
            self.exception = exception
            callbacks, self.callbacks = self.callbacks, None
        self.done.set()
        for future, kind, fn in callbacks or ():
            future._run_callback(kind, fn)

    def add_callback(self, future: FutureRecordMetadata, kind: int, fn: Callable) -> None:
        with _CALLBACK_LOCK:
            if not self.completed:
                if self.callbacks is None:
                    self.callbacks = []
                self.callbacks.append((future, kind, fn))
                return
        future._run_callback(kind, fn)


CB_SUCCESS, CB_ERROR, CB_DONE, CB_JAVA = 0, 1, 2, 3


class FutureRecordMetadata:
    """What ``Producer.send`` returns: ``get()`` waits for the record's RecordMetadata.

    ``partition`` is known at once; ``offset`` waits. Callbacks run on the producer's sender
    thread (or at once, on the caller's, when the record is already done)."""

    __slots__ = ("_batch", "_index", "timestamp")

    def __init__(self, batch: ProducerBatch, index: int, timestamp: int) -> None:
        self._batch = batch
        self._index = index
        self.timestamp = timestamp

    @property
    def topic(self) -> str:
        return self._batch.topic

    @property
    def partition(self) -> int:
        return self._batch.partition

    @property
    def offset(self) -> int:
        return self.get().offset

    def done(self) -> bool:
        return self._batch.completed

    def succeeded(self) -> bool:
        return self._batch.completed and self._batch.exception is None

    def failed(self) -> bool:
        return self._batch.completed and self._batch.exception is not None

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """The record's metadata; raises the delivery error, or TimeoutError after ``timeout`` s."""
        batch = self._batch
        if not batch.completed and not batch.done.wait(timeout):
            from broker.client.metadata import KafkaTimeoutError

            raise KafkaTimeoutError(f"record to {batch.topic}-{batch.partition} not acknowledged within {timeout} s")
        if batch.exception is not None:
            raise batch.exception
        return self._metadata()

    result = get

    def exception(self, timeout: float | None = None) -> BaseException | None:
        try:
            self.get(timeout)
        except TimeoutError:
            raise
        except BaseException as exc:  # noqa: BLE001 - returned, not swallowed
            return exc
        return None

    def _metadata(self) -> RecordMetadata:
        batch = self._batch
        offset = batch.base_offset + self._index if batch.base_offset >= 0 else -1
        ts = batch.log_append_time if batch.log_append_time >= 0 else self.timestamp
        return RecordMetadata(batch.topic, batch.partition, offset, ts)

    def add_callback(self, fn: Callable[[RecordMetadata], Any]) -> FutureRecordMetadata:
        """``fn(metadata)`` when the record is acknowledged."""
        self._batch.add_callback(self, CB_SUCCESS, fn)
        return self

    def add_errback(self, fn: Callable[[BaseException], Any]) -> FutureRecordMetadata:
        """``fn(exception)`` when the record fails."""
        self._batch.add_callback(self, CB_ERROR, fn)
        return self

    def add_done_callback(self, fn: Callable[[FutureRecordMetadata], Any]) -> FutureRecordMetadata:
        """``fn(future)`` when the record is done either way."""
        self._batch.add_callback(self, CB_DONE, fn)
        return self

    def _run_callback(self, kind: int, fn: Callable) -> None:
        exc = self._batch.exception
        try:
            if kind == CB_JAVA:
                fn(None if exc is not None else self._metadata(), exc)
            elif kind == CB_DONE:
                fn(self)
            elif kind == CB_SUCCESS and exc is None:
                fn(self._metadata())
            elif kind == CB_ERROR and exc is not None:
                fn(exc)
        except Exception:
            log.exception("producer callback %r failed", fn)

    def __repr__(self) -> str:
        state = "pending" if not self.done() else ("failed" if self.failed() else "done")
        return f"<FutureRecordMetadata {self.topic}-{self.partition} {state}>"


@dataclass(eq=False, repr=False)
class RecordAccumulator:
    """Per-partition queues of batches; user threads append, the sender drains."""

    batch_size: int
    batch_count_limit: int
    buffer_memory: int
    on_new_batch: Callable[[str, int], None]  # a new batch for (topic, partition): sticky partitioning moves on
    wakeup: Callable[[], None]  # the sender has something to send

    def __post_init__(self) -> None:
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)  # memory freed, batches completed
        self.queues: defaultdict[tuple[str, int], deque[ProducerBatch]] = defaultdict(deque)
        self.buffered = 0
        self.incomplete: set[ProducerBatch] = set()
        self.flushing = 0
        self.closing = False
        self._order = itertools.count()
        self._waiters = 0

    def append(
        self,
        topic: str,
        partition: int,
        ts: int,
        key: bytes | None,
        value: bytes | None,
        headers: bytes,
        max_block: float,
        sync: bool = False,
    ) -> FutureRecordMetadata:
        with self.lock:
            if self.buffered >= self.buffer_memory:
                self._wait_for_memory(max_block)
            queue = self.queues[(topic, partition)]
            last = queue[-1] if queue else None
            open_batch = last if last is not None and last.encoded is None and not last.full else None
            index = before = -1
            if open_batch is not None:
                before = len(open_batch.buf)
                index = open_batch.try_append(ts, key, value, headers)
            if open_batch is None or index < 0:
                self.on_new_batch(topic, partition)  # sticky partitioning moves on
                batch = self._new_batch(topic, partition, ts, key, value, headers)
                queue.append(batch)
                index = 0
                wake = True
                self.buffered += len(batch.buf)
            else:
                batch = open_batch
                wake = batch.full
                self.buffered += len(batch.buf) - before
            if sync:
                batch.sync = True
                wake = True
        if wake:
            self.wakeup()
        return FutureRecordMetadata(batch, index, ts)

    def append_many(
        self,
        topic: str,
        partition: int,
        records: list,
        max_block: float,
        sync: bool = False,
        max_record_size: int = 1 << 62,
    ) -> list[ProducerBatch]:
        """Append many records to one partition in new batches of their own; no futures.

        ``records``: ``(timestamp, key, value, header block)`` tuples (see
        ``ProducerBatch.try_append_many``). The records are encoded into fresh batches without
        the lock (so the sender and other appenders are not held up), then queued in order under
        one lock acquisition. Returns those batches (so a caller can add one callback per batch).
        Waits for buffer memory once (a call may go over buffer.memory by its own size). A
        record larger than ``max_record_size`` raises MessageTooLargeError; the records before
        it are queued."""
        batches: list[ProducerBatch] = []
        n = len(records)
        i = 0
        try:
            while i < n:
                batch = ProducerBatch(topic, partition, self.batch_size, self.batch_count_limit, 0)
                try:
                    i = batch.try_append_many(records, i, max_record_size)
                finally:
                    if batch.count:
                        batches.append(batch)
        finally:
            if batches:
                self._enqueue(topic, partition, batches, max_block, sync)
        return batches

    def append_raw(self, batch: ProducerBatch, max_block: float, sync: bool = False) -> None:
        """Queue a batch built with ``ProducerBatch.of_records`` after the partition's others."""
        self._enqueue(batch.topic, batch.partition, [batch], max_block, sync)

    def _enqueue(self, topic: str, partition: int, batches: list[ProducerBatch], max_block: float, sync: bool) -> None:
        with self.lock:
            if self.buffered >= self.buffer_memory:
                self._wait_for_memory(max_block)
            queue = self.queues[(topic, partition)]
            for batch in batches:
                self.on_new_batch(topic, partition)
                batch.order = next(self._order)
                batch.sync = sync
                queue.append(batch)
                self.incomplete.add(batch)
                self.buffered += len(batch.buf)
        self.wakeup()

    def _new_batch(self, topic: str, partition: int, ts: int, key, value, headers: bytes) -> ProducerBatch:
        size = len(key or b"") + len(value or b"") + len(headers) + RECORD_OVERHEAD
        batch = ProducerBatch(topic, partition, max(self.batch_size, size), self.batch_count_limit, next(self._order))
        batch.try_append(ts, key, value, headers)
        # reserve a batch's worth of memory (or the record's, when it is bigger)
        self.incomplete.add(batch)
        return batch

    def _wait_for_memory(self, max_block: float) -> None:
        deadline = time.monotonic() + max_block
        self._waiters += 1
        try:
            while self.buffered >= self.buffer_memory and not self.closing:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    from broker.client.metadata import KafkaTimeoutError

                    raise KafkaTimeoutError(
                        f"buffer.memory ({self.buffer_memory} bytes) stayed full for max.block.ms ({max_block * 1000:.0f} ms)"
                    )
                self.changed.wait(remaining)
        finally:
            self._waiters -= 1

    def requeue(self, batch: ProducerBatch) -> None:
        """Put a failed batch back for a retry, in creation order among its partition's batches."""
        with self.lock:
            queue = self.queues[(batch.topic, batch.partition)]
            i = 0
            while i < len(queue) and queue[i].order < batch.order:
                i += 1
            queue.insert(i, batch)

    def release(self, batches: Iterable[ProducerBatch]) -> None:
        """Batches done: free their memory and wake flushers and blocked appenders."""
        with self.lock:
            for batch in batches:
                if batch in self.incomplete:
                    self.incomplete.discard(batch)
                    self.buffered -= len(batch.buf)
            self.changed.notify_all()

    def has_unsent(self) -> bool:
        return any(self.queues.values())

    def wait_empty(self, timeout: float | None) -> bool:
        """Until every batch appended so far is done; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.lock:
            while self.incomplete:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self.changed.wait(remaining if remaining is not None else 1.0)
        return True
