"""Idempotent producers: the last batches of each producer id, to drop retries and catch gaps.

Rules (Kafka's, with one leniency): a batch whose producer epoch and sequence range equal one
of the producer's last 5 batches is a retry and is not written again; an older epoch is
fenced (INVALID_PRODUCER_EPOCH); within an epoch the first sequence must follow the last one
(wrapping at 2^31-1), else OUT_OF_ORDER_SEQUENCE_NUMBER. The first batch of an unknown
producer or of a new epoch is accepted at any sequence (Kafka insists on 0 for a new epoch
of a known producer). State is snapshotted to ``<20-digit offset>.snapshot`` (JSON, covering
every batch below that offset) at each roll (fsynced by the flush that follows, off the
append path) and at close, and rebuilt on load from the latest snapshot plus the batch headers
after it.
"""

from __future__ import annotations

import json
import logging
import os
from collections import deque
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from broker.protocol.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from broker.protocol.records.layout import BatchHeader
from broker.storage.checkpoint import unlink_if_present

log = logging.getLogger(__name__)

MAX_CACHED_BATCHES = 5
SNAPSHOT_SUFFIX = ".snapshot"
_INT32_MAX = 2**31 - 1


class BatchMetadata(NamedTuple):
    """Where one producer batch went: enough to answer its retry."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class ProducerEntry:
    """One producer id: its epoch and its last few batches."""

    __slots__ = ("epoch", "batches", "last_append_ms")

    def __init__(self, epoch: int, last_append_ms: int) -> None:
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=MAX_CACHED_BATCHES)
        self.last_append_ms = last_append_ms

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def find_duplicate(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for meta in self.batches:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return meta
        return None


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


def _has_sequence(header: BatchHeader) -> bool:
    return header.producer_id >= 0 and header.base_sequence >= 0


class ProducerStateManager:
    """Producer id -> ProducerEntry for one partition log."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def check(self, batches: Sequence[tuple[int, BatchHeader]]) -> BatchMetadata | None:
        """Validate an append's producer fields before anything is written.

        Returns the original metadata when the append retries a batch already in the log;
        raises InvalidProducerEpochError / OutOfOrderSequenceError; changes nothing.
        """
        pending: dict[int, tuple[int, int]] | None = None
        for _, header in batches:
            if not _has_sequence(header):
                continue
            pid = header.producer_id
            if pending is not None and pid in pending:
                epoch, last_seq = pending[pid]
            else:
                entry = self.producers.get(pid)
                if entry is None:
                    epoch, last_seq = None, -1
                else:
                    if header.producer_epoch == entry.epoch:
                        duplicate = entry.find_duplicate(header.base_sequence, header.last_sequence)
                        if duplicate is not None:
                            return duplicate
                    epoch, last_seq = entry.epoch, entry.last_seq
            if epoch is not None:
                if header.producer_epoch < epoch:
                    raise InvalidProducerEpochError(
                        f"producer {pid} epoch {header.producer_epoch} is older than the current epoch {epoch}"
                    )
                if header.producer_epoch == epoch and last_seq >= 0 and not _in_sequence(last_seq, header.base_sequence):
                    raise OutOfOrderSequenceError(
                        f"producer {pid} epoch {epoch}: sequence {header.base_sequence} does not follow {last_seq}"
                    )
            if pending is None:
                pending = {}
            pending[pid] = (header.producer_epoch, header.last_sequence)
        return None

    def update(self, batches: Sequence[tuple[int, BatchHeader]], offsets: Iterable[tuple[int, int, int, int]],
               now_ms: int) -> None:
        """Record appended batches; ``offsets`` are (pos, base offset, max timestamp, size) per batch."""
        for (_, header), (_, base_offset, max_ts, _) in zip(batches, offsets):
            if _has_sequence(header):
                meta = BatchMetadata(
                    header.base_sequence, header.last_sequence, base_offset, base_offset + header.last_offset_delta, max_ts
                )
                self._record(header.producer_id, header.producer_epoch, meta, now_ms)

    def replay(self, header: BatchHeader, now_ms: int) -> None:
        """Record a batch read back from the log (offsets as stored)."""
        if _has_sequence(header):
            meta = BatchMetadata(
                header.base_sequence, header.last_sequence, header.base_offset, header.last_offset, header.max_timestamp
            )
            self._record(header.producer_id, header.producer_epoch, meta, now_ms)

    def _record(self, pid: int, epoch: int, meta: BatchMetadata, now_ms: int) -> None:
        entry = self.producers.get(pid)
        if entry is None or entry.epoch != epoch:
            entry = self.producers[pid] = ProducerEntry(epoch, now_ms)
        entry.batches.append(meta)
        entry.last_append_ms = now_ms

    def expire(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for ``expiration_ms`` (producer.id.expiration.ms); return how many."""
        idle = [pid for pid, e in self.producers.items() if now_ms - e.last_append_ms >= expiration_ms]
        for pid in idle:
            del self.producers[pid]
        return len(idle)

    # -- snapshots --------------------------------------------------------------------------

    def write_snapshot(self, directory: str, offset: int, *, sync: bool = True) -> str:
        """Write the state as of ``offset`` (exclusive) atomically; its path. Unsynced, a crash
        may leave it empty or gone, which ``load_latest`` passes over for an older one."""
        doc = {
            "version": 1,
            "offset": offset,
            "producers": [
                {"id": pid, "epoch": e.epoch, "last_append_ms": e.last_append_ms, "batches": [list(b) for b in e.batches]}
                for pid, e in self.producers.items()
            ],
        }
        path = snapshot_path(directory, offset)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, separators=(",", ":"))
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
        return path

    @classmethod
    def read_snapshot(cls, path: str) -> ProducerStateManager:
        """Load one snapshot file; ValueError if it is damaged."""
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        if not isinstance(doc, dict) or doc.get("version") != 1:
            raise ValueError(f"{path}: not a version 1 producer snapshot")
        state = cls()
        try:
            for p in doc["producers"]:
                entry = ProducerEntry(int(p["epoch"]), int(p["last_append_ms"]))
                for b in p["batches"]:
                    entry.batches.append(BatchMetadata(*(int(x) for x in b)))
                state.producers[int(p["id"])] = entry
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{path}: malformed producer snapshot ({exc})") from None
        return state

    @classmethod
    def load_latest(cls, directory: str, max_offset: int) -> tuple[ProducerStateManager, int | None]:
        """The newest readable snapshot at or below ``max_offset`` and its offset (None: none)."""
        for offset in reversed(snapshot_offsets(directory)):
            if offset > max_offset:
                continue
            path = snapshot_path(directory, offset)
            try:
                return cls.read_snapshot(path), offset
            except (OSError, ValueError) as exc:
                log.warning("ignoring producer snapshot %s: %s", path, exc)
                unlink_if_present(path)
        return cls(), None


def snapshot_path(directory: str, offset: int) -> str:
    return os.path.join(directory, f"{offset:020d}{SNAPSHOT_SUFFIX}")


def snapshot_offsets(directory: str) -> list[int]:
    """Offsets of the snapshot files in a log directory, ascending."""
    offsets = []
    for name in os.listdir(directory):
        stem = name[: -len(SNAPSHOT_SUFFIX)]
        if name.endswith(SNAPSHOT_SUFFIX) and stem.isdigit():
            offsets.append(int(stem))
    return sorted(offsets)


def delete_snapshots(directory: str, *, below: int | None = None, above: int | None = None) -> None:
    """Remove snapshots with offset < ``below`` or > ``above``."""
    for offset in snapshot_offsets(directory):
        if (below is not None and offset < below) or (above is not None and offset > above):
            unlink_if_present(snapshot_path(directory, offset))
