"""One load task: fetch a planned range from the partition's leader, decode it, write it.

Runs inside a Spark executor (or anywhere: no Spark import), so it carries everything it
needs in two picklable values: the ``RangeTask`` (which range) and the ``TaskContext``
(where the cluster and the warehouse are, and the policies).
"""

from __future__ import annotations

import json
import queue
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from broker.client.connection import BrokerConnectionError
from broker.client.security import PLAINTEXT, ClientSecurity
from broker.client.simple_consumer import (
    EARLIEST_TIME,
    LATEST_TIME,
    LeaderNotAvailableError,
    SimpleConsumer,
)
from broker.protocol.errors import (
    KafkaError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from pipelines import hours as hour_tally
from pipelines.config import TopicSpec
from pipelines.errors import LoadError, OutOfRangeError, TopicDeletedError
from pipelines.event_time import event_hours
from pipelines.faults import NO_FAULTS, LoadFaults
from pipelines.origin_index import NEW, NO_ORIGIN, OriginIndex, add_run
from pipelines.record_columns import RecordChunk, decode_chunk
from pipelines.task_stats import EMPTY, TOPIC_DELETED, TaskStats
from pipelines.writer import HOUR_MS, hour_buckets


@dataclass(frozen=True)
class RangeTask:
    index: int
    run_id: str
    topic: str
    partition: int
    start: int
    end: int
    spec: dict  # TopicSpec.to_dict()
    origins: dict | None = None  # the partition's origin index before this range (None: no deduplication)
    lookback: int | None = None  # with origins, a range after the first of its partition in the run: the origins of
                                 # [lookback, start), written by the ranges before it at the same time, are read first
    late: dict | None = None     # {"closed_below": hour, "policy", "arrival_hour"}: rows of hours below closed_below
                                 # are late (pipelines.plan, late_data); None: no hour of the partition has closed yet


@dataclass(frozen=True)
class TaskContext:
    brokers: tuple[str, ...]          # host:port of known brokers (leaders are looked up from them)
    warehouse: str
    webhdfs_user: str | None = None
    fetch_max_bytes: int = 1 << 20
    request_timeout_ms: int = 30_000
    out_of_range: str = "fail"
    compression: str = "snappy"
    row_group_size: int = 128 * 1024
    leader_wait_ms: int = 15_000
    prefetch_chunks: int = 2          # fetched chunks a task's reader thread may hold ahead of decoding (0: none)
    progress_addr: tuple[str, int] | None = None
    faults: LoadFaults = NO_FAULTS    # tests only (pipelines.faults): what goes wrong, and where
    security: ClientSecurity = PLAINTEXT  # the cluster's TLS/SASL settings (cluster: section)


class _Progress:
    def __init__(self, addr: tuple[str, int] | None, index: int) -> None:
        self.addr, self.index = addr, index
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM) if addr else None
        self.last = 0.0

    def send(self, offset: int, rows: int, done: bool = False) -> None:
        if self.sock is None or self.addr is None:  # both or neither (__init__)
            return
        now = time.monotonic()
        if not done and now - self.last < 0.5:
            return
        self.last = now
        try:
            self.sock.sendto(json.dumps({"i": self.index, "o": offset, "n": rows, "done": done}).encode(), self.addr)
        except OSError:
            pass

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()


