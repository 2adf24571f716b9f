"""Kafka's log cleaner for ``cleanup.policy=compact``: keep the latest record of each key.

One pass over a log (``clean_log``): build a map key -> last offset over the dirty part (from
the cleaner checkpoint up to the first uncleanable offset: never the active segment, nor a
segment younger than ``min.compaction.lag.ms``), then rewrite every inactive segment below
that point without the records the map supersedes. Offsets never change: a rewritten batch
keeps its base offset, its offset range, its producer id, epoch and base sequence; records
are left out, leaving gaps. The last batch of each producer is kept (empty if need be) so an
idempotent producer's sequence survives. Tombstones (null values) go once their segment is
older than ``delete.retention.ms``.

Crash safety, as Kafka does it: a group of old segments is rewritten into ``<base>.log.cleaned``
(fsynced), renamed ``<base>.log.swap`` (from here on the new data wins), the old ``.log`` files
renamed ``.deleted``, the swap renamed ``.log``. ``complete_swaps`` (run when a log is loaded)
finishes an interrupted swap; stray ``.cleaned`` and ``.deleted`` files are dropped. Plain
files, threads and processes only: the broker schedules passes (broker.server.log_cleaner) and
runs their work in ``CleanerProcesses``.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from hashlib import md5

from broker.protocol.compression import compress
from broker.protocol.errors import InvalidRecordError
from broker.protocol.records.layout import LOG_OVERHEAD, NO_PRODUCER_ID, BatchHeader, build_batch, read_prefix
from broker.protocol.records.walker import Tail, iter_batches, records_of
from broker.protocol.types import decode_varint
from broker.storage.checkpoint import fsync_dir, unlink_if_present
from broker.storage.config import INT_MAX, LogConfig
from broker.storage.segment import LogSegment, file_name

log = logging.getLogger(__name__)

CLEANED_SUFFIX = ".log.cleaned"
SWAP_SUFFIX = ".log.swap"
DELETED_SUFFIX = ".log.deleted"
HASH_BYTES = 16  # a key longer than this is mapped by its MD5 digest (as Kafka's SkimpyOffsetMap)
ENTRY_BYTES = HASH_BYTES + 8  # a hash and an offset: what one key costs the dedupe buffer
LOAD_FACTOR = 0.9  # log.cleaner.io.buffer.load.factor
READ_CHUNK = 1 << 20
_READ_ONLY_CONFIG = LogConfig()  # a cleaner process reads .log files only: index settings are never used


class OffsetMap:
    """Key hash -> last offset, bounded by ``log.cleaner.dedupe.buffer.size`` (per cleaner thread)."""

    def __init__(self, buffer_bytes: int, load_factor: float = LOAD_FACTOR) -> None:
        self.slots = max(1, int(buffer_bytes * load_factor) // ENTRY_BYTES)
        self._map: dict[bytes, int] = {}
        self.latest_offset = -1
        self.latest_of = self._map.get  # (map key, default) -> the key's last offset

    def __len__(self) -> int:
        return len(self._map)

    @property
    def full(self) -> bool:
        return len(self._map) >= self.slots

    def put(self, digest: bytes, offset: int) -> None:
        self._map[digest] = offset
        self.latest_offset = offset

    def put_all(self, entries: list[tuple[bytes, int]]) -> None:
        """Put (map key, offset) pairs, in offset order."""
        if entries:
            self._map.update(entries)
            self.latest_offset = entries[-1][1]

    def get(self, digest: bytes) -> int:
        return self._map.get(digest, -1)

    def clear(self) -> None:
        self._map.clear()  # latest_of stays bound to the same dict
        self.latest_offset = -1


@dataclass
class CleanStats:
    """What one pass did (the broker's cleaner metrics are sums of these)."""

    first_dirty: int = 0
    end_offset: int = 0  # the new first dirty offset (the cleaner checkpoint)
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    segments_cleaned: int = 0
    seconds: float = 0.0
    aborted: str = ""  # why the swap was skipped (the log changed under the cleaner), else ""

    @property
    def mb_per_second(self) -> float:
        return self.bytes_read / 1e6 / self.seconds if self.seconds else 0.0


@dataclass
class CleanableRange:
    """The part of a log a pass may clean: ``[log start, end)`` with ``[first_dirty, end)`` dirty."""

    first_dirty: int
    end: int
    clean_bytes: int
    dirty_bytes: int
    segments: list[LogSegment] = field(default_factory=list)  # inactive segments below ``end``

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def cleanable_range(segments: list[LogSegment], first_dirty: int, now_ms: int, min_lag_ms: int,
                    high_watermark: int) -> CleanableRange:
    """Which segments may be cleaned: inactive ones (not the last), each wholly below the high
    watermark and with its newest record older than ``min.compaction.lag.ms``."""
    inactive = segments[:-1]
    usable: list[LogSegment] = []
    for i, seg in enumerate(inactive):
        upper = segments[i + 1].base_offset
        if upper > high_watermark or (min_lag_ms > 0 and now_ms - seg.largest_timestamp() < min_lag_ms):
            break
        usable.append(seg)
    end = segments[len(usable)].base_offset if usable else (segments[0].base_offset if segments else 0)
    first_dirty = min(max(first_dirty, segments[0].base_offset if segments else 0), end)
    clean = dirty = 0
    for i, seg in enumerate(usable):
        upper = segments[i + 1].base_offset
        if upper <= first_dirty:
            clean += seg.size
        else:
            dirty += seg.size
    return CleanableRange(first_dirty, end, clean, dirty, usable)


def must_clean_by(segments: list[LogSegment], first_dirty: int, now_ms: int, max_lag_ms: int) -> bool:
    """``max.compaction.lag.ms``: a dirty inactive segment older than this is cleaned whatever the ratio."""
    for i, seg in enumerate(segments[:-1]):
        if segments[i + 1].base_offset > first_dirty and now_ms - seg.largest_timestamp() >= max_lag_ms:
            return True
    return False


# -- reading records ----------------------------------------------------------------------------

def _batches(seg: LogSegment, start: int = 0) -> Iterator[tuple[bytes, int, BatchHeader]]:
    """(chunk, position in chunk, header) of each whole batch of an inactive segment, read in chunks."""
    pos, size = start, seg.size
    while pos < size:
        chunk = seg.file.pread(min(READ_CHUNK, size - pos), pos)
        walked = 0
        for off, header in iter_batches(chunk, Tail.TRUNCATE):
            yield chunk, off, header
            walked = off + header.size
        if walked == 0:  # a batch larger than the chunk, or damage
            need = read_prefix(chunk, 0)[1] + LOG_OVERHEAD if len(chunk) >= LOG_OVERHEAD else 0
            found = None
            if len(chunk) < need <= size - pos:
                chunk = seg.file.pread(need, pos)
                found = next(iter_batches(chunk, Tail.TRUNCATE), None)
            if found is None:
                raise InvalidRecordError(f"{seg.path}: damaged record batch at byte {pos}")
            yield chunk, 0, found[1]
            walked = found[1].size
        pos += walked


KeyedRecord = tuple[int, int, int, "bytes | None", bool]


def _keys(buf: bytes | bytearray, start: int, end: int, header: BatchHeader) -> list[KeyedRecord]:
    """(record start, record end, offset, map key or None, is tombstone) of each record of a batch.

    The hot loop of the cleaner (a function call per field would cost a third more): the
    one-byte varints are decoded inline, longer ones through broker.protocol.types."""
    out: list[KeyedRecord] = []
    append = out.append
    pos = start
    base = header.base_offset
    try:
        for _ in range(header.records_count):
            b = buf[pos]
            if b < 0x80:
                rec_end = pos + 1 + ((b >> 1) ^ -(b & 1))
                p = pos + 2  # past the length and the attributes byte
            elif buf[pos + 1] < 0x80:
                raw = (b & 0x7F) | (buf[pos + 1] << 7)
                rec_end = pos + 2 + ((raw >> 1) ^ -(raw & 1))
                p = pos + 3
            else:
                length, p = decode_varint(buf, pos, end)
                rec_end = p + length
                p += 1
            if rec_end > end or rec_end <= p:
                raise IndexError
            while buf[p] >= 0x80:  # the timestamp delta: not needed
                p += 1
            b = buf[p + 1]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                p += 2
            elif buf[p + 2] < 0x80:
                raw = (b & 0x7F) | (buf[p + 2] << 7)
                offset_delta = (raw >> 1) ^ -(raw & 1)
                p += 3
            else:
                offset_delta, p = decode_varint(buf, p + 1, rec_end)
            b = buf[p]
            if b < 0x80:
                key_len = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                key_len, p = decode_varint(buf, p, rec_end)
            if key_len < 0:
                key = None
            else:
                key = bytes(buf[p : p + key_len])
                p += key_len
                if key_len > HASH_BYTES:
                    key = md5(key, usedforsecurity=False).digest()
            tombstone = buf[p] == 1  # the value's length is varint -1: a null value
            append((pos, rec_end, base + offset_delta, key, tombstone))
            pos = rec_end
    except IndexError:
        raise InvalidRecordError(f"record batch at offset {base} does not parse") from None
    return out


# -- one pass -----------------------------------------------------------------------------------

@dataclass
class CleanTask:
    """One pass over one log: what the cleaner needs to know, gathered under the log's lock."""

    directory: str
    segments: list[LogSegment]  # the inactive segments to clean, oldest first
    uppers: list[int]  # the offset each of ``segments`` ends before (the next segment's base)
    first_dirty: int
    end: int  # first uncleanable offset
    all_segments: list[LogSegment]  # every segment (to find each producer's last batch)
    segment_bytes: int
    delete_retention_ms: int
    now_ms: int
    generation: int  # the log's truncation count when the task was made: a swap after a truncation is refused
    dirty_position: int  # byte position of the first dirty batch in the segment holding it (0: a segment start)
    largest_timestamps: dict[int, int]  # base offset -> largest timestamp of each segment to clean

    def spec(self) -> CleanSpec:
        """This task as plain data, for a pass in a cleaner process (``rewrite_elsewhere``)."""
        return CleanSpec(self.directory, tuple(s.base_offset for s in self.segments), tuple(self.uppers),
                         self.first_dirty, self.end, tuple(s.base_offset for s in self.all_segments),
                         tuple(s.size for s in self.all_segments), self.segment_bytes, self.delete_retention_ms,
                         self.now_ms, self.dirty_position, dict(self.largest_timestamps))


@dataclass(frozen=True)
class CleanSpec:
    """A CleanTask without open files: segments by base offset (and the sizes they had then)."""

    directory: str
    bases: tuple[int, ...]
    uppers: tuple[int, ...]
    first_dirty: int
    end: int
    all_bases: tuple[int, ...]
    all_sizes: tuple[int, ...]
    segment_bytes: int
    delete_retention_ms: int
    now_ms: int
    dirty_position: int
    largest_timestamps: dict[int, int]


def build_offset_map(task: CleanTask, offset_map: OffsetMap, stats: CleanStats) -> int:
    """Fill the map from the dirty part; returns the offset after the last batch that fitted
    (the pass's end: later records stay dirty for the next pass)."""
    offset_map.clear()
    end = task.first_dirty
    for seg, upper in zip(task.segments, task.uppers):
        if upper <= task.first_dirty:
            continue
        start = task.dirty_position if seg.base_offset < task.first_dirty else 0
        for chunk, pos, header in _batches(seg, start):
            if header.base_offset >= task.end:
                return end
            if header.next_offset <= task.first_dirty or header.is_control:
                end = max(end, header.next_offset)
                continue
            if len(offset_map) + header.records_count > offset_map.slots:
                return end
            payload, rstart, rend = records_of(chunk, pos, header)
            offset_map.put_all([(key, offset) for _, _, offset, key, _ in _keys(payload, rstart, rend, header)
                                if key is not None and offset >= task.first_dirty])
            end = header.next_offset
    return end


def last_batch_of_producers(segments: list[LogSegment]) -> dict[int, int]:
    """Producer id -> base offset of its last batch in the log (headers only)."""
    last: dict[int, int] = {}
    for seg in segments:
        for _, header in seg.iter_headers():
            if header.producer_id != NO_PRODUCER_ID:
                last[header.producer_id] = header.base_offset
    return last


def filter_batch(chunk: bytes, pos: int, header: BatchHeader, offset_map: OffsetMap, drop_tombstones: bool,
                 keep_empty: bool, stats: CleanStats) -> bytes | None:
    """The batch with superseded records (and expired tombstones) left out; the original bytes
    when nothing goes, None when nothing stays (unless ``keep_empty``: an empty batch)."""
    if header.is_control:
        return bytes(chunk[pos : pos + header.size])
    payload, start, end = records_of(chunk, pos, header)
    found = _keys(payload, start, end, header)
    n = len(found)
    latest = offset_map.latest_of
    kept = [(rec_start, rec_end) for rec_start, rec_end, offset, key, tombstone in found
            if key is None or (latest(key, -1) <= offset and not (tombstone and drop_tombstones))]
    stats.records_read += n
    stats.records_kept += len(kept)
    if len(kept) == n:
        return bytes(chunk[pos : pos + header.size])
    if not kept and not keep_empty:
        return None
    body = b"".join(bytes(payload[s:e]) for s, e in kept)
    if header.compression and body:
        body = compress(header.compression, body)
    return build_batch(body, count=len(kept), base_ts=header.base_timestamp, max_ts=header.max_timestamp,
                       attributes=header.attributes, base_offset=header.base_offset, producer_id=header.producer_id,
                       producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
                       partition_leader_epoch=header.partition_leader_epoch, last_offset_delta=header.last_offset_delta)


def group_segments(segments: list[LogSegment], uppers: list[int], max_bytes: int) -> list[list[LogSegment]]:
    """Consecutive segments cleaned into one: their sizes add up to at most ``segment.bytes``
    and their offsets fit a segment's 32-bit relative offsets."""
    groups: list[list[LogSegment]] = []
    for seg, upper in zip(segments, uppers):
        group = groups[-1] if groups else None
        if (group is not None and sum(s.size for s in group) + seg.size <= max_bytes
                and upper - 1 - group[0].base_offset <= INT_MAX):
            group.append(seg)
        else:
            groups.append([seg])
    return groups


def write_cleaned(task: CleanTask, group: list[LogSegment], offset_map: OffsetMap, last_of_producer: dict[int, int],
                  stats: CleanStats) -> str:
    """Write the cleaned copy of ``group`` as ``<base>.log.cleaned``, fsynced; return its path."""
    path = os.path.join(task.directory, file_name(group[0].base_offset, CLEANED_SUFFIX))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        out: list[bytes] = []
        pending = 0
        for seg in group:
            drop_tombstones = task.now_ms - task.largest_timestamps[seg.base_offset] > task.delete_retention_ms
            stats.bytes_read += seg.size
            for chunk, pos, header in _batches(seg):
                keep_empty = last_of_producer.get(header.producer_id, -2) == header.base_offset
                batch = filter_batch(chunk, pos, header, offset_map, drop_tombstones, keep_empty, stats)
                if batch is not None:
                    out.append(batch)
                    pending += len(batch)
                if pending >= READ_CHUNK:
                    stats.bytes_written += _write_all(fd, b"".join(out))
                    out, pending = [], 0
        if out:
            stats.bytes_written += _write_all(fd, b"".join(out))
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def _write_all(fd: int, data: bytes) -> int:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    return len(data)


Written = list[tuple[list[int], str]]  # (base offsets of a group of old segments, its .cleaned file)


def rewrite(task: CleanTask, offset_map: OffsetMap, stats: CleanStats) -> Written:
    """The pass's work, no swap: map the dirty part, then write each group of segments' cleaned copy."""
    end = build_offset_map(task, offset_map, stats)
    stats.end_offset = end
    last_of_producer = last_batch_of_producers(task.all_segments)
    todo = [s for s in task.segments if s.base_offset < end]
    return [([s.base_offset for s in group], write_cleaned(task, group, offset_map, last_of_producer, stats))
            for group in group_segments(todo, task.uppers, task.segment_bytes)]


def swap_cleaned(task: CleanTask, written: Written, swap: Callable[[list[LogSegment], str, int], bool],
                 stats: CleanStats) -> None:
    """Swap each cleaned group in (``swap``: the log's ``replace_segments``), in order; once one is
    refused (the log changed meanwhile) the rest are dropped."""
    by_base = {s.base_offset: s for s in task.segments}
    for i, (bases, cleaned) in enumerate(written):
        swap_path = cleaned[: -len(CLEANED_SUFFIX)] + SWAP_SUFFIX
        os.rename(cleaned, swap_path)
        fsync_dir(task.directory)
        group = [by_base[b] for b in bases]
        if not swap(group, swap_path, task.generation):
            unlink_if_present(swap_path)
            for _, rest in written[i + 1 :]:
                unlink_if_present(rest)
            stats.aborted = "the log changed during cleaning"
            return
        stats.segments_cleaned += len(group)


def clean(task: CleanTask, offset_map: OffsetMap, swap: Callable[[list[LogSegment], str, int], bool],
          stats: CleanStats | None = None) -> CleanStats:
    """One pass in this thread: ``rewrite`` then ``swap_cleaned``."""
    stats = stats or CleanStats(first_dirty=task.first_dirty)
    began = time.monotonic()
    swap_cleaned(task, rewrite(task, offset_map, stats), swap, stats)
    stats.seconds = time.monotonic() - began
    return stats


# -- passes in cleaner processes ----------------------------------------------------------------

class CleanerProcesses:
    """``log.cleaner.threads`` processes that do the passes' work (``rewrite``), so a pass's CPU
    time never holds the broker's interpreter lock: produce and fetch go on at full speed while
    it runs. The swaps stay in the broker (``swap_cleaned``, under each log's lock). A process
    dies with the broker (``PR_SET_PDEATHSIG``, and a watchdog), so no orphan writes into a log
    directory a restarted broker owns. Started on the first pass."""

    def __init__(self, processes: int, dedupe_buffer_bytes: int) -> None:
        self.processes = max(1, processes)
        self.buffer_bytes = dedupe_buffer_bytes // self.processes
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None

    def _executor(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(self.processes, mp_context=multiprocessing.get_context("spawn"),
                                                 initializer=_die_with, initargs=(os.getpid(),))
            return self._pool

    def clean(self, task: CleanTask, swap: Callable[[list[LogSegment], str, int], bool]) -> CleanStats:
        """One pass: ``rewrite`` in a cleaner process, then ``swap_cleaned`` here."""
        began = time.monotonic()
        try:
            written, stats = self._executor().submit(_rewrite_spec, task.spec(), self.buffer_bytes).result()
        except BrokenProcessPool:
            with self._lock:
                self._pool = None  # a process died (killed?): the next pass starts new ones
            stats = CleanStats(first_dirty=task.first_dirty, aborted="a cleaner process died")
            written = []
        if not stats.aborted:
            swap_cleaned(task, written, swap, stats)
        else:
            for _, path in written:
                unlink_if_present(path)
        stats.seconds = time.monotonic() - began
        return stats

    def close(self) -> None:
        """Wait for a pass under way, then stop the processes."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


_PROCESS_MAP: list[OffsetMap] = []  # a cleaner process's key map, made on its first pass


def _rewrite_spec(spec: CleanSpec, buffer_bytes: int) -> tuple[Written, CleanStats]:
    """In a cleaner process: open the task's segments by name and ``rewrite``; a segment deleted
    meanwhile (retention) aborts the pass."""
    if not _PROCESS_MAP:
        _PROCESS_MAP.append(OffsetMap(buffer_bytes))
    stats = CleanStats(first_dirty=spec.first_dirty)
    opened: dict[int, LogSegment] = {}
    try:
        for base, size in zip(spec.all_bases, spec.all_sizes):
            seg = opened[base] = LogSegment.open(spec.directory, base, _READ_ONLY_CONFIG)
            seg.size = min(seg.size, size)  # as the task saw it: appends since then are not this pass's
        task = CleanTask(spec.directory, [opened[b] for b in spec.bases], list(spec.uppers), spec.first_dirty, spec.end,
                         [opened[b] for b in spec.all_bases], spec.segment_bytes, spec.delete_retention_ms, spec.now_ms,
                         -1, spec.dirty_position, spec.largest_timestamps)
        return rewrite(task, _PROCESS_MAP[0], stats), stats
    except FileNotFoundError:
        stats.aborted = "a segment was deleted during cleaning"
        return [], stats
    finally:
        for seg in opened.values():
            seg.file.close()  # not seg.close(): that writes indexes, which only the broker may


def _die_with(parent: int) -> None:
    """A cleaner process's start: be killed when the broker dies, however it dies."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the watchdog alone
        pass
    if os.getppid() != parent:
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.1)
        os._exit(1)

    threading.Thread(target=watch, name="cleaner-watchdog", daemon=True).start()


_PR_SET_PDEATHSIG = 1


# -- recovery -----------------------------------------------------------------------------------

def swap_in(directory: str, swap_path: str, old_bases: list[int]) -> None:
    """Replace the segments at ``old_bases`` with the ``.swap`` file: old ``.log`` files become
    ``.deleted`` first, then the swap becomes ``<base>.log``; a crash anywhere is finished by
    ``complete_swaps``."""
    for base in old_bases:
        for suffix in (".index", ".timeindex"):
            unlink_if_present(os.path.join(directory, file_name(base, suffix)))
        old = os.path.join(directory, file_name(base, ".log"))
        if os.path.exists(old):
            os.rename(old, os.path.join(directory, file_name(base, DELETED_SUFFIX)))
    target = swap_path[: -len(SWAP_SUFFIX)] + ".log"
    os.rename(swap_path, target)
    fsync_dir(directory)
    for base in old_bases:
        unlink_if_present(os.path.join(directory, file_name(base, DELETED_SUFFIX)))


def complete_swaps(directory: str) -> list[int]:
    """Finish cleaner swaps a crash interrupted: each ``.swap`` (written whole and fsynced before
    it got that name) replaces the ``.log`` files whose offsets it covers. Returns the base
    offsets of the segments swapped in (their indexes must be rebuilt)."""
    names = os.listdir(directory)
    swaps = sorted(n for n in names if n.endswith(SWAP_SUFFIX) and n[:20].isdigit())
    bases = sorted(int(n[:20]) for n in names if n.endswith(".log") and len(n) == 24 and n[:20].isdigit())
    done = []
    for name in swaps:
        base = int(name[:20])
        path = os.path.join(directory, name)
        next_offset = base
        with open(path, "rb") as f:
            data = f.read()
        for _, header in iter_batches(data, Tail.TRUNCATE):
            next_offset = header.next_offset
        covered = [b for b in bases if base <= b < max(next_offset, base + 1)]
        log.warning("%s: completing an interrupted cleaner swap over segments %s", path, covered)
        swap_in(directory, path, covered)
        done.append(base)
    return done
