"""A partition log: segments of one ``<topic>-<partition>`` directory, append and read by offset.

Offsets: ``log_start_offset`` (first readable), ``log_end_offset`` (LEO, next to assign),
``recovery_point`` (everything below is fsynced, with its indexes), ``high_watermark`` (kept
here for the replication layer, which moves it; reads are bounded by the ``max_offset`` the
caller passes). Methods take the log's lock, so a flush may run in a worker thread: its fsyncs
happen outside the lock.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
import uuid
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from broker.protocol.errors import (
    InvalidRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
)
from broker.protocol.records.layout import BatchHeader, set_base_offset, set_max_timestamp, set_partition_leader_epoch
from broker.protocol.records.walker import checked_batches
from broker.storage.checkpoint import fsync_dir, unlink_if_present
from broker.storage.cleaner import CleanableRange, CleanTask, cleanable_range, complete_swaps, must_clean_by, swap_in
from broker.storage.config import INT_MAX, LogConfig
from broker.storage.file_slice import FileSlice
from broker.storage.index import fsync_path
from broker.storage.leader_epoch import LeaderEpochCache
from broker.storage.producer_state import ProducerStateManager, delete_snapshots
from broker.storage.segment import BatchEntry, LogSegment
from broker.storage.validator import TimestampPolicy, policy_of, validate_append

log = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
_STALE_SUFFIXES = (".tmp", ".deleted", ".cleaned", ".swap")
_INDEX_SUFFIXES = (".index", ".timeindex")


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def parse_log_dir_name(name: str) -> tuple[str, int] | None:
    """``<topic>-<partition>`` -> (topic, partition), splitting on the last '-'; None if not a log dir."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit() or not partition.isascii():
        return None
    return topic, int(partition)


class AppendResult(NamedTuple):
    """Where an append went; ``duplicate`` marks an idempotent retry answered from history."""

    first_offset: int
    last_offset: int
    log_append_time: int  # -1 unless message.timestamp.type=LogAppendTime
    log_start_offset: int
    duplicate: bool = False


class ReadResult(NamedTuple):
    """A read: a byte range of one segment (whole batches, the last possibly partial) or None."""

    records: FileSlice | None
    fetch_offset: int
    first_offset: int  # base offset of the first batch in ``records``, -1 when empty
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    next_offset: int = -1  # the offset after the last whole batch in ``records``; -1 when empty

    @property
    def size(self) -> int:
        return self.records.size if self.records is not None else 0

    @property
    def records_after_fetch_offset(self) -> int:
        """Offsets a reader gets past ``fetch_offset`` (whole batches): records, by offsets."""
        return max(0, self.next_offset - self.fetch_offset)


@dataclass
class LoadStats:
    """What loading logs cost: a clean restart recovers (CRC-scans) no segment."""

    clean: bool = True
    logs_loaded: int = 0
    segments_loaded: int = 0
    segments_recovered: int = 0
    bytes_recovered: int = 0
    bytes_truncated: int = 0
    segments_deleted: int = 0
    indexes_rebuilt: int = 0