class PartitionReader:
    """Reads [start, end) of one partition from its leader, following leader changes."""

    def __init__(self, ctx: TaskContext, topic: str, partition: int) -> None:
        self.ctx, self.topic, self.partition = ctx, topic, partition
        self.consumer: SimpleConsumer | None = None
        self.leader_changes = 0

    def _connect(self) -> SimpleConsumer:
        deadline = time.monotonic() + self.ctx.leader_wait_ms / 1000
        last: Exception | None = None
        while True:
            for address in self.ctx.brokers:
                try:
                    with SimpleConsumer.from_address(address, timeout=5.0, client_id="logbus-loader",
                                                     security=self.ctx.security) as probe:
                        _, host, port = probe.find_leader(self.topic, self.partition)
                    return SimpleConsumer(host, port, timeout=self.ctx.request_timeout_ms / 1000,
                                          client_id="logbus-loader", buffer_size=self.ctx.fetch_max_bytes,
                                          security=self.ctx.security)
                except UnknownTopicOrPartitionError as exc:
                    raise TopicDeletedError(f"{self.topic}-{self.partition}: the topic no longer exists ({exc})") from None
                except (BrokerConnectionError, LeaderNotAvailableError, KafkaError, OSError) as exc:
                    last = exc
            if time.monotonic() > deadline:
                raise LoadError(f"{self.topic}-{self.partition}: no reachable leader within "
                                f"{self.ctx.leader_wait_ms} ms: {last}")
            time.sleep(0.25)

    def consumer_(self) -> SimpleConsumer:
        if self.consumer is None:
            self.consumer = self._connect()
        return self.consumer

    def reset_leader(self) -> None:
        self.leader_changes += 1
        if self.consumer is not None:
            self.consumer.close()
        self.consumer = None

    def bounds(self) -> tuple[int, int]:
        c = self.consumer_()
        return (c.get_offsets_before(self.topic, self.partition, EARLIEST_TIME)[0],
                c.get_offsets_before(self.topic, self.partition, LATEST_TIME)[0])

    def read(self, start: int, end: int, gaps: list | None = None) -> Iterator[RecordChunk]:
        """Yield RecordChunks of the records with offsets in [start, end), in order.

        Out of range: with policy ``earliest`` the skipped offsets are appended to ``gaps``
        as (from, to) and reading goes on from the log start; otherwise OutOfRangeError.
        """
        offset = start
        max_bytes = self.ctx.fetch_max_bytes
        failures = 0
        while offset < end:
            self.ctx.faults.before_fetch()
            try:
                fetched = self.consumer_().fetch_raw(self.topic, self.partition, offset, max_bytes)
            except OffsetOutOfRangeError:
                earliest, latest = self.bounds()
                if offset < earliest and self.ctx.out_of_range == "earliest":
                    skip_to = min(earliest, end)
                    if gaps is not None:
                        gaps.append((offset, skip_to))
                    offset = skip_to
                    continue
                raise OutOfRangeError(self.topic, self.partition, offset, earliest, latest, end) from None
            except UnknownTopicOrPartitionError:
                self.reset_leader()  # deleted, or the leader moved: the metadata lookup tells which
                failures += 1
                if failures > 20:
                    raise
                continue
            except (NotLeaderOrFollowerError, LeaderNotAvailableError, BrokerConnectionError, OSError):
                self.reset_leader()
                failures += 1
                if failures > 20:
                    raise
                time.sleep(min(0.1 * failures, 1.0))
                continue
            failures = 0
            chunk = decode_chunk(self.topic, self.partition, fetched.records, offset)
            if len(chunk) and chunk.last_offset >= end:
                yield chunk.up_to(end)
                return
            if len(chunk):
                yield chunk
            if chunk.next_offset > offset:
                offset = chunk.next_offset
            elif fetched.high_watermark >= 0 and fetched.high_watermark <= offset:
                raise LoadError(f"{self.topic}-{self.partition}: the high watermark is {fetched.high_watermark}, below "
                                f"the planned end {end} (was the log truncated by an unclean leader election?)")
            else:
                max_bytes = min(max_bytes * 2, 1 << 30)  # a batch larger than max_bytes: ask for more

    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()
            self.consumer = None


