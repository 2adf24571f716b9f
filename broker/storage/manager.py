"""Every partition log of a broker, across its log directories: load, recover, checkpoint."""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterable, Mapping

from broker.protocol.errors import InvalidTopicError, KafkaStorageError
from broker.storage.checkpoint import (
    HIGH_WATERMARK_FILE,
    LOG_START_OFFSET_FILE,
    RECOVERY_POINT_FILE,
    fsync_dir,
    read_checkpoint,
    write_checkpoint,
)
from broker.storage.config import LogConfig
from broker.storage.log import LoadStats, PartitionLog, parse_log_dir_name, wall_clock_ms

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


class LogManager:
    """Loads every ``<topic>-<partition>`` directory of ``log_dirs`` and owns the logs.

    After a clean shutdown (marker file present) segments and indexes are trusted; otherwise
    each log is recovered from its checkpointed recovery point. ``load_stats`` says which.
    """

    def __init__(
        self,
        log_dirs: list[str],
        default_config: LogConfig,
        topic_configs: Mapping[str, LogConfig] | None = None,
        time_ms: Callable[[], int] | None = None,
    ) -> None:
        if not log_dirs:
            raise ValueError("at least one log directory is needed")
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.default_config = default_config
        self.topic_configs: dict[str, LogConfig] = dict(topic_configs or {})
        self._time_ms = time_ms or wall_clock_ms
        self._lock = threading.RLock()
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._dir_of: dict[tuple[str, int], str] = {}
        self._lock_fds: list[int] = []
        self._closed = False
        self.load_stats = LoadStats()
        try:
            for d in self.log_dirs:
                os.makedirs(d, exist_ok=True)
                self._lock_dir(d)
            for d in self.log_dirs:
                self._load_dir(d)
        except BaseException:
            self._release_locks()
            raise
        self.checkpoint()

    def _lock_dir(self, directory: str) -> None:
        fd = os.open(os.path.join(directory, LOCK_FILE), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise KafkaStorageError(f"log directory {directory} is in use by another broker") from None
        self._lock_fds.append(fd)

    def _release_locks(self) -> None:
        fds, self._lock_fds = self._lock_fds, []
        for fd in fds:
            os.close(fd)  # closing drops the flock

    def _load_dir(self, directory: str) -> None:
        marker = os.path.join(directory, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        if not clean:
            self.load_stats.clean = False
        recovery_points = read_checkpoint(os.path.join(directory, RECOVERY_POINT_FILE))
        start_offsets = read_checkpoint(os.path.join(directory, LOG_START_OFFSET_FILE))
        watermarks = read_checkpoint(os.path.join(directory, HIGH_WATERMARK_FILE))
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            if not os.path.isdir(path):
                continue
            if name.endswith("-delete"):
                shutil.rmtree(path, ignore_errors=True)
                continue
            key = parse_log_dir_name(name)
            if key is None:
                log.warning("ignoring %s: not a <topic>-<partition> directory", path)
                continue
            if key in self._logs:
                raise KafkaStorageError(f"log {name} found in both {self._dir_of[key]} and {directory}")
            self._logs[key] = PartitionLog.open(
                path,
                self.topic_configs.get(key[0], self.default_config),
                time_ms=self._time_ms,
                clean=clean,
                recovery_point=recovery_points.get(key, 0),
                log_start_offset=start_offsets.get(key, 0),
                high_watermark=watermarks.get(key),
                stats=self.load_stats,
            )
            self._dir_of[key] = directory
        if clean:
            os.unlink(marker)  # a crash from now on must be recovered
            fsync_dir(directory)

    # -- lookup -------------------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def get_or_create(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        """The log of a partition, created empty (in the directory with fewest logs) if new."""
        return self.get_or_create_all(topic, [partition], config)[partition]

    def get_or_create_all(
        self, topic: str, partitions: Iterable[int], config: LogConfig | None = None
    ) -> dict[int, PartitionLog]:
        """``get_or_create`` of many partitions of a topic; each log directory's new entries are
        synced once, at the end (a new topic of 10,000 partitions: one fsync, not 10,000)."""
        if not _LEGAL_TOPIC.fullmatch(topic) or topic in (".", ".."):
            raise InvalidTopicError(f"illegal topic name {topic!r}")
        found: dict[int, PartitionLog] = {}
        created_in: set[str] = set()
        with self._lock:
            self._check_open()
            counts: dict[str, int] | None = None  # logs per directory, counted once a log is to be made
            try:
                for partition in partitions:
                    key = (topic, partition)
                    existing = self._logs.get(key)
                    if existing is not None:
                        found[partition] = existing
                        continue
                    if partition < 0:
                        raise ValueError(f"partition {partition} is negative")
                    if counts is None:
                        counts = {d: 0 for d in self.log_dirs}
                        for d in self._dir_of.values():
                            counts[d] += 1
                    directory = min(self.log_dirs, key=counts.__getitem__)
                    found[partition] = self._logs[key] = PartitionLog.open(
                        os.path.join(directory, f"{topic}-{partition}"),
                        config or self.topic_configs.get(topic, self.default_config),
                        time_ms=self._time_ms,
                        clean=True,
                    )
                    self._dir_of[key] = directory
                    counts[directory] += 1
                    created_in.add(directory)
            finally:
                for directory in sorted(created_in):
                    fsync_dir(directory)
        return found

    def delete(self, topic: str, partition: int) -> bool:
        """Delete a partition's log and directory; False if there was none."""
        with self._lock:
            plog = self._logs.pop((topic, partition), None)
            self._dir_of.pop((topic, partition), None)
        if plog is None:
            return False
        plog.delete()
        return True

    def dir_of(self, topic: str, partition: int) -> str | None:
        """The log directory holding a partition's log, None if there is none."""
        with self._lock:
            return self._dir_of.get((topic, partition))

    def all_logs(self) -> list[PartitionLog]:
        """Every log, sorted by (topic, partition)."""
        with self._lock:
            return [self._logs[k] for k in sorted(self._logs)]

    def set_topic_config(self, topic: str, config: LogConfig) -> None:
        """Use ``config`` for a topic's existing and future partitions."""
        with self._lock:
            self.topic_configs[topic] = config
            logs = [plog for (t, _), plog in self._logs.items() if t == topic]
        for plog in logs:
            plog.update_config(config)

    # -- periodic work --------------------------------------------------------------------------

    def retention_pass(self, now_ms: int | None = None) -> int:
        """Apply retention to every log (and expire idle producers); return segments deleted."""
        now = self._time_ms() if now_ms is None else now_ms
        deleted = 0
        for plog in self.all_logs():
            if plog.closed:
                continue
            try:
                deleted += plog.delete_expired_segments(now)
                plog.expire_producers(now)
            except (OSError, KafkaStorageError):
                log.exception("retention of %s failed", plog.name)
        return deleted

    def flush_pass(self, now_ms: int | None = None) -> int:
        """Flush the logs whose flush.ms has passed or that rolled; return how many flushed."""
        now = self._time_ms() if now_ms is None else now_ms
        flushed = 0
        for plog in self.all_logs():
            if plog.maybe_flush(now):
                flushed += 1
        return flushed

    def checkpoint(self) -> None:
        """Write recovery points, log start offsets and high watermarks of each directory."""
        with self._lock:
            by_dir: dict[str, list[tuple[tuple[str, int], PartitionLog]]] = {d: [] for d in self.log_dirs}
            for key, plog in self._logs.items():
                by_dir[self._dir_of[key]].append((key, plog))
        for d, logs in by_dir.items():
            write_checkpoint(os.path.join(d, RECOVERY_POINT_FILE), {k: p.recovery_point for k, p in logs})
            write_checkpoint(os.path.join(d, LOG_START_OFFSET_FILE), {k: p.log_start_offset for k, p in logs})
            write_checkpoint(os.path.join(d, HIGH_WATERMARK_FILE), {k: p.high_watermark for k, p in logs})

    # -- shutdown -----------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Flush and close every log, write the checkpoints and the clean-shutdown markers."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            failed_dirs = set()
            for key, plog in self._logs.items():
                try:
                    plog.close()
                except (OSError, KafkaStorageError):
                    log.exception("closing %s failed", plog.name)
                    failed_dirs.add(self._dir_of[key])
            self.checkpoint()
            for d in self.log_dirs:
                if d not in failed_dirs:
                    with open(os.path.join(d, CLEAN_SHUTDOWN_FILE), "wb") as f:
                        os.fsync(f.fileno())
                    fsync_dir(d)
            self._release_locks()

    def abandon(self) -> None:
        """Stop without flushing, checkpointing or the marker, as a crash would (tests, fatal errors)."""
        with self._lock:
            self._closed = True
            for plog in self._logs.values():
                plog.abandon()
            self._release_locks()

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError("the log manager is shut down")
