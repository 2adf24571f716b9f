"""Kafka's offset checkpoint files: ``0\\n<count>\\n<topic> <partition> <offset>\\n...``.

Used for recovery-point-offset-checkpoint, log-start-offset-checkpoint,
replication-offset-checkpoint and cleaner-offset-checkpoint; written atomically (tmp, fsync, rename, fsync dir).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

log = logging.getLogger(__name__)

RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
HIGH_WATERMARK_FILE = "replication-offset-checkpoint"
CLEANER_OFFSET_FILE = "cleaner-offset-checkpoint"  # each compacted log's first dirty offset
_VERSION = 0


def write_checkpoint(path: str, offsets: Mapping[tuple[str, int], int]) -> None:
    """Replace ``path`` with ``offsets`` so a crash leaves either the old or the new file."""
    lines = [str(_VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(path) or ".")


def read_checkpoint(path: str) -> dict[tuple[str, int], int]:
    """Offsets in a checkpoint file; a missing or malformed file reads as empty (logs then recover fully)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return {}
    try:
        if int(lines[0]) != _VERSION:
            raise ValueError(f"unsupported version {lines[0]!r}")
        count = int(lines[1])
        entries = lines[2 : 2 + count]
        if len(entries) != count:
            raise ValueError(f"expected {count} entries, found {len(entries)}")
        offsets = {}
        for line in entries:
            topic, partition, offset = line.split(" ")
            offsets[(topic, int(partition))] = int(offset)
        return offsets
    except (ValueError, IndexError) as exc:
        log.warning("ignoring malformed checkpoint %s: %s", path, exc)
        return {}


def fsync_dir(path: str) -> None:
    """Make a directory's entries (new, renamed, removed files) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def unlink_if_present(path: str) -> None:
    """Remove a file; one already gone is not an error."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