class _Prefetcher:
    """The reader's chunks, fetched up to ``depth`` ahead by a thread: fetching (socket reads and
    waiting on the broker) overlaps decoding (mostly pyarrow, which runs without the GIL). The
    order, the chunks and the reader's exceptions are exactly the generator's; ``depth`` 0 runs
    the generator inline."""

    _END = object()

    def __init__(self, chunks, depth: int) -> None:
        self.chunks = chunks
        self.thread = None
        if depth > 0:
            self.queue: queue.Queue = queue.Queue(maxsize=depth)
            self.stop = threading.Event()
            self.thread = threading.Thread(target=self._run, name="logbus-prefetch", daemon=True)
            self.thread.start()

    def _run(self) -> None:
        try:
            for chunk in self.chunks:
                if not self._put((chunk, None)):
                    return
            self._put((self._END, None))
        except BaseException as exc:  # handed to the task's thread, raised there
            self._put((None, exc))
        finally:
            self._close_chunks()

    def _close_chunks(self) -> None:
        close = getattr(self.chunks, "close", None)  # a generator: run its finally blocks now
        if close is not None:
            close()

    def _put(self, item) -> bool:
        while not self.stop.is_set():
            try:
                self.queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def next(self):
        """The next chunk, or None at the end."""
        if self.thread is None:
            return next(self.chunks, None)
        chunk, exc = self.queue.get()
        if exc is not None:
            raise exc
        return None if chunk is self._END else chunk

    def close(self) -> None:
        if self.thread is None:
            self._close_chunks()
        else:
            self.stop.set()
            self.thread.join()


def new_stats(task: RangeTask, attempt: int = 0) -> TaskStats:
    """A range's stats before it is loaded (what both writers fill in and the manifest reads)."""
    return TaskStats(index=task.index, topic=task.topic, partition=task.partition, start=task.start, end=task.end,
                     attempt=attempt)


