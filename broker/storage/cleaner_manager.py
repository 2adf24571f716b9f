"""Which compacted log to clean next, each log's first dirty offset (``cleaner-offset-checkpoint``
per log directory), and the cleaner's numbers. Thread-safe and Twisted-free: the broker calls
``grab_dirtiest`` and ``clean`` from its cleaner threads (broker.server.log_cleaner), each of
which hands the pass's work to a cleaner process (``CleanerProcesses``) and waits.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

from broker.protocol.errors import KafkaError
from broker.storage.checkpoint import CLEANER_OFFSET_FILE, read_checkpoint, write_checkpoint
from broker.storage.cleaner import CleanerProcesses, CleanStats, OffsetMap, clean
from broker.storage.log import PartitionLog
from broker.storage.manager import LogManager

log = logging.getLogger(__name__)

LogKey = tuple[str, int]


@dataclass
class CleanerTotals:
    """Sums over every pass since the broker started (the cleaner's metrics)."""

    passes: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_removed: int = 0
    segments_cleaned: int = 0
    last_run_ms: int = -1  # wall-clock end of the last pass, -1 before the first
    last_pass_seconds: float = 0.0
    last_pass_mb_per_second: float = 0.0
    failures: int = 0


class LogCleanerManager:
    """The cleaner's state over a LogManager: first dirty offsets, logs in progress, key maps."""

    def __init__(self, logs: LogManager, threads: int, dedupe_buffer_bytes: int, time_ms: Callable[[], int],
                 processes: CleanerProcesses | None = None) -> None:
        """``processes``: run the passes' work there (the broker); None: in the calling thread."""
        self.logs = logs
        self.processes = processes
        self._time_ms = time_ms
        self._lock = threading.Lock()
        self._in_progress: set[LogKey] = set()
        self._uncleanable: set[LogKey] = set()
        self.totals = CleanerTotals()
        self._first_dirty: dict[LogKey, int] = {}
        for d in logs.log_dirs:
            self._first_dirty.update(read_checkpoint(os.path.join(d, CLEANER_OFFSET_FILE)))
        self._maps: queue.SimpleQueue[OffsetMap] = queue.SimpleQueue()
        for _ in range(0 if processes is not None else max(1, threads)):  # the processes hold their own
            self._maps.put(OffsetMap(dedupe_buffer_bytes // max(1, threads)))

    def first_dirty(self, plog: PartitionLog) -> int:
        """Where the dirty part of ``plog`` starts (its log start when never cleaned, or when the
        log no longer reaches the checkpoint: truncated or recreated)."""
        offset = self._first_dirty.get((plog.topic, plog.partition), 0)
        if offset > plog.log_end_offset:
            return plog.log_start_offset
        return max(offset, plog.log_start_offset)

    def compacted_logs(self) -> list[PartitionLog]:
        return [p for p in self.logs.all_logs() if p.config.compact_enabled and not p.closed]

    def grab_dirtiest(self) -> PartitionLog | None:
        """The compacted log most in need of cleaning (``max.compaction.lag.ms`` first, then the
        highest dirty ratio at or above ``min.cleanable.dirty.ratio``), marked in progress."""
        now = self._time_ms()
        best: tuple[float, PartitionLog] | None = None
        with self._lock:
            busy = self._in_progress | self._uncleanable
        for plog in self.compacted_logs():
            key = (plog.topic, plog.partition)
            if key in busy:
                continue
            try:
                due, ratio = plog.needs_cleaning(self.first_dirty(plog), now)
            except KafkaError:
                continue  # closed meanwhile
            if due and (best is None or ratio > best[0]):
                best = (ratio, plog)
        if best is None:
            return None
        chosen = best[1]
        with self._lock:
            key = (chosen.topic, chosen.partition)
            if key in self._in_progress:
                return None
            self._in_progress.add(key)
        return chosen

    def clean(self, plog: PartitionLog) -> CleanStats | None:
        """One pass over a log grabbed with ``grab_dirtiest`` (in a cleaner thread)."""
        key = (plog.topic, plog.partition)
        offset_map = self._maps.get() if self.processes is None else None
        try:
            task = plog.clean_task(self.first_dirty(plog), self._time_ms())
            if offset_map is None:
                assert self.processes is not None
                stats = self.processes.clean(task, plog.replace_segments)
            else:
                stats = clean(task, offset_map, plog.replace_segments)
        except (OSError, KafkaError) as exc:
            if plog.closed:  # deleted or shut down under the cleaner: nothing is wrong with it
                return None
            log.error("cleaning %s failed; it is left alone until restart: %s", plog.name, exc)
            with self._lock:
                self._uncleanable.add(key)
                self.totals.failures += 1
            return None
        finally:
            if offset_map is not None:
                offset_map.clear()
                self._maps.put(offset_map)
            with self._lock:
                self._in_progress.discard(key)
        with self._lock:
            if not stats.aborted:
                self._first_dirty[key] = stats.end_offset
            totals = self.totals
            totals.passes += 1
            totals.bytes_read += stats.bytes_read
            totals.bytes_written += stats.bytes_written
            totals.records_removed += stats.records_read - stats.records_kept
            totals.segments_cleaned += stats.segments_cleaned
            totals.last_run_ms = self._time_ms()
            totals.last_pass_seconds = stats.seconds
            totals.last_pass_mb_per_second = stats.mb_per_second
        self.checkpoint()
        log.info("cleaned %s: %d segments, %d -> %d bytes, %.1f MB/s%s", plog.name, stats.segments_cleaned,
                 stats.bytes_read, stats.bytes_written, stats.mb_per_second,
                 f" (aborted: {stats.aborted})" if stats.aborted else "")
        return stats

    def checkpoint(self) -> None:
        """Write ``cleaner-offset-checkpoint`` in each log directory (its compacted logs only)."""
        with self._lock:
            offsets = dict(self._first_dirty)
        by_dir: dict[str, dict[LogKey, int]] = {d: {} for d in self.logs.log_dirs}
        for key, offset in offsets.items():
            directory = self.logs.dir_of(*key)
            if directory is not None:
                by_dir[directory][key] = offset
        for directory, entries in by_dir.items():
            write_checkpoint(os.path.join(directory, CLEANER_OFFSET_FILE), entries)

    def log_gauges(self) -> list[tuple[PartitionLog, float, int]]:
        """(log, dirty ratio, cleaner lag in ms: the age of its oldest uncleaned record) per compacted log."""
        now = self._time_ms()
        out = []
        for plog in self.compacted_logs():
            try:
                rng = plog.cleanable(self.first_dirty(plog), now)
                lag = plog.first_dirty_timestamp(self.first_dirty(plog))
            except KafkaError:
                continue
            out.append((plog, rng.dirty_ratio, max(0, now - lag) if lag >= 0 else 0))
        return out
