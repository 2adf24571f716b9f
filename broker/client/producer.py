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
``broker.client.metadata``).
"""

from __future__ import annotations

import logging
import os
import select
import struct
import threading
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
from broker.client.connection import BrokerConnection, BrokerConnectionError
from broker.client.metadata import ClusterMetadata, KafkaTimeoutError
from broker.client.partitioner import load_partitioner
from broker.config import ConfigError
from broker.protocol.compression import CODEC_IDS, CODEC_NAMES
from broker.protocol.errors import ErrorCode, MessageTooLargeError, error_class, error_for_code
from broker.protocol.messages import ApiKey
from broker.protocol.records import layout as B

log = logging.getLogger(__name__)

PRODUCE_VERSION = 7
INIT_PRODUCER_ID_VERSION = 1

__all__ = [
    "Producer",
    "ProducerClosedError",
    "RecordMetadata",
    "FutureRecordMetadata",
    "KafkaTimeoutError",
    "DEFAULTS",
]


class ProducerClosedError(RuntimeError):
    """``send`` after ``close``."""


# --------------------------------------------------------------------------- configuration

#: Kafka's key names and defaults (linger.ms 5 as in Kafka 4).
DEFAULTS: dict[str, str] = {
    "bootstrap.servers": "",
    "zookeeper.connect": "",
    "client.id": "logbus-producer",
    "acks": "all",
    "compression.type": "none",
    "batch.size": "16384",
    "batch.num.messages": "0",
    "linger.ms": "5",
    "buffer.memory": "33554432",
    "max.block.ms": "60000",
    "max.request.size": "1048576",
    "retries": "2147483647",
    "retry.backoff.ms": "100",
    "request.timeout.ms": "30000",
    "delivery.timeout.ms": "120000",
    "metadata.max.age.ms": "300000",
    "max.in.flight.requests.per.connection": "5",
    "enable.idempotence": "",
    "partitioner.class": "",
    "producer.type": "async",
    "allow.auto.create.topics": "true",
    "zookeeper.session.timeout.ms": "18000",
    "zookeeper.connection.timeout.ms": "",
    "security.protocol": "PLAINTEXT",
    "send.buffer.bytes": "131072",
}

#: Older (0.8) and short names -> Kafka's current name.
ALIASES: dict[str, str] = {
    "metadata.broker.list": "bootstrap.servers",
    "request.required.acks": "acks",
    "compression.codec": "compression.type",
    "queue.buffering.max.ms": "linger.ms",
    "message.send.max.retries": "retries",
    "max.in.flight": "max.in.flight.requests.per.connection",
    "metadata.max.wait.ms": "max.block.ms",
    "metadata.fetch.timeout.ms": "max.block.ms",
    "request.timeout.ms": "request.timeout.ms",
    "queue.enqueue.timeout.ms": "max.block.ms",
    "zk.connect": "zookeeper.connect",
}

#: Known keys that a Python producer has no use for (Java serializers, JMX, ...): accepted quietly.
IGNORED = {
    "key.serializer", "value.serializer", "serializer.class", "key.serializer.class",
    "receive.buffer.bytes", "connections.max.idle.ms", "metric.reporters", "metrics.num.samples",
    "metrics.sample.window.ms", "reconnect.backoff.ms", "reconnect.backoff.max.ms",
    "interceptor.classes", "transaction.timeout.ms", "client.dns.lookup", "topic.metadata.refresh.interval.ms",
    "queue.buffering.max.messages", "send.buffer.bytes", "linger.bytes",
}


def normalise_config(config: Mapping[str, Any] | None = None, **kwargs: Any) -> dict[str, str]:
    """Merge ``config`` and keyword overrides (``batch_size=...``), resolve aliases, add defaults."""
    merged: dict[str, Any] = dict(config or {})
    merged.update({k.replace("_", "."): v for k, v in kwargs.items()})
    result = dict(DEFAULTS)
    explicit: set[str] = set()
    for key, value in merged.items():
        key = key.strip()
        name = ALIASES.get(key, key)
        if name not in DEFAULTS and name not in IGNORED:
            log.warning("unknown producer configuration %s=%s (ignored)", key, value)
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        result[name] = str(value).strip()
        explicit.add(name)
    result["_explicit"] = ",".join(sorted(explicit))
    return result


def _int(config: Mapping[str, str], key: str, minimum: int | None = 0) -> int:
    raw = config[key]
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"Invalid value {raw!r} for configuration {key}: not an integer", key) from None
    if minimum is not None and value < minimum:
        raise ConfigError(f"Invalid value {raw!r} for configuration {key}: must be at least {minimum}", key)
    return value


def _bool(config: Mapping[str, str], key: str) -> bool:
    raw = config[key].lower()
    if raw in ("true", "1", "yes"):
        return True
    if raw in ("false", "0", "no"):
        return False
    raise ConfigError(f"Invalid value {config[key]!r} for configuration {key}: expected true or false", key)


def _acks(raw: str) -> int:
    value = raw.strip().lower()
    if value in ("all", "-1"):
        return -1
    if value in ("0", "1"):
        return int(value)
    raise ConfigError(f"Invalid value {raw!r} for configuration acks: expected all, -1, 0 or 1", "acks")


def _codec(raw: str) -> int:
    value = raw.strip().lower()
    if value.isdigit() and int(value) in CODEC_NAMES:
        return int(value)
    if value not in CODEC_IDS:
        raise ConfigError(
            f"Invalid value {raw!r} for configuration compression.type: expected one of none, gzip, snappy, lz4, zstd",
            "compression.type",
        )
    return CODEC_IDS[value]


def _to_bytes(value: Any, what: str) -> bytes | None:
    if value is None or type(value) is bytes:
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"record {what} must be bytes or str (or set {what}_serializer), not {type(value).__name__}")




# --------------------------------------------------------------------------- the sender

_REQ_HEAD = struct.Struct(">hhi")
_ACKS_TIMEOUT = struct.Struct(">hi")
_INT32 = struct.Struct(">i")
_PART_HEAD = struct.Struct(">ii")
_NULL_STRING = b"\xff\xff"


class _InFlight:
    __slots__ = ("correlation_id", "batches", "sent")

    def __init__(self, correlation_id: int, batches: dict, sent: float) -> None:
        self.correlation_id = correlation_id
        self.batches = batches
        self.sent = sent


class Sender(threading.Thread):
    """Drains ready batches to their leaders and completes them from the answers."""

    def __init__(self, producer: Producer) -> None:
        super().__init__(name=f"logbus-producer-sender-{producer.client_id}", daemon=True)
        p = producer
        self.p = p
        self.acc = p._accumulator
        self.metadata = p._metadata
        self.conns: dict[int, BrokerConnection] = {}
        self.in_flight: dict[int, list[_InFlight]] = {}
        self.node_backoff: dict[int, float] = {}
        self.tp_in_flight: dict[tuple[str, int], int] = {}
        self.next_sequence: dict[tuple[str, int], int] = {}
        self.acked_sequence: dict[tuple[str, int], int] = {}
        self.producer_id = B.NO_PRODUCER_ID
        self.producer_epoch = -1
        self.running = True
        self.force_close = False
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._wake_pending = False
        self._last_metadata_try = 0.0
        self._last_expiry_check = 0.0
        self.fatal: BaseException | None = None

    def wakeup(self) -> None:
        if not self._wake_pending:
            self._wake_pending = True
            try:
                os.write(self._wake_w, b"x")
            except OSError:
                pass

    # main loop -----------------------------------------------------------------------------

    def run(self) -> None:
        try:
            while True:
                try:
                    self._run_once()
                except Exception:  # never let the sender die silently
                    log.exception("producer sender loop failed; continuing")
                    time.sleep(0.1)
                if self.force_close:
                    break
                if not self.running and not self.acc.incomplete:
                    break
        finally:
            self._abort_all(ProducerClosedError("producer closed before the record was sent"))
            for conn in self.conns.values():
                conn.close()
            self.conns.clear()
            os.close(self._wake_r)
            os.close(self._wake_w)

    def _run_once(self) -> None:
        p = self.p
        now = time.monotonic()
        if self.metadata.stale and now - self._last_metadata_try >= p.retry_backoff:
            self._last_metadata_try = now
            self.metadata.maybe_update(timeout=min(p.request_timeout, 5.0))
        if now - self._last_expiry_check >= 0.05:
            self._last_expiry_check = now
            self._expire(now)
        if p.idempotent and self.producer_id < 0:
            if not self._init_producer_id():
                self._poll(p.retry_backoff)
                return
        ready, next_wake = self._drain(now)
        for node, batches in ready:
            self._send(node, batches, now)
        timeout = max(0.0, min(next_wake - time.monotonic(), 0.2))
        self._poll(timeout)

    # draining ------------------------------------------------------------------------------

    def _capacity(self, node: int, now: float) -> int:
        if self.node_backoff.get(node, 0.0) > now:
            return 0
        return self.p.max_in_flight - len(self.in_flight.get(node, ()))

    def _drain(self, now: float) -> tuple[list[tuple[int, list[ProducerBatch]]], float]:
        """Pop ready batches: per leader, up to its free in-flight slots of one batch per partition."""
        p = self.p
        acc = self.acc
        next_wake = now + 0.2
        urgent = acc.flushing > 0 or acc.closing or not self.running
        requests: list[tuple[int, list[ProducerBatch]]] = []
        with acc.lock:
            capacity: dict[int, int] = {}
            rounds = 0
            while True:
                per_node: dict[int, list[ProducerBatch]] = {}
                sizes: dict[int, int] = {}
                for tp, queue in acc.queues.items():
                    if not queue:
                        continue
                    batch = queue[0]
                    leader = self.metadata.leader(tp[0], tp[1])
                    if leader is None:
                        self.metadata.request_update()
                        continue
                    if leader not in capacity:
                        capacity[leader] = self._capacity(leader, now)
                    if capacity[leader] <= 0:
                        continue
                    if batch.attempts:
                        if batch.retry_at > now:
                            next_wake = min(next_wake, batch.retry_at)
                            continue
                        if self.tp_in_flight.get(tp, 0):
                            continue  # retries go one at a time, in order
                    if not (batch.full or batch.sync or urgent or len(queue) > 1 or batch.attempts):
                        due = batch.created + p.linger
                        if due > now:
                            next_wake = min(next_wake, due)
                            continue
                    size = sizes.get(leader, 0) + len(batch.buf) + B.HEADER_SIZE
                    if size > p.max_request_size and leader in per_node:
                        continue
                    queue.popleft()
                    per_node.setdefault(leader, []).append(batch)
                    sizes[leader] = size
                if not per_node:
                    break
                for node, batches in per_node.items():
                    capacity[node] -= 1
                    requests.append((node, batches))
                rounds += 1
                if rounds >= p.max_in_flight:
                    break
        return requests, next_wake

    def _send(self, node: int, batches: list[ProducerBatch], now: float) -> None:
        p = self.p
        conn = self.conns.get(node)
        if conn is None:
            conn = self._connect(node)
            if conn is None:
                for batch in batches:
                    self._retry_or_fail(batch, ErrorCode.NETWORK_EXCEPTION, "cannot connect to the leader", now, count=False)
                return
        by_topic: dict[str, list[ProducerBatch]] = {}
        for batch in batches:
            tp = (batch.topic, batch.partition)
            if batch.encoded is None:
                if p.idempotent and batch.sequence is None:
                    batch.sequence = self.next_sequence.get(tp, 0)
                    self.next_sequence[tp] = batch.sequence + batch.count
                batch.build(p.compression, self.producer_id, self.producer_epoch)
            by_topic.setdefault(batch.topic, []).append(batch)
        parts = [_NULL_STRING, _ACKS_TIMEOUT.pack(p.acks, int(p.request_timeout * 1000)), _INT32.pack(len(by_topic))]
        for topic, topic_batches in by_topic.items():
            name = topic.encode("utf-8")
            parts.append(struct.pack(">h", len(name)) + name + _INT32.pack(len(topic_batches)))
            for batch in topic_batches:
                parts.append(_PART_HEAD.pack(batch.partition, len(batch.encoded)))
                parts.append(batch.encoded)
        body = b"".join(parts)
        try:
            cid = conn.send_encoded(ApiKey.PRODUCE, PRODUCE_VERSION, body, expect_response=p.acks != 0)
        except BrokerConnectionError as exc:
            self._connection_failed(node, str(exc), extra=batches)
            return
        if p.acks == 0:
            for batch in batches:
                batch.complete(-1)
            self.acc.release(batches)
            return
        self.in_flight.setdefault(node, []).append(
            _InFlight(cid, {(b.topic, b.partition): b for b in batches}, time.monotonic())
        )
        for batch in batches:
            tp = (batch.topic, batch.partition)
            self.tp_in_flight[tp] = self.tp_in_flight.get(tp, 0) + 1

    def _connect(self, node: int) -> BrokerConnection | None:
        address = self.metadata.broker_address(node)
        if address is None:
            self.metadata.request_update()
            return None
        try:
            conn = BrokerConnection(address[0], address[1], client_id=self.p.client_id, timeout=min(self.p.request_timeout, 10.0))
        except (BrokerConnectionError, OSError) as exc:
            log.debug("cannot connect to broker %s: %s", node, exc)
            self.node_backoff[node] = time.monotonic() + self.p.retry_backoff
            self.metadata.request_update()
            return None
        conn._sock.settimeout(self.p.request_timeout)
        self.conns[node] = conn
        return conn

    # answers -------------------------------------------------------------------------------

    def _poll(self, timeout: float) -> None:
        waiting = {self.conns[n].fileno(): n for n, reqs in self.in_flight.items() if reqs and n in self.conns}
        fds = list(waiting) + [self._wake_r]
        try:
            readable, _, _ = select.select(fds, [], [], timeout)
        except (OSError, ValueError):
            readable = []
        for fd in readable:
            if fd == self._wake_r:
                self._wake_pending = False
                try:
                    while os.read(self._wake_r, 4096):
                        pass
                except (BlockingIOError, OSError):
                    pass
                continue
            self._receive(waiting[fd])
        self._check_request_timeouts()

    def _receive(self, node: int) -> None:
        conn = self.conns.get(node)
        requests = self.in_flight.get(node)
        if conn is None or not requests:
            return
        try:
            _, response = conn.receive_response()
        except (BrokerConnectionError, OSError, ValueError) as exc:
            self._connection_failed(node, str(exc))
            return
        request = requests.pop(0)
        now = time.monotonic()
        done: list[ProducerBatch] = []
        answered = set()
        for topic in response["responses"]:
            for part in topic["partition_responses"]:
                tp = (topic["name"], part["index"])
                batch = request.batches.get(tp)
                if batch is None:
                    continue
                answered.add(tp)
                self._tp_done(tp)
                code = part["error_code"]
                if code == ErrorCode.NONE:
                    self._acked(tp, batch)
                    batch.complete(part["base_offset"], part.get("log_append_time_ms", -1))
                    done.append(batch)
                elif code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                    self._acked(tp, batch)
                    batch.complete(-1)
                    done.append(batch)
                elif self._retry_or_fail(batch, code, "", now):
                    done.append(batch)
        for tp, batch in request.batches.items():
            if tp not in answered:
                self._tp_done(tp)
                if self._retry_or_fail(batch, ErrorCode.NETWORK_EXCEPTION, "partition missing from the answer", now):
                    done.append(batch)
        if done:
            self.acc.release(done)

    def _acked(self, tp: tuple[str, int], batch: ProducerBatch) -> None:
        if batch.sequence is not None:
            end = batch.sequence + batch.count
            if end > self.acked_sequence.get(tp, 0):
                self.acked_sequence[tp] = end

    def _tp_done(self, tp: tuple[str, int]) -> None:
        n = self.tp_in_flight.get(tp, 0) - 1
        if n > 0:
            self.tp_in_flight[tp] = n
        else:
            self.tp_in_flight.pop(tp, None)

    def _retry_or_fail(self, batch: ProducerBatch, code: int, detail: str, now: float, count: bool = True) -> bool:
        """Requeue ``batch`` for a retry, or fail it; True when it is done (failed)."""
        p = self.p
        tp = (batch.topic, batch.partition)
        error = error_class(code)
        retriable = error.retriable
        if code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and batch.sequence is not None:
            # an earlier batch of this partition failed and is being retried: wait for it
            retriable = batch.sequence > self.acked_sequence.get(tp, 0)
        if error.invalid_metadata:
            self.metadata.request_update()
        if count:
            batch.attempts += 1
        expired = now - batch.created >= p.delivery_timeout
        if retriable and batch.attempts <= p.retries and not expired and not self.force_close:
            batch.attempts = max(batch.attempts, 1)
            batch.retry_at = now + p.retry_backoff
            self.acc.requeue(batch)
            return False
        batch.complete(-1, -1, self._error(batch, code, detail, expired))
        return True

    def _error(self, batch: ProducerBatch, code: int, detail: str, expired: bool) -> BaseException:
        where = f"{batch.topic}-{batch.partition}"
        if expired:
            return KafkaTimeoutError(
                f"Expiring {batch.count} record(s) for {where}: {self.p.delivery_timeout * 1000:.0f} ms "
                f"(delivery.timeout.ms) passed since batch creation"
                + (f"; last error: {ErrorCode(code).name}" + (f" ({detail})" if detail else "") if code else "")
            )
        if code == ErrorCode.MESSAGE_TOO_LARGE:
            return MessageTooLargeError(
                f"MESSAGE_TOO_LARGE: the record batch for {where} ({len(batch.encoded or b'')} bytes, "
                f"{batch.count} record(s)) is larger than the broker accepts (message.max.bytes / max.message.bytes)"
            )
        try:
            name = ErrorCode(code).name
        except ValueError:
            name = f"error {code}"
        return error_for_code(code, f"{name}: producing to {where} failed" + (f": {detail}" if detail else ""))

    def _connection_failed(self, node: int, reason: str, extra: list[ProducerBatch] | None = None) -> None:
        conn = self.conns.pop(node, None)
        if conn is not None:
            conn.close()
        self.node_backoff[node] = time.monotonic() + self.p.retry_backoff
        self.metadata.request_update()
        now = time.monotonic()
        failed: list[ProducerBatch] = []
        for request in self.in_flight.pop(node, []):
            for tp, batch in request.batches.items():
                self._tp_done(tp)
                if self._retry_or_fail(batch, ErrorCode.NETWORK_EXCEPTION, reason, now):
                    failed.append(batch)
        for batch in extra or ():
            if self._retry_or_fail(batch, ErrorCode.NETWORK_EXCEPTION, reason, now):
                failed.append(batch)
        if failed:
            self.acc.release(failed)

    def _check_request_timeouts(self) -> None:
        now = time.monotonic()
        for node, requests in list(self.in_flight.items()):
            if requests and now - requests[0].sent > self.p.request_timeout:
                self._connection_failed(node, f"no answer within request.timeout.ms ({self.p.request_timeout * 1000:.0f} ms)")

    def _expire(self, now: float) -> None:
        """Fail batches still queued after delivery.timeout.ms."""
        limit = self.p.delivery_timeout
        expired: list[ProducerBatch] = []
        with self.acc.lock:
            for queue in self.acc.queues.values():
                while queue and now - queue[0].created >= limit:
                    expired.append(queue.popleft())
        for batch in expired:
            batch.complete(-1, -1, self._error(batch, 0, "", True))
        if expired:
            self.acc.release(expired)

    def _abort_all(self, exc: BaseException) -> None:
        leftovers: list[ProducerBatch] = []
        with self.acc.lock:
            for queue in self.acc.queues.values():
                leftovers.extend(queue)
                queue.clear()
        for requests in self.in_flight.values():
            for request in requests:
                leftovers.extend(request.batches.values())
        self.in_flight.clear()
        leftovers.extend(b for b in list(self.acc.incomplete) if b not in leftovers)
        for batch in leftovers:
            batch.complete(-1, -1, exc)
        self.acc.release(leftovers)

    # idempotence ---------------------------------------------------------------------------

    def _init_producer_id(self) -> bool:
        brokers = self.metadata.brokers()
        if not brokers:
            self.metadata.request_update()
            return False
        for node in sorted(brokers):
            if node in self.in_flight and self.in_flight[node]:
                continue
            conn = self.conns.get(node) or self._connect(node)
            if conn is None:
                continue
            try:
                response = conn.request(
                    ApiKey.INIT_PRODUCER_ID, INIT_PRODUCER_ID_VERSION, {"transactional_id": None, "transaction_timeout_ms": 60000}
                )
            except BrokerConnectionError as exc:
                self._connection_failed(node, str(exc))
                continue
            code = response["error_code"]
            if code == ErrorCode.NONE:
                self.producer_id = response["producer_id"]
                self.producer_epoch = response["producer_epoch"]
                return True
            if error_class(code).retriable:
                continue
            self.fatal = error_for_code(code, "InitProducerId failed; set enable.idempotence=false to produce without it")
            self.p._fatal(self.fatal)
            return False
        return False


# --------------------------------------------------------------------------- the producer

class Producer:
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
        c = normalise_config(config, **kwargs)
        explicit = set(c.pop("_explicit").split(","))
        self.config = c
        self.client_id = c["client.id"]
        self.acks = _acks(c["acks"])
        self.compression = _codec(c["compression.type"])
        self.batch_size = _int(c, "batch.size", 1)
        count_limit = _int(c, "batch.num.messages", 0)
        if count_limit and "batch.size" not in explicit:
            self.batch_size = max(self.batch_size, _int(c, "max.request.size", 1) - 1024)
        self.batch_count_limit = count_limit or (1 << 31)
        self.linger = _int(c, "linger.ms") / 1000.0
        self.buffer_memory = _int(c, "buffer.memory", 1)
        self.max_block = _int(c, "max.block.ms") / 1000.0
        self.max_request_size = _int(c, "max.request.size", 1)
        self.retries = _int(c, "retries")
        self.retry_backoff = _int(c, "retry.backoff.ms") / 1000.0
        self.request_timeout = _int(c, "request.timeout.ms", 1) / 1000.0
        self.delivery_timeout = _int(c, "delivery.timeout.ms", 1) / 1000.0
        self.max_in_flight = _int(c, "max.in.flight.requests.per.connection", 1)
        self.sync = c["producer.type"].lower() == "sync"
        if c["producer.type"].lower() not in ("sync", "async"):
            raise ConfigError(f"Invalid value {c['producer.type']!r} for configuration producer.type: expected sync or async", "producer.type")
        if c["security.protocol"].upper() != "PLAINTEXT":
            raise ConfigError(f"security.protocol {c['security.protocol']} is not supported yet (only PLAINTEXT)", "security.protocol")
        if c["enable.idempotence"]:
            self.idempotent = _bool(c, "enable.idempotence")
            if self.idempotent and self.acks != -1:
                raise ConfigError("enable.idempotence=true needs acks=all", "enable.idempotence")
            if self.idempotent and self.max_in_flight > 5:
                raise ConfigError("enable.idempotence=true needs max.in.flight.requests.per.connection <= 5", "enable.idempotence")
        else:
            # Kafka's default: idempotent unless the settings conflict with it
            self.idempotent = self.acks == -1 and self.max_in_flight <= 5 and self.retries > 0
        self.key_serializer = key_serializer
        self.value_serializer = value_serializer
        try:
            self.partitioner = load_partitioner(c["partitioner.class"] or None, c)
        except ValueError as exc:
            raise ConfigError(str(exc), "partitioner.class") from None
        if not c["bootstrap.servers"] and not c["zookeeper.connect"]:
            raise ConfigError("set bootstrap.servers (or zookeeper.connect) to find the brokers", "bootstrap.servers")
        zk_conn_timeout = c["zookeeper.connection.timeout.ms"]
        try:
            self._metadata = ClusterMetadata(
                c["bootstrap.servers"] or None,
                c["zookeeper.connect"] or None,
                client_id=self.client_id,
                request_timeout_ms=int(self.request_timeout * 1000),
                retry_backoff_ms=int(self.retry_backoff * 1000),
                metadata_max_age_ms=_int(c, "metadata.max.age.ms"),
                allow_auto_create_topics=_bool(c, "allow.auto.create.topics"),
                zookeeper_session_timeout_ms=_int(c, "zookeeper.session.timeout.ms", 1),
                zookeeper_connection_timeout_ms=int(zk_conn_timeout) if zk_conn_timeout else min(int(self.max_block * 1000), 30000) or 1,
            )
        except ValueError as exc:
            raise ConfigError(str(exc), "bootstrap.servers") from None
        self._accumulator = RecordAccumulator(
            self.batch_size, self.batch_count_limit, self.buffer_memory, self.max_request_size,
            self.partitioner.on_new_batch, self._wakeup,
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
                f"MESSAGE_TOO_LARGE: the record is {size} bytes when serialized, larger than max.request.size ({self.max_request_size})"
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

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # internals -----------------------------------------------------------------------------

    def _wakeup(self) -> None:
        sender = getattr(self, "_sender", None)
        if sender is not None:
            sender.wakeup()

    def _fatal(self, exc: BaseException) -> None:
        self._fatal_error = exc
        self._sender._abort_all(exc)


def producer_config_from_properties(path: str) -> dict[str, str]:
    """A producer.properties file as a config dict (Kafka's format)."""
    from broker.config import load_properties

    return load_properties(path)