class RangeScan:
    """The fetch -> decode loop of one range, shared by the Python writer (``run_range``) and the
    Hadoop writer (``pipelines.hadoop_writer``): iterating yields each chunk's ``(batch, times, bad)``
    as ``Decoder.decode`` returns them; counts, time bounds, gaps and timings are kept for ``stats()``.
    With an origin index (``task.origins``), records whose origin was written already are dropped
    before decoding (``pipelines.origin_index``)."""

    def __init__(self, task: RangeTask, ctx: TaskContext) -> None:
        from pipelines.decoders import Decoder

        self.task, self.ctx = task, ctx
        self.decoder = Decoder(TopicSpec.from_dict(task.topic, task.spec))
        self.reader = PartitionReader(ctx, task.topic, task.partition)
        self.progress = _Progress(ctx.progress_addr, task.index)
        self.gaps: list = []
        self.count = self.errors = 0
        self.min_ts: int | None = None
        self.max_ts: int | None = None
        self.fetch_s = self.decode_s = 0.0
        self._chunks: _Prefetcher | None = None
        self.origins = None if task.origins is None else OriginIndex.from_json(task.origins)
        self.duplicates = 0
        self.duplicate_runs: list[list[int]] = []
        self.saw_origin = False  # a record with an origin header was read (the index may have changed)
        self.hours: hour_tally.HourCounts = {}   # per event hour: read, rows, late, errors, duplicates
        self.late_runs: list[list[int]] = []      # offsets of late records kept out of their hour
        self.late_tables: list = []               # late_data separate: the late rows, with intended_hour

    def _drop_duplicates(self, chunk: RecordChunk) -> RecordChunk:
        """The chunk less the records whose origin the index holds (recording the others' origins)."""
        if self.origins is None or chunk.headers is None:
            return chunk
        check = self.origins.check
        verdicts = np.fromiter((check(h) if h else NO_ORIGIN for h in chunk.headers), np.int8, len(chunk.headers))
        self.saw_origin = self.saw_origin or bool((verdicts != NO_ORIGIN).any())
        keep = (verdicts == NEW) | (verdicts == NO_ORIGIN)
        if keep.all():
            return chunk
        for offset in chunk.offsets[~keep].tolist():
            add_run(self.duplicate_runs, offset)
        self.duplicates += len(keep) - int(keep.sum())
        return chunk.keep(keep)

    def _read_lookback(self) -> None:
        """Into the index, the origins of ``[task.lookback, task.start)``: the range before this one in
        the same run writes them while this one runs, so the run's starting index does not hold them.
        Retention may have removed them: then the index goes without."""
        task, index = self.task, self.origins
        if index is None or task.lookback is None or task.lookback >= task.start:
            return
        try:
            for chunk in self.reader.read(task.lookback, task.start):
                for h in chunk.headers or ():
                    if h and index.check(h) != NO_ORIGIN:
                        self.saw_origin = True
        except OutOfRangeError:
            pass

    def __iter__(self):
        task = self.task
        f0 = time.monotonic()
        self._read_lookback()
        self.fetch_s += time.monotonic() - f0
        self._chunks = chunks = _Prefetcher(self.reader.read(task.start, task.end, self.gaps), self.ctx.prefetch_chunks)
        while True:
            f0 = time.monotonic()
            chunk = chunks.next()
            f1 = time.monotonic()
            self.fetch_s += f1 - f0
            if chunk is None:
                return
            read_to = chunk.last_offset + 1 if len(chunk) else task.start
            read = chunk
            chunk = self._drop_duplicates(chunk)
            if len(chunk) < len(read):
                self._count_hours(read.keep(~np.isin(read.offsets, chunk.offsets)), "duplicates")
            batch, times, bad = self.decoder.decode(chunk) if len(chunk) else (None, [], [])
            self.errors += len(bad)
            if bad:
                self._count_hours(chunk.keep(np.isin(chunk.offsets, [r[2] for r in bad])), "errors")
            if batch is not None:
                batch, times = self._route_late(batch, times)
            if batch is not None:
                self.count += batch.num_rows
                bounds = _timestamp_bounds(chunk)
                if bounds is not None:
                    lo, hi = bounds
                    self.min_ts = lo if self.min_ts is None else min(self.min_ts, lo)
                    self.max_ts = hi if self.max_ts is None else max(self.max_ts, hi)
            yield batch, times, bad
            self.decode_s += time.monotonic() - f1  # decoding plus the caller's handling of the chunk
            self.progress.send(read_to, self.count + self.errors + self.duplicates)

    def _count_hours(self, records: RecordChunk, column: str) -> None:
        """Records that are no rows (dropped copies, undecodable values): read, and ``column``, per event hour."""
        found = event_hours(self.decoder, records)
        hour_tally.add(self.hours, "read", found)
        hour_tally.add(self.hours, column, found)

    def _route_late(self, batch, times):
        """Count the batch's rows per hour (their partition times are their event hours: no second parse), and
        apply the topic's late_data policy to the rows of closed hours."""
        buckets = hour_buckets(times)
        hour_tally.add(self.hours, "read", buckets)
        late = self.task.late
        if not late or not (mask := buckets < late["closed_below"]).any():
            hour_tally.add(self.hours, "rows", buckets)
            return batch, times
        hour_tally.add(self.hours, "late", buckets[mask])
        if late["policy"] == "reopen":
            hour_tally.add(self.hours, "rows", buckets)
            return batch, times
        keep = ~mask
        for offset in batch.column("offset").filter(pa.array(mask)).to_pylist():
            add_run(self.late_runs, offset)
        if late["policy"] == "separate":
            moved = pa.Table.from_batches([batch.filter(pa.array(mask))])
            intended = pa.array(buckets[mask] * HOUR_MS, pa.int64()).cast(pa.timestamp("ms", tz="UTC"))
            self.late_tables.append(moved.append_column("intended_hour", intended))
        hour_tally.add(self.hours, "rows", buckets[keep])
        times_ms = times.to_numpy() if isinstance(times, (pa.Array, pa.ChunkedArray)) else np.asarray(times, np.int64)
        return (batch.filter(pa.array(keep)) if keep.any() else None), times_ms[keep]

    def close(self) -> None:
        if self._chunks is not None:
            self._chunks.close()
        self.reader.close()
        self.progress.send(self.task.end, self.count + self.errors + self.duplicates, done=True)
        self.progress.close()

    def stats(self, before: TaskStats) -> TaskStats:
        """``before`` with what the scan counted and timed."""
        return replace(before, count=self.count, errors=self.errors, min_ts=self.min_ts, max_ts=self.max_ts,
                       gaps=tuple((int(a), int(b)) for a, b in self.gaps), fetch_s=round(self.fetch_s, 3),
                       decode_s=round(self.decode_s, 3), leader_changes=self.reader.leader_changes,
                       chunks_vectorised=self.decoder.chunks_vectorised,
                       chunks_per_record=self.decoder.chunks_per_record, duplicates_dropped=self.duplicates,
                       duplicate_offsets=tuple((a, b) for a, b in self.duplicate_runs),
                       origins=self.origins.to_json() if self.origins is not None and self.saw_origin else None,
                       hours=hour_tally.sorted_counts(self.hours),
                       late_offsets=tuple((a, b) for a, b in self.late_runs))


