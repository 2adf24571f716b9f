"""Shared helpers for storage tests: a fake clock, opening logs, reading everything back."""

from __future__ import annotations

import os
from pathlib import Path

from broker.storage import LogConfig, PartitionLog
from tests.storage.batches import values_in


class FakeClock:
    """A settable millisecond clock."""

    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now


def open_log(path: Path | str, clock: FakeClock | None = None, *, clean: bool = True, recovery_point: int = 0, **config) -> PartitionLog:
    return PartitionLog.open(
        str(path), LogConfig(**config), time_ms=clock or FakeClock(), clean=clean, recovery_point=recovery_point
    )


def read_from(log: PartitionLog, offset: int, max_bytes: int = 1 << 20) -> list[tuple[int, bytes]]:
    """Every (offset, value) from ``offset`` to the log end, by repeated reads."""
    out: list[tuple[int, bytes]] = []
    while offset < log.log_end_offset:
        result = log.read(offset, max_bytes)
        assert result.records is not None, f"nothing read at {offset} < {log.log_end_offset}"
        got = [(o, v) for o, v in values_in(result.records.read_bytes()) if o >= offset]
        assert got, f"read at {offset} returned no whole batch"
        out += got
        offset = got[-1][0] + 1
    return out


def segment_files(path: Path | str, suffix: str = ".log") -> list[str]:
    return sorted(n for n in os.listdir(path) if n.endswith(suffix))