class PartitionLog:
    """One partition's log. Build it with ``PartitionLog.open``."""

    def __init__(self, directory: str, topic: str, partition: int, config: LogConfig, time_ms: Callable[[], int]) -> None:
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self._time_ms = time_ms
        self._lock = threading.RLock()
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._producers = ProducerStateManager()
        self._policy: tuple[LogConfig, TimestampPolicy] | None = None  # policy_of(config), with the config it came from
        self._leo = 0
        self._lso = 0
        self._rp = 0
        self._hw = 0
        self._last_flush_ms = 0
        self._roll_flush_offset = 0  # a roll asks for a flush up to the new segment's base
        self._dir_dirty = False  # files created or removed since the last flush
        self._unsynced_snapshots: list[str] = []  # producer snapshots of rolls, for the next flush
        self._generation = 0  # bumped by truncation, so a concurrent flush does not over-claim
        self._closed = False
        self._leader_epochs: LeaderEpochCache | None = None
        # A partition without followers commits what it appends; replication turns this off
        # and moves the high watermark itself.
        self.auto_high_watermark = True

    # -- open and load ------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: str,
        config: LogConfig | None = None,
        *,
        time_ms: Callable[[], int] | None = None,
        clean: bool = False,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int | None = None,
        stats: LoadStats | None = None,
    ) -> PartitionLog:
        """Open (or create) the log in ``directory``, named ``<topic>-<partition>``.

        ``clean``: trust every segment and index (after a clean shutdown). Otherwise every
        segment from the one holding ``recovery_point`` on is CRC-checked and cut at the
        first bad byte, and its indexes rebuilt.
        """
        directory = os.path.abspath(directory)
        parsed = parse_log_dir_name(os.path.basename(directory))
        if parsed is None:
            raise ValueError(f"{directory}: a log directory is named <topic>-<partition>")
        os.makedirs(directory, exist_ok=True)
        self = cls(directory, parsed[0], parsed[1], config or LogConfig(), time_ms or wall_clock_ms)
        self._load(clean, recovery_point, log_start_offset, high_watermark, stats if stats is not None else LoadStats())
        return self

    def _load(self, clean: bool, recovery_point: int, log_start_offset: int, high_watermark: int | None,
              stats: LoadStats) -> None:
        config = self.config
        bases = []
        complete_swaps(self.dir)
        names = os.listdir(self.dir)
        for name in names:
            path = os.path.join(self.dir, name)
            if name.endswith(_STALE_SUFFIXES):
                unlink_if_present(path)
            elif name.endswith(".log") and len(name) == 24 and name[:20].isdigit():
                bases.append(int(name[:20]))
        bases.sort()
        known = {f"{b:020d}" for b in bases}
        for name in names:
            if name.endswith(_INDEX_SUFFIXES) and name.split(".")[0] not in known:
                unlink_if_present(os.path.join(self.dir, name))

        segments = [LogSegment.open(self.dir, b, config) for b in bases]
        stats.logs_loaded += 1
        stats.segments_loaded += len(segments)
        first_scan = len(segments) if clean else max(0, bisect_right(bases, recovery_point) - 1)
        recovered: list[LogSegment] = []
        i = 0
        while i < len(segments):
            seg = segments[i]
            last = i == len(segments) - 1
            scan = i >= first_scan
            if not scan and not seg.index_files_ok():
                stats.indexes_rebuilt += 1
                scan = True
            if not scan and last and not seg.load_tail_state():
                log.warning("%s: damaged tail despite a clean shutdown; recovering it", seg.path)
                scan = True
            if scan:
                stats.segments_recovered += 1
                stats.bytes_recovered += seg.size
                cut = seg.recover()
                stats.bytes_truncated += cut
                recovered.append(seg)
                if cut:
                    log.warning("%s: cut %d bytes after offset %d", seg.path, cut, seg.next_offset)
                    for later in segments[i + 1 :]:
                        stats.bytes_truncated += later.size
                        stats.segments_deleted += 1
                        later.delete_files()
                    del segments[i + 1 :]
                    last = True
                if not last:
                    seg.on_become_inactive()
            i += 1

        if not segments:
            segments = [LogSegment.create(self.dir, max(0, log_start_offset), config)]
            self._dir_dirty = True
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        active = segments[-1]
        now = self._time_ms()
        if active.size:
            ts = active.first_batch_timestamp()
            active.first_append_ms = ts if 0 <= ts <= now else now
        self._leo = max(active.next_offset, active.base_offset)
        self._lso = max(segments[0].base_offset, min(log_start_offset, self._leo))
        for seg in recovered:
            seg.write_indexes()
        try:
            for seg in recovered:
                seg.sync()
        except OSError as exc:
            raise KafkaStorageError(f"{self.dir}: syncing recovered segments failed: {exc}") from exc
        self._rp = self._roll_flush_offset = self._leo
        self._hw = self._clamp(self._lso if high_watermark is None else high_watermark)
        self._last_flush_ms = now
        self._load_producer_state()

    def _load_producer_state(self) -> None:
        delete_snapshots(self.dir, above=self._leo)
        state, snapshot = ProducerStateManager.load_latest(self.dir, self._leo)
        start = self._bases[0] if snapshot is None else max(snapshot, self._bases[0])
        if start < self._leo:
            now = self._time_ms()
            i = max(0, bisect_right(self._bases, start) - 1)
            for seg in self._segments[i:]:
                found = seg.translate_offset(start)
                if found is None:
                    continue
                for _, header in seg.iter_headers(found[0]):
                    state.replay(header, now)
        self._producers = state

    # -- offsets --------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def log_start_offset(self) -> int:
        return self._lso

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def recovery_point(self) -> int:
        return self._rp

    @property
    def high_watermark(self) -> int:
        """The log end offset while ``auto_high_watermark``, else what replication last set."""
        return self._leo if self.auto_high_watermark else self._hw

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark (clamped to [log start, log end]); used with auto_high_watermark off."""
        with self._lock:
            self._hw = self._clamp(offset)
            return self._hw

    def _clamp(self, offset: int) -> int:
        return min(max(offset, self._lso), self._leo)

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def segment_base_offsets(self) -> list[int]:
        return list(self._bases)

    def update_config(self, config: LogConfig) -> None:
        """Apply changed topic settings (they take effect from the next append, roll or pass)."""
        with self._lock:
            self.config = config
            for seg in self._segments:
                seg.index_interval = config.index_interval_bytes

    # -- append ---------------------------------------------------------------------------------

    def append(self, records: bytearray | memoryview, *, leader_epoch: int | None = None) -> AppendResult:
        """Append a produce request's batches as the leader: validate all (Kafka's LogValidator,
        ``broker.storage.validator``), drop a retry, assign offsets, write with one write call,
        index, roll and flush by policy.

        ``records`` is stamped in place (base offsets, leader epoch, LogAppendTime), so it
        must be writable; nothing is written if any batch is bad.
        """
        if isinstance(records, bytes):
            records = bytearray(records)
        size = len(records)
        if size == 0:
            raise InvalidRecordError("no record batches to append")
        config = self.config
        cached = self._policy
        if cached is None or cached[0] is not config:
            cached = self._policy = (config, policy_of(config))
        now = self._time_ms()
        batches, max_timestamps = validate_append(records, config, cached[1], now)

        with self._lock:
            self._check_open()
            duplicate = self._producers.check(batches)
            if duplicate is not None:
                append_time = duplicate.timestamp if config.log_append_time else -1
                return AppendResult(duplicate.first_offset, duplicate.last_offset, append_time, self._lso, True)
            append_time = now if config.log_append_time else -1
            first = offset = self._leo
            entries: list[BatchEntry] = []
            for (pos, header), max_timestamp in zip(batches, max_timestamps):
                set_base_offset(records, pos, offset)
                if leader_epoch is not None:
                    set_partition_leader_epoch(records, pos, leader_epoch)
                if append_time >= 0:
                    set_max_timestamp(records, pos, header.size, now, log_append_time=True)
                    entries.append((pos, offset, now, header.size))
                else:
                    entries.append((pos, offset, max_timestamp, header.size))
                offset += header.last_offset_delta + 1
            self._write(records, entries, first, offset, now)
            self._producers.update(batches, entries, now)
            lso = self._lso
            flush = offset - self._rp >= config.flush_messages
        if flush:
            self.flush()
        return AppendResult(first, offset - 1, append_time, lso, False)

    def append_as_follower(self, records: bytearray | memoryview | bytes) -> AppendResult:
        """Append batches fetched from the leader, offsets as they are (replication).

        Batches must be valid (CRC) and their offsets increasing from the log end offset;
        nothing is written otherwise.
        """
        size = len(records)
        if size == 0:
            raise InvalidRecordError("no record batches to append")
        with self._lock:
            self._check_open()
            expected = self._leo
            batches: list[tuple[int, BatchHeader]] = []
            entries: list[BatchEntry] = []
            for pos, header in checked_batches(records):
                if header.base_offset < expected or header.last_offset_delta < 0:
                    raise InvalidRecordError(
                        f"follower append: batch at offset {header.base_offset} does not follow offset {expected - 1}"
                    )
                batches.append((pos, header))
                entries.append((pos, header.base_offset, header.max_timestamp, header.size))
                expected = header.next_offset
            now = self._time_ms()
            first = batches[0][1].base_offset
            self._write(records, entries, first, expected, now)
            for _, header in batches:
                self._producers.replay(header, now)
            lso = self._lso
            flush = expected - self._rp >= self.config.flush_messages
        if flush:
            self.flush()
        return AppendResult(first, expected - 1, -1, lso, False)

    def _write(self, records: bytearray | memoryview | bytes, entries: list[BatchEntry], first: int, next_offset: int,
               now: int) -> None:
        seg = self._segments[-1]
        if self._should_roll(seg, len(records), next_offset - 1, now):
            seg = self._roll(first)
        seg.append(records, entries, next_offset, now)
        self._leo = next_offset

    def _should_roll(self, seg: LogSegment, size: int, last_offset: int, now: int) -> bool:
        if seg.size == 0:
            return False
        config = self.config
        return (
            seg.size + size > config.segment_bytes
            or (seg.first_append_ms is not None and now - seg.first_append_ms > config.segment_ms)
            or seg.is_index_full()
            or last_offset - seg.base_offset > INT_MAX
        )

    def _roll(self, base_offset: int) -> LogSegment:
        old = self._segments[-1]
        old.on_become_inactive()
        new = LogSegment.create(self.dir, base_offset, self.config)
        self._segments.append(new)
        self._bases.append(base_offset)
        self._unsynced_snapshots.append(self._producers.write_snapshot(self.dir, self._leo, sync=False))
        self._roll_flush_offset = base_offset
        self._dir_dirty = True
        return new

    def roll(self) -> None:
        """Start a new segment now (if the active one holds anything)."""
        with self._lock:
            self._check_open()
            if self._segments[-1].size:
                self._roll(self._leo)

    # -- flush ----------------------------------------------------------------------------------

    def flush(self, offset: int | None = None, *, now_ms: int | None = None) -> None:
        """fsync data and indexes up to ``offset`` (default: the log end) and move the recovery point."""
        with self._lock:
            if self._closed:
                return
            now = self._time_ms() if now_ms is None else now_ms
            target = self._leo if offset is None else min(offset, self._leo)
            if target <= self._rp:
                if offset is None:
                    self._last_flush_ms = now
                return
            lo = max(0, bisect_right(self._bases, self._rp) - 1)
            segments = self._segments[lo : bisect_left(self._bases, target)]
            for seg in segments:
                seg.write_indexes()
            dir_dirty, self._dir_dirty = self._dir_dirty, False
            snapshots, self._unsynced_snapshots = self._unsynced_snapshots, []
            generation = self._generation
        self._sync(segments, snapshots, dir_dirty)
        with self._lock:
            if generation == self._generation and target > self._rp:
                self._rp = min(target, self._leo)
            self._last_flush_ms = now

    @property
    def leader_epochs(self) -> LeaderEpochCache:
        """The partition's leader-epoch cache, read on first use (entries past the log end dropped);
        the log syncs its file before its records."""
        with self._lock:
            if self._leader_epochs is None:
                self._leader_epochs = LeaderEpochCache(self.dir, self._leo)
            return self._leader_epochs

    def _sync(self, segments: list[LogSegment], snapshots: list[str], dir_dirty: bool) -> None:
        try:
            if self._leader_epochs is not None:
                self._leader_epochs.sync()
            for seg in segments:
                seg.sync()
            for path in snapshots:
                fsync_path(path)  # one that a truncation or retention removed since is skipped
            if dir_dirty:
                fsync_dir(self.dir)
        except OSError as exc:
            raise KafkaStorageError(f"{self.dir}: flush failed: {exc}") from exc

    def maybe_flush(self, now_ms: int | None = None) -> bool:
        """Flush if flush.ms has passed since the last flush, or a roll left a segment unsynced."""
        rp = self._rp
        if self._leo <= rp and self._roll_flush_offset <= rp:
            return False  # nothing unflushed (read without the lock: a stale answer waits a pass)
        with self._lock:
            if self._closed:
                return False
            now = self._time_ms() if now_ms is None else now_ms
            if self._leo > self._rp and now - self._last_flush_ms >= self.config.flush_ms:
                target = self._leo
            elif self._roll_flush_offset > self._rp:
                target = self._roll_flush_offset
            else:
                return False
        self.flush(target, now_ms=now)
        return True

    # -- read -----------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None, min_one_batch: bool = True) -> ReadResult:
        """Bytes of whole batches from the batch holding ``offset``, within one segment.

        At most ``max_bytes`` (the last batch may be cut), or the whole first batch if
        ``min_one_batch``; never bytes of the batch holding ``max_offset`` (the high
        watermark; default the log end) or later. Raises OffsetOutOfRangeError outside
        [log start, log end]; ``offset == log end`` reads nothing.
        """
        with self._lock:
            self._check_open()
            leo, lso = self._leo, self._lso
            if offset < lso or offset > leo:
                raise OffsetOutOfRangeError(f"offset {offset} is outside [{lso}, {leo}] in {self.name}")
            limit = leo if max_offset is None else min(max_offset, leo)
            if offset >= limit:
                return self._empty(offset)
            segments = self._segments
            i = max(0, bisect_right(self._bases, offset) - 1)
            found = None
            while i < len(segments):
                found = segments[i].locate(offset)
                if found is not None:
                    break
                i += 1
            if found is None:
                return self._empty(offset)
            seg = segments[i]
            pos, header, walked, walked_pos = found
            if header.base_offset >= limit:
                return self._empty(offset)
            end = seg.size
            last = i == len(segments) - 1
            end_offset = leo if last else None  # the offset at byte ``end``, when known without reading
            if (last and limit < leo) or (not last and limit < segments[i + 1].base_offset):
                bound = seg.translate_offset(limit)
                end_offset = None
                if bound is not None:
                    end, end_offset = bound[0], bound[1].base_offset
            want = max(max_bytes, header.size) if min_one_batch else max_bytes
            size = min(want, end - pos)
            if size <= 0:
                return self._empty(offset)
            if size < end - pos or end_offset is None:
                end_offset = seg.offset_after_batches(pos, header.base_offset, pos + size)
            held_at = pos - walked_pos
            held = walked if held_at + size <= len(walked) else None
            return ReadResult(FileSlice(seg.file, pos, size, held, held_at), offset, header.base_offset, lso, leo,
                              self.high_watermark, end_offset)

    def _empty(self, offset: int) -> ReadResult:
        return ReadResult(None, offset, -1, self._lso, self._leo, self.high_watermark)

    def offset_for_timestamp(self, timestamp: int, max_offset: int | None = None) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp``, None if none.

        -2 answers the log start offset, -1 the log end (or ``max_offset``), with timestamp -1.
        The offset is exact for uncompressed batches; for compressed or LogAppendTime
        batches it is the batch's base offset, with the batch's max timestamp.
        """
        with self._lock:
            self._check_open()
            if timestamp == EARLIEST_TIMESTAMP:
                return self._lso, -1
            limit = self._leo if max_offset is None else min(max_offset, self._leo)
            if timestamp == LATEST_TIMESTAMP:
                return limit, -1
            for seg in self._segments:
                if seg.largest_timestamp() >= timestamp:
                    found = seg.find_timestamp(timestamp, self._lso)
                    if found is not None:
                        return found if found[0] < limit else None
            return None

    # -- compaction (broker.storage.cleaner) ----------------------------------------------------

    def cleanable(self, first_dirty: int, now_ms: int | None = None) -> CleanableRange:
        """The part of the log a cleaner pass may clean now, and its dirty ratio."""
        with self._lock:
            self._check_open()
            now = self._time_ms() if now_ms is None else now_ms
            return cleanable_range(self._segments, first_dirty, now, self.config.min_compaction_lag_ms,
                                   self.high_watermark)

    def needs_cleaning(self, first_dirty: int, now_ms: int | None = None) -> tuple[bool, float]:
        """(clean now?, dirty ratio): by ``min.cleanable.dirty.ratio`` or ``max.compaction.lag.ms``."""
        with self._lock:
            now = self._time_ms() if now_ms is None else now_ms
            rng = self.cleanable(first_dirty, now)
            if not rng.dirty_bytes:
                return False, rng.dirty_ratio
            urgent = must_clean_by(self._segments[: len(rng.segments) + 1], rng.first_dirty, now,
                                   self.config.max_compaction_lag_ms)
            return urgent or rng.dirty_ratio >= self.config.min_cleanable_dirty_ratio, rng.dirty_ratio

    def first_dirty_timestamp(self, first_dirty: int) -> int:
        """Timestamp of the first batch at or after ``first_dirty`` in an inactive segment, -1 if none
        (the cleaner lag is measured from it)."""
        with self._lock:
            i = max(0, bisect_right(self._bases, first_dirty) - 1)
            for seg in self._segments[i:-1]:
                found = seg.translate_offset(first_dirty)
                if found is not None:
                    return found[1].max_timestamp
            return -1

    def clean_task(self, first_dirty: int, now_ms: int | None = None) -> CleanTask:
        """What a cleaner pass needs, taken under the lock; the pass itself runs without it."""
        with self._lock:
            now = self._time_ms() if now_ms is None else now_ms
            rng = self.cleanable(first_dirty, now)
            n = len(rng.segments)
            # the indexes are read here, under the lock: the pass itself reads only the .log files
            largest = {seg.base_offset: seg.largest_timestamp() for seg in rng.segments}
            uppers = self._bases[1 : n + 1]
            holding = next((seg for seg, upper in zip(rng.segments, uppers) if seg.base_offset < rng.first_dirty < upper),
                           None)
            found = holding.translate_offset(rng.first_dirty) if holding is not None else None
            return CleanTask(self.dir, rng.segments, uppers, rng.first_dirty, rng.end,
                             list(self._segments), self.config.segment_bytes, self.config.delete_retention_ms, now,
                             self._generation, found[0] if found else 0, largest)

    def replace_segments(self, old: list[LogSegment], swap_path: str, generation: int) -> bool:
        """Swap a cleaned ``.swap`` file in for the consecutive inactive segments ``old``;
        False (nothing changed) if they are no longer all in the log (retention) or the log
        was truncated since ``generation`` (CleanTask.generation)."""
        with self._lock:
            if self._closed or not old or generation != self._generation:
                return False
            try:
                i = next(k for k, seg in enumerate(self._segments) if seg is old[0])
            except StopIteration:
                return False
            if self._segments[i : i + len(old)] != old or i + len(old) >= len(self._segments):
                return False
            swap_in(self.dir, swap_path, [seg.base_offset for seg in old])
            for seg in old:
                seg.file.mark_unlinked()
            new = LogSegment.open(self.dir, old[0].base_offset, self.config)
            new.recover()
            new.on_become_inactive()
            new.sync()
            self._segments[i : i + len(old)] = [new]
            self._bases[i : i + len(old)] = [new.base_offset]
            self._dir_dirty = True
            return True

    # -- retention and truncation -----------------------------------------------------------------

    def delete_expired_segments(self, now_ms: int | None = None) -> int:
        """Delete whole segments past retention.ms / retention.bytes or below the log start
        offset, oldest first, never the active one; return how many."""
        with self._lock:
            self._check_open()
            now = self._time_ms() if now_ms is None else now_ms
            config = self.config
            segments = self._segments
            candidates = len(segments) - 1
            count = 0
            while count < candidates and segments[count + 1].base_offset <= self._lso:
                count += 1
            if config.delete_enabled and config.retention_ms >= 0:
                n = 0
                while n < candidates and now - segments[n].retention_timestamp() > config.retention_ms:
                    n += 1
                count = max(count, n)
            if config.delete_enabled and config.retention_bytes >= 0:
                excess = sum(s.size for s in segments) - config.retention_bytes
                n = 0
                while n < candidates and excess - segments[n].size >= 0:
                    excess -= segments[n].size
                    n += 1
                count = max(count, n)
            if count:
                self._delete_oldest(count)
            return count

    def advance_log_start_offset(self, offset: int) -> bool:
        """Make ``offset`` the first readable offset (DeleteRecords, or a follower taking its
        leader's), never past the high watermark; whole segments below it are deleted. Returns
        whether the log start moved."""
        with self._lock:
            self._check_open()
            target = min(offset, self.high_watermark)
            if target <= self._lso:
                return False
            self._lso = target
            segments = self._segments
            count = 0
            while count < len(segments) - 1 and segments[count + 1].base_offset <= target:
                count += 1
            if count:
                self._delete_oldest(count)
            return True

    def _delete_oldest(self, count: int) -> None:
        doomed = self._segments[:count]
        del self._segments[:count]
        del self._bases[:count]
        self._lso = max(self._lso, self._bases[0])
        self._rp = max(self._rp, self._lso)
        self._hw = max(self._hw, self._lso)
        for seg in doomed:
            seg.delete_files()  # open slices keep reading the unlinked files
        delete_snapshots(self.dir, below=self._bases[0])
        self._dir_dirty = True

    def expire_producers(self, now_ms: int | None = None) -> int:
        """Forget idempotent producers idle for producer.id.expiration.ms."""
        with self._lock:
            now = self._time_ms() if now_ms is None else now_ms
            return self._producers.expire(now, self.config.producer_id_expiration_ms)

    def truncate_to(self, offset: int) -> bool:
        """Remove everything from the batch holding ``offset`` on (a follower rejoining);
        False if the log ends at or before ``offset``."""
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        with self._lock:
            self._check_open()
            if offset >= self._leo:
                return False
            if offset < self._lso:
                self._start_at(offset)
                return True
            keep = bisect_right(self._bases, offset)
            for seg in self._segments[keep:]:
                seg.delete_files()
            del self._segments[keep:]
            del self._bases[keep:]
            active = self._segments[-1]
            active.truncate_to(offset)
            if active.size and active.first_append_ms is None:
                active.first_append_ms = self._time_ms()
            self._leo = max(active.next_offset, active.base_offset)
            self._rp = min(self._rp, self._leo)
            self._hw = min(self._hw, self._leo)
            self._roll_flush_offset = min(self._roll_flush_offset, self._leo)
            self._generation += 1
            self._dir_dirty = True
            self._load_producer_state()
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and restart the log, empty, at ``offset``."""
        if offset < 0:
            raise ValueError(f"cannot start a log at negative offset {offset}")
        with self._lock:
            self._check_open()
            self._start_at(offset)

    def _start_at(self, offset: int) -> None:
        for seg in self._segments:
            seg.delete_files()
        delete_snapshots(self.dir)
        self._segments = [LogSegment.create(self.dir, offset, self.config)]
        self._bases = [offset]
        self._leo = self._lso = self._rp = self._hw = self._roll_flush_offset = offset
        self._producers = ProducerStateManager()
        self._generation += 1
        self._dir_dirty = True

    # -- close and delete -----------------------------------------------------------------------

    def close(self) -> None:
        """Flush everything, snapshot producer state, close the files."""
        with self._lock:
            if self._closed:
                return
            active = self._segments[-1]
            active.time_index.maybe_append(active.max_timestamp, active.offset_of_max_timestamp)
            lo = max(0, bisect_right(self._bases, self._rp) - 1)
            segments = self._segments[lo:]
            for seg in segments:
                seg.write_indexes()
            snapshots, self._unsynced_snapshots = self._unsynced_snapshots, []
            self._sync(segments, snapshots, True)
            self._rp = self._leo
            self._producers.write_snapshot(self.dir, self._leo)
            for seg in self._segments:
                seg.close()
            self._closed = True

    def abandon(self) -> None:
        """Drop the log without flushing or snapshotting, as a crash would (tests, fatal errors)."""
        with self._lock:
            for seg in self._segments:
                seg.file.close()
            self._closed = True

    def delete(self) -> None:
        """Remove the log and its directory; slices already handed out stay readable."""
        with self._lock:
            self._closed = True
            segments, self._segments = self._segments, []
            for seg in segments:
                seg.delete_files()
            doomed = f"{self.dir}.{uuid.uuid4().hex}-delete"
            try:
                os.rename(self.dir, doomed)
            except FileNotFoundError:
                return
            fsync_dir(os.path.dirname(self.dir))
            shutil.rmtree(doomed, ignore_errors=True)

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"log {self.name} is closed")

    def __repr__(self) -> str:
        return f"PartitionLog({self.name}, start={self._lso}, end={self._leo}, segments={len(self._segments)})"