def run_range(task: RangeTask, ctx: TaskContext, attempt: int = 0) -> TaskStats:
    """Load one range; returns its stats. Raises on failure (Spark retries)."""
    from pipelines.fs import open_fs
    from pipelines.writer import RangeWriter

    t0 = time.monotonic()
    stats = new_stats(task, attempt)
    if task.end <= task.start:
        return replace(stats, status=EMPTY)
    fs = open_fs(ctx.warehouse, user=ctx.webhdfs_user)
    scan = RangeScan(task, ctx)
    writer = RangeWriter(fs, task.topic, task.partition, task.start, task.end, scan.decoder.schema,
                         ctx.compression, ctx.row_group_size)
    try:
        try:
            for batch, times, bad in scan:
                if bad:
                    writer.add_errors(bad)
                if batch is not None:
                    writer.add(batch, times)
        except TopicDeletedError:
            writer.abort()
            return replace(stats, status=TOPIC_DELETED)
        w0 = time.monotonic()
        done = scan.stats(stats)
        if scan.late_tables and task.late:
            writer.add_late(pa.concat_tables(scan.late_tables, promote_options="permissive"), int(task.late["arrival_hour"]))
        files = writer.commit(after_first_rename=lambda: ctx.faults.after_first_file(task), gaps=scan.gaps,
                              extras=summary_extras(done))
        write_s = time.monotonic() - w0
    except BaseException:
        writer.abort()
        raise
    finally:
        scan.close()
    return replace(done, files=tuple(files), bytes=sum(f["bytes"] for f in files), write_s=write_s,
                   late_files=tuple(writer.late_files),
                   seconds=round(time.monotonic() - t0, 3))


def summary_extras(stats: TaskStats) -> dict:
    """What a range's commit summary records beyond its counts, so a run finished from its committed
    files (``OffsetStore.scan_files``) loses nothing: its per event hour counts and late offsets, and its
    deduplication when it read an origin (none otherwise: the partition's index is what it was before)."""
    out: dict = {"hours": stats.hours or {}, "late_offsets": [list(r) for r in stats.late_offsets]}
    if stats.origins is not None:
        out.update({"duplicates_dropped": stats.duplicates_dropped,
                    "duplicate_offsets": [list(r) for r in stats.duplicate_offsets], "origins": stats.origins})
    return out


def _timestamp_bounds(chunk: RecordChunk) -> tuple[int, int] | None:
    """(min, max) record timestamp of the chunk's records (a negative one is none), or None."""
    ts = chunk.timestamps[chunk.timestamps >= 0]
    return (int(ts.min()), int(ts.max())) if len(ts) else None


__all__ = ["RangeTask", "TaskContext", "run_range", "RangeScan", "new_stats", "PartitionReader"]
