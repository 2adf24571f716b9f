"""Open segment files and byte ranges of them handed to the network layer."""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from broker.storage.checkpoint import unlink_if_present

# The last close of an unlinked file frees its blocks: most of a second for a 1 GiB segment on
# ext4 here. One thread of its own does it, so no caller (the broker's reactor) waits for it.
_CLOSER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="deleted-segment-closer")


def deleted_files_closed() -> Future[None]:
    """Done once every close of a deleted file asked for so far has run (one worker, in order)."""
    return _CLOSER.submit(lambda: None)


class SegmentFile:
    """An open ``.log`` file. Its descriptor closes when the last holder drops it.

    Retention unlinks a segment and drops the log's reference, but a ``FileSlice`` being
    sent keeps this object (and so the descriptor and the unlinked inode) alive. The close of
    an unlinked file runs in the closer thread.
    """

    __slots__ = ("fd", "path", "deleted")

    def __init__(self, path: str, *, create: bool = False) -> None:
        flags = os.O_RDWR | os.O_APPEND | os.O_CLOEXEC | (os.O_CREAT if create else 0)
        self.path = path
        self.deleted = False
        self.fd = -1
        self.fd = os.open(path, flags, 0o644)

    def fileno(self) -> int:
        return self.fd

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def pread(self, size: int, position: int) -> bytes:
        """Read up to ``size`` bytes at ``position`` (fewer only at end of file)."""
        data = os.pread(self.fd, size, position)
        if len(data) == size or not data:
            return data
        parts = [data]
        got = len(data)
        while got < size:
            more = os.pread(self.fd, size - got, position + got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        return b"".join(parts)

    def unlink(self) -> None:
        """Remove the file's name; the descriptor stays open for its holders."""
        unlink_if_present(self.path)
        self.mark_unlinked()

    def mark_unlinked(self) -> None:
        """The file's name is gone (unlinked here, or renamed over by a cleaner swap): its last
        close runs in the closer thread."""
        self.deleted = True

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd < 0:
            return
        if self.deleted:
            try:
                _CLOSER.submit(os.close, fd)
                return
            except RuntimeError:  # the interpreter is shutting down: no thread to hand it to
                pass
        os.close(fd)

    def __del__(self) -> None:
        try:
            self.close()
        except OSError:
            pass

    def __repr__(self) -> str:
        return f"SegmentFile({self.path!r}, fd={self.fd})"


@dataclass(slots=True, eq=False)
class FileSlice:
    """``size`` bytes at ``position`` of an open segment file, for ``os.sendfile``.

    ``held``, when set, is bytes the read already has that hold the slice from ``held_at``:
    reading the slice then needs no second pread.
    """

    file: SegmentFile
    position: int
    size: int
    held: bytes | None = None
    held_at: int = 0

    def fileno(self) -> int:
        return self.file.fileno()

    def read_bytes(self) -> bytes:
        """The slice's bytes (the TLS/test fallback); short only if the log was truncated since."""
        if self.held is not None:
            return self.held[self.held_at:self.held_at + self.size]
        return self.file.pread(self.size, self.position)

    def __repr__(self) -> str:
        return f"FileSlice({self.file.path!r}, position={self.position}, size={self.size})"
