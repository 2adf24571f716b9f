"""One segment: ``<base>.log`` of v2 batches stored as received, with its two indexes."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence

from broker.protocol.errors import KafkaStorageError
from broker.protocol.records.layout import (
    COMPRESSION_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    read_header,
    read_prefix,
)
from broker.protocol.records.walker import Tail, iter_batches
from broker.protocol.types import decode_varint, decode_varlong
from broker.storage.checkpoint import unlink_if_present
from broker.storage.config import INT_MAX, LogConfig
from broker.storage.file_slice import SegmentFile
from broker.storage.index import CorruptIndexError, OffsetIndex, TimeIndex, fsync_path

log = logging.getLogger(__name__)

HEADER_CHUNK = 16 * 1024  # one pread while walking headers: covers an index interval of small batches
RECOVERY_CHUNK = 4 * 1024 * 1024

# (position in the appended buffer, base offset, max timestamp, size) of each appended batch
BatchEntry = tuple[int, int, int, int]


def file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class LogSegment:
    """A ``.log`` file plus ``.index`` and ``.timeindex``; the log appends only to its last one."""

    def __init__(self, directory: str, base_offset: int, config: LogConfig, file: SegmentFile, size: int, *,
                 on_disk: bool) -> None:
        self.base_offset = base_offset
        self.file = file
        self.size = size
        self.index_interval = config.index_interval_bytes
        self.offset_index = OffsetIndex(
            os.path.join(directory, file_name(base_offset, ".index")), base_offset, config.segment_index_bytes, on_disk=on_disk
        )
        self.time_index = TimeIndex(
            os.path.join(directory, file_name(base_offset, ".timeindex")), base_offset, config.segment_index_bytes,
            on_disk=on_disk,
        )
        # Exact only once the segment has been appended to, scanned, or its tail read.
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self._max_ts_known = not on_disk
        self.bytes_since_index = 0
        self.first_append_ms: int | None = None

    # -- life cycle -------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: str, base_offset: int, config: LogConfig) -> LogSegment:
        """A new empty segment (files created now, so the layout is whole)."""
        path = os.path.join(directory, file_name(base_offset, ".log"))
        file = SegmentFile(path, create=True)
        if file.size():
            file.close()
            raise KafkaStorageError(f"cannot create segment {path}: a non-empty file is in the way")
        seg = cls(directory, base_offset, config, file, 0, on_disk=False)
        seg.offset_index.create_file()
        seg.time_index.create_file()
        return seg

    @classmethod
    def open(cls, directory: str, base_offset: int, config: LogConfig) -> LogSegment:
        """An existing segment; its indexes are read on first use."""
        file = SegmentFile(os.path.join(directory, file_name(base_offset, ".log")))
        return cls(directory, base_offset, config, file, file.size(), on_disk=True)

    @property
    def path(self) -> str:
        return self.file.path

    def index_files_ok(self) -> bool:
        """Cheap load-time check (sizes only) of the index files."""
        return self.offset_index.file_size_ok() and self.time_index.file_size_ok()

    def ensure_indexes(self) -> None:
        """Load lazily-read indexes; rebuild them from the log if they are corrupt."""
        try:
            self.offset_index.ensure_loaded(self.size)
            self.time_index.ensure_loaded(self.size)
        except CorruptIndexError as exc:
            log.warning("rebuilding indexes of %s: %s", self.path, exc)
            self.recover()

    def on_become_inactive(self) -> None:
        """The log rolled past this segment: record its largest timestamp and write the indexes."""
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.write_indexes()

    def write_indexes(self) -> None:
        """Write index entries still in memory to the files (no fsync)."""
        self.offset_index.write_out()
        self.time_index.write_out()

    def sync(self) -> None:
        """fsync the log and index files; safe without the log's lock (touches no shared state)."""
        os.fsync(self.file.fileno())
        fsync_path(self.offset_index.path)
        fsync_path(self.time_index.path)

    def close(self) -> None:
        self.write_indexes()
        self.file.close()

    def delete_files(self) -> None:
        """Unlink the files. The descriptor stays open for slices still holding the file."""
        self.file.unlink()
        unlink_if_present(self.offset_index.path)
        unlink_if_present(self.time_index.path)

    # -- append -------------------------------------------------------------------------------

    def append(self, data: bytes | bytearray | memoryview, entries: Sequence[BatchEntry], next_offset: int, now_ms: int) -> None:
        """Write ``data`` (whole batches, offsets stamped) with one write call and index it."""
        start = self.size
        fd = self.file.fileno()
        try:
            written = os.write(fd, data)
            while written < len(data):
                written += os.write(fd, memoryview(data)[written:])
        except OSError as exc:
            try:
                os.ftruncate(fd, start)
            except OSError:
                pass
            raise KafkaStorageError(f"append to {self.path} failed: {exc}") from exc
        if self.first_append_ms is None:
            self.first_append_ms = now_ms
        for pos, base_offset, max_timestamp, size in entries:
            self._index_batch(start + pos, base_offset, max_timestamp, size)
        self.size = start + len(data)
        self.next_offset = next_offset

    def _index_batch(self, position: int, base_offset: int, max_timestamp: int, size: int) -> None:
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = base_offset
        if self.bytes_since_index > self.index_interval:
            self.offset_index.append(base_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_index = 0
        self.bytes_since_index += size

    def is_index_full(self) -> bool:
        return self.offset_index.is_full() or self.time_index.is_full()

    # -- read ---------------------------------------------------------------------------------

    def iter_headers(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of whole batches from ``start`` (a batch boundary) to ``end``.

        Reads headers only (no CRC), a small window per pread; stops at a partial or
        impossible header.
        """
        for pos, header, _, _ in self._walk_headers(start, end):
            yield pos, header

    def _walk_headers(self, start: int, end: int | None) -> Iterator[tuple[int, BatchHeader, bytes, int]]:
        """iter_headers' walk, with the window read last and its position in the file."""
        end = self.size if end is None else end
        pos = start
        buf = b""
        buf_pos = 0
        pread = self.file.pread
        while pos + HEADER_SIZE <= end:
            off = pos - buf_pos
            if off + HEADER_SIZE > len(buf):
                buf = pread(min(HEADER_CHUNK, end - pos), pos)
                buf_pos, off = pos, 0
                if len(buf) < HEADER_SIZE:
                    return
            header = read_header(buf, off)
            if header.batch_length < MIN_BATCH_LENGTH or pos + header.size > end:
                return
            yield pos, header, buf, buf_pos
            pos += header.size

    def translate_offset(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= ``offset``."""
        found = self.locate(offset)
        return None if found is None else (found[0], found[1])

    def locate(self, offset: int) -> tuple[int, BatchHeader, bytes, int] | None:
        """translate_offset's answer, with the bytes its walk read last and their position in the
        file: a small read that lies inside them needs no second pread."""
        self.ensure_indexes()
        _, start = self.offset_index.lookup(offset)
        for found in self._walk_headers(start, None):
            if found[1].last_offset >= offset:
                return found
        return None

    def offset_after_batches(self, start: int, start_offset: int, end: int) -> int:
        """The offset after the last whole batch in bytes [``start``, ``end``), where ``start``
        is a batch boundary and ``start_offset`` that batch's base offset (returned if no batch
        is whole). Walks headers from the index entry nearest ``end``: an index interval at most."""
        self.ensure_indexes()
        offset, pos = self.offset_index.lookup_position(end)
        if pos <= start:
            offset, pos = start_offset, start
        for _, header in self.iter_headers(pos, end):
            offset = header.last_offset + 1
        return offset

    def largest_timestamp(self) -> int:
        """Largest batch timestamp in the segment, -1 if none has one."""
        if not self._max_ts_known:
            self.ensure_indexes()
            if not self._max_ts_known:  # ensure_indexes may have rebuilt everything
                self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry()
                self._max_ts_known = True
        return self.max_timestamp

    def retention_timestamp(self) -> int:
        """The time retention.ms measures from: largest timestamp, else the file's mtime (as Kafka)."""
        ts = self.largest_timestamp()
        if ts >= 0:
            return ts
        return os.stat(self.file.fileno()).st_mtime_ns // 1_000_000

    def find_timestamp(self, timestamp: int, min_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``timestamp`` and ``min_offset``.

        Exact for uncompressed CreateTime batches; otherwise the batch's base offset (or
        ``min_offset``) and its max timestamp, since the produce path never decompresses.
        """
        self.ensure_indexes()
        _, ts_offset = self.time_index.lookup(timestamp)
        _, start = self.offset_index.lookup(max(ts_offset, min_offset))
        for pos, header in self.iter_headers(start):
            if header.max_timestamp >= timestamp and header.last_offset >= min_offset:
                exact = None
                if not header.attributes & (TIMESTAMP_TYPE_MASK | COMPRESSION_MASK):
                    exact = _first_record_at(self.file.pread(header.size, pos), header, timestamp, min_offset)
                return exact or (max(header.base_offset, min_offset), header.max_timestamp)
        return None

    # -- recovery and truncation -------------------------------------------------------------

    def _reset_state(self) -> None:
        self.offset_index.clear()
        self.time_index.clear()
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self.bytes_since_index = 0
        self.next_offset = self.base_offset
        self._max_ts_known = True

    def recover(self) -> int:
        """Check every batch (length, magic, CRC, offsets), rebuild the indexes, cut the file
        at the first bad or partial byte. Returns the number of bytes cut."""
        self._reset_state()
        size = self.file.size()
        pos = 0
        expected = self.base_offset
        want = RECOVERY_CHUNK
        while pos < size:
            buf = self.file.pread(min(want, size - pos), pos)
            walked = 0
            for off, header in iter_batches(buf, Tail.TRUNCATE):
                if (header.base_offset < expected or header.last_offset_delta < 0
                        or header.last_offset - self.base_offset > INT_MAX):
                    break
                self._index_batch(pos + off, header.base_offset, header.max_timestamp, header.size)
                expected = header.next_offset
                walked = off + header.size
            else:  # the walk ended at the chunk's end, or at a partial or damaged batch
                pos += walked
                want = _cut_by_chunk(buf, walked, size - pos)
                if want:
                    continue
                break
            pos += walked  # a batch out of order
            break
        self.next_offset = expected
        cut = size - pos
        if cut:
            os.ftruncate(self.file.fileno(), pos)
        self.size = pos
        return cut

    def load_tail_state(self) -> bool:
        """Read the headers after the last index entry to learn the next offset and largest
        timestamp of a trusted segment. False if the tail is damaged (the caller recovers)."""
        self.ensure_indexes()
        _, start = self.offset_index.last_entry()
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry()
        self.next_offset = self.base_offset
        end = start
        for pos, header in self.iter_headers(start):
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.base_offset
            self.next_offset = header.next_offset
            end = pos + header.size
        self.bytes_since_index = end - start
        self._max_ts_known = True
        if start and end == start:
            return False  # the last index entry points at nothing
        return end == self.size

    def first_batch_timestamp(self) -> int:
        """Max timestamp of the first batch, -1 if empty (starts the segment.ms clock after a restart)."""
        if self.size < HEADER_SIZE:
            return -1
        return read_header(self.file.pread(HEADER_SIZE, 0)).max_timestamp

    def truncate_to(self, offset: int) -> int:
        """Remove the batch holding ``offset`` and everything after; return the bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        pos, header = found
        removed = self.size - pos
        try:
            os.ftruncate(self.file.fileno(), pos)
        except OSError as exc:
            raise KafkaStorageError(f"truncating {self.path} failed: {exc}") from exc
        self.size = pos
        self.offset_index.truncate_to(header.base_offset)
        self.time_index.truncate_to(header.base_offset)
        self.load_tail_state()
        if self.size == 0:
            self.first_append_ms = None
        return removed


def _cut_by_chunk(buf: bytes, at: int, file_left: int) -> int:
    """Bytes to read from ``at`` on when the walk of ``buf`` ended there only because the chunk
    cut the next batch (the file holds more of it), else 0: the batch is damaged or partial."""
    left = len(buf) - at
    if left < LOG_OVERHEAD:
        return RECOVERY_CHUNK if file_left > left else 0
    _, length = read_prefix(buf, at)
    batch_size = length + LOG_OVERHEAD
    if length < MIN_BATCH_LENGTH or batch_size <= left or batch_size > file_left:
        return 0
    return max(RECOVERY_CHUNK, batch_size)


def _first_record_at(batch: bytes, header: BatchHeader, timestamp: int, min_offset: int) -> tuple[int, int] | None:
    """Walk the records of an uncompressed batch for the first with timestamp and offset at least the targets."""
    pos = HEADER_SIZE
    try:
        for _ in range(header.records_count):
            length, pos = decode_varint(batch, pos)
            end = pos + length
            ts_delta, p = decode_varlong(batch, pos + 1)  # skip the attributes byte
            offset_delta, _ = decode_varint(batch, p)
            ts = header.base_timestamp + ts_delta
            offset = header.base_offset + offset_delta
            if ts >= timestamp and offset >= min_offset:
                return offset, ts
            pos = end
    except (IndexError, ValueError):
        return None
    return None
