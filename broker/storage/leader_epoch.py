"""The leader-epoch cache of one partition: leader epoch -> the first offset written in it.

Kept in Kafka's ``leader-epoch-checkpoint`` file in the partition directory
(``0\\n<count>\\n<epoch> <start offset>\\n...``), rewritten on each change (changes happen only
when leadership moves or the log is truncated) through a renamed temporary file, so a killed
process leaves the old or the new file. As Kafka since KAFKA-15046, the change is not fsynced
at once (two fsyncs per partition made a failover's thousands of new leaderships wait on the
disk): the log syncs the file before it syncs its records (``sync``), so a record that
survives a power loss has its epoch on disk. A follower asks the leader for
the end offset of its latest epoch (OffsetForLeaderEpoch) and truncates there, so no replica
keeps records the leader never had.
"""

from __future__ import annotations

import os
import threading

from broker.storage.checkpoint import fsync_dir

LEADER_EPOCH_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1
_VERSION = 0


class LeaderEpochCache:
    """Sorted (epoch, start offset) entries with strictly increasing epochs and offsets."""

    def __init__(self, directory: str, log_end_offset: int | None = None) -> None:
        self.path = os.path.join(directory, LEADER_EPOCH_FILE)
        self._lock = threading.Lock()
        self._unsynced = False
        self._entries: list[tuple[int, int]] = _read(self.path)
        if log_end_offset is not None:
            self.truncate_from_end(log_end_offset)

    @property
    def entries(self) -> list[tuple[int, int]]:
        with self._lock:
            return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        with self._lock:
            return self._entries[-1][0] if self._entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (a no-op for a known or older epoch).

        A later epoch starting at the same or an earlier offset replaces the entries it covers.
        """
        with self._lock:
            if self._entries and epoch <= self._entries[-1][0]:
                return
            while self._entries and self._entries[-1][1] >= start_offset:
                self._entries.pop()
            self._entries.append((epoch, start_offset))
            self._write()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's answer to OffsetForLeaderEpoch: (the largest epoch <= ``epoch``, its end offset).

        The end offset of an epoch is the start of the next one, or the log end for the latest
        epoch; (UNDEFINED_EPOCH, UNDEFINED_OFFSET) when ``epoch`` is older than every entry."""
        with self._lock:
            entries = self._entries
            if not entries:
                return UNDEFINED_EPOCH, UNDEFINED_OFFSET
            if epoch >= entries[-1][0]:
                return entries[-1][0], log_end_offset
            for i in range(len(entries) - 1, -1, -1):
                if entries[i][0] <= epoch:
                    return entries[i][0], entries[i + 1][1]
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was cut at ``end_offset``: forget epochs that start at or after it."""
        with self._lock:
            before = len(self._entries)
            while self._entries and self._entries[-1][1] >= end_offset:
                self._entries.pop()
            if len(self._entries) != before:
                self._write()

    def clear(self) -> None:
        with self._lock:
            if self._entries:
                self._entries = []
                self._write()

    def sync(self) -> None:
        """Make the last rewrite durable (file and directory entry), if there was one since."""
        with self._lock:
            if not self._unsynced:
                return
            self._unsynced = False
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                return  # the log was deleted
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            fsync_dir(os.path.dirname(self.path))

    def _write(self) -> None:
        lines = [str(_VERSION), str(len(self._entries))] + [f"{e} {o}" for e, o in self._entries]
        if not os.path.isdir(os.path.dirname(self.path)):
            return  # the log was deleted
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, self.path)
        self._unsynced = True


def _read(path: str) -> list[tuple[int, int]]:
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
    except FileNotFoundError:
        return []
    try:
        count = int(lines[1])
        entries = []
        for line in lines[2 : 2 + count]:
            epoch, offset = line.split()
            entries.append((int(epoch), int(offset)))
        return entries
    except (IndexError, ValueError):
        return []
