"""Exact resume: where the aggregate cluster really is for a source partition, read from its tail.

The committed source offset trails what the mirror has copied by up to one commit interval, so a
mirror that restarts (or takes over a partition in a rebalance) from it would copy that window
again. Every copy carries ``logbus.origin`` = ``<cluster id>:<topic>:<partition>:<offset>`` as its
last origin header, so the aggregate cluster itself says how far the copying got:

- **Partition kept** (source and target have the same partition count): copies of source
  partition ``p`` land in target partition ``p``, in source-offset order (one idempotent producer
  stream per partition). Reading the target partition backwards from its high watermark, the
  first window holding a copy of ``p`` gives its highest origin offset ``h``; copying resumes at
  ``h + 1`` when that is past the committed offset.
- **Placed by key** (the counts differ): copies of ``p`` are spread over every target partition,
  each in order, but the partitions are not written in step. Every target partition is read back
  to the first copy below the committed offset; the origin offsets found at or above it are
  skipped when the source records come again (``Resume.skip``), nothing else is.

The bound: at most ``resume.scan.max.records`` records per target partition are read (in windows
of ``SCAN_WINDOW``). Nothing found within it (other writers filled the tail, or none of it was
written by a mirror): the committed offset is used, as before, and the log says so once per
target partition. A header that does not parse is reported once with its offset and ignored.

The same reader also probes forwards (``first_copy``: the first copy of a source partition at or
after a target offset, reading over copies of other sources), which offset translation
(``mirror.translate``) binary-searches with.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from broker.client.connection import BrokerConnectionError
from broker.client.security import PLAINTEXT, ClientSecurity
from broker.client.simple_consumer import SimpleConsumer
from broker.protocol.errors import KafkaError
from broker.protocol.origin import HEADER, Origin, parse_origin

log = logging.getLogger("mirror.resume")

SCAN_WINDOW = 2000  # records read per step back
FETCH_BYTES = 4 * 1024 * 1024  # bytes asked for per fetch within a window
DEFAULT_SCAN_MAX_RECORDS = 100_000
PROBE_BYTES = 32 * 1024  # a forward probe's first fetch (it usually stops at its first records)


class ScanBoundExceeded(Exception):
    """A forward probe read its bound of records without finding a copy of the source partition."""


@dataclass(frozen=True)
class Resume:
    """Where copying a source partition resumes: ``start`` (None: where the consumer would start
    anyway) and the origin offsets at or after it already in the target (placed by key only)."""

    start: int | None
    skip: frozenset[int] = field(default_factory=frozenset)
    found: bool = False


@dataclass
class _Scan:
    """What one target partition's tail holds of one source partition."""

    offsets: list[int] = field(default_factory=list)  # origin offsets found, any order
    origin_headers: int = 0  # records seen with a parsable origin header of any source
    records: int = 0


