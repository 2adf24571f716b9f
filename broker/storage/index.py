"""Sparse indexes of a segment, kept in memory and written out at flush, roll and close.

``.index``: entries of (offset - base offset) int32 and file position int32, big-endian as in
Kafka. Entries name a batch's base offset and start position, one per ``index.interval.bytes``
of data. ``.timeindex``: (timestamp int64, offset - base offset int32), an entry when the
segment's largest timestamp has grown, written at the same points, plus a final one when the
segment stops being active. Lookups find the last entry at or below the target; the caller
scans batch headers forward from there, so a coarser (or Kafka-written) index is still correct.
Indexes of segments loaded from disk are read lazily, on first use.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from pathlib import Path

_SWAP = sys.byteorder == "little"
_TIME_ENTRY = struct.Struct(">qi")


class CorruptIndexError(Exception):
    """An index file that cannot describe its segment; the segment rebuilds it from the log."""


def _write_file(path: str, data: bytes, *, append: bool, sync: bool) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_APPEND if append else os.O_TRUNC)
    fd = os.open(path, flags, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def fsync_path(path: str) -> None:
    """fsync a file (or directory) by path; a file that is gone needs nothing."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _Index:
    """What both indexes share: lazy load, append-only write-out, truncation."""

    entry_size = 0

    def __init__(self, path: str, base_offset: int, max_index_bytes: int, *, on_disk: bool) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self.entry_size)
        self._keys: array = self._new_keys()
        self._rel = array("i")
        self._written = 0  # entries already in the file
        self._rewrite = False  # the file holds entries since truncated away
        self._loaded = not on_disk
        self._file_made = on_disk  # a new segment's index file is made by its first write-out

    def _new_keys(self) -> array:
        raise NotImplementedError

    def file_size_ok(self) -> bool:
        """Cheap check at load: the file exists and holds whole entries."""
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            return False
        return size % self.entry_size == 0

    def ensure_loaded(self, log_size: int) -> None:
        """Read the file on first use; raise CorruptIndexError if it cannot be right."""
        if self._loaded:
            return
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise CorruptIndexError(f"{self.path} is missing") from None
        if len(data) % self.entry_size:
            raise CorruptIndexError(f"{self.path}: size {len(data)} is not a multiple of {self.entry_size}")
        self._decode(data)
        self._loaded = True
        self._written = len(self._rel)
        self._validate(log_size)

    def _decode(self, data: bytes) -> None:
        raise NotImplementedError

    def _validate(self, log_size: int) -> None:
        rel = self._rel
        if rel and (rel[0] < 0 or any(a > b for a, b in zip(rel, rel[1:]))):
            self.clear()
            raise CorruptIndexError(f"{self.path}: offsets are not increasing")

    def __len__(self) -> int:
        return len(self._rel)

    def is_full(self) -> bool:
        return len(self._rel) >= self.max_entries

    def clear(self) -> None:
        """Drop every entry (before a rebuild)."""
        self._keys = self._new_keys()
        self._rel = array("i")
        self._loaded = True
        self._written = 0
        self._rewrite = True

    def _cut(self, keep: int) -> None:
        if keep < len(self._rel):
            del self._keys[keep:]
            del self._rel[keep:]
            if keep < self._written:
                self._written = keep
                self._rewrite = True

    def truncate_to(self, offset: int) -> None:
        """Remove entries whose offset is ``offset`` or beyond."""
        self._cut(bisect_left(self._rel, offset - self.base_offset))

    def create_file(self) -> None:
        """A new segment's index: its file is made by the first write-out (a flush, a roll, the
        log's close), not now, so a new partition costs a directory and a log file, not four
        files (a topic of 10,000 partitions waited on 20,000 index creations per broker). A
        crash before that leaves the segment past the recovery point, which rebuilds it."""
        self._file_made = False
        self._rewrite = False
        self._written = len(self._rel)

    def write_out(self, *, sync: bool = False) -> None:
        """Write entries not yet in the file (or rewrite it after a truncation)."""
        if not self._loaded:
            if sync:
                fsync_path(self.path)
            return
        if not self._file_made or self._rewrite:
            _write_file(self.path, self._encode(0), append=False, sync=sync)
            self._rewrite = False
            self._file_made = True
        elif self._written < len(self._rel) or sync:
            _write_file(self.path, self._encode(self._written), append=True, sync=sync)
        self._written = len(self._rel)

    def _encode(self, start: int) -> bytes:
        raise NotImplementedError

    def delete_file(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class OffsetIndex(_Index):
    """Batch base offset -> file position, sparse."""

    entry_size = 8

    def _new_keys(self) -> array:
        return array("i")  # positions

    def _decode(self, data: bytes) -> None:
        flat = array("i")
        flat.frombytes(data)
        if _SWAP:
            flat.byteswap()
        self._rel = flat[0::2]
        self._keys = flat[1::2]

    def _validate(self, log_size: int) -> None:
        pos = self._keys
        if pos and (pos[-1] >= log_size or pos[0] < 0 or any(a >= b for a, b in zip(pos, pos[1:]))):
            self.clear()
            raise CorruptIndexError(f"{self.path}: positions are not increasing within the log")
        super()._validate(log_size)

    def _encode(self, start: int) -> bytes:
        n = len(self._rel) - start
        flat = array("i", bytes(8 * n))
        flat[0::2] = self._rel[start:]
        flat[1::2] = self._keys[start:]
        if _SWAP:
            flat.byteswap()
        return flat.tobytes()

    def append(self, offset: int, position: int) -> None:
        self._rel.append(offset - self.base_offset)
        self._keys.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or below ``offset``, else (base offset, 0)."""
        i = bisect_right(self._rel, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._rel[i], self._keys[i]

    def lookup_position(self, position: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or before file ``position``, else (base offset, 0)."""
        i = bisect_right(self._keys, position) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._rel[i], self._keys[i]

    def last_entry(self) -> tuple[int, int]:
        if not self._rel:
            return self.base_offset, 0
        return self.base_offset + self._rel[-1], self._keys[-1]


class TimeIndex(_Index):
    """Largest timestamp so far -> offset of the batch that first reached it, sparse."""

    entry_size = 12

    def _new_keys(self) -> array:
        return array("q")  # timestamps

    def _decode(self, data: bytes) -> None:
        ts = array("q")
        rel = array("i")
        for t, r in _TIME_ENTRY.iter_unpack(data):
            ts.append(t)
            rel.append(r)
        self._keys = ts
        self._rel = rel

    def _validate(self, log_size: int) -> None:
        ts = self._keys
        if any(a >= b for a, b in zip(ts, ts[1:])):
            self.clear()
            raise CorruptIndexError(f"{self.path}: timestamps are not increasing")
        super()._validate(log_size)

    def _encode(self, start: int) -> bytes:
        pack = _TIME_ENTRY.pack
        return b"".join(pack(t, r) for t, r in zip(self._keys[start:], self._rel[start:]))

    def is_full(self) -> bool:
        # keep one slot for the entry written when the segment becomes inactive
        return len(self._rel) >= self.max_entries - 1

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add an entry if ``timestamp`` is larger than the last one."""
        if timestamp > (self._keys[-1] if self._keys else -1):
            self._keys.append(timestamp)
            self._rel.append(offset - self.base_offset)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the last entry at or below ``timestamp``, else (-1, base offset)."""
        i = bisect_right(self._keys, timestamp) - 1
        if i < 0:
            return -1, self.base_offset
        return self._keys[i], self.base_offset + self._rel[i]

    def last_entry(self) -> tuple[int, int]:
        if not self._rel:
            return -1, self.base_offset
        return self._keys[-1], self.base_offset + self._rel[-1]


def read_offset_index_entries(path: str | Path) -> Iterator[tuple[int, int]]:
    """(relative offset, position) of each entry of an ``.index`` file (for dump-log)."""
    data = Path(path).read_bytes()
    usable = len(data) - len(data) % OffsetIndex.entry_size
    return struct.iter_unpack(">ii", data[:usable])


def read_time_index_entries(path: str | Path) -> Iterator[tuple[int, int]]:
    """(timestamp, relative offset) of each entry of a ``.timeindex`` file (for dump-log)."""
    data = Path(path).read_bytes()
    usable = len(data) - len(data) % TimeIndex.entry_size
    return _TIME_ENTRY.iter_unpack(data[:usable])
