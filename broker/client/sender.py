"""The producer's sender thread: drains ready batches to their leaders, keeps Produce requests in
flight per broker, completes batches from the answers and retries what failed (Kafka's Sender).

It reads its settings from the Producer that starts it (``retries``, ``request_timeout``...)
and reports a fatal error (InitProducerId refused) back to it.
"""

from __future__ import annotations

import logging
import os
import select
import struct
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.client.accumulator import ProducerBatch
from broker.client.connection import BrokerConnection, BrokerConnectionError
from broker.client.metadata import KafkaTimeoutError
from broker.protocol.errors import ErrorCode, MessageTooLargeError, error_class, error_for_code
from broker.protocol.messages import ApiKey
from broker.protocol.records import layout as B

if TYPE_CHECKING:
    from broker.client.producer import Producer

log = logging.getLogger(__name__)

PRODUCE_VERSION = 7
INIT_PRODUCER_ID_VERSION = 1


class ProducerClosedError(RuntimeError):
    """``send`` after ``close``; also the error of records still unsent when the producer closes."""


# --------------------------------------------------------------------------- the sender

_REQ_HEAD = struct.Struct(">hhi")
_ACKS_TIMEOUT = struct.Struct(">hi")
_INT32 = struct.Struct(">i")
_PART_HEAD = struct.Struct(">ii")
_NULL_STRING = b"\xff\xff"


@dataclass(slots=True, eq=False)
class _InFlight:
    """One Produce request awaiting its answer: its batches by (topic, partition), when it was sent."""

    correlation_id: int
    batches: dict
    sent: float


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
        by_topic: dict[str, list[tuple[int, bytes]]] = {}  # topic -> (partition, its encoded batch)
        for batch in batches:
            tp = (batch.topic, batch.partition)
            if batch.encoded is None and p.idempotent and batch.sequence is None:
                batch.sequence = self.next_sequence.get(tp, 0)
                self.next_sequence[tp] = batch.sequence + batch.count
            encoded = batch.build(p.compression, self.producer_id, self.producer_epoch)  # built once, then kept
            by_topic.setdefault(batch.topic, []).append((batch.partition, encoded))
        parts = [_NULL_STRING, _ACKS_TIMEOUT.pack(p.acks, int(p.request_timeout * 1000)), _INT32.pack(len(by_topic))]
        for topic, topic_batches in by_topic.items():
            name = topic.encode("utf-8")
            parts.append(struct.pack(">h", len(name)) + name + _INT32.pack(len(topic_batches)))
            for partition, encoded in topic_batches:
                parts.append(_PART_HEAD.pack(partition, len(encoded)))
                parts.append(encoded)
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
            conn = BrokerConnection(address[0], address[1], client_id=self.p.client_id, timeout=min(self.p.request_timeout, 10.0),
                                    security=self.p.settings.security)
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
        # an answer already inside a TLS connection's buffer is ready, though its socket is not readable
        buffered = [n for n in waiting.values() if self.conns[n].pending()]
        fds = list(waiting) + [self._wake_r]
        try:
            readable, _, _ = select.select(fds, [], [], 0 if buffered else timeout)
        except (OSError, ValueError):
            readable = []
        for node in buffered:
            if self.conns[node].fileno() not in readable:
                self._receive(node)
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