class TailScanner:
    """Reads target partitions' tails through their leaders (one SimpleConsumer per broker)."""

    def __init__(self, bootstrap: str, max_records: int = DEFAULT_SCAN_MAX_RECORDS, timeout: float = 30.0,
                 security: ClientSecurity = PLAINTEXT) -> None:
        self.bootstrap = [a.strip() for a in bootstrap.split(",") if a.strip()]
        self.security = security
        self.max_records = max_records
        self.timeout = timeout
        self._brokers: dict[tuple[str, int], SimpleConsumer] = {}
        self._lock = threading.Lock()
        self._warned: set[tuple[str, int, str]] = set()
        self.records_read = 0

    @property
    def enabled(self) -> bool:
        return self.max_records > 0

    def close(self) -> None:
        with self._lock:
            for consumer in self._brokers.values():
                consumer.close()
            self._brokers.clear()

    # ------------------------------------------------------------------ the answer

    def resume(self, source_cluster: str, topic: str, partition: int, committed: int | None,
               target: str, target_partitions: Iterable[int], kept: bool) -> Resume:
        """Where to resume copying ``topic``-``partition`` of ``source_cluster`` into ``target``.

        ``kept``: copies land in target partition ``partition`` only; else in any of
        ``target_partitions``. Trouble reading the target gives the committed offset (logged)."""
        if not self.enabled:
            return Resume(committed)
        wanted = (source_cluster, topic, partition)
        parts = [partition] if kept else sorted(target_partitions)
        found: list[int] = []
        with self._lock:
            for target_partition in parts:
                try:
                    scan = self._scan(target, target_partition, wanted, None if kept else committed, kept)
                except (KafkaError, BrokerConnectionError, OSError) as exc:
                    log.warning("exact resume of %s-%d: reading %s-%d failed (%s): resuming from the committed "
                                "offset %s", topic, partition, target, target_partition, exc, committed)
                    return Resume(committed)
                if scan.records and not scan.origin_headers:
                    self._warn_once(target, target_partition, "no-origin",
                                    f"none of the last {scan.records} records of {target}-{target_partition} has a "
                                    f"{HEADER} header (written by something other than a mirror?): where they are "
                                    "the only ones, copying resumes from the committed offset")
                found.extend(scan.offsets)
        if not found:
            return Resume(committed)
        if kept:
            highest = max(found) + 1
            return Resume(highest if committed is None or highest > committed else committed, found=True)
        floor = committed if committed is not None else 0
        return Resume(committed, frozenset(o for o in found if o >= floor), found=True)

    # ------------------------------------------------------------------ reading

    def _scan(self, target: str, target_partition: int, wanted: tuple[str, str, int], floor: int | None,
              kept: bool) -> _Scan:
        """Read back from the high watermark: for ``kept`` until a window holds a copy of
        ``wanted``; otherwise until a copy below ``floor`` (or the log start, or the bound)."""
        consumer = self._leader(target, target_partition)
        try:
            end = consumer.latest_offset(target, target_partition)
            start = consumer.earliest_offset(target, target_partition)
        except KafkaError:
            self._reconnect()
            raise
        out = _Scan()
        hi = end
        while hi > start and out.records < self.max_records:
            lo = max(start, hi - min(SCAN_WINDOW, self.max_records - out.records))
            before = len(out.offsets)
            lowest = self._read_window(consumer, target, target_partition, lo, hi, wanted, out)
            hi = lo
            if kept and len(out.offsets) > before:
                break
            if not kept and floor is not None and lowest is not None and lowest < floor:
                break
        self.records_read += out.records
        return out

    def _read_window(self, consumer: SimpleConsumer, target: str, target_partition: int, lo: int, hi: int,
                     wanted: tuple[str, str, int], out: _Scan) -> int | None:
        """Records ``[lo, hi)``: note the origin offsets of ``wanted``; returns the lowest one seen."""
        lowest: int | None = None
        for _, origin in self._origins(consumer, target, target_partition, lo, hi, FETCH_BYTES):
            out.records += 1
            if origin is None:
                continue
            out.origin_headers += 1
            if (origin.cluster_id, origin.topic, origin.partition) == wanted:
                out.offsets.append(origin.offset)
                lowest = origin.offset if lowest is None else min(lowest, origin.offset)
        return lowest

    def _origins(self, consumer: SimpleConsumer, target: str, target_partition: int, lo: int, hi: int,
                 fetch_bytes: int) -> Iterator[tuple[int, Origin | None]]:
        """(target offset, last origin or None) of each record in ``[lo, hi)``, reading forwards;
        the first fetch asks for ``fetch_bytes``, each next one for four times more (up to FETCH_BYTES)."""
        offset = lo
        while offset < hi:
            messages = consumer.fetch(target, target_partition, offset, fetch_bytes)
            fetch_bytes = min(FETCH_BYTES, fetch_bytes * 4)
            if not messages:
                return
            for m in messages:
                if m.offset >= hi:
                    return
                if m.offset >= offset:
                    yield m.offset, self._last_origin(m.headers, target, target_partition, m.offset)
            offset = max(messages.next_offset, messages[-1].offset + 1)

    # ------------------------------------------------------------------ forward probes (offset translation)

    def bounds(self, target: str, target_partition: int) -> tuple[int, int]:
        """The target partition's log start and high watermark."""
        with self._lock:
            consumer = self._leader(target, target_partition)
            try:
                return (consumer.earliest_offset(target, target_partition),
                        consumer.latest_offset(target, target_partition))
            except KafkaError:
                self._reconnect()
                raise

    def first_copy(self, target: str, target_partition: int, wanted: tuple[str, str, int], lo: int, hi: int,
                   max_records: int | None = None) -> tuple[int, int] | None:
        """The first copy of source partition ``wanted`` at target offset ``lo`` or later (before
        ``hi``): (its target offset, its origin offset); None when there is none. Copies of other
        sources are read over. ``ScanBoundExceeded`` after ``max_records`` (default: the scanner's
        bound) records without one."""
        bound = self.max_records if max_records is None else max_records
        read = 0
        with self._lock:
            consumer = self._leader(target, target_partition)
            try:
                for offset, origin in self._origins(consumer, target, target_partition, lo, hi, PROBE_BYTES):
                    read += 1
                    if origin is not None and (origin.cluster_id, origin.topic, origin.partition) == wanted:
                        return offset, origin.offset
                    if read >= bound:
                        raise ScanBoundExceeded(f"{target}-{target_partition}: no copy of {':'.join(map(str, wanted))} "
                                                f"among {read} records from offset {lo}")
            except KafkaError:
                self._reconnect()
                raise
            finally:
                self.records_read += read
        return None

    def _last_origin(self, headers: list, target: str, target_partition: int, offset: int) -> Origin | None:
        """The record's newest origin header (the hop into this cluster), None when it has none."""
        for key, value in reversed(headers or ()):
            if key != HEADER:
                continue
            origin = parse_origin(value)
            if origin is None:
                self._warn_once(target, target_partition, "bad-header",
                                f"{target}-{target_partition} offset {offset}: {HEADER} header {value!r} does not "
                                "parse (<cluster id>:<topic>:<partition>:<offset>); ignored")
            return origin
        return None

    def _leader(self, target: str, target_partition: int) -> SimpleConsumer:
        last: Exception | None = None
        for address in self.bootstrap:
            try:
                probe = self._connection(*_split(address))
                _, host, port = probe.find_leader(target, target_partition)
                return self._connection(host, port)
            except (BrokerConnectionError, OSError) as exc:
                last = exc
        raise BrokerConnectionError(f"no broker of {','.join(self.bootstrap)} answered: {last}")

    def _connection(self, host: str, port: int) -> SimpleConsumer:
        consumer = self._brokers.get((host, port))
        if consumer is None:
            consumer = self._brokers[(host, port)] = SimpleConsumer(host, port, timeout=self.timeout, security=self.security,
                                                                    client_id="logbus-mirror-resume")
        return consumer

    def _reconnect(self) -> None:
        """A leader moved: connect again next time (cheap: connections, not state)."""
        for consumer in self._brokers.values():
            consumer.close()

    def _warn_once(self, target: str, target_partition: int, kind: str, message: str) -> None:
        if (target, target_partition, kind) not in self._warned:
            self._warned.add((target, target_partition, kind))
            log.warning("exact resume: %s", message)


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)
